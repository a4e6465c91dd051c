"""FileStoreTable and its pypaimon-shaped read API.

::

    table = FileStoreTable.open("s3://bucket/wh/db.db/t", {"s3.endpoint": ...})
    builder = table.new_read_builder().with_projection(["a", "b"]).with_partition_filter({"dt": "2024-01-01"})
    splits = builder.new_scan().plan().splits()
    arrow_table = builder.new_read().to_arrow(splits)

Names follow pypaimon (``new_read_builder``, ``with_projection``, ``with_partition_filter``,
``new_scan().plan().splits()``, ``new_read().to_arrow/to_pandas/to_arrow_batch_reader``).
``with_snapshot(id)`` time-travels; like Java and pypaimon, a time-travelled read uses the schema
that snapshot was committed with, while a read of the latest snapshot uses the table's latest schema.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from paimon_meta.errors import TableNotFoundError, ValidationError
from paimon_meta.io import get_file_io, resolve_location
from paimon_meta.io.base import FileIO
from paimon_meta.spec.arrow import to_arrow_schema
from paimon_meta.spec.binary_row import deserialize_row
from paimon_meta.spec.manifest import ManifestEntry, ManifestFileMeta
from paimon_meta.spec.option_audit import check_read_options
from paimon_meta.spec.options import CoreOptions
from paimon_meta.spec.schema import TableSchema
from paimon_meta.spec.snapshot import Snapshot
from paimon_meta.spec.types import DataField
from paimon_meta.table.builder import BatchWriteBuilder, StreamWriteBuilder
from paimon_meta.table.cache import LruCache
from paimon_meta.table.paths import TablePaths
from paimon_meta.table.read import SplitReader, resolve_projection
from paimon_meta.table.scan import (
    DEFAULT_MANIFEST_CACHE_ENTRIES,
    DEFAULT_SCAN_PARALLELISM,
    SCAN_MANIFEST_PARALLELISM,
    FileStoreScan,
    ManifestReader,
    PartitionFilterArg,
    Plan,
    Split,
)
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.write_input import check_writable

if TYPE_CHECKING:
    import pandas as pd

    from paimon_meta.table.builder import CommitterFactory


class FileStoreTable:
    """One Paimon table on storage: its schema, snapshots, manifests and data files.

    ``options`` are dynamic options layered over the schema's (as Java's ``Table.copy``). The table
    owns its manifest caches: a new table object starts cold.
    """

    def __init__(
        self,
        file_io: FileIO,
        path: str,
        schema: TableSchema,
        options: Mapping[str, str] | None = None,
        *,
        manifest_cache_entries: int = DEFAULT_MANIFEST_CACHE_ENTRIES,
    ) -> None:
        self.file_io = file_io
        self.path = path.rstrip("/")
        self.dynamic_options = dict(options or {})
        self.schema = self._with_options(schema)
        self.schema_manager = SchemaManager(file_io, self.path)
        self.snapshot_manager = SnapshotManager(file_io, self.path)
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
    def open(path_or_uri: str, options: Mapping[str, str] | None = None) -> FileStoreTable:
        """Open the table at a path or URI (``options`` configure the FileIO, e.g. S3 settings).
        ``TableNotFoundError`` if there is no schema file there."""
        location = resolve_location(path_or_uri)
        return FileStoreTable.load(get_file_io(location, options), location)

    @staticmethod
    def load(file_io: FileIO, path: str) -> FileStoreTable:
        """Open the table at ``path`` with an existing FileIO (shared by a catalog's tables).
        ``TableNotFoundError`` if there is no schema file there."""
        schema = SchemaManager(file_io, path).latest()
        if schema is None:
            raise TableNotFoundError(f"no Paimon table at {path} (no schema file)", path=path)
        return FileStoreTable(file_io, path, schema)

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

    def new_batch_write_builder(self) -> BatchWriteBuilder:
        """Write and commit one batch (pypaimon's ``new_batch_write_builder``)."""
        return BatchWriteBuilder(self)

    def new_stream_write_builder(self) -> StreamWriteBuilder:
        """Write and commit repeatedly with caller-chosen identifiers (exactly-once per identifier)."""
        return StreamWriteBuilder(self)


class ReadBuilder:
    """Configures a scan and a read of one table (pypaimon's ``ReadBuilder``)."""

    def __init__(self, table: FileStoreTable) -> None:
        self.table = table
        self._projection: list[str] | None = None
        self._partition_filter: PartitionFilterArg | None = None
        self._buckets: int | Iterable[int] | None = None
        self._snapshot_id: int | None = None

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
        """Read the table as of this snapshot (with that snapshot's schema)."""
        self._snapshot_id = snapshot_id
        return self

    def _snapshot_and_schema(self) -> tuple[Snapshot | None, TableSchema]:
        if self._snapshot_id is None:
            return self.table.latest_snapshot(), self.table.schema
        snapshot = self.table.snapshot(self._snapshot_id)
        return snapshot, self.table.schema_of(snapshot)

    def read_type(self) -> list[DataField]:
        """The fields a read returns."""
        return resolve_projection(self._snapshot_and_schema()[1], self._projection)

    def new_scan(self) -> TableScan:
        """Plans the read; ``UnsupportedError`` naming a table option that changes what a read returns
        and is not implemented (:mod:`paimon_meta.spec.option_audit`)."""
        snapshot, schema = self._snapshot_and_schema()
        check_read_options(schema.options)
        resolve_projection(schema, self._projection)  # fail early on unknown columns
        scan = FileStoreScan(
            self.table.manifest_reader,
            schema,
            snapshot,
            partition_filter=self._partition_filter,
            bucket_filter=self._buckets,
        )
        return TableScan(scan)

    def new_read(self) -> TableRead:
        """Reads splits; refuses the same table options as :meth:`new_scan`."""
        _, schema = self._snapshot_and_schema()
        check_read_options(schema.options)
        fields = resolve_projection(schema, self._projection)
        return TableRead(SplitReader(self.table.file_io, schema, self.table.schema_manager, fields))


class TableScan:
    """Plans splits (pypaimon's ``TableScan``)."""

    def __init__(self, scan: FileStoreScan) -> None:
        self.file_store_scan = scan

    def plan(self) -> Plan:
        return self.file_store_scan.plan()


class TableRead:
    """Reads splits into Arrow (pypaimon's ``TableRead``)."""

    def __init__(self, reader: SplitReader) -> None:
        self.reader = reader

    @property
    def schema(self) -> pa.Schema:
        return self.reader.output_schema

    def to_arrow(self, splits: Sequence[Split]) -> pa.Table:
        """All rows of ``splits`` as one table (an empty table with the read schema if none)."""
        tables = list(self.reader.read(splits))
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables(tables)

    def to_arrow_batches(self, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
        """The rows as record batches, split by split (one split in memory at a time)."""
        for table in self.reader.read(splits):
            yield from table.to_batches()

    def to_arrow_batch_reader(self, splits: Sequence[Split]) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.to_arrow_batches(splits))

    def to_pandas(self, splits: Sequence[Split]) -> pd.DataFrame:
        frame: pd.DataFrame = self.to_arrow(splits).to_pandas()
        return frame
