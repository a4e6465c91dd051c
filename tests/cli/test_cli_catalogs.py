"""``paimon-meta catalogs``: create, list, show, alter, drop; secrets never printed; overlap and
non-empty drops refused with their exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paimon_meta.cli import main
from paimon_meta.cli.context import EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_USAGE
from paimon_meta.db.engine import make_engine
from paimon_meta.metastore.registry import Registry

pytestmark = pytest.mark.postgres


class _Catalogs:
    def __init__(self, url: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.url, self.capsys = url, capsys

    def run(self, *args: str) -> tuple[int, str, str]:
        code = main(["--metastore", self.url, "catalogs", *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self.run(*args, "--json")
        assert code == 0, (code, out, err)
        return json.loads(out)


@pytest.fixture
def catalogs(clean_db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> _Catalogs:
    monkeypatch.delenv("PAIMON_META_WAREHOUSE", raising=False)
    monkeypatch.delenv("PAIMON_META_OPTIONS", raising=False)
    return _Catalogs(clean_db, capsys)


def test_lifecycle_never_prints_a_secret(catalogs: _Catalogs, clean_db: str, tmp_path: Path) -> None:
    created = catalogs.json(
        "create",
        "team_a",
        "--warehouse",
        "s3://Bucket//a/",
        "-o",
        "s3.endpoint=http://minio:9000",
        "-o",
        "s3.path-style-access=true",
        "-o",
        "s3.secret-key=hunter2",
        "-o",
        "s3.access-key=AKIAEXAMPLE",
        "-o",
        "bucket=4",
        "--sts-role-arn",
        "arn:aws:iam::1:role/a",
        "--sts-external-id",
        "ext-secret",
    )
    assert created["warehouse"] == "s3://Bucket/a" and created["catalog_key"] == "team_a"
    assert created["storage"] == {"endpoint": "http://minio:9000", "region": None, "path_style": True}
    assert created["options"] == {"bucket": "4"}
    assert created["secrets_set"] == ["s3.access-key", "s3.secret-key", "sts-external-id"]
    assert catalogs.json("create", "local", "--warehouse", str(tmp_path / "wh"))["catalog_key"] == "local"

    for args in (("show", "team_a"), ("list",), ("alter", "team_a", "--set", "x=1")):
        for fmt in ((), ("--json",)):
            code, out, err = catalogs.run(*args, *fmt)
            assert code == 0, err
            assert "team_a" in out
            for secret in ("hunter2", "AKIAEXAMPLE", "ext-secret"):
                assert secret not in out and secret not in err, (args, fmt)
    code, out, _ = catalogs.run("show", "team_a")
    assert "secrets set  s3.access-key, s3.secret-key, sts-external-id" in out
    assert [c["name"] for c in catalogs.json("list")] == ["local", "team_a"]

    altered = catalogs.json(
        "alter", "team_a", "--set", "s3.region=eu-west-1", "--unset", "bucket", "--unset", "s3.secret-key"
    )
    assert altered["storage"]["region"] == "eu-west-1" and altered["options"] == {"x": "1"}
    assert altered["secrets_set"] == ["s3.access-key", "sts-external-id"]
    assert catalogs.json("alter", "team_a", "--clear-sts")["secrets_set"] == ["s3.access-key"]

    # refusals: an overlapping warehouse (any spelling), a name taken, an unknown catalog
    code, _, err = catalogs.run("create", "team_b", "--warehouse", "s3a://bucket/a/inner")
    assert code == EXIT_REFUSED and "overlaps catalog 'team_a'" in err
    code, _, err = catalogs.run("create", "team_a", "--warehouse", "s3://bucket/z")
    assert code == EXIT_REFUSED and "already exists" in err
    code, _, err = catalogs.run("create", "team_c")
    assert code == EXIT_USAGE and "--warehouse" in err
    assert catalogs.run("show", "nope")[0] == EXIT_NOT_FOUND

    # drop: refused while it holds databases, unless --cascade
    engine = make_engine(clean_db)
    try:
        Registry(engine, catalog_key="team_a").create_database("db")
        Registry(engine, catalog_key="local").create_database("db")
        assert catalogs.json("show", "team_a")["databases"] == ["db"]
        code, _, err = catalogs.run("drop", "team_a")
        assert code == EXIT_USAGE and "holds databases ['db']" in err
        code, _, err = catalogs.run("alter", "team_a", "--set-warehouse", "s3://bucket/moved")
        assert code == EXIT_USAGE and "cannot move" in err
        dropped = catalogs.json("drop", "team_a", "--cascade")
        assert dropped == {"catalog": "team_a", "dropped": True, "databases": ["db"]}
        assert Registry(engine, catalog_key="team_a").list_databases() == []
        assert Registry(engine, catalog_key="local").list_databases() == ["db"]
    finally:
        engine.dispose()
    assert [c["name"] for c in catalogs.json("list")] == ["local"]
    # its place is free again
    assert catalogs.json("create", "team_b", "--warehouse", "s3://bucket/a/inner")["name"] == "team_b"


def test_catalog_key_adopts_existing_rows(catalogs: _Catalogs, clean_db: str, tmp_path: Path) -> None:
    engine = make_engine(clean_db)
    try:
        Registry(engine).create_database("old")  # catalog key jdbc, as before catalogs existed
    finally:
        engine.dispose()
    catalogs.json("create", "paimon", "--catalog-key", "jdbc", "--warehouse", str(tmp_path))
    assert catalogs.json("show", "paimon")["databases"] == ["old"]
