"""The bucket function: murmur vectors, Java's % semantics, vectorized == scalar, Java's golden files."""

from __future__ import annotations

import json
import math
import random
import struct
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_meta.errors import ValidationError
from paimon_meta.model import types as T
from paimon_meta.model.binary_row import Timestamp, encode_row
from paimon_meta.table.write.bucket import (
    bucket_array,
    bucket_of,
    bucket_of_hash,
    hash_array,
    hash_row,
    murmur_hash_bytes_by_words,
)
from tests.fixtures.golden import golden_table_path

# ---- murmur --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "seed", "expected"),
    [  # MurmurHash3_x86_32 reference vectors (SMHasher); hashBytesByWords is it without a tail
        (b"", 0, 0),
        (b"", 1, 0x514E28B7),
        (b"", 0xFFFFFFFF, 0x81F16F39),
        (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
        (b"\xff\xff\xff\xff", 0, 0x76293B50),
        (b"\x21\x43\x65\x87", 0, 0xF55B516B),
        (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    ],
)
def test_murmur_reference_vectors(data: bytes, seed: int, expected: int) -> None:
    assert murmur_hash_bytes_by_words(data, seed=seed) & 0xFFFFFFFF == expected


def test_murmur_is_signed_and_needs_words() -> None:
    hashes = [murmur_hash_bytes_by_words(struct.pack("<q", i)) for i in range(100)]
    assert all(-(2**31) <= h < 2**31 for h in hashes) and any(h < 0 for h in hashes)
    with pytest.raises(ValidationError):
        murmur_hash_bytes_by_words(b"abc")


def test_hash_row_is_murmur_of_the_row_bytes() -> None:
    row = encode_row([7, "x"], [T.INT(), T.STRING()])
    assert hash_row([7, "x"], [T.INT(), T.STRING()]) == murmur_hash_bytes_by_words(row)


def java_bucket(hash_code: int, n: int) -> int:
    return abs(hash_code - n * math.trunc(hash_code / n))  # Math.abs(hash % n), % truncating


@pytest.mark.parametrize("hash_code", [0, 1, -1, 7, -7, 2**31 - 1, -(2**31), -123456789, 987654321])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 128, 2**31 - 1])
def test_bucket_of_hash_truncates_like_java(hash_code: int, n: int) -> None:
    assert bucket_of_hash(hash_code, n) == java_bucket(hash_code, n)


@pytest.mark.parametrize("bad", [0, -1, 2**31, True, 1.0])
def test_num_buckets_validated(bad: Any) -> None:
    with pytest.raises(ValidationError):
        bucket_of([1], [T.INT()], bad)
    with pytest.raises(ValidationError):
        bucket_array([pa.array([1], pa.int32())], [T.INT()], bad)


def test_bucket_array_input_validation() -> None:
    with pytest.raises(ValidationError):
        bucket_array([pa.array([1]), pa.array([1, 2])], [T.BIGINT(), T.BIGINT()], 2)
    with pytest.raises(ValidationError):
        bucket_array([pa.array([1])], [T.BIGINT(), T.BIGINT()], 2)
    with pytest.raises(ValidationError):
        bucket_array([], [], 2)
    with pytest.raises(ValidationError):  # out of range for INT: the scalar path names the field
        bucket_array([pa.array([2**40])], [T.INT()], 2)
    assert bucket_array([pa.array([], pa.int32())], [T.INT()], 3).shape == (0,)


# ---- vectorized == scalar ----------------------------------------------------------------------------

_COLUMN_KINDS: dict[str, tuple[T.DataType, pa.DataType, st.SearchStrategy[Any]]] = {
    "bool": (T.BOOLEAN(), pa.bool_(), st.booleans()),
    "tinyint": (T.TINYINT(), pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "smallint": (T.SMALLINT(), pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int": (T.INT(), pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "int-from-int64": (T.INT(), pa.int64(), st.integers(-(2**31), 2**31 - 1)),
    "bigint": (T.BIGINT(), pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "float": (T.FLOAT(), pa.float32(), st.floats(width=32)),
    "double": (T.DOUBLE(), pa.float64(), st.floats()),
    "date": (T.DATE(), pa.date32(), st.dates()),
    "time": (
        T.TIME(3),
        pa.time32("ms"),
        st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    ),
    "time-us": (T.TIME(6), pa.time64("us"), st.times()),
    "string": (T.STRING(), pa.string(), st.text(max_size=7)),
    "string-long": (T.STRING(), pa.string(), st.text(max_size=40)),
    "large-string": (T.VARCHAR(100), pa.large_string(), st.text(max_size=20)),
    "bytes": (T.BYTES(), pa.binary(), st.binary(max_size=20)),
    "decimal": (T.DECIMAL(18, 3), pa.decimal128(18, 3), st.decimals(-(10**15) + 1, 10**15 - 1, places=3)),
    "decimal-wide": (
        T.DECIMAL(30, 2),
        pa.decimal128(30, 2),
        st.decimals(-(10**27) + 1, 10**27 - 1, places=2),
    ),
    "timestamp-ms": (T.TIMESTAMP(3), pa.timestamp("ms"), st.integers(-(2**50), 2**50)),
    "timestamp-us": (T.TIMESTAMP(3), pa.timestamp("us"), st.integers(-(2**60), 2**60)),
    "timestamp-ltz-ns": (T.TIMESTAMP_LTZ(3), pa.timestamp("ns", tz="UTC"), st.integers(-(2**62), 2**62)),
    "timestamp-9": (T.TIMESTAMP(9), pa.timestamp("ns"), st.integers(-(2**62), 2**62)),
}


def python_values(arr: pa.Array, t: T.DataType) -> list[Any]:
    """Independent Arrow -> binary_row conversion for the oracle (timestamps/times by hand)."""
    if pa.types.is_timestamp(arr.type):
        per_ns = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[arr.type.unit]
        return [
            None if v is None else Timestamp.from_epoch_nanos(v * per_ns)
            for v in arr.cast(pa.int64()).to_pylist()
        ]
    if pa.types.is_time(arr.type):
        return [
            None if v is None else (v.hour * 3600 + v.minute * 60 + v.second) * 1000 + v.microsecond // 1000
            for v in arr.to_pylist()
        ]
    return list(arr.to_pylist())


def oracle(arrays: list[pa.Array], types: Sequence[T.DataType], n: int) -> list[int]:
    cols = [python_values(a, t) for a, t in zip(arrays, types)]
    return [bucket_of([c[i] for c in cols], types, n) for i in range(len(arrays[0]))]


@st.composite
def key_batches(draw: st.DrawFn, kinds: list[str] | None = None) -> tuple[list[pa.Array], list[T.DataType]]:
    names = kinds or draw(st.lists(st.sampled_from(sorted(_COLUMN_KINDS)), min_size=1, max_size=4))
    rows = draw(st.integers(1, 40))
    arrays, types = [], []
    for name in names:
        typ, arrow_type, values = _COLUMN_KINDS[name]
        data = draw(st.lists(st.none() | values, min_size=rows + 2, max_size=rows + 2))
        arr = pa.array(data, arrow_type)
        arrays.append(arr.slice(1, rows) if draw(st.booleans()) else arr[:rows])  # exercise array offsets
        types.append(typ)
    return arrays, types


@pytest.mark.parametrize("kind", sorted(_COLUMN_KINDS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_bucket_array_matches_scalar_per_type(kind: str, data: st.DataObject) -> None:
    arrays, types = data.draw(key_batches([kind]))
    n = data.draw(st.sampled_from([1, 2, 3, 7, 16, 128, 1000003]))
    assert bucket_array(arrays, types, n).tolist() == oracle(arrays, types, n)


@settings(max_examples=150, deadline=None)
@given(batch=key_batches(), n=st.integers(1, 2**31 - 1))
def test_bucket_array_matches_scalar_multi_column(
    batch: tuple[list[pa.Array], list[T.DataType]], n: int
) -> None:
    arrays, types = batch
    assert bucket_array(arrays, types, n).tolist() == oracle(arrays, types, n)


def test_hash_array_matches_hash_row() -> None:
    arrays = [pa.array([1, None, -5], pa.int32()), pa.array(["a", "a much longer string", None])]
    types = [T.INT(), T.STRING()]
    rows: list[list[Any]] = [[1, "a"], [None, "a much longer string"], [-5, None]]
    assert hash_array(arrays, types).tolist() == [hash_row(r, types) for r in rows]


def test_long_strings_of_many_lengths_and_columns() -> None:
    rng = random.Random(7)

    def text() -> str | None:
        r = rng.random()
        if r < 0.1:
            return None
        return "".join(rng.choice("aé€😀") for _ in range(rng.choice([0, 3, 7, 8, 9, 30, 200])))

    a = pa.array([text() for _ in range(500)] + ["x" * 5000])  # one huge row: the per-row tail path
    b = pa.array([text() for _ in range(501)], pa.large_string())
    c = pa.array([rng.randint(-5, 5) for _ in range(501)], pa.int32())
    types = [T.STRING(), T.INT(), T.STRING()]
    assert bucket_array([a, c, b], types, 7).tolist() == oracle([a, c, b], types, 7)


def test_many_rows_per_layout_group() -> None:
    # Thousands of rows share a few padded layouts: the grouped path (not the flat one) hashes them.
    rng = random.Random(11)

    def text(low: int, high: int) -> str | None:
        return (
            None if rng.random() < 0.05 else "".join(rng.choice("xyz") for _ in range(rng.randint(low, high)))
        )

    a = pa.array([text(0, 40) for _ in range(3000)])
    b = pa.array([text(5, 20) for _ in range(3000)])
    c = pa.array([rng.choice([None, rng.randint(-9, 9)]) for _ in range(3000)], pa.int64())
    types = [T.STRING(), T.BIGINT(), T.STRING()]
    assert bucket_array([a, c, b], types, 128).tolist() == oracle([a, c, b], types, 128)


def test_chunked_dictionary_and_view_inputs() -> None:
    values = ["k", None, "a longer key value", "k"] * 5
    chunked = pa.chunked_array([pa.array(values[:7]), pa.array(values[7:])])
    dictionary = pa.array(values).dictionary_encode()
    expected = oracle([pa.array(values)], [T.STRING()], 16)
    assert bucket_array([chunked], [T.STRING()], 16).tolist() == expected
    assert bucket_array([dictionary], [T.STRING()], 16).tolist() == expected
    assert bucket_array([pa.array(values, pa.string_view())], [T.STRING()], 16).tolist() == expected


def test_decimal_with_other_scale_falls_back_with_rounding() -> None:
    arr = pa.array([Decimal("1.005"), Decimal("-2.335"), None], pa.decimal128(10, 3))
    expected = [bucket_of([v], [T.DECIMAL(10, 2)], 7) for v in (Decimal("1.01"), Decimal("-2.34"), None)]
    assert bucket_array([arr], [T.DECIMAL(10, 2)], 7).tolist() == expected


def test_large_int_batch_matches_scalar_sample() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(-(2**31), 2**31, 200_000, dtype=np.int64).astype(np.int32)
    buckets = bucket_array([pa.array(values)], [T.INT()], 128)
    assert buckets.dtype == np.int32 and buckets.min() >= 0 and buckets.max() < 128
    for i in rng.integers(0, len(values), 300).tolist():
        assert buckets[i] == bucket_of([int(values[i])], [T.INT()], 128)


# ---- Java compatibility: every golden data file sits in the bucket of its rows ------------------------


def _read_column(path: Path, column: str) -> list[Any]:
    table = (
        pq.read_table(path, columns=[column])
        if path.suffix == ".parquet"
        else pa_orc.read_table(path, columns=[column])
    )
    return list(table.column(column).to_pylist())


# The golden tables with ``bucket = 2`` and ``bucket-key = f2`` (INT); the others have 1 or -1 buckets.
BUCKETED_GOLDEN = [
    ("orc", "append_10_stats_dense_store"),
    ("orc", "pk_dv_index_with_commit_message_version10"),
    ("orc", "pk_table_with_total_buckets"),
    ("parquet", "append_09"),
    ("parquet", "append_10"),
    ("parquet", "append_complex_data"),
    ("parquet", "pk_09"),
]


@pytest.mark.parametrize(("fmt", "name"), BUCKETED_GOLDEN, ids=[n for _, n in BUCKETED_GOLDEN])
def test_golden_data_files_sit_in_their_bucket(fmt: str, name: str) -> None:
    table = golden_table_path(fmt, name)
    options = json.loads((table / "schema" / "schema-0").read_text())["options"]
    assert (options["bucket"], options["bucket-key"]) == ("2", "f2")
    num_buckets = 2
    files = sorted(p for p in table.rglob("bucket-*/data-*") if p.suffix in (".parquet", ".orc"))
    assert files
    checked = 0
    for path in files:
        bucket = int(path.parent.name.removeprefix("bucket-"))
        keys = _read_column(path, "f2")
        for key in keys:
            assert bucket_of([key], [T.INT()], num_buckets) == bucket, f"{path}: f2={key}"
        arrow_keys = pa.array(keys, pa.int32())
        assert bucket_array([arrow_keys], [T.INT()], num_buckets).tolist() == [bucket] * len(keys)
        checked += len(keys)
    assert checked > 0
