"""Benchmark: the per-request authorization cost in Paimon's permission model vs the legacy check
(issue 36, phase B step 4).

Every route's check is one (resource, access) decided by ``governance.evaluate.decide`` on the caller's
assignments (``Access.decide``); before, it was ``Access.allows`` over the grants (privilege levels over
scopes). Both are in-process (the metastore is asked once per token per ``auth_cache_seconds``, not per
check: ``bench/bench_auth.py`` measures that). Measured here, for a subject holding ``N`` table-level
rights (``N`` read grants on distinct tables for the legacy check, ``N`` ``TABLE SELECT`` assignments
for ``decide``):

* ``hit``: the right that allows is the last one held (the whole list is read either way: ``decide``
  collects every assignment that gives, for ``Decision.because``);
* ``miss``: nothing allows (a 403);
* ``Access built``: what authenticating adds once per token per ``auth_cache_seconds`` (the access and
  its index of assignments by the resource they name);
* ``request``: what ``Require`` does per request: narrow to the request's catalog (``in_catalog``,
  kept on the cached access), locate the resource from the path parameters, decide on the assignments
  that may reach it (``Access.reaching``).

``decide, hit/miss`` call ``governance.evaluate.decide`` on every assignment (linear: what a caller
without the index would pay).

Each case runs ``--calls`` times in batches of ``--batch``; reported: p50 / p99 of the per-call time
of the batches, in microseconds.

Usage::

    python bench/bench_decide.py [--sizes 10,1000] [--calls 20000] [--batch 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.governance.evaluate import Subject, decide  # noqa: E402
from paimon_meta.governance.permissions import Access as A  # noqa: E402
from paimon_meta.governance.permissions import Assignment, Resource, ResourceType  # noqa: E402
from paimon_meta.metastore.principals import Access, GrantRow, Held, Scope  # noqa: E402
from paimon_meta.service.auth import locate  # noqa: E402

_RANK = {Privilege.READ: 1, Privilege.WRITE: 2, Privilege.ADMIN: 3}


def legacy_allows(grants: tuple[GrantRow, ...], privilege: Privilege, database: str, table: str) -> bool:
    """``Access.allows`` as it was before the checks moved onto Paimon's model."""
    need = _RANK[privilege]
    return any(_RANK[g.privilege] >= need and g.scope.covers(database, table) for g in grants)


def timed(fn: Callable[[], object], calls: int, batch: int) -> tuple[float, float]:
    """p50 and p99 (microseconds per call) over batches of ``batch`` calls."""
    for _ in range(min(calls, 1000)):
        fn()
    per_call: list[float] = []
    for _ in range(max(1, calls // batch)):
        start = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        per_call.append((time.perf_counter_ns() - start) / batch / 1000)
    per_call.sort()
    return statistics.median(per_call), per_call[min(len(per_call) - 1, int(len(per_call) * 0.99))]


def run(n: int, calls: int, batch: int, now: datetime) -> None:
    """Every case for a subject holding ``n`` table-level rights."""
    tables = [f"t{i}" for i in range(n)]
    grants = tuple(GrantRow(Privilege.READ, Scope("db", t)) for t in tables)
    assignments = tuple(Assignment("alice", Resource.table("db", t), A.SELECT) for t in tables)
    subject = Subject("alice")
    access = Access("alice", grants, held=tuple(Held(None, a) for a in assignments))
    last, absent = tables[-1], "nope"
    params = {"database": "db", "table": last}
    assert legacy_allows(grants, Privilege.READ, "db", last)
    assert decide(assignments, subject, Resource.table("db", last), A.SELECT, at=now).allowed
    cases: list[tuple[str, Callable[[], object]]] = [
        ("legacy allows, hit", lambda: legacy_allows(grants, Privilege.READ, "db", last)),
        ("legacy allows, miss", lambda: legacy_allows(grants, Privilege.READ, "db", absent)),
        ("decide, hit", lambda: decide(assignments, subject, Resource.table("db", last), A.SELECT, at=now)),
        (
            "decide, miss",
            lambda: decide(assignments, subject, Resource.table("db", absent), A.SELECT, at=now),
        ),
        (
            "Access built (once per token/cache)",
            lambda: Access("alice", grants, held=tuple(Held(None, a) for a in assignments)),
        ),
        (
            "request (in_catalog+locate+decide)",
            lambda: access.in_catalog("k", default=True).decide(
                locate(ResourceType.TABLE, params), A.SELECT, at=now
            ),
        ),
    ]
    for label, fn in cases:
        p50, p99 = timed(fn, calls if n <= 100 else max(batch * 20, calls // 20), batch)
        print(f"{label:<36} {n:>6} {p50:>9.2f} {p99:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,1000")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    now = datetime.now(UTC)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'case':<36} {'N':>6} {'p50 us':>9} {'p99 us':>9}")
    for n in (int(x) for x in args.sizes.split(",")):
        run(n, args.calls, args.batch, now)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
