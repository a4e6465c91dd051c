"""Fixtures of the commit tests that run against real Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    """A catalog with table ``db.t`` (partitioned by ``p``, 2 buckets on ``k``)."""
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"))
    cat.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"})
    try:
        yield cat
    finally:
        cat.close()
