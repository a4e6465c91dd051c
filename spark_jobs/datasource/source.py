"""The ``paimon_meta`` format: the :class:`PaimonDataSource` class Spark instantiates, and
:func:`register`.

::

    import spark_jobs
    spark_jobs.register(spark)
    options = {"metastore": URL, "warehouse": WH}  # or {"metastore": URL, "catalog": NAME}
    df = spark.read.format("paimon_meta").options(**options).load("db.t")
    df.write.format("paimon_meta").options(**options).mode("append").save("db.t")
    spark.readStream.format("paimon_meta").options(**options).load("db.t")
    df.writeStream.format("paimon_meta").options(**options).option("checkpointLocation", C).start("db.t")

Options: :mod:`spark_jobs.datasource.target`. Reads: :mod:`spark_jobs.datasource.reader`; writes:
:mod:`spark_jobs.datasource.writer`; streaming: :mod:`spark_jobs.datasource.stream_reader`,
:mod:`spark_jobs.datasource.stream_writer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

from paimon_meta.model.arrow import to_arrow_schema
from spark_jobs.common import spark_schema
from spark_jobs.datasource.reader import PaimonReader
from spark_jobs.datasource.stream_reader import PaimonStreamReader
from spark_jobs.datasource.stream_writer import PaimonStreamWriter, new_stream_writer
from spark_jobs.datasource.target import SourceOptions, open_target, read_at, read_builder
from spark_jobs.datasource.writer import PaimonWriter, new_writer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT = "paimon_meta"
# Spark refuses to plan a read of a Python data source that implements pushFilters unless this is on
# (it is off by default in Spark 4.x).
FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


class PaimonDataSource(DataSource):
    """Paimon tables of a paimon_meta catalog (or a table location) as a Spark data source."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _options(self) -> SourceOptions:
        return SourceOptions.parse(dict(self.options))

    def schema(self) -> StructType:
        """The table's columns as Spark types (of the time-travelled snapshot's schema with
        ``snapshot-id``/``tag``), only those of the ``columns`` option if given."""
        opts = self._options()
        opened = open_target(opts)
        try:
            table = opened.table
            builder = read_builder(table, read_at(table, opts), opts.columns)
            fields = builder.read_type()
        finally:
            opened.close()
        return spark_schema(to_arrow_schema(fields))

    def reader(self, schema: StructType) -> PaimonReader:
        return PaimonReader(self._options(), schema)

    def writer(self, schema: StructType, overwrite: bool) -> PaimonWriter:
        return new_writer(self._options(), schema, overwrite)

    def streamReader(self, schema: StructType) -> PaimonStreamReader:
        return PaimonStreamReader(self._options(), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> PaimonStreamWriter:
        return new_stream_writer(self._options(), schema, overwrite)


def register(spark: SparkSession) -> None:
    """Register the ``paimon_meta`` format with ``spark`` and turn on Python filter pushdown (a
    session setting Spark needs for any Python data source that prunes by filters)."""
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(PaimonDataSource)
