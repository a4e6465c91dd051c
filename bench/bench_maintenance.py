"""Benchmark of issue 38: a primary-key table under 8 writers x N one-row commits, maintenance on vs off.

Each side gets a fresh scratch database and warehouse and a primary-key table (``bucket = 2``, Paimon's
default ``num-sorted-run.compaction-trigger`` of 5). ``--writers`` processes each commit ``--commits``
one-row batches (distinct keys) through ``paimon_meta.connect`` (the lock-guarded commit path), timing
every commit. With maintenance on, a separate process runs ``paimon-meta maintain`` (``--maintenance-
workers`` workers, the scheduler fed by the commit log), as a replica would beside the writers.

``--preload N``: before the writers start, N rows (keys above the writers') are written in one commit and
fully compacted: a table with a base, where a full compaction costs what the base costs.

The parent samples every ``--every`` user commits (counted from the commit log): the most files and sorted
runs of any bucket, and a full read of the table (median of 3): its latency and the CPU time of the
reading process (less sensitive than the latency to what else runs on the machine). Side by side, at
each sample: a reference table (the same base) is brought to the same rows and fully compacted, and the
two are read alternately (3 reads each), so the ratio compares reads under the same load; the bench's
work on the reference (a commit and a full compaction per sample) happens while the writers run, on both
sides alike. After the writers end, the table is fully compacted once more and read (median of 3): the
final "fully compacted" read.

Reported per side: commit p50/p99 (ms), the samples, the final compacted read; then the ratios on/off.

Usage::

    python bench/bench_maintenance.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                      [--writers 8] [--commits 2000] [--every 200]
                                      [--maintenance-workers 2] [--tick-seconds 1] [--sides on,off]
                                      [--preload 0] [--maintainer-log PATH]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyarrow import Table as pa_Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402

TABLE = "db.pk"
#: the side-by-side reference: the same rows as TABLE at each sample, fully compacted
REFERENCE = "db.reference"
#: preloaded keys start here (the writers' keys are below it)
PRELOAD_BASE = 10**9
LOCK = {"lock.lease-seconds": "10", "lock.acquire-timeout-seconds": "120"}


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _preload(catalog: Any, rows: int, table_name: str = TABLE) -> None:
    """``rows`` rows in one commit (keys above every writer's), then fully compacted: the table's base."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from paimon_meta.table.compact import compact

    table = catalog.get_table(table_name)
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    keys = pa.array(range(PRELOAD_BASE, PRELOAD_BASE + rows), pa.int64())
    write.write_arrow(pa.table({"k": keys, "v": pc.cast(keys, pa.string())}))
    builder.new_commit().commit(write.prepare_commit())
    compact(catalog.get_table(table_name))


def _writer(url: str, warehouse: str, writer: int, commits: int, out: Any) -> None:
    import pyarrow as pa

    import paimon_meta

    catalog = paimon_meta.connect(url, warehouse, **LOCK)
    latencies = []
    for i in range(commits):
        key = writer * commits + i
        table = catalog.get_table(TABLE)
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.table({"k": pa.array([key], pa.int64()), "v": [f"v{key}"]}))
        messages = write.prepare_commit()
        t0 = time.perf_counter()
        builder.new_commit().commit(messages)
        latencies.append((time.perf_counter() - t0) * 1000)
    catalog.close()
    out.put(latencies)


def _user_commits(catalog: Any) -> int:
    from sqlalchemy import text

    with catalog.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM paimon_commit_events WHERE event_type = 'snapshot_published' "
                    "AND commit_user NOT LIKE 'paimon-meta-maintenance-%' AND table_identifier = :t"
                ),
                {"t": TABLE},
            ).scalar_one()
        )


def _wait_for_cursor(catalog: Any, timeout: float = 120.0) -> None:
    from sqlalchemy import text

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with catalog.engine.connect() as conn:
            if conn.execute(text("SELECT 1 FROM paimon_maintenance_cursors")).first() is not None:
                return
        time.sleep(0.2)
    raise RuntimeError("the maintainer did not start")


def _read_once(table: Any) -> tuple[pa_Table, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return rows, (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def _sync_reference(catalog: Any, rows: Any, written: set[int]) -> None:
    """The reference table (``REFERENCE``: the same base) made to hold ``rows`` (the maintained table's,
    just read) and fully compacted: the writers' keys not in it yet, in one commit, then a full
    compaction (the writers only add keys, so adding the new ones is enough)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from paimon_meta.table.compact import compact

    keys = rows.column("k")
    new = pc.and_(
        pc.less(keys, PRELOAD_BASE), pc.invert(pc.is_in(keys, pa.array(sorted(written), pa.int64())))
    )
    delta = rows.filter(new)
    if delta.num_rows:
        table = catalog.get_table(REFERENCE)
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(delta)
        builder.new_commit().commit(write.prepare_commit())
        written.update(delta.column("k").to_pylist())
    compact(catalog.get_table(REFERENCE))


def _sample(catalog: Any, reference: set[int] | None = None) -> dict[str, Any]:
    """The worst bucket's files and sorted runs, and a full read (median of 3). With ``reference`` (the
    keys the reference table holds), the reference table is first brought to the same rows and fully
    compacted, then both tables are read alternately (3 reads each) under the same load: the ratio
    compares like with like."""
    from paimon_meta.maintenance.debt import bucket_files

    table = catalog.get_table(TABLE)
    buckets = bucket_files(table)
    rows, _, _ = _read_once(table)
    ref_table = None
    if reference is not None:
        _sync_reference(catalog, rows, reference)
        ref_table = catalog.get_table(REFERENCE)
    reads, cpu, ref_reads, ref_cpu = [], [], [], []
    for _ in range(3):
        out, ms, cpu_ms = _read_once(table)
        reads.append(ms)
        cpu.append(cpu_ms)
        if ref_table is not None:
            _, ms, cpu_ms = _read_once(ref_table)
            ref_reads.append(ms)
            ref_cpu.append(cpu_ms)
    sample = {
        "files_per_bucket": max((b.files for b in buckets), default=0),
        "sorted_runs": max((b.sorted_runs for b in buckets), default=0),
        "read_ms": round(statistics.median(reads), 1),
        "read_cpu_ms": round(statistics.median(cpu), 1),
        "rows": out.num_rows,
    }
    if ref_table is not None:
        sample["compacted_read_ms"] = round(statistics.median(ref_reads), 1)
        sample["compacted_read_cpu_ms"] = round(statistics.median(ref_cpu), 1)
    return sample


def _maintenance_runs(catalog: Any) -> dict[str, Any]:
    """The maintenance runs of the side, from the maintenance log: per kind and outcome, how many, their
    total and median duration, and (compaction) commits made and files merged."""
    from sqlalchemy import text

    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT payload FROM paimon_maintenance_events WHERE operation = 'maintain' "
                "AND event_type <> 'started'"
            )
        ).scalars()
        out: dict[str, Any] = {}
        for p in rows:
            key = f"{p.get('kind')}.{p.get('outcome')}"
            entry = out.setdefault(key, {"runs": 0, "ms": [], "commits": 0, "files_merged": 0})
            entry["runs"] += 1
            entry["ms"].append(float(p.get("duration_ms") or 0))
            entry["commits"] += len(p.get("snapshot_ids") or [])
            entry["files_merged"] += int(p.get("compacted_files") or 0)
    for entry in out.values():
        ms = entry.pop("ms")
        entry["total_s"] = round(sum(ms) / 1000, 1)
        entry["median_ms"] = round(statistics.median(ms), 1)
    return out


def _side(server: str, args: argparse.Namespace, maintenance: bool) -> dict[str, Any]:
    import paimon_meta
    from paimon_meta.table.compact import compact

    with scratch_database(server) as url, tempfile.TemporaryDirectory() as warehouse:
        catalog = paimon_meta.connect(url, warehouse, **LOCK)
        catalog.create_table(TABLE, _schema(), primary_keys=["k"], options={"bucket": "2"})
        # maintenance off for the reference: it is compacted by the bench only
        catalog.create_table(
            REFERENCE,
            _schema(),
            primary_keys=["k"],
            options={"bucket": "2", "paimon-meta.maintenance.enabled": "false"},
        )
        if args.preload:
            _preload(catalog, args.preload)
            _preload(catalog, args.preload, REFERENCE)
        reference: set[int] = set()
        maintainer = None
        if maintenance:
            maintainer = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "paimon_meta.cli",
                    "--metastore",
                    url,
                    "--warehouse",
                    warehouse,
                    *[f"-o{k}={v}" for k, v in LOCK.items()],
                    "maintain",
                    "--workers",
                    str(args.maintenance_workers),
                    "--poll-seconds",
                    "0.2",
                    "--tick-seconds",
                    str(args.tick_seconds),
                ],
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=open(args.maintainer_log, "ab") if args.maintainer_log else subprocess.DEVNULL,  # noqa: SIM115
            )
            # started writers wait for nobody: let the maintainer come up first (its first tick)
            _wait_for_cursor(catalog)
        queue: Any = multiprocessing.Queue()
        procs = [
            multiprocessing.Process(target=_writer, args=(url, warehouse, w, args.commits, queue))
            for w in range(args.writers)
        ]
        started = time.perf_counter()
        for p in procs:
            p.start()
        total = args.writers * args.commits
        samples = []
        next_mark = args.every
        while next_mark <= total:
            done = _user_commits(catalog)
            if done >= next_mark:
                samples.append({"commits": done, **_sample(catalog, reference)})
                next_mark += args.every
            else:
                time.sleep(0.2)
        latencies = [x for _ in procs for x in queue.get()]
        for p in procs:
            p.join()
        wall = time.perf_counter() - started
        if maintainer is not None:
            maintainer.terminate()
            maintainer.wait(60)
        final = _sample(catalog)
        runs = _maintenance_runs(catalog)
        compact(catalog.get_table(TABLE))
        compacted = _sample(catalog)
        catalog.close()
    latencies.sort()
    return {
        "maintenance": maintenance,
        "commits": len(latencies),
        "wall_s": round(wall, 1),
        "commit_p50_ms": round(statistics.median(latencies), 1),
        "commit_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 1),
        "samples": samples,
        "final": final,
        "fully_compacted": compacted,
        "maintenance_runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--commits", type=int, default=2000, help="per writer")
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--maintenance-workers", type=int, default=2)
    parser.add_argument("--tick-seconds", type=float, default=1.0, help="the maintainer's scheduler tick")
    parser.add_argument("--sides", default="on,off")
    parser.add_argument("--maintainer-log", help="append the maintainer's stderr to this file")
    parser.add_argument(
        "--preload", type=int, default=0, help="rows written and fully compacted before the writers start"
    )
    args = parser.parse_args()
    if not args.url:
        parser.error("--url or $PAIMON_META_TEST_DSN")
    results = []
    for side in args.sides.split(","):
        print(f"# maintenance {side}: {load()}", file=sys.stderr, flush=True)
        result = _side(args.url, args, side == "on")
        print(json.dumps(result), flush=True)
        results.append(result)
    print(f"# after: {load()}", file=sys.stderr, flush=True)
    for r in results:
        print(
            f"maintenance {'on ' if r['maintenance'] else 'off'}: {r['commits']} commits in {r['wall_s']} s, "
            f"commit p50 {r['commit_p50_ms']} ms p99 {r['commit_p99_ms']} ms; fully compacted read "
            f"{r['fully_compacted']['read_ms']} ms"
        )
        for key, entry in sorted(r["maintenance_runs"].items()):
            print(f"  runs {key}: {entry}")
        for s in r["samples"]:
            ratio = s["read_ms"] / r["fully_compacted"]["read_ms"]
            cpu_ratio = s["read_cpu_ms"] / r["fully_compacted"]["read_cpu_ms"]
            side = ""
            if "compacted_read_ms" in s:
                side = (
                    f"; side by side: compacted {s['compacted_read_ms']} ms "
                    f"({s['read_ms'] / s['compacted_read_ms']:.2f}x), CPU {s['compacted_read_cpu_ms']} ms "
                    f"({s['read_cpu_ms'] / s['compacted_read_cpu_ms']:.2f}x)"
                )
            print(
                f"  {s['commits']:>6} commits: files/bucket {s['files_per_bucket']:>5}, sorted runs "
                f"{s['sorted_runs']:>5}, read {s['read_ms']:>8} ms ({ratio:.2f}x final compacted), read CPU "
                f"{s['read_cpu_ms']:>8} ms ({cpu_ratio:.2f}x){side}"
            )


if __name__ == "__main__":
    main()
