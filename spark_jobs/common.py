"""What the driver ships to executors, and conversions between Spark and Arrow schemas.

Executors never receive a ``FileStoreTable`` (it holds caches, a FileIO with live clients and, for
catalog tables, a committer bound to the metastore): they get a :class:`TableHandle` -- the table's
path, the FileIO options and the dynamic table options -- and open the table themselves, read-only.
Committing always happens on the driver, through the table the caller opened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from paimon_meta.catalog.vended import DataToken, VendedFileIO
from paimon_meta.errors import TableNotFoundError, UnsupportedError, ValidationError
from paimon_meta.io import get_file_io
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from paimon_meta.catalog.metastore import MetastoreCatalog


#: FileIO options for executors: a map, or a callable giving the map to use *now* -- a job that vends
#: storage credentials (``--service`` against a vending ``serve``) passes
#: :meth:`spark_jobs.cli_args.OpenedTable.fresh_io_options`, called again for each new set of tasks, so a
#: long job never hands tasks credentials close to their expiry. Called on the driver only: never ship
#: the callable (it holds the catalog's connection) to executors.
IoOptions: TypeAlias = Mapping[str, str] | Callable[[], Mapping[str, str]]


def io_options_now(io_options: IoOptions | None) -> dict[str, str]:
    """The options to hand the next set of tasks: ``io_options`` itself, or what its provider returns now."""
    if io_options is None:
        return {}
    return dict(io_options() if callable(io_options) else io_options)


@dataclass(frozen=True, slots=True)
class TableHandle:
    """Enough to reopen a table on an executor: ``path``, FileIO ``io_options`` (``s3.*``...) and the
    table's dynamic ``table_options`` (layered over the schema's, as ``FileStoreTable(options=...)``).
    When ``io_options`` hold credentials a commit service vended, ``expires_at_millis`` and
    ``fetched_at`` say when they expire and when they were fetched (:meth:`stale`); else None."""

    path: str
    io_options: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    table_options: Mapping[str, str] = field(default_factory=dict)
    expires_at_millis: int | None = None
    fetched_at: float | None = None

    @staticmethod
    def of(table: FileStoreTable, io_options: IoOptions | None = None) -> TableHandle:
        """The handle of an open table for the set of tasks about to start. ``io_options`` are those the
        table was opened with (for a catalog table, ``catalog.file_io_options``; FileIO objects do not
        keep them), or a provider of them, asked now (vended credentials: see :data:`IoOptions`)."""
        options = io_options_now(io_options)
        expires, fetched = None, None
        if isinstance(table.file_io, VendedFileIO):
            # The provider just took its options from this FileIO's credentials (one per table and
            # catalog): the same token, not a new fetch.
            token = table.file_io.token()
            expires, fetched = token.expires_at_millis, token.fetched_at
        return TableHandle(table.path, options, dict(table.dynamic_options), expires, fetched)

    def stale(self, now: float | None = None) -> bool:
        """Whether the vended credentials in ``io_options`` are too close to their expiry for a task
        starting now (as ``VendedFileIO`` decides it: less than an hour, or half their lifetime, left).
        Never for a handle without vended credentials."""
        if self.expires_at_millis is None:
            return False
        fetched = self.fetched_at if self.fetched_at is not None else time.time()
        return DataToken({}, self.expires_at_millis, fetched).stale(now)

    def open(self) -> FileStoreTable:
        """The table at its latest schema, read-only (no committer): executors only write files."""
        file_io = get_file_io(self.path, self.io_options)
        schema = SchemaManager(file_io, self.path).latest()
        if schema is None:
            raise TableNotFoundError(f"no Paimon table at {self.path} (no schema file)", path=self.path)
        return FileStoreTable(file_io, self.path, schema, self.table_options)


def parse_options(pairs: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (repeated ``--option`` arguments) as a dict."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"option {pair!r} is not of the form key=value")
        out[key.strip()] = value.strip()
    return out


def connect_catalog(
    metastore_url: str | None,
    warehouse: str | None,
    options: Mapping[str, str],
    *,
    catalog: str | None = None,
) -> MetastoreCatalog:
    """``paimon_meta.connect(...)``: the metastore catalog (embedded Postgres when no URL is given
    and ``$PAIMON_META_URL`` is unset). ``catalog``: a catalog of the metastore (``paimon-meta catalogs
    create``), whose warehouse and storage profile the metastore holds; ``warehouse`` is then None.

    Raises:
        ValidationError: both ``warehouse`` and ``catalog`` given (``options`` names them).
        CatalogNotFoundError: ``catalog`` is not a catalog of the metastore."""
    from paimon_meta.catalog.metastore import connect

    refuse_warehouse_and_catalog(warehouse, catalog, "warehouse", "catalog")
    return connect(metastore_url, warehouse, catalog=catalog, **options)


def refuse_warehouse_and_catalog(
    warehouse: str | None, catalog: str | None, warehouse_name: str, catalog_name: str
) -> None:
    """A ``ValidationError`` naming both arguments (``warehouse_name``, ``catalog_name``: as the caller
    spells them, ``--warehouse``/``--catalog`` or the data source's options) when both are given: the
    catalog's warehouse is the metastore's, a second one would contradict or silently lose to it."""
    if warehouse is not None and catalog is not None:
        raise ValidationError(
            f"give {catalog_name} {catalog!r} or {warehouse_name} {warehouse!r}, not both: the catalog's "
            "warehouse and storage profile are the metastore's",
            options=[warehouse_name, catalog_name],
        )


# ---- Arrow <-> Spark ------------------------------------------------------------------------------


def _spark_compatible(arrow_type: pa.DataType, column: str) -> pa.DataType:
    """The Arrow type Spark exchanges for a column of ``arrow_type``: Spark timestamps are
    microseconds (naive -> TIMESTAMP_NTZ, zoned -> TIMESTAMP in UTC)."""
    t = pa.types
    if t.is_timestamp(arrow_type):
        return pa.timestamp("us", "UTC" if arrow_type.tz is not None else None)
    if t.is_time(arrow_type):
        raise UnsupportedError(
            f"column {column!r} is a TIME column, which Spark's Arrow bridge cannot carry", field=column
        )
    if t.is_large_binary(arrow_type):
        return pa.binary()
    if t.is_list(arrow_type):
        return pa.list_(_spark_compatible(arrow_type.value_type, column))
    if t.is_map(arrow_type):
        return pa.map_(
            _spark_compatible(arrow_type.key_type, column), _spark_compatible(arrow_type.item_type, column)
        )
    if t.is_struct(arrow_type):
        return pa.struct(
            [
                pa.field(f.name, _spark_compatible(f.type, column), f.nullable)
                for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))
            ]
        )
    return arrow_type


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every type replaced by the one Spark's Arrow bridge produces/accepts."""
    return pa.schema([pa.field(f.name, _spark_compatible(f.type, f.name), f.nullable) for f in schema])


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark StructType of an Arrow schema (after :func:`spark_arrow_schema`)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(spark_arrow_schema(schema), prefer_timestamp_ntz=True)


def cast_batch(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` cast to ``target`` (same columns); timestamps are widened or truncated to Spark's
    microseconds."""
    if batch.schema.equals(target, check_metadata=False):
        return batch
    arrays: list[Any] = [
        batch.column(i).cast(target.field(i).type, safe=False) for i in range(batch.num_columns)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=target)
