"""``spark_cluster``: a Spark standalone cluster (master + two workers, tests/spark/cluster.py) for the
session, or the one ``python -m tests.spark.cluster run`` started (``PAIMON_META_SPARK_MASTER`` set)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark.cluster import MASTER_ENV, WEB_UI_ENV, WORKER_DIRS_ENV, ClusterStartError, SparkCluster


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """The running cluster; stopped (every process group) at the end of the session if started here."""
    external = os.environ.get(MASTER_ENV)
    if external:
        dirs = [Path(d) for d in os.environ.get(WORKER_DIRS_ENV, "").split(os.pathsep) if d]
        log_dir = dirs[0].parent if dirs else tmp_path_factory.mktemp("spark-cluster")
        yield SparkCluster(external, os.environ.get(WEB_UI_ENV, ""), log_dir, dirs)
        return
    try:
        with SparkCluster.running(tmp_path_factory.mktemp("spark-cluster")) as cluster:
            yield cluster
    except ClusterStartError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Spark standalone cluster did not start under CI: {e}")
        pytest.skip(f"Spark standalone cluster did not start: {e}")
