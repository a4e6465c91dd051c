"""Storage faults on every call of a commit: the k-th PUT (``write``/``create_if_absent``), GET, LIST,
HEAD fails before or after taking effect, once or from then on. Every outcome must be resolved: the
commit returns and is present once, or raises a typed error and a retry with the same identifier ends
with exactly one snapshot per kind; the table stays readable; the event log matches storage at the end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.errors import CommitConflictError, PaimonMetaError
from paimon_meta.io.faults import OPS
from tests.commit.helpers import compact_msg, data_file
from tests.torture.checker import check_table
from tests.torture.inproc import FaultBench, chain_file, chain_live_files
from tests.torture.workload import TABLE

pytestmark = [pytest.mark.postgres]

# Operations a commit performs, and those that change storage (these also fail "after the effect").
COMMIT_OPS = ("read", "write", "create_if_absent", "exists", "list")
EFFECT_OPS = ("write", "create_if_absent")


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def bench(request: pytest.FixtureRequest, clean_db: str, tmp_path: Path) -> Iterator[FaultBench]:
    if request.param == "s3":
        warehouse, options = request.getfixturevalue("s3_warehouse")
    else:
        warehouse, options = str(tmp_path / "warehouse"), {}
    catalog = paimon_meta.connect(clean_db, warehouse, **options)
    try:
        yield FaultBench(catalog, warehouse, options)
    finally:
        catalog.close()


def _calls_per_commit(bench: FaultBench) -> Counter[str]:
    """How often one (APPEND + COMPACT) commit calls each operation, from a clean commit."""
    before = Counter({op: bench.fio.calls(op) for op in OPS})
    bench.run_case("measure")
    return Counter({op: bench.fio.calls(op) - before[op] for op in OPS})


def _finish(bench: FaultBench) -> None:
    fired = [o for o in bench.outcomes if o.fired]
    print(
        f"{len(bench.outcomes)} commits, {len(fired)} with a fault that fired: "
        f"{sum(o.error is None for o in fired)} succeeded anyway, "
        f"{sum(o.error is not None for o in fired)} raised ({sum(o.unknown for o in fired)} unknown "
        f"outcome), {sum(bool(o.retried_dedup) for o in fired)} retries found the commit already landed"
    )
    result = check_table(bench.catalog, TABLE)
    bench.violations += result.violations
    live = result.state.live_files
    want = chain_live_files(bench.next_identifier)
    if live != want:
        bench.violations.append(f"live files {sorted(live ^ want)[:10]} differ from the committed history")
    assert not bench.violations, "\n".join(bench.violations)


def test_kth_call_fails_once(bench: FaultBench) -> None:
    """The k-th call of each operation fails once (before, and for PUTs also after, taking effect)."""
    bench.run_case("first")
    calls = _calls_per_commit(bench)
    fired = 0
    for op in COMMIT_OPS:
        for k in range(1, calls[op] + 3):
            for after in (False, True) if op in EFFECT_OPS else (False,):
                rule = bench.fio.fail_nth(op, k, after_write=after)
                outcome = bench.run_case(f"{op}#{k}{' after write' if after else ''}", [rule])
                fired += outcome.fired
    assert fired > 0
    _finish(bench)


def test_kth_call_fails_from_then_on(bench: FaultBench) -> None:
    """From the k-th call on, every call of an operation fails: the commit must give up with a typed
    error, and the retry resolves it."""
    bench.run_case("first")
    calls = _calls_per_commit(bench)
    for op in ("read", "create_if_absent", "exists", "list"):
        for k in range(1, calls[op] + 2):
            rule = bench.fio.fail_always(op) if k == 1 else bench.fio.fail_nth(op, k, times=None)
            outcome = bench.run_case(f"{op} from #{k}", [rule])
            if outcome.fired and outcome.error is None and op == "create_if_absent":
                bench.violations.append(f"[{op} from #{k}] succeeded although every create failed")
    _finish(bench)


@pytest.mark.parametrize("nth_snapshot", [1, 2])
def test_snapshot_landed_but_unknown(bench: FaultBench, nth_snapshot: int) -> None:
    """The snapshot PUT takes effect but its response is lost, and reading it back fails too: the
    outcome is unknown (CommitOutcomeUnknownError, nothing cleaned up); the retry deduplicates."""
    bench.run_case("first")
    for _ in range(3):
        bench.refresh()
        target = max(sid for sids in bench.seen.values() for sid in sids) + nth_snapshot
        create = bench.fio.fail_nth(
            "create_if_absent", 1, path_contains=f"/snapshot/snapshot-{target}", after_write=True
        )
        bench.fio.fail_always("read", path_contains=f"/snapshot/snapshot-{target}")
        outcome = bench.run_case(f"snapshot {target} landed, unknown", [create])
        assert outcome.unknown and outcome.retried_dedup is True, outcome
    _finish(bench)


def test_snapshot_create_always_fails_before_effect(bench: FaultBench) -> None:
    bench.run_case("first")
    for nth in (1, 2):
        rule = bench.fio.fail_nth("create_if_absent", nth, path_contains="snapshot-", times=None)
        outcome = bench.run_case(f"snapshot {nth} never lands", [rule])
        assert outcome.unknown, outcome
    _finish(bench)


def test_conflict_with_failing_cleanup_is_still_a_conflict(bench: FaultBench) -> None:
    """A definite failure whose cleanup deletes fail is still CommitConflictError, and nothing lands."""
    bench.run_case("first")
    bench.run_case("second")  # compacts chain file 0
    bench.fio.fail_always("delete")
    committer = bench.committer("fault-conflict")
    stale = compact_msg(
        0, 0, [data_file(name=chain_file(0))], [data_file(name="data-stale-compaction.parquet", level=1)]
    )
    with pytest.raises(CommitConflictError):
        committer.commit([stale], 1)
    bench.fio.clear()
    bench.refresh()
    assert not [k for k in bench.seen if k[0] == "fault-conflict"]
    _finish(bench)


def test_errors_are_typed_for_every_operation_failing_everywhere(bench: FaultBench) -> None:
    """Every operation failing always (the store is down): commit raises a PaimonMetaError."""
    bench.run_case("first")
    for op in OPS:
        bench.fio.fail_always(op)
        try:
            bench.commit_clean(bench.next_identifier)
        except PaimonMetaError:
            pass
        except Exception as e:
            bench.violations.append(f"[{op} down] untyped {type(e).__name__}: {e}")
        bench.fio.clear()
        bench.run_case(f"after {op} was down")
    _finish(bench)
