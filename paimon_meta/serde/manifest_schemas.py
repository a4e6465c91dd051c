"""Java Paimon's Avro schemas for manifest files, manifest lists and index manifests, and a checker
that a file's writer schema (Avro or ORC) can be read as one of them.

The schemas are what ``AvroSchemaConverter.convertToSchema`` derives from ``ManifestEntry.SCHEMA``,
``ManifestFileMeta.SCHEMA`` and ``IndexManifestEntry.SCHEMA`` (each prefixed with the ``_VERSION``
format identifier by ``ManifestSchemaUtils.withFormatIdentifier``), in Java's field order and
nullability: the top-level record is ``org.apache.paimon.avro.generated.record``, a nested record is
named ``<parent>_<field>``, array elements reuse the array field's name, and a nullable type becomes
the union ``["null", T]`` with ``"default": null``. The header text is rendered the way Java's
``Schema.toString()`` renders it, so files we write carry the same schema bytes as Java's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

_NAMESPACE = "org.apache.paimon.avro.generated"
_TOP = "record"


def _field(name: str, avro_type: Any, *, nullable: bool = False) -> dict[str, Any]:
    if nullable:
        return {"name": name, "type": ["null", avro_type], "default": None}
    return {"name": name, "type": avro_type}


def _record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": fields}


def _array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _simple_stats(name: str) -> dict[str, Any]:
    # SimpleStats.SCHEMA: the null-count array is nullable and so are its elements.
    return _record(
        name,
        [
            _field("_MIN_VALUES", "bytes"),
            _field("_MAX_VALUES", "bytes"),
            _field("_NULL_COUNTS", _array(["null", "long"]), nullable=True),
        ],
    )


def _data_file_meta(name: str) -> dict[str, Any]:
    # DataFileMeta.SCHEMA, all 21 fields in order.
    return _record(
        name,
        [
            _field("_FILE_NAME", "string"),
            _field("_FILE_SIZE", "long"),
            _field("_ROW_COUNT", "long"),
            _field("_MIN_KEY", "bytes"),
            _field("_MAX_KEY", "bytes"),
            _field("_KEY_STATS", _simple_stats(f"{name}__KEY_STATS")),
            _field("_VALUE_STATS", _simple_stats(f"{name}__VALUE_STATS")),
            _field("_MIN_SEQUENCE_NUMBER", "long"),
            _field("_MAX_SEQUENCE_NUMBER", "long"),
            _field("_SCHEMA_ID", "long"),
            _field("_LEVEL", "int"),
            _field("_EXTRA_FILES", _array("string")),
            _field("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}, nullable=True),
            _field("_DELETE_ROW_COUNT", "long", nullable=True),
            _field("_EMBEDDED_FILE_INDEX", "bytes", nullable=True),
            _field("_FILE_SOURCE", "int", nullable=True),  # TINYINT is an Avro int
            _field("_VALUE_STATS_COLS", _array("string"), nullable=True),
            _field("_EXTERNAL_PATH", "string", nullable=True),
            _field("_FIRST_ROW_ID", "long", nullable=True),
            _field("_WRITE_COLS", _array("string"), nullable=True),
            _field("_WRITE_COLS_SEQUENCES", _array("long"), nullable=True),
        ],
    )


def _top(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": _TOP, "namespace": _NAMESPACE, "fields": fields}


MANIFEST_ENTRY_SCHEMA: dict[str, Any] = _top(
    [
        _field("_VERSION", "int"),
        _field("_KIND", "int"),
        _field("_PARTITION", "bytes"),
        _field("_BUCKET", "int"),
        _field("_TOTAL_BUCKETS", "int"),
        _field("_FILE", _data_file_meta(f"{_TOP}__FILE")),
    ]
)

MANIFEST_FILE_META_SCHEMA: dict[str, Any] = _top(
    [
        _field("_VERSION", "int"),
        _field("_FILE_NAME", "string"),
        _field("_FILE_SIZE", "long"),
        _field("_NUM_ADDED_FILES", "long"),
        _field("_NUM_DELETED_FILES", "long"),
        _field("_PARTITION_STATS", _simple_stats(f"{_TOP}__PARTITION_STATS")),
        _field("_SCHEMA_ID", "long"),
        _field("_MIN_BUCKET", "int", nullable=True),
        _field("_MAX_BUCKET", "int", nullable=True),
        _field("_MIN_LEVEL", "int", nullable=True),
        _field("_MAX_LEVEL", "int", nullable=True),
        _field("_MIN_ROW_ID", "long", nullable=True),
        _field("_MAX_ROW_ID", "long", nullable=True),
    ]
)

INDEX_MANIFEST_ENTRY_SCHEMA: dict[str, Any] = _top(
    [
        _field("_VERSION", "int"),
        _field("_KIND", "int"),
        _field("_PARTITION", "bytes"),
        _field("_BUCKET", "int"),
        _field("_INDEX_TYPE", "string"),
        _field("_FILE_NAME", "string"),
        _field("_FILE_SIZE", "long"),
        _field("_ROW_COUNT", "long"),
        # ArrayType(true, DeletionVectorMeta.SCHEMA): RowType.of(...) is nullable, so elements are too.
        _field(
            "_DELETIONS_VECTORS_RANGES",
            _array(
                [
                    "null",
                    _record(
                        f"{_TOP}__DELETIONS_VECTORS_RANGES",
                        [
                            _field("f0", "string"),
                            _field("f1", "int"),
                            _field("f2", "int"),
                            _field("_CARDINALITY", "long", nullable=True),
                        ],
                    ),
                ]
            ),
            nullable=True,
        ),
        _field("_EXTERNAL_PATH", "string", nullable=True),
        _field(
            "_GLOBAL_INDEX",
            _record(
                f"{_TOP}__GLOBAL_INDEX",
                [
                    _field("_ROW_RANGE_START", "long"),
                    _field("_ROW_RANGE_END", "long"),
                    _field("_INDEX_FIELD_ID", "int"),
                    _field("_EXTRA_FIELD_IDS", _array("int"), nullable=True),
                    _field("_INDEX_META", "bytes", nullable=True),
                    _field("_SOURCE_META", "bytes", nullable=True),
                ],
            ),
            nullable=True,
        ),
    ]
)


def schema_text(schema: Mapping[str, Any]) -> str:
    """The compact JSON Java's ``Schema.toString()`` produces (key order as built above)."""
    return json.dumps(schema, separators=(",", ":"))


def strip_logical_types(schema: Any) -> Any:
    """A copy of an Avro schema without ``logicalType`` annotations: the binary encoding is the same,
    and fastavro then hands back plain ints (epoch millis) instead of datetimes."""
    if isinstance(schema, dict):
        return {k: strip_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    return schema


def parse_for_codec(schema: Any) -> Any:
    """fastavro's parsed form of ``schema`` with logical types removed (see strip_logical_types)."""
    return fastavro.parse_schema(strip_logical_types(schema))


# ---- shapes: what a writer schema must look like to be read ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """A schema reduced to what the readers rely on. ``kind`` is int, float, bool, string, bytes,
    record, array or the writer's own type name for anything else; ``label`` names it in errors."""

    kind: str
    nullable: bool
    label: str
    fields: Mapping[str, Shape] | None = None
    items: Shape | None = None


class ShapeError(Exception):
    """A writer schema that cannot be read as the expected one (message names the field)."""


_AVRO_KINDS = {
    "int": "int",
    "long": "int",
    "float": "float",
    "double": "float",
    "boolean": "bool",
    "string": "string",
    "bytes": "bytes",
}


def avro_shape(schema: Any, names: dict[str, Shape] | None = None, namespace: str = "") -> Shape:
    """The shape of a JSON-decoded Avro schema. Raises ShapeError on unions other than ``[null, T]``."""
    names = {} if names is None else names
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) != 1 or len(schema) > 2:
            raise ShapeError(f"unsupported union {json.dumps(schema)[:120]}")
        inner = avro_shape(branches[0], names, namespace)
        return Shape(inner.kind, len(schema) == 2, inner.label, inner.fields, inner.items)
    if isinstance(schema, str):
        if schema in _AVRO_KINDS:
            return Shape(_AVRO_KINDS[schema], False, schema)
        named = names.get(schema) or names.get(f"{namespace}.{schema}")
        if named is None:
            raise ShapeError(f"unknown type {schema!r}")
        return named
    if not isinstance(schema, dict):
        raise ShapeError(f"malformed type {schema!r}")
    typ = schema.get("type")
    if typ == "record":
        name = str(schema.get("name", ""))
        ns = str(schema.get("namespace", namespace))
        full = name if "." in name or not ns else f"{ns}.{name}"
        fields: dict[str, Shape] = {}
        shape = Shape("record", False, full, fields)
        names[full] = shape
        for f in schema.get("fields", ()):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str):
                raise ShapeError(f"malformed field {f!r} in record {full}")
            fields[f["name"]] = avro_shape(f.get("type"), names, full.rpartition(".")[0])
        return shape
    if typ == "array":
        return Shape("array", False, "array", items=avro_shape(schema.get("items"), names, namespace))
    if isinstance(typ, (str, list, dict)) and typ not in ("map", "enum", "fixed"):
        return avro_shape(typ, names, namespace)  # {"type": "long", "logicalType": ...} and friends
    return Shape(str(typ), False, str(typ))


def check_shape(actual: Shape, expected: Shape, where: str, *, nulls_checked_later: bool = False) -> None:
    """Raise ShapeError if ``actual`` cannot be read as ``expected``. Fields the reader does not know are
    ignored; a nullable field absent from ``actual`` reads as null. A required field must be present; a
    required scalar must not be nullable unless the caller checks values for nulls itself
    (``nulls_checked_later``; a null record or array fails conversion anyway)."""
    if actual.kind != expected.kind:
        raise ShapeError(f"{where}: expected {expected.label}, found {actual.label}")
    scalar = expected.kind not in ("record", "array")
    if actual.nullable and not expected.nullable and scalar and not nulls_checked_later:
        raise ShapeError(f"{where}: must not be nullable ({expected.label})")
    if expected.kind == "record":
        assert expected.fields is not None and actual.fields is not None
        for name, exp in expected.fields.items():
            act = actual.fields.get(name)
            if act is None:
                if not exp.nullable:
                    raise ShapeError(f"{where}.{name}: required field is missing")
                continue
            check_shape(act, exp, f"{where}.{name}", nulls_checked_later=nulls_checked_later)
    elif expected.kind == "array":
        assert expected.items is not None and actual.items is not None
        check_shape(actual.items, expected.items, f"{where}[]", nulls_checked_later=nulls_checked_later)


MANIFEST_ENTRY_SHAPE = avro_shape(MANIFEST_ENTRY_SCHEMA)
MANIFEST_FILE_META_SHAPE = avro_shape(MANIFEST_FILE_META_SCHEMA)
INDEX_MANIFEST_ENTRY_SHAPE = avro_shape(INDEX_MANIFEST_ENTRY_SCHEMA)
