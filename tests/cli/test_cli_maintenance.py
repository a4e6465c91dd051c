"""``paimon-meta maintain``, ``maintenance queue|runs|debts|pause|resume|retry`` and the recycle bin's
``dropped|undrop|purge`` and ``dropped-databases|undrop-database|purge-database``."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.ops import tables as table_ops
from tests.cli.helpers import Cli
from tests.ops.helpers import TABLE, create, write

pytestmark = pytest.mark.postgres


def test_maintain_once_pause_resume_queue_and_runs(cli: Cli, catalog: MetastoreCatalog) -> None:
    create(catalog, **{"compaction.min.file-num": "3"})
    for k in range(8):
        write(catalog, [k])
    assert cli.json("maintenance", "pause", TABLE) == {"scope": TABLE, "changed": True}
    assert cli.json("maintain", "--once") == {"jobs": 0}  # measured, nothing queued while paused
    queued = cli.json("maintenance", "queue")
    assert queued["jobs"] == [] and queued["paused"][0]["scope"] == TABLE
    debts = cli.json("maintenance", "debts")
    assert debts[0]["table_identifier"] == TABLE and debts[0]["debt"]["max_small_files"] >= 3
    assert cli.json("maintenance", "resume", TABLE)["changed"] is True
    assert cli.json("maintain", "--once")["jobs"] >= 1
    runs = cli.json("maintenance", "runs", "--table", TABLE)
    assert [(r["kind"], r["outcome"]) for r in runs if r["kind"] == "compact"] == [("compact", "done")]
    assert cli.json("maintenance", "queue")["jobs"] == []
    code, _out, err = cli.run("maintenance", "retry", "12345")
    assert code == 3 and "no dead maintenance job" in err


def test_dropped_undrop_and_purge(cli: Cli, catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, [1, 2])
    location = catalog.location_of(catalog.table_row(TABLE))
    table_ops.drop_table(catalog, TABLE)
    (entry,) = cli.json("dropped")
    assert entry["table"] == TABLE
    assert cli.json("undrop", TABLE)["location"] == location
    code, _out, err = cli.run("undrop", TABLE)
    assert code == 3 and "recycle bin" in err
    table_ops.drop_table(catalog, TABLE)
    assert cli.json("purge", TABLE)["deleted_files"] > 0
    assert not any(p.is_file() for p in Path(location).rglob("*"))
    assert cli.json("dropped") == []


def test_dropped_databases_undrop_database_and_purge_database(cli: Cli, catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, [1, 2])
    location = catalog.location_of(catalog.table_row(TABLE))
    table_ops.drop_database(catalog, "db")
    (entry,) = cli.json("dropped-databases")
    assert (entry["database"], entry["tables"]) == ("db", 1)
    restored = cli.json("undrop-database", "db")
    assert restored["tables"] == ["t"] and restored["drop_id"] == entry["drop_id"]
    assert catalog.list_tables("db") == ["t"]
    code, _out, err = cli.run("undrop-database", "db")
    assert code == 3 and "recycle bin" in err
    table_ops.drop_database(catalog, "db")
    assert cli.json("purge-database", "db")["deleted_files"] > 0
    assert not any(p.is_file() for p in Path(location).rglob("*"))
    assert cli.json("dropped-databases") == [] and cli.json("dropped") == []
