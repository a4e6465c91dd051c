"""Benchmark of the control plane (``POST .../commit-messages``): many clients committing to one table
through the service, with and without group commit, against the library's own contention, side by side.

Every run of a mode commits on its own table of one scratch database and one local warehouse; the modes
run ``--rounds`` times, the order rotated each round (no mode always first, at the lowest load), and the
report gives each mode's median round:

* ``library, W writers``: ``--library-writers`` processes, each its own ``paimon_meta.connect`` (the
  in-process commit path, each writer its own lock holder: ``bench/bench_contention.py``'s setup);
* ``library, C writers``: the same with ``--clients`` processes (as many clients as the service modes);
* ``service, 1 replica, no grouping``: ``--clients`` client processes, each a ``connect_service`` client,
  one ``paimon-meta serve`` replica with ``--group-max-commits 1`` (every request its own lock hold);
* ``service, 1 replica``: the same with group commit (the default bounds);
* ``service, 2 replicas``: two replicas with group commit, the clients spread round-robin.

Each client commits ``--commits`` one-file CommitMessages (hand-built metadata, as the contention
benchmark: the commit path never reads data files) under its own commit user, one after the other, and
measures each commit's latency; all start together. Reported: commits/s from the common start to the
last acknowledgement, p50/p99 latency, lock holds (``acquired`` events) and commits per hold; and each
mode is checked afterwards: every acknowledged commit exactly once, snapshots contiguous, the log
consistent with storage (``tests.integration.history.check_exactly_once``; a failure aborts the run).

Then the uncontended added latency: ``--sequential`` commits one after the other on a fresh table, in
process (``MetastoreCatalog.message_committer(...).commit``)
and through one replica (``RemoteCommitter``, what
``paimon_meta.connect("http://...")`` commits with), alternating in blocks of 10 so load drifts hit both
sides alike; medians and their ratio.

Usage::

    python bench/bench_service.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                  [--clients 16] [--commits 50] [--library-writers 8]
                                  [--sequential 300] [--json PATH]

The URL (else ``$PAIMON_META_TEST_DSN``) names a server to create a scratch database on (dropped at the
end). The load average is printed with every mode: compare numbers of one run only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, load, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.metastore import MetastoreCatalog  # noqa: E402
from paimon_meta.catalog.rest import connect_service  # noqa: E402
from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.metastore.principals import Principals  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402
from tests.integration.history import check_exactly_once, read_history  # noqa: E402

ctx = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Target:
    """Where a client commits: the metastore URL + warehouse (library) or a service URI + token."""

    table: str
    commits: int
    url: str | None = None
    warehouse: str | None = None
    service: str | None = None
    token: str | None = None


def _client(target: Target, user: str, start: Event, out: Queue[Any]) -> None:
    if target.service is not None:
        assert target.token is not None
        remote = connect_service(target.service, target.token)
        committer: Any = remote.get_table(target.table)
        assert committer.committer_factory is not None
        committer = committer.committer_factory(committer, user)
        close = remote.close
    else:
        assert target.url is not None and target.warehouse is not None
        catalog = paimon_meta.connect(target.url, target.warehouse)
        committer = catalog.message_committer(target.table, user)
        close = catalog.close
    try:
        messages = [append_msg(i % 2, i % 2, data_file(rows=1)) for i in range(target.commits)]
        out.put(("ready", user))
        start.wait(300)
        acked: dict[tuple[str, int], str] = {}
        latencies: list[float] = []
        for i, msg in enumerate(messages):
            t0 = time.perf_counter()
            committer.commit([msg], i)
            latencies.append((time.perf_counter() - t0) * 1000)
            acked[(user, i)] = msg.data_increment.new_files[0].file_name
        out.put(("done", user, acked, latencies, time.time()))
    except BaseException as e:
        out.put(("error", user, repr(e)))
        raise
    finally:
        close()


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def verify_round(catalog: MetastoreCatalog, table: str, acked: dict[tuple[str, int], str]) -> int:
    """``table`` holds every acknowledged commit exactly once (raises if not); the lock holds it took."""
    check_exactly_once(read_history(catalog, table), acked)  # raises if anything was lost or duplicated
    db, name = table.split(".")
    with catalog.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM paimon_lock_events WHERE lock_id = :l AND event_type = 'acquired'"
                ),
                {"l": catalog.registry.lock_id(db, name)},
            ).scalar_one()
        )


def run_clients(
    catalog: MetastoreCatalog | None,
    targets: Sequence[Target],
    label: str,
    verify: Callable[[str, dict[tuple[str, int], str]], int] | None = None,
) -> dict[str, Any]:
    """One process per target, started together; checked for exactly-once afterwards, by ``verify`` if
    given (table, acknowledged commits -> lock holds; e.g. through another revision's code), else
    :func:`verify_round` with ``catalog``."""
    table = targets[0].table
    out: Queue[Any] = ctx.Queue()
    start = ctx.Event()
    procs = [
        ctx.Process(target=_client, args=(t, f"c{i}", start, out), daemon=True) for i, t in enumerate(targets)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        message = out.get(timeout=300)
        if message[0] != "ready":
            raise RuntimeError(f"{label}: client failed to start: {message}")
    load_at_start = os.getloadavg()
    t_start = time.time()
    start.set()
    results = [out.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join(60)
    failed = [r for r in results if r[0] != "done"]
    if failed:
        raise RuntimeError(f"{label}: clients failed: {failed}")
    wall = max(r[4] for r in results) - t_start
    acked: dict[tuple[str, int], str] = {}
    latencies: list[float] = []
    for r in results:
        acked.update(r[2])
        latencies.extend(r[3])
    if verify is None:
        assert catalog is not None, "run_clients needs a catalog or a verify function"
        holds = verify_round(catalog, table, acked)
    else:
        holds = verify(table, acked)
    result = {
        "label": label,
        "clients": len(targets),
        "commits": len(acked),
        "wall_s": wall,
        "rate": len(acked) / wall,
        "p50_ms": statistics.median(latencies),
        "p99_ms": _pct(latencies, 0.99),
        "max_ms": max(latencies),
        "lock_holds": int(holds),
        "load_at_start": load_at_start,
        "load_at_end": os.getloadavg(),
    }
    print(
        f"{label}: {result['rate']:.1f} commits/s, p50 {result['p50_ms']:.1f} ms, "
        f"p99 {result['p99_ms']:.1f} ms, {holds} lock holds ({load()})",
        flush=True,
    )
    return result


def sequential(catalog: MetastoreCatalog, service: str, token: str, commits: int) -> dict[str, list[float]]:
    """In-process vs through the service, alternating blocks of 10 commits, each side its own table."""
    for name in ("db.seq_local", "db.seq_http"):
        catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    local = catalog.message_committer("db.seq_local", "seq")
    remote = connect_service(service, token)
    table = remote.get_table("db.seq_http")
    assert table.committer_factory is not None
    http = table.committer_factory(table, "seq")
    sides: dict[str, Any] = {"in-process": local, "service": http}
    times: dict[str, list[float]] = {k: [] for k in sides}
    try:
        for block in range(0, commits, 10):
            for side, committer in sides.items():
                for i in range(block, min(block + 10, commits)):
                    msg = append_msg(i % 2, i % 2, data_file(rows=1))
                    t0 = time.perf_counter()
                    committer.commit([msg], i)
                    times[side].append((time.perf_counter() - t0) * 1000)
    finally:
        remote.close()
    return times


def report(modes: Sequence[dict[str, Any]], seq: dict[str, list[float]], baseline: str) -> list[str]:
    base = next(m for m in modes if m["label"] == baseline)
    lines = [
        "| mode | clients | commits/s (median; each round) | vs " + baseline + " | p50 / p99 latency "
        "| lock holds (commits per hold) | load at start |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in modes:
        lines.append(
            f"| {m['label']} | {m['clients']} | {m['rate']:.1f} ({', '.join(map(str, m['rates']))}) | "
            f"{m['rate'] / base['rate']:.2f}x | {m['p50_ms']:.1f} / {m['p99_ms']:.1f} ms | "
            f"{m['lock_holds']:.0f} ({m['commits'] / max(1, m['lock_holds']):.1f}) | "
            f"{m['load_at_start'][0]:.1f}-{m['load_at_start'][1]:.1f} |"
        )
    lines.append("")
    skip = min(10, len(seq["in-process"]) // 10)  # warm-up
    local, http = seq["in-process"][skip:], seq["service"][skip:]
    lines += [
        "| uncontended commit | median | p90 |",
        "|---|---|---|",
        f"| in-process `commit()` | {statistics.median(local):.2f} ms | {_pct(local, 0.9):.2f} ms |",
        f"| through the service (`RemoteCommitter`) | {statistics.median(http):.2f} ms | "
        f"{_pct(http, 0.9):.2f} ms |",
        f"| **service / in-process** | **{statistics.median(http) / statistics.median(local):.2f}x** "
        f"(+{statistics.median(http) - statistics.median(local):.2f} ms) | |",
        "",
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--commits", type=int, default=50, help="commits per client")
    parser.add_argument("--library-writers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="every mode this often, the order rotated")
    parser.add_argument("--sequential", type=int, default=300, help="commits per side, uncontended")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    if min(args.clients, args.commits, args.library_writers, args.sequential, args.rounds) < 1:
        parser.error("--clients, --commits, --library-writers, --rounds and --sequential must be >= 1")
    print(f"before: {load()}", flush=True)
    runs: list[dict[str, Any]] = []
    with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-service-") as tmp_name:
        tmp = Path(tmp_name)
        warehouse = str(tmp / "warehouse")
        with (
            paimon_meta.connect(url, warehouse) as catalog,
            servers(url, warehouse, tmp, 1, extra=("--group-max-commits", "1")) as (ungrouped,),
            servers(url, warehouse, tmp, 2) as replicas,
        ):
            principals = Principals(catalog.engine)
            token = principals.create("bench", created_by="bench")
            principals.grant("bench", Privilege.WRITE)
            tables = iter(range(1_000_000))

            def table() -> str:
                name = f"db.t{next(tables)}"
                catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
                return name

            def library(writers: int) -> list[Target]:
                t = table()
                return [Target(t, args.commits, url=url, warehouse=warehouse) for _ in range(writers)]

            def service(uris: Sequence[str]) -> list[Target]:
                t = table()
                return [
                    Target(t, args.commits, service=uris[i % len(uris)], token=token)
                    for i in range(args.clients)
                ]

            modes: dict[str, Any] = {
                f"library, {w} writers": (lambda w=w: library(w))
                for w in dict.fromkeys((args.library_writers, args.clients))
            }
            modes["service, 1 replica, no grouping"] = lambda: service([ungrouped.uri])
            modes["service, 1 replica"] = lambda: service([replicas[0].uri])
            modes["service, 2 replicas"] = lambda: service([r.uri for r in replicas])
            names = list(modes)
            for r in range(args.rounds):
                # Rotated, so that no mode always runs first (at the lowest load) or last.
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    runs.append(run_clients(catalog, modes[name](), name))
            seq = sequential(catalog, replicas[0].uri, token, args.sequential)
            print(f"sequential done: {load()}", flush=True)
    baseline = f"library, {args.library_writers} writers"
    lines = report(summarise(runs), seq, baseline)
    print(f"after: {load()}")
    print("\n".join(lines))
    out = {"runs": runs, "sequential": seq, "baseline": baseline}
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1))
    return out


def summarise(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per mode: the median of its rounds' rates, latencies and lock holds."""
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_mode.setdefault(run["label"], []).append(run)
    out = []
    for label, group in by_mode.items():
        out.append(
            {
                "label": label,
                "clients": group[0]["clients"],
                "commits": group[0]["commits"],
                "rate": statistics.median(g["rate"] for g in group),
                "rates": [round(g["rate"], 1) for g in group],
                "p50_ms": statistics.median(g["p50_ms"] for g in group),
                "p99_ms": statistics.median(g["p99_ms"] for g in group),
                "lock_holds": statistics.median(g["lock_holds"] for g in group),
                "load_at_start": [
                    min(g["load_at_start"][0] for g in group),
                    max(g["load_at_start"][0] for g in group),
                ],
            }
        )
    return out


if __name__ == "__main__":
    main()
