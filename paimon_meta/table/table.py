"""FileStoreTable: one Paimon table on storage, and the entry points of its pypaimon-shaped API.

::

    table = FileStoreTable.open("s3://bucket/wh/db.db/t", {"s3.endpoint": ...})
    builder = table.new_read_builder()
    arrow_table = builder.new_read().to_arrow(builder.new_scan().plan().splits())

Reads are built by ``new_read_builder()`` (:mod:`paimon_meta.table.read.builder`), writes and commits by
``new_batch_write_builder()``/``new_stream_write_builder()`` (:mod:`paimon_meta.table.write.builder`).

Branches (Java's ``BranchManager``): ``table.branch("b1")`` (or ``FileStoreTable.open(path, branch="b1")``)
reads branch ``b1``, whose snapshots and schemas are under ``branch/branch-b1/`` while its manifests and
data files are in the table's own directories. With ``scan.fallback-branch`` set, a read also returns,
for each partition the branch read has no file in, that partition from the fallback branch (Java's
``FallbackReadFileStoreTable``). Commits publish only to the main branch.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

import pyarrow as pa

from paimon_meta.errors import TableNotFoundError, ValidationError
from paimon_meta.io import get_file_io, resolve_location
from paimon_meta.io.base import FileIO
from paimon_meta.model.arrow import to_arrow_schema
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.manifest import ManifestEntry, ManifestFileMeta
from paimon_meta.model.options import CoreOptions
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.model.types import DataField
from paimon_meta.table.cache import LruCache
from paimon_meta.table.manifests import (
    DEFAULT_MANIFEST_CACHE_ENTRIES,
    DEFAULT_SCAN_PARALLELISM,
    SCAN_MANIFEST_PARALLELISM,
    ManifestReader,
)
from paimon_meta.table.option_policy import (
    BRANCH,
    CHANGELOG_FILE_FORMAT,
    DATA_FILE_FORMATS,
    FILE_FORMAT,
    MAIN_BRANCH,
    SCAN_FALLBACK_BRANCH,
    check_main_branch,
    check_table_type,
)
from paimon_meta.table.paths import BRANCH_DIR, BRANCH_PREFIX, TablePaths, branch_path, join_path
from paimon_meta.table.read.builder import ReadBuilder
from paimon_meta.table.read.query_auth import QueryAuth
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.write.arrow_input import check_writable
from paimon_meta.table.write.builder import BatchWriteBuilder, Committer, StreamWriteBuilder

#: How a table's ``new_commit()`` is guarded: set by whoever opened the table for writing (a catalog,
#: or ``paimon_meta.open_table``), called with the table and the commit user.
CommitterFactory = Callable[["FileStoreTable", str], Committer]


class FileStoreTable:
    """One Paimon table on storage: its schema, snapshots, manifests and data files.

    ``options`` are dynamic options layered over the schema's (as Java's ``Table.copy``). The table
    owns its manifest caches: a new table object starts cold. ``branch``: the branch whose schema
    ``schema`` is and whose snapshots are read; a branch other than main also sets the ``branch``
    option, as Java's branch tables do.
    """

    def __init__(
        self,
        file_io: FileIO,
        path: str,
        schema: TableSchema,
        options: Mapping[str, str] | None = None,
        *,
        manifest_cache_entries: int = DEFAULT_MANIFEST_CACHE_ENTRIES,
        branch: str = MAIN_BRANCH,
        snapshot_manager: SnapshotManager | None = None,
    ) -> None:
        self.file_io = file_io
        self.path = path.rstrip("/")
        self.branch_name = branch
        # snapshot/ and schema/ of the branch; manifests and data stay under self.path (self.paths)
        self.branch_root = branch_path(self.path, branch)
        self.dynamic_options = dict(options or {})
        if branch != MAIN_BRANCH:
            self.dynamic_options[BRANCH] = branch
        self.schema = self._with_options(schema)
        self.schema_manager = SchemaManager(file_io, self.branch_root)
        # ``snapshot_manager``: one shared with other objects of the same table (its cache of immutable
        # snapshot files), for this branch's root.
        if snapshot_manager is not None and snapshot_manager.paths.root != self.branch_root:
            raise ValueError(
                f"snapshot manager of {snapshot_manager.paths.root}, table at {self.branch_root}"
            )
        self.snapshot_manager = snapshot_manager or SnapshotManager(file_io, self.branch_root)
        self.paths = TablePaths.for_table(self.path, self.schema.partition_type.fields, self.options)
        self.manifest_cache: LruCache[tuple[ManifestEntry, ...]] = LruCache(manifest_cache_entries)
        self.manifest_list_cache: LruCache[tuple[ManifestFileMeta, ...]] = LruCache(manifest_cache_entries)
        parallelism = int(self.options.get(SCAN_MANIFEST_PARALLELISM) or DEFAULT_SCAN_PARALLELISM)
        self.manifest_reader = ManifestReader(
            file_io,
            self.paths,
            manifest_format=self.options.manifest_format,
            parallelism=parallelism,
            cache=self.manifest_cache,
            list_cache=self.manifest_list_cache,
        )
        # Set by whoever opened the table for writing (``paimon_meta.open_table`` or a catalog): how
        # ``new_commit()`` is guarded. None = read-only.
        self.committer_factory: CommitterFactory | None = None
        # Set by a catalog that decides who sees what (``connect_service``): the row filters and column
        # masks a read of a ``query-auth.enabled`` table applies (paimon_meta.table.read.query_auth).
        # None: every row, unmasked (a table opened by path or through the metastore: an operator's read).
        self.query_auth: QueryAuth | None = None

    @staticmethod
    def open(
        path_or_uri: str, options: Mapping[str, str] | None = None, *, branch: str = MAIN_BRANCH
    ) -> FileStoreTable:
        """Open the table (its ``branch``) at a path or URI (``options`` configure the FileIO, e.g. S3
        settings). ``TableNotFoundError`` if there is no schema file there."""
        location = resolve_location(path_or_uri)
        return FileStoreTable.load(get_file_io(location, options), location, branch=branch)

    @staticmethod
    def load(
        file_io: FileIO,
        path: str,
        *,
        branch: str = MAIN_BRANCH,
        options: Mapping[str, str] | None = None,
    ) -> FileStoreTable:
        """Open the table (its ``branch``, with dynamic ``options``) at ``path`` with an existing FileIO
        (shared by a catalog's tables). ``TableNotFoundError`` if the branch has no schema file."""
        schema = SchemaManager(file_io, branch_path(path, branch)).latest()
        if schema is None:
            if branch != MAIN_BRANCH:
                raise TableNotFoundError(
                    f"table {path} has no branch {branch!r} (no schema file)", path=path, branch=branch
                )
            raise TableNotFoundError(f"no Paimon table at {path} (no schema file)", path=path)
        return FileStoreTable(file_io, path, schema, options, branch=branch)

    def branch(self, name: str) -> FileStoreTable:
        """Branch ``name`` of this table (``main``: the main branch), with the same dynamic options and
        commit wiring (a commit to a branch other than main is refused before anything is written).
        ``TableNotFoundError`` if the branch does not exist."""
        options = {k: v for k, v in self.dynamic_options.items() if k != BRANCH}
        table = FileStoreTable.load(self.file_io, self.path, branch=name, options=options)
        table.committer_factory = self.committer_factory
        table.query_auth = self.query_auth
        return table

    def branch_names(self) -> list[str]:
        """The table's branches other than main that have a schema, sorted."""
        directory = join_path(self.path, BRANCH_DIR)
        pattern = re.compile(rf"^{re.escape(directory)}/{BRANCH_PREFIX}([^/]+)/schema/schema-\d+$")
        names = {m.group(1) for s in self.file_io.list_recursive(directory) if (m := pattern.match(s.path))}
        return sorted(names)

    def partition_spec(self, raw: bytes) -> dict[str, str]:
        """A serialized partition as its ``{key: value-text}`` spec (Java's partition path values)."""
        types = [f.type for f in self.schema.partition_type.fields]
        values = deserialize_row(raw, types) if types else []
        return dict(self.paths.partition_computer.spec(values))

    @staticmethod
    def check_schema(schema: TableSchema) -> None:
        """Refuse a new table's schema that paimon_meta could not write and read (bad keys or bucket
        settings, options it does not implement), before anything is written: ``ValidationError`` (or
        ``UnsupportedError``) naming what is wrong."""
        schema.bucket_keys  # noqa: B018 - validates the bucket keys against the fields
        schema.trimmed_primary_keys  # noqa: B018
        schema.core_options.check_numbers()
        check_writable(schema)

    @staticmethod
    def check_client_schema(schema: TableSchema) -> None:
        """Refuse a new table's schema that is not a valid Paimon table (bad keys, bucket settings or
        numbers: ``ValidationError``) or not a Paimon table at all (``type``: ``UnsupportedError``), for a
        table whose data its clients write and read (the REST catalog's): what paimon_meta's own reader
        and writer do not implement is refused by those operations when they run, naming the option,
        not here (the service publishes the clients' snapshots without opening their data files)."""
        schema.bucket_keys  # noqa: B018 - validates the bucket keys against the fields
        schema.trimmed_primary_keys  # noqa: B018
        schema.core_options.check_numbers()
        check_table_type(schema.options)
        check_main_branch(schema.options)
        for key in (FILE_FORMAT, CHANGELOG_FILE_FORMAT):
            value = (schema.options.get(key) or "").strip().lower()
            if value and value not in DATA_FILE_FORMATS:
                raise ValidationError(
                    f"{key}={value!r} is not a file format of Paimon tables "
                    f"({', '.join(sorted(DATA_FILE_FORMATS))})",
                    option=key,
                )
        buckets = schema.core_options.bucket
        if buckets == 0 or buckets < -2:
            raise ValidationError(f"bucket={buckets} is not a valid bucket number", option="bucket")

    def _with_options(self, schema: TableSchema) -> TableSchema:
        if not self.dynamic_options:
            return schema
        return dataclasses.replace(schema, options={**schema.options, **self.dynamic_options})

    # -- schema facts --
    @property
    def options(self) -> CoreOptions:
        return self.schema.core_options

    @property
    def fields(self) -> list[DataField]:
        return list(self.schema.fields)

    @property
    def partition_keys(self) -> list[str]:
        return list(self.schema.partition_keys)

    @property
    def primary_keys(self) -> list[str]:
        return list(self.schema.primary_keys)

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.schema.primary_keys)

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema reads return (all columns)."""
        return to_arrow_schema(self.schema.fields)

    # -- snapshots --
    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshot_manager.latest_snapshot()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id``; ``ValidationError`` if it does not exist (never or expired)."""
        if not self.snapshot_manager.snapshot_exists(snapshot_id):
            raise ValidationError(
                f"snapshot {snapshot_id} of {self.path} does not exist", snapshot_id=snapshot_id
            )
        return self.snapshot_manager.snapshot(snapshot_id)

    def schema_of(self, snapshot: Snapshot) -> TableSchema:
        """The schema a snapshot was committed with (dynamic options applied)."""
        if snapshot.schema_id == self.schema.id:
            return self.schema
        return self._with_options(self.schema_manager.schema(snapshot.schema_id))

    def new_read_builder(self) -> ReadBuilder:
        return ReadBuilder(self)

    def fallback_branch(self, schema: TableSchema | None = None) -> FileStoreTable | None:
        """The table on this table's ``scan.fallback-branch`` (as of ``schema``'s options; default the
        latest schema), or None without one. Built as Java's ``FileStoreTableFactory``: the branch's
        latest schema with this table's dynamic options. ``ValidationError`` if the branch does not
        exist."""
        name = ((schema or self.schema).options.get(SCAN_FALLBACK_BRANCH) or "").strip()
        if not name:
            return None
        options = {k: v for k, v in self.dynamic_options.items() if k != BRANCH}
        try:
            return FileStoreTable.load(self.file_io, self.path, branch=name, options=options)
        except TableNotFoundError:
            raise ValidationError(
                f"cannot read {SCAN_FALLBACK_BRANCH}={name!r}: table {self.path} has no branch {name!r}",
                option=SCAN_FALLBACK_BRANCH,
                value=name,
            ) from None

    def new_batch_write_builder(self) -> BatchWriteBuilder:
        """Write and commit one batch (pypaimon's ``new_batch_write_builder``)."""
        return BatchWriteBuilder(self)

    def new_stream_write_builder(self) -> StreamWriteBuilder:
        """Write and commit repeatedly with caller-chosen identifiers (exactly-once per identifier)."""
        return StreamWriteBuilder(self)
