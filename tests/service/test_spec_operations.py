"""Every operation of apache/paimon's ``rest-catalog-open-api.yaml`` (``paths.SPEC_OPERATIONS``: the 56
(method, path, operationId) of the spec) is one route of the service, named in the served document by
the spec's operationId, and answers as the spec says: walked here with an admin's token against a
database that does not exist, each operation under a database answers 404 with the protocol's error body
(the spec lists 404 for every one of them); the catalog-wide ones answer 200 or, naming what is missing,
404. Nothing is written by any of these requests."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.rest import paths
from paimon_meta.service.app import create_app
from paimon_meta.service.openapi import document
from paimon_meta.service.state import ServiceSettings
from tests.fixtures.service import make_principal
from tests.service.helpers import auth, published_count

pytestmark = pytest.mark.postgres

#: The spec's statuses for each operation under ``{database}`` include 404; these are the ones without a
#: database in the path and what they answer when the names they carry do not exist.
CATALOG_WIDE = {
    "getConfig": 200,
    "listDatabases": 200,
    "createDatabase": None,  # creates: not walked (it would write)
    "ListTablesGlobally": 200,
    "getTableById": 404,
    "renameTable": 404,
    "listViewsGlobally": 200,
    "renameView": 404,
    "listFunctionsGlobally": 200,
}
_IDENT = {"database": "nope", "object": "t"}
#: A body each POST accepts (valid for its request model), so the walk reaches the missing database.
BODIES: dict[str, Any] = {
    "alterDatabase": {"removals": [], "updates": {"k": "v"}},
    "RegisterTable": {"identifier": _IDENT, "path": "/nowhere/nope.db/t"},
    "createTable": {"identifier": _IDENT, "schema": {"fields": [{"id": 0, "name": "a", "type": "INT"}]}},
    "alterTable": {"changes": [{"action": "setOption", "key": "k", "value": "v"}]},
    "renameTable": {"source": _IDENT, "destination": {"database": "nope", "object": "u"}},
    "commitTable": {"snapshot": {"id": 1}, "statistics": []},
    "rollbackTable": {"instant": {"type": "snapshot", "snapshotId": 1}},
    "rollbackSchema": {"schemaId": 0},
    "authTableQuery": {"select": None},
    "createPartitions": {"partitionSpecs": [{"p": "a"}]},
    "dropPartitions": {"partitionSpecs": [{"p": "a"}]},
    "markDonePartitions": {"specs": [{"p": "a"}]},
    "listPartitionsByNames": {"specs": [{"p": "a"}]},
    "listPartitionsByFilter": {"filter": "{}"},
    "createBranch": {"branch": "b1"},
    "renameBranch": {"toBranch": "b2"},
    "forwardBranch": {},
    "createTag": {"tagName": "x"},
    "resetConsumer": {"consumerId": "c1"},
    "createView": {"identifier": {"database": "nope", "object": "v"}, "schema": {"query": "SELECT 1"}},
    "alterView": {"changes": [{"action": "setOption", "key": "k", "value": "v"}]},
    "renameView": {
        "source": {"database": "nope", "object": "v"},
        "destination": {"database": "nope", "object": "w"},
    },
    "createFunction": {"name": "f"},
    "alterFunction": {"changes": [{"action": "setOption", "key": "k", "value": "v"}]},
    "replaceTable": {"schema": {"fields": [{"id": 0, "name": "a", "type": "INT"}]}},
    "upsertSemanticView": {"definition": {"format": "yaml", "content": "a: b"}},
}


def _all_routes(routes: list[Any]) -> list[Any]:
    """The app's routes with included routers flattened (FastAPI keeps those as one entry each)."""
    out: list[Any] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        out.extend(_all_routes(list(included.routes)) if included is not None else [route])
    return out


def _concrete(template: str) -> str:
    names = {"prefix": "paimon", "tableId": "00000000-0000-0000-0000-000000000000", "version": "LATEST"}
    return re.sub(r"{(\w+)}", lambda m: names.get(m.group(1), "nope"), template)


def test_each_operation_of_the_spec_is_one_route_named_as_the_spec_names_it() -> None:
    assert len(paths.SPEC_OPERATIONS) == 63
    assert len({(m, t) for m, t, _ in paths.SPEC_OPERATIONS}) == 63
    routes = [
        (method, route.path)
        for route in _all_routes(list(create_app(ServiceSettings()).routes))
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    ]
    doc = document()
    for method, template, operation in paths.SPEC_OPERATIONS:
        assert routes.count((method, template)) == 1, (method, template)  # none shadows another
        assert doc["paths"][template][method.lower()]["operationId"] == operation


def test_walking_the_spec_against_a_missing_database(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    before = (service_catalog.list_databases(), published_count(service_catalog))
    for method, template, operation in paths.SPEC_OPERATIONS:
        if operation in CATALOG_WIDE and CATALOG_WIDE[operation] is None:
            continue
        body = BODIES.get(operation, {} if method == "POST" else None)
        # a token first, and the prefix must be this catalog's
        assert service_client.request(method, _concrete(template), json=body).status_code == 401, operation
        if "{prefix}" in template:
            other = service_client.request(
                method, _concrete(template).replace("/paimon", "/elsewhere", 1), json=body, headers=admin
            )
            assert other.status_code == 404 and "no catalog" in other.json()["message"], (
                operation,
                other.text,
            )
        answer = service_client.request(method, _concrete(template), json=body, headers=admin)
        expected = CATALOG_WIDE.get(operation, 404)
        assert answer.status_code == expected, (operation, answer.status_code, answer.text)
        if expected == 404:
            error = answer.json()
            assert set(error) == {"message", "resourceType", "resourceName", "code"}, (operation, error)
            assert error["code"] == 404 and error["resourceType"], (operation, error)
    assert (service_catalog.list_databases(), published_count(service_catalog)) == before
