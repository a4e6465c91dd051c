"""The console's table page previews the rows as the signed-in principal reads them: on a
``query-auth.enabled`` table its stored row filters and column masks apply (the read path of every
reader), only the columns its range admits are shown, and a policy that cannot be applied shows no
row at all."""

from __future__ import annotations

import html
import re

import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Assignment, ColumnRange, Resource, ResourceType
from paimon_meta.metastore.assignments import Assignments, Policies
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.console import session
from tests.catalog.test_query_auth_reads import EU, MASK_EMAIL, NOT_5, ROWS, SCHEMA
from tests.fixtures.service import in_process_client, make_principal

pytestmark = pytest.mark.postgres

ROW = re.compile(r'<tr data-testid="preview-row">(.*?)</tr>', re.S)
CELL = re.compile(r'<td class="mono">(.*?)</td>', re.S)
HEAD = re.compile(r'<table class="grid" data-testid="preview">\s*<thead><tr>(.*?)</tr>', re.S)


def preview(page: str) -> tuple[list[str], list[list[str]]]:
    head = HEAD.search(page)
    assert head is not None, page
    columns = [html.unescape(c) for c in re.findall(r"<th>(.*?)</th>", head.group(1))]
    return columns, [[html.unescape(c) for c in CELL.findall(r)] for r in ROW.findall(page)]


def page_of(catalog: MetastoreCatalog, token: str) -> str:
    with in_process_client(catalog) as client:
        client.cookies.set(session.COOKIE, token)
        got = client.get("/ui/tables/db/t")
        assert got.status_code == 200, got.text
        text: str = got.text
        return text


@pytest.fixture
def table(service_catalog: MetastoreCatalog) -> MetastoreCatalog:
    created = service_catalog.create_table(
        "db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2", "query-auth.enabled": "true"}
    )
    wb = created.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(ROWS)
    wb.new_commit().commit(w.prepare_commit())
    return service_catalog


def _policy(catalog: MetastoreCatalog, principal: str, column: str | None, body: str) -> None:
    row = catalog.table_row("db.t")
    Policies(catalog.engine, catalog_key=catalog.registry.catalog_key).create(
        row.table_id,
        "db.t",
        principal,
        policy_type="ROW_FILTER" if column is None else "COLUMN_MASKING",
        on_column=column,
        body=body,
        created_by="tests",
    )


def test_the_preview_applies_the_principals_policies(table: MetastoreCatalog) -> None:
    admin = make_principal(table, "ops", [("admin", None, None)])
    reader = make_principal(table, "reader", [("read", None, None)])
    # one row filter of its own, one of a group it is a member of (ANDed), a mask
    Principals(table.engine).create_group("analysts", created_by="tests")
    Assignments(table.engine, catalog_key=table.registry.catalog_key).add_member(
        "group:analysts", "reader", added_by="tests"
    )
    _policy(table, "reader", None, EU)
    _policy(table, "group:analysts", None, NOT_5)
    _policy(table, "reader", "email", MASK_EMAIL)
    columns, rows = preview(page_of(table, reader))
    assert columns == ["id", "region", "name", "email"]
    assert sorted(rows) == [["1", "eu", "alice", "***@eu"], ["3", "eu", "carol", "***@eu"]]
    # the administrator has no policy: every row, unmasked
    columns, rows = preview(page_of(table, admin))
    assert sorted(rows, key=lambda r: int(r[0])) == [
        [str(v) if v is not None else "null" for v in r.values()] for r in ROWS.to_pylist()
    ]


def test_the_preview_shows_only_the_columns_of_the_range(table: MetastoreCatalog) -> None:
    analyst = make_principal(table, "analyst", [("read", None, None)])
    Assignments(table.engine, catalog_key=table.registry.catalog_key).grant(
        Assignment(
            "analyst",
            Resource(ResourceType.COLUMN, "db", "t"),
            PermissionAccess.SELECT,
            columns=ColumnRange.allowlist(["id", "name"]),
        ),
        granted_by="tests",
    )
    _policy(table, "analyst", None, EU)  # reads region, which the range hides: read, then dropped
    columns, rows = preview(page_of(table, analyst))
    assert columns == ["id", "name"]
    assert sorted(rows) == [["1", "alice"], ["3", "carol"], ["5", "erin"]]


def test_a_policy_that_cannot_be_applied_shows_no_row(table: MetastoreCatalog) -> None:
    reader = make_principal(table, "reader", [("read", None, None)])
    _policy(table, "reader", None, EU.replace('"EQUAL"', '"SOUNDS_LIKE"'))
    page = page_of(table, reader)
    assert 'data-testid="preview-row"' not in page
    assert 'data-testid="preview-refused"' in page and "SOUNDS_LIKE" in page
