"""``paimon-meta permissions grant|revoke|list`` and ``paimon-meta policies create|drop|list`` (issue 36): a
reason is required and recorded with the operator in the governance event log; ``--catalog`` names the
catalog the assignments are in."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.metastore.assignments import governance_events
from paimon_meta.table.schema_change import SetOption
from tests.cli.helpers import Cli

pytestmark = pytest.mark.postgres

FILTER = json.dumps(
    {
        "kind": "LEAF",
        "transform": {"name": "FIELD_REF", "fieldRef": {"index": 1, "name": "region", "type": "STRING"}},
        "function": "EQUAL",
        "literals": ["eu"],
    }
)


def test_permissions_from_the_command_line(cli: Cli, catalog: MetastoreCatalog, tmp_path: Path) -> None:
    cli.json("principals", "create", "bob")
    code, _, err = cli.run("permissions", "grant", "bob", "select", "--resource-type", "table",
                           "--database", "db", "--table", "t")  # fmt: skip
    assert code == 2 and "--reason" in err  # a reason is required
    table = ("--resource-type", "TABLE", "--database", "db", "--table", "t")
    out = cli.json("permissions", "grant", "bob", "select", *table, "--reason", "ticket 7")
    assert out["new"] is True and out["access"] == "SELECT"
    out = cli.json(
        "permissions",
        "grant",
        "bob",
        "select",
        *table,
        "--expire-time",
        "2030-01-01T00:00:00Z",
        "--reason",
        "r2",
    )
    assert out["new"] is False and out["expireTime"] == "2030-01-01T00:00:00Z"
    cli.json("permissions", "grant", "bob", "select", "--resource-type", "COLUMN", "--database", "db",
             "--table", "t", "--excluded-columns", "email", "--reason", "pii")  # fmt: skip
    listed = cli.json("permissions", "list", *table)
    assert [(p["principal"], p["reason"]) for p in listed["permissions"]] == [("bob", "r2")]
    assert len(cli.json("permissions", "list", "--principal", "bob")["permissions"]) == 2
    assert cli.json("permissions", "revoke", "bob", "SELECT", *table, "--reason", "left")["revoked"] is True
    assert cli.json("permissions", "revoke", "bob", "SELECT", *table, "--reason", "left")["revoked"] is False
    role = cli.json("permissions", "create-role", "auditors", "--reason", "audit")["principal"]
    assert cli.json("permissions", "add-member", role, "bob", "--reason", "audit")["new"] is True
    # in another catalog: its own assignments, objects checked there
    cli.json("catalogs", "create", "team_b", "--warehouse", str(tmp_path / "wh-b"))
    code, _, err = cli.run(
        "permissions", "grant", "bob", "SELECT", *table, "--reason", "x", "--catalog", "team_b"
    )
    assert code == 3 and "db.t" in err  # no such table there
    cli.json("permissions", "grant", "bob", "SELECT", "--resource-type", "CATALOG_ALL", "--reason", "x",
             "--catalog", "team_b")  # fmt: skip
    assert cli.json("permissions", "list", "--resource-type", "CATALOG_ALL")["permissions"] == []
    assert len(cli.json("permissions", "list", "--resource-type", "CATALOG_ALL", "--catalog", "team_b")[
        "permissions"]) == 1  # fmt: skip
    events = [(e.event_type, e.reason) for e in governance_events(catalog.engine, subject="TABLE db.t")]
    assert events == [
        ("permission_granted", "ticket 7"),
        ("permission_granted", "r2"),
        ("permission_revoked", "left"),
    ]
    assert all(e.principal for e in governance_events(catalog.engine))  # the operator is recorded


def test_policies_from_the_command_line(cli: Cli, catalog: MetastoreCatalog) -> None:
    catalog.create_database("db")
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("region", pa.string()), ("email", pa.string())]
    )
    catalog.create_table("db.t", schema, options={"bucket": "1"})
    cli.json("principals", "create", "bob")
    code, _, err = cli.run("policies", "create", "db.t", "bob", "--row-filter", FILTER, "--reason", "eu only")
    assert code != 0 and "query-auth.enabled" in err  # the table must ask its readers for /auth
    catalog.alter_table_changes("db.t", [SetOption("query-auth.enabled", "true")])
    out = cli.json("policies", "create", "db.t", "bob", "--row-filter", FILTER, "--reason", "eu only")
    assert json.loads(out["body"])["function"] == "EQUAL"
    cli.json(
        "policies",
        "create",
        "db.t",
        "bob",
        "--mask",
        '{"name":"NULL"}',
        "--column",
        "email",
        "--reason",
        "pii",
    )
    code, _, err = cli.run("policies", "create", "db.t", "bob", "--row-filter", FILTER, "--reason", "again")
    assert code != 0 and "already has a row filter" in err
    code, _, err = cli.run("policies", "create", "db.t", "bob", "--row-filter", "{", "--reason", "bad")
    assert code != 0
    listed = cli.json("policies", "list", "db.t")
    assert [(p["type"], p["column"], p["reason"]) for p in listed] == [
        ("ROW_FILTER", None, "eu only"),
        ("COLUMN_MASKING", "email", "pii"),
    ]
    assert cli.json("policies", "drop", "db.t", "bob", "--column", "email", "--reason", "done")["type"] == (
        "COLUMN_MASKING"
    )
    code, _, err = cli.run("policies", "drop", "db.t", "bob", "--column", "email", "--reason", "done")
    assert code == 3  # not found
    assert [p["type"] for p in cli.json("policies", "list", "db.t", "--principal", "bob")] == ["ROW_FILTER"]
    kinds = [(e.event_type, e.reason) for e in governance_events(catalog.engine, subject="TABLE db.t")]
    assert kinds == [("policy_created", "eu only"), ("policy_created", "pii"), ("policy_dropped", "done")]
