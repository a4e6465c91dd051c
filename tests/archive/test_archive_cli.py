"""``paimon-meta events archive`` and ``paimon-meta commits TABLE --archive``, and the retention option
through ``paimon-meta catalogs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from paimon_meta.archive import store as store_module
from paimon_meta.cli import main
from paimon_meta.metastore.catalogs import EVENTS_RETENTION, Catalogs
from tests.archive.helpers import db_now, make_catalog, seed, view_rows
from tests.archive.window_store import WindowStore

pytestmark = pytest.mark.postgres


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_events_archive_then_commits_with_the_archive(
    clean_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = make_catalog(clean_db, str(tmp_path / "wh"), "main")
    try:
        code, out, err = _run(
            capsys, "--metastore", clean_db, "catalogs", "alter", "main", "--set", f"{EVENTS_RETENTION}=1 ms"
        )
        assert code == 0, err
        assert Catalogs(catalog.engine).get("main").options[EVENTS_RETENTION] == "1 ms"
        code, _, err = _run(
            capsys, "--metastore", clean_db, "catalogs", "alter", "main", "--set", f"{EVENTS_RETENTION}=soon"
        )
        assert code == 2 and "not a duration" in err

        seed(catalog, "db.t", 0)
        boundary = db_now(catalog.engine)
        seed(catalog, "db.t", 100)
        history = view_rows(catalog.engine, "paimon_commit_history")
        store = WindowStore(catalog.engine, [boundary])
        monkeypatch.setattr(store_module, "partitioned_log", lambda engine: store)

        code, out, err = _run(capsys, "--metastore", clean_db, "events", "archive", "--dry-run", "--json")
        assert code == 0, err
        dry = json.loads(out)
        assert dry["due"] == [{"partition": "paimon_commit_events_w0", "catalog": "main"}]
        assert dry["dropped"] == ["paimon_commit_events_w0"] and store.drops == []

        code, out, err = _run(capsys, "--metastore", clean_db, "events", "archive")
        assert code == 0, err
        assert "archived  paimon_commit_events_w0  catalog main" in out
        assert store.drops == ["paimon_commit_events_w0"]

        code, out, err = _run(
            capsys, "--metastore", clean_db, "--catalog", "main", "commits", "db.t", "--archive", "--json"
        )
        assert code == 0, err
        rows = json.loads(out)
        # every commit of the table, archived or live, newest first
        table_commits = {k for k, r in history.items() if r["table_identifier"] == "db.t"}
        assert {r["commit_id"] for r in rows} == {str(k) for k in table_commits}
        starts = [r["first_event_at"] for r in rows]
        assert starts == sorted(starts, reverse=True)
        code, out, _ = _run(capsys, "--metastore", clean_db, "--catalog", "main", "commits", "db.t", "--json")
        assert len(json.loads(out)) < len(rows)  # the live log alone lost the archived ones
    finally:
        catalog.close()


def test_events_archive_over_the_real_log_and_usage(
    clean_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "--metastore", clean_db, "events", "--dry-run")
    assert code == 2 and "--dry-run goes with `events archive`" in err
    catalog = make_catalog(clean_db, str(tmp_path / "wh"), "main", retention="1 d")
    try:
        seed(catalog, "db.t", 0)
    finally:
        catalog.close()
    # the partitioned log: this test's events are in the current partition, not due
    code, out, err = _run(capsys, "--metastore", clean_db, "events", "archive", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["archived"] == [] and report["dropped"] == [] and report["errors"] == {}
    assert any("catalog main not due" in why for why in report["kept"].values())
