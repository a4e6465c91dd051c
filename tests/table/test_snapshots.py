"""SnapshotManager hint rules and SchemaManager."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from paimon_meta.errors import CorruptMetadataError, FileNotFound
from paimon_meta.io.local import LocalFileIO
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.model.types import INT, STRING, DataField
from paimon_meta.serde.json import snapshot_to_json
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from tests.table.synthetic import CountingFileIO


def _snapshot(sid: int, schema_id: int = 0) -> Snapshot:
    return Snapshot(sid, schema_id, f"base-{sid}", f"delta-{sid}", "user", sid, CommitKind.APPEND, 1000 + sid)


@pytest.fixture
def table(tmp_path: Path) -> tuple[CountingFileIO, SnapshotManager, str]:
    fio = CountingFileIO()
    root = str(tmp_path / "t")
    return fio, SnapshotManager(fio, root), root


def _write(fio: CountingFileIO, sm: SnapshotManager, *ids: int) -> None:
    for sid in ids:
        fio.write(sm.snapshot_path(sid), snapshot_to_json(_snapshot(sid)).encode())


def test_empty_table(table: tuple[CountingFileIO, SnapshotManager, str]) -> None:
    _, sm, _ = table
    assert sm.latest_snapshot_id() is None
    assert sm.earliest_snapshot_id() is None
    assert sm.latest_snapshot() is None
    assert sm.list_snapshot_ids() == []


def test_latest_hint_trusted_only_if_next_snapshot_absent(
    table: tuple[CountingFileIO, SnapshotManager, str],
) -> None:
    fio, sm, _ = table
    _write(fio, sm, 1, 2, 3)
    sm.commit_latest_hint(3)
    assert sm.latest_snapshot_id() == 3
    assert fio.lists == 0  # a valid hint saves the listing
    sm.commit_latest_hint(2)  # stale: snapshot-3 exists
    assert sm.latest_snapshot_id() == 3
    assert fio.lists == 1
    _write(fio, sm, 10)  # listing finds the true maximum, not hint + 1
    assert sm.latest_snapshot_id() == 10


def test_snapshots_of_user_walk_back_newest_first(
    table: tuple[CountingFileIO, SnapshotManager, str],
) -> None:
    fio, sm, _ = table
    users = {1: "a", 2: "b", 3: "a", 4: "b", 5: "b"}
    for sid, user in users.items():
        snap = replace(_snapshot(sid), commit_user=user)
        fio.write(sm.snapshot_path(sid), snapshot_to_json(snap).encode())
    latest = sm.latest_snapshot()
    assert [s.id for s in sm.snapshots_of_user("a", latest)] == [3, 1]
    assert [s.id for s in sm.snapshots_of_user("b", sm.snapshot(4))] == [4, 2]
    assert list(sm.snapshots_of_user("nobody", latest)) == []
    assert list(sm.snapshots_of_user("a", None)) == []
    # another loader ends the walk where it returns None
    assert [
        s.id for s in sm.snapshots_of_user("a", latest, load=lambda i: sm.snapshot(i) if i > 2 else None)
    ] == [3]


def test_snapshots_of_user_stop_at_the_earliest_kept_snapshot(
    table: tuple[CountingFileIO, SnapshotManager, str],
) -> None:
    """Expiration deleted snapshots 1-2: the walk ends at 3 (as Java's) instead of failing; a
    snapshot missing above the earliest is still an error."""
    fio, sm, path = table
    for sid, user in {3: "a", 4: "b", 5: "b"}.items():
        fio.write(sm.snapshot_path(sid), snapshot_to_json(replace(_snapshot(sid), commit_user=user)).encode())
    sm.commit_earliest_hint(3)
    latest = sm.latest_snapshot()
    assert [s.id for s in sm.snapshots_of_user("a", latest)] == [3]
    assert list(sm.snapshots_of_user("new-user", latest)) == []
    fio.delete(sm.snapshot_path(4))
    with pytest.raises(FileNotFound):
        list(SnapshotManager(fio, path).snapshots_of_user("a", latest))  # uncached


@pytest.mark.parametrize("hint", [None, b"", b"garbage", b"0", b"-4"])
def test_missing_or_bad_latest_hint_lists(
    table: tuple[CountingFileIO, SnapshotManager, str], hint: bytes | None
) -> None:
    fio, sm, _ = table
    _write(fio, sm, 4, 5)
    if hint is not None:
        fio.write(sm.paths.latest_hint_path, hint)
    assert sm.latest_snapshot_id() == 5
    assert sm.latest_snapshot() == _snapshot(5)


def test_earliest_hint_trusted_only_if_that_snapshot_exists(
    table: tuple[CountingFileIO, SnapshotManager, str],
) -> None:
    fio, sm, _ = table
    _write(fio, sm, 3, 4, 5)
    sm.commit_earliest_hint(4)  # exists: trusted even though snapshot-3 is still there
    assert sm.earliest_snapshot_id() == 4
    sm.commit_earliest_hint(1)  # expired: list
    assert sm.earliest_snapshot_id() == 3
    fio.delete(sm.paths.earliest_hint_path)
    assert sm.earliest_snapshot_id() == 3
    assert sm.earliest_snapshot() == _snapshot(3)


def test_snapshot_reads_are_cached(table: tuple[CountingFileIO, SnapshotManager, str]) -> None:
    fio, sm, _ = table
    _write(fio, sm, 1)
    assert sm.snapshot(1) == sm.snapshot(1) == _snapshot(1)
    assert fio.reads.count(sm.snapshot_path(1)) == 1


def test_a_read_that_straddles_a_timeline_change_is_not_cached(
    table: tuple[CountingFileIO, SnapshotManager, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback (a new timeline) reuses snapshot ids: a read that began under the old timeline and
    finished after the cache was dropped for the new one returns what it read, but does not cache it
    (it may be the old timeline's file); the next read goes to storage."""
    fio, sm, _ = table
    _write(fio, sm, 1)
    sm.observe_timeline(0)
    read = fio.read

    def rolled_back_meanwhile(path: str) -> bytes:
        data = read(path)
        sm.observe_timeline(1)  # another thread saw the rollback while this read was in flight
        return data

    monkeypatch.setattr(fio, "read", rolled_back_meanwhile)
    assert sm.snapshot(1) == _snapshot(1)
    monkeypatch.setattr(fio, "read", read)
    fio.write(sm.snapshot_path(1), snapshot_to_json(_snapshot(1, schema_id=7)).encode())  # the new timeline's
    assert sm.snapshot(1).schema_id == 7


def test_missing_snapshot(table: tuple[CountingFileIO, SnapshotManager, str]) -> None:
    _, sm, _ = table
    with pytest.raises(FileNotFound):
        sm.snapshot(9)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: b"\xff\xfe" + text,  # not UTF-8
        lambda text: b"[]",  # JSON, not a snapshot
        lambda text: text.replace(b'"id" : 1', b'"id" : 2'),  # another snapshot's content
    ],
    ids=["truncated", "binary", "wrong-shape", "wrong-id"],
)
def test_corrupt_snapshot_names_the_file(
    table: tuple[CountingFileIO, SnapshotManager, str], damage: object
) -> None:
    fio, sm, _ = table
    text = snapshot_to_json(_snapshot(1)).encode()
    fio.write(sm.snapshot_path(1), damage(text))  # type: ignore[operator]
    with pytest.raises(CorruptMetadataError) as err:
        sm.snapshot(1)
    assert err.value.path == sm.snapshot_path(1)


def _schema(sid: int) -> TableSchema:
    fields = (DataField(0, "id", INT(False)), DataField(1, "name", STRING()))
    return TableSchema(sid, fields, 1, primary_keys=("id",), options={"bucket": "1"})


def test_schema_manager(tmp_path: Path) -> None:
    fio = CountingFileIO()
    schemas = SchemaManager(fio, str(tmp_path / "t"))
    assert schemas.latest() is None
    assert schemas.commit_new_schema(_schema(0)) is True
    assert schemas.commit_new_schema(_schema(0)) is False  # a concurrent creator got there first
    assert schemas.commit_new_schema(_schema(1)) is True
    assert schemas.list_ids() == [0, 1]
    fresh = SchemaManager(fio, str(tmp_path / "t"))
    assert fresh.latest() == _schema(1)
    assert fresh.schema(0) == _schema(0)
    reads = len(fio.reads)
    assert fresh.schema(0) == _schema(0)
    assert len(fio.reads) == reads  # cached


def test_corrupt_schema_names_the_file(tmp_path: Path) -> None:
    fio = LocalFileIO()
    schemas = SchemaManager(fio, str(tmp_path / "t"))
    fio.write(schemas.schema_path(0), b'{"version": 3, "id": 0, "fields": [')
    with pytest.raises(CorruptMetadataError) as err:
        schemas.latest()
    assert err.value.path == schemas.schema_path(0)
