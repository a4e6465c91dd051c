"""Batch reads: one Spark partition per split, read on the executors with the table's read API.

``pushFilters`` and ``partitions`` run in one Python worker on the driver side: the first sorts
Spark's filters (:mod:`spark_jobs.datasource.filters`), the second opens the catalog, plans the scan
with the table's ``ReadBuilder`` at the snapshot the options name (partition terms as its partition
filter; file terms then skip files by their statistics) and returns one :class:`SplitPartition` per
remaining split. A partition carries what an executor needs and nothing live: the table's location
and storage options, the snapshot, the projected columns and the split (its files and deletion
vectors). ``read`` opens the table by path and reads the split with the same ``ReadBuilder``'s
``TableRead`` (merge-on-read, deletion vectors, schema evolution, fallback branches, the refusal of
table options it does not implement), yielding Arrow batches typed as Spark expects them.

Row filters and column masks: on a ``query-auth.enabled`` table read through a commit service,
``partitions`` plans with the service's table, whose plan asks ``POST .../auth`` once for the columns read
and attaches the answer to every split; each executor applies its split's rules
(:mod:`paimon_meta.table.read.query_auth`, ``QueryRules``): the same rows and masked values as
``connect_service`` and pypaimon. A table named by location (or through the metastore) is an operator's
read: every row.

Projection: Spark 4.x does not push column pruning into Python data sources, so the columns read are
the DataFrame's schema: the whole table, or those of the ``columns`` option or of a ``.schema(...)``
naming a subset of the table's columns (with their types).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition

from paimon_meta.errors import ValidationError
from paimon_meta.model.arrow import to_arrow_schema
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.read.predicate import FileStatsFilter, partition_predicate
from paimon_meta.table.read.scan import Split
from paimon_meta.table.read.split_read import resolve_projection
from spark_jobs.common import TableHandle, cast_batch, spark_schema
from spark_jobs.datasource.filters import PushedFilters, push
from spark_jobs.datasource.target import (
    ReadAt,
    SourceOptions,
    current_handle,
    open_target,
    read_at,
    read_builder,
    read_schema,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType


class SplitPartition(InputPartition):
    """One split and what an executor needs to read it (picklable, no catalog): the table's location
    and storage options, the snapshot or tag time travelled to, the columns, the split."""

    def __init__(self, handle: TableHandle, at: ReadAt, columns: Sequence[str], split: Split) -> None:
        super().__init__(split.bucket)
        self.handle = handle
        self.at = at
        self.columns = tuple(columns)
        self.split = split


class PaimonReader(DataSourceReader):
    """The reader of one ``spark.read.format("paimon_meta")`` scan (see the module docstring)."""

    def __init__(self, options: SourceOptions, read_schema: StructType) -> None:
        self.options = options
        self.read_schema = read_schema
        self.pushed = PushedFilters()

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        opened = open_target(self.options)
        try:
            schema = read_schema(opened.table, read_at(opened.table, self.options))
        finally:
            opened.close()
        self.pushed = push(filters, schema)
        return self.pushed.remaining

    def _columns(self, schema: TableSchema) -> list[str]:
        """The columns to read: the DataFrame's, each a table column of the type the source reports."""
        names = list(self.read_schema.fieldNames())
        unknown = [n for n in names if n not in schema.field_names]
        if unknown:
            raise ValidationError(
                f"columns {unknown} are not in the table (it has {schema.field_names})", fields=unknown
            )
        expected = spark_schema(to_arrow_schema(resolve_projection(schema, names)))
        for want, got in zip(expected.fields, self.read_schema.fields):
            if want.dataType != got.dataType:
                raise ValidationError(
                    f"column {got.name!r} is {want.dataType.simpleString()} in the table, "
                    f"not {got.dataType.simpleString()}",
                    field=got.name,
                )
        return names

    def partitions(self) -> list[SplitPartition]:
        opened = open_target(self.options)
        try:
            table = opened.table
            at = read_at(table, self.options)
            schema = read_schema(table, at)
            columns = self._columns(schema)
            builder = read_builder(table, at, columns)
            terms = self.pushed.partition_terms
            if terms:
                builder = builder.with_partition_filter(partition_predicate(schema, terms))
            splits = builder.new_scan().plan().splits()
            stats = FileStatsFilter(schema, self.pushed.file_terms, table.schema_manager.schema)
            if stats.active:
                # a scan.fallback-branch's splits hold that branch's files (its own schema ids): kept whole
                splits = stats.prune([s for s in splits if not s.fallback]) + [
                    s for s in splits if s.fallback
                ]
            handle = TableHandle.of(table, opened.io_options)
            return [SplitPartition(handle, at, columns, s) for s in splits]
        finally:
            opened.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema as spark_to_arrow

        if not isinstance(partition, SplitPartition):
            return  # Spark's stand-in InputPartition(None) when a scan plans no split
        table = current_handle(partition.handle, self.options).open()  # fresh credentials if stale
        read = read_builder(table, partition.at, partition.columns).new_read()
        # Exactly the Arrow schema Spark checks batches against (names, types, nullability).
        target = spark_to_arrow(self.read_schema, timezone="UTC")
        for batch in read.to_arrow_batches([partition.split]):
            yield cast_batch(batch, target)
