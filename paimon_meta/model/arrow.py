"""Conversion between Paimon types and Arrow types.

Paimon -> Arrow (what readers return and writers accept):

* BOOLEAN/TINYINT/SMALLINT/INT/BIGINT/FLOAT/DOUBLE -> bool/int8/int16/int32/int64/float32/float64;
* DECIMAL(p, s) -> ``decimal128(p, s)``;
* CHAR/VARCHAR/STRING -> ``string`` (not ``large_string``): it is what pyarrow's Parquet and ORC
  readers produce and what pypaimon returns, so reads need no cast; a single array is limited to
  2 GiB of characters, which batches never approach;
* BINARY(n)/VARBINARY/BYTES -> ``binary``; BLOB -> ``large_binary``;
* DATE -> ``date32``; TIME(p) -> ``time32('ms')`` (Paimon keeps TIME as milliseconds of the day
  whatever the precision, ``org.apache.paimon.types.TimeType``);
* TIMESTAMP(p) -> ``timestamp`` in ``ms`` for p <= 3, ``us`` for p <= 6, ``ns`` otherwise (the units
  Java Paimon writes to Parquet); TIMESTAMP_LTZ(p) the same with ``tz="UTC"``. pypaimon maps p = 0
  to seconds; we keep milliseconds so the unit always matches the file's;
* ARRAY<T> -> ``list<item: T>``, MAP<K, V> -> ``map<K, V>``, MULTISET<T> -> ``map<T, int32>`` (element
  to count, as Java's Arrow conversion), ROW<...> -> ``struct<...>``.

Arrow -> Paimon (for ``create_table`` from an Arrow schema) is the inverse; ``string`` and
``large_string`` both become STRING, ``binary`` and ``large_binary`` BYTES, ``fixed_size_binary(n)``
BINARY(n), ``time32/time64`` TIME(0/3/6/9) by unit. Field ids are assigned as Java's
``Schema.Builder`` and pypaimon do: each top-level field takes the next id, then the fields nested in
its type take ids from the same counter.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.types import (
    BIGINT,
    BINARY,
    BOOLEAN,
    BYTES,
    DATE,
    DECIMAL,
    DOUBLE,
    FLOAT,
    INT,
    SMALLINT,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    TINYINT,
    ArrayType,
    AtomicType,
    DataField,
    DataType,
    MapType,
    MultisetType,
    RowType,
    TypeRoot,
)

FIELD_ID_KEY = b"PARQUET:field_id"  # the field metadata pyarrow's Parquet writer turns into field ids

_SIMPLE_TO_ARROW: dict[TypeRoot, pa.DataType] = {
    TypeRoot.BOOLEAN: pa.bool_(),
    TypeRoot.TINYINT: pa.int8(),
    TypeRoot.SMALLINT: pa.int16(),
    TypeRoot.INT: pa.int32(),
    TypeRoot.BIGINT: pa.int64(),
    TypeRoot.FLOAT: pa.float32(),
    TypeRoot.DOUBLE: pa.float64(),
    TypeRoot.CHAR: pa.string(),
    TypeRoot.VARCHAR: pa.string(),
    TypeRoot.BINARY: pa.binary(),
    TypeRoot.VARBINARY: pa.binary(),
    TypeRoot.BLOB: pa.large_binary(),
    TypeRoot.DATE: pa.date32(),
    TypeRoot.TIME: pa.time32("ms"),
}


def timestamp_unit(precision: int) -> str:
    """The Arrow unit holding a Paimon timestamp of ``precision`` fractional digits."""
    if precision <= 3:
        return "ms"
    if precision <= 6:
        return "us"
    return "ns"


def to_arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type of a Paimon type (nullability lives on the Arrow field, not the type)."""
    root = data_type.root
    if isinstance(data_type, AtomicType):
        simple = _SIMPLE_TO_ARROW.get(root)
        if simple is not None:
            return simple
        if root is TypeRoot.DECIMAL:
            assert data_type.precision is not None and data_type.scale is not None
            return pa.decimal128(data_type.precision, data_type.scale)
        if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
            unit = timestamp_unit(data_type.precision if data_type.precision is not None else 6)
            return pa.timestamp(unit, tz="UTC" if root is TypeRoot.TIMESTAMP_LTZ else None)
        raise UnsupportedError(f"Paimon type {data_type} has no Arrow mapping", type=str(data_type))
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("item", to_arrow_type(data_type.element), data_type.element.nullable))
    if isinstance(data_type, MultisetType):
        return pa.map_(
            pa.field("key", to_arrow_type(data_type.element), nullable=False),
            pa.field("value", pa.int32(), nullable=False),
        )
    if isinstance(data_type, MapType):
        return pa.map_(
            pa.field("key", to_arrow_type(data_type.key), nullable=False),
            pa.field("value", to_arrow_type(data_type.value), data_type.value.nullable),
        )
    if isinstance(data_type, RowType):
        return pa.struct([to_arrow_field(f) for f in data_type.fields])
    raise UnsupportedError(f"Paimon type {data_type} has no Arrow mapping", type=str(data_type))


def to_arrow_field(data_field: DataField, *, field_ids: bool = False) -> pa.Field:
    """The Arrow field of a Paimon field; ``field_ids`` adds ``PARQUET:field_id`` metadata (as Java
    Paimon writes it into Parquet files)."""
    metadata: dict[bytes, bytes] = {}
    if field_ids:
        metadata[FIELD_ID_KEY] = str(data_field.id).encode()
    if data_field.description:
        metadata[b"description"] = data_field.description.encode()
    return pa.field(
        data_field.name,
        to_arrow_type(data_field.type),
        nullable=data_field.type.nullable,
        metadata=metadata or None,
    )


def to_arrow_schema(fields: RowType | Iterable[DataField], *, field_ids: bool = False) -> pa.Schema:
    """The Arrow schema of a row type or a sequence of Paimon fields."""
    items = fields.fields if isinstance(fields, RowType) else tuple(fields)
    return pa.schema([to_arrow_field(f, field_ids=field_ids) for f in items])


# ---- Arrow -> Paimon --------------------------------------------------------------------------------


class _IdCounter:
    """The running field-id counter of ``Schema.Builder`` (``highestFieldId``)."""

    def __init__(self, start: int) -> None:
        self.value = start

    def next(self) -> int:
        self.value += 1
        return self.value


def _time_type(pa_type: pa.DataType, nullable: bool) -> DataType:
    precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[pa_type.unit]
    return TIME(precision, nullable)


def from_arrow_type(
    pa_type: pa.DataType, nullable: bool = True, *, _ids: _IdCounter | None = None
) -> DataType:
    """The Paimon type of an Arrow type. Nested ROW fields take ids from ``_ids`` (0, 1, ... if
    none is given). Raises ``UnsupportedError`` for Arrow types Paimon cannot store losslessly."""
    t = pa.types
    ids = _ids if _ids is not None else _IdCounter(-1)
    if t.is_boolean(pa_type):
        return BOOLEAN(nullable)
    if t.is_int8(pa_type):
        return TINYINT(nullable)
    if t.is_int16(pa_type):
        return SMALLINT(nullable)
    if t.is_int32(pa_type):
        return INT(nullable)
    if t.is_int64(pa_type):
        return BIGINT(nullable)
    if t.is_float32(pa_type):
        return FLOAT(nullable)
    if t.is_float64(pa_type):
        return DOUBLE(nullable)
    if t.is_string(pa_type) or t.is_large_string(pa_type) or t.is_string_view(pa_type):
        return STRING(nullable)
    if t.is_fixed_size_binary(pa_type):
        return BINARY(pa_type.byte_width, nullable)
    if t.is_binary(pa_type) or t.is_large_binary(pa_type) or t.is_binary_view(pa_type):
        return BYTES(nullable)
    if t.is_decimal(pa_type):
        if pa_type.precision > 38:
            raise UnsupportedError(
                f"Paimon DECIMAL precision is at most 38, got {pa_type}", type=str(pa_type)
            )
        return DECIMAL(pa_type.precision, pa_type.scale, nullable)
    if t.is_date32(pa_type) or t.is_date64(pa_type):
        return DATE(nullable)
    if t.is_time(pa_type):
        return _time_type(pa_type, nullable)
    if t.is_timestamp(pa_type):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[pa_type.unit]
        return (
            TIMESTAMP_LTZ(precision, nullable) if pa_type.tz is not None else TIMESTAMP(precision, nullable)
        )
    if t.is_list(pa_type) or t.is_large_list(pa_type) or t.is_list_view(pa_type):
        vf = pa_type.value_field
        return ArrayType(nullable, from_arrow_type(vf.type, vf.nullable, _ids=ids))
    if t.is_map(pa_type):
        key = from_arrow_type(pa_type.key_field.type, False, _ids=ids)
        item = pa_type.item_field
        return MapType(nullable, key, from_arrow_type(item.type, item.nullable, _ids=ids))
    if t.is_struct(pa_type):
        fields = []
        for i in range(pa_type.num_fields):
            child = pa_type.field(i)
            fid = ids.next()
            fields.append(DataField(fid, child.name, from_arrow_type(child.type, child.nullable, _ids=ids)))
        return RowType(nullable, tuple(fields))
    if t.is_dictionary(pa_type):
        return from_arrow_type(pa_type.value_type, nullable, _ids=ids)
    raise UnsupportedError(f"Arrow type {pa_type} has no Paimon mapping", type=str(pa_type))


def from_arrow_schema(schema: pa.Schema, *, first_id: int = 0) -> tuple[tuple[DataField, ...], int]:
    """Paimon fields for an Arrow schema and the highest field id used.

    Ids follow Java's ``Schema.Builder``: top-level fields and the fields nested in their types share
    one counter starting at ``first_id``.
    """
    names = schema.names
    if len(set(names)) != len(names):
        raise ValidationError(f"duplicate column names in Arrow schema: {names}")
    ids = _IdCounter(first_id - 1)
    out: list[DataField] = []
    for pa_field in schema:
        fid = ids.next()
        data_type = from_arrow_type(pa_field.type, pa_field.nullable, _ids=ids)
        description = None
        if pa_field.metadata and b"description" in pa_field.metadata:
            description = pa_field.metadata[b"description"].decode()
        out.append(DataField(fid, pa_field.name, data_type, description))
    return tuple(out), ids.value
