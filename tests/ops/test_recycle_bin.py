"""The recycle bin: a drop keeps the files and moves the row and grants aside; undrop restores both if the
name is free; purges (explicit, or by the maintenance queue once the retention passed); deletion
protection refuses drops."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.errors import (
    DeletionProtectedError,
    DroppedTableNotFoundError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from paimon_meta.maintenance.scheduler import debts
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.metastore.principals import Principals
from paimon_meta.ops import tables as table_ops
from paimon_meta.table.schema_change import SetOption
from tests.ops.helpers import FAST_LOCK, TABLE, create, files_under, grants_of, read_keys, write

pytestmark = pytest.mark.postgres


def test_drop_keeps_files_and_grants_aside_and_undrop_restores_them(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(10))
    row = catalog.table_row(TABLE)
    location = catalog.location_of(row)
    files = files_under(location)
    principals = Principals(catalog.engine)
    principals.create("alice")
    principals.grant("alice", Privilege.WRITE, database="db", table="t")
    principals.grant("alice", Privilege.READ, database="db")

    Maintainer(catalog, MaintainerSettings(workers=0)).scheduler.tick(sweep=True)
    assert [d["table_identifier"] for d in debts(catalog)] == [TABLE]
    binned = table_ops.drop_table(catalog, TABLE, principal="admin")
    assert binned is not None and binned.table_id == row.table_id
    # gone for every client, files untouched, the table grant set aside (the database grant stays)
    with pytest.raises(TableNotFoundError):
        catalog.get_table(TABLE)
    assert catalog.list_tables("db") == []
    assert files_under(location) == files
    assert grants_of(principals, "alice") == {("read", "db", None)}
    assert [d.identifier for d in catalog.recycle_bin.entries()] == [TABLE]
    assert debts(catalog) == []  # nor in maintenance's listings

    restored = table_ops.undrop_table(catalog, TABLE, principal="admin")
    assert restored.table_id == row.table_id and restored.location == row.location
    assert read_keys(catalog) == list(range(10))
    assert grants_of(principals, "alice") == {("read", "db", None), ("write", "db", "t")}
    assert catalog.recycle_bin.entries() == []
    assert [d["table_identifier"] for d in debts(catalog)] == [TABLE]
    write(catalog, [10])  # commits again, on the same event log
    assert read_keys(catalog) == list(range(11))
    with catalog.engine.connect() as conn:
        ops = (
            conn.execute(
                text(
                    "SELECT operation || '.' || event_type FROM paimon_maintenance_events "
                    "WHERE table_id = :id AND operation IN ('drop_table', 'undrop_table') ORDER BY event_id"
                ),
                {"id": row.table_id},
            )
            .scalars()
            .all()
        )
    assert ops == [
        "drop_table.started",
        "drop_table.finished",
        "undrop_table.started",
        "undrop_table.finished",
    ]


def test_a_new_table_may_take_a_dropped_name_and_then_undrop_is_refused(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, [1, 2])
    old_location = catalog.location_of(catalog.table_row(TABLE))
    table_ops.drop_table(catalog, TABLE)
    create(catalog)  # the name is free; the dropped files are not adopted
    new_location = catalog.location_of(catalog.table_row(TABLE))
    assert new_location != old_location
    assert read_keys(catalog) == []
    with pytest.raises(TableAlreadyExistsError):
        table_ops.undrop_table(catalog, TABLE)
    assert len(catalog.recycle_bin.entries()) == 1  # still in the bin
    table_ops.drop_table(catalog, TABLE)
    # two drops of one name: the latest comes back
    table_ops.undrop_table(catalog, TABLE)
    assert catalog.location_of(catalog.table_row(TABLE)) == new_location
    table_ops.drop_table(catalog, TABLE)
    (older,) = [d for d in catalog.recycle_bin.entries() if d.location == old_location]
    table_ops.undrop_table(catalog, TABLE, drop_id=older.drop_id)
    assert read_keys(catalog) == [1, 2]


def test_purge_deletes_the_files_and_the_bin_entry(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, [1])
    location = catalog.location_of(catalog.table_row(TABLE))
    table_ops.drop_table(catalog, TABLE)
    assert table_ops.purge_table(catalog, TABLE) > 0
    assert files_under(location) == []
    assert catalog.recycle_bin.entries() == []
    with pytest.raises(DroppedTableNotFoundError):
        table_ops.undrop_table(catalog, TABLE)


def test_the_queue_purges_drops_past_their_retention_only(catalog: MetastoreCatalog) -> None:
    create(catalog)
    create(catalog, "db.keep")
    write(catalog, [1])
    write(catalog, [2], identifier="db.keep")
    location = catalog.location_of(catalog.table_row(TABLE))
    kept = catalog.location_of(catalog.table_row("db.keep"))
    table_ops.drop_table(catalog, TABLE)
    table_ops.drop_table(catalog, "db.keep")
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE paimon_dropped_tables SET purge_after = now() - interval '1 s' WHERE table_name = 't'"
            )
        )
    maintainer = Maintainer(catalog, MaintainerSettings(workers=0))
    maintainer.drain()
    assert files_under(location) == [] and files_under(kept) != []
    assert [d.identifier for d in catalog.recycle_bin.entries()] == ["db.keep"]


def test_a_retention_of_zero_drops_at_once(clean_db: str, warehouse: str) -> None:
    cat = paimon_meta.connect(
        clean_db, warehouse, **FAST_LOCK, **{"paimon-meta.recycle-bin.retention": "0 s"}
    )
    try:
        create(cat)
        write(cat, [1])
        location = cat.location_of(cat.table_row(TABLE))
        assert table_ops.drop_table(cat, TABLE) is None
        assert not os.path.exists(location) or files_under(location) == []
        assert cat.recycle_bin.entries() == []
    finally:
        cat.close()


def test_deletion_protection_refuses_drops(catalog: MetastoreCatalog) -> None:
    create(catalog, **{"deletion-protection": "true"})
    create(catalog, "db.other")
    with pytest.raises(DeletionProtectedError):
        table_ops.drop_table(catalog, TABLE)
    with pytest.raises(DeletionProtectedError):
        table_ops.drop_table(catalog, TABLE, purge=True)
    # a database drop is refused before any of its tables is dropped
    with pytest.raises(DeletionProtectedError):
        table_ops.drop_database(catalog, "db")
    assert sorted(catalog.list_tables("db")) == ["other", "t"]
    # turned off (an ALTER as any client sends it), the drop goes through
    catalog.alter_table_changes(TABLE, [SetOption("deletion-protection", "false")])
    assert table_ops.drop_table(catalog, TABLE) is not None
