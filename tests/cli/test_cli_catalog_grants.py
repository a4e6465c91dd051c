"""``paimon-meta principals grant|revoke --catalog NAME`` and ``grant-service``: grants per catalog and
the service-level privilege, from the command line (issue 35)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import Cli

pytestmark = pytest.mark.postgres


def test_grants_per_catalog_and_service_privileges(cli: Cli, tmp_path: Path) -> None:
    cli.json("principals", "create", "bob")
    cli.json("catalogs", "create", "team_b", "--warehouse", str(tmp_path / "wh-b"))
    granted = cli.json("principals", "grant", "bob", "admin", "--catalog", "team_b")
    assert granted["new"] is True and granted["scope"] == "the whole catalog team_b"
    assert cli.json("principals", "grant", "bob", "read", "--table", "db.t")["new"] is True  # the default's
    # the same grant in another catalog is another grant
    assert cli.json("principals", "grant", "bob", "read", "--table", "db.t", "--catalog", "team_b")["new"]
    [bob] = cli.json("principals", "list")
    assert sorted((g["privilege"], g["scope"], g["catalog"] or "-") for g in bob["grants"]) == [
        ("admin", "catalog", "team_b"),
        ("read", "db.t", "-"),  # the default catalog's
        ("read", "db.t", "team_b"),
    ]
    assert cli.json("principals", "revoke", "bob", "read", "--table", "db.t", "--catalog", "team_b")[
        "revoked"
    ]
    [bob] = cli.json("principals", "list")
    assert len(bob["grants"]) == 2
    code, _, err = cli.run("principals", "grant", "bob", "read", "--catalog", "nope")
    assert code == 3 and "nope" in err
    assert cli.json("principals", "grant-service", "bob", "create_catalog")["new"] is True
    assert cli.json("principals", "grant-service", "bob", "create_catalog")["new"] is False
    assert cli.json("principals", "revoke-service", "bob", "create_catalog")["revoked"] is True
    code, _, _ = cli.run("principals", "grant-service", "bob", "superuser")
    assert code == 2
    # dropping the catalog drops its grants; the default catalog's stay
    cli.json("catalogs", "drop", "team_b")
    [bob] = cli.json("principals", "list")
    assert [(g["privilege"], g["scope"], g["catalog"]) for g in bob["grants"]] == [("read", "db.t", None)]
