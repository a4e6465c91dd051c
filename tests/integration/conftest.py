"""Fixtures of the writer-process tests: ``target`` (``db.t`` created through the metastore, see
:func:`tests.integration.procs.create_target`) and ``catalog`` (connected to it). The catalog options
(lease, acquire timeout) are the test module's ``OPTIONS``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.integration._workers import Target
from tests.integration.procs import create_target


@pytest.fixture
def target(request: pytest.FixtureRequest, clean_db: str, tmp_path: Path) -> Target:
    return create_target(clean_db, str(tmp_path / "warehouse"), request.module.OPTIONS)


@pytest.fixture
def catalog(target: Target) -> Iterator[MetastoreCatalog]:
    with paimon_meta.connect(target.url, target.warehouse, **target.options) as cat:
        yield cat
