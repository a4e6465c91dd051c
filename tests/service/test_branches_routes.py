"""The branch routes' answers, in process: the protocol's error body with the resource type the spec names
(404 ``BRANCH``, 409 ``BRANCH``, 404 ``TAG``, 404 ``TABLE``), 400 for names Java refuses, and what a
success leaves on storage."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.ops import tags as tag_ops
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


def test_a_branch_identifier_is_refused_not_read_as_main(
    service_catalog: MetastoreCatalog, service_client: TestClient
) -> None:
    """pypaimon names a branch's table ``t$branch_b1`` in the path (reading or committing on a branch);
    until commits on a branch are served, that is a 400, never main's table or a commit onto main."""
    base = seed(service_catalog)
    h = auth(make_principal(service_catalog, "etl", [("admin", None, None)]))
    assert service_client.post(B, json={"branch": "b1"}, headers=h).status_code == 200
    branch_table = f"{P}/databases/db/tables/t%24branch_b1"
    for answer in (
        service_client.get(branch_table, headers=h),
        service_client.post(f"{branch_table}/commit", json=commit_body(base), headers=h),
    ):
        assert answer.status_code == 400 and "invalid table name" in answer.json()["message"], answer.text
    assert service_catalog.table_row("db.t").latest_snapshot_id == 1
