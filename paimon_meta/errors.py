"""The error hierarchy of paimon_meta.

Every error raised on purpose by this package derives from :class:`PaimonMetaError` and carries
structured fields (not only a message) so callers and the event log can record *what* went wrong.
The commit path distinguishes three outcomes, and the distinction is load-bearing:

* :class:`CommitConflictError`: the commit definitely did not land; retrying (or giving up and deleting
  the attempt's files) is safe.
* :class:`CommitOutcomeUnknownError`: the commit may or may not have landed. Never delete anything the
  attempt wrote; resolve by reading storage (the snapshot directory) before doing anything else.
* :class:`CommitFailedError`: the commit definitely did not land and retrying cannot help.
"""

from __future__ import annotations

from typing import Any


class PaimonMetaError(Exception):
    """Root of every error raised on purpose by paimon_meta."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = dict(fields)

    def __str__(self) -> str:
        return self.message


class ValidationError(PaimonMetaError):
    """Input that cannot be accepted: a bad identifier, schema, option, row or CommitMessage."""


class FieldTooLargeError(ValidationError):
    """A text a client chose is over the catalog's limit for it (``model.limits``): ``field`` names it,
    ``limit`` is its limit in characters (the service answers 413)."""


class LocationError(ValidationError):
    """A location that has no normal form (``paimon_meta.io.base.normalise_uri``): a ``..`` segment, a
    control character or bytes that are not UTF-8 after percent-decoding (``uri``; ``reason``:
    ``dot-dot``, ``control`` or ``encoding``)."""


class PathOutsideTableError(ValidationError):
    """A path that a commit, a read, a deletion or a table option names lies outside the table: not under
    its root nor under one of its configured external roots (``path``; ``table``: the table's root;
    ``field``: which field or option named it)."""


class UnsupportedError(ValidationError):
    """A valid Paimon feature that paimon_meta does not implement (named in the message)."""


class PolicyRuleError(ValidationError):
    """A row filter or column mask (Paimon's predicate or transform JSON) that cannot be applied exactly:
    malformed JSON, an unknown or unsupported function or transform, the wrong number of arguments, a
    literal or column of the wrong type, a column the table does not have. Readers refuse to read rather
    than apply part of a rule (fail closed). Fields: ``rule`` (``row filter`` or ``column mask``),
    ``reason`` (``json``, ``unknown``, ``unsupported``, ``arity``, ``type``, ``literal``, ``column``,
    ``conflict``), ``name`` (the function or transform), ``column``, ``at`` (where in the JSON)."""


class PolicyConflictError(PolicyRuleError):
    """Rules that cannot apply together: two masks on one column, a mask computed from a column that is
    masked too (its raw value would leak through the mask)."""


class StorageOptionsMissingError(ValidationError):
    """A store cannot be used because options it needs are missing (e.g. S3 credentials for a table whose
    location is ``s3://``). ``options`` lists the missing option keys, ``uri`` the location."""


class CorruptMetadataError(PaimonMetaError):
    """A metadata file or byte string could not be decoded. ``path`` names the file when there is one."""

    def __init__(self, message: str, *, path: str | None = None, **fields: Any) -> None:
        full = f"{message} (file: {path})" if path else message
        super().__init__(full, path=path, **fields)
        self.path = path


class FileIOError(PaimonMetaError):
    """A storage operation failed for a reason other than 'not found' or 'already exists'."""

    def __init__(self, message: str, *, path: str | None = None, **fields: Any) -> None:
        super().__init__(f"{message}: {path}" if path else message, path=path, **fields)
        self.path = path


class FileNotFound(FileIOError):
    """The file does not exist."""


class FileAlreadyExistsError(FileIOError):
    """A create-if-absent found the file already there (S3: HTTP 412 on ``If-None-Match: *``)."""


class MetastoreUnavailableError(PaimonMetaError):
    """The metastore (Postgres) could not be reached or dropped the connection mid-operation."""


class RequestBoundError(PaimonMetaError):
    """A request's metastore work was stopped by its bounds (paimon_meta.db.budget): ``reason``
    ``deadline`` (it ran past its route class's deadline: the service answers 503 + Retry-After) or
    ``disconnect`` (its client went away: nobody is left to answer)."""

    def __init__(self, message: str, *, reason: str, route_class: str, seconds: float) -> None:
        super().__init__(message, reason=reason, route_class=route_class, seconds=seconds)
        self.reason, self.route_class, self.seconds = reason, route_class, seconds


class NotFoundError(PaimonMetaError):
    """What a call names does not exist: a catalog object (database, table, snapshot, tag, principal) or
    what an operations tool names (a lock, a commit's events). The subclasses name the resource type;
    the service answers 404 with it, the CLI exits with its not-found code."""

    resource: str = "object"


class AlreadyExistsError(PaimonMetaError):
    """A catalog object with that name already exists."""

    resource: str = "object"


class TableNotFoundError(NotFoundError):
    """No table with that identifier (or at that path)."""

    resource = "table"


class TableAlreadyExistsError(AlreadyExistsError):
    """A table with that identifier already exists."""

    resource = "table"


class DroppedTableNotFoundError(NotFoundError):
    """No table of that name (or drop id) in the recycle bin."""

    resource = "table"


class DroppedDatabaseNotFoundError(NotFoundError):
    """No database of that name (or drop id) in the recycle bin."""

    resource = "database"


class DeletionProtectedError(PaimonMetaError):
    """A drop refused because the table has ``deletion-protection`` on (``table``); the service answers
    409: turn the option off first."""


class DatabaseNotFoundError(NotFoundError):
    """No database with that name."""

    resource = "database"


class DatabaseAlreadyExistsError(AlreadyExistsError):
    """A database with that name already exists."""

    resource = "database"


class SchemaNotFoundError(NotFoundError):
    """No such schema version of the table."""

    resource = "schema"


class SnapshotNotFoundError(NotFoundError):
    """No such snapshot (or the table has none yet)."""

    resource = "snapshot"


class PartitionNotFoundError(NotFoundError):
    """No such partition on the table (neither registered nor holding data)."""

    resource = "partition"


class PartitionAlreadyExistsError(AlreadyExistsError):
    """A partition being created is already registered or holds data."""

    resource = "partition"


class TagNotFoundError(NotFoundError):
    """No tag with that name."""

    resource = "tag"


class TagAlreadyExistsError(AlreadyExistsError):
    """A tag with that name already exists."""

    resource = "tag"


class BranchNotFoundError(NotFoundError):
    """No branch with that name on the table."""

    resource = "branch"


class BranchAlreadyExistsError(AlreadyExistsError):
    """A branch with that name already exists on the table."""

    resource = "branch"


class ViewNotFoundError(NotFoundError):
    """No view with that identifier."""

    resource = "view"


class SemanticViewNotFoundError(NotFoundError):
    """No semantic view with that identifier."""

    resource = "semantic_view"


class SemanticViewAlreadyExistsError(AlreadyExistsError):
    """A semantic view cannot take that name (a SQL view of its database has it)."""

    resource = "semantic_view"


class ViewAlreadyExistsError(AlreadyExistsError):
    """A view with that identifier (or a table with that name in its database) already exists."""

    resource = "view"


class DialectNotFoundError(NotFoundError):
    """A view change names a SQL dialect the view has no query for."""

    resource = "dialect"


class DialectAlreadyExistsError(AlreadyExistsError):
    """A view change adds a SQL dialect the view already has a query for."""

    resource = "dialect"


class FunctionNotFoundError(NotFoundError):
    """No function with that identifier."""

    resource = "function"


class FunctionAlreadyExistsError(AlreadyExistsError):
    """A function with that identifier already exists."""

    resource = "function"


class DefinitionNotFoundError(NotFoundError):
    """A function change names a definition the function does not have."""

    resource = "definition"


class DefinitionAlreadyExistsError(AlreadyExistsError):
    """A function change adds a definition the function already has."""

    resource = "definition"


class PrincipalNotFoundError(NotFoundError):
    """No service principal with that name."""

    resource = "principal"


class PrincipalAlreadyExistsError(AlreadyExistsError):
    """A service principal with that name already exists."""

    resource = "principal"


class PolicyNotFoundError(NotFoundError):
    """No data policy of that identity (table, principal, type, column)."""

    resource = "policy"


class PolicyAlreadyExistsError(AlreadyExistsError):
    """The principal already has a row filter on the table (or a mask on that column)."""

    resource = "policy"


class ColumnNotFoundError(NotFoundError):
    """A column a grant or a policy names is not in the table's latest schema (``column``)."""

    resource = "column"


class GovernanceConflictError(PaimonMetaError):
    """A change the table's governance state refuses (the service answers 409): a policy or a column
    grant on a table without ``query-auth.enabled=true``, turning it off while policies exist, renaming
    or dropping a column a policy protects or reads. Fields: ``table``, ``column``, ``reason``."""


class CatalogNotFoundError(NotFoundError):
    """No catalog with that name in the metastore (``paimon_catalogs``)."""

    resource = "catalog"


class CatalogAlreadyExistsError(AlreadyExistsError):
    """A catalog with that name (or that catalog key) already exists."""

    resource = "catalog"


class WarehouseOverlapError(CatalogAlreadyExistsError):
    """A catalog's warehouse would equal, contain or lie inside another catalog's (``holder``): two
    catalogs must never share files."""


class CatalogNotEmptyError(ValidationError):
    """A catalog still holds databases (drop them first, or drop the catalog with ``cascade``)."""


class EventPartitionNotFoundError(NotFoundError):
    """No live (or registered) partition of the commit log by that name."""

    resource = "event partition"


class EventPartitionNotArchivedError(PaimonMetaError):
    """A partition of the commit log was not dropped: catalogs with events in it have not been archived
    (or their archive's row count differs from the partition's). Fields: ``partition``, ``catalogs``."""


class EventPartitionInUseError(PaimonMetaError):
    """A partition of the commit log was not dropped: its range includes now or the future. Fields:
    ``partition``, ``end``."""


class EventPartitionArchiveConflictError(PaimonMetaError):
    """A catalog's events of a partition were marked archived already, into another snapshot or with
    another row count. Fields: ``partition``, ``catalog``, ``snapshot_id``, ``row_count``."""


class EventLogPartitionMissingError(MetastoreUnavailableError):
    """An event's time lies in no partition of the commit log: the partitions ahead were not made (the
    service makes them, ``paimon-meta events make-partitions`` too). Fields: ``log``."""


class CommitError(PaimonMetaError):
    """Base class of commit outcomes that are not success."""


class CommitConflictError(CommitError):
    """The commit conflicts with the table's current state and definitely did not land. Retry is safe."""


class CommitFailedError(CommitError):
    """The commit definitely did not land and retrying will not help (e.g. retries exhausted)."""


class TableRowChangedError(CommitFailedError):
    """The table's registry row changed since the committer read it (renamed, moved, or dropped and
    re-created): found under its lock, before anything was published. Read the row again and retry."""


class CommitOutcomeUnknownError(CommitError):
    """The snapshot publish may or may not have happened. Never clean up; resolve by reading storage."""


class LockError(PaimonMetaError):
    """Base class of lock failures."""


class LockTimeoutError(LockError):
    """The lock was not acquired within the acquire timeout."""


class LockLostError(LockError):
    """The lease expired or was taken over: the holder must not publish (its fencing token is stale)."""


class LockNotHeldError(LockError):
    """A release or renewal by a caller that does not hold the lock."""


class SnapshotPointerConflictError(CommitConflictError):
    """The table's latest-snapshot pointer was not the expected value (another commit advanced it)."""


class AccessDeniedError(PaimonMetaError):
    """The commit service refused the request: no valid token (401) or no grant for it (403)."""


class QueryNotAllowedError(AccessDeniedError):
    """A read of a ``query-auth.enabled`` table the service's query authorization refused (403: no
    ``SELECT``, or a selected column outside the principal's column range; pypaimon's
    ``TableNoPermissionException``). Fields: ``table``, ``columns`` (those asked for; None: every one)."""


def is_definite_failure(error: BaseException) -> bool:
    """Whether ``error`` from a commit means nothing of it landed (a conflict, a refused commit, bad
    input): then the attempt's files may be deleted. Anything else (an unknown outcome, an I/O or
    metastore error mid-publish, a bug) may have left a snapshot that references them: keep them for
    orphan-file cleanup, which deletes only what no snapshot references."""
    if isinstance(error, CommitOutcomeUnknownError):
        return False
    return isinstance(error, (CommitError, ValidationError))


class CredentialVendingError(PaimonMetaError):
    """The credential source (STS) did not vend credentials. ``transient``: it was unreachable, throttling
    or failing (retry later); else it refused the server (the role, its trust policy or the requested
    duration: an operator must act). Fields: ``code`` (STS's error code), ``status``, ``role_arn``."""

    def __init__(self, message: str, *, transient: bool, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.transient = transient
