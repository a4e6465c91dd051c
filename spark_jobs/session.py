"""A SparkSession configured for paimon_meta jobs, and the environment PySpark needs.

PySpark launches its JVM (``spark-submit``) from the driver process and starts Python workers with
``PYSPARK_PYTHON``: if that is unset, workers run whatever ``python3`` is on ``PATH``, which usually
lacks paimon_meta, and every ``mapInArrow`` task fails with ``ModuleNotFoundError``. On machines whose
hostname does not resolve to a reachable address, the driver binds to nothing useful unless
``SPARK_LOCAL_IP`` is set. :func:`prepare_environment` sets both (only when unset), and must run before
the first session is created in the process.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"

# Small, single-machine defaults: the jobs shuffle by (partition, bucket), so a handful of shuffle
# partitions is plenty; Arrow batches of 10k rows keep Python worker memory flat.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.sql.session.timeZone": "UTC",
}


class SparkUnavailableError(RuntimeError):
    """PySpark or a Java runtime is missing (the message says which)."""


def java_available() -> str | None:
    """The ``java`` executable PySpark would use (``$JAVA_HOME/bin/java`` or on ``PATH``), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def prepare_environment() -> None:
    """Point PySpark's workers at this interpreter and bind the driver to loopback, unless the
    environment already says otherwise."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def build_session(
    app_name: str = "paimon_meta",
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with :data:`DEFAULT_CONF` overlaid by ``conf``.

    ``master`` defaults to ``$SPARK_MASTER`` or ``local[2]``; under ``spark-submit`` an existing
    session's master wins (``getOrCreate``). Raises :class:`SparkUnavailableError` when PySpark or Java
    is missing.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailableError(f"pyspark is not installed: {e}") from e
    if java_available() is None:
        raise SparkUnavailableError("no Java runtime: set JAVA_HOME or put java (17) on PATH")
    prepare_environment()
    builder = SparkSession.builder.appName(app_name)
    if master is not None or "SPARK_MASTER" in os.environ or not _under_spark_submit():
        builder = builder.master(master or os.environ.get("SPARK_MASTER", DEFAULT_MASTER))
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _under_spark_submit() -> bool:
    # spark-submit starts the Python driver with the gateway already running and the master in
    # its conf; setting one here would override the command line.
    return "PYSPARK_GATEWAY_PORT" in os.environ
