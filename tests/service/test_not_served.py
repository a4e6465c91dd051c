"""The REST catalog operations the service does not serve yet (``paths.NOT_SERVED``) answer 501 with the
protocol's error body naming the operation, need a token, check the prefix, and are in the served
document; together with the served ones they are the spec's 56 operations, each routed once."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.rest import paths
from paimon_meta.service import (
    routes_access,
    routes_audit,
    routes_branches,
    routes_catalog,
    routes_commits,
    routes_functions,
    routes_partitions,
    routes_snapshots,
    routes_table,
    routes_tables,
    routes_views,
)
from paimon_meta.service.openapi import document
from tests.fixtures.service import in_process_client, make_principal
from tests.service.helpers import auth

pytestmark = pytest.mark.postgres

#: The spec's operations this service serves.
PROTOCOL_SERVED = {
    ("GET", paths.CONFIG),
    ("GET", paths.DATABASES),
    ("POST", paths.DATABASES),
    ("GET", paths.DATABASE),
    ("DELETE", paths.DATABASE),
    ("POST", paths.DATABASE),
    ("GET", paths.TABLES),
    ("POST", paths.TABLES),
    ("GET", paths.TABLE),
    ("POST", paths.TABLE),
    ("DELETE", paths.TABLE),
    ("POST", paths.RENAME_TABLE),
    ("POST", paths.COMMIT),
    ("POST", paths.ROLLBACK),
    ("GET", paths.SNAPSHOT),
    ("GET", paths.PARTITIONS),
    ("POST", paths.PARTITIONS),
    ("POST", paths.DROP_PARTITIONS),
    ("POST", paths.MARK_DONE_PARTITIONS),
    ("POST", paths.PARTITIONS_BY_NAMES),
    ("POST", paths.PARTITIONS_BY_FILTER),
    ("GET", paths.SNAPSHOT_VERSION),
    ("GET", paths.SNAPSHOTS),
    ("GET", paths.CONSUMERS),
    ("POST", paths.RESET_CONSUMER),
    ("GET", paths.TAGS),
    ("POST", paths.TAGS),
    ("GET", paths.TAG),
    ("DELETE", paths.TAG),
    ("GET", paths.TABLE_TOKEN),
    ("POST", paths.TABLE_AUTH),
    ("GET", paths.BRANCHES),
    ("POST", paths.BRANCHES),
    ("DELETE", paths.BRANCH),
    ("POST", paths.RENAME_BRANCH),
    ("POST", paths.FORWARD_BRANCH),
    ("GET", paths.TABLE_DETAILS),
    ("GET", paths.TABLES_GLOBALLY),
    ("GET", paths.TABLE_BY_ID),
    ("POST", paths.REGISTER_TABLE),
    ("POST", paths.ROLLBACK_SCHEMA),
    ("GET", paths.VIEWS),
    ("POST", paths.VIEWS),
    ("GET", paths.VIEW_DETAILS),
    ("GET", paths.VIEWS_GLOBALLY),
    ("GET", paths.VIEW),
    ("POST", paths.VIEW),
    ("DELETE", paths.VIEW),
    ("POST", paths.RENAME_VIEW),
    ("GET", paths.FUNCTIONS),
    ("POST", paths.FUNCTIONS),
    ("GET", paths.FUNCTION_DETAILS),
    ("GET", paths.FUNCTIONS_GLOBALLY),
    ("GET", paths.FUNCTION),
    ("POST", paths.FUNCTION),
    ("DELETE", paths.FUNCTION),
}


def _concrete(template: str, prefix: str = "paimon") -> str:
    return re.sub(r"{(\w+)}", lambda m: prefix if m.group(1) == "prefix" else f"x-{m.group(1)}", template)


def test_each_answers_501_naming_the_operation(service_catalog: MetastoreCatalog) -> None:
    reader = auth(make_principal(service_catalog, "nobody"))  # a token without any grant
    with in_process_client(service_catalog) as client:
        for method, template, operation in paths.NOT_SERVED:
            body: dict[str, str] | None = {} if method == "POST" else None
            answer = client.request(method, _concrete(template), json=body, headers=reader)
            assert answer.status_code == 501, (operation, answer.text)
            error = answer.json()
            assert error["code"] == 501 and operation in error["message"], error
            # a token first, and the prefix is this catalog's
            assert client.request(method, _concrete(template), json=body).status_code == 401
            other = client.request(method, _concrete(template, "elsewhere"), json=body, headers=reader)
            assert other.status_code == 404 and "no catalog" in other.json()["message"], other.text


def test_served_and_not_served_are_the_spec_once_each() -> None:
    served = {(m.upper(), p) for p, item in document()["paths"].items() for m in item}
    not_served = {(m, t) for m, t, _ in paths.NOT_SERVED}
    listed = paths.NOT_SERVED  # a length check narrows this name's type, not paths.NOT_SERVED's
    assert len(not_served) == len(listed) == 0
    assert not_served <= served  # documented (answering 501)
    served_elsewhere = {
        (method, route.path)
        for router in (
            routes_catalog.router,
            routes_table.router,
            routes_commits.router,
            routes_audit.router,
            routes_access.router,
            routes_partitions.router,
            routes_snapshots.router,
            routes_branches.router,
            routes_tables.router,
            routes_views.router,
            routes_functions.router,
        )
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }
    assert not served_elsewhere & not_served  # none is also served (it would shadow or be shadowed)
    assert len(served_elsewhere & PROTOCOL_SERVED) == paths.SPEC_OPERATIONS - len(not_served)
    for method, template, _ in paths.NOT_SERVED:
        responses = document()["paths"][template][method.lower()]["responses"]
        assert "501" in responses and "200" not in responses, template
