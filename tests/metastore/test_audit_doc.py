"""Every SQL block of docs/AUDIT.md runs against a migrated metastore: the cookbook cannot drift from the
schema and its views (the queries' results are checked by the tests of the views and tools)."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from paimon_meta.db.engine import libpq_conninfo
from tests.fixtures.postgres import DbFactory

pytestmark = pytest.mark.postgres

AUDIT = Path(__file__).resolve().parents[2] / "docs" / "AUDIT.md"
BLOCKS = re.findall(r"```sql\n(.*?)```", AUDIT.read_text(), re.S)


def test_the_cookbook_has_queries() -> None:
    assert len(BLOCKS) >= 9


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_every_query_of_the_cookbook_runs(pg_db_factory: DbFactory, block: str) -> None:
    with psycopg.connect(libpq_conninfo(pg_db_factory()), autocommit=True) as conn:
        # Read-only: the cookbook only queries (a write would hit the append-only triggers anyway).
        conn.execute("SET default_transaction_read_only = on")
        code = "\n".join(line.split("--", 1)[0] for line in block.splitlines())  # no "--" in strings here
        for statement in (s for s in code.split(";") if s.strip()):
            conn.execute(statement.encode())
