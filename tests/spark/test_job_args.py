"""The Spark jobs name the metastore as the ``paimon-meta`` CLI does (``--metastore``), and still accept
``--metastore-url``; a job opens the table in that metastore."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

import paimon_meta
from spark_jobs.cli_args import add_table_arguments, open_target
from tests.ops.helpers import FAST_LOCK, create

pytestmark = pytest.mark.postgres


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_table_arguments(p)
    return p


@pytest.mark.parametrize("flag", ["--metastore", "--metastore-url"])
def test_jobs_take_metastore_like_the_cli(flag: str, clean_db: str, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        create(catalog)
    args = parser().parse_args(["--table", "db.t", flag, clean_db, "--warehouse", warehouse])
    opened = open_target(args)
    try:
        assert opened.table.path == f"{warehouse}/db.db/t"
    finally:
        opened.close()
    assert "--metastore URL, --metastore-url URL" in parser().format_help()
