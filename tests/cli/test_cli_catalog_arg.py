"""``paimon-meta --catalog NAME``: the commands that open the metastore catalog act on that catalog of
the metastore (its warehouse and storage profile the metastore's) and never on another catalog's table
of the same name; ``--catalog`` with ``--warehouse`` is refused, naming both (issue 35)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.metastore.catalogs import Catalogs
from tests.cli.helpers import Cli
from tests.ops.helpers import FAST_LOCK, TABLE, create, write

pytestmark = pytest.mark.postgres


def _snapshot_ids(catalog: MetastoreCatalog) -> list[int]:
    return catalog.get_table(TABLE).snapshot_manager.list_snapshot_ids()


def test_commands_act_on_the_named_catalog_only(
    clean_db: str, clean_engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalogs = Catalogs(clean_engine)
    catalogs.create("a", str(tmp_path / "wa"))
    catalogs.create("b", str(tmp_path / "wb"))
    with (
        paimon_meta.connect(clean_db, catalog="a", **FAST_LOCK) as a,
        paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK) as b,
    ):
        for cat, batches in (
            (a, [range(0, 3), range(3, 6), range(6, 9)]),
            (b, [range(100, 102), range(102, 104)]),
        ):
            cat.create_database("db")
            create(cat)
            for keys in batches:
                write(cat, keys, overwrite=True)

        cli = Cli(clean_db, "unused", capsys)
        cli.base.remove("--warehouse")
        cli.base.remove("unused")

        def on_b(*args: str, code: int = 0) -> object:
            return cli.json(*args, "--catalog", "b", code=code)

        listed = on_b("tables")
        assert [(r["table"], r["location"], r["latest_snapshot_id"]) for r in listed] == [  # type: ignore[attr-defined]
            (TABLE, str(tmp_path / "wb" / "db.db" / "t"), 2)
        ]
        assert sorted(r["k"] for r in on_b("read", TABLE)) == [102, 103]  # type: ignore[attr-defined]
        assert sorted(r["k"] for r in cli.json("read", TABLE, "--catalog", "a")) == [6, 7, 8]

        assert on_b("tags", TABLE, "--create", "keep") == {"tag": "keep", "snapshot_id": 2}
        assert cli.json("tags", TABLE, "--catalog", "a") == []

        expired = on_b("expire-snapshots", TABLE, "--retain-min", "1", "--older-than", "0s")
        assert expired["expired"] == [1]  # type: ignore[index]
        assert _snapshot_ids(b) == [2] and _snapshot_ids(a) == [1, 2, 3]

        # the same commands without --catalog: the default catalog, which holds no db.t
        assert cli.run("--warehouse", str(tmp_path / "default"), "read", TABLE)[0] == 3
        # a warehouse with a catalog: refused, naming both, before anything is opened
        code, _, err = cli.run("tables", "--catalog", "b", "--warehouse", str(tmp_path / "wb"))
        assert code == 2 and "--catalog 'b' or --warehouse" in err
        code, _, err = cli.run("tables", "--catalog", "nope")
        assert code == 3 and "nope" in err


def test_catalog_names_the_service_catalog_over_http(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``--metastore http://...``, ``--catalog`` is the service's catalog (its ``warehouse``)."""
    from paimon_meta.catalog import rest
    from paimon_meta.errors import NotFoundError

    asked: list[str | None] = []

    def fake(uri: str, token: str, *, warehouse: str | None = None, **options: str) -> rest.RestCatalog:
        asked.append(warehouse)
        raise NotFoundError(f"no catalog {warehouse!r} here")

    monkeypatch.setattr(rest, "connect_service", fake)
    cli = Cli("http://127.0.0.1:9", "unused", capsys)
    cli.base = ["--metastore", "http://127.0.0.1:9", "--token", "t"]
    code, _, err = cli.run("tables", "--catalog", "team_b")
    assert (code, asked) == (3, ["team_b"]) and "team_b" in err
    assert cli.run("tables")[0] == 3 and asked == ["team_b", None]


def test_the_catalogs_commands_refuse_a_catalog_flag(tmp_path: Path) -> None:
    """``paimon-meta catalogs ...`` names its catalog as an argument: a ``--catalog`` beside it is refused
    (exit 2, naming the flag), not silently dropped."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "paimon_meta.cli",
            "--metastore",
            "postgresql://nobody@127.0.0.1:1/none",
            "--catalog",
            "b",
            "catalogs",
            "list",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "--catalog" in done.stderr and "catalogs" in done.stderr
