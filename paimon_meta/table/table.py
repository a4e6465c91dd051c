"""FileStoreTable and its pypaimon-shaped read API.

::

    table = FileStoreTable.open("s3://bucket/wh/db.db/t", {"s3.endpoint": ...})
    builder = table.new_read_builder().with_projection(["a", "b"]).with_partition_filter({"dt": "2024-01-01"})
    splits = builder.new_scan().plan().splits()
    arrow_table = builder.new_read().to_arrow(splits)

Names follow pypaimon (``new_read_builder``, ``with_projection``, ``with_partition_filter``,
``new_scan().plan().splits()``, ``new_read().to_arrow/to_pandas/to_arrow_batch_reader``).
``with_snapshot(id)`` and ``with_tag(name)`` time-travel, and so do the table options
``scan.snapshot-id``, ``scan.tag-name`` and ``scan.timestamp-millis`` (:mod:`paimon_meta.table.time_travel`);
like Java and pypaimon, a time-travelled read uses the schema that snapshot was committed with, while a
read of the latest snapshot uses the table's latest schema.

Branches (Java's ``BranchManager``): ``table.branch("b1")`` (or ``FileStoreTable.open(path, branch="b1")``)
reads branch ``b1``, whose snapshots and schemas are under ``branch/branch-b1/`` while its manifests and
data files are in the table's own directories. With ``scan.fallback-branch`` set, a read also returns,
for each partition the branch read has no file in, that partition from the fallback branch (Java's
``FallbackReadFileStoreTable``). Commits publish only to the main branch.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from paimon_meta.errors import TableNotFoundError, UnsupportedError, ValidationError
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
from paimon_meta.table.file_guard import path_guard
from paimon_meta.table.option_policy import BRANCH, MAIN_BRANCH, SCAN_FALLBACK_BRANCH, check_read_options
from paimon_meta.table.paths import BRANCH_DIR, BRANCH_PREFIX, TablePaths, branch_path, join_path
from paimon_meta.table.read.scan import (
    DEFAULT_MANIFEST_CACHE_ENTRIES,
    DEFAULT_SCAN_PARALLELISM,
    SCAN_MANIFEST_PARALLELISM,
    FileStoreScan,
    ManifestReader,
    PartitionFilterArg,
    Plan,
    Split,
)
from paimon_meta.table.read.split_read import SplitReader, resolve_projection
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.tags import validate_tag_name
from paimon_meta.table.time_travel import TimeTravel, TravelKind, resolve, snapshot_at_or_before
from paimon_meta.table.write.arrow_input import check_writable
from paimon_meta.table.write.builder import BatchWriteBuilder, StreamWriteBuilder

if TYPE_CHECKING:
    import pandas as pd

    from paimon_meta.table.write.builder import CommitterFactory


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
        check_writable(schema)

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


class ReadBuilder:
    """Configures a scan and a read of one table (pypaimon's ``ReadBuilder``)."""

    def __init__(self, table: FileStoreTable, *, fallback: bool = True) -> None:
        self.table = table
        self._projection: list[str] | None = None
        self._partition_filter: PartitionFilterArg | None = None
        self._buckets: int | Iterable[int] | None = None
        self._snapshot_id: int | None = None
        self._tag: str | None = None
        # False for the read of a fallback branch itself (Java's createWithoutFallbackBranch)
        self._use_fallback = fallback

    def with_projection(self, projection: Sequence[str]) -> ReadBuilder:
        """Read only these columns, in this order (unknown names fail at ``new_scan``/``new_read``)."""
        self._projection = list(projection)
        return self

    def with_partition_filter(self, partition_filter: PartitionFilterArg) -> ReadBuilder:
        """A partition spec ``{"k": value}`` (values typed or as Java's partition strings; the default
        partition name means null), a list of specs (any matches), or a predicate on the decoded
        partition tuple (ordered as the partition keys)."""
        self._partition_filter = partition_filter
        return self

    def with_bucket_filter(self, buckets: int | Iterable[int]) -> ReadBuilder:
        """Read only these buckets."""
        self._buckets = buckets if isinstance(buckets, int) else list(buckets)
        return self

    def with_snapshot(self, snapshot_id: int) -> ReadBuilder:
        """Read the table as of this snapshot (with that snapshot's schema); wins over the table's
        time-travel options and replaces an earlier ``with_tag``."""
        self._snapshot_id = snapshot_id
        self._tag = None
        return self

    def with_tag(self, name: str) -> ReadBuilder:
        """Read the snapshot tag ``name`` keeps (with that snapshot's schema), also after the snapshot
        itself expired; wins over the table's time-travel options and replaces an earlier
        ``with_snapshot``. ``ValidationError`` for a bad name now, ``TagNotFoundError`` at
        ``new_scan``/``new_read`` if there is no such tag."""
        self._tag = validate_tag_name(name)
        self._snapshot_id = None
        return self

    def time_travel(self) -> TimeTravel | None:
        """The snapshot this read travels to and how it was chosen; None for the latest snapshot."""
        return resolve(self.table, snapshot_id=self._snapshot_id, tag=self._tag)

    def _snapshot_and_schema(self) -> tuple[Snapshot | None, TableSchema, TimeTravel | None]:
        travel = self.time_travel()
        if travel is None:
            return self.table.latest_snapshot(), self.table.schema, None
        return travel.snapshot, self.table.schema_of(travel.snapshot), travel

    def _checked(self) -> tuple[Snapshot | None, TableSchema, TimeTravel | None]:
        snapshot, schema, travel = self._snapshot_and_schema()
        check_read_options(schema.options)
        _check_branch_option(schema, self.table.branch_name)
        return snapshot, schema, travel

    def read_type(self) -> list[DataField]:
        """The fields a read returns."""
        return resolve_projection(self._snapshot_and_schema()[1], self._projection)

    def new_scan(self) -> TableScan:
        """Plans the read; ``UnsupportedError`` naming a table option that changes what a read returns
        and is not implemented (:mod:`paimon_meta.table.option_policy`)."""
        snapshot, schema, travel = self._checked()
        resolve_projection(schema, self._projection)  # fail early on unknown columns
        scan = FileStoreScan(
            self.table.manifest_reader,
            schema,
            snapshot,
            partition_filter=self._partition_filter,
            bucket_filter=self._buckets,
        )
        fallback = self._fallback_builder(schema, travel)
        if fallback is None:
            return TableScan(scan)
        # Java's FallbackReadScan: the partitions this branch has (by the partition filter alone, not
        # the bucket filter) are complete here; the fallback branch serves every other partition.
        listing = FileStoreScan(
            self.table.manifest_reader, schema, snapshot, partition_filter=self._partition_filter
        )
        return TableScan(scan, fallback=(listing, fallback.new_scan()))

    def new_read(self) -> TableRead:
        """Reads splits; refuses the same table options as :meth:`new_scan`."""
        _, schema, travel = self._checked()
        fields = resolve_projection(schema, self._projection)
        reader = SplitReader(
            self.table.file_io, schema, self.table.schema_manager, fields, guard=path_guard(self.table)
        )
        fallback = self._fallback_builder(schema, travel)
        return TableRead(reader, None if fallback is None else fallback.new_read().reader)

    def _fallback_builder(self, schema: TableSchema, travel: TimeTravel | None) -> ReadBuilder | None:
        """The same read of the ``scan.fallback-branch`` (None without one): the projection by field
        position, the same filters, and when time travelling to a snapshot the fallback's latest
        snapshot not newer than the one read here (Java's ``rewriteFallbackOptions``). Time travel by
        tag or timestamp with a fallback branch is refused: Java hands those options to the fallback
        branch unchanged, where they name that branch's own tags and snapshots."""
        if not self._use_fallback:
            return None
        table = self.table.fallback_branch(schema)
        if table is None:
            return None
        builder = ReadBuilder(table, fallback=False)
        if travel is not None:
            if travel.kind is not TravelKind.SNAPSHOT:
                raise UnsupportedError(
                    f"time travel by {travel.target} of a table with {SCAN_FALLBACK_BRANCH} is not "
                    "supported (time travel to a snapshot id is)",
                    option=SCAN_FALLBACK_BRANCH,
                    value=table.branch_name,
                )
            # SnapshotManager.earlierOrEqualTimeMills, else Snapshot.FIRST_SNAPSHOT_ID as Java does
            at_or_before = snapshot_at_or_before(table, travel.snapshot.time_millis)
            builder._snapshot_id = 1 if at_or_before is None else at_or_before.id
        fallback_schema = builder._snapshot_and_schema()[1]
        check_fallback_schema(schema, fallback_schema, self.table.branch_name, table.branch_name)
        if self._projection is not None:
            positions = [
                schema.field_names.index(f.name) for f in resolve_projection(schema, self._projection)
            ]
            builder._projection = [fallback_schema.fields[i].name for i in positions]
        builder._partition_filter = self._partition_filter
        builder._buckets = self._buckets
        return builder


def _check_branch_option(schema: TableSchema, branch: str) -> None:
    # Java reads the snapshots of the branch its options name; a schema whose branch option names
    # another branch than the one it was loaded from would mix two branches: refused.
    named = (schema.options.get(BRANCH) or MAIN_BRANCH).strip()
    if named != branch:
        raise UnsupportedError(
            f"table option {BRANCH}={named!r} names another branch than the one read ({branch!r}); "
            f"open that branch with FileStoreTable.branch({named!r})",
            option=BRANCH,
            value=named,
        )


def check_fallback_schema(
    main: TableSchema, fallback: TableSchema, main_branch: str, fallback_branch: str
) -> None:
    """``FallbackReadFileStoreTable.validateSchema``: the same field types position by position (top-level
    nullability aside), and if the branch read has primary keys, the same primary keys.
    ``ValidationError`` naming both branches otherwise."""
    main_types = [f.type.with_nullable(True) for f in main.fields]
    fallback_types = [f.type.with_nullable(True) for f in fallback.fields]
    if main_types != fallback_types:
        raise ValidationError(
            f"branch {main_branch!r} and its {SCAN_FALLBACK_BRANCH} {fallback_branch!r} do not have the same "
            f"row type: {[str(f.type) for f in main.fields]} vs {[str(f.type) for f in fallback.fields]}",
            option=SCAN_FALLBACK_BRANCH,
            value=fallback_branch,
        )
    if main.primary_keys and list(main.primary_keys) != list(fallback.primary_keys):
        raise ValidationError(
            f"branch {main_branch!r} has primary keys {list(main.primary_keys)} but its "
            f"{SCAN_FALLBACK_BRANCH} {fallback_branch!r} has {list(fallback.primary_keys)}",
            option=SCAN_FALLBACK_BRANCH,
            value=fallback_branch,
        )


class TableScan:
    """Plans splits (pypaimon's ``TableScan``)."""

    def __init__(
        self, scan: FileStoreScan, *, fallback: tuple[FileStoreScan, TableScan] | None = None
    ) -> None:
        self.file_store_scan = scan
        self.fallback = fallback

    def plan(self) -> Plan:
        plan = self.file_store_scan.plan()
        if self.fallback is None:
            return plan
        listing, fallback_scan = self.fallback
        complete = {entry.partition for entry in listing.plan_files()}
        extra = tuple(
            dataclasses.replace(split, fallback=True)
            for split in fallback_scan.plan().splits()
            if split.partition not in complete
        )
        return Plan(plan.snapshot_id, plan.split_list + extra)


class TableRead:
    """Reads splits into Arrow (pypaimon's ``TableRead``)."""

    def __init__(self, reader: SplitReader, fallback_reader: SplitReader | None = None) -> None:
        self.reader = reader
        self.fallback_reader = fallback_reader

    @property
    def schema(self) -> pa.Schema:
        return self.reader.output_schema

    def _read(self, splits: Sequence[Split]) -> Iterator[pa.Table]:
        for split in splits:
            if not split.fallback:
                yield self.reader.read_split(split)
                continue
            if self.fallback_reader is None:
                raise ValidationError("a split of a fallback branch needs a read of a table with one")
            # the fallback branch's columns, in the projection's positions, under this branch's names
            table = self.fallback_reader.read_split(split)
            yield pa.Table.from_arrays(table.columns, schema=self.schema)

    def to_arrow(self, splits: Sequence[Split]) -> pa.Table:
        """All rows of ``splits`` as one table (an empty table with the read schema if none)."""
        tables = list(self._read(splits))
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables(tables)

    def to_arrow_batches(self, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
        """The rows as record batches, split by split (one split in memory at a time)."""
        for table in self._read(splits):
            yield from table.to_batches()

    def to_arrow_batch_reader(self, splits: Sequence[Split]) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.to_arrow_batches(splits))

    def to_pandas(self, splits: Sequence[Split]) -> pd.DataFrame:
        frame: pd.DataFrame = self.to_arrow(splits).to_pandas()
        return frame
