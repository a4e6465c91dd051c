"""Scan planning time of a large synthetic table: cold (new table object, empty manifest cache)
and warm (manifests cached), and manifest entries decoded per second.

Builds (with the real Avro encoders) a local table whose one snapshot has a base manifest list of
--manifests manifests of --entries entries each (default 1,000 x 10 = 10,000 live files over 16
partitions and 4 buckets, with 8-column value stats), then plans the latest snapshot repeatedly.

    PYTHONPATH=. .venv/bin/python bench/bench_scan.py
    PYTHONPATH=. .venv/bin/python bench/bench_scan.py --manifests 1000 --entries 10 --repeat 5 --parallelism 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from paimon_meta.io import get_file_io
from paimon_meta.io.base import FileIO
from paimon_meta.model.binary_row import serialize_row
from paimon_meta.model.manifest import DataFileMeta, FileKind, ManifestEntry, ManifestFileMeta, SimpleStats
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.model.types import BIGINT, DOUBLE, INT, STRING, DataField
from paimon_meta.serde.avro import decode_manifest, encode_manifest, encode_manifest_list
from paimon_meta.serde.json import schema_to_json, snapshot_to_json
from paimon_meta.table.paths import TablePaths
from paimon_meta.table.table import FileStoreTable

PARTITIONS = 16
BUCKETS = 4
VALUE_COLUMNS = 8


def _schema() -> TableSchema:
    fields = [DataField(0, "p", INT(False)), DataField(1, "id", BIGINT(False))]
    fields += [DataField(2 + i, f"v{i}", DOUBLE() if i % 2 else STRING()) for i in range(VALUE_COLUMNS - 2)]
    return TableSchema(
        0,
        tuple(fields),
        len(fields) - 1,
        partition_keys=("p",),
        options={"bucket": str(BUCKETS), "bucket-key": "id"},
    )


def _entry(schema: TableSchema, n: int) -> ManifestEntry:
    part = n % PARTITIONS
    types = [f.type for f in schema.fields]
    lo = [part, n, *[f"a{n}" if i % 2 == 0 else float(n) for i in range(VALUE_COLUMNS - 2)]]
    hi = [part, n + 9999, *[f"z{n}" if i % 2 == 0 else float(n + 1) for i in range(VALUE_COLUMNS - 2)]]
    empty = serialize_row([], [])
    return ManifestEntry(
        FileKind.ADD,
        serialize_row([part], [INT(False)]),
        n % BUCKETS,
        BUCKETS,
        DataFileMeta(
            file_name=f"data-{uuid.uuid4()}-0.parquet",
            file_size=4_000_000 + n,
            row_count=10_000,
            min_key=empty,
            max_key=empty,
            key_stats=SimpleStats(empty, empty, ()),
            value_stats=SimpleStats(serialize_row(lo, types), serialize_row(hi, types), (0,) * VALUE_COLUMNS),
            min_sequence_number=n * 10_000,
            max_sequence_number=n * 10_000 + 9_999,
            schema_id=0,
            level=0,
            creation_time=1_755_787_064_077 + n,
            delete_row_count=0,
        ),
    )


def build_table(file_io: FileIO, root: str, manifests: int, entries: int) -> int:
    """Write the table; returns the total manifest bytes."""
    schema = _schema()
    paths = TablePaths(root, schema.partition_type.fields)
    file_io.write(paths.schema_path(0), schema_to_json(schema).encode())
    metas, total = [], 0
    n = 0
    for _ in range(manifests):
        batch = []
        for _ in range(entries):
            batch.append(_entry(schema, n))
            n += 1
        data = encode_manifest(batch)
        total += len(data)
        name = paths.new_manifest_name()
        file_io.write(paths.manifest_path(name), data)
        parts = sorted({e.partition for e in batch})
        metas.append(
            ManifestFileMeta(
                name,
                len(data),
                len(batch),
                0,
                SimpleStats(parts[0], parts[-1], (0,)),
                0,
                min_bucket=min(e.bucket for e in batch),
                max_bucket=max(e.bucket for e in batch),
                min_level=0,
                max_level=0,
            )
        )
    base, delta = paths.new_manifest_list_name(), paths.new_manifest_list_name()
    file_io.write(paths.manifest_path(base), encode_manifest_list(metas))
    file_io.write(paths.manifest_path(delta), encode_manifest_list([]))
    snapshot = Snapshot(1, 0, base, delta, "bench", 1, CommitKind.APPEND, int(time.time() * 1000))
    file_io.write(paths.snapshot_path(1), snapshot_to_json(snapshot).encode())
    file_io.write(paths.latest_hint_path, b"1")
    return total


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifests", type=int, default=1000)
    ap.add_argument("--entries", type=int, default=10, help="entries per manifest")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parallelism", type=int, default=4, help="scan.manifest.parallelism")
    args = ap.parse_args(argv)
    print(
        "$ PYTHONPATH=. .venv/bin/python bench/bench_scan.py "
        + " ".join(sys.argv[1:] if argv is None else argv)
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = str(Path(tmp) / "db.db" / "t")
        file_io = get_file_io(root)
        t0 = time.perf_counter()
        size = build_table(file_io, root, args.manifests, args.entries)
        files = args.manifests * args.entries
        print(
            f"built {args.manifests} manifests x {args.entries} entries ({files} files, "
            f"{size / 1e6:.1f} MB of manifests) in {time.perf_counter() - t0:.1f} s"
        )
        options = {"scan.manifest.parallelism": str(args.parallelism)}
        schema = FileStoreTable.open(root).schema

        cold, warm = [], []
        for _ in range(args.repeat):
            table = FileStoreTable(file_io, root, schema, options)  # new object: empty caches
            t = time.perf_counter()
            plan = table.new_read_builder().new_scan().plan()
            cold.append(time.perf_counter() - t)
            assert sum(len(s.files) for s in plan.splits()) == files
            for _ in range(3):
                t = time.perf_counter()
                table.new_read_builder().new_scan().plan()
                warm.append(time.perf_counter() - t)

        # raw decode throughput (bytes already in memory, one thread)
        paths = TablePaths(root)
        names = [m.name for m in Path(paths.manifest_dir).iterdir() if not m.name.startswith("manifest-list")]
        blobs = [file_io.read(paths.manifest_path(n)) for n in names]
        t = time.perf_counter()
        decoded = sum(len(decode_manifest(b)) for b in blobs)
        decode_s = time.perf_counter() - t

    median_cold = statistics.median(cold)
    print(
        f"cold plan (new table, empty cache): median {median_cold * 1000:.0f} ms, "
        f"min {min(cold) * 1000:.0f} ms over {len(cold)} runs -> {files / median_cold:,.0f} entries/s"
    )
    print(
        f"warm plan (manifests cached):       median {statistics.median(warm) * 1000:.0f} ms, "
        f"min {min(warm) * 1000:.0f} ms over {len(warm)} runs"
    )
    print(
        f"decode_manifest alone:               {decoded:,} entries in {decode_s * 1000:.0f} ms "
        f"-> {decoded / decode_s:,.0f} entries/s"
    )


if __name__ == "__main__":
    main()
