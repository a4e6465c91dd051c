"""Benchmark: commit latency and throughput through two service replicas before, during and after
metastore restarts (issue 25, "Measure").

The chaos test's harness (``tests/chaos``) at the issue's size: a private PostgreSQL 15 cluster, two
``paimon-meta serve`` replicas on it and one local warehouse, ``--clients`` client threads committing
one real row per commit to ``--tables`` tables (``--commits`` each, spread over the tables) through both
replicas, re-sending an unanswered commit with the same identifier. The cluster is restarted
(``pg_ctl stop -m MODE`` + ``start``) when 20 %, 45 % and 70 % of the commits are acknowledged, with the
modes of ``--modes``.

Reported, from the clients' clocks (a commit's latency: first send to acknowledgement, re-sends
included):

* ``before``: commits acknowledged before the first restart began;
* ``during``: commits in flight at some moment of a restart window (from the stop to 2 s after the
  server accepted again; overlapping windows merged);
* ``between/after``: the rest (after a window, before the next or after the last);

each with p50/p99/max latency and throughput (acknowledgements that arrived in the phase's time per
second of it); plus
each outage's length, the recorded timeline's longest commit wait and lock wait/hold (``tests.chaos.
timeline``) and the clients' failed tries by cause. The run is checked afterwards (every acknowledged
commit exactly once, nothing pending after ``paimon-meta recover``); a failed check aborts it.

Usage::

    python bench/bench_metastore_restarts.py [--clients 12] [--commits 120] [--tables 4]
                                             [--modes immediate,fast,immediate] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import paimon_meta  # noqa: E402
from tests.chaos.cluster import Downtime, PostgresCluster  # noqa: E402
from tests.chaos.load import SCHEMA, TABLE_OPTIONS, Ack, Load  # noqa: E402
from tests.chaos.replicas import Replica  # noqa: E402
from tests.chaos.timeline import exactly_once_problems, read_timeline  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402

SHARES = (0.2, 0.45, 0.7)
SETTLE_SECONDS = 2.0  # a restart window lasts until this long after the server accepts again (the slack)


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _phase(acks: Sequence[Ack], acked_in_phase: int, seconds: float) -> dict[str, Any]:
    """Latencies of ``acks`` (the commits of the phase); throughput: acknowledgements that arrived in
    the phase's time (``acked_in_phase``) per second of it."""
    latencies = [(a.acked_at - a.sent_at) * 1000 for a in acks]
    out: dict[str, Any] = {
        "commits": len(acks),
        "seconds": round(seconds, 2),
        "acks_per_s": round(acked_in_phase / seconds, 1) if seconds > 0 else None,
    }
    if latencies:
        out |= {
            "p50_ms": round(statistics.median(latencies), 1),
            "p99_ms": round(_pct(latencies, 0.99), 1),
            "max_ms": round(max(latencies), 1),
        }
    return out


def phases(
    acks: Sequence[Ack], downtimes: Sequence[Downtime], started: float, ended: float
) -> dict[str, Any]:
    """``before`` the first restart, ``during`` the restart windows (stop .. accepting + SETTLE_SECONDS,
    overlapping ones merged), ``between/after`` them; a commit is in a phase by its latency interval
    (in flight at any moment of a window: ``during``), an acknowledgement by its time."""
    windows: list[tuple[float, float]] = []
    for d in sorted(downtimes, key=lambda d: d.down_at):
        lo, hi = d.down_at, min(d.up_at + SETTLE_SECONDS, ended)
        if windows and lo <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(hi, windows[-1][1]))
        else:
            windows.append((lo, hi))
    first = windows[0][0] if windows else ended

    def in_windows(t: float) -> bool:
        return any(lo <= t <= hi for lo, hi in windows)

    before = [a for a in acks if a.acked_at < first]
    during = [a for a in acks if any(a.sent_at <= hi and a.acked_at >= lo for lo, hi in windows)]
    seen = {id(a) for a in [*before, *during]}
    rest = [a for a in acks if id(a) not in seen]
    window_seconds = sum(hi - lo for lo, hi in windows)
    acked_during = sum(1 for a in acks if in_windows(a.acked_at))
    acked_before = sum(1 for a in acks if a.acked_at < first)
    return {
        "before": _phase(before, acked_before, first - started),
        "during": _phase(during, acked_during, window_seconds),
        "between/after": _phase(
            rest, len(acks) - acked_before - acked_during, ended - first - window_seconds
        ),
        "whole run": _phase(acks, len(acks), ended - started),
    }


def run(clients: int, commits: int, tables: int, modes: Sequence[str], *, keep: bool) -> dict[str, Any]:
    names = [f"chaos.t{n}" for n in range(tables)]
    cluster = PostgresCluster.start_new("chaos")
    scratch = Path(tempfile.mkdtemp(prefix="paimon-meta-bench-restarts-"))
    replicas: list[Replica] = []
    catalog = paimon_meta.connect(cluster.url, str(scratch / "warehouse"))
    try:
        for t in names:
            catalog.create_table(t, SCHEMA, options=TABLE_OPTIONS)
        token = make_principal(catalog, "bench", [("write", "chaos", None)])
        for n in range(2):
            replicas.append(
                Replica(cluster.url, str(scratch / "warehouse"), scratch / f"replica-{n}.log").start()
            )
        load = Load([r.base for r in replicas], token, names, clients=clients, commits=commits)
        load_before = os.getloadavg()
        load.start()
        started = time.time()
        for mode, share in zip(modes, SHARES, strict=False):
            while load.acked < share * load.total and not load.result.errors:
                time.sleep(0.02)
            cluster.restart(mode)
        result = load.join()
        ended = max(a.acked_at for a in result.acks)
        load_after = os.getloadavg()
        if result.errors:
            raise SystemExit(f"clients failed: {result.errors}")
        recover = [sys.executable, "-m", "paimon_meta.cli", "recover", "--older-than", "0s"]
        env = {
            **os.environ,
            "PAIMON_META_URL": cluster.url,
            "PAIMON_META_WAREHOUSE": str(scratch / "warehouse"),
        }
        subprocess.run(recover, env=env, cwd=REPO, check=True, capture_output=True)
        problems = [p for t in names for p in exactly_once_problems(catalog, t, result.acked(t))]
        if problems:
            raise SystemExit("exactly-once check failed:\n" + "\n".join(problems[:20]))
        timeline = read_timeline(catalog, names)
        return {
            "clients": clients,
            "commits_per_client": commits,
            "tables": tables,
            "acknowledged": len(result.acks),
            "outages_s": [(d.mode, round(d.seconds, 3)) for d in cluster.downtimes],
            "outages_at": [(round(d.down_at, 3), round(d.up_at, 3)) for d in cluster.downtimes],
            "phases": phases(result.acks, cluster.downtimes, started, ended),
            "failed_tries_by_cause": dict(result.causes),
            "resent_commits": sum(1 for a in result.acks if a.tries > 1),
            "timeline": timeline.summary(),
            "timeline_problems": timeline.problems(cluster.downtimes, time.time())[:10],
            "replica_warnings": [line for r in replicas for line in r.log_lines("WARNING", "ERROR")][:40],
            "load_before": load_before,
            "load_after": load_after,
        }
    finally:
        catalog.close()
        for r in replicas:
            r.stop()
        cluster.close()
        if keep:
            print(f"kept {scratch} (warehouse, replica logs)", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--commits", type=int, default=120, help="commits per client, spread over the tables")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument(
        "--modes", default="immediate,fast,immediate", help="pg_ctl stop modes, one per restart"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the warehouse and the replicas' logs")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    results = run(args.clients, args.commits, args.tables, modes, keep=args.keep)
    results["command"] = " ".join(["python", *sys.argv])
    text = json.dumps(results, indent=1, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
