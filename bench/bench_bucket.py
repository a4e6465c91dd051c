"""Throughput of the vectorized bucket function (``bucket_array``) over Arrow key columns.

Usage: ``.venv/bin/python bench/bench_bucket.py [--rows 10000000] [--buckets 16] [--repeat 3]``.
Prints the best-of-``repeat`` rows/s per key shape; data generation is not timed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paimon_meta.model import types as T
from paimon_meta.table.write.bucket import bucket_array

Case = tuple[list[pa.Array], list[T.DataType]]


def _strings(rng: np.random.Generator, rows: int, min_len: int, max_len: int) -> pa.Array:
    """ASCII strings of random length, built as one Arrow buffer (no Python objects)."""
    lengths = rng.integers(min_len, max_len + 1, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    data = rng.integers(ord("a"), ord("z") + 1, int(offsets[-1]), dtype=np.uint8)
    return pa.LargeStringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(data))


def _cases(rows: int, seed: int) -> dict[str, Callable[[], Case]]:
    rng = np.random.default_rng(seed)

    def ints() -> Case:
        return [pa.array(rng.integers(-(2**31), 2**31, rows, dtype=np.int64).astype(np.int32))], [T.INT()]

    def ints_with_nulls() -> Case:
        values = rng.integers(-(2**31), 2**31, rows, dtype=np.int64).astype(np.int32)
        return [pa.array(values, mask=rng.random(rows) < 0.1)], [T.INT()]

    def bigints() -> Case:
        return [pa.array(rng.integers(-(2**62), 2**62, rows))], [T.BIGINT()]

    def short_strings() -> Case:
        return [_strings(rng, rows, 1, 7)], [T.STRING()]

    def long_strings() -> Case:
        return [_strings(rng, rows, 8, 40)], [T.STRING()]

    def multi() -> Case:
        return (
            [
                pa.array(rng.integers(0, 1000, rows, dtype=np.int32)),
                _strings(rng, rows, 3, 12),
                pa.array(rng.integers(-(2**62), 2**62, rows)),
            ],
            [T.INT(), T.STRING(), T.BIGINT()],
        )

    return {
        "int": ints,
        "int (10% null)": ints_with_nulls,
        "bigint": bigints,
        "string (1-7 B, inline)": short_strings,
        "string (8-40 B, var part)": long_strings,
        "multi (int, string 3-12 B, bigint)": multi,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", help="run only the cases whose name contains this text")
    args = parser.parse_args(argv)

    print(f"rows={args.rows:,} buckets={args.buckets} repeat={args.repeat} (best of)")
    for name, build in _cases(args.rows, args.seed).items():
        if args.only and args.only not in name:
            continue
        columns, types = build()
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            bucket_array(columns, types, args.buckets)
            best = min(best, time.perf_counter() - start)
        print(f"{name:<38} {args.rows / best / 1e6:8.1f} M rows/s  ({best * 1000:7.1f} ms)")


if __name__ == "__main__":
    main()
