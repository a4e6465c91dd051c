"""PySpark jobs over paimon_meta tables (no Paimon jars): ``batch_write``, ``streaming_write``,
``compaction`` and ``read``; each job module runs with ``python -m spark_jobs.<name>`` or
``spark-submit``. They produce CommitMessages on executors and commit through the table's public API
on the driver, never touching the metastore directly."""
