"""Read-only ORC manifests (tables created with ``manifest.format=orc``), via ``pyarrow.orc``.

Java writes the same row types as for Avro (``ManifestEntry``, ``ManifestFileMeta``,
``IndexManifestEntry`` with ``_VERSION``), so rows come back as the same name-keyed records the Avro
reader produces and share its converters. ORC has no NOT NULL, so required fields are checked value by
value. ``_CREATION_TIME`` is an ORC timestamp (no time zone) holding the writer's local wall-clock
time; read as UTC it yields the same epoch millis Java stores in Avro's ``timestamp-millis``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.orc as pa_orc

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.serde.manifest_schemas import Shape, ShapeError, check_shape

ORC_MAGIC = b"ORC"


def arrow_shape(t: pa.DataType, label: str = "") -> Shape:
    """The shape (see manifest_schemas.Shape) of an Arrow type read from ORC; everything is nullable."""
    if pa.types.is_integer(t) or pa.types.is_timestamp(t):
        # timestamps are converted to epoch millis before conversion, see _millis
        return Shape("int", True, str(t))
    if pa.types.is_floating(t):
        return Shape("float", True, str(t))
    if pa.types.is_boolean(t):
        return Shape("bool", True, str(t))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return Shape("string", True, str(t))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return Shape("bytes", True, str(t))
    if pa.types.is_struct(t):
        fields = {t.field(i).name: arrow_shape(t.field(i).type) for i in range(t.num_fields)}
        return Shape("record", True, label or "struct", fields)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return Shape("array", True, str(t), items=arrow_shape(t.value_type))
    return Shape(str(t), True, str(t))


def _millis(arr: pa.Array) -> pa.Array:
    """Timestamps (any unit) as int64 epoch millis; other arrays unchanged, structs and lists recursed."""
    t = arr.type
    if pa.types.is_timestamp(t):
        return arr.cast(pa.timestamp("ms"), safe=False).cast(pa.int64())
    if pa.types.is_struct(t):
        assert isinstance(arr, pa.StructArray)
        children = [_millis(arr.field(i)) for i in range(t.num_fields)]
        names = [t.field(i).name for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, names=names, mask=arr.is_null())
    return arr


def _check_nulls(value: Any, shape: Shape, where: str) -> None:
    """Raise ValueError if a field the shape requires is null (recursing into records and arrays)."""
    if value is None:
        if not shape.nullable:
            raise ValueError(f"{where} is null but required")
        return
    if shape.kind == "record" and shape.fields is not None:
        for name, sub in shape.fields.items():
            _check_nulls(value.get(name), sub, f"{where}.{name}")
    elif shape.kind == "array" and shape.items is not None:
        for v in value:
            _check_nulls(v, shape.items, f"{where}[]")


def read_records(data: bytes, expected: Shape, *, what: str, path: str | None = None) -> list[dict[str, Any]]:
    """Every row of an ORC manifest as a dict keyed by field name, checked against ``expected``."""
    if data[:3] != ORC_MAGIC:
        raise CorruptMetadataError(f"not an ORC file (starts with {bytes(data[:4])!r})", path=path)
    try:
        table = pa_orc.ORCFile(pa.BufferReader(data)).read()
    except Exception as e:  # pyarrow reports damaged ORC with several exception types
        raise CorruptMetadataError(f"unreadable ORC {what}: {e!r}", path=path) from e
    top = Shape("record", False, "record", {f.name: arrow_shape(f.type, f.name) for f in table.schema})
    try:
        check_shape(top, expected, "record", nulls_checked_later=True)
    except ShapeError as e:
        raise CorruptMetadataError(f"not a {what}: {e}", path=path) from e
    if table.num_rows == 0:
        return []
    try:
        columns = [pa.chunked_array([_millis(c) for c in col.chunks]) for col in table.columns]
        rows: list[dict[str, Any]] = pa.Table.from_arrays(columns, names=table.column_names).to_pylist()
    except Exception as e:  # damaged column data surfaces here (bad UTF-8, bad lengths, ...)
        raise CorruptMetadataError(f"undecodable ORC {what}: {e!r}", path=path) from e
    for i, row in enumerate(rows):
        try:
            _check_nulls(row, expected, "record")
        except ValueError as e:
            raise CorruptMetadataError(f"{what} row {i}: {e}", path=path) from e
    return rows
