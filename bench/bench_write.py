"""Write throughput: rows/s of ``TableWrite.write_arrow`` + ``prepare_commit`` on local disk.

Two tables: an append table (bucket-unaware) and a primary-key table with 4 buckets, both with
``id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP(6)`` (the PK table keyed by ``id``). Rows arrive
in batches of ``--batch`` rows; the PK input holds every id once plus ``--dup-ratio`` re-written ids, so
the writer sorts and folds. Nothing is committed (the files are deleted afterwards).

With ``--pypaimon`` the same input (saved once as Parquet) is also written by pypaimon 2.1.0 in its own
venv (``.venv-pypaimon``, see tests/interop/pypaimon_env.py), timing the same calls there; the ratio is
printed.

    .venv/bin/python bench/bench_write.py --rows 1000000 --pypaimon
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

# Runnable from a checkout without installing the package (as the other benchmarks).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, DOUBLE, STRING, TIMESTAMP, DataField
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.table_write import TableWrite

FIELDS = (
    DataField(0, "id", BIGINT(False)),
    DataField(1, "name", STRING()),
    DataField(2, "score", DOUBLE()),
    DataField(3, "ts", TIMESTAMP(6)),
)


def _table(root: Path, name: str, primary_keys: tuple[str, ...], options: dict[str, str]) -> FileStoreTable:
    path = str(root / "bench.db" / name)
    file_io = get_file_io(path)
    schema = TableSchema(0, FIELDS, len(FIELDS) - 1, (), primary_keys, options)
    SchemaManager(file_io, path).commit_new_schema(schema)
    return FileStoreTable(file_io, path, schema)


def _batches(rows: int, batch: int, dup_ratio: float, seed: int) -> Iterator[pa.Table]:
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    extra = int(rows * dup_ratio)
    if extra:
        ids = np.concatenate([ids, rng.integers(0, rows, extra, dtype=np.int64)])
    rng.shuffle(ids)
    names = np.array([f"name-{i:04d}" for i in range(1000)], dtype=object)
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        n = len(chunk)
        yield pa.table(
            {
                "id": pa.array(chunk, pa.int64()),
                "name": pa.array(names[chunk % 1000], pa.string()),
                "score": pa.array(rng.random(n)),
                "ts": pa.array(1_700_000_000_000_000 + chunk * 1000, pa.timestamp("us")),
            }
        )


def _run(table: FileStoreTable, batches: list[pa.Table], parallelism: int | None) -> dict[str, float]:
    rows = sum(b.num_rows for b in batches)
    start = time.perf_counter()
    w = TableWrite(table, commit_user="bench", parallelism=parallelism)
    for b in batches:
        w.write_arrow(b)
    write_done = time.perf_counter()
    messages = w.prepare_commit()
    end = time.perf_counter()
    w.close()
    files = [f for m in messages for f in m.data_increment.new_files]
    return {
        "input_rows": rows,
        "written_rows": sum(f.row_count for f in files),
        "files": len(files),
        "mb": sum(f.file_size for f in files) / 1e6,
        "write_s": write_done - start,
        "prepare_s": end - write_done,
        "total_s": end - start,
        "rows_per_s": rows / (end - start),
    }


PYPAIMON_SCRIPT = r"""
import json, sys, time
import pyarrow as pa, pyarrow.parquet as pq
from pypaimon import CatalogFactory, Schema

warehouse, name, data_path, pk = sys.argv[1:5]
options = json.loads(sys.argv[5])
data = pq.read_table(data_path)
batches = [b for b in data.to_batches(max_chunksize=int(sys.argv[6]))]
catalog = CatalogFactory.create({"warehouse": warehouse})
catalog.create_database("bench", True)
fields = [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
          pa.field("score", pa.float64()), pa.field("ts", pa.timestamp("us"))]
schema = Schema.from_pyarrow_schema(pa.schema(fields), primary_keys=[pk] if pk else None, options=options)
catalog.create_table("bench." + name, schema, False)
table = catalog.get_table("bench." + name)
start = time.perf_counter()
w = table.new_batch_write_builder().new_write()
for b in batches:
    w.write_arrow(pa.Table.from_batches([b]).cast(pa.schema(fields)))
msgs = w.prepare_commit()
end = time.perf_counter()
files = sum(len(m.new_files) for m in msgs)
print(json.dumps({"rows": data.num_rows, "total_s": end - start, "files": files}))
"""


def _run_pypaimon(
    root: Path,
    name: str,
    batches: list[pa.Table],
    *,
    pk: tuple[str, ...],
    options: dict[str, str],
    batch: int,
) -> dict[str, float]:
    import pyarrow.parquet as pq

    python = Path(__file__).resolve().parents[1] / ".venv-pypaimon" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} missing: run `make interop-venv` first")
    data_path = root / f"{name}.input.parquet"
    pq.write_table(pa.concat_tables(batches), data_path)
    out = subprocess.run(
        [
            str(python),
            "-c",
            PYPAIMON_SCRIPT,
            str(root / "pypaimon"),
            name,
            str(data_path),
            ",".join(pk),
            json.dumps(options),
            str(batch),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["rows_per_s"] = result["rows"] / result["total_s"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="distinct rows per table (default 1M)")
    parser.add_argument("--batch", type=int, default=100_000, help="rows per write_arrow call")
    parser.add_argument("--dup-ratio", type=float, default=0.1, help="extra re-written ids in the PK input")
    parser.add_argument("--format", choices=["parquet", "orc"], default="parquet")
    parser.add_argument("--parallelism", type=int, default=None, help="TableWrite parallelism")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir, removed after)")
    parser.add_argument("--pypaimon", action="store_true", help="also run pypaimon 2.1.0 on the same input")
    args = parser.parse_args(argv)

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_write_"))
    try:
        print("command: " + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]))
        print(
            f"rows={args.rows:,} batch={args.batch:,} dup_ratio={args.dup_ratio} format={args.format} "
            f"parallelism={args.parallelism or 'default'} cpus={os.cpu_count()}"
        )
        cases = [
            ("append (bucket -1)", "append_t", (), {"file.format": args.format}, 0.0),
            ("pk (4 buckets)", "pk_t", ("id",), {"bucket": "4", "file.format": args.format}, args.dup_ratio),
        ]
        for label, name, pk, options, dup in cases:
            batches = list(_batches(args.rows, args.batch, dup, seed=7))
            r = _run(_table(root, name, pk, options), batches, args.parallelism)
            print(
                f"{label:20s} {r['input_rows']:>12,.0f} rows in {r['total_s']:7.2f} s "
                f"(write {r['write_s']:.2f} s + prepare_commit {r['prepare_s']:.2f} s) = "
                f"{r['rows_per_s']:>12,.0f} rows/s; {r['written_rows']:,.0f} rows in "
                f"{r['files']:.0f} files, {r['mb']:.1f} MB"
            )
            if args.pypaimon:
                ref = _run_pypaimon(root, name, batches, pk=pk, options=options, batch=args.batch)
                print(
                    f"{'  pypaimon 2.1.0':20s} {ref['rows']:>12,.0f} rows in {ref['total_s']:7.2f} s = "
                    f"{ref['rows_per_s']:>12,.0f} rows/s ({ref['files']:.0f} files); "
                    f"ours/pypaimon throughput = {r['rows_per_s'] / ref['rows_per_s']:.2f}x"
                )
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
