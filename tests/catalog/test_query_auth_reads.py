"""``connect_service`` reads of a ``query-auth.enabled`` table apply the service's ``/auth`` answer: only
the filtered rows, the masked column computed from the raw row, the projection kept (columns the rules
need are read and dropped again); a malformed answer or a 403 refuses the read; a table without the
option asks nothing; an operator's read through the metastore reads everything. The answers are
scripted (tests.fixtures.query_auth) against the real service app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta import errors
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.rest import RestCatalog
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from paimon_meta.table.branches import BranchManager
from paimon_meta.table.schema_change import SetOption
from tests.fixtures.query_auth import AuthAnswers
from tests.fixtures.service import make_principal
from tests.service.test_client_retries import serve_app

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        ("region", pa.string()),
        ("name", pa.string()),
        ("email", pa.string()),
    ]
)
ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, 5], pa.int32()),
        "region": ["eu", "us", "eu", None, "eu"],
        "name": ["alice", "bob", "carol", "dan", "erin"],
        "email": ["alice@x.com", "bob@y.com", None, "dan@z.com", "erin@x.com"],
    },
    schema=SCHEMA,
)
TYPES = {"id": "INT NOT NULL", "region": "STRING", "name": "STRING", "email": "STRING"}
INDEX = {n: i for i, n in enumerate(TYPES)}


def ref(name: str) -> dict[str, Any]:
    return {"index": INDEX[name], "name": name, "type": TYPES[name]}


def leaf(transform: dict[str, Any], function: str, *literals: Any) -> str:
    return json.dumps(
        {"kind": "LEAF", "transform": transform, "function": function, "literals": list(literals)}
    )


#: region = 'eu'
EU = leaf({"name": "FIELD_REF", "fieldRef": ref("region")}, "EQUAL", "eu")
#: id <> 5
NOT_5 = leaf({"name": "FIELD_REF", "fieldRef": ref("id")}, "NOT_EQUAL", 5)
#: email -> '***@' || region (computed from the raw row's region)
MASK_EMAIL = json.dumps({"name": "CONCAT_WS", "inputs": ["@", "***", ref("region")]})
#: name -> its first letter
MASK_NAME = json.dumps({"name": "SUBSTRING", "inputs": [ref("name"), 1, 1]})


@pytest.fixture
def served(service_catalog: MetastoreCatalog) -> Iterator[tuple[AuthAnswers, str, str]]:
    """(the scripted /auth, the service URL, a reader's token); tables db.t (query-auth.enabled,
    primary key id, 2 buckets), db.open (no query-auth) and db.log (query-auth.enabled, append) hold
    ROWS."""
    admin = make_principal(service_catalog, "admin", [("admin", None, None)])
    reader = make_principal(service_catalog, "reader", [("read", None, None)])
    settings = ServiceSettings(auth_cache_seconds=0, max_body_bytes=1 << 20)
    answers = AuthAnswers(create_app(settings, state=ServiceState(settings, service_catalog)))
    with serve_app(answers) as base:
        with paimon_meta.connect_service(base, token=admin) as catalog:
            for name, keys, options in (
                ("db.t", ["id"], {"bucket": "2", "query-auth.enabled": "true"}),
                ("db.open", ["id"], {"bucket": "2"}),
                ("db.log", [], {"query-auth.enabled": "true"}),
            ):
                table = catalog.create_table(name, SCHEMA, primary_keys=keys, options=options)
                wb = table.new_batch_write_builder()
                w = wb.new_write()
                w.write_arrow(ROWS)
                wb.new_commit().commit(w.prepare_commit())
        answers.asked.clear()
        yield answers, base, reader


def read(catalog: RestCatalog, identifier: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    builder = catalog.get_table(identifier).new_read_builder()
    if columns is not None:
        builder = builder.with_projection(columns)
    got = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(got.to_pylist(), key=lambda r: r.get("id", 0))


def test_filtered_rows_with_the_column_masked(served: tuple[AuthAnswers, str, str]) -> None:
    answers, base, reader = served
    answers.rules("db.t", [EU, NOT_5], {"email": MASK_EMAIL})
    with paimon_meta.connect_service(base, token=reader) as catalog:
        assert read(catalog, "db.t") == [
            {"id": 1, "region": "eu", "name": "alice", "email": "***@eu"},
            {"id": 3, "region": "eu", "name": "carol", "email": "***@eu"},
        ]
    assert [(a.token, a.table, a.body) for a in answers.asked] == [(reader, "db.t", {"select": None})]


def test_a_projection_reads_what_the_rules_need_and_returns_only_itself(
    served: tuple[AuthAnswers, str, str],
) -> None:
    answers, base, reader = served
    # the filter reads region and id, the email mask region: none of them but email selected
    answers.rules("db.t", [EU, NOT_5], {"email": MASK_EMAIL, "name": MASK_NAME})
    with paimon_meta.connect_service(base, token=reader) as catalog:
        table = catalog.get_table("db.t")
        builder = table.new_read_builder().with_projection(["email", "name"])
        got = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        assert got.column_names == ["email", "name"]
        assert sorted(got.to_pylist(), key=lambda r: r["name"]) == [
            {"email": "***@eu", "name": "a"},
            {"email": "***@eu", "name": "c"},
        ]
        # the batch reader's schema holds the masked columns as the masks made them
        reader_batches = builder.new_read().to_arrow_batch_reader(builder.new_scan().plan().splits())
        assert sorted(reader_batches.read_all().column("name").to_pylist()) == ["a", "c"]
    assert answers.asked[0].body == {"select": ["email", "name"]}


def test_an_unrestricted_answer_reads_everything(served: tuple[AuthAnswers, str, str]) -> None:
    answers, base, reader = served
    answers.rules("db.t", [], {})
    with paimon_meta.connect_service(base, token=reader) as catalog:
        assert read(catalog, "db.t") == ROWS.to_pylist()
    assert len(answers.asked) == 1


def test_a_table_without_query_auth_asks_nothing(served: tuple[AuthAnswers, str, str]) -> None:
    answers, base, reader = served
    answers.rules("db.open", [EU], {"email": MASK_EMAIL})  # would filter: never asked
    with paimon_meta.connect_service(base, token=reader) as catalog:
        assert read(catalog, "db.open") == ROWS.to_pylist()
    assert answers.asked == []


def test_the_service_answers_from_its_own_auth_route(served: tuple[AuthAnswers, str, str]) -> None:
    """Unscripted, the request reaches the service's /auth (no policies: every row)."""
    answers, base, reader = served
    with paimon_meta.connect_service(base, token=reader) as catalog:
        assert read(catalog, "db.t", ["id", "name"]) == [
            {"id": r["id"], "name": r["name"]} for r in ROWS.to_pylist()
        ]
    assert answers.asked[0].body == {"select": ["id", "name"]}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "json"),
        ([], "json"),
        ({"filter": "region = 'eu'", "columnMasking": {}}, "json"),
        ({"filter": [1], "columnMasking": {}}, "json"),
        ({"filter": [], "columnMasking": ["email"]}, "json"),
        ({"filter": [], "columnMasking": {"email": None}}, "json"),
        ({"filter": ["{not json"], "columnMasking": {}}, "json"),
        ({"filter": [""], "columnMasking": {}}, "json"),
        ({"filter": [leaf({"name": "FIELD_REF", "fieldRef": ref("id")}, "SOUNDS_LIKE", 1)]}, "unsupported"),
        ({"filter": [], "columnMasking": {"phone": json.dumps({"name": "NULL"})}}, "column"),
        ({"filter": [EU.replace('"region"', '"country"')], "columnMasking": {}}, "column"),
        (
            {
                "filter": [],
                "columnMasking": {"email": MASK_EMAIL, "region": json.dumps({"name": "NULL"})},
            },
            "conflict",
        ),
    ],
)
def test_a_malformed_answer_refuses_the_read(
    served: tuple[AuthAnswers, str, str], body: Any, reason: str
) -> None:
    answers, base, reader = served
    answers.answer("db.t", 200, body)
    with paimon_meta.connect_service(base, token=reader) as catalog:
        builder = catalog.get_table("db.t").new_read_builder()
        with pytest.raises(errors.PolicyRuleError) as refused:
            builder.new_scan().plan()
    assert refused.value.fields["reason"] == reason


def test_a_refused_query_is_a_typed_permission_error(served: tuple[AuthAnswers, str, str]) -> None:
    answers, base, reader = served
    answers.answer("db.t", 403, {"message": "columns ['email'] are outside the column range", "code": 403})
    with paimon_meta.connect_service(base, token=reader) as catalog:
        builder = catalog.get_table("db.t").new_read_builder().with_projection(["id", "email"])
        with pytest.raises(errors.QueryNotAllowedError) as refused:
            builder.new_scan().plan()
    assert refused.value.fields["table"] == "db.t"
    assert refused.value.fields["columns"] == ["id", "email"]
    assert "outside the column range" in refused.value.message


def test_splits_planned_without_the_rules_are_refused(
    served: tuple[AuthAnswers, str, str], service_catalog: MetastoreCatalog
) -> None:
    answers, base, reader = served
    answers.rules("db.t", [EU], {"email": MASK_EMAIL})
    # an operator's read (the metastore, full rights): every row, unmasked
    operator = service_catalog.get_table("db.t").new_read_builder()
    raw_splits = operator.new_scan().plan().splits()
    assert sorted(operator.new_read().to_arrow(raw_splits).column("email").to_pylist(), key=str) == sorted(
        ROWS.column("email").to_pylist(), key=str
    )
    with paimon_meta.connect_service(base, token=reader) as catalog:
        read_ = catalog.get_table("db.t").new_read_builder().new_read()
        with pytest.raises(errors.AccessDeniedError, match=r"query-auth\.enabled"):
            read_.to_arrow(raw_splits)


def test_each_plan_asks_again(served: tuple[AuthAnswers, str, str]) -> None:
    """The rules are asked per plan: a policy changed between two reads of one table object applies."""
    answers, base, reader = served
    with paimon_meta.connect_service(base, token=reader) as catalog:
        table = catalog.get_table("db.t")
        answers.rules("db.t", [EU], {})
        builder = table.new_read_builder().with_projection(["id"])
        first = builder.new_read().to_arrow(builder.new_scan().plan().splits())
        answers.rules("db.t", [NOT_5], {})
        second = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert sorted(first.column("id").to_pylist()) == [1, 3, 5]
    assert sorted(second.column("id").to_pylist()) == [1, 2, 3, 4]


def test_a_branch_made_before_query_auth_is_read_under_the_tables_rules(
    served: tuple[AuthAnswers, str, str], service_catalog: MetastoreCatalog
) -> None:
    """A branch holds the table's data: once the table sets query-auth.enabled, reads of a branch whose
    own schema predates it ask /auth too."""
    answers, base, reader = served
    operator = service_catalog.get_table("db.open")
    BranchManager(operator.file_io, operator.path).create("b1")  # its schema: no query-auth
    service_catalog.alter_table_changes("db.open", [SetOption("query-auth.enabled", "true")])
    answers.rules("db.open", [EU], {"email": MASK_EMAIL})
    with paimon_meta.connect_service(base, token=reader) as catalog:
        branch = catalog.get_table("db.open").branch("b1")
        assert "query-auth.enabled" not in branch.schema.options
        builder = branch.new_read_builder()
        builder.new_read().to_arrow(builder.new_scan().plan().splits())  # an empty branch: no rows
    assert [a.table for a in answers.asked] == ["db.open"]
