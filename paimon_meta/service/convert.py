"""Conversions between the protocol's bodies (``paimon_meta.rest.models``) and paimon_meta's objects, and
listing helpers (paging by name, SQL LIKE patterns matched without a regex). No IO here."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.metastore.registry import TableRow
from paimon_meta.model import limits
from paimon_meta.model.partition_statistics import PartitionDelta
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.model.types import ArrayType, DataField, DataType, MapType, MultisetType, RowType, parse_type
from paimon_meta.rest import models
from paimon_meta.serde.json import snapshot_from_json, snapshot_to_json
from paimon_meta.table import schema_change
from paimon_meta.table.option_policy import table_type

#: Who the audit fields of GET table name (pypaimon turns missing ones into the string "None").
SERVICE_OWNER = "paimon_meta"
MAX_PAGE = 1000
#: Bytes of stored definitions (views, functions, table schemas) one listing page carries at most, about:
#: the page stops at the object that reaches it (at least one per page) and names the next page.
PAGE_BYTES = 4 << 20
#: Longest name pattern (``databaseNamePattern``, ``tableNamePattern``, ``partitionNamePattern``).
MAX_PATTERN = 256
#: A BIGINT's range: numbers of requests outside it are 400 naming the field (Postgres would refuse them).
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1


def millis(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def schema_body(schema: TableSchema) -> models.SchemaBody:
    return models.SchemaBody(
        fields=[f.to_json() for f in schema.fields],
        partition_keys=list(schema.partition_keys),
        primary_keys=list(schema.primary_keys),
        options=dict(schema.options),
        comment=schema.comment,
    )


#: The ``id`` of a table whose row has no uuid (Java inserted it): this prefix and the row's surrogate id.
TABLE_ID_PREFIX = "table-"


def table_response_id(row: TableRow) -> str:
    """The table's ``id`` in the protocol (its uuid; pypaimon sends it back as the commit's ``tableId``)."""
    return str(row.table_uuid) if row.table_uuid is not None else f"{TABLE_ID_PREFIX}{row.table_id}"


def client_path(location: str, options: Mapping[str, str]) -> str:
    """The ``path`` of a table as clients get it: the location, but an object table's plain local path as a
    ``file://`` URI. pypaimon reaches object tables through its virtual filesystem (``pvfs://``), which picks
    the storage by the path's scheme (``file:/`` or ``oss://``) and refuses a plain path ("Storage type
    doesn't support now"); its object-table reader and every other client take the URI as well."""
    if table_type(options) == "object-table" and location.startswith("/"):
        return PurePosixPath(location).as_uri()
    return location


def table_response(
    row: TableRow, schema: TableSchema, location: str, *, external: bool = False
) -> models.GetTableResponse:
    """``external``: the table's files are not the catalog's (a drop leaves them). An object table's
    location on the local filesystem goes out as a ``file://`` URI (:func:`client_path`)."""
    return models.GetTableResponse(
        id=table_response_id(row),
        database=row.database,
        name=row.name,
        path=client_path(location, schema.options),
        is_external=external,
        schema_id=schema.id,
        schema=schema_body(schema),
        owner=SERVICE_OWNER,
        created_at=millis(row.created_at),
        created_by=SERVICE_OWNER,
        updated_at=millis(row.updated_at),
        updated_by=SERVICE_OWNER,
    )


def _max_id(data_type: DataType) -> int:
    if isinstance(data_type, RowType):
        return max((max(f.id, _max_id(f.type)) for f in data_type.fields), default=-1)
    if isinstance(data_type, (ArrayType, MultisetType)):
        return _max_id(data_type.element)
    if isinstance(data_type, MapType):
        return max(_max_id(data_type.key), _max_id(data_type.value))
    return -1


def _fields(raw: Sequence[Any], where: str) -> list[DataField]:
    out = []
    for i, obj in enumerate(raw):
        try:
            out.append(DataField.from_json(obj))
        except ValidationError as e:
            raise ValidationError(f"{where}[{i}]: {e.message}", field=f"{where}[{i}]") from e
    return out


def table_schema(body: models.SchemaBody) -> TableSchema:
    """``schema-0`` for a create-table request: the client's field ids kept, ``highestFieldId``
    computed over nested types too."""
    fields = _fields(body.fields, "schema.fields")
    # an object table has no columns of its own (its rows are the files' metadata); every other table
    # names at least one
    if not fields and table_type(body.options) != "object-table":
        raise ValidationError("schema.fields must name at least one column", field="schema.fields")
    highest = max((max(f.id, _max_id(f.type)) for f in fields), default=-1)
    return TableSchema(
        id=0,
        fields=tuple(fields),
        highest_field_id=highest,
        partition_keys=tuple(body.partition_keys),
        primary_keys=tuple(body.primary_keys),
        options=dict(body.options),
        comment=body.comment,
        time_millis=int(time.time() * 1000),
    )


def _one_name(change: dict[str, Any], action: str) -> str:
    names = change.get("fieldNames")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise ValidationError(f"{action}.fieldNames must be a non-empty list of names", field="fieldNames")
    if len(names) != 1:
        raise ValidationError(f"{action} of a nested field {names} is not supported", field="fieldNames")
    return str(names[0])


def _text(change: dict[str, Any], key: str, action: str, *, nullable: bool = False) -> Any:
    value = change.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{action}.{key} must be a string, got {value!r}", field=key)
    return value


def schema_changes(raw: Sequence[dict[str, Any]]) -> list[schema_change.SchemaChange]:
    """The protocol's SchemaChange objects as the library's changes; an action the library does not
    implement is refused by name (``UnsupportedError``, 501), never skipped."""
    out: list[schema_change.SchemaChange] = []
    for change in raw:
        action = change.get("action")
        if action == "setOption":
            out.append(schema_change.SetOption(_text(change, "key", action), _text(change, "value", action)))
        elif action == "removeOption":
            out.append(schema_change.RemoveOption(_text(change, "key", action)))
        elif action == "updateComment":
            out.append(schema_change.UpdateComment(_text(change, "comment", action, nullable=True)))
        elif action == "addColumn":
            if change.get("move") is not None:
                raise UnsupportedError("addColumn with a move is not supported")
            try:
                data_type = parse_type(change.get("dataType"))
            except ValidationError as e:
                raise ValidationError(f"addColumn.dataType: {e.message}", field="dataType") from e
            out.append(
                schema_change.AddColumn(
                    _one_name(change, action), data_type, _text(change, "comment", action, nullable=True)
                )
            )
        elif action == "renameColumn":
            out.append(
                schema_change.RenameColumn(_one_name(change, action), _text(change, "newName", action))
            )
        elif action == "updateColumnComment":
            out.append(
                schema_change.UpdateColumnComment(
                    _one_name(change, action), _text(change, "newComment", action, nullable=True)
                )
            )
        elif action == "updateColumnType":
            try:
                new_type = parse_type(change.get("newDataType"))
            except ValidationError as e:
                raise ValidationError(
                    f"updateColumnType.newDataType: {e.message}", field="newDataType"
                ) from e
            keep = change.get("keepNullability", False)
            if not isinstance(keep, bool):
                raise ValidationError(
                    f"updateColumnType.keepNullability must be a boolean, got {keep!r}",
                    field="keepNullability",
                )
            # Java's casts decide (table.casting): a change old files cannot be read through is a 400
            out.append(
                schema_change.UpdateColumnType(_one_name(change, action), new_type, keep_nullability=keep)
            )
        elif isinstance(action, str) and action:
            raise UnsupportedError(f"schema change {action!r} is not supported by this catalog")
        else:
            raise ValidationError(f"a schema change needs an 'action', got {change!r}", field="action")
    return out


def commit_snapshot(body: models.CommitTableRequest) -> Snapshot:
    """The request's snapshot through the snapshot file parser (typed errors name the member)."""
    try:
        snapshot = snapshot_from_json(json.dumps(body.snapshot))
    except Exception as e:
        message = getattr(e, "message", str(e))
        raise ValidationError(f"snapshot: {message}", field="snapshot") from e
    limits.check_options("commit", "snapshot.properties", snapshot.properties or {})
    return snapshot


def snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(snapshot_to_json(snapshot))
    return result


def deltas(body: models.CommitTableRequest) -> list[PartitionDelta]:
    return [
        PartitionDelta(
            spec=dict(s.spec),
            record_count=s.record_count,
            file_size_in_bytes=s.file_size_in_bytes,
            file_count=s.file_count,
            last_file_creation_time=s.last_file_creation_time,
            total_buckets=s.total_buckets,
        )
        for s in body.statistics
    ]


def like_match(pattern: str, name: str) -> bool:
    """Whether ``name`` matches the SQL LIKE ``pattern`` (``%`` any run, ``_`` one character, every
    other character itself; no escape character), without a regex: the pieces between ``%``s are
    placed once each, the first at the start, the last at the end, the others at their leftmost fit in
    between (leftmost never loses: a piece placed earlier leaves more room for the rest). No
    backtracking: at worst len(name) x len(pattern) character comparisons, bounded by ``MAX_PATTERN``."""
    pieces = pattern.split("%")
    if len(pieces) == 1:
        return len(name) == len(pattern) and _fits(pattern, name, 0)
    first, last, middle = pieces[0], pieces[-1], pieces[1:-1]
    end = len(name) - len(last)
    if end < len(first) or not _fits(first, name, 0) or not _fits(last, name, end):
        return False
    at = len(first)
    for piece in middle:
        found = _find(piece, name, at, end)
        if found < 0:
            return False
        at = found + len(piece)
    return True


def _fits(piece: str, name: str, at: int) -> bool:
    """``piece`` (no ``%``) matches ``name[at:at + len(piece)]``, ``_`` matching any one character."""
    if at + len(piece) > len(name):
        return False
    if "_" not in piece:
        return name.startswith(piece, at)
    return all(p in ("_", c) for p, c in zip(piece, name[at : at + len(piece)], strict=True))


def _find(piece: str, name: str, start: int, end: int) -> int:
    """The leftmost ``i >= start`` with ``piece`` fitting ``name[i:]`` inside ``name[:end]``, or -1."""
    if "_" not in piece:
        return name.find(piece, start, end)
    for i in range(start, end - len(piece) + 1):
        if _fits(piece, name, i):
            return i
    return -1


def check_pattern(pattern: str | None, field: str = "pattern") -> None:
    """400 for a pattern over ``MAX_PATTERN`` characters (the routes' query parameters also say so)."""
    if pattern is not None and len(pattern) > MAX_PATTERN:
        raise ValidationError(f"{field}: at most {MAX_PATTERN} characters", field=field)


def page(
    names: Sequence[str], *, max_results: int | None, page_token: str | None, pattern: str | None = None
) -> tuple[list[str], str | None]:
    """Names after ``page_token`` (the last name of the previous page), sorted, at most
    ``max_results`` (no limit when None); the next token is null on the last page."""
    if max_results is not None and not 0 < max_results <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    check_pattern(pattern)
    selected = sorted(
        n for n in names if (not pattern or like_match(pattern, n)) and (not page_token or n > page_token)
    )
    if max_results is None or len(selected) <= max_results:
        return selected, None
    return selected[:max_results], selected[max_results - 1]


#: The first character of a keyset page token (``p<event id>``): never a bare number, so a token an
#: earlier release issued (an offset) is refused, not read as a position.
POSITION_TOKEN = "p"


def position_page(
    max_results: int | None, page_token: str | None, *, default: int = 100
) -> tuple[int, int | None]:
    """(limit, position) of a listing paged by keyset (the event log's, by event id): the token is
    ``p<event id>`` of the previous page's last row, as its ``nextPageToken`` said; None: the first page."""
    limit = default if max_results is None else max_results
    if not 0 < limit <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    if not page_token:
        return limit, None
    digits = page_token[len(POSITION_TOKEN) :]
    if not page_token.startswith(POSITION_TOKEN) or not digits.isdigit() or len(digits) > 19:
        raise ValidationError("pageToken is not one this server issued", field="pageToken")
    position = int(digits)
    if position > BIGINT_MAX:
        raise ValidationError("pageToken is not one this server issued", field="pageToken")
    return limit, position


def position_token(position: int) -> str:
    """The page token of a keyset listing's next page (:func:`position_page`)."""
    return f"{POSITION_TOKEN}{position}"


def offset_page(max_results: int | None, page_token: str | None, *, default: int = 100) -> tuple[int, int]:
    """(limit, offset) of a listing paged by position (the event log's, newest first): the token is the
    number of rows already returned, as the previous page's ``nextPageToken`` said."""
    limit = default if max_results is None else max_results
    if not 0 < limit <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    try:
        offset = int(page_token or 0)
    except ValueError:
        raise ValidationError("pageToken is not one this server issued", field="pageToken") from None
    if not 0 <= offset <= BIGINT_MAX:
        raise ValidationError("pageToken is not one this server issued", field="pageToken")
    return limit, offset
