"""Paimon's fixed-bucket function: murmur3 over the bucket-key BinaryRow, scalar and vectorized.

Java: ``DefaultBucketFunction.bucket`` = ``Math.abs(row.hashCode() % numBuckets)`` where
``BinaryRow.hashCode`` is ``MurmurHashUtils.hashBytesByWords`` (murmur3-32, seed 42, 4-byte little-endian
words, ``fmix(h ^ length)``) over the row bytes. The row is the bucket-key projection written with
RowKind INSERT (see :mod:`paimon_meta.model.binary_row` for its layout and value conventions).

:func:`bucket_of` is the reference implementation. :func:`bucket_array` computes the same function over
whole Arrow columns with numpy: for the common key types it builds each row's 32-bit words as columns
(a word that is the same for every row stays a Python int and is mixed once), so murmur runs as a few
dozen array passes instead of a Python loop per row. Rows holding a string/binary longer than 7 bytes
have a variable part of per-row length: they are grouped by layout (the padded width of each long value),
and each large group is again hashed column-wise; rows of rare layouts are laid out in a flat buffer and
hashed word by word across rows. Key types outside the vectorized set (DECIMAL(p > 18), TIMESTAMP(p > 3),
nested types, decimals of another scale) fall back to :func:`bucket_of` per row: same result, slower.
"""

from __future__ import annotations

import datetime as _dt
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import (
    MAX_COMPACT_DECIMAL_PRECISION,
    MAX_COMPACT_TIMESTAMP_PRECISION,
    Timestamp,
    encode_row,
    fixed_part_size,
    null_bitset_width,
)
from paimon_meta.model.types import AtomicType, DataType, TypeRoot

SEED = 42  # MurmurHashUtils.DEFAULT_SEED
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_M32 = 0xFFFFFFFF

U32 = npt.NDArray[np.uint32]
Rows = npt.NDArray[np.int64]
Word = int | U32  # one 32-bit word of every row: a constant or one value per row


# ---- scalar murmur (the oracle) --------------------------------------------------------------------------


def _mix_k1(k: int) -> int:
    k = (k * _C1) & _M32
    k = ((k << 15) | (k >> 17)) & _M32
    return (k * _C2) & _M32


def _mix_h1(h: int, k: int) -> int:
    h ^= k
    h = ((h << 13) | (h >> 19)) & _M32
    return (h * 5 + 0xE6546B64) & _M32


def _fmix(h: int, length: int) -> int:
    h ^= length
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _to_signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def murmur_hash_bytes_by_words(data: bytes | bytearray | memoryview, *, seed: int = SEED) -> int:
    """``MurmurHashUtils.hashBytesByWords(data)``: seed 42, signed int32. ``len(data)`` must be 4-aligned."""
    if len(data) % 4:
        raise ValidationError(f"hashBytesByWords needs a multiple of 4 bytes, got {len(data)}")
    h = seed & _M32
    for (word,) in struct.iter_unpack("<I", data):
        h = _mix_h1(h, _mix_k1(word))
    return _to_signed(_fmix(h, len(data)))


def hash_row(values: Sequence[Any], types: Sequence[DataType]) -> int:
    """``BinaryRow.hashCode()`` of the row of ``values`` typed by ``types``."""
    return murmur_hash_bytes_by_words(encode_row(values, types))


def _check_num_buckets(num_buckets: int) -> None:
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or not 0 < num_buckets < 1 << 31:
        raise ValidationError(f"num_buckets must be in 1..2^31-1, got {num_buckets!r}", field="bucket")


def bucket_of_hash(hash_code: int, num_buckets: int) -> int:
    """``Math.abs(hash_code % num_buckets)`` with Java's truncating ``%`` on a signed int32 hash."""
    _check_num_buckets(num_buckets)
    # |h % n| under truncating division equals |h| mod n, so Python's floor-% on abs(h) matches Java.
    return abs(hash_code) % num_buckets


def bucket_of(values: Sequence[Any], types: Sequence[DataType], num_buckets: int) -> int:
    """The bucket of one bucket-key row (``DefaultBucketFunction.bucket``)."""
    _check_num_buckets(num_buckets)
    return bucket_of_hash(hash_row(values, types), num_buckets)


# ---- vectorized murmur -----------------------------------------------------------------------------------


def _vmix_k1(k: U32) -> U32:
    k = k * np.uint32(_C1)
    k = (k << np.uint32(15)) | (k >> np.uint32(17))
    k *= np.uint32(_C2)
    return k


def _vmix_h1(h: U32, k: U32 | np.uint32) -> U32:
    # h is always a fresh array owned by the caller, so it is updated in place.
    h ^= k
    h = (h << np.uint32(13)) | (h >> np.uint32(19))
    h *= np.uint32(5)
    h += np.uint32(0xE6546B64)
    return h


def _vfmix(h: U32, length: int | npt.NDArray[np.integer[Any]]) -> U32:
    h ^= np.asarray(length).astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _murmur_columns(words: Sequence[Word], n: int) -> U32:
    """Murmur of ``n`` rows whose i-th word is ``words[i]``; all rows have ``4 * len(words)`` bytes."""
    h: int | U32 = SEED
    for w in words:
        if isinstance(w, int) and isinstance(h, int):
            h = _mix_h1(h, _mix_k1(w))  # constant prefix: mixed once, not per row
            continue
        k = np.uint32(_mix_k1(w)) if isinstance(w, int) else _vmix_k1(w)
        h_rows = np.full(n, h, dtype=np.uint32) if isinstance(h, int) else h
        h = _vmix_h1(h_rows, k)
    if isinstance(h, int):
        return np.full(n, _fmix(h, 4 * len(words)), dtype=np.uint32)
    return _vfmix(h, 4 * len(words))


def _murmur_flat(flat: U32, word_starts: npt.NDArray[np.int64], word_counts: npt.NDArray[np.int64]) -> U32:
    """Murmur of rows of different lengths laid out in ``flat`` (row i = ``word_counts[i]`` words)."""
    m = len(word_starts)
    order = np.argsort(-word_counts, kind="stable")
    starts, counts = word_starts[order], word_counts[order]
    # counts is descending, so the rows still having a j-th word are a prefix of length active[j].
    active = np.searchsorted(-counts, -np.arange(int(counts[0]) if m else 0), side="left")
    h = np.full(m, SEED, dtype=np.uint32)
    for j, c in enumerate(active.tolist()):
        if c <= 4 and int(counts[0]) - j > 16:
            # A few very long rows remain: a Python loop per row beats many tiny numpy passes.
            for r in range(c):
                hr = int(h[r])
                for word in flat[starts[r] + j : starts[r] + counts[r]].tolist():
                    hr = _mix_h1(hr, _mix_k1(word))
                h[r] = hr
            break
        h[:c] = _vmix_h1(h[:c], _vmix_k1(flat[starts[:c] + j]))
    out = np.empty(m, dtype=np.uint32)
    out[order] = _vfmix(h, 4 * counts)
    return out


# ---- Arrow columns to row words --------------------------------------------------------------------------


@dataclass(slots=True)
class _Col:
    """One key column as the two 32-bit words of its slot, plus what strings need for the var part."""

    null: npt.NDArray[np.bool_] | None
    lo: Word
    hi: Word
    long: npt.NDArray[np.bool_] | None = None  # rows whose bytes go to the variable part
    starts: npt.NDArray[np.int64] | None = None  # byte offset of each row's value in ``data``
    lengths: npt.NDArray[np.int64] | None = None
    data: npt.NDArray[np.uint8] | None = None


class _Fallback(Exception):
    """Internal: this column cannot be vectorized; use the scalar path for the batch."""


_INT_ARROW: dict[TypeRoot, tuple[pa.DataType, type[np.unsignedinteger[Any]], type[np.generic]]] = {
    TypeRoot.TINYINT: (pa.int8(), np.uint8, np.int8),
    TypeRoot.SMALLINT: (pa.int16(), np.uint16, np.int16),
    TypeRoot.INT: (pa.int32(), np.uint32, np.int32),
    TypeRoot.DATE: (pa.date32(), np.uint32, np.int32),
    TypeRoot.BIGINT: (pa.int64(), np.uint64, np.int64),
    TypeRoot.FLOAT: (pa.float32(), np.uint32, np.float32),
    TypeRoot.DOUBLE: (pa.float64(), np.uint64, np.float64),
}
_TIME_TO_MILLIS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def _cast(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if arr.type == target:
        return arr
    try:
        return arr.cast(target)  # safe cast: an out-of-range value raises, and the scalar path reports it
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise _Fallback from e


def _null_mask(arr: pa.Array) -> npt.NDArray[np.bool_] | None:
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)


def _primitive_values(arr: pa.Array, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """The values buffer of a fixed-width Arrow array (garbage under nulls), zero-copy."""
    buf = arr.buffers()[1]
    if buf is None:  # e.g. an all-null array built without a values buffer
        return np.zeros(len(arr), dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=arr.offset + len(arr))[arr.offset :]


def _split64(v: npt.NDArray[np.uint64]) -> tuple[U32, U32]:
    return (v & np.uint64(_M32)).astype(np.uint32), (v >> np.uint64(32)).astype(np.uint32)


def _int_column(arr: pa.Array, root: TypeRoot) -> _Col:
    arrow_type, unsigned, signed = _INT_ARROW[root]
    arr = _cast(arr, arrow_type)
    null = _null_mask(arr)
    raw = _primitive_values(arr, signed)
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        # Canonical NaN, as binary_row writes it; Python floats cannot carry NaN payloads anyway.
        nan = np.isnan(raw)
        if nan.any():
            raw = np.where(nan, np.array(np.nan, dtype=signed), raw)
    bits = raw.view(unsigned)
    if null is not None:
        bits = np.where(null, unsigned(0), bits)
    if unsigned is np.uint64:
        lo, hi = _split64(bits)
        return _Col(null, lo, hi)
    # Java writes only the value's own width (putByte/putShort/putInt): the rest of the slot stays 0.
    return _Col(null, bits.astype(np.uint32), 0)


def _long_column(null: npt.NDArray[np.bool_] | None, v: npt.NDArray[np.int64]) -> _Col:
    if null is not None:
        v = np.where(null, np.int64(0), v)
    lo, hi = _split64(v.view(np.uint64))
    return _Col(null, lo, hi)


def _boolean_column(arr: pa.Array) -> _Col:
    null = _null_mask(arr)
    values = np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=np.bool_)
    return _Col(null, values.astype(np.uint32), 0)


def _time_column(arr: pa.Array) -> _Col:
    if not pa.types.is_time(arr.type):
        raise _Fallback
    mul, div = _TIME_TO_MILLIS[arr.type.unit]
    null = _null_mask(arr)
    raw = _primitive_values(arr, np.int32 if pa.types.is_time32(arr.type) else np.int64).astype(np.int64)
    millis = (raw * mul // div).astype(np.int32)
    bits = millis.view(np.uint32)
    return _Col(null, np.where(null, np.uint32(0), bits) if null is not None else bits, 0)


def _timestamp_column(arr: pa.Array, t: DataType) -> _Col:
    if not pa.types.is_timestamp(arr.type) or _precision(t) > MAX_COMPACT_TIMESTAMP_PRECISION:
        raise _Fallback
    per_milli = {"s": -1000, "ms": 1, "us": 1000, "ns": 1_000_000}[arr.type.unit]
    raw = _primitive_values(arr, np.int64)
    millis = raw * 1000 if per_milli == -1000 else np.floor_divide(raw, per_milli)
    return _long_column(_null_mask(arr), millis)


def _decimal_column(arr: pa.Array, t: DataType) -> _Col:
    assert isinstance(t, AtomicType) and t.precision is not None
    if (
        t.precision > MAX_COMPACT_DECIMAL_PRECISION
        or not pa.types.is_decimal128(arr.type)
        or arr.type.scale != t.scale
    ):
        raise _Fallback
    null = _null_mask(arr)
    # decimal128 values are 16-byte little-endian two's complement: (low int64, high int64) pairs.
    pairs = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=2 * (arr.offset + len(arr))).reshape(-1, 2)
    pairs = pairs[arr.offset :]
    lo, hi = pairs[:, 0], pairs[:, 1]
    if null is not None:
        lo, hi = np.where(null, 0, lo), np.where(null, 0, hi)
    # The value must be a sign-extended int64 below 10**precision; else the scalar path reports it.
    limit = 10**t.precision
    if (hi != (lo >> 63)).any() or ((lo <= -limit) | (lo >= limit)).any():
        raise _Fallback
    return _long_column(null, lo)


def _bytes_column(arr: pa.Array, binary: bool) -> _Col:
    large = pa.large_binary() if binary else pa.large_string()
    typ = arr.type
    if pa.types.is_fixed_size_binary(typ) or pa.types.is_binary_view(typ) or pa.types.is_string_view(typ):
        arr = _cast(arr, large)
    elif binary:
        if not (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)):
            raise _Fallback
    elif not (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        raise _Fallback
    n = len(arr)
    null = _null_mask(arr)
    off_type = np.int64 if arr.type in (pa.large_binary(), pa.large_string()) else np.int32
    raw_offsets = np.frombuffer(arr.buffers()[1], dtype=off_type, count=arr.offset + n + 1)[arr.offset :]
    offsets = raw_offsets.astype(np.int64)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    if null is not None:
        lengths = np.where(null, 0, lengths)
    long = lengths > 7
    # Inline form: the bytes little-endian in the slot, 0x80 | len in its top byte. Read 8 bytes at
    # every start (the data is padded so that never runs off the end) and mask to the length.
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    windows = np.lib.stride_tricks.as_strided(padded, shape=(len(data) + 1, 8), strides=(1, 1))
    raw = np.ascontiguousarray(windows[np.where(long, 0, starts)]).view("<u8").ravel()
    short_len = np.where(long, 0, lengths).astype(np.uint64)
    masks = np.array([(1 << (8 * i)) - 1 for i in range(8)], dtype=np.uint64)
    word = (raw & masks[short_len]) | ((short_len | np.uint64(0x80)) << np.uint64(56))
    if null is not None:
        word = np.where(null, np.uint64(0), word)
    lo, hi = _split64(word)
    return _Col(null, lo, hi, long=long, starts=starts, lengths=lengths, data=data)


def _precision(t: DataType) -> int:
    p = getattr(t, "precision", None)
    return int(p) if p is not None else 0


def _column(arr: pa.Array, t: DataType) -> _Col:
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    root = t.root
    if root is TypeRoot.BOOLEAN:
        return _boolean_column(_cast(arr, pa.bool_()))
    if root in _INT_ARROW:
        return _int_column(arr, root)
    if root is TypeRoot.TIME:
        return _time_column(arr)
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        return _timestamp_column(arr, t)
    if root is TypeRoot.DECIMAL:
        return _decimal_column(arr, t)
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR):
        return _bytes_column(arr, binary=False)
    if root in (TypeRoot.BINARY, TypeRoot.VARBINARY):
        return _bytes_column(arr, binary=True)
    raise _Fallback


# ---- assembling rows ---------------------------------------------------------------------------------------


def _take(w: Word, rows: Rows) -> Word:
    return w if isinstance(w, int) else w[rows]


def _fixed_words(cols: Sequence[_Col], lo_hi: Sequence[tuple[Word, Word]]) -> list[Word]:
    """Header words (RowKind 0 + null bits) followed by the two words of every slot."""
    header: list[Word] = [0] * (null_bitset_width(len(cols)) // 4)
    for i, col in enumerate(cols):
        if col.null is not None:
            bit = i + 8
            bits: U32 = col.null.astype(np.uint32) << np.uint32(bit % 32)
            prev = header[bit // 32]
            header[bit // 32] = bits if isinstance(prev, int) else prev | bits  # an int word is still 0
    words = header
    for lo, hi in lo_hi:
        words += [lo, hi]
    return words


def _subset(c: _Col, rows: Rows) -> _Col:
    return _Col(c.null[rows] if c.null is not None else None, _take(c.lo, rows), _take(c.hi, rows))


def _hash_fast(cols: Sequence[_Col], n: int) -> U32:
    """``n`` rows without a variable part: every row is the same ``fixed_part_size`` words."""
    return _murmur_columns(_fixed_words(cols, [(c.lo, c.hi) for c in cols]), n)


def _padded_data(c: _Col, extra: int) -> npt.NDArray[np.uint8]:
    """The column's value bytes followed by ``extra`` zero bytes, so fixed-width windows never run off."""
    assert c.data is not None
    return np.concatenate([c.data, np.zeros(extra, dtype=np.uint8)])


def _value_words(
    padded: npt.NDArray[np.uint8], starts: Rows, lengths: Rows, width: int
) -> npt.NDArray[np.uint32]:
    """``(rows, width / 4)`` words: each value's bytes zero-padded to ``width`` (a multiple of 8)."""
    windows = np.lib.stride_tricks.as_strided(padded, shape=(len(padded) - width + 1, width), strides=(1, 1))
    out = windows[starts]  # fancy indexing copies
    out[np.arange(width) >= lengths[:, None]] = 0
    return out.view("<u4")


def _hash_layout_group(
    cols: Sequence[_Col], rows: Rows, widths: Sequence[int], padded: dict[int, npt.NDArray[np.uint8]]
) -> U32:
    """Rows whose long values all have the same padded widths: again one word column per position."""
    offset = fixed_part_size(len(cols))
    lo_hi: list[tuple[Word, Word]] = []
    var_words: list[Word] = []
    for ci, (c, width) in enumerate(zip(cols, widths)):
        if width == 0:
            lo_hi.append((_take(c.lo, rows), _take(c.hi, rows)))
            continue
        assert c.starts is not None and c.lengths is not None
        lengths = c.lengths[rows]
        # The slot of a long value is (offset << 32) | length; the values follow in field order, each
        # zero-padded to 8 bytes (AbstractBinaryWriter.writeBytesToVarLenPart).
        lo_hi.append((lengths.astype(np.uint32), offset))
        words = _value_words(padded[ci], c.starts[rows], lengths, width)
        var_words += [words[:, j] for j in range(width // 4)]
        offset += width
    nulls = [_Col(c.null[rows] if c.null is not None else None, 0, 0) for c in cols]
    return _murmur_columns(_fixed_words(nulls, lo_hi) + var_words, len(rows))


def _hash_flat(cols: Sequence[_Col], rows: Rows, padded: dict[int, npt.NDArray[np.uint8]]) -> U32:
    """Rows of assorted layouts (tiny layout groups), laid out one after another in a flat buffer."""
    fixed = fixed_part_size(len(cols))
    total_var = np.zeros(len(rows), dtype=np.int64)
    lo_hi: list[tuple[Word, Word]] = []
    copies: list[tuple[int, Rows, Rows]] = []
    for ci, c in enumerate(cols):
        lo, hi = _take(c.lo, rows), _take(c.hi, rows)
        if c.long is not None and c.lengths is not None:
            long, lengths = c.long[rows], c.lengths[rows]
            offset = fixed + total_var
            lo = np.where(long, lengths, lo).astype(np.uint32)
            hi = np.where(long, offset, hi).astype(np.uint32)
            copies.append((ci, offset, np.where(long, lengths, 0)))
            total_var = total_var + ((copies[-1][2] + 7) & ~7)
        lo_hi.append((lo, hi))
    row_len = fixed + total_var
    row_start = np.cumsum(row_len) - row_len
    flat = np.zeros(int(row_len.sum()) // 8, dtype=np.uint64)
    flat_words = flat.view(np.uint32)
    word_start = row_start // 4
    nulls = [_Col(c.null[rows] if c.null is not None else None, 0, 0) for c in cols]
    for j, w in enumerate(_fixed_words(nulls, lo_hi)):
        flat_words[word_start + j] = w
    for ci, offset, lengths in copies:
        # Copy 8 bytes at a time (values start 8-aligned), masking the bytes past each value's end.
        c = cols[ci]
        assert c.starts is not None
        n8 = (lengths + 7) // 8
        first = np.cumsum(n8) - n8
        which = np.repeat(np.arange(len(rows)), n8)
        k = np.arange(int(n8.sum()), dtype=np.int64) - first[which]
        src = padded[ci]
        windows = np.lib.stride_tricks.as_strided(src, shape=(len(src) - 7, 8), strides=(1, 1))
        values = np.ascontiguousarray(windows[c.starts[rows][which] + 8 * k]).view("<u8").ravel()
        remaining = np.minimum(lengths[which] - 8 * k, 8).astype(np.uint64)
        values &= _BYTE_MASKS[remaining]
        flat[(row_start[which] + offset[which]) // 8 + k] = values
    return _murmur_flat(flat_words, word_start, row_len // 4)


_BYTE_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_MIN_GROUP = 64  # smaller layout groups go to the flat path: per-group numpy overhead would dominate
_FLAT_BATCH_BYTES = 64 << 20  # bounds the flat path's temporary arrays


def _group_layouts(
    widths: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.unsignedinteger[Any]], npt.NDArray[np.int64]]:
    """Distinct rows of ``widths`` (layouts), each row's layout id, and the rows per layout."""
    units = widths // 8
    radix = units.max(axis=0) + 1
    if float(np.prod(radix.astype(np.float64))) <= 1 << 22:
        # Few possible layouts: a mixed-radix key and a counting pass instead of sorting rows.
        weights = np.concatenate([[1], np.cumprod(radix)[:-1]]).astype(np.int64)
        keys = np.zeros(len(units), dtype=np.int64)
        for ci in np.flatnonzero(radix > 1).tolist():  # integer matmul would be far slower
            keys += units[:, ci] * weights[ci]
        counts_by_key = np.bincount(keys)
        present = np.flatnonzero(counts_by_key)
        lookup = np.zeros(len(counts_by_key), dtype=np.int64)
        lookup[present] = np.arange(len(present))
        group = lookup[keys]
        layouts = (present[:, None] // weights[None, :]) % radix[None, :] * 8
        ids: npt.NDArray[np.unsignedinteger[Any]] = group.astype(
            np.uint16 if len(present) < 1 << 16 else np.uint32
        )
        return np.asarray(layouts, np.int64), ids, np.asarray(counts_by_key[present], np.int64)
    layouts, inverse, counts = np.unique(widths, axis=0, return_inverse=True, return_counts=True)
    return np.asarray(layouts, np.int64), inverse.ravel().astype(np.uint32), np.asarray(counts, np.int64)


def _hash_var_rows(cols: Sequence[_Col], rows: Rows) -> U32:
    """Rows where some string/binary is longer than 7 bytes and lives in the variable part."""
    var_cols = [ci for ci, c in enumerate(cols) if c.long is not None]
    widths = np.zeros((len(rows), len(cols)), dtype=np.int64)
    for ci in var_cols:
        c = cols[ci]
        assert c.long is not None and c.lengths is not None
        widths[:, ci] = np.where(c.long[rows], (c.lengths[rows] + 7) & ~7, 0)
    padded = {ci: _padded_data(cols[ci], max(int(widths[:, ci].max()), 8)) for ci in var_cols}
    layouts, inverse, counts = _group_layouts(widths)
    order = np.argsort(inverse, kind="stable")  # a radix sort for the small integer group ids
    ends = np.cumsum(counts)
    out = np.empty(len(rows), dtype=np.uint32)
    leftovers: list[Rows] = []
    for g, layout in enumerate(layouts.tolist()):
        members = order[ends[g] - counts[g] : ends[g]]
        if counts[g] >= _MIN_GROUP:
            out[members] = _hash_layout_group(cols, rows[members], layout, padded)
        else:
            leftovers.append(members)
    if leftovers:
        rest = np.concatenate(leftovers)
        row_bytes = fixed_part_size(len(cols)) + widths[rest].sum(axis=1)
        ends_at = np.cumsum(row_bytes)
        cuts = np.searchsorted(ends_at, np.arange(_FLAT_BATCH_BYTES, int(ends_at[-1]), _FLAT_BATCH_BYTES))
        for part in np.split(rest, cuts):
            if len(part):
                out[part] = _hash_flat(cols, rows[part], padded)
    return out


def _hash_columns(cols: Sequence[_Col], n: int) -> U32:
    any_long = np.zeros(n, dtype=np.bool_)
    for c in cols:
        if c.long is not None:
            any_long |= c.long
    if not any_long.any():
        return _hash_fast(cols, n)
    out = np.empty(n, dtype=np.uint32)
    short, long = np.flatnonzero(~any_long), np.flatnonzero(any_long)
    if len(short):
        out[short] = _hash_fast([_subset(c, short) for c in cols], len(short))
    out[long] = _hash_var_rows(cols, long)
    return out


# ---- scalar fallback -------------------------------------------------------------------------------------


def _python_values(arr: pa.Array, t: DataType) -> list[Any]:
    """Arrow values in binary_row's Python conventions (timestamps and times need converting)."""
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_timestamp(arr.type):
        scale = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1000, "ns": 1}[arr.type.unit]
        return [
            None if v is None else Timestamp.from_epoch_nanos(v * scale)
            for v in arr.cast(pa.int64()).to_pylist()
        ]
    if pa.types.is_time(arr.type) and t.root is TypeRoot.TIME:
        mul, div = _TIME_TO_MILLIS[arr.type.unit]
        ints = arr.cast(pa.int32() if pa.types.is_time32(arr.type) else pa.int64())
        return [None if v is None else v * mul // div for v in ints.to_pylist()]
    values: list[Any] = arr.to_pylist()
    if t.root is TypeRoot.DATE:
        # date64 and timestamps come back as datetimes; a DATE is the calendar day
        return [v.date() if isinstance(v, _dt.datetime) else v for v in values]
    return values


# ---- public vectorized API ---------------------------------------------------------------------------


def _as_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            return column.chunk(0)
        if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
            # 32-bit offsets may overflow when the chunks are combined
            column = column.cast(pa.large_string() if pa.types.is_string(column.type) else pa.large_binary())
        return column.combine_chunks()
    if not isinstance(column, pa.Array):
        raise ValidationError(f"expected a pyarrow Array or ChunkedArray, got {type(column).__name__}")
    return column


def hash_array(
    columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType]
) -> npt.NDArray[np.int32]:
    """``BinaryRow.hashCode()`` of every row of the key columns (int32), like :func:`hash_row` per row."""
    if len(columns) != len(types) or not columns:
        raise ValidationError(f"{len(columns)} key columns for {len(types)} key types (need at least one)")
    arrays = [_as_array(c) for c in columns]
    n = len(arrays[0]) if arrays else 0
    if any(len(a) != n for a in arrays):
        raise ValidationError(f"key columns differ in length: {[len(a) for a in arrays]}")
    try:
        cols = [_column(a, t) for a, t in zip(arrays, types)]
    except _Fallback:
        columns_py = [_python_values(a, t) for a, t in zip(arrays, types)]
        return np.array([hash_row([c[i] for c in columns_py], types) for i in range(n)], dtype=np.int32)
    return _hash_columns(cols, n).view(np.int32)


def bucket_array(
    columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[DataType], num_buckets: int
) -> npt.NDArray[np.int32]:
    """The bucket of every row of the key columns (int32), equal to :func:`bucket_of` row by row.

    ``columns[i]`` holds the values of key field ``i`` typed ``types[i]``; all columns have one length.
    """
    _check_num_buckets(num_buckets)
    hashes = hash_array(columns, types)
    # Java: Math.abs(hash % n) with truncating %; |h % n| == |h| mod n, computed in int64 so that
    # abs(Integer.MIN_VALUE) does not overflow.
    return (np.abs(hashes.astype(np.int64)) % num_buckets).astype(np.int32)
