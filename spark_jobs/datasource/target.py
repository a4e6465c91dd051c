"""The data source's options and the table they name, opened where Spark runs the call.

Spark runs a Python data source's driver-side calls (``schema``, ``reader``/``pushFilters``/
``partitions``, ``writer``, ``commit``, ``abort``) in Python workers it starts for them, not in the
driver's own Python process: each call opens the catalog from the options, does its work and closes it
(no connection outlives a call; the workers are reused). The
executors never open a catalog: they get a :class:`~spark_jobs.common.TableHandle` (the table's
location and storage options) and read or write data files only.

Through a commit service that vends storage credentials, a handle holds the vended ones, taken when the
call that plans the tasks builds it (``partitions``, ``writer``; a stream reader's ``partitions`` for
each micro-batch). A task that starts with them stale -- a streaming write's writer is built once per
query start, and its tasks run for as long as the query -- fetches fresh ones from the service first
(:func:`current_handle`; the executors hold the service's URL and token anyway, in the options). The
checkpoint location is not the table's: vended credentials never open it (the storage options do).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.table import time_travel
from paimon_meta.table.option_policy import SCAN_TAG_NAME
from paimon_meta.table.read.builder import ReadBuilder
from paimon_meta.table.table import FileStoreTable
from spark_jobs.cli_args import TOKEN_ENV, OpenedTable, open_service_table
from spark_jobs.common import TableHandle, connect_catalog, parse_options, refuse_warehouse_and_catalog

#: Options the data source reads itself; every other option is a storage/catalog option
#: (``s3.endpoint``, ``s3.access-key``, ``lock.lease-seconds``, with ``service`` the client's
#: ``rest.retry.deadline-seconds`` and ``rest.retry.max-backoff-seconds``, ...).
PATH = "path"
METASTORE = "metastore"
WAREHOUSE = "warehouse"
#: A catalog of the metastore (its warehouse and storage profile are the metastore's), or with
#: ``service`` the service's catalog of that name.
CATALOG = "catalog"
SERVICE = "service"
TOKEN = "token"
CATALOG_NAME = "catalog-name"
SNAPSHOT_ID = "snapshot-id"
TAG = "tag"
COLUMNS = "columns"
OVERWRITE_PARTITION = "overwrite-partition"
#: Streaming: Spark's checkpoint location (handed to a sink's options lower-cased), the commit user a
#: sink commits as (default: kept in the checkpoint), the snapshot a stream read starts from.
CHECKPOINT_LOCATION = "checkpointlocation"
COMMIT_USER = "commit-user"
SCAN_SNAPSHOT_ID = "scan.snapshot-id"
SOURCE_OPTIONS = frozenset(
    {
        PATH,
        METASTORE,
        WAREHOUSE,
        CATALOG,
        SERVICE,
        TOKEN,
        CATALOG_NAME,
        SNAPSHOT_ID,
        TAG,
        COLUMNS,
        OVERWRITE_PARTITION,
        CHECKPOINT_LOCATION,
        COMMIT_USER,
        SCAN_SNAPSHOT_ID,
    }
)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The parsed options of one read or write (Spark hands them over with lower-cased keys).

    ``table`` is ``db.table`` in a catalog -- the metastore's (``metastore``/``warehouse``, else
    ``$PAIMON_META_URL``/``$PAIMON_META_WAREHOUSE``; or ``catalog``, a catalog of the metastore whose
    warehouse and storage profile the metastore holds, never with ``warehouse``) or a commit
    service's (``service`` + ``token``, else ``$PAIMON_META_TOKEN``) -- or a table location (contains
    ``/``), opened without a catalog (storage-guarded commits, as ``paimon_meta.open_table``).
    """

    table: str
    metastore: str | None = None
    warehouse: str | None = None
    catalog: str | None = None
    service: str | None = None
    token: str | None = None
    catalog_name: str | None = None
    snapshot_id: int | None = None
    tag: str | None = None
    columns: tuple[str, ...] | None = None
    overwrite_partition: dict[str, str] | None = None
    storage: dict[str, str] = field(default_factory=dict)
    checkpoint_location: str | None = None
    commit_user: str | None = None
    scan_snapshot_id: int | None = None

    @staticmethod
    def parse(options: Mapping[str, str]) -> SourceOptions:
        """``ValidationError`` naming the option when one is missing or malformed."""
        opts = {k.lower(): v for k, v in options.items()}
        table = (opts.get(PATH) or "").strip()
        if not table:
            raise ValidationError(
                "name the table: .load('db.table') / .save('db.table') (or a table location)", option=PATH
            )
        refuse_warehouse_and_catalog(
            opts.get(WAREHOUSE) or None, opts.get(CATALOG) or None, WAREHOUSE, CATALOG
        )
        snapshot_id = _int_option(opts, SNAPSHOT_ID)
        tag = opts.get(TAG) or None
        if snapshot_id is not None and tag is not None:
            raise ValidationError(f"give {SNAPSHOT_ID} or {TAG}, not both", option=TAG)
        columns = None
        if opts.get(COLUMNS):
            columns = tuple(c.strip() for c in opts[COLUMNS].split(",") if c.strip())
        overwrite_partition = None
        if opts.get(OVERWRITE_PARTITION):
            try:
                overwrite_partition = parse_options(opts[OVERWRITE_PARTITION].split(","))
            except ValueError as e:
                raise ValidationError(
                    f"{OVERWRITE_PARTITION} is k=v[,k=v...]: {e}", option=OVERWRITE_PARTITION
                ) from None
        return SourceOptions(
            table=table,
            metastore=opts.get(METASTORE) or None,
            warehouse=opts.get(WAREHOUSE) or None,
            catalog=opts.get(CATALOG) or None,
            service=opts.get(SERVICE) or None,
            token=opts.get(TOKEN) or None,
            catalog_name=opts.get(CATALOG_NAME) or None,
            snapshot_id=snapshot_id,
            tag=tag,
            columns=columns,
            overwrite_partition=overwrite_partition,
            storage={k: v for k, v in opts.items() if k not in SOURCE_OPTIONS},
            checkpoint_location=opts.get(CHECKPOINT_LOCATION) or None,
            commit_user=(opts.get(COMMIT_USER) or "").strip() or None,
            scan_snapshot_id=_int_option(opts, SCAN_SNAPSHOT_ID),
        )

    @property
    def is_location(self) -> bool:
        """Whether ``table`` is a table location rather than a ``db.table`` identifier."""
        return "/" in self.table and self.metastore is None and self.service is None and self.catalog is None


def open_target(opts: SourceOptions) -> OpenedTable:
    """The table the options name, open for writing, with the storage options executors need (take
    ``opened.io_options`` when building the handle of a set of tasks: through a service that vends
    credentials they are the current vended ones). Close it (``opened.close()``) when done."""
    if opts.service is not None:
        token = opts.token or os.environ.get(TOKEN_ENV)
        if not token:
            raise ValidationError(f"option {SERVICE} needs option {TOKEN} or ${TOKEN_ENV}", option=TOKEN)
        if opts.catalog is not None and opts.catalog_name not in (None, opts.catalog):
            raise ValidationError(
                f"options {CATALOG} {opts.catalog!r} and {CATALOG_NAME} {opts.catalog_name!r} name two "
                "catalogs: give one",
                options=[CATALOG, CATALOG_NAME],
            )
        return open_service_table(
            opts.service, token, opts.table, opts.storage, catalog_name=opts.catalog or opts.catalog_name
        )
    if opts.is_location:
        from paimon_meta.catalog.storage import open_table

        return OpenedTable(open_table(opts.table, opts.storage), dict(opts.storage), lambda: None)
    catalog = connect_catalog(opts.metastore, opts.warehouse, opts.storage, catalog=opts.catalog)
    try:
        return OpenedTable(catalog.get_table(opts.table), dict(catalog.file_io_options), catalog.close)
    except BaseException:
        catalog.close()
        raise


def current_handle(handle: TableHandle, opts: SourceOptions) -> TableHandle:
    """``handle`` for a task starting now: itself, or -- its vended credentials stale, in a task that
    started long after the driver built it (a streaming write's writer is built once per query start;
    a late wave of tasks) -- the same handle on credentials fetched from the service now. Runs on
    executors, which hold the service's URL and token anyway (in the source's options)."""
    if opts.service is None or not handle.stale():
        return handle
    opened = open_target(opts)
    try:
        fresh = TableHandle.of(opened.table, opened.fresh_io_options)
    finally:
        opened.close()
    return dataclasses.replace(
        handle,
        io_options=fresh.io_options,
        expires_at_millis=fresh.expires_at_millis,
        fetched_at=fresh.fetched_at,
    )


def _int_option(opts: Mapping[str, str], name: str) -> int | None:
    if not opts.get(name):
        return None
    try:
        return int(opts[name])
    except ValueError:
        raise ValidationError(f"{name} must be an integer, got {opts[name]!r}", option=name) from None


@dataclass(frozen=True, slots=True)
class ReadAt:
    """What a read time-travels to, in a form executors redo without a catalog: a snapshot id, or a tag
    whose snapshot is no longer a snapshot of the table (expired, or rolled back and re-created with
    other content), read through the tag file as ``ReadBuilder.with_tag`` does. Neither: the latest."""

    snapshot_id: int | None = None
    tag: str | None = None


LATEST = ReadAt()


def read_at(table: FileStoreTable, opts: SourceOptions) -> ReadAt:
    """The snapshot a read time-travels to (``snapshot-id``, the snapshot a ``tag`` keeps, else the
    table's ``scan.snapshot-id``/``scan.tag-name``/``scan.timestamp-millis``), :data:`LATEST` if none.
    A tag whose snapshot expired still reads (expiration keeps the files tagged snapshots name)."""
    travel = time_travel.resolve(table, snapshot_id=opts.snapshot_id, tag=opts.tag)
    if travel is None:
        return LATEST
    if time_travel.is_stored(table, travel.snapshot):
        return ReadAt(snapshot_id=travel.snapshot.id)
    tag = opts.tag if opts.tag is not None else table.schema.options.get(SCAN_TAG_NAME)
    if travel.kind is not time_travel.TravelKind.TAG or tag is None:
        # resolve() only returns stored snapshots for a snapshot id or a timestamp
        raise UnsupportedError(f"{travel.target}: snapshot {travel.snapshot.id} is not on storage")
    return ReadAt(tag=tag)


def read_builder(table: FileStoreTable, at: ReadAt, columns: Sequence[str] | None = None) -> ReadBuilder:
    """The table's read builder at ``at``, projected to ``columns``."""
    builder = table.new_read_builder()
    if at.tag is not None:
        builder = builder.with_tag(at.tag)
    elif at.snapshot_id is not None:
        builder = builder.with_snapshot(at.snapshot_id)
    if columns is not None:
        builder = builder.with_projection(columns)
    return builder


def read_schema(table: FileStoreTable, at: ReadAt) -> TableSchema:
    """The schema a read at ``at`` returns rows of, as ``ReadBuilder`` decides it: the latest schema
    for the latest snapshot, else the schema the time-travelled snapshot was committed with."""
    if at.tag is not None:
        travel = time_travel.resolve(table, tag=at.tag)
        assert travel is not None
        return table.schema_of(travel.snapshot)
    if at.snapshot_id is None:
        return table.schema
    return table.schema_of(table.snapshot(at.snapshot_id))
