"""``spark.read.format("paimon_meta")`` / ``df.write.format("paimon_meta")`` (and ``readStream`` /
``writeStream``): paimon_meta tables through Spark's Python Data Source API (PySpark >= 4.1),
registered by ``spark_jobs.register(spark)``.

Modules: ``source`` (the format, :func:`register`), ``target`` (options, opening the table),
``reader`` and ``filters`` (batch reads with pruning), ``writer`` (batch writes, :func:`by_bucket`),
``stream_reader`` and ``stream_writer`` (Structured Streaming), ``attempts`` (commit outcomes ``abort``
must respect).
"""

from spark_jobs.datasource.source import FORMAT, PaimonDataSource, register
from spark_jobs.datasource.writer import by_bucket

__all__ = ["FORMAT", "PaimonDataSource", "by_bucket", "register"]
