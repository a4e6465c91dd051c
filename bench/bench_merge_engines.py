"""Merge-on-read throughput of each merge engine next to deduplicate: rows/s of a full batch read.

One table per engine, ``id BIGINT`` primary key, ``qty BIGINT, price DOUBLE, name STRING, flag BOOLEAN``,
``--buckets`` buckets, on local disk. ``--rows`` rows arrive in ``--commits`` commits of equal size whose
ids are drawn from ``--keys`` distinct keys (by default half as many keys as rows, so most keys have
rows in several commits and a read merges them). The engines:

* ``deduplicate``;
* ``partial-update`` (every field: its last non-null value; a fifth of the values are null);
* ``aggregation`` (qty ``sum``, price ``max``, name ``last_non_null_value``, flag ``bool_or``);
* ``aggregation-listagg`` (name ``listagg``, the rest as above);
* ``first-row``: each commit's new keys are moved above level 0 by the writer (lookup compaction), so a
  read concatenates files without merging, as Java reads such tables.

Per engine: the write time of all commits, then the best of ``--repeat`` full reads of the latest
snapshot (plan + read), as rows in the files read per second and output rows; then the same after a
full compaction. Nothing is shared between engines but the input.

    .venv/bin/python bench/bench_merge_engines.py --rows 1000000 --commits 5
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

# Runnable from a checkout without installing the package (as the other benchmarks).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paimon_meta.catalog.storage import open_table
from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, BOOLEAN, DOUBLE, STRING, DataField
from paimon_meta.table.compact import compact
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable

FIELDS = (
    DataField(0, "id", BIGINT(False)),
    DataField(1, "qty", BIGINT()),
    DataField(2, "price", DOUBLE()),
    DataField(3, "name", STRING()),
    DataField(4, "flag", BOOLEAN()),
)
AGG = {
    "merge-engine": "aggregation",
    "fields.qty.aggregate-function": "sum",
    "fields.price.aggregate-function": "max",
    "fields.flag.aggregate-function": "bool_or",
}
ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": AGG,
    "aggregation-listagg": {**AGG, "fields.name.aggregate-function": "listagg"},
    "first-row": {"merge-engine": "first-row"},
}


def make_table(root: Path, name: str, options: dict[str, str], buckets: int) -> FileStoreTable:
    path = str(root / "bench.db" / name)
    schema = TableSchema(0, FIELDS, len(FIELDS) - 1, (), ("id",), {"bucket": str(buckets), **options})
    assert SchemaManager(get_file_io(path), path).commit_new_schema(schema)
    return open_table(path)


def commits(rows: int, n_commits: int, keys: int, seed: int) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    per = rows // n_commits
    out = []
    for _ in range(n_commits):
        ids = rng.integers(0, keys, per, dtype=np.int64)
        nulls = rng.random((3, per)) < 0.2
        out.append(
            pa.table(
                {
                    "id": pa.array(ids),
                    "qty": pa.array(rng.integers(-100, 100, per), pa.int64(), mask=nulls[0]),
                    "price": pa.array(rng.random(per) * 1000, pa.float64(), mask=nulls[1]),
                    "name": pa.array([f"n{i % 997}" for i in ids], pa.string(), mask=nulls[2]),
                    "flag": pa.array(rng.random(per) < 0.1),
                }
            )
        )
    return out


def read_all(table: FileStoreTable) -> tuple[int, int]:
    """(rows in the files read, rows returned) of a full read of the latest snapshot."""
    builder = table.new_read_builder()
    splits = builder.new_scan().plan().splits()
    data = builder.new_read().to_arrow(splits)
    return sum(s.row_count for s in splits), data.num_rows


def best_read(table: FileStoreTable, repeat: int) -> tuple[float, int, int]:
    best = float("inf")
    stored = returned = 0
    for _ in range(repeat):
        started = time.perf_counter()
        stored, returned = read_all(table)
        best = min(best, time.perf_counter() - started)
    return best, stored, returned


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--keys", type=int, default=0, help="distinct keys (default: rows / 2)")
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engines", default=",".join(ENGINES))
    args = parser.parse_args()
    keys = args.keys or args.rows // 2
    data = commits(args.rows, args.commits, keys, args.seed)
    root = Path(tempfile.mkdtemp(prefix="bench-merge-engines-"))
    print(
        f"{args.rows} rows in {args.commits} commits over {keys} keys, {args.buckets} buckets; "
        f"best of {args.repeat} reads"
    )
    header = (
        f"{'engine':<20} {'write s':>8} {'files rows':>11} {'out rows':>9} {'read s':>7} {'rows/s':>11}"
        f" | {'compacted: read s':>17} {'rows/s':>11}"
    )
    print(header)
    print("-" * len(header))
    try:
        for name in args.engines.split(","):
            table = make_table(root, name, ENGINES[name], args.buckets)
            started = time.perf_counter()
            for batch in data:
                builder = table.new_batch_write_builder()
                write = builder.new_write()
                write.write_arrow(batch)
                builder.new_commit().commit(write.prepare_commit())
                write.close()
            wrote = time.perf_counter() - started
            seconds, stored, returned = best_read(table, args.repeat)
            compact(table)
            c_seconds, c_stored, c_returned = best_read(table, args.repeat)
            assert c_returned == returned, (name, returned, c_returned)
            print(
                f"{name:<20} {wrote:8.2f} {stored:11,d} {returned:9,d} {seconds:7.3f}"
                f" {stored / seconds:11,.0f} | {c_seconds:17.3f} {c_stored / c_seconds:11,.0f}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
