"""Fixtures of the CLI tests: the command bound to a fresh database and warehouse, and a catalog on them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.cli.helpers import Cli
from tests.ops.helpers import FAST_LOCK


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture
def cli(clean_db: str, warehouse: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(clean_db, warehouse, capsys)


@pytest.fixture
def catalog(clean_db: str, warehouse: str) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    yield cat
    cat.close()
