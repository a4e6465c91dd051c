"""The service's side of maintenance: a drop goes to the recycle bin and the undrop route restores it;
deletion protection answers 409; /metrics shows the queue and the runs; the workers run inside the
service when asked to."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.maintenance.debt import bucket_files
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.ops.metrics import scrape
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.service import make_principal
from tests.service.helpers import SCHEMA, P, auth, seed

pytestmark = pytest.mark.postgres


def test_drop_then_undrop_through_the_service(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog, "db.t")
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    assert service_client.delete(f"{P}/databases/db/tables/t", headers=admin).status_code == 200
    gone = service_client.get(f"{P}/databases/db/tables/t", headers=admin)
    assert gone.status_code == 404 and gone.json()["resourceType"] == "TABLE"
    assert service_client.post(f"{P}/databases/db/tables/t/undrop", headers=admin).status_code == 200
    back = service_client.get(f"{P}/databases/db/tables/t", headers=admin)
    assert back.status_code == 200, back.text
    table = service_catalog.get_table("db.t")
    builder = table.new_read_builder()
    assert builder.new_read().to_arrow(builder.new_scan().plan().splits()).num_rows == 3
    # not in the bin any more: 404; a reader may not undrop
    again = service_client.post(f"{P}/databases/db/tables/t/undrop", headers=admin)
    assert again.status_code == 404 and again.json()["resourceType"] == "TABLE"
    reader = auth(make_principal(service_catalog, "r", [("read", "db", None)]))
    assert service_client.post(f"{P}/databases/db/tables/t/undrop", headers=reader).status_code == 403


def test_a_protected_table_refuses_drops_with_409(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    service_catalog.create_table("db.kept", SCHEMA, options={"deletion-protection": "true"})
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    refused = service_client.delete(f"{P}/databases/db/tables/kept", headers=admin)
    assert refused.status_code == 409 and "deletion-protection" in refused.json()["message"]
    assert service_client.delete(f"{P}/databases/db", headers=admin).status_code == 409
    assert service_client.get(f"{P}/databases/db/tables/kept", headers=admin).status_code == 200


def test_metrics_show_the_queue_the_debts_and_the_runs(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    table = service_catalog.create_table("db.pk", SCHEMA, primary_keys=["k"], options={"bucket": "1"})
    for k in range(9):
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.table({"k": pa.array([k], pa.int64()), "p": ["a"], "v": ["x"]}))
        builder.new_commit().commit(write.prepare_commit())
    maintainer = Maintainer(service_catalog, MaintainerSettings(workers=0))
    maintainer.scheduler.tick(sweep=True)
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    text = service_client.get("/metrics", headers=admin).text
    assert 'paimon_meta_maintenance_jobs{catalog="jdbc",kind="compact",state="queued"} 1' in text
    assert 'paimon_meta_maintenance_debt_sorted_runs{catalog="jdbc",table="db.pk"} 9' in text
    # 9 runs: past the stop trigger (5 + 3), where a Java writer would wait
    assert 'paimon_meta_maintenance_debt_buckets_over_stop_trigger{catalog="jdbc",table="db.pk"} 1' in text
    maintainer.drain()
    text = scrape(service_catalog.engine)  # /metrics reuses its read of the event log for a while
    assert 'paimon_meta_maintenance_runs_total{catalog="jdbc",kind="compact",outcome="done"} 1' in text


def test_the_service_runs_maintenance_workers_when_asked(service_catalog: MetastoreCatalog) -> None:
    table = service_catalog.create_table("db.pk", SCHEMA, primary_keys=["k"], options={"bucket": "1"})
    state = ServiceState(ServiceSettings(maintenance_workers=1), service_catalog)
    try:
        for k in range(6):
            builder = table.new_batch_write_builder()
            write = builder.new_write()
            write.write_arrow(pa.table({"k": pa.array([k], pa.int64()), "p": ["a"], "v": ["x"]}))
            builder.new_commit().commit(write.prepare_commit())
        deadline = time.monotonic() + 120
        while max(b.sorted_runs for b in bucket_files(service_catalog.get_table("db.pk"))) >= 5:
            assert time.monotonic() < deadline, "the service's workers never compacted the table"
            time.sleep(0.2)
    finally:
        state.maintainer.stop()


def test_the_recycle_bin_of_a_database_is_listed_with_its_drop_ids(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog, "db.t")
    seed(service_catalog, "db.u")
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    dbadmin = auth(make_principal(service_catalog, "dba", [("admin", "db", None)]))
    reader = auth(make_principal(service_catalog, "r", [("read", "db", None)]))
    assert service_client.get(f"{P}/databases/db/dropped-tables", headers=admin).json()["tables"] == []
    assert service_client.delete(f"{P}/databases/db/tables/t", headers=admin).status_code == 200
    assert service_client.delete(f"{P}/databases/db/tables/u", headers=admin).status_code == 200
    listed = service_client.get(f"{P}/databases/db/dropped-tables", headers=dbadmin)
    assert listed.status_code == 200, listed.text
    tables = listed.json()["tables"]
    assert [(t["database"], t["name"], t["droppedBy"]) for t in tables] == [
        ("db", "t", "root"),
        ("db", "u", "root"),
    ]
    assert all(t["purgeAfter"] > t["droppedAt"] and t["dropId"] > 0 for t in tables)
    # paged; the drop id is what an undrop takes
    first = service_client.get(f"{P}/databases/db/dropped-tables?maxResults=1", headers=admin).json()
    assert [t["name"] for t in first["tables"]] == ["t"] and first["nextPageToken"] == "1"
    u = tables[1]["dropId"]
    undrop = service_client.post(f"{P}/databases/db/tables/u/undrop?dropId={u}", headers=admin)
    assert undrop.status_code == 200
    after = service_client.get(f"{P}/databases/db/dropped-tables", headers=admin).json()["tables"]
    assert [t["name"] for t in after] == ["t"]
    # reading the bin needs admin on the database, as an undrop does
    assert service_client.get(f"{P}/databases/db/dropped-tables", headers=reader).status_code == 403
    # a database dropped with its tables: still listed
    assert service_client.delete(f"{P}/databases/db", headers=admin).status_code == 200
    gone = service_client.get(f"{P}/databases/db/dropped-tables", headers=admin)
    assert gone.status_code == 200, gone.text
    assert sorted(t["name"] for t in gone.json()["tables"]) == ["t", "u"]


def test_a_dropped_database_is_listed_and_undropped_through_the_service(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog, "db.t")
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    dbadmin = auth(make_principal(service_catalog, "dba", [("admin", "db", None)]))
    assert service_client.get(f"{P}/dropped-databases", headers=admin).json()["databases"] == []
    assert service_client.delete(f"{P}/databases/db", headers=admin).status_code == 200
    assert service_client.get(f"{P}/databases/db", headers=admin).status_code == 404
    listed = service_client.get(f"{P}/dropped-databases", headers=admin)
    assert listed.status_code == 200, listed.text
    (entry,) = listed.json()["databases"]
    assert (entry["name"], entry["tables"], entry["droppedBy"], entry["grants"]) == ("db", ["t"], "root", 1)
    # the database's own admin grant went into the bin with it: undropping needs admin on the catalog
    assert service_client.post(f"{P}/databases/db/undrop", headers=dbadmin).status_code == 403
    assert service_client.get(f"{P}/dropped-databases", headers=dbadmin).status_code == 403
    undrop = service_client.post(f"{P}/databases/db/undrop?dropId={entry['dropId']}", headers=admin)
    assert undrop.status_code == 200, undrop.text
    assert undrop.json() == {"name": "db", "dropId": entry["dropId"], "tables": ["t"], "grants": 1}
    # the database admin's grant is back: it sees its table again
    assert service_client.get(f"{P}/databases/db/tables/t", headers=dbadmin).status_code == 200
    table = service_catalog.get_table("db.t")
    builder = table.new_read_builder()
    assert builder.new_read().to_arrow(builder.new_scan().plan().splits()).num_rows == 3
    # no longer in the bin: 404 DATABASE; once dropped again and the name re-created: 409
    again = service_client.post(f"{P}/databases/db/undrop", headers=admin)
    assert again.status_code == 404 and again.json()["resourceType"] == "DATABASE"
    assert service_client.delete(f"{P}/databases/db", headers=admin).status_code == 200
    assert service_client.post(f"{P}/databases", json={"name": "db"}, headers=admin).status_code == 200
    taken = service_client.post(f"{P}/databases/db/undrop", headers=admin)
    assert taken.status_code == 409, taken.text
