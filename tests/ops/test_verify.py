"""``paimon-meta verify``: clean on a healthy catalog, and each way of breaking one on purpose named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.cli import main
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.tags import create_tag
from paimon_meta.ops.verify import VerifyReport, verify
from paimon_meta.table.table import FileStoreTable
from tests.ops.helpers import (
    FAST_LOCK,
    TABLE,
    Crash,
    crash_at,
    create,
    make_old,
    prepare,
    write,
)

pytestmark = pytest.mark.postgres

OTHER = "db.other"


def codes(report: VerifyReport) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {}
    for f in report.findings:
        out.setdefault(f.code, []).append(f.table)
    return out


def only(report: VerifyReport, code: str) -> dict[str, object]:
    found = [f for f in report.findings if f.code == code]
    assert len(found) == 1, report.findings
    return {"table": found[0].table, "message": found[0].message, **found[0].details}


@pytest.fixture
def healthy(catalog: MetastoreCatalog) -> FileStoreTable:
    """Two tables: ``db.t`` with five snapshots (two expired, a tag on one), ``db.other`` with one."""
    create(catalog)
    for i in range(5):
        write(catalog, range(i * 10, i * 10 + 10), overwrite=i % 2 == 1)
    create_tag(catalog, TABLE, "keep", 2)
    expire_snapshots(catalog, TABLE, retain_min=3, time_retained_ms=0)
    create(catalog, OTHER)
    write(catalog, range(3), identifier=OTHER)
    return catalog.get_table(TABLE)


def test_a_healthy_catalog_is_clean_even_counting_every_file_as_old(
    catalog: MetastoreCatalog, healthy: FileStoreTable, warehouse: str, clean_db: str
) -> None:
    assert healthy.snapshot_manager.list_snapshot_ids() == [3, 4, 5]
    report = verify(catalog, data_files=True, orphan_age_seconds=0, pending_grace_seconds=0)
    assert report.findings == [] and report.clean
    assert report.tables == 2 and report.snapshots == 4 and report.data_files_checked > 0
    assert verify(catalog, TABLE, data_files=True, orphan_age_seconds=0).clean

    base = ["--metastore", clean_db, "--warehouse", warehouse]
    for key, value in FAST_LOCK.items():
        base += ["-o", f"{key}={value}"]
    assert main([*base, "verify", "--data-files", "--orphan-age", "0s"]) == 0


def test_a_deleted_snapshot_file_is_named(catalog: MetastoreCatalog, healthy: FileStoreTable) -> None:
    Path(healthy.snapshot_manager.snapshot_path(4)).unlink()
    report = verify(catalog)
    assert codes(report) == {"recorded_snapshot_missing": [TABLE]}
    assert only(report, "recorded_snapshot_missing")["snapshot_ids"] == [4]

    Path(healthy.snapshot_manager.snapshot_path(5)).unlink()  # the latest: LATEST now names a missing one
    report = verify(catalog, TABLE)
    assert codes(report) == {"recorded_snapshot_missing": [TABLE], "latest_hint_invalid": [TABLE]}
    assert only(report, "recorded_snapshot_missing")["snapshot_ids"] == [4, 5]


def test_a_missing_event_row_is_named(catalog: MetastoreCatalog, healthy: FileStoreTable) -> None:
    with catalog.engine.begin() as conn:  # the log is append-only: only its owner can do this
        conn.execute(
            text("ALTER TABLE paimon_commit_events DISABLE TRIGGER trg_paimon_commit_events_append_only")
        )
        conn.execute(
            text(
                "DELETE FROM paimon_commit_events WHERE table_identifier = :t AND snapshot_id = 4 "
                "AND event_type = 'snapshot_published'"
            ),
            {"t": TABLE},
        )
        conn.execute(
            text("ALTER TABLE paimon_commit_events ENABLE TRIGGER trg_paimon_commit_events_append_only")
        )
    report = verify(catalog)
    assert codes(report) == {"snapshot_not_recorded": [TABLE]}
    assert only(report, "snapshot_not_recorded")["snapshot_ids"] == [4]


def test_stray_and_missing_directories_are_named(
    catalog: MetastoreCatalog, healthy: FileStoreTable, warehouse: str
) -> None:
    other = catalog.get_table(OTHER).path
    shutil.copytree(other, f"{warehouse}/db.db/ghost")
    shutil.rmtree(other)
    report = verify(catalog)
    assert codes(report) == {"stray_directory": [None], "table_directory_missing": [OTHER]}
    assert only(report, "stray_directory")["path"] == f"{warehouse}/db.db/ghost"


def test_an_unreadable_table_is_named(catalog: MetastoreCatalog, healthy: FileStoreTable) -> None:
    shutil.rmtree(f"{catalog.get_table(OTHER).path}/schema")
    report = verify(catalog)
    assert codes(report) == {"table_unreadable": [OTHER]}


def test_missing_manifests_lists_and_data_files_are_named(
    catalog: MetastoreCatalog, healthy: FileStoreTable
) -> None:
    snap = healthy.snapshot_manager.snapshot(5)
    delta = healthy.manifest_reader.manifest_list(snap.delta_manifest_list)
    Path(healthy.paths.manifest_path(delta[0].file_name)).unlink()
    report = verify(catalog, TABLE)
    assert codes(report) == {"manifest_missing": [TABLE]}
    assert 5 in only(report, "manifest_missing")["snapshot_ids"]  # type: ignore[operator]

    Path(healthy.paths.manifest_path(snap.base_manifest_list)).unlink()
    assert set(codes(verify(catalog, TABLE))) == {"manifest_missing", "manifest_list_missing"}


def test_a_missing_data_file_is_named_only_when_asked(
    catalog: MetastoreCatalog, healthy: FileStoreTable
) -> None:
    files = [s.path for s in healthy.file_io.list_recursive(healthy.path) if "/bucket-" in s.path]
    other = catalog.get_table(OTHER)
    gone = next(s.path for s in other.file_io.list_recursive(other.path) if "/bucket-" in s.path)
    Path(gone).unlink()
    assert files and verify(catalog).clean
    report = verify(catalog, data_files=True)
    assert codes(report) == {"data_file_missing": [OTHER]}
    assert only(report, "data_file_missing")["path"] == gone


def test_hints_that_name_no_snapshot_are_named(catalog: MetastoreCatalog, healthy: FileStoreTable) -> None:
    Path(healthy.paths.latest_hint_path).write_text("9")
    Path(healthy.paths.earliest_hint_path).write_text("1")
    assert codes(verify(catalog)) == {"latest_hint_invalid": [TABLE], "earliest_hint_invalid": [TABLE]}


def test_old_unreferenced_files_are_estimated_as_orphans(
    catalog: MetastoreCatalog, healthy: FileStoreTable
) -> None:
    stray = Path(healthy.path) / "bucket-0" / "data-not-referenced.parquet"
    stray.write_bytes(b"x" * 100)
    assert verify(catalog).clean  # younger than the default day
    make_old([str(stray)])
    report = verify(catalog)
    assert codes(report) == {"orphan_files": [TABLE]}
    found = only(report, "orphan_files")
    assert found["files"] == 1 and found["bytes"] == 100 and found["paths"] == [str(stray)]
    assert report.orphan_files == 1


def test_a_crashed_commit_is_named_beyond_the_pointer_and_pending(
    catalog: MetastoreCatalog, healthy: FileStoreTable
) -> None:
    table = catalog.get_table(TABLE)
    messages = prepare(table, range(100, 105))
    with crash_at("after_snapshot"), pytest.raises(Crash):
        assert table.committer_factory is not None
        table.committer_factory(table, "w").commit(messages, 1)
    report = verify(catalog)
    assert codes(report) == {"snapshots_beyond_pointer": [TABLE]}
    assert only(report, "snapshots_beyond_pointer")["snapshot_ids"] == [6]
    assert report.pending_in_flight == 1  # younger than recovery's grace: in flight, not a finding
    stale = verify(catalog, pending_grace_seconds=0)
    assert codes(stale) == {"snapshots_beyond_pointer": [TABLE], "pending_commit_stale": [TABLE]}


def test_lock_rows_without_table_or_expired_are_named(
    catalog: MetastoreCatalog, healthy: FileStoreTable
) -> None:
    with catalog.engine.begin() as conn:
        for lock_id, age in (("jdbc.db.gone", 0), (catalog.registry.lock_id("db", "t"), 3600)):
            conn.execute(
                text(
                    "INSERT INTO paimon_distributed_locks (lock_id, acquired_at, expire_time_seconds, owner, "
                    "fencing_token, heartbeat_at, lease_seconds, hostname, pid) VALUES (:id, "
                    "localtimestamp - make_interval(secs => :age), 60, 'crashed', 1, now(), 60, 'h', 1)"
                ),
                {"id": lock_id, "age": age},
            )
    report = verify(catalog)
    assert codes(report) == {"lock_without_table": [None], "lock_expired": [TABLE]}
    assert only(report, "lock_without_table")["lock_id"] == "jdbc.db.gone"
    assert codes(verify(catalog, OTHER)) == {}  # one table: only its own lock


def test_the_cli_names_findings_and_exits_5(
    catalog: MetastoreCatalog,
    healthy: FileStoreTable,
    clean_db: str,
    warehouse: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    Path(healthy.snapshot_manager.snapshot_path(4)).unlink()
    base = ["--metastore", clean_db, "--warehouse", warehouse]
    assert main([*base, "verify"]) == 5
    out = capsys.readouterr().out
    assert "1 errors, 0 warnings" in out and "recorded_snapshot_missing" in out and TABLE in out
    assert main([*base, "verify", OTHER, "--json"]) == 0
    assert '"clean": true' in capsys.readouterr().out


def test_metadata_that_cannot_be_decoded_is_named(catalog: MetastoreCatalog, healthy: FileStoreTable) -> None:
    snap = healthy.snapshot_manager.snapshot(5)
    delta = healthy.manifest_reader.manifest_list(snap.delta_manifest_list)
    Path(healthy.paths.manifest_path(delta[0].file_name)).write_bytes(b"not avro")
    Path(healthy.snapshot_manager.snapshot_path(3)).write_text("{")
    report = verify(catalog, TABLE)
    assert codes(report) == {"metadata_unreadable": [TABLE, TABLE]}
    paths = sorted(str(f.details["path"]) for f in report.findings)
    assert paths[0].endswith(delta[0].file_name) and paths[1].endswith("snapshot-3")
