"""``serve`` does not migrate unless asked (``--migrate``; migrations are ``paimon-meta db upgrade``'s), and
is ready on any schema within the compatibility window: its own head, or a newer release's revision."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from paimon_meta.cli.main import main
from paimon_meta.db import migrate
from paimon_meta.db.migrate import VERSION_TABLE, SchemaNotReadyError, compatible
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings
from tests.fixtures.postgres import DbFactory

pytestmark = pytest.mark.postgres


def test_the_window() -> None:
    (head,) = migrate.heads()
    assert compatible(head)
    assert compatible("9999_a_newer_release")  # unknown here: a newer release's expand migration
    assert not compatible(None)  # empty
    assert not compatible("0001")  # older than this code: it lacks what this code writes


def test_serve_refuses_an_empty_metastore_naming_what_to_run(
    pg_db_factory: DbFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = pg_db_factory(migrated=False)
    code = main(["--metastore", empty, "serve", "--warehouse", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "empty" in err and "paimon-meta db upgrade" in err and "--migrate" in err
    assert "Traceback" not in err
    assert migrate.current(empty) is None  # nothing was migrated
    # The app alike: its start-up refuses (no migration) ...
    settings = ServiceSettings(metastore_url=empty, warehouse=str(tmp_path), recovery_interval_seconds=0)
    with pytest.raises(SchemaNotReadyError), TestClient(create_app(settings)):
        pass
    # ... unless asked to migrate.
    settings = ServiceSettings(
        metastore_url=empty, warehouse=str(tmp_path), recovery_interval_seconds=0, migrate=True
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
    assert migrate.current(empty) == migrate.heads()[0]


def test_readiness_follows_the_window(clean_db: str, tmp_path: Path) -> None:
    settings = ServiceSettings(metastore_url=clean_db, warehouse=str(tmp_path), recovery_interval_seconds=0)
    assert VERSION_TABLE == "paimon_meta_alembic_version"
    engine = create_engine(clean_db)
    try:
        with TestClient(create_app(settings)) as client:
            assert client.get("/readyz").status_code == 200
            for revision, ready in (("9999_a_newer_release", True), ("0012", False)):
                with engine.begin() as conn:
                    conn.execute(
                        text("UPDATE paimon_meta_alembic_version SET version_num = :r"), {"r": revision}
                    )
                assert (client.get("/readyz").status_code == 200) is ready, revision
    finally:
        engine.dispose()
