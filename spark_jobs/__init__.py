"""PySpark jobs over paimon_meta tables (no Paimon jars): ``batch_write``, ``streaming_write``,
``compaction`` and ``read``; each job module runs with ``python -m spark_jobs.<name>`` or
``spark-submit``. They produce CommitMessages on executors and commit through the table's public API
on the driver, never touching the metastore directly. :func:`register` adds the ``paimon_meta``
data source format (:mod:`spark_jobs.datasource`) to a SparkSession."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("paimon_meta")`` and ``df.write.format("paimon_meta")`` (and their
    ``readStream``/``writeStream`` forms) available in ``spark`` (see :mod:`spark_jobs.datasource`)."""
    from spark_jobs.datasource import register as register_source

    register_source(spark)
