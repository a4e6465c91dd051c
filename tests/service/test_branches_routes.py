"""The branch routes' answers, in process: the protocol's error body with the resource type the spec names
(404 ``BRANCH``, 409 ``BRANCH``, 404 ``TAG``, 404 ``TABLE``), 400 for names Java refuses, and what a
success leaves on storage."""

from __future__ import annotations

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.guard import StorageGuard
from paimon_meta.metastore.branches import branch_pointers
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.table.paths import branch_path
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.builder import Committer
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, commit_body, seed

pytestmark = pytest.mark.postgres

B = f"{P}/databases/db/tables/t/branches"


def test_branch_routes(service_catalog: MetastoreCatalog, service_client: TestClient) -> None:
    seed(service_catalog)
    tag_ops.create_tag(service_catalog, "db.t", "first", 1)
    h = auth(make_principal(service_catalog, "etl", [("admin", None, None)]))

    def error(answer: Response) -> tuple[int, str | None, str | None]:
        body = answer.json()
        return answer.status_code, body.get("resourceType"), body.get("resourceName")

    assert service_client.post(B, json={"branch": "b1", "fromTag": "first"}, headers=h).status_code == 200
    assert service_client.get(B, headers=h).json() == {"branches": ["b1"]}
    assert error(service_client.post(B, json={"branch": "b1"}, headers=h)) == (409, "BRANCH", "b1")
    assert error(service_client.post(B, json={"branch": "b2", "fromTag": "nope"}, headers=h))[:2] == (
        404,
        "TAG",
    )
    for bad in ("main", "42", "a/b", ""):
        answer = service_client.post(B, json={"branch": bad}, headers=h)
        assert answer.status_code == 400, (bad, answer.text)
    assert error(service_client.delete(f"{B}/nope", headers=h)) == (404, "BRANCH", "nope")
    assert error(service_client.post(f"{B}/nope/rename", json={"toBranch": "x"}, headers=h)) == (
        404,
        "BRANCH",
        "nope",
    )
    assert error(service_client.post(f"{B}/nope/forward", json={}, headers=h)) == (404, "BRANCH", "nope")
    missing = f"{P}/databases/db/tables/nope/branches"
    assert error(service_client.get(missing, headers=h))[:2] == (404, "TABLE")
    assert service_client.post(f"{B}/b1/rename", json={"toBranch": "b2"}, headers=h).status_code == 200
    assert service_client.post(f"{B}/b2/forward", json={}, headers=h).status_code == 200
    assert service_client.delete(f"{B}/b2", headers=h).status_code == 200
    assert service_client.get(B, headers=h).json() == {"branches": []}


def test_a_branch_identifier_reads_and_commits_the_branch(
    service_catalog: MetastoreCatalog, service_client: TestClient
) -> None:
    """pypaimon names a branch's table ``t$branch_b1`` in the path: GET table answers the branch's schema
    at the table's path, GET snapshot its latest, POST commit publishes onto it under the table's lock
    (base check as on main: a replay is ``success: false``), never onto main; grants are the table's."""
    base = seed(service_catalog)
    tag_ops.create_tag(service_catalog, "db.t", "first", 1)
    h = auth(make_principal(service_catalog, "etl", [("admin", None, None)]))
    writer = auth(make_principal(service_catalog, "w", [("write", "db", "t")]))
    reader = auth(make_principal(service_catalog, "r", [("read", "db", "t")]))
    assert service_client.post(B, json={"branch": "b1", "fromTag": "first"}, headers=h).status_code == 200
    branch_table = f"{P}/databases/db/tables/t%24branch_b1"
    got = service_client.get(branch_table, headers=reader)
    assert got.status_code == 200, got.text
    main = service_client.get(f"{P}/databases/db/tables/t", headers=h).json()
    assert (got.json()["path"], got.json()["id"], got.json()["schemaId"]) == (
        main["path"],
        main["id"],
        main["schemaId"],
    )
    assert service_client.get(f"{branch_table}/snapshot", headers=h).json()["snapshot"]["snapshot"]["id"] == 1
    body = commit_body(base)
    refused = service_client.post(f"{branch_table}/commit", json=body, headers=reader)
    assert refused.status_code == 403, refused.text
    answer = service_client.post(f"{branch_table}/commit", json=body, headers=writer)
    assert answer.status_code == 200 and answer.json() == {"success": True}, answer.text
    again = service_client.post(f"{branch_table}/commit", json=body, headers=writer)
    assert again.status_code == 200 and again.json() == {"success": False}, again.text
    assert service_client.get(f"{branch_table}/snapshot", headers=h).json()["snapshot"]["snapshot"]["id"] == 2
    assert service_catalog.table_row("db.t").latest_snapshot_id == 1  # main untouched
    table = service_catalog.get_table("db.t")
    assert SnapshotManager(table.file_io, branch_path(table.path, "b1")).list_snapshot_ids() == [1, 2]
    assert SnapshotManager(table.file_io, table.path).list_snapshot_ids() == [1]
    with service_catalog.engine.connect() as conn:
        events = conn.execute(
            text(
                "SELECT branch, event_type, snapshot_id, principal FROM paimon_commit_events "
                "WHERE commit_user = 'rest-user' ORDER BY event_id"
            )
        ).all()
    published = [tuple(e) for e in events if e[1] == "snapshot_published"]
    assert published == [("b1", "snapshot_published", 2, "w")]
    assert {e[0] for e in events} == {"b1"}  # every event of the branch's commits names it
    for path, status, kind in (
        (f"{P}/databases/db/tables/t%24branch_nope", 404, "BRANCH"),
        (f"{P}/databases/db/tables/t%24branch_nope/snapshot", 404, "BRANCH"),
        (f"{P}/databases/db/tables/t%24other", 400, None),
    ):
        answer = service_client.get(path, headers=h)
        assert (answer.status_code, answer.json().get("resourceType")) == (status, kind), (path, answer.text)
    missing = service_client.post(
        f"{P}/databases/db/tables/t%24branch_nope/commit", json=commit_body(base), headers=h
    )
    assert (missing.status_code, missing.json().get("resourceType")) == (404, "BRANCH"), missing.text


def test_a_branch_without_its_pointer_row_is_recorded_from_storage(
    service_catalog: MetastoreCatalog, service_client: TestClient
) -> None:
    """A branch made before migration 0009 (no pointer row), then written by another engine: the first
    commit on it through the service records its row from storage under the lock (the snapshot it was
    made from is not a commit on it; the engine's is ``external``), then publishes on top."""
    first = seed(service_catalog)  # the first snapshot: its base manifest list is an empty one
    tag_ops.create_tag(service_catalog, "db.t", "first", 1)
    branch_ops.create_branch(service_catalog, "db.t", "b1", "first")
    table_id = service_catalog.table_row("db.t").table_id
    with service_catalog.engine.begin() as conn:
        conn.execute(text("DELETE FROM paimon_table_branches"))
    table = service_catalog.get_table("db.t")
    _engine_commit_on_branch(table, "b1")  # as Java writes to a branch: snapshot 2, outside the metastore
    on_branch = SnapshotManager(table.file_io, branch_path(table.path, "b1"))
    latest = on_branch.latest_snapshot()
    assert latest is not None and latest.id == 2
    h = auth(make_principal(service_catalog, "etl", [("admin", None, None)]))
    answer = service_client.post(
        f"{P}/databases/db/tables/t%24branch_b1/commit",
        json=commit_body(latest, deltaManifestList=first.base_manifest_list, deltaRecordCount=0),
        headers=h,
    )
    assert answer.status_code == 200 and answer.json() == {"success": True}, answer.text
    with service_catalog.engine.connect() as conn:
        assert [(p.branch, p.latest_snapshot_id) for p in branch_pointers(conn, table_id)] == [("b1", 3)]
        events = conn.execute(
            text(
                "SELECT event_type, snapshot_id FROM paimon_commit_events WHERE branch = 'b1' "
                "AND event_type IN ('external', 'snapshot_published') ORDER BY event_id"
            )
        ).all()
    assert [tuple(e) for e in events] == [("external", 2), ("snapshot_published", 3)]
    assert service_catalog.table_row("db.t").latest_snapshot_id == 1


def _engine_commit_on_branch(table: FileStoreTable, name: str) -> None:
    """One commit to branch ``name`` straight to storage (a storage guard, no metastore), as another
    engine's writer makes it."""
    io, root = table.file_io, branch_path(table.path, name)
    schema = SchemaManager(io, root).latest()
    assert schema is not None
    on_branch = FileStoreTable(
        io, table.path, schema
    )  # main's writer, publishing into the branch's snapshot/
    on_branch.snapshot_manager = SnapshotManager(io, root)

    def committer(t: FileStoreTable, user: str) -> Committer:
        return CommitCoordinator(
            t, StorageGuard(io, root, load_snapshot_fn=t.snapshot_manager.snapshot), commit_user=user
        )

    on_branch.committer_factory = committer
    builder = on_branch.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(pa.table({"k": pa.array([7], pa.int64()), "p": ["c"], "v": ["w"]}))
    builder.new_commit().commit(w.prepare_commit())
