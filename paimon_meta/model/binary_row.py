"""The BinaryRow codec: Java Paimon's ``BinaryRow`` / ``BinaryArray`` byte layout for Python values.

Byte layout (``org.apache.paimon.data.BinaryRow``, ``BinaryRowWriter``, ``BinaryArrayWriter``,
``AbstractBinaryWriter``, ``memory.MemorySegmentUtils``), all little-endian:

* Row: byte 0 is the RowKind (always 0 = INSERT here), then a null bitset padded to 8-byte words
  (``((arity + 63 + 8) // 64) * 8`` bytes; bit ``i + 8`` set = field ``i`` is null), then one 8-byte slot
  per field, then the variable part. Every variable-part entry starts 8-byte aligned and is zero-padded.
* Array: 4-byte element count, a null bitset of ``((n + 31) // 32) * 4`` bytes (bit ``i`` = element ``i``),
  one slot per element whose width depends on the element type (1 for BOOLEAN/TINYINT, 2 SMALLINT,
  4 INT/FLOAT/DATE/TIME, else 8), the fixed part rounded up to 8 bytes, then the variable part.
* Offsets in slots are relative to the start of the row or array that holds the slot.

Python value conventions (``None`` is null for every type):

============================  ==========================================================================
BOOLEAN                       ``bool``
TINYINT/SMALLINT/INT/BIGINT   ``int`` (range-checked)
FLOAT / DOUBLE                ``float``; NaN is written as the canonical NaN (Java ``Float.NaN``)
DECIMAL(p, s)                 ``decimal.Decimal`` (``int`` accepted); rounded HALF_UP to scale ``s`` like
                              Java ``Decimal.fromBigDecimal``; more than ``p`` digits is a ValidationError.
                              p <= 18: the unscaled long inline; else the unscaled value's minimal big-endian
                              two's complement bytes (``BigInteger.toByteArray``) in a 16-byte variable slot
CHAR/VARCHAR/STRING           ``str`` (UTF-8); <= 7 bytes inline (``0x80 | len`` in the slot's top byte)
BINARY/VARBINARY/BYTES        ``bytes`` (``bytearray``/``memoryview`` accepted), inline like strings
DATE                          ``datetime.date`` (``int`` days since 1970-01-01 accepted); decodes to date
TIME(p)                       ``int`` milliseconds of the day (``datetime.time`` accepted, truncated to ms);
                              decodes to ``int``, which is Java's internal representation
TIMESTAMP(p), TIMESTAMP_LTZ   :class:`Timestamp` (``datetime`` accepted: naive = wall clock on a UTC epoch,
                              aware = converted to UTC). p <= 3: epoch millis inline (nanos dropped); p > 3:
                              millis in the variable part, nano-of-millisecond in the slot. Values are not
                              truncated to ``p`` (Java's writer does not either)
ARRAY<T>                      ``list``/``tuple`` of T values; decodes to ``tuple``
ROW<...>                      ``list``/``tuple`` of field values; decodes to ``tuple``
MAP, MULTISET, VARIANT, BLOB  unsupported (:class:`~paimon_meta.errors.UnsupportedError`)
============================  ==========================================================================

Nulls match Java's ``RowHelper``/codegen writers: a null DECIMAL(p > 18) or TIMESTAMP(p > 3) field of a
row still reserves its variable-part space (16 resp. 8 zero bytes) and keeps the offset in its slot, which
changes the row bytes and hence the bucket hash. Array elements never reserve space.
"""

from __future__ import annotations

import datetime as _dt
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from paimon_meta.errors import CorruptMetadataError, UnsupportedError, ValidationError
from paimon_meta.model.types import ArrayType, AtomicType, DataType, RowType, TypeRoot

EMPTY_ROW_BYTES = b"\x00\x00\x00\x00" + b"\x00" * 8
"""The serialized empty row (arity 0, 8-byte header): the partition of an unpartitioned table."""

MAX_COMPACT_DECIMAL_PRECISION = 18  # Java DecimalType.MAX_COMPACT_PRECISION
MAX_COMPACT_TIMESTAMP_PRECISION = 3  # Java Timestamp.isCompact
_MAX_INLINE = 7  # BinarySection.MAX_FIX_PART_DATA_SIZE
_INLINE_MARK = 1 << 63
_MILLIS_PER_DAY = 86_400_000
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)

_STRING_ROOTS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR})
_BINARY_ROOTS = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})
_TIMESTAMP_ROOTS = frozenset({TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ})
# Fixed-width types: struct format at their natural width (also their BinaryArray element width).
_FIXED_FORMATS = {
    TypeRoot.BOOLEAN: struct.Struct("<B"),
    TypeRoot.TINYINT: struct.Struct("<b"),
    TypeRoot.SMALLINT: struct.Struct("<h"),
    TypeRoot.INT: struct.Struct("<i"),
    TypeRoot.DATE: struct.Struct("<i"),
    TypeRoot.TIME: struct.Struct("<i"),
    TypeRoot.BIGINT: struct.Struct("<q"),
    TypeRoot.FLOAT: struct.Struct("<f"),
    TypeRoot.DOUBLE: struct.Struct("<d"),
}
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_BE_I32 = struct.Struct(">i")
_ZEROS = tuple(bytes(n) for n in range(16))
_FLOAT_NAN = struct.pack("<I", 0x7FC00000)
_DOUBLE_NAN = struct.pack("<Q", 0x7FF8000000000000)


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """Java ``org.apache.paimon.data.Timestamp``: epoch milliseconds plus nanoseconds within the milli.

    The epoch is 1970-01-01 00:00:00 on a UTC-based clock; for TIMESTAMP (without time zone) it is the
    wall-clock time, for TIMESTAMP_LTZ the instant. Ordering matches Java's ``compareTo``.
    """

    millisecond: int
    nano_of_millisecond: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.nano_of_millisecond <= 999_999:
            raise ValidationError(
                f"nano_of_millisecond must be in 0..999999, got {self.nano_of_millisecond}",
                field="nano_of_millisecond",
            )

    @staticmethod
    def from_epoch_millis(millis: int, nano_of_millisecond: int = 0) -> Timestamp:
        """The timestamp ``millis`` ms (plus nanos) after the epoch."""
        return Timestamp(millis, nano_of_millisecond)

    @staticmethod
    def from_epoch_micros(micros: int) -> Timestamp:
        """The timestamp ``micros`` µs after the epoch (floor semantics for negative values)."""
        millis, rem = divmod(micros, 1000)
        return Timestamp(millis, rem * 1000)

    @staticmethod
    def from_epoch_nanos(nanos: int) -> Timestamp:
        """The timestamp ``nanos`` ns after the epoch (floor semantics for negative values)."""
        millis, rem = divmod(nanos, 1_000_000)
        return Timestamp(millis, rem)

    @staticmethod
    def from_datetime(value: _dt.datetime) -> Timestamp:
        """A naive datetime is read as wall clock on a UTC epoch; an aware one is converted to UTC."""
        if value.tzinfo is not None:
            value = value.astimezone(_dt.UTC).replace(tzinfo=None)
        delta = value - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return Timestamp.from_epoch_micros(micros)

    def to_epoch_micros(self) -> int:
        """Microseconds since the epoch; sub-microsecond nanos are truncated (Java ``toMicros``)."""
        return self.millisecond * 1000 + self.nano_of_millisecond // 1000

    def to_epoch_nanos(self) -> int:
        """Nanoseconds since the epoch."""
        return self.millisecond * 1_000_000 + self.nano_of_millisecond

    def to_datetime(self) -> _dt.datetime:
        """A naive datetime on the UTC-based epoch clock (sub-microsecond nanos truncated)."""
        try:
            return _EPOCH + _dt.timedelta(microseconds=self.to_epoch_micros())
        except OverflowError as e:
            raise ValidationError(f"timestamp {self} is outside datetime's range") from e


# ---- shared layout helpers -----------------------------------------------------------------------------


def null_bitset_width(arity: int) -> int:
    """Bytes of a BinaryRow's header + null bitset (``BinaryRow.calculateBitSetWidthInBytes``)."""
    return ((arity + 63 + 8) // 64) * 8


def fixed_part_size(arity: int) -> int:
    """Bytes of a BinaryRow's fixed part: header, null bits and one 8-byte slot per field."""
    return null_bitset_width(arity) + 8 * arity


def _array_header_size(n: int) -> int:
    return 4 + ((n + 31) // 32) * 4


def _round8(n: int) -> int:
    return (n + 7) & ~7


def _element_size(t: DataType) -> int:
    """``BinaryArray.calculateFixLengthPartSize``: slot width of one array element."""
    fmt = _FIXED_FORMATS.get(t.root)
    return fmt.size if fmt is not None else 8


def _precision(t: DataType) -> int:
    p = getattr(t, "precision", None)
    if p is None:
        raise ValidationError(f"type {t} has no precision", type=str(t))
    return int(p)


def _is_noncompact(t: DataType) -> bool:
    if t.root is TypeRoot.DECIMAL:
        return _precision(t) > MAX_COMPACT_DECIMAL_PRECISION
    if t.root in _TIMESTAMP_ROOTS:
        return _precision(t) > MAX_COMPACT_TIMESTAMP_PRECISION
    return False


def _check_supported(t: DataType) -> None:
    root = t.root
    if root in (TypeRoot.MAP, TypeRoot.MULTISET, TypeRoot.VARIANT, TypeRoot.BLOB):
        raise UnsupportedError(f"BinaryRow values of type {t} are not supported", type=str(t))


# ---- value conversion ------------------------------------------------------------------------------------


class _BadValue(Exception):
    """Internal: a value that cannot be encoded; re-raised as ValidationError with the field path."""


def decimal_to_unscaled(value: Decimal | int, precision: int, scale: int) -> int:
    """The unscaled integer of ``value`` at ``scale``, rounded HALF_UP (Java ``Decimal.fromBigDecimal``).

    Raises ValidationError if the result has more than ``precision`` digits.
    """
    if isinstance(value, bool) or not isinstance(value, (Decimal, int)):
        raise ValidationError(f"expected a Decimal for DECIMAL({precision}, {scale}), got {value!r}")
    if isinstance(value, int):
        value = Decimal(value)
    if not value.is_finite():
        raise ValidationError(f"DECIMAL cannot hold {value}")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite
    shift = exponent + scale
    # Guard the power-of-ten before computing it: huge exponents must not allocate huge integers.
    if len(digits) + shift > precision + 1:
        raise ValidationError(f"{value} does not fit DECIMAL({precision}, {scale})")
    unscaled = int("".join(map(str, digits)))
    if shift >= 0:
        unscaled *= 10**shift
    elif -shift > len(digits):
        unscaled = 0  # below half a unit of the last place: rounds to zero
    else:
        quotient, rem = divmod(unscaled, 10**-shift)
        unscaled = quotient + (1 if 2 * rem >= 10**-shift else 0)  # HALF_UP on the magnitude
    if unscaled >= 10**precision:
        raise ValidationError(f"{value} does not fit DECIMAL({precision}, {scale})")
    return -unscaled if sign else unscaled


def unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    """The exact Decimal ``unscaled * 10**-scale`` (no context rounding)."""
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))


def _java_big_integer_bytes(n: int) -> bytes:
    # BigInteger.toByteArray: minimal two's complement, bitLength() // 8 + 1 bytes, where Java's
    # bitLength of a negative n is that of ~n (so -128 is one byte 0x80).
    bit_length = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bit_length // 8 + 1, "big", signed=True)


def _to_timestamp(value: Any) -> Timestamp:
    if isinstance(value, Timestamp):
        return value
    if isinstance(value, _dt.datetime):
        return Timestamp.from_datetime(value)
    raise _BadValue(f"expected a Timestamp or datetime, got {value!r}")


def _fixed_value(value: Any, root: TypeRoot) -> Any:
    """The Python value ``struct`` packs for a fixed-width type."""
    if root is TypeRoot.BOOLEAN:
        if not isinstance(value, bool):
            raise _BadValue(f"expected a bool, got {value!r}")
        return 1 if value else 0
    if root is TypeRoot.DATE:
        if isinstance(value, _dt.datetime):
            raise _BadValue(f"expected a date, got the datetime {value!r}")
        if isinstance(value, _dt.date):
            return (value - _EPOCH_DATE).days
    elif root is TypeRoot.TIME and isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, (float, int)):
            raise _BadValue(f"expected a float, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _BadValue(f"expected an int, got {value!r}")
    return value


# ---- encoding --------------------------------------------------------------------------------------------


def _append_var(buf: bytearray, slot: int, data: bytes, reserve: int | None = None) -> None:
    """Append ``data`` to the variable part (zero-padded) and point the slot at it."""
    offset = len(buf)
    n = len(data)
    buf += data
    pad = (reserve if reserve is not None else (n + 7) & ~7) - n
    if pad:
        buf += _ZEROS[pad] if pad < 16 else bytes(pad)
    _U64.pack_into(buf, slot, (offset << 32) | n)


def _write_bytes(buf: bytearray, slot: int, data: bytes) -> None:
    if len(data) <= _MAX_INLINE:
        # AbstractBinaryWriter.writeBytesToFixLenPart: data in the low bytes, 0x80 | len in the top byte.
        buf[slot : slot + len(data)] = data
        buf[slot + 7] = 0x80 | len(data)
    else:
        _append_var(buf, slot, data)


def _utf8(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise _BadValue(f"{value!r} is not encodable as UTF-8: {e.reason}") from e


def _write(buf: bytearray, slot: int, value: Any, t: DataType) -> None:
    """Write the non-null ``value`` of type ``t`` into the slot at ``slot`` of the container in ``buf``."""
    root = t.root
    fmt = _FIXED_FORMATS.get(root)
    if fmt is not None:
        packed = _fixed_value(value, root)
        if isinstance(packed, float) and math.isnan(packed):
            # Write the canonical bits of Java's Float.NaN / Double.NaN whatever NaN payload came in.
            buf[slot : slot + fmt.size] = _FLOAT_NAN if root is TypeRoot.FLOAT else _DOUBLE_NAN
            return
        try:
            fmt.pack_into(buf, slot, packed)
        except (struct.error, OverflowError) as e:
            raise _BadValue(f"{value!r} is out of range") from e
    elif root in _STRING_ROOTS:
        if not isinstance(value, str):
            raise _BadValue(f"expected a str, got {value!r}")
        _write_bytes(buf, slot, _utf8(value))
    elif root in _BINARY_ROOTS:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _BadValue(f"expected bytes, got {value!r}")
        _write_bytes(buf, slot, bytes(value))
    elif root is TypeRoot.DECIMAL:
        assert isinstance(t, AtomicType) and t.precision is not None and t.scale is not None
        compact = t.precision <= MAX_COMPACT_DECIMAL_PRECISION
        try:
            # Java's BinaryWriter stores a compact decimal's unscaled long without checking the
            # precision, and DECIMAL sums (FieldSumAgg, DecimalUtils.add on longs) can exceed it.
            unscaled = decimal_to_unscaled(value, 19 if compact else t.precision, t.scale)
        except ValidationError as e:
            raise _BadValue(e.message) from e
        if compact:
            if not -(2**63) <= unscaled < 2**63:
                raise _BadValue(f"{value} does not fit DECIMAL({t.precision}, {t.scale}) (a long)")
            _I64.pack_into(buf, slot, unscaled)
        else:
            _append_var(buf, slot, _java_big_integer_bytes(unscaled), reserve=16)
    elif root in _TIMESTAMP_ROOTS:
        ts = _to_timestamp(value)
        try:
            if _precision(t) <= MAX_COMPACT_TIMESTAMP_PRECISION:
                _I64.pack_into(buf, slot, ts.millisecond)
            else:
                offset = len(buf)
                buf += _I64.pack(ts.millisecond)
                _U64.pack_into(buf, slot, (offset << 32) | ts.nano_of_millisecond)
        except struct.error as e:
            raise _BadValue(f"{value!r} is out of range") from e
    elif isinstance(t, ArrayType):
        if not isinstance(value, (list, tuple)):
            raise _BadValue(f"expected a list or tuple, got {value!r}")
        _append_var(buf, slot, bytes(_encode_array(value, t.element)))
    elif isinstance(t, RowType):
        if not isinstance(value, (list, tuple)):
            raise _BadValue(f"expected a tuple of {len(t.fields)} values, got {value!r}")
        _append_var(buf, slot, bytes(_encode_row(value, [f.type for f in t.fields])))
    else:
        _check_supported(t)
        raise UnsupportedError(f"BinaryRow values of type {t} are not supported", type=str(t))


def _encode_row(values: Sequence[Any], types: Sequence[DataType]) -> bytearray:
    arity = len(types)
    if len(values) != arity:
        raise _BadValue(f"{len(values)} values for {arity} fields")
    header = null_bitset_width(arity)
    buf = bytearray(header + 8 * arity)
    for i, (value, t) in enumerate(zip(values, types)):
        slot = header + 8 * i
        try:
            if value is None:
                buf[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
                if _is_noncompact(t):
                    # RowHelper.writeNulls: the writer still reserves the variable-part space.
                    _append_var(buf, slot, b"", reserve=16 if t.root is TypeRoot.DECIMAL else 8)
            else:
                _write(buf, slot, value, t)
        except _BadValue as e:
            raise _BadValue(f"field {i} ({t}): {e}") from e
    return buf


def _encode_array(values: Sequence[Any], element: DataType) -> bytearray:
    n = len(values)
    header = _array_header_size(n)
    width = _element_size(element)
    buf = bytearray(_round8(header + width * n))
    _I32.pack_into(buf, 0, n)
    for j, value in enumerate(values):
        try:
            if value is None:
                buf[4 + (j >> 3)] |= 1 << (j & 7)
            else:
                _write(buf, header + width * j, value, element)
        except _BadValue as e:
            raise _BadValue(f"element {j} ({element}): {e}") from e
    return buf


def encode_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The BinaryRow bytes (RowKind INSERT, no arity prefix) of ``values`` typed by ``types``.

    Raises ValidationError naming the field for a value that does not fit its type, UnsupportedError
    for MAP/MULTISET/VARIANT/BLOB.
    """
    try:
        return bytes(_encode_row(values, types))
    except _BadValue as e:
        raise ValidationError(f"cannot encode BinaryRow: {e}") from e


def serialize_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The serialized form used in manifests, keys and stats: 4-byte big-endian arity + ``encode_row``."""
    return _BE_I32.pack(len(types)) + encode_row(values, types)


# ---- decoding --------------------------------------------------------------------------------------------


class _Corrupt(Exception):
    """Internal: undecodable bytes; re-raised as CorruptMetadataError with the path."""


def _var_range(word: int, size: int, what: str) -> tuple[int, int]:
    """(offset, length) of a variable-part pointer, checked against the container size."""
    offset, length = word >> 32, word & 0xFFFFFFFF
    if offset >= 1 << 31 or length >= 1 << 31 or offset + length > size:
        raise _Corrupt(f"{what} points at [{offset}, {offset + length}) outside its {size} bytes")
    return offset, length


def _read_bytes(buf: bytes, base: int, size: int, pos: int) -> bytes:
    word = _U64.unpack_from(buf, pos)[0]
    if word & _INLINE_MARK:
        length = (word >> 56) & 0x7F
        if length > _MAX_INLINE:
            raise _Corrupt(f"inline length {length} > {_MAX_INLINE}")
        return buf[pos : pos + length]
    offset, length = _var_range(word, size, "variable-length value")
    return buf[base + offset : base + offset + length]


def _read(buf: bytes, base: int, size: int, pos: int, t: DataType) -> Any:
    """Decode the non-null value of type ``t`` in the slot at ``pos`` of the container ``[base, +size)``."""
    root = t.root
    fmt = _FIXED_FORMATS.get(root)
    if fmt is not None:
        value = fmt.unpack_from(buf, pos)[0]
        if root is TypeRoot.BOOLEAN:
            return value != 0
        if root is TypeRoot.DATE:
            try:
                return _EPOCH_DATE + _dt.timedelta(days=value)
            except OverflowError as e:
                raise _Corrupt(f"DATE {value} days is outside datetime.date's range") from e
        return value
    if root in _STRING_ROOTS:
        try:
            return _read_bytes(buf, base, size, pos).decode("utf-8")
        except UnicodeDecodeError as e:
            raise _Corrupt(f"string is not UTF-8: {e}") from e
    if root in _BINARY_ROOTS:
        return _read_bytes(buf, base, size, pos)
    if root is TypeRoot.DECIMAL:
        assert isinstance(t, AtomicType) and t.precision is not None and t.scale is not None
        if t.precision <= MAX_COMPACT_DECIMAL_PRECISION:
            unscaled = _I64.unpack_from(buf, pos)[0]
        else:
            offset, length = _var_range(_U64.unpack_from(buf, pos)[0], size, "DECIMAL")
            if not 1 <= length <= 16:
                raise _Corrupt(f"DECIMAL of {length} bytes (expected 1..16)")
            unscaled = int.from_bytes(buf[base + offset : base + offset + length], "big", signed=True)
            if abs(unscaled) >= 10**t.precision:
                raise _Corrupt(f"unscaled {unscaled} does not fit {t}")
        return unscaled_to_decimal(unscaled, t.scale)
    if root in _TIMESTAMP_ROOTS:
        if _precision(t) <= MAX_COMPACT_TIMESTAMP_PRECISION:
            return Timestamp(_I64.unpack_from(buf, pos)[0])
        word = _U64.unpack_from(buf, pos)[0]
        offset, nanos = word >> 32, word & 0xFFFFFFFF
        if offset + 8 > size or nanos > 999_999:
            raise _Corrupt(f"TIMESTAMP slot {word:#x} is invalid for a {size}-byte container")
        return Timestamp(_I64.unpack_from(buf, base + offset)[0], nanos)
    if isinstance(t, ArrayType):
        offset, length = _var_range(_U64.unpack_from(buf, pos)[0], size, "ARRAY")
        return _decode_array(buf, base + offset, length, t.element)
    if isinstance(t, RowType):
        offset, length = _var_range(_U64.unpack_from(buf, pos)[0], size, "ROW")
        return _decode_row(buf, base + offset, length, [f.type for f in t.fields])
    _check_supported(t)
    raise UnsupportedError(f"BinaryRow values of type {t} are not supported", type=str(t))


def _decode_row(buf: bytes, base: int, size: int, types: Sequence[DataType]) -> tuple[Any, ...]:
    arity = len(types)
    header = null_bitset_width(arity)
    if size < header + 8 * arity:
        raise _Corrupt(f"row of {size} bytes is shorter than the fixed part of {arity} fields")
    out: list[Any] = []
    for i, t in enumerate(types):
        bit = i + 8
        if buf[base + (bit >> 3)] & (1 << (bit & 7)):
            out.append(None)
            continue
        try:
            out.append(_read(buf, base, size, base + header + 8 * i, t))
        except _Corrupt as e:
            raise _Corrupt(f"field {i} ({t}): {e}") from e
    return tuple(out)


def _decode_array(buf: bytes, base: int, size: int, element: DataType) -> tuple[Any, ...]:
    if size < 4:
        raise _Corrupt(f"array of {size} bytes has no element count")
    n = _I32.unpack_from(buf, base)[0]
    header = _array_header_size(n) if n >= 0 else 0
    width = _element_size(element)
    # Bounding n by the container size first keeps a corrupt count from allocating anything big.
    if n < 0 or header + width * n > size:
        raise _Corrupt(f"array count {n} does not fit its {size} bytes")
    out: list[Any] = []
    for j in range(n):
        if buf[base + 4 + (j >> 3)] & (1 << (j & 7)):
            out.append(None)
            continue
        try:
            out.append(_read(buf, base, size, base + header + width * j, element))
        except _Corrupt as e:
            raise _Corrupt(f"element {j} ({element}): {e}") from e
    return tuple(out)


def decode_row(
    data: bytes | bytearray | memoryview, types: Sequence[DataType], *, path: str | None = None
) -> tuple[Any, ...]:
    """Decode BinaryRow bytes (no arity prefix) into a tuple of Python values typed by ``types``.

    Raises CorruptMetadataError (naming ``path`` when given) for truncated bytes or out-of-range offsets.
    """
    buf = bytes(data)
    try:
        return _decode_row(buf, 0, len(buf), types)
    except _Corrupt as e:
        raise CorruptMetadataError(f"corrupt BinaryRow: {e}", path=path) from e
    except (struct.error, IndexError) as e:  # a read past the end of a truncated buffer
        raise CorruptMetadataError(f"corrupt BinaryRow: truncated ({e})", path=path) from e


def serialized_arity(data: bytes | bytearray | memoryview, *, path: str | None = None) -> int:
    """The arity prefix of a serialized BinaryRow."""
    if len(data) < 4:
        raise CorruptMetadataError(f"serialized BinaryRow of {len(data)} bytes has no arity", path=path)
    arity: int = _BE_I32.unpack_from(data, 0)[0]
    if arity < 0:
        raise CorruptMetadataError(f"serialized BinaryRow has negative arity {arity}", path=path)
    return arity


def deserialize_row(
    data: bytes | bytearray | memoryview, types: Sequence[DataType], *, path: str | None = None
) -> tuple[Any, ...]:
    """Decode the serialized form (arity prefix + row bytes); the arity must equal ``len(types)``."""
    arity = serialized_arity(data, path=path)
    if arity != len(types):
        raise CorruptMetadataError(
            f"serialized BinaryRow has arity {arity}, expected {len(types)}", path=path, arity=arity
        )
    return decode_row(memoryview(data)[4:], types, path=path)
