"""Benchmark of sequential one-file commits: ours (metastore guard and storage-only guard, local warehouse)
side by side with pypaimon 2.1.0, and scan planning after them.

Each side commits ``--commits`` CommitMessages of one hand-built data file each (the commit path never
reads data files) to its own fresh table, one after the other, and records every commit's latency:

* ours, metastore: ``paimon_meta.connect(url, warehouse).create_table(...)``, then
  ``table.committer_factory(table, user).commit([msg], i)``;
* ours, storage-only: ``paimon_meta.open_table(path)`` on a table of the same shape;
* pypaimon 2.1.0 (its own venv, ``.venv-pypaimon``, run as a subprocess): a stream commit of a message
  its own writer produced once, renamed to a fresh file per commit (``StreamTableCommit.commit``).

Reported: the median latency over commits 11-20, 191-200 and 991-1000, and the time to plan a full scan
of the final snapshot with a freshly opened table (cold caches: what a new reader pays) and once more
with the same table object (warm).

Usage::

    python bench/bench_commit.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                 [--commits 1000] [--no-pypaimon] [--profile]

``--profile`` also runs 300 metastore commits under cProfile and prints where commits 101-300 spend their
time (wall time per commit: blocking calls count where they block).

The URL (else ``$PAIMON_META_TEST_DSN``) names a server to create a scratch database on; it is dropped
at the end. The load average is printed before and after: the numbers are only comparable at a similar
load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql
from sqlalchemy import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import paimon_meta  # noqa: E402
from paimon_meta.db.engine import libpq_conninfo  # noqa: E402
from paimon_meta.db.migrate import upgrade  # noqa: E402
from paimon_meta.table.table import FileStoreTable  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)
TABLE_OPTIONS = {"bucket": "2", "bucket-key": "k"}
WINDOWS = ((11, 20), (191, 200), (991, 1000))
PYPAIMON_PYTHON = REPO / ".venv-pypaimon" / "bin" / "python"

PYPAIMON_SCRIPT = r"""
import dataclasses, json, sys, time, uuid
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

warehouse, commits = sys.argv[1], int(sys.argv[2])
catalog = CatalogFactory.create({"warehouse": warehouse})
catalog.create_database("db", True)
schema = Schema.from_pyarrow_schema(
    pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False),
               ("v", pa.string())]),
    partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"})
catalog.create_table("db.t", schema, False)
table = catalog.get_table("db.t")
builder = table.new_stream_write_builder()
writer = builder.new_write()
writer.write_arrow(pa.table({"k": pa.array([1], pa.int32()), "p": pa.array([0], pa.int32()), "v": ["a"]}))
(template,) = writer.prepare_commit(0)
writer.close()
committer = builder.new_commit()
latencies = []
for i in range(commits):
    f = dataclasses.replace(template.new_files[0], file_name=f"data-{uuid.uuid4()}-0.parquet")
    message = dataclasses.replace(template, new_files=[f])
    t0 = time.perf_counter()
    committer.commit([message], i)
    latencies.append((time.perf_counter() - t0) * 1000)
plans = []
fresh = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t")
for _ in range(2):
    t0 = time.perf_counter()
    splits = fresh.new_read_builder().new_scan().plan().splits()
    plans.append((time.perf_counter() - t0) * 1000)
files = sum(len(s.files) for s in splits)
print(json.dumps({"latencies_ms": latencies, "plan_cold_ms": plans[0], "plan_warm_ms": plans[1],
                  "files": files}))
"""


@contextmanager
def scratch_database(server_url: str, *, migrate: bool = True) -> Iterator[str]:
    """A fresh database on the server of ``server_url``, migrated by this checkout (unless ``migrate`` is
    false: then empty, for another revision's code to migrate), dropped afterwards."""
    name = f"paimon_meta_bench_{uuid.uuid4().hex[:12]}"
    admin = libpq_conninfo(server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        if migrate:
            upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cpus)"


def window_median(latencies: Sequence[float], first: int, last: int) -> float | None:
    if len(latencies) < last:
        return None
    return statistics.median(latencies[first - 1 : last])


def run_commits(table: FileStoreTable, commits: int) -> list[float]:
    assert table.committer_factory is not None
    committer = table.committer_factory(table, f"bench-{uuid.uuid4().hex[:8]}")
    latencies = []
    for i in range(commits):
        msg = append_msg(0, 0, data_file(rows=1))
        t0 = time.perf_counter()
        committer.commit([msg], i)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def plan_times(open_table: Callable[[], FileStoreTable]) -> tuple[float, float, int]:
    """(cold ms, warm ms, files): planning a full scan with a fresh table object, then again with it."""
    table = open_table()
    times = []
    files = 0
    for _ in range(2):
        t0 = time.perf_counter()
        splits = table.new_read_builder().new_scan().plan().splits()
        times.append((time.perf_counter() - t0) * 1000)
        files = sum(len(s.files) for s in splits)
    return times[0], times[1], files


def bench_ours(url: str, warehouse: str, commits: int) -> dict[str, Any]:
    with paimon_meta.connect(url, warehouse) as catalog:
        table = catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
        latencies = run_commits(table, commits)
        cold, warm, files = plan_times(lambda: catalog.get_table("db.t"))
    return {"latencies_ms": latencies, "plan_cold_ms": cold, "plan_warm_ms": warm, "files": files}


def profile_ours(url: str, warehouse: str) -> list[str]:
    """cProfile of commits 101-300 through the metastore: the functions with the most wall time."""
    import cProfile
    import io
    import pstats

    with paimon_meta.connect(url, warehouse) as catalog:
        table = catalog.create_table("db.prof", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
        assert table.committer_factory is not None
        committer = table.committer_factory(table, "profiled")
        profiler = cProfile.Profile()
        for i in range(300):
            msg = append_msg(0, 0, data_file(rows=1))
            if i == 100:
                profiler.enable()
            committer.commit([msg], i)
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(
        r"paimon_meta|psycopg|posix|fsync", 40
    )
    return ["cProfile, commits 101-300 (cumulative seconds over 200 commits):", out.getvalue()]


def bench_storage_only(url: str, warehouse: str, commits: int) -> dict[str, Any]:
    with paimon_meta.connect(url, warehouse) as catalog:  # only to lay the table out like the others
        path = catalog.create_table("db.s", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS).path
    latencies = run_commits(paimon_meta.open_table(path), commits)
    cold, warm, files = plan_times(lambda: paimon_meta.open_table(path))
    return {"latencies_ms": latencies, "plan_cold_ms": cold, "plan_warm_ms": warm, "files": files}


def bench_pypaimon(warehouse: str, commits: int) -> dict[str, Any]:
    return run_pypaimon_script(PYPAIMON_SCRIPT, warehouse, str(commits))


def run_pypaimon_script(script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` with ``args`` in the pypaimon venv; its last stdout line, a JSON object."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(script)
    try:
        done = subprocess.run(
            [str(PYPAIMON_PYTHON), f.name, *args],
            check=True,
            capture_output=True,
            text=True,
            cwd=tempfile.gettempdir(),  # never import this repository by accident
        )
    finally:
        os.unlink(f.name)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(results: dict[str, dict[str, Any]], commits: int) -> list[str]:
    lines = ["| commits | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    for first, last in WINDOWS:
        if last > commits:
            continue
        cells = []
        for r in results.values():
            m = window_median(r["latencies_ms"], first, last)
            cells.append("-" if m is None else f"{m:.2f} ms")
        lines.append(f"| median {first}-{last} | " + " | ".join(cells) + " |")
    lines.append(
        "| median all | "
        + " | ".join(f"{statistics.median(r['latencies_ms']):.2f} ms" for r in results.values())
    )
    lines[-1] += " |"
    lines.append("| max | " + " | ".join(f"{max(r['latencies_ms']):.1f} ms" for r in results.values()) + " |")
    lines.append(
        "| plan, fresh table | " + " | ".join(f"{r['plan_cold_ms']:.1f} ms" for r in results.values()) + " |"
    )
    lines.append(
        "| plan, same table again | "
        + " | ".join(f"{r['plan_warm_ms']:.1f} ms" for r in results.values())
        + " |"
    )
    lines.append("| files planned | " + " | ".join(str(r["files"]) for r in results.values()) + " |")
    return lines


def ratios(results: dict[str, dict[str, Any]], commits: int) -> list[str]:
    ours, py = results.get("ours (metastore)"), results.get("pypaimon 2.1.0")
    if ours is None or py is None:
        return []
    out = []
    for first, last in WINDOWS:
        a = window_median(ours["latencies_ms"], first, last)
        b = window_median(py["latencies_ms"], first, last)
        if a is not None and b is not None:
            out.append(f"ours/pypaimon at {first}-{last}: {a / b:.2f}x")
    flat_first, flat_last = (
        window_median(ours["latencies_ms"], 11, 20),
        window_median(ours["latencies_ms"], commits - 9, commits),
    )
    if flat_first and flat_last:
        out.append(f"ours {commits - 9}-{commits} / 11-20: {flat_last / flat_first:.2f}x")
    out.append(f"planning ours/pypaimon (fresh table): {ours['plan_cold_ms'] / py['plan_cold_ms']:.3f}x")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--no-pypaimon", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    print(f"before: {load()}")
    results: dict[str, dict[str, Any]] = {}
    with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-commit-") as tmp:
        results["ours (metastore)"] = bench_ours(url, str(Path(tmp) / "ours"), args.commits)
        print(f"ours (metastore) done: {load()}", flush=True)
        results["ours (storage only)"] = bench_storage_only(url, str(Path(tmp) / "storage"), args.commits)
        print(f"ours (storage only) done: {load()}", flush=True)
        if not args.no_pypaimon:
            results["pypaimon 2.1.0"] = bench_pypaimon(str(Path(tmp) / "pypaimon"), args.commits)
        profile = profile_ours(url, str(Path(tmp) / "profiled")) if args.profile else []
    print(f"after: {load()}")
    print(f"{args.commits} sequential one-file commits, local warehouse")
    for line in [*report(results, args.commits), "", *ratios(results, args.commits), "", *profile]:
        print(line)


if __name__ == "__main__":
    main()
