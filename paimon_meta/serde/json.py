"""Schema and snapshot JSON: Paimon's field names, Java's layout, strict types.

Output matches Jackson's default pretty printer as Java Paimon writes these files (``"key" : value``,
two-space indent, inline arrays, ``{ }``/``[ ]`` when empty, no trailing newline), so a schema Java
wrote re-serialises byte for byte. Null fields are omitted as ``@JsonInclude(NON_NULL)`` does in
``Snapshot``. Anything that is not valid JSON of the expected shape raises CorruptMetadataError naming
the file and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.model.types import DataField

__all__ = ["schema_from_json", "schema_to_json", "snapshot_from_json", "snapshot_to_json", "to_java_json"]

# TableSchema.PAIMON_07_VERSION / PAIMON_08_VERSION: schema files from before 0.8 / 0.9 relied on
# other defaults, which SchemaSerializer.deserialize fills in (bucket=1, file.format=orc).
_PAIMON_07_SCHEMA_VERSION = 1
_PAIMON_08_SCHEMA_VERSION = 2
# Snapshot files from before the "version" field existed are version 1.
_LEGACY_SNAPSHOT_VERSION = 1

# ---- Jackson-style pretty printing ---------------------------------------------------------------------

# Python escapes control characters as \u001f, Jackson as \u001F: only the case differs. The lookbehind
# makes sure the backslash starts an escape rather than ending an escaped backslash.
_LOWER_HEX_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")


def _string(s: str) -> str:
    out = json.dumps(s, ensure_ascii=False)
    if "\\u00" in out:
        out = _LOWER_HEX_ESCAPE.sub(lambda m: f"{m.group(1)}\\u00{m.group(2).upper()}", out)
    return out


def _pretty(value: Any, level: int, out: list[str]) -> None:
    if isinstance(value, Mapping):
        if not value:
            out.append("{ }")
            return
        inner = "  " * (level + 1)
        sep = "{\n"
        for key, v in value.items():
            out.append(sep)
            out.append(inner)
            out.append(_string(str(key)))
            out.append(" : ")
            _pretty(v, level + 1, out)
            sep = ",\n"
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[ ]")
            return
        # Jackson indents arrays inline, so they do not add a nesting level for the objects inside.
        sep = "[ "
        for v in value:
            out.append(sep)
            _pretty(v, level, out)
            sep = ", "
        out.append(" ]")
    elif isinstance(value, str):
        out.append(_string(value))
    else:
        out.append(json.dumps(value))


def to_java_json(value: Any) -> str:
    """``value`` rendered as Jackson's DefaultPrettyPrinter renders it."""
    out: list[str] = []
    _pretty(value, 0, out)
    return "".join(out)


# ---- strict field access ------------------------------------------------------------------------------


class _Fields:
    """Typed access to the members of one JSON object; errors name the file and the field."""

    def __init__(self, obj: Any, what: str, path: str | None) -> None:
        if not isinstance(obj, dict):
            raise CorruptMetadataError(f"{what} JSON must be an object, got {type(obj).__name__}", path=path)
        self.obj: dict[str, Any] = obj
        self.what = what
        self.path = path

    def fail(self, key: str, problem: str) -> CorruptMetadataError:
        return CorruptMetadataError(f"{self.what} field {key!r} {problem}", path=self.path, field=key)

    def _get(self, key: str, required: bool) -> Any:
        value = self.obj.get(key)
        if value is None and required:
            raise self.fail(key, "is missing" if key not in self.obj else "is null")
        return value

    def integer(self, key: str, *, required: bool = True) -> int | None:
        value = self._get(key, required)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise self.fail(key, f"must be an integer, got {value!r}")
        return value

    def req_int(self, key: str) -> int:
        value = self.integer(key)
        assert value is not None
        return value

    def text(self, key: str, *, required: bool = True) -> str | None:
        value = self._get(key, required)
        if value is not None and not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {value!r}")
        return value

    def req_str(self, key: str) -> str:
        value = self.text(key)
        assert value is not None
        return value

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self._get(key, True)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"must be a list of strings, got {value!r}")
        return tuple(value)

    def str_map(self, key: str, *, required: bool = True) -> dict[str, str] | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {value!r}")
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, str):
                out[k] = v
            elif isinstance(v, bool):  # Jackson's asText() of a boolean node
                out[k] = "true" if v else "false"
            elif isinstance(v, int):
                out[k] = str(v)
            else:
                raise self.fail(key, f"entry {k!r} must be a string, got {v!r}")
        return out


def _load(text: str | bytes, what: str, path: str | None) -> Any:
    try:
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError as e:
        raise CorruptMetadataError(f"{what} is not UTF-8: {e}", path=path) from e
    except (ValueError, RecursionError) as e:
        raise CorruptMetadataError(f"{what} is not valid JSON: {e}", path=path) from e


# ---- TableSchema ---------------------------------------------------------------------------------------


def schema_to_json(schema: TableSchema) -> str:
    """The ``schema/schema-<id>`` file content, laid out as Java's SchemaSerializer writes it."""
    obj: dict[str, Any] = {
        "version": schema.version,
        "id": schema.id,
        "fields": [f.to_json() for f in schema.fields],
        "highestFieldId": schema.highest_field_id,
        "partitionKeys": list(schema.partition_keys),
        "primaryKeys": list(schema.primary_keys),
        "options": dict(schema.options),
    }
    if schema.comment is not None:
        obj["comment"] = schema.comment
    obj["timeMillis"] = schema.time_millis
    return to_java_json(obj)


def schema_from_json(text: str | bytes, *, path: str | None = None) -> TableSchema:
    """Parse a schema file. Unknown members are ignored (as Java does); legacy defaults are applied."""
    f = _Fields(_load(text, "schema", path), "schema", path)
    version = f.integer("version", required=False)
    version = _PAIMON_07_SCHEMA_VERSION if version is None else version
    raw_fields = f.obj.get("fields")
    if not isinstance(raw_fields, list):
        raise f.fail("fields", f"must be a list, got {raw_fields!r}")
    options = f.str_map("options") or {}
    if version <= _PAIMON_07_SCHEMA_VERSION and "bucket" not in options:
        options["bucket"] = "1"
    if version <= _PAIMON_08_SCHEMA_VERSION and "file.format" not in options:
        options["file.format"] = "orc"
    time_millis = f.integer("timeMillis", required=False)
    try:
        fields = tuple(DataField.from_json(x) for x in raw_fields)
        return TableSchema(
            id=f.req_int("id"),
            fields=fields,
            highest_field_id=f.req_int("highestFieldId"),
            partition_keys=f.str_list("partitionKeys"),
            primary_keys=f.str_list("primaryKeys"),
            options=options,
            comment=f.text("comment", required=False),
            time_millis=0 if time_millis is None else time_millis,
            version=version,
        )
    except ValidationError as e:
        raise CorruptMetadataError(f"invalid schema: {e.message}", path=path, **e.fields) from e


# ---- Snapshot ------------------------------------------------------------------------------------------

# (JSON name, attribute) in the order Java's Jackson getters write them. logOffsets was removed in 1.4;
# it sits where older Java wrote it. Required members are checked in snapshot_from_json.
_SNAPSHOT_FIELDS: tuple[tuple[str, str], ...] = (
    ("version", "version"),
    ("uuid", "uuid"),
    ("id", "id"),
    ("schemaId", "schema_id"),
    ("baseManifestList", "base_manifest_list"),
    ("baseManifestListSize", "base_manifest_list_size"),
    ("deltaManifestList", "delta_manifest_list"),
    ("deltaManifestListSize", "delta_manifest_list_size"),
    ("changelogManifestList", "changelog_manifest_list"),
    ("changelogManifestListSize", "changelog_manifest_list_size"),
    ("indexManifest", "index_manifest"),
    ("commitUser", "commit_user"),
    ("writerVersion", "writer_version"),
    ("commitIdentifier", "commit_identifier"),
    ("commitKind", "commit_kind"),
    ("timeMillis", "time_millis"),
    ("logOffsets", "log_offsets"),
    ("totalRecordCount", "total_record_count"),
    ("deltaRecordCount", "delta_record_count"),
    ("changelogRecordCount", "changelog_record_count"),
    ("watermark", "watermark"),
    ("statistics", "statistics"),
    ("properties", "properties"),
    ("nextRowId", "next_row_id"),
    ("operation", "operation"),
)
_SNAPSHOT_KEYS = frozenset(k for k, _ in _SNAPSHOT_FIELDS)


def snapshot_to_json(snapshot: Snapshot) -> str:
    """The ``snapshot/snapshot-<id>`` file content: Java's field order, nulls omitted, then the
    members this version did not know when the snapshot was read (kept verbatim)."""
    obj: dict[str, Any] = {}
    for key, attr in _SNAPSHOT_FIELDS:
        value = getattr(snapshot, attr)
        if value is None:
            continue
        if isinstance(value, CommitKind):
            value = value.value
        elif key == "logOffsets":
            value = {str(k): v for k, v in value.items()}
        elif key == "properties":
            value = dict(value)
        obj[key] = value
    for key, value in snapshot.unknown.items():
        if key not in _SNAPSHOT_KEYS:
            obj[key] = value
    return to_java_json(obj)


def _log_offsets(f: _Fields) -> dict[int, int] | None:
    value = f.obj.get("logOffsets")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise f.fail("logOffsets", f"must be an object, got {value!r}")
    out: dict[int, int] = {}
    for k, v in value.items():
        try:
            bucket = int(k)
        except ValueError:
            raise f.fail("logOffsets", f"has a non-integer bucket {k!r}") from None
        if not isinstance(v, int) or isinstance(v, bool):
            raise f.fail("logOffsets", f"entry {k!r} must be an integer, got {v!r}")
        out[bucket] = v
    return out


def snapshot_from_json(text: str | bytes, *, path: str | None = None) -> Snapshot:
    """Parse a snapshot file. Unknown members are kept in ``Snapshot.unknown``; legacy ``logOffsets``
    is read into ``log_offsets``."""
    f = _Fields(_load(text, "snapshot", path), "snapshot", path)
    kind = f.req_str("commitKind")
    try:
        commit_kind = CommitKind(kind)
    except ValueError:
        raise f.fail("commitKind", f"is not one of {[k.value for k in CommitKind]}: {kind!r}") from None
    version = f.integer("version", required=False)
    return Snapshot(
        id=f.req_int("id"),
        schema_id=f.req_int("schemaId"),
        base_manifest_list=f.req_str("baseManifestList"),
        delta_manifest_list=f.req_str("deltaManifestList"),
        commit_user=f.req_str("commitUser"),
        commit_identifier=f.req_int("commitIdentifier"),
        commit_kind=commit_kind,
        time_millis=f.req_int("timeMillis"),
        version=_LEGACY_SNAPSHOT_VERSION if version is None else version,
        base_manifest_list_size=f.integer("baseManifestListSize", required=False),
        delta_manifest_list_size=f.integer("deltaManifestListSize", required=False),
        changelog_manifest_list=f.text("changelogManifestList", required=False),
        changelog_manifest_list_size=f.integer("changelogManifestListSize", required=False),
        index_manifest=f.text("indexManifest", required=False),
        log_offsets=_log_offsets(f),
        total_record_count=f.integer("totalRecordCount", required=False),
        delta_record_count=f.integer("deltaRecordCount", required=False),
        changelog_record_count=f.integer("changelogRecordCount", required=False),
        watermark=f.integer("watermark", required=False),
        statistics=f.text("statistics", required=False),
        properties=f.str_map("properties", required=False),
        next_row_id=f.integer("nextRowId", required=False),
        uuid=f.text("uuid", required=False),
        operation=f.text("operation", required=False),
        writer_version=f.text("writerVersion", required=False),
        unknown={k: v for k, v in f.obj.items() if k not in _SNAPSHOT_KEYS},
    )
