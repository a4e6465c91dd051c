"""Request and response bodies of the REST catalog protocol (apache/paimon ``rest-catalog-open-api.yaml``
as pypaimon 2.1.0 sends and parses it) and of our extensions, defined once for both ends: the service
parses requests and writes responses with these models, the client (``paimon_meta.catalog.rest``) builds
its requests and reads the answers with the same ones, so each end validates what it sends and gets.
Pydantic lives here (and in the service that serves them); both ends convert to paimon_meta's own objects
at the edge.

Field names are the protocol's camelCase (``alias``); every list response carries ``nextPageToken``
(null on the last page: pypaimon stops only then). Snapshot and schema JSON are passed as objects and
parsed by ``paimon_meta.serde`` (one parser for files and requests). A request goes on the wire as
:func:`dump` writes it: the fields the sender set, null ones included, and no others.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel, WithJsonSchema, field_validator
from pydantic.alias_generators import to_camel

#: A number of a request: within Postgres' BIGINT (and Java's long), else 400 naming the field
#: (OpenAPI's ``int64``; its bounds as floats would round up to 2^63).
BigInt = Annotated[
    int, Field(ge=-(2**63), le=2**63 - 1), WithJsonSchema({"type": "integer", "format": "int64"})
]


def _bigints_only(value: Any, path: str = "") -> Any:
    """Every integer inside a free-form JSON member (a snapshot, schema fields, schema changes) within
    BIGINT; the error names the member's path."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value <= 2**63 - 1:
            raise ValueError(f"{path or 'value'}: {value} is outside BIGINT (-2^63..2^63-1)")
    elif isinstance(value, dict):
        for k, v in value.items():
            _bigints_only(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _bigints_only(v, f"{path}[{i}]")
    return value


#: A JSON object whose numbers are all within BIGINT.
JsonObject = Annotated[dict[str, Any], AfterValidator(_bigints_only)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


def _without_nul(value: Any, path: str = "") -> None:
    """Raise naming the member (``path``, relative to the field) when a string inside ``value``, a
    dict's keys included, holds U+0000."""
    if isinstance(value, str):
        if "\x00" in value:
            where = f" (at {path})" if path else ""
            raise ValueError(f"a NUL character (U+0000){where}: no name or text may hold one")
    elif isinstance(value, BaseModel):
        for name, field in type(value).model_fields.items():
            _without_nul(getattr(value, name), f"{path}.{field.alias or name}".lstrip("."))
    elif isinstance(value, dict):
        for k, v in value.items():
            _without_nul(k, f"{path} key".lstrip())
            _without_nul(v, f"{path}.{k}".lstrip("."))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _without_nul(v, f"{path}[{i}]")


class _Request(_Model):
    """A request body: no string in it, at any depth, holds NUL (Postgres' text and JSONB cannot store
    one, so it would fail as a 500 deep in a commit; it is refused here as 400 naming the field)."""

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        _without_nul(value)
        return value


Body = TypeVar("Body", bound=BaseModel)


def dump(body: BaseModel) -> bytes:
    """The request's JSON as the client sends it: camelCase, only the fields it set (a null it set
    explicitly included), ``json.dumps``' spacing and ASCII escapes."""
    return json.dumps(body.model_dump(mode="json", by_alias=True, exclude_unset=True)).encode("utf-8")


def load(model: type[Body], raw: bytes) -> Body:
    """An answer's body parsed and validated (``pydantic.ValidationError`` when it is not ``model``)."""
    return model.model_validate_json(raw)


def plain(body: BaseModel) -> dict[str, Any]:
    """``body`` as the JSON object the service wrote it as (camelCase, every field, times as ISO 8601)."""
    return body.model_dump(mode="json", by_alias=True)


def describe_errors(errors: Iterable[Mapping[str, Any]]) -> str:
    """'snapshot.id: Input should be a valid integer' for the first few problems of a validation
    (FastAPI's ``body`` location left out)."""
    parts = []
    for err in list(errors)[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
        msg = err.get("msg", "invalid")
        if err.get("type") == "json_invalid":
            msg = f"malformed JSON: {err.get('ctx', {}).get('error', msg)}"
        parts.append(f"{loc or 'body'}: {msg}")
    return "; ".join(parts) or "invalid request"


class ErrorResponse(_Model):
    message: str
    resource_type: str | None = None
    resource_name: str | None = None
    code: int


class ConfigResponse(_Model):
    defaults: dict[str, str]
    overrides: dict[str, str]


# ---- databases -----------------------------------------------------------------------------------------


class CreateDatabaseRequest(_Request):
    name: str
    options: dict[str, str] | None = None


class AlterDatabaseRequest(_Request):
    removals: list[str] = Field(default_factory=list)
    updates: dict[str, str] = Field(default_factory=dict)


class ListDatabasesResponse(_Model):
    databases: list[str]
    next_page_token: str | None


class GetDatabaseResponse(_Model):
    id: str | None
    name: str
    location: str | None
    options: dict[str, str]
    owner: str | None = None
    created_at: int | None = None
    created_by: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None


# ---- tables --------------------------------------------------------------------------------------------


class Identifier(_Model):
    database: str
    object: str


class SchemaBody(_Model):
    """Paimon's REST ``Schema``: fields carry ids and Paimon type JSON."""

    fields: list[JsonObject]
    partition_keys: list[str] = Field(default_factory=list)
    primary_keys: list[str] = Field(default_factory=list)
    options: dict[str, str] = Field(default_factory=dict)
    comment: str | None = None


class CreateTableRequest(_Request):
    identifier: Identifier
    schema_: SchemaBody = Field(alias="schema")


class RenameTableRequest(_Request):
    source: Identifier
    destination: Identifier


class ReplaceTableRequest(_Request):
    """Java's ``ReplaceTableRequest``: the table's new schema (``CREATE OR REPLACE TABLE``)."""

    schema_: SchemaBody = Field(alias="schema")


class GetSchemaResponse(_Model):
    """Java's ``GetSchemaResponse``: one schema file's JSON (``TableSchema``: ``version``, ``id``,
    ``fields``, ``highestFieldId``, ``partitionKeys``, ``primaryKeys``, ``options``, ``comment``,
    ``timeMillis``)."""

    schema_: dict[str, Any] = Field(alias="schema")


class ListSchemasResponse(_Model):
    schemas: list[dict[str, Any]]
    next_page_token: str | None


class AlterTableRequest(_Request):
    """``changes``: SchemaChange objects, each with an ``action`` (parsed by the route)."""

    changes: list[JsonObject]


class ListTablesResponse(_Model):
    tables: list[str]
    next_page_token: str | None


class GetTableResponse(_Model):
    id: str
    #: The table's database (the spec's field; pypaimon 2.1.0 does not read it).
    database: str | None = None
    name: str
    path: str
    is_external: bool
    schema_id: int
    schema_: SchemaBody = Field(alias="schema")
    owner: str | None = None
    created_at: int | None = None
    created_by: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None


# ---- snapshots and commits -----------------------------------------------------------------------------


class TableSnapshot(_Model):
    snapshot: dict[str, Any]
    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int


class GetTableSnapshotResponse(_Model):
    snapshot: TableSnapshot


class PartitionStatisticsBody(_Model):
    spec: dict[str, str]
    record_count: BigInt
    file_size_in_bytes: BigInt
    file_count: BigInt
    last_file_creation_time: BigInt
    total_buckets: BigInt | None = None


class CommitTableRequest(_Request):
    table_id: str | None = None
    snapshot: JsonObject
    statistics: list[PartitionStatisticsBody] = Field(default_factory=list)
    base_snapshot_uuid: str | None = None


class CommitTableResponse(_Model):
    success: bool


class Partition(_Model):
    spec: dict[str, str]
    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int
    total_buckets: int | None = None
    done: bool = False
    created_at: int | None = None
    created_by: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None


class ListPartitionsResponse(_Model):
    partitions: list[Partition]
    next_page_token: str | None


# ---- partitions lifecycle, snapshots by version, consumers ---------------------------------------------

#: A partition spec: partition column -> value text (Java's ``Map<String, String>``).
PartitionSpec = dict[str, str]


class CreatePartitionsRequest(_Request):
    partition_specs: list[PartitionSpec]
    ignore_if_exists: bool = True
    partition_statistics: list[PartitionStatisticsBody] | None = None
    replace_statistics: bool | None = None
    #: Per partition (aligned with ``partitionSpecs`` by position): ``path`` (null resets it) and
    #: ``file.format`` of a format table's catalog-managed partition.
    partition_options: list[dict[str, str | None]] | None = None


class CreatePartitionsResponse(_Model):
    created: list[PartitionSpec]
    existed: list[PartitionSpec]


class DropPartitionsRequest(_Request):
    partition_specs: list[PartitionSpec]
    ignore_if_not_exists: bool = True


class DropPartitionsResponse(_Model):
    dropped: list[PartitionSpec]
    missing: list[PartitionSpec]


class MarkDonePartitionsRequest(_Request):
    specs: list[PartitionSpec] = Field(default_factory=list)


class ListPartitionsByNamesRequest(_Request):
    specs: list[PartitionSpec] = Field(default_factory=list)


class ListPartitionsByFilterRequest(_Request):
    #: Java's ``JsonSerdeUtil.toFlatJson(predicate)`` over the partition columns.
    filter: str = Field(max_length=1 << 20)
    partition_name_pattern: str | None = None
    max_results: int | None = None
    page_token: str | None = None


class GetVersionSnapshotResponse(_Model):
    snapshot: dict[str, Any]


class ListSnapshotsResponse(_Model):
    snapshots: list[dict[str, Any]]
    next_page_token: str | None


class ConsumerInfo(_Model):
    consumer_id: str
    next_snapshot: int


class ListConsumersResponse(_Model):
    consumers: list[ConsumerInfo]
    next_page_token: str | None


class ResetConsumerRequest(_Request):
    consumer_id: str = Field(min_length=1, max_length=246)
    next_snapshot_id: BigInt | None = None


# ---- tags ----------------------------------------------------------------------------------------------


class CreateTagRequest(_Request):
    #: The tag's file is ``tag-<name>``: a longer name does not fit in a file name (255 bytes), and
    #: storage refuses it only after the catalog has accepted it.
    tag_name: str = Field(max_length=251)
    snapshot_id: BigInt | None = None
    #: ``1d``, ``12h``, ``30m``: the tag expires that long after it is made.
    time_retained: str | None = Field(default=None, max_length=64)
    ignore_if_exists: bool = False


class ListTagsResponse(_Model):
    tags: list[str]
    next_page_token: str | None


class GetTagResponse(_Model):
    tag_name: str
    snapshot: dict[str, Any]
    tag_create_time: int | None = None
    tag_time_retained: str | None = None


class Instant(_Model):
    """A rollback target: ``{"type": "snapshot", "snapshotId": n}`` or ``{"type": "tag", "tagName": s}``."""

    type: str
    snapshot_id: BigInt | None = None
    tag_name: str | None = None


class RollbackTableRequest(_Request):
    instant: Instant
    from_snapshot: BigInt | None = None


# ---- branches ------------------------------------------------------------------------------------------

#: A branch's directory is ``branch-<name>``: a longer name does not fit in a file name (255 bytes).
BRANCH_NAME_MAX = 248


class CreateBranchRequest(_Request):
    branch: str = Field(max_length=BRANCH_NAME_MAX)
    from_tag: str | None = None


class RenameBranchRequest(_Request):
    to_branch: str = Field(max_length=BRANCH_NAME_MAX)


class ForwardBranchRequest(_Request):
    """The spec's body names the branch again; pypaimon sends ``{}`` (the path names it)."""

    branch: str | None = None


class ListBranchesResponse(_Model):
    """Not paged (Java's ``listBranches`` answers every branch)."""

    branches: list[str]


# ---- data access: vended credentials and query authorization -------------------------------------------


class GetTableTokenResponse(_Model):
    """Storage options scoped to the table (``s3.access-key``, ``s3.secret-key``, ``s3.session-token``,
    ``s3.endpoint``, ...), valid until ``expiresAtMillis``. Java and pypaimon read ``expiresAtMillis``;
    the spec's schema names it ``expiresAt``: both carry the same value."""

    token: dict[str, str]
    expires_at_millis: BigInt
    expires_at: BigInt


class AuthTableQueryRequest(_Request):
    select: list[str] | None = None


class AuthTableQueryResponse(_Model):
    """The row filters (predicates as JSON) a reader must apply and the column masks (column -> transform
    JSON); both empty until the catalog keeps any."""

    filter: list[str]
    column_masking: dict[str, str]


# ---- the control plane (our extension) -----------------------------------------------------------------


class CommitMessagesRequest(_Request):
    """CommitMessages a writer produced (Java's ``CommitMessageSerializer.serializeList`` bytes at
    ``messagesVersion``, base64), committed server-side exactly as an in-process commit."""

    commit_user: str = Field(min_length=1, max_length=255)
    commit_identifier: BigInt
    messages_version: int = Field(ge=3, le=14)
    messages: str
    #: An OVERWRITE of this partition spec ({} = the whole table) instead of an APPEND.
    overwrite: dict[str, str] | None = None
    #: "dynamic" or "static"; absent: the table's ``dynamic-partition-overwrite`` option decides.
    overwrite_mode: Literal["dynamic", "static"] | None = None
    properties: dict[str, str] | None = None
    watermark: BigInt | None = None
    #: The branch committed to (its snapshots under ``branch/branch-NAME/``); absent: main.
    branch: str | None = Field(default=None, min_length=1, max_length=255)


class CommitMessagesResponse(_Model):
    snapshot_ids: list[int]
    deduplicated: bool


class FilterCommittedRequest(_Request):
    commit_user: str = Field(min_length=1, max_length=255)
    identifiers: list[BigInt]


class FilterCommittedResponse(_Model):
    identifiers: list[int]


class CommitRecord(_Model):
    """One commit of ``paimon_commit_history``. ``startedAt`` is epoch milliseconds, as the protocol's
    times; ``firstEventAt``/``lastEventAt`` are the log's own timestamps (ISO 8601, microseconds)."""

    commit_id: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    outcome: str
    snapshot_id: int | None
    attempts: int | None
    retries: int | None
    conflicts: int | None
    elapsed_ms: float | None
    final_reason: str | None
    principal: str | None
    started_at: int | None
    conflict_check_ms: float | None
    first_event_at: datetime
    last_event_at: datetime


class ListCommitsResponse(_Model):
    commits: list[CommitRecord]
    next_page_token: str | None


# ---- the audit trail (our extension; read grant on the table) ------------------------------------------
# Rows of the append-only logs as ``paimon_meta.ops.audit`` reads them, newest first, paged by position;
# times are the log's own timestamps (ISO 8601, microseconds).


class CommitEvent(_Model):
    event_id: int
    created_at: datetime
    table_identifier: str
    commit_id: uuid.UUID
    event_type: str
    attempt: int
    commit_user: str
    commit_identifier: int
    commit_kind: str
    snapshot_id: int | None
    duration_ms: float | None
    payload: dict[str, Any]


class ListCommitEventsResponse(_Model):
    events: list[CommitEvent]
    next_page_token: str | None


class LockEvent(_Model):
    event_id: int
    created_at: datetime
    lock_id: str
    event_type: str
    owner: str | None
    fencing_token: int | None
    hostname: str | None
    pid: int | None
    operator: str | None
    reason: str | None
    previous_owner: str | None
    previous_fencing_token: int | None
    wait_ms: float | None
    payload: dict[str, Any]


class ListLockEventsResponse(_Model):
    events: list[LockEvent]
    next_page_token: str | None


class MaintenanceRun(_Model):
    """One run of ``paimon_maintenance_history`` (expiration, orphan cleanup): settings and result."""

    run_id: uuid.UUID
    table_identifier: str
    operation: str
    outcome: str
    dry_run: bool
    operator: str | None
    started_at: datetime
    ended_at: datetime | None
    elapsed_ms: float | None
    settings: dict[str, Any] | None
    result: dict[str, Any] | None


class ListMaintenanceRunsResponse(_Model):
    runs: list[MaintenanceRun]
    next_page_token: str | None


class DroppedTable(_Model):
    """A table in the recycle bin (our extension): what ``undrop`` (with ``dropId``) restores."""

    drop_id: int
    table_id: int
    database: str
    name: str
    location: str | None
    dropped_by: str | None
    dropped_at: datetime
    purge_after: datetime
    #: the grants on the table kept with it (restored by an undrop)
    grants: int


class ListDroppedTablesResponse(_Model):
    tables: list[DroppedTable]
    next_page_token: str | None


class DroppedDatabase(_Model):
    """A database in the recycle bin (our extension): what ``undrop`` (with ``dropId``) restores."""

    drop_id: int
    name: str
    location: str | None
    #: the tables dropped with it still in the bin (restored with it)
    tables: list[str]
    dropped_by: str | None
    dropped_at: datetime
    purge_after: datetime
    #: the database-level grants kept with it
    grants: int


class ListDroppedDatabasesResponse(_Model):
    databases: list[DroppedDatabase]
    next_page_token: str | None


class UndropDatabaseResponse(_Model):
    """What an undrop of a database restored."""

    name: str
    drop_id: int
    tables: list[str]
    grants: int


class SnapshotRecording(_Model):
    """An event that recorded a snapshot in the log (``snapshot_published``, ``external``, ``recovered``)."""

    snapshot_id: int
    event_type: str
    commit_id: uuid.UUID


class ListSnapshotRecordingsResponse(_Model):
    """Oldest first."""

    recordings: list[SnapshotRecording]
    next_page_token: str | None


class TableRegistryResponse(_Model):
    """The table's row in the metastore registry: the pointer (the latest snapshot the log recorded,
    which storage may be ahead of until the next commit reconciles), the schema id and the location as
    registered (null for rows Java inserted: the warehouse layout)."""

    identifier: str
    location: str | None
    schema_id: int | None
    latest_snapshot_id: int | None
    timeline: int
    created_at: datetime
    updated_at: datetime


# ---- tables across the catalog, registration, schema rollback -----------------------------------------


class ListTableDetailsResponse(_Model):
    table_details: list[GetTableResponse]
    next_page_token: str | None


class ListTablesGloballyResponse(_Model):
    tables: list[Identifier]
    next_page_token: str | None


class RegisterTableRequest(_Request):
    """Adopt the Paimon table whose files are at ``path`` under ``identifier``."""

    identifier: Identifier
    path: str = Field(min_length=1, max_length=4096)


class RollbackSchemaRequest(_Request):
    schema_id: int = Field(ge=0, le=2**63 - 1)


# ---- views and functions -------------------------------------------------------------------------------


class ViewSchemaBody(_Model):
    """The protocol's ``ViewSchema`` (fields as Paimon ``DataField`` JSON)."""

    fields: list[JsonObject] = Field(default_factory=list)
    query: str
    dialects: dict[str, str] = Field(default_factory=dict)
    comment: str | None = None
    options: dict[str, str] = Field(default_factory=dict)


class CreateViewRequest(_Request):
    identifier: Identifier
    schema_: ViewSchemaBody = Field(alias="schema")


class AlterViewRequest(_Request):
    """``changes``: ViewChange objects, each with an ``action`` (applied by the catalog)."""

    changes: list[JsonObject]


class GetViewResponse(_Model):
    id: str
    name: str
    schema_: ViewSchemaBody = Field(alias="schema")
    owner: str | None = None
    created_at: int | None = None
    created_by: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None


class ListViewsResponse(_Model):
    views: list[str]
    next_page_token: str | None


class ListViewDetailsResponse(_Model):
    view_details: list[GetViewResponse]
    next_page_token: str | None


class ListViewsGloballyResponse(_Model):
    views: list[Identifier]
    next_page_token: str | None


class CreateFunctionRequest(_Request):
    """The protocol's ``CreateFunctionRequest``: definitions are checked by the catalog (``type`` file,
    sql or lambda)."""

    name: str
    input_params: list[JsonObject] | None = None
    return_params: list[JsonObject] | None = None
    deterministic: bool = False
    definitions: dict[str, JsonObject] | None = None
    comment: str | None = None
    options: dict[str, str] | None = None


class AlterFunctionRequest(_Request):
    """``changes``: FunctionChange objects, each with an ``action`` (applied by the catalog)."""

    changes: list[JsonObject]


class GetFunctionResponse(_Model):
    uuid: str
    name: str
    input_params: list[dict[str, Any]] | None = None
    return_params: list[dict[str, Any]] | None = None
    deterministic: bool
    definitions: dict[str, dict[str, Any]]
    comment: str | None = None
    options: dict[str, str]
    owner: str | None = None
    created_at: int | None = None
    created_by: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None


class ListFunctionsResponse(_Model):
    functions: list[str]
    next_page_token: str | None


class ListFunctionDetailsResponse(_Model):
    function_details: list[GetFunctionResponse]
    next_page_token: str | None


class ListFunctionsGloballyResponse(_Model):
    functions: list[Identifier]
    next_page_token: str | None


class SemanticViewDefinition(_Model):
    """Java's ``SemanticViewDefinition``: the model document as sent (``format`` names its syntax, e.g.
    ``databricks-yaml``), kept verbatim."""

    format: str
    content: str


class UpsertSemanticViewRequest(_Request):
    definition: SemanticViewDefinition


class GetSemanticViewResponse(_Model):
    name: str
    definition: SemanticViewDefinition


class ListSemanticViewsResponse(_Model):
    semantic_views: list[str]
    next_page_token: str | None


# ---- the change feed ----------------------------------------------------------------------------------


class CloudEvent(_Model):
    """One event of the feed as a CloudEvents 1.0 JSON object. ``id`` is the event's position in the feed
    (resume after it with ``pageToken``); ``data.log`` and ``data.eventId`` name the row of the event
    log it is."""

    specversion: str = "1.0"
    id: str
    source: str
    type: str
    subject: str
    time: datetime
    datacontenttype: str = "application/json"
    data: dict[str, Any]


class ListCatalogEventsResponse(_Model):
    """Oldest first; ``nextPageToken`` is where to resume (never null: a feed has no last page, an empty
    one says nothing new yet)."""

    events: list[CloudEvent]
    next_page_token: str


# ---- operations ----------------------------------------------------------------------------------------


class HealthResponse(_Model):
    status: str
    detail: dict[str, Any] = Field(default_factory=dict)


# ---- on-call operations (admin; ``paimon-meta recover|expire-snapshots|remove-orphan-files|locks``) --------


class RecoverTableRequest(_Request):
    #: The grace period after a commit's last event (None: recovery's default).
    older_than_seconds: float | None = Field(default=None, ge=0)
    dry_run: bool = False
    reason: str | None = Field(default=None, max_length=1000)


class ExpireSnapshotsRequest(_Request):
    retain_min: int | None = Field(default=None, ge=1)
    retain_max: int | None = Field(default=None, ge=1)
    older_than_seconds: float | None = Field(default=None, ge=0)
    max_deletes: int | None = Field(default=None, ge=1)
    dry_run: bool = False


class RemoveOrphanFilesRequest(_Request):
    older_than_seconds: float = Field(default=86_400.0, ge=0)
    dry_run: bool = False


class ReleaseLockRequest(_Request):
    lock_id: str = Field(min_length=1, max_length=255)
    reason: str = Field(min_length=1, max_length=1000)
    force: bool = False


class OperationReport(RootModel[dict[str, Any]]):
    """What an operation did, as the CLI's ``--json`` prints it (the ops report's fields)."""


class ListLocksResponse(_Model):
    locks: list[dict[str, Any]]


# ---- the catalogs' admin API (our extension; service.routes_catalogs) ------------------------------------


class CatalogStorage(_Model):
    """A catalog's storage profile (None: the SDK's default)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None


class CatalogResponse(_Model):
    """A catalog as the admin API shows it: never a secret's value (``secretsSet`` names those set)."""

    name: str
    catalog_key: str
    warehouse: str
    storage: CatalogStorage
    sts_role_arn: str | None = None
    options: dict[str, str]
    secrets_set: list[str]
    created_by: str | None = None
    created_at: str | None = None
    #: Whether it is the service's default catalog (``serve --catalog-name``).
    default: bool = False


class ListCatalogsResponse(_Model):
    catalogs: list[CatalogResponse]


class CreateCatalogRequest(_Request):
    name: str
    warehouse: str
    storage: CatalogStorage | None = None
    sts_role_arn: str | None = None
    sts_external_id: str | None = None
    options: dict[str, str] | None = None


class UpdateCatalogRequest(_Request):
    """What to change; absent fields are kept. ``clearSts``: no STS role any more."""

    warehouse: str | None = None
    storage: CatalogStorage | None = None
    sts_role_arn: str | None = None
    sts_external_id: str | None = None
    clear_sts: bool = False
    set_options: dict[str, str] | None = None
    remove_options: list[str] | None = None


class DropCatalogResponse(_Model):
    #: The databases it held (dropped with it, by ``cascade``).
    databases: list[str]
