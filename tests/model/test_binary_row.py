"""BinaryRow codec: byte layouts checked by hand against Java's writers, round trips, corrupt input."""

from __future__ import annotations

import contextlib
import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_meta.errors import CorruptMetadataError, UnsupportedError, ValidationError
from paimon_meta.model import types as T
from paimon_meta.model.binary_row import (
    EMPTY_ROW_BYTES,
    Timestamp,
    decimal_to_unscaled,
    decode_row,
    deserialize_row,
    encode_row,
    serialize_row,
    serialized_arity,
    unscaled_to_decimal,
)

STATS = T.RowType(
    False,
    (
        T.DataField(0, "_MIN_VALUES", T.BYTES(False)),
        T.DataField(1, "_MAX_VALUES", T.BYTES(False)),
        T.DataField(2, "_NULL_COUNTS", T.ArrayType(True, T.BIGINT())),
    ),
)


def words(data: bytes) -> list[int]:
    return [w for (w,) in struct.iter_unpack("<Q", data)]


# ---- layout ---------------------------------------------------------------------------------------------


def test_empty_row() -> None:
    assert serialize_row([], []) == EMPTY_ROW_BYTES
    assert deserialize_row(EMPTY_ROW_BYTES, []) == ()


def test_single_int_partition_matches_java_commit_message_bytes() -> None:
    # The partition f1=10 exactly as Java wrote it in the golden append_10 commit message.
    assert serialize_row([10], [T.INT()]).hex() == "00000001" + "00" * 8 + "0a00000000000000"


def test_null_bits_and_fixed_widths() -> None:
    types = [T.BOOLEAN(), T.TINYINT(), T.SMALLINT(), T.INT(), T.BIGINT(), T.FLOAT(), T.DOUBLE(), T.DATE()]
    row = encode_row([True, -1, None, -2, -3, 1.5, None, dt.date(1969, 12, 31)], types)
    w = words(row)
    assert len(row) == 8 + 8 * 8
    assert w[0] == (1 << (2 + 8)) | (1 << (6 + 8))  # RowKind 0, fields 2 and 6 null
    assert w[1] == 1
    assert w[2] == 0xFF  # putByte writes one byte: no sign extension into the slot
    assert w[3] == 0  # a null slot is zero
    assert w[4] == 0xFFFFFFFE
    assert w[5] == (1 << 64) - 3
    assert w[6] == struct.unpack("<I", struct.pack("<f", 1.5))[0]
    assert w[8] == 0xFFFFFFFF  # 1969-12-31 is day -1


def test_wide_row_null_bitset_spans_words() -> None:
    types = [T.INT()] * 60
    values: list[Any] = [None if i in (0, 55, 56, 59) else i for i in range(60)]
    row = encode_row(values, types)
    assert len(row) == 16 + 8 * 60  # (60 + 63 + 8) // 64 = 2 header words
    bits = int.from_bytes(row[:16], "little")
    assert bits == sum(1 << (i + 8) for i in (0, 55, 56, 59))
    assert decode_row(row, types) == tuple(values)


def test_inline_and_variable_strings() -> None:
    types = [T.STRING(), T.STRING(), T.BYTES()]
    row = encode_row(["abc", "12345678", b""], types)
    w = words(row)
    assert w[1] == (0x83 << 56) | int.from_bytes(b"abc", "little")
    assert w[2] == (32 << 32) | 8  # offset = fixed part (8 + 3 * 8), length 8
    assert w[3] == 0x80 << 56  # empty bytes are inline with length 0
    assert row[32:40] == b"12345678" and len(row) == 40
    row = encode_row(["é" * 5], [T.STRING()])  # 10 UTF-8 bytes: padded to 16
    assert len(row) == 16 + 16 and row[26:] == b"\x00" * 6


def test_decimal_layouts() -> None:
    compact = encode_row([Decimal("-1.235")], [T.DECIMAL(10, 2)])
    assert struct.unpack_from("<q", compact, 8)[0] == -124  # HALF_UP like BigDecimal.setScale
    wide = encode_row([Decimal("-1.28")], [T.DECIMAL(20, 2)])
    assert words(wide)[1] == (16 << 32) | 1  # BigInteger(-128).toByteArray() is one byte
    assert wide[16:] == b"\x80" + b"\x00" * 15  # always 16 bytes reserved
    assert encode_row([Decimal("1.28")], [T.DECIMAL(20, 2)])[16:18] == b"\x00\x80"
    assert (
        encode_row([0], [T.DECIMAL(20, 0)])[16] == 0
        and words(encode_row([0], [T.DECIMAL(20, 0)]))[1] & 0xFF == 1
    )
    # Compact decimals hold any long, as Java's BinaryWriter/BinaryRow (a DECIMAL(10, 2) sum can be wider)
    wider = encode_row([Decimal("100000000.02")], [T.DECIMAL(10, 2)])
    assert struct.unpack_from("<q", wider, 8)[0] == 10000000002
    assert decode_row(wider, [T.DECIMAL(10, 2)]) == (Decimal("100000000.02"),)


def test_timestamp_layouts() -> None:
    ts = Timestamp(-5, 123)
    assert words(encode_row([ts], [T.TIMESTAMP(3)]))[1] == (1 << 64) - 5  # nanos dropped
    row = encode_row([ts], [T.TIMESTAMP(9)])
    assert words(row)[1] == (16 << 32) | 123
    assert struct.unpack_from("<q", row, 16)[0] == -5
    assert decode_row(row, [T.TIMESTAMP_LTZ(6)]) == (ts,)


def test_null_noncompact_values_reserve_space_like_java() -> None:
    # RowHelper.writeNulls: the offset stays in the slot and zeroed space follows.
    row = encode_row([None, None, None], [T.DECIMAL(23, 5), T.TIMESTAMP(9), T.DECIMAL(10, 2)])
    w = words(row)
    assert w[0] == 0b111 << 8
    assert w[1:4] == [32 << 32, 48 << 32, 0]
    assert len(row) == 32 + 16 + 8 and row[32:] == b"\x00" * 24


def test_array_layouts() -> None:
    arr = T.ArrayType(True, T.INT())
    row = encode_row([[1, None, 3]], [arr])
    assert words(row)[1] == (16 << 32) | 24  # 4 + 4 header, 3 * 4 slots -> rounded to 24
    assert row[16:40] == struct.pack("<iI3i", 3, 0b010, 1, 0, 3) + b"\x00" * 4
    strings = encode_row([["f0", "a-longer-name"]], [T.ArrayType(False, T.STRING())])
    body = strings[16:]
    assert struct.unpack_from("<i", body, 0)[0] == 2
    assert struct.unpack_from("<Q", body, 8)[0] == (0x82 << 56) | int.from_bytes(b"f0", "little")
    assert struct.unpack_from("<Q", body, 16)[0] == (24 << 32) | 13  # relative to the array start
    assert body[24:37] == b"a-longer-name"


def test_nested_row_in_array_and_row() -> None:
    inner = T.RowType(True, (T.DataField(0, "a", T.INT()), T.DataField(1, "b", T.STRING())))
    types: list[T.DataType] = [T.ArrayType(True, inner), inner, T.ArrayType(True, T.BIGINT())]
    values = [[(1, "x"), None, (None, "a long string value")], (2, None), []]
    row = encode_row(values, types)
    assert decode_row(row, types) == ((((1, "x"), None, (None, "a long string value"))), (2, None), ())


def test_time_and_date_conventions() -> None:
    types = [T.TIME(3), T.DATE()]
    row = encode_row([dt.time(1, 2, 3, 456789), 19000], types)
    assert decode_row(row, types) == (3_723_456, dt.date(1970, 1, 1) + dt.timedelta(days=19000))


# ---- Timestamp helpers -------------------------------------------------------------------------------------


def test_timestamp_conversions() -> None:
    assert Timestamp.from_epoch_micros(-1) == Timestamp(-1, 999_000)
    assert Timestamp.from_epoch_nanos(1_500_000_001) == Timestamp(1500, 1)
    assert Timestamp(1500, 1).to_epoch_nanos() == 1_500_000_001
    naive = dt.datetime(1899, 1, 1, 0, 59, 20, 1001)
    assert Timestamp.from_datetime(naive).to_datetime() == naive
    aware = dt.datetime(2024, 1, 1, 8, tzinfo=dt.timezone(dt.timedelta(hours=8)))
    assert Timestamp.from_datetime(aware) == Timestamp.from_datetime(dt.datetime(2024, 1, 1))
    assert Timestamp(1, 2) < Timestamp(1, 3) < Timestamp(2)
    with pytest.raises(ValidationError):
        Timestamp(0, 1_000_000)


def test_decimal_to_unscaled_guards() -> None:
    assert decimal_to_unscaled(Decimal("0.005"), 5, 2) == 1
    assert decimal_to_unscaled(Decimal("-0.005"), 5, 2) == -1
    assert decimal_to_unscaled(Decimal("1E-999999999"), 5, 2) == 0
    for bad in (Decimal("1E+999999999"), Decimal("1000"), Decimal("NaN"), 1.5):
        with pytest.raises(ValidationError):
            decimal_to_unscaled(bad, 5, 2)  # type: ignore[arg-type]


# ---- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "typ"),
    [
        (2**31, T.INT()),
        ("1", T.INT()),
        (1, T.BOOLEAN()),
        (b"x", T.STRING()),
        ("\ud800", T.STRING()),  # a lone surrogate: no UTF-8 form
        ("x", T.BYTES()),
        (dt.datetime(2020, 1, 1), T.DATE()),
        (1e300, T.FLOAT()),
        (Decimal("123.4"), T.DECIMAL(20, 19)),
        (Decimal("1e18"), T.DECIMAL(3, 1)),  # a compact decimal's unscaled value must fit a long
        (1, T.TIMESTAMP(3)),
        ((1, 2), T.RowType(True, (T.DataField(0, "a", T.INT()),))),
    ],
)
def test_bad_values_name_the_field(value: Any, typ: T.DataType) -> None:
    with pytest.raises(ValidationError, match=r"field 1 \("):
        encode_row([1, value], [T.INT(), typ])


def test_unsupported_types() -> None:
    with pytest.raises(UnsupportedError):
        encode_row([{}], [T.MapType(True, T.INT(), T.INT())])
    with pytest.raises(UnsupportedError):
        decode_row(bytes(16), [T.MapType(True, T.INT(), T.INT())])


def test_array_element_errors_name_the_element() -> None:
    with pytest.raises(ValidationError, match=r"element 1 \(INT\)"):
        encode_row([[1, "x"]], [T.ArrayType(True, T.INT())])


def _corruptions() -> list[tuple[str, bytes, list[T.DataType]]]:
    good = encode_row(["a long string value", [1, 2]], [T.STRING(), T.ArrayType(True, T.BIGINT())])
    s = [T.STRING(), T.ArrayType(True, T.BIGINT())]
    bad_offset = bytearray(good)
    struct.pack_into("<Q", bad_offset, 8, (1 << 40) | 5)
    huge_len = bytearray(good)
    struct.pack_into("<Q", huge_len, 8, (24 << 32) | 0x7FFFFFFF)
    bad_inline = bytearray(good)
    struct.pack_into("<Q", bad_inline, 8, 0x8F << 56)
    huge_count = bytearray(good)
    array_start = struct.unpack_from("<Q", good, 16)[0] >> 32
    struct.pack_into("<i", huge_count, array_start, 0x7FFFFFFF)
    negative_count = bytearray(good)
    struct.pack_into("<i", negative_count, array_start, -1)
    bad_ts = bytearray(encode_row([Timestamp(1, 2)], [T.TIMESTAMP(9)]))
    struct.pack_into("<Q", bad_ts, 8, (16 << 32) | 5_000_000)
    return [
        ("truncated", good[:20], s),
        ("empty", b"", [T.INT()]),
        ("offset", bytes(bad_offset), s),
        ("length", bytes(huge_len), s),
        ("inline", bytes(bad_inline), s),
        ("count", bytes(huge_count), s),
        ("negative", bytes(negative_count), s),
        ("utf8", encode_row([b"\xff\xfe"], [T.BYTES()]), [T.STRING()]),
        ("timestamp", bytes(bad_ts), [T.TIMESTAMP(9)]),
        ("decimal-precision", encode_row([b"\x7f" * 9], [T.BYTES()]), [T.DECIMAL(20, 0)]),
        ("decimal-length", encode_row([b"\x00" * 17], [T.BYTES()]), [T.DECIMAL(20, 0)]),
    ]


@pytest.mark.parametrize(("name", "data", "types"), _corruptions(), ids=[c[0] for c in _corruptions()])
def test_corrupt_bytes_raise_naming_the_path(name: str, data: bytes, types: list[T.DataType]) -> None:
    with pytest.raises(CorruptMetadataError, match="manifest-x") as info:
        decode_row(data, types, path="manifest-x")
    assert info.value.path == "manifest-x"


def test_deserialize_checks_arity() -> None:
    data = serialize_row([1, 2], [T.INT(), T.INT()])
    assert serialized_arity(data) == 2
    with pytest.raises(CorruptMetadataError, match="arity 2, expected 1"):
        deserialize_row(data, [T.INT()], path="p")
    for bad in (b"\x00\x00", b"\xff\xff\xff\xff" + bytes(8)):
        with pytest.raises(CorruptMetadataError):
            deserialize_row(bad, [T.INT()])


_FUZZ_TYPES = [T.STRING(), T.ArrayType(True, STATS), T.DECIMAL(30, 3), T.TIMESTAMP(6), T.BYTES()]
_FUZZ_ROW = encode_row(
    ["a long string value", [(b"min-value-bytes", b"x", [1, None])], Decimal("1.5"), Timestamp(1, 2), b"abc"],
    _FUZZ_TYPES,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_FUZZ_ROW) - 1), st.integers(0, 255)), max_size=6), st.data())
def test_mutated_bytes_decode_or_raise_corrupt(flips: list[tuple[int, int]], data: st.DataObject) -> None:
    mutated = bytearray(_FUZZ_ROW)
    for pos, value in flips:
        mutated[pos] = value
    cut = data.draw(st.integers(0, len(mutated)))
    with contextlib.suppress(CorruptMetadataError):  # anything else (or a hang) fails the test
        decode_row(bytes(mutated[:cut]), _FUZZ_TYPES)


# ---- round trips -------------------------------------------------------------------------------------------

_SCALARS: list[tuple[T.DataType, st.SearchStrategy[Any]]] = [
    (T.BOOLEAN(), st.booleans()),
    (T.TINYINT(), st.integers(-(2**7), 2**7 - 1)),
    (T.SMALLINT(), st.integers(-(2**15), 2**15 - 1)),
    (T.INT(), st.integers(-(2**31), 2**31 - 1)),
    (T.BIGINT(), st.integers(-(2**63), 2**63 - 1)),
    (T.FLOAT(), st.floats(width=32, allow_nan=False)),
    (T.DOUBLE(), st.floats(allow_nan=False)),
    (T.STRING(), st.text(max_size=20)),
    (T.BYTES(), st.binary(max_size=20)),
    (T.DATE(), st.dates()),
    (T.TIME(3), st.integers(0, 86_399_999)),
    (T.DECIMAL(18, 4), st.integers(-(10**18) + 1, 10**18 - 1).map(lambda u: unscaled_to_decimal(u, 4))),
    (T.DECIMAL(38, 10), st.integers(-(10**38) + 1, 10**38 - 1).map(lambda u: unscaled_to_decimal(u, 10))),
    (T.TIMESTAMP(3), st.integers(-(2**62), 2**62).map(Timestamp)),
    (T.TIMESTAMP_LTZ(9), st.builds(Timestamp, st.integers(-(2**62), 2**62), st.integers(0, 999_999))),
]


@st.composite
def typed_rows(draw: st.DrawFn) -> tuple[list[T.DataType], list[Any]]:
    picks = draw(st.lists(st.sampled_from(range(len(_SCALARS))), max_size=8))
    types: list[T.DataType] = []
    values: list[Any] = []
    for i in picks:
        typ, strategy = _SCALARS[i]
        if draw(st.booleans()):
            types.append(T.ArrayType(True, typ))
            values.append(draw(st.lists(st.none() | strategy, max_size=5)))
        else:
            types.append(typ)
            values.append(draw(st.none() | strategy))
    return types, values


def _normalize(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_normalize(v) for v in value)
    return value  # Decimal == is exact and ignores trailing zeros


@settings(max_examples=300, deadline=None)
@given(typed_rows())
def test_round_trip(row: tuple[list[T.DataType], list[Any]]) -> None:
    types, values = row
    data = serialize_row(values, types)
    assert len(data) % 8 == 4
    decoded = deserialize_row(data, types)
    assert [_normalize(v) for v in decoded] == [_normalize(v) for v in values]
    assert serialize_row(list(decoded), types) == data  # decoding loses nothing the bytes hold


def test_nan_is_canonical() -> None:
    neg_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]
    assert encode_row([neg_nan], [T.DOUBLE()])[8:] == struct.pack("<Q", 0x7FF8000000000000)
    assert encode_row([neg_nan], [T.FLOAT()])[8:12] == struct.pack("<I", 0x7FC00000)
