"""Fixtures of the maintenance tests: a catalog on a fresh database and warehouse, short lease."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.ops.helpers import FAST_LOCK


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture
def catalog(clean_db: str, warehouse: str) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        yield cat
    finally:
        cat.close()
