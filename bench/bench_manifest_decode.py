"""Throughput of the manifest Avro codec: builds N manifest entries (or manifest-list metas), encodes
them into one file and decodes it again, and prints entries/s for each direction (best of --repeat).

    PYTHONPATH=. .venv/bin/python bench/bench_manifest_decode.py --entries 20000 --compression zstd
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from paimon_meta.model.manifest import (
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from paimon_meta.serde.avro import (
    decode_manifest,
    decode_manifest_list,
    encode_manifest,
    encode_manifest_list,
)


def _row(arity: int) -> bytes:
    """A serialized BinaryRow-sized blob: 4-byte arity, null bits, one 8-byte slot per field."""
    width = ((arity + 63 + 8) // 64) * 8 + 8 * arity
    return arity.to_bytes(4, "big") + os.urandom(width)


def build_entries(n: int, columns: int) -> list[ManifestEntry]:
    """Entries of an append table with ``columns`` value columns; every file has its own stats."""
    keys = SimpleStats(_row(0), _row(0), ())
    partition = _row(1)
    return [
        ManifestEntry(
            FileKind.ADD,
            partition,
            i % 16,
            16,
            DataFileMeta(
                file_name=f"data-{uuid.uuid4()}-0.parquet",
                file_size=1_000_000 + i,
                row_count=10_000,
                min_key=keys.min_values,
                max_key=keys.max_values,
                key_stats=keys,
                value_stats=SimpleStats(_row(columns), _row(columns), tuple([0] * columns)),
                min_sequence_number=i,
                max_sequence_number=i + 10_000,
                schema_id=0,
                level=0,
                creation_time=1_755_787_064_077 + i,
                delete_row_count=0,
                file_source=FileSource.APPEND,
            ),
        )
        for i in range(n)
    ]


def build_metas(n: int, columns: int) -> list[ManifestFileMeta]:
    """Manifest-list entries whose partition stats cover ``columns`` partition columns."""
    return [
        ManifestFileMeta(
            f"manifest-{uuid.uuid4()}-{i}",
            8_000_000,
            100,
            3,
            SimpleStats(_row(columns), _row(columns), tuple([0] * columns)),
            0,
            0,
            15,
            0,
            5,
        )
        for i in range(n)
    ]


def _best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entries", type=int, default=10_000, help="records per file")
    parser.add_argument("--columns", type=int, default=8, help="value columns (sizes the stats rows)")
    parser.add_argument("--compression", default="zstd", help="zstd, snappy, deflate, null, ...")
    parser.add_argument("--kind", choices=["manifest", "list"], default="manifest")
    parser.add_argument("--repeat", type=int, default=3, help="runs per direction; the best is reported")
    args = parser.parse_args(argv)

    items: list[Any]
    if args.kind == "manifest":
        items = build_entries(args.entries, args.columns)
        encode: Callable[..., bytes] = encode_manifest
        decode: Callable[..., list[Any]] = decode_manifest
    else:
        items = build_metas(args.entries, args.columns)
        encode, decode = encode_manifest_list, decode_manifest_list

    enc_s, data = _best(args.repeat, lambda: encode(items, compression=args.compression))
    dec_s, decoded = _best(args.repeat, lambda: decode(data))
    assert decoded == items, "round trip mismatch"
    n = len(items)
    print(f"kind={args.kind} entries={n} columns={args.columns} compression={args.compression}")
    print(f"file size: {len(data):,} bytes ({len(data) / n:.0f} bytes/entry)")
    print(f"encode: {n / enc_s:,.0f} entries/s ({enc_s * 1000:.1f} ms)")
    print(f"decode: {n / dec_s:,.0f} entries/s ({dec_s * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
