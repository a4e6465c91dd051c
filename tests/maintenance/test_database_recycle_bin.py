"""The recycle bin's databases: a database drop keeps the database (its properties, grants, views and
its tables, with their files and grants) for the retention; ``undrop_database`` restores all of it in one
transaction if the name is free; purges (explicit, or by the queue once the retention passed) delete its
tables' files and its entry; the CLI and the extension routes do the same."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.errors import (
    DatabaseAlreadyExistsError,
    DatabaseNotFoundError,
    DroppedDatabaseNotFoundError,
    TableNotFoundError,
)
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.metastore.principals import Principals
from paimon_meta.model.catalog_objects import ViewSchema
from paimon_meta.ops import tables as table_ops
from tests.ops.helpers import TABLE, create, files_under, grants_of, read_keys, write

pytestmark = pytest.mark.postgres


def _populate(catalog: MetastoreCatalog) -> tuple[Principals, dict[str, list[str]]]:
    create(catalog)
    catalog.alter_database("db", updates={"owner": "team-a"}, removals=[])
    create(catalog, "db.other")
    write(catalog, range(5))
    write(catalog, [7], identifier="db.other")
    catalog.objects.create_view("db", "v", ViewSchema(fields=(), query="SELECT 1"), principal="admin")
    principals = Principals(catalog.engine)
    principals.create("alice")
    principals.grant("alice", Privilege.READ, database="db")
    principals.grant("alice", Privilege.WRITE, database="db", table="t")
    locations = {name: catalog.location_of(catalog.table_row(f"db.{name}")) for name in ("t", "other")}
    return principals, {location: files_under(location) for location in locations.values()}


def test_a_dropped_database_comes_back_with_its_tables_grants_views_and_properties(
    catalog: MetastoreCatalog,
) -> None:
    principals, files = _populate(catalog)
    ids = {name: catalog.table_row(f"db.{name}").table_id for name in ("t", "other")}

    dropped = table_ops.drop_database(catalog, "db", principal="admin")
    assert sorted(dropped.tables) == ["other", "t"] and dropped.views == ["v"]
    # gone for every client; files kept; grants and objects set aside
    assert "db" not in catalog.list_databases()
    with pytest.raises(TableNotFoundError):
        catalog.get_table(TABLE)
    assert grants_of(principals, "alice") == set()
    assert catalog.objects.list_views(limit=100) == []
    for location, before in files.items():
        assert before and files_under(location) == before
    (entry,) = catalog.recycle_bin.databases()
    assert entry.name == "db" and entry.run_id == dropped.run_id and len(entry.table_drop_ids) == 2
    assert sorted(t.name for t in catalog.recycle_bin.tables_of(entry)) == ["other", "t"]
    # a table of a dropped database cannot come back alone: its database is gone
    with pytest.raises(DatabaseNotFoundError):
        table_ops.undrop_table(catalog, TABLE)

    done = table_ops.undrop_database(catalog, "db", principal="admin")
    assert done.tables == ["other", "t"] and done.grants == 1
    assert "db" in catalog.list_databases()
    assert catalog.registry.get_database("db").properties.get("owner") == "team-a"
    assert {t: catalog.table_row(f"db.{t}").table_id for t in ("t", "other")} == ids
    assert read_keys(catalog) == list(range(5)) and read_keys(catalog, identifier="db.other") == [7]
    assert grants_of(principals, "alice") == {("read", "db", None), ("write", "db", "t")}
    assert [(v.database, v.name) for v in catalog.objects.list_views(limit=100)] == [("db", "v")]
    assert catalog.recycle_bin.databases() == [] and catalog.recycle_bin.entries() == []
    write(catalog, [9])  # commits again on the restored table
    assert read_keys(catalog) == [*range(5), 9]
    with catalog.engine.connect() as conn:
        undrops = conn.execute(
            text(
                "SELECT table_identifier FROM paimon_maintenance_events WHERE operation = 'undrop_table' "
                "AND event_type = 'finished' ORDER BY table_identifier"
            )
        ).scalars()
        assert list(undrops) == ["db.other", "db.t"]
        view_events = conn.execute(
            text(
                "SELECT event_type FROM paimon_catalog_object_events WHERE identifier = 'db.v' "
                "ORDER BY event_id"
            )
        ).scalars()
        assert list(view_events) == ["created", "dropped", "created"]


def test_undrop_is_refused_while_the_name_is_taken(catalog: MetastoreCatalog) -> None:
    _populate(catalog)
    table_ops.drop_database(catalog, "db")
    catalog.create_database("db", False)
    create(catalog)  # a new db.t
    with pytest.raises(DatabaseAlreadyExistsError):
        table_ops.undrop_database(catalog, "db")
    # nothing restored, the entry and its tables still in the bin
    assert catalog.list_tables("db") == ["t"] and read_keys(catalog) == []
    (entry,) = catalog.recycle_bin.databases()
    assert len(catalog.recycle_bin.tables_of(entry)) == 2
    table_ops.drop_database(catalog, "db")
    # two drops of one name: the latest comes back (the empty db.t), then the older one by its drop id
    table_ops.undrop_database(catalog, "db")
    assert read_keys(catalog) == []
    table_ops.drop_database(catalog, "db")
    older = min(catalog.recycle_bin.databases(), key=lambda d: d.drop_id)
    table_ops.undrop_database(catalog, "db", drop_id=older.drop_id)
    assert read_keys(catalog) == list(range(5))


def test_purge_deletes_its_tables_files_and_the_entry(catalog: MetastoreCatalog) -> None:
    _populate(catalog)
    locations = [catalog.location_of(catalog.table_row(f"db.{t}")) for t in ("t", "other")]
    table_ops.drop_database(catalog, "db")
    assert table_ops.purge_database(catalog, "db") > 0
    assert all(files_under(location) == [] for location in locations)
    assert catalog.recycle_bin.databases() == [] and catalog.recycle_bin.entries() == []
    with pytest.raises(DroppedDatabaseNotFoundError):
        table_ops.undrop_database(catalog, "db")


def test_the_queue_removes_a_database_past_its_retention_after_its_tables(catalog: MetastoreCatalog) -> None:
    _populate(catalog)
    location = catalog.location_of(catalog.table_row(TABLE))
    table_ops.drop_database(catalog, "db")
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.drain()
    assert len(catalog.recycle_bin.databases()) == 1  # not yet past its retention
    with catalog.engine.begin() as conn:
        conn.execute(text("UPDATE paimon_dropped_tables SET purge_after = now() - interval '1 s'"))
        conn.execute(text("UPDATE paimon_dropped_databases SET purge_after = now() - interval '1 s'"))
    # the database's entry is kept while its tables' purges are pending
    (entry,) = catalog.recycle_bin.databases()
    assert not catalog.recycle_bin.remove_database(entry.drop_id)
    maintainer.drain()
    assert files_under(location) == []
    assert catalog.recycle_bin.entries() == []
    # the sweep after the purges removes the database's entry
    maintainer.scheduler.tick(sweep=True)
    assert catalog.recycle_bin.databases() == []
