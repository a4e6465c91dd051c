"""Row layouts of DataFileMeta and IndexFileMeta inside CommitMessage bytes, for every version 3..14.

Java writes each DataFileMeta and IndexFileMeta of a CommitMessage as one BinaryRow (``int size`` + row
bytes, no arity) whose schema grew release by release; ``CommitMessageSerializer`` picks the schema from the
message version (apache/paimon ``table/sink/CommitMessageSerializer.java`` and its history):

=======  =================================================  ==============================================
version  DataFileMeta row                                   IndexFileMeta row
=======  =================================================  ==============================================
3        16 fields, up to _FILE_SOURCE                      5 fields, dv rows (name, offset, length)
         (``DataFileMeta09Serializer``, Paimon 0.9)         (``IndexFileMetaV1Deserializer``)
4        17, + _VALUE_STATS_COLS (``DataFileMeta10Legacy``)  as 3
5        as 4                                               dv rows + _CARDINALITY (``...V2...``)
6, 7     18, + _EXTERNAL_PATH (``DataFileMeta12Legacy``)     as 5
8        20, + _FIRST_ROW_ID; _WRITE_COLS always null        as 5
         (``DataFileMetaFirstRowIdLegacySerializer``)
9, 10    20, + _WRITE_COLS (``DataFileMetaWriteColsLegacy``) 6 fields, + _EXTERNAL_PATH (``...V3...``)
11       as 9                                               7, + _GLOBAL_INDEX of 5 fields (``...V4...``)
12       as 9                                               _GLOBAL_INDEX of 6 fields (+ _SOURCE_META)
13, 14   21, + _WRITE_COLS_SEQUENCES (``DataFileMetaSerializer``)  as 12 (``IndexFileMetaSerializer``)
=======  =================================================  ==============================================

A BinaryRow may be read with fewer fields than it was written with (the null bitset of 15..56 fields is one
word and variable-length offsets are absolute), which is how Java reads version 8: its rows were written with
19 fields by one snapshot of Java master and 20 by the next, and Java ignores field 19 when reading them.

Values a version cannot carry make :func:`encode_data_file` / :func:`encode_index_file` raise
``ValidationError`` naming the field, instead of being dropped silently.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from paimon_meta.errors import CorruptMetadataError, PaimonMetaError, ValidationError
from paimon_meta.model.binary_row import Timestamp, decode_row, encode_row, fixed_part_size
from paimon_meta.model.manifest import (
    DataFileMeta,
    DeletionVectorMeta,
    FileSource,
    GlobalIndexMeta,
    IndexFileMeta,
    SimpleStats,
)
from paimon_meta.model.types import (
    BIGINT,
    BYTES,
    INT,
    STRING,
    TIMESTAMP,
    TINYINT,
    ArrayType,
    DataField,
    DataType,
    RowType,
)

# Errors a row decoder may raise on hostile bytes besides our own; all of them mean "corrupt".
_DECODE_ERRORS = (PaimonMetaError, ValueError, IndexError, OverflowError, struct.error)


def _row_type(*fields: tuple[str, DataType], nullable: bool = False) -> RowType:
    return RowType(nullable, tuple(DataField(i, name, t) for i, (name, t) in enumerate(fields)))


# SimpleStats.SCHEMA: min/max are serialized BinaryRows (arity + bytes), null counts a nullable-long array.
_STATS = _row_type(
    ("_MIN_VALUES", BYTES(False)),
    ("_MAX_VALUES", BYTES(False)),
    ("_NULL_COUNTS", ArrayType(True, BIGINT())),
)
_STRINGS_NOT_NULL = ArrayType(False, STRING(False))
_NULLABLE_STRINGS = ArrayType(True, STRING(False))

# DataFileMeta.SCHEMA in Java order: (Java field name, attribute of spec.manifest.DataFileMeta, type, kind).
# ``kind`` says how a value converts and what is checked: see _encode_data_value / _decode_data_value.
_DATA_FILE_FIELDS: tuple[tuple[str, str, DataType, str], ...] = (
    ("_FILE_NAME", "file_name", STRING(False), "str"),
    ("_FILE_SIZE", "file_size", BIGINT(False), "i64"),
    ("_ROW_COUNT", "row_count", BIGINT(False), "i64"),
    ("_MIN_KEY", "min_key", BYTES(False), "row"),
    ("_MAX_KEY", "max_key", BYTES(False), "row"),
    ("_KEY_STATS", "key_stats", _STATS, "stats"),
    ("_VALUE_STATS", "value_stats", _STATS, "stats"),
    ("_MIN_SEQUENCE_NUMBER", "min_sequence_number", BIGINT(False), "i64"),
    ("_MAX_SEQUENCE_NUMBER", "max_sequence_number", BIGINT(False), "i64"),
    ("_SCHEMA_ID", "schema_id", BIGINT(False), "i64"),
    ("_LEVEL", "level", INT(False), "i32"),
    ("_EXTRA_FILES", "extra_files", _STRINGS_NOT_NULL, "strs"),
    ("_CREATION_TIME", "creation_time", TIMESTAMP(3), "millis"),
    ("_DELETE_ROW_COUNT", "delete_row_count", BIGINT(), "i64"),
    ("_EMBEDDED_FILE_INDEX", "embedded_index", BYTES(), "bytes"),
    ("_FILE_SOURCE", "file_source", TINYINT(), "source"),
    ("_VALUE_STATS_COLS", "value_stats_cols", _NULLABLE_STRINGS, "strs"),
    ("_EXTERNAL_PATH", "external_path", STRING(), "str"),
    ("_FIRST_ROW_ID", "first_row_id", BIGINT(), "i64"),
    ("_WRITE_COLS", "write_cols", _NULLABLE_STRINGS, "strs"),
    ("_WRITE_COLS_SEQUENCES", "write_cols_sequences", ArrayType(True, BIGINT(False)), "i64s"),
)
_FIRST_NULLABLE_DATA_FIELD = 12  # fields before _CREATION_TIME are NOT NULL in every version

_DV_V1 = _row_type(("f0", STRING(False)), ("f1", INT(False)), ("f2", INT(False)))
_DV_V2 = _row_type(("f0", STRING(False)), ("f1", INT(False)), ("f2", INT(False)), ("_CARDINALITY", BIGINT()))
_GLOBAL_INDEX_FIELDS: tuple[tuple[str, DataType], ...] = (
    ("_ROW_RANGE_START", BIGINT(False)),
    ("_ROW_RANGE_END", BIGINT(False)),
    ("_INDEX_FIELD_ID", INT(False)),
    ("_EXTRA_FIELD_IDS", ArrayType(True, INT(False))),
    ("_INDEX_META", BYTES()),
    ("_SOURCE_META", BYTES()),
)


@dataclass(frozen=True, slots=True)
class RowLayout:
    """How one CommitMessage version lays out its DataFileMeta and IndexFileMeta rows."""

    version: int
    data_write_fields: int  # DataFileMeta fields written
    data_read_fields: int  # ... and read (fewer only for version 8, see the module docstring)
    dv_cardinality: bool  # deletion-vector rows carry _CARDINALITY
    index_fields: int  # 5, 6 (+ _EXTERNAL_PATH) or 7 (+ _GLOBAL_INDEX)
    global_index_fields: int  # 5 or 6 (+ _SOURCE_META); 0 when index_fields < 7

    @property
    def data_write_types(self) -> tuple[DataType, ...]:
        return tuple(f[2] for f in _DATA_FILE_FIELDS[: self.data_write_fields])

    @property
    def data_read_types(self) -> tuple[DataType, ...]:
        return tuple(f[2] for f in _DATA_FILE_FIELDS[: self.data_read_fields])

    @property
    def index_types(self) -> tuple[DataType, ...]:
        dv = _DV_V2 if self.dv_cardinality else _DV_V1
        types: list[DataType] = [
            STRING(False),
            STRING(False),
            BIGINT(False),
            BIGINT(False),
            ArrayType(True, dv),
        ]
        if self.index_fields >= 6:
            types.append(STRING())
        if self.index_fields >= 7:
            types.append(_row_type(*_GLOBAL_INDEX_FIELDS[: self.global_index_fields], nullable=True))
        return tuple(types)


# The table of the module docstring: (version, data fields written, read, dv cardinality, index fields,
# global index fields).
LAYOUTS: MappingProxyType[int, RowLayout] = MappingProxyType(
    {
        3: RowLayout(3, 16, 16, False, 5, 0),
        4: RowLayout(4, 17, 17, False, 5, 0),
        5: RowLayout(5, 17, 17, True, 5, 0),
        6: RowLayout(6, 18, 18, True, 5, 0),
        7: RowLayout(7, 18, 18, True, 5, 0),
        8: RowLayout(8, 20, 19, True, 5, 0),
        9: RowLayout(9, 20, 20, True, 6, 0),
        10: RowLayout(10, 20, 20, True, 6, 0),
        11: RowLayout(11, 20, 20, True, 7, 5),
        12: RowLayout(12, 20, 20, True, 7, 6),
        13: RowLayout(13, 21, 21, True, 7, 6),
        14: RowLayout(14, 21, 21, True, 7, 6),
    }
)


# ---- checks shared by encode and decode ---------------------------------------------------------------


def serialized_row_problem(data: bytes) -> str | None:
    """Why ``data`` is not a serialized BinaryRow (4-byte big-endian arity + fixed part), or None."""
    if len(data) < 4:
        return f"serialized BinaryRow of {len(data)} bytes lacks its 4-byte arity"
    arity = int.from_bytes(data[:4], "big", signed=True)
    if arity < 0:
        return f"serialized BinaryRow has negative arity {arity}"
    fixed = fixed_part_size(arity)
    if len(data) - 4 < fixed:
        return f"serialized BinaryRow of arity {arity} needs {fixed} bytes, has {len(data) - 4}"
    return None


def _int_problem(value: object, bits: int) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return f"expected an int, got {type(value).__name__}"
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        return f"{value} does not fit a signed {bits}-bit integer"
    return None


# ---- DataFileMeta ---------------------------------------------------------------------------------------


def encode_data_file(meta: DataFileMeta, layout: RowLayout, where: str) -> bytes:
    """The BinaryRow bytes (no arity) of ``meta`` in ``layout``; ValidationError names what cannot go."""
    v = layout.version
    # Version 8: Java's DataFileMetaFirstRowIdLegacySerializer writes (and reads) _WRITE_COLS as null.
    carried = layout.data_read_fields if v == 8 else layout.data_write_fields
    for java, attr, _, _ in _DATA_FILE_FIELDS[carried:]:
        if getattr(meta, attr) is not None:
            raise ValidationError(
                f"{where}: CommitMessage version {v} cannot carry DataFileMeta.{attr} ({java})",
                field=attr,
                version=v,
            )
    fast = _fast_data_file(meta, layout.data_write_fields)
    return fast if fast is not None else _generic_data_file(meta, layout, where)


def _generic_data_file(meta: DataFileMeta, layout: RowLayout, where: str) -> bytes:
    values = [
        _encode_data_value(getattr(meta, attr), kind, f"{where}.{java}")
        for java, attr, _, kind in _DATA_FILE_FIELDS[: layout.data_write_fields]
    ]
    return _encode(values, layout.data_write_types, where)


# ---- the DataFileMeta row, specialised ---------------------------------------------------------------
# A commit of 10,000 files serialises 10,000 of these rows for its recovery record; the generic encoder
# spends ~18 us on each. ``_fast_data_file`` writes the same bytes (a property test compares them with
# the generic path on random files) for the values writers produce, and returns None for anything
# else (out-of-range ints, non-ASCII names, non-empty string arrays, ...), which then takes the checked
# generic path with its precise errors.

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_PACK_U64 = struct.Struct("<Q").pack_into
_PACK_I64 = struct.Struct("<q").pack_into
_PACK_I32 = struct.Struct("<i").pack_into
_PACK_I8 = struct.Struct("<b").pack_into
_PAD = tuple(bytes(n) for n in range(8))
_EMPTY_ARRAY = bytes(8)  # BinaryArray of 0 elements: the count (0) and padding to 8 bytes
_STATS_CACHE: dict[SimpleStats, bytes] = {}


def _row_ok(data: Any) -> bool:
    return data.__class__ is bytes and serialized_row_problem(data) is None


def _fast_stats(stats: SimpleStats) -> bytes | None:
    """The nested SimpleStats row (min, max: BYTES; null counts: ARRAY<BIGINT>) or None."""
    counts = stats.null_counts or ()
    if counts.__class__ is not tuple:
        return None
    cached = _STATS_CACHE.get(stats)
    if cached is not None:
        return cached
    mins, maxs = stats.min_values, stats.max_values
    if not (_row_ok(mins) and _row_ok(maxs)):
        return None
    n = len(counts)
    header = 4 + ((n + 31) >> 5) * 4
    array = bytearray((header + 8 * n + 7) & ~7)
    _PACK_I32(array, 0, n)
    for j, c in enumerate(counts):
        if c is None:
            array[4 + (j >> 3)] |= 1 << (j & 7)
        elif c.__class__ is int and _I64_MIN <= c <= _I64_MAX:
            _PACK_I64(array, header + 8 * j, c)
        else:
            return None
    fixed = bytearray(32)  # header (8) + 3 slots
    parts: list[bytes | bytearray] = [fixed]
    size = 32
    for slot, data in ((8, mins), (16, maxs), (24, array)):
        size = _put(fixed, slot, data, parts, size)
    out = b"".join(parts)
    if len(_STATS_CACHE) >= 4096:
        _STATS_CACHE.clear()
    _STATS_CACHE[stats] = out
    return out


def _put(
    fixed: bytearray, slot: int, data: bytes | bytearray, parts: list[bytes | bytearray], size: int
) -> int:
    """Write ``data`` into ``slot`` (inline when <= 7 bytes, else in the variable part); the new size."""
    n = len(data)
    if n <= 7:
        fixed[slot : slot + n] = data
        fixed[slot + 7] = 0x80 | n
        return size
    _PACK_U64(fixed, slot, (size << 32) | n)
    parts.append(data)
    pad = -n & 7
    if pad:
        parts.append(_PAD[pad])
    return size + n + pad


def _fast_data_file(meta: DataFileMeta, fields: int) -> bytes | None:
    if fields < 16 or fields > 21:
        return None
    fixed_size = 8 + 8 * fields  # one header word: fields <= 56
    fixed = bytearray(fixed_size)
    parts: list[bytes | bytearray] = [fixed]
    size = fixed_size
    name = meta.file_name
    if name.__class__ is not str or not name.isascii():
        return None
    size = _put(fixed, 8, name.encode("ascii"), parts, size)
    for slot, value in ((16, meta.file_size), (24, meta.row_count)):
        if value.__class__ is not int or not _I64_MIN <= value <= _I64_MAX:
            return None
        _PACK_I64(fixed, slot, value)
    for slot, key in ((32, meta.min_key), (40, meta.max_key)):
        if not _row_ok(key):
            return None
        size = _put(fixed, slot, key, parts, size)
    for slot, stats in ((48, meta.key_stats), (56, meta.value_stats)):
        if stats.__class__ is not SimpleStats:
            return None
        row = _fast_stats(stats)
        if row is None:
            return None
        size = _put(fixed, slot, row, parts, size)
    for slot, value in ((64, meta.min_sequence_number), (72, meta.max_sequence_number), (80, meta.schema_id)):
        if value.__class__ is not int or not _I64_MIN <= value <= _I64_MAX:
            return None
        _PACK_I64(fixed, slot, value)
    level = meta.level
    if level.__class__ is not int or not _I32_MIN <= level <= _I32_MAX:
        return None
    _PACK_I32(fixed, 88, level)
    if meta.extra_files != ():
        return None
    size = _put(fixed, 96, _EMPTY_ARRAY, parts, size)
    # Nullable from here on: field i's null bit is bit i + 8 of the header.
    optional: tuple[tuple[Any, str], ...] = (
        (meta.creation_time, "i64"),
        (meta.delete_row_count, "i64"),
        (meta.embedded_index, "bytes"),
        (meta.file_source, "i8"),
        (meta.value_stats_cols, "strs"),
        (meta.external_path, "str"),
        (meta.first_row_id, "i64"),
        (meta.write_cols, "strs"),
        (meta.write_cols_sequences, "i64s"),
    )
    for i in range(12, fields):
        value, kind = optional[i - 12]
        slot = 8 + 8 * i
        if value is None:
            fixed[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
        elif kind == "i64":
            if value.__class__ is not int or not _I64_MIN <= value <= _I64_MAX:
                return None
            _PACK_I64(fixed, slot, value)
        elif kind == "i8":
            if value.__class__ is not FileSource:
                return None
            _PACK_I8(fixed, slot, int(value))
        elif kind == "bytes":
            if value.__class__ is not bytes:
                return None
            size = _put(fixed, slot, value, parts, size)
        elif kind == "str":
            if value.__class__ is not str or not value.isascii():
                return None
            size = _put(fixed, slot, value.encode("ascii"), parts, size)
        elif value == ():  # "strs" / "i64s": only the empty array here
            size = _put(fixed, slot, _EMPTY_ARRAY, parts, size)
        else:
            return None
    return b"".join(parts)


def _encode_data_value(value: Any, kind: str, where: str) -> object:
    if value is None:
        return None
    problem: str | None
    if kind == "stats":
        return _encode_stats(value, where)
    if kind in ("strs", "i64s"):
        if not isinstance(value, tuple):
            raise ValidationError(f"{where}: expected a tuple, got {type(value).__name__}")
        for item in value:
            problem = _str_problem(item) if kind == "strs" else _int_problem(item, 64)
            if problem:
                raise ValidationError(f"{where}: element {item!r}: {problem}")
        return list(value)
    if kind == "str":
        problem = _str_problem(value)
    elif kind in ("i64", "millis"):
        problem = _int_problem(value, 64)
    elif kind == "i32":
        problem = _int_problem(value, 32)
    elif kind == "source":
        problem = None if isinstance(value, FileSource) else f"expected a FileSource, got {value!r}"
    elif not isinstance(value, bytes):
        problem = f"expected bytes, got {type(value).__name__}"
    else:  # "row": min/max keys are serialized BinaryRows; "bytes" (the embedded index) is opaque
        problem = serialized_row_problem(value) if kind == "row" else None
    if problem:
        raise ValidationError(f"{where}: {problem}")
    if kind == "millis":  # TIMESTAMP(3) is stored compact, as epoch millis
        return Timestamp(value, 0)
    if kind == "source":
        return int(value)
    return value


def _str_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"expected a str, got {type(value).__name__}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"not encodable as UTF-8: {e.reason}"
    return None


def _encode_stats(stats: SimpleStats, where: str) -> tuple[object, ...]:
    for name, row in (("_MIN_VALUES", stats.min_values), ("_MAX_VALUES", stats.max_values)):
        problem = serialized_row_problem(row) if isinstance(row, bytes) else "expected bytes"
        if problem:
            raise ValidationError(f"{where}.{name}: {problem}")
    # Java never has a null array here (SimpleStats.fromRow would fail on one); like pypaimon 2.1's writer,
    # unknown counts (None) are written as the empty array of Java's EMPTY_STATS.
    counts = stats.null_counts or ()
    for c in counts:
        problem = None if c is None else _int_problem(c, 64)
        if problem:
            raise ValidationError(f"{where}._NULL_COUNTS: element {c!r}: {problem}")
    return (stats.min_values, stats.max_values, list(counts))


def decode_data_file(row: bytes, layout: RowLayout, where: str, path: str | None) -> DataFileMeta:
    """Decode one DataFileMeta row of ``layout``. CorruptMetadataError names ``where`` and ``path``."""
    values = _decode(row, layout.data_read_types, where, path)
    out: dict[str, object] = {}
    for i, ((java, attr, _, kind), value) in enumerate(zip(_DATA_FILE_FIELDS, values)):
        here = f"{where}.{java}"
        if value is None:
            if i < _FIRST_NULLABLE_DATA_FIELD:
                raise CorruptMetadataError(f"{here} is null but is NOT NULL in Java's schema", path=path)
            continue
        out[attr] = _decode_data_value(value, kind, here, path)
    return DataFileMeta(**out)  # type: ignore[arg-type]


def _decode_data_value(value: Any, kind: str, where: str, path: str | None) -> object:
    if kind == "stats":
        min_values, max_values, counts = value
        for name, r in (("_MIN_VALUES", min_values), ("_MAX_VALUES", max_values)):
            _check_row_bytes(r, f"{where}.{name}", path)
        if counts is None:
            raise CorruptMetadataError(
                f"{where}._NULL_COUNTS is null; Java always writes an array", path=path
            )
        return SimpleStats(bytes(min_values), bytes(max_values), tuple(counts))
    if kind in ("strs", "i64s"):
        if any(item is None for item in value):
            raise CorruptMetadataError(f"{where} has a null element in an array of NOT NULL", path=path)
        return tuple(value)
    if kind == "millis":
        return int(value.millisecond)
    if kind == "source":
        if value not in (0, 1):
            raise CorruptMetadataError(
                f"{where} is {value}, not a FileSource (0 APPEND, 1 COMPACT)", path=path
            )
        return FileSource(value)
    if kind == "row":
        _check_row_bytes(value, where, path)
    return bytes(value) if kind in ("row", "bytes") else value


def _check_row_bytes(value: Any, where: str, path: str | None) -> None:
    if value is None:
        raise CorruptMetadataError(f"{where} is null but is NOT NULL in Java's schema", path=path)
    problem = serialized_row_problem(bytes(value))
    if problem:
        raise CorruptMetadataError(f"{where}: {problem}", path=path)


# ---- IndexFileMeta --------------------------------------------------------------------------------------


def encode_index_file(meta: IndexFileMeta, layout: RowLayout, where: str) -> bytes:
    """The BinaryRow bytes (no arity) of ``meta`` in ``layout``; ValidationError names what cannot go."""
    v = layout.version

    def refuse(attr: str) -> ValidationError:
        return ValidationError(
            f"{where}: CommitMessage version {v} cannot carry IndexFileMeta.{attr}", field=attr, version=v
        )

    for name, value in (("index_type", meta.index_type), ("file_name", meta.file_name)):
        problem = _str_problem(value)
        if problem:
            raise ValidationError(f"{where}.{name}: {problem}")
    for name, num in (("file_size", meta.file_size), ("row_count", meta.row_count)):
        problem = _int_problem(num, 64)
        if problem:
            raise ValidationError(f"{where}.{name}: {problem}")
    dv: list[tuple[object, ...]] | None = None
    if meta.dv_ranges is not None:
        dv = [_encode_dv(d, layout, f"{where}.dv_ranges[{i}]", refuse) for i, d in enumerate(meta.dv_ranges)]
    values: list[object] = [meta.index_type, meta.file_name, meta.file_size, meta.row_count, dv]
    if layout.index_fields >= 6:
        if meta.external_path is not None and _str_problem(meta.external_path):
            raise ValidationError(f"{where}.external_path: {_str_problem(meta.external_path)}")
        values.append(meta.external_path)
    elif meta.external_path is not None:
        raise refuse("external_path")
    if layout.index_fields >= 7:
        values.append(_encode_global(meta.global_index, layout, where, refuse))
    elif meta.global_index is not None:
        raise refuse("global_index")
    return _encode(values, layout.index_types, where)


def _encode_dv(d: DeletionVectorMeta, layout: RowLayout, where: str, refuse: Any) -> tuple[object, ...]:
    problem = _str_problem(d.data_file_name)
    for value, bits in ((d.offset, 32), (d.length, 32), (d.cardinality, 64)):
        problem = problem or (None if value is None else _int_problem(value, bits))
    if problem:
        raise ValidationError(f"{where}: {problem}")
    if not layout.dv_cardinality:
        if d.cardinality is not None:
            raise refuse("dv_ranges[].cardinality")
        return (d.data_file_name, d.offset, d.length)
    return (d.data_file_name, d.offset, d.length, d.cardinality)


def _encode_global(g: GlobalIndexMeta | None, layout: RowLayout, where: str, refuse: Any) -> object:
    if g is None:
        return None
    problem = _int_problem(g.row_range_start, 64) or _int_problem(g.row_range_end, 64)
    problem = problem or _int_problem(g.index_field_id, 32)
    for f in g.extra_field_ids or ():
        problem = problem or _int_problem(f, 32)
    for blob in (g.index_meta, g.source_meta):
        if blob is not None and not isinstance(blob, bytes):
            problem = problem or f"expected bytes, got {type(blob).__name__}"
    if problem:
        raise ValidationError(f"{where}.global_index: {problem}")
    values: list[object] = [
        g.row_range_start,
        g.row_range_end,
        g.index_field_id,
        None if g.extra_field_ids is None else list(g.extra_field_ids),
        g.index_meta,
    ]
    if layout.global_index_fields >= 6:
        values.append(g.source_meta)
    elif g.source_meta is not None:
        raise refuse("global_index.source_meta")
    return tuple(values)


def decode_index_file(row: bytes, layout: RowLayout, where: str, path: str | None) -> IndexFileMeta:
    """Decode one IndexFileMeta row of ``layout``. CorruptMetadataError names ``where`` and ``path``."""
    values = list(_decode(row, layout.index_types, where, path))
    for i, name in enumerate(("_INDEX_TYPE", "_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT")):
        if values[i] is None:
            raise CorruptMetadataError(f"{where}.{name} is null but is NOT NULL in Java's schema", path=path)
    dv: tuple[DeletionVectorMeta, ...] | None = None
    if values[4] is not None:
        metas = []
        for j, item in enumerate(values[4]):
            here = f"{where}._DELETIONS_VECTORS_RANGES[{j}]"
            if item is None or any(x is None for x in item[:3]):
                raise CorruptMetadataError(f"{here} is null or has a null NOT NULL field", path=path)
            cardinality = item[3] if len(item) > 3 else None
            metas.append(DeletionVectorMeta(item[0], item[1], item[2], cardinality))
        dv = tuple(metas)
    external = values[5] if len(values) > 5 else None
    global_index = None
    if len(values) > 6 and values[6] is not None:
        g = values[6]
        if any(x is None for x in g[:3]):
            raise CorruptMetadataError(f"{where}._GLOBAL_INDEX has a null NOT NULL field", path=path)
        extra = g[3]
        if extra is not None and any(x is None for x in extra):
            raise CorruptMetadataError(
                f"{where}._GLOBAL_INDEX._EXTRA_FIELD_IDS has a null element", path=path
            )
        global_index = GlobalIndexMeta(
            g[0],
            g[1],
            g[2],
            None if extra is None else tuple(extra),
            None if g[4] is None else bytes(g[4]),
            None if len(g) < 6 or g[5] is None else bytes(g[5]),
        )
    return IndexFileMeta(values[0], values[1], values[2], values[3], dv, external, global_index)


# ---- the codec boundary ---------------------------------------------------------------------------------


def _encode(values: Sequence[object], types: Sequence[DataType], where: str) -> bytes:
    try:
        return encode_row(values, types)
    except PaimonMetaError as e:
        raise ValidationError(f"{where}: {e.message}") from e


def _decode(row: bytes, types: Sequence[DataType], where: str, path: str | None) -> tuple[Any, ...]:
    try:
        return tuple(decode_row(row, types))
    except _DECODE_ERRORS as e:
        msg = e.message if isinstance(e, PaimonMetaError) else f"{type(e).__name__}: {e}"
        raise CorruptMetadataError(f"{where}: bad BinaryRow ({msg})", path=path) from e
