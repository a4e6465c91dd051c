"""Benchmark (c) of issue 7: one commit of 10,000 new files, ours (metastore guard and storage-only guard,
local warehouse) side by side with pypaimon 2.1.0, then a second commit of 10,000 more onto that table.

The table is the shape of ``bench_commit.py`` (``p`` int partition, ``bucket = 2``). Each commit carries
``--files`` hand-built data files (the commit path never reads data files) spread evenly over
``--partitions`` partitions x 2 buckets, as one CommitMessage per (partition, bucket), the way writers
produce them. Timed is the commit call only (messages are built beforehand):

* ours, metastore: ``paimon_meta.connect(url, warehouse).create_table(...)``, then
  ``table.committer_factory(table, user).commit(messages, identifier)``;
* ours, storage-only: ``paimon_meta.open_table(path)`` on a table of the same shape;
* pypaimon 2.1.0 (its own venv, ``.venv-pypaimon``, run as a subprocess): its own writer produces one
  template message per (partition, bucket) once; the template's DataFileMeta is cloned with fresh file names
  up to the same count, committed with ``StreamTableCommit.commit``.

Per side, ``--repeat`` fresh tables, each receiving the first commit (onto an empty table) and the second
(onto the first's 10,000 files: the base manifests exist, the realistic case). Reported: the median per
commit and the ratio ours / pypaimon. Each table is then scanned (untimed) to check it holds 2 x ``--files``
files.

Usage::

    python bench/bench_big_commit.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                     [--files 10000] [--partitions 10] [--repeat 3]
                                     [--no-pypaimon] [--profile]

``--profile`` also runs one first and one second commit through the metastore under cProfile and prints
the top 25 functions of each by cumulative time.

The URL (else ``$PAIMON_META_TEST_DSN``) names a server to create a scratch database on; it is dropped at
the end. The load average is printed before, between the sides and after: the numbers are only comparable
at a similar load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, load, run_pypaimon_script, scratch_database  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.model.commit_message import CommitMessage  # noqa: E402
from paimon_meta.table.table import FileStoreTable  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402

BUCKETS = int(TABLE_OPTIONS["bucket"])
TOP = 25

# argv: warehouse, files, partitions, repeat, Arrow IPC schema (hex), table options (JSON).
PYPAIMON_SCRIPT = r"""
import dataclasses, json, os, sys, time, uuid
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

warehouse, files, partitions, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
arrow_schema = pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(sys.argv[5])))
options = json.loads(sys.argv[6])
catalog = CatalogFactory.create({"warehouse": warehouse})
catalog.create_database("db", True)

def create(name):
    schema = Schema.from_pyarrow_schema(arrow_schema, partition_keys=["p"], options=options)
    catalog.create_table(name, schema, False)
    return catalog.get_table(name)

# One template message per (partition, bucket), from pypaimon's own writer, on a table of its own.
builder = create("db.template").new_stream_write_builder()
writer = builder.new_write()
ks = [k for _ in range(partitions) for k in range(64)]
ps = [p for p in range(partitions) for _ in range(64)]
writer.write_arrow(pa.table({"k": pa.array(ks, pa.int32()), "p": pa.array(ps, pa.int32()),
                             "v": [str(k) for k in ks]}, schema=arrow_schema))
templates = sorted(writer.prepare_commit(0), key=lambda m: (m.partition, m.bucket))
writer.close()
assert len(templates) == partitions * int(options["bucket"]), [(m.partition, m.bucket) for m in templates]

def messages():
    out = []
    for i, template in enumerate(templates):
        count = files // len(templates) + (i < files % len(templates))
        original = template.new_files[0]
        clones = []
        for _ in range(count):
            name = f"data-{uuid.uuid4()}-0.parquet"
            path = os.path.join(os.path.dirname(original.file_path), name) if original.file_path else None
            clones.append(dataclasses.replace(original, file_name=name, file_path=path))
        if clones:
            out.append(dataclasses.replace(template, new_files=clones))
    return out

first, second, planned = [], [], []
for r in range(repeat):
    table = create(f"db.t{r}")
    committer = table.new_stream_write_builder().new_commit()
    for identifier, latencies in enumerate((first, second)):
        batch = messages()
        t0 = time.perf_counter()
        committer.commit(batch, identifier)
        latencies.append((time.perf_counter() - t0) * 1000)
    committer.close()
    fresh = CatalogFactory.create({"warehouse": warehouse}).get_table(f"db.t{r}")
    planned.append(sum(len(s.files) for s in fresh.new_read_builder().new_scan().plan().splits()))
print(json.dumps({"first_ms": first, "second_ms": second, "files_planned": planned}))
"""


def our_messages(files: int, partitions: int) -> list[CommitMessage]:
    """``files`` new data files, as one CommitMessage per (partition, bucket), spread evenly."""
    groups = [(p, b) for p in range(partitions) for b in range(BUCKETS)]
    out = []
    for i, (p, b) in enumerate(groups):
        count = files // len(groups) + (i < files % len(groups))
        if count:
            out.append(append_msg(p, b, *(data_file(rows=100) for _ in range(count)), total_buckets=BUCKETS))
    return out


def planned_files(table: FileStoreTable) -> int:
    return sum(len(s.files) for s in table.new_read_builder().new_scan().plan().splits())


def two_commits(table: FileStoreTable, files: int, partitions: int) -> tuple[float, float]:
    """(first ms, second ms): two commits of ``files`` new files each onto ``table``, fresh and empty."""
    assert table.committer_factory is not None
    committer = table.committer_factory(table, f"bench-{uuid.uuid4().hex[:8]}")
    times = []
    for identifier in range(2):
        messages = our_messages(files, partitions)
        t0 = time.perf_counter()
        committer.commit(messages, identifier)
        times.append((time.perf_counter() - t0) * 1000)
    return times[0], times[1]


def bench_ours(
    new_table: Callable[[int], FileStoreTable],
    reopen: Callable[[int], FileStoreTable],
    args: argparse.Namespace,
) -> dict[str, Any]:
    first, second, planned = [], [], []
    for r in range(args.repeat):
        a, b = two_commits(new_table(r), args.files, args.partitions)
        first.append(a)
        second.append(b)
        planned.append(planned_files(reopen(r)))
    return {"first_ms": first, "second_ms": second, "files_planned": planned}


def bench_metastore(url: str, warehouse: str, args: argparse.Namespace) -> dict[str, Any]:
    with paimon_meta.connect(url, warehouse) as catalog:
        return bench_ours(
            lambda r: catalog.create_table(f"db.t{r}", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS),
            lambda r: catalog.get_table(f"db.t{r}"),
            args,
        )


def bench_storage_only(url: str, warehouse: str, args: argparse.Namespace) -> dict[str, Any]:
    with paimon_meta.connect(url, warehouse) as catalog:  # only to lay the tables out like the others
        paths = [
            catalog.create_table(f"db.s{r}", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS).path
            for r in range(args.repeat)
        ]
    return bench_ours(
        lambda r: paimon_meta.open_table(paths[r]), lambda r: paimon_meta.open_table(paths[r]), args
    )


def bench_pypaimon(warehouse: str, args: argparse.Namespace) -> dict[str, Any]:
    return run_pypaimon_script(
        PYPAIMON_SCRIPT,
        warehouse,
        str(args.files),
        str(args.partitions),
        str(args.repeat),
        SCHEMA.serialize().to_pybytes().hex(),
        json.dumps(TABLE_OPTIONS),
    )


def profile_ours(url: str, warehouse: str, args: argparse.Namespace) -> list[str]:
    """cProfile of one first and one second commit through the metastore: top functions by cumulative time."""
    import cProfile
    import io
    import pstats

    out = []
    with paimon_meta.connect(url, warehouse) as catalog:
        table = catalog.create_table("db.prof", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
        assert table.committer_factory is not None
        committer = table.committer_factory(table, "profiled")
        for identifier, what in enumerate(("first commit (empty table)", "second commit (onto the first)")):
            messages = our_messages(args.files, args.partitions)
            profiler = cProfile.Profile()
            t0 = time.perf_counter()
            profiler.enable()
            committer.commit(messages, identifier)
            profiler.disable()
            took = (time.perf_counter() - t0) * 1000
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(TOP)
            out += [
                f"cProfile, {what} of {args.files} files ({took:.0f} ms under the profiler):",
                text.getvalue(),
            ]
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)


def summary(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = [
        f"one commit of {args.files} files over {args.partitions} partitions x {BUCKETS} buckets, "
        f"local warehouse, median of {args.repeat} fresh tables",
        "| commit | " + " | ".join(results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for key, what in (("first_ms", "first (empty table)"), ("second_ms", "second (onto the first)")):
        lines.append(f"| {what} | " + " | ".join(f"{median(r[key]):.0f} ms" for r in results.values()) + " |")
    py = results.get("pypaimon 2.1.0")
    if py is not None:
        lines.append("")
        for side in ("ours (metastore)", "ours (storage only)"):
            ours = results[side]
            lines.append(
                f"{side} / pypaimon: first {median(ours['first_ms']) / median(py['first_ms']):.2f}x, "
                f"second {median(ours['second_ms']) / median(py['second_ms']):.2f}x"
            )
    wrong = {
        side: r["files_planned"] for side, r in results.items() if set(r["files_planned"]) != {2 * args.files}
    }
    if wrong:
        lines.append(f"WRONG file counts after the two commits (expected {2 * args.files}): {wrong}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-pypaimon", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    if args.files < 1 or args.partitions < 1 or args.repeat < 1:
        parser.error("--files, --partitions and --repeat must be positive")
    print(f"before: {load()}", flush=True)
    results: dict[str, dict[str, Any]] = {}
    with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-big-commit-") as tmp:
        sides: dict[str, Callable[[], dict[str, Any]]] = {
            "ours (metastore)": lambda: bench_metastore(url, str(Path(tmp) / "ours"), args),
            "ours (storage only)": lambda: bench_storage_only(url, str(Path(tmp) / "storage"), args),
        }
        if not args.no_pypaimon:
            sides["pypaimon 2.1.0"] = lambda: bench_pypaimon(str(Path(tmp) / "pypaimon"), args)
        for side, run in sides.items():
            result = run()
            results[side] = result
            print(
                json.dumps(
                    {
                        "side": side,
                        "files": args.files,
                        "partitions": args.partitions,
                        "first_median_ms": round(median(result["first_ms"]), 1),
                        "second_median_ms": round(median(result["second_ms"]), 1),
                        **{k: [round(v, 1) for v in result[k]] for k in ("first_ms", "second_ms")},
                        "files_planned": result["files_planned"],
                        "load_after": os.getloadavg()[0],
                    }
                ),
                flush=True,
            )
        profile = profile_ours(url, str(Path(tmp) / "profiled"), args) if args.profile else []
    print(f"after: {load()}")
    for line in [*summary(results, args), "", *profile]:
        print(line)


if __name__ == "__main__":
    main()
