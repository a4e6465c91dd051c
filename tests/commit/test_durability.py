"""The commit path's local-disk durability order, its read caches, and partial failures (no metastore)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.guard import StorageGuard
from paimon_meta.errors import CommitOutcomeUnknownError
from paimon_meta.io import FaultInjectingFileIO, FileIO
from paimon_meta.io.local import LocalFileIO
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.table.table import FileStoreTable
from tests.commit.helpers import append_msg, compact_msg, data_file, make_table, partition


class RecordingFileIO(LocalFileIO):
    """LocalFileIO that records every fsync, every link (publish of a complete file) and every
    unsynced create, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []
        self._log_lock = threading.Lock()

    def _record(self, op: str, path: str) -> None:
        with self._log_lock:
            self.log.append((op, path))

    def _fsync_path(self, path: str) -> None:  # type: ignore[override]
        self._record("fsync", path)
        LocalFileIO._fsync_path(path)

    def _link(self, temp: str, target: str, data: bytes) -> None:
        super()._link(temp, target, data)
        self._record("link", target)

    def _link_anonymous(self, fd: int, dir_fd: int, name: str, target: str) -> bool:
        linked = super()._link_anonymous(fd, dir_fd, name, target)
        if linked:
            self._record("link", target)
        return linked

    def create_if_absent(
        self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
    ) -> None:
        super().create_if_absent(path, data, durable=durable, sync_first=sync_first)
        if not durable:
            self._record("create", path)


def coordinator(file_io: FileIO, path: str) -> CommitCoordinator:
    table = FileStoreTable.load(file_io, path)
    guard = StorageGuard(file_io, path, load_snapshot_fn=table.snapshot_manager.snapshot)
    return CommitCoordinator(table, guard, commit_user=str(uuid.uuid4()))


def referenced_files(table: FileStoreTable, snapshot_id: int) -> set[str]:
    snap = table.snapshot_manager.snapshot(snapshot_id)
    names = {snap.base_manifest_list, snap.delta_manifest_list}
    for listed in (snap.base_manifest_list, snap.delta_manifest_list):
        names.update(m.file_name for m in table.manifest_reader.manifest_list(listed))
    return names


@pytest.mark.parametrize("wrapped", [False, True], ids=["local", "fault-injecting"])
def test_a_snapshot_is_linked_only_after_every_manifest_it_names_is_durable(
    tmp_path: Path, wrapped: bool
) -> None:
    _, path, _ = make_table(tmp_path, options={"manifest.merge-min-count": "3"})
    fio = RecordingFileIO()
    # A wrapper passes the deferred durability through: same fast path, same order.
    c = coordinator(FaultInjectingFileIO(fio) if wrapped else fio, path)
    for i in range(8):  # merges included: merged manifests are new files of the commit too
        c.commit([append_msg(i % 2, i % 2, data_file())], i)
    table = FileStoreTable.open(path)
    manifest_dir = str(Path(path) / "manifest")
    for sid in range(1, 9):
        snapshot = table.snapshot_manager.snapshot_path(sid)
        linked_at = fio.log.index(("link", snapshot))
        before = fio.log[:linked_at]
        fsynced = {p for op, p in before if op == "fsync"}
        # every file the snapshot names: content fsynced (here or when an earlier snapshot was
        # published), and the manifest directory fsynced after the last of them was linked
        for name in referenced_files(table, sid):
            assert str(Path(manifest_dir) / name) in fsynced, (sid, name)
        last_manifest = max(i for i, (op, p) in enumerate(before) if op == "create" and "/manifest/" in p)
        assert ("fsync", manifest_dir) in before[last_manifest:], sid
        # and the snapshot's own directory entry is made durable right after the link
        assert fio.log[linked_at + 1] == ("fsync", str(Path(path) / "snapshot"))
    # the LATEST hint is never fsynced (readers verify it)
    assert not [p for op, p in fio.log if op == "fsync" and p.endswith("LATEST")]


def test_a_base_list_staged_ahead_is_made_durable_by_the_snapshot_that_takes_it(tmp_path: Path) -> None:
    """Two coordinators of one table object, the second prepared while the first is in flight: the
    first stages the second's base list with its own snapshot (created not durable, as any list); the
    second takes it and fsyncs it before its snapshot is linked, with everything else it names."""
    _, path, _ = make_table(tmp_path, options={"manifest.merge-min-count": "3"})
    fio = RecordingFileIO()
    table = FileStoreTable.load(fio, path)
    a, b = (
        CommitCoordinator(
            table, StorageGuard(fio, path, load_snapshot_fn=table.snapshot_manager.snapshot), commit_user=u
        )
        for u in ("a", "b")
    )
    takers_start: dict[int, int] = {}  # where in the log each second commit began
    for i in range(4):
        first = a.prepare([append_msg(i % 2, i % 2, data_file())], i)
        second = b.prepare([append_msg(i % 2, i % 2, data_file())], i)
        assert second.pendings[0].base is None  # the first in flight: nothing staged before the lock
        assert a.commit_prepared(first).snapshot_ids == (2 * i + 1,)
        takers_start[2 * i + 2] = len(fio.log)
        assert b.commit_prepared(second).snapshot_ids == (2 * i + 2,)
    manifest_dir = Path(path) / "manifest"
    for sid in range(2, 9, 2):
        base = str(manifest_dir / table.snapshot_manager.snapshot(sid).base_manifest_list)
        # staged ahead: created by the commit of the snapshot it was staged on (sid - 1), which waits for
        # its writes (PUT beside that snapshot's, so in either order) before offering it: before the
        # commit that took it began
        created = fio.log.index(("create", base))
        assert created < takers_start[sid], sid
        linked_at = fio.log.index(("link", table.snapshot_manager.snapshot_path(sid)))
        fsynced = {p for op, p in fio.log[:linked_at] if op == "fsync"}
        for name in referenced_files(table, sid):
            assert str(manifest_dir / name) in fsynced, (sid, name)
    # nothing left behind: every list staged ahead was taken
    referenced = set().union(*(referenced_files(table, sid) for sid in range(1, 9)))
    assert {f.name for f in manifest_dir.iterdir()} - referenced == set()


def test_cached_manifests_and_lists_equal_what_the_files_decode_to(tmp_path: Path) -> None:
    _, path, _ = make_table(tmp_path, options={"manifest.merge-min-count": "4"})
    table = FileStoreTable.open(path)
    c = CommitCoordinator(
        table,
        StorageGuard(table.file_io, path, load_snapshot_fn=table.snapshot_manager.snapshot),
        commit_user="u",
    )
    for i in range(12):
        c.commit([append_msg(i % 2, i % 2, data_file())], i)
    # every list and manifest the commits read (the previous snapshot's lists, the merge's inputs)
    # came from memory: the writer put what it wrote there
    assert table.manifest_list_cache.stats().misses == 0
    assert table.manifest_cache.stats().misses == 0
    fresh = FileStoreTable.open(path).manifest_reader
    lists = table.manifest_list_cache
    manifests = table.manifest_cache
    checked = 0
    for status in table.file_io.list(str(Path(path) / "manifest")):
        name = status.path.rsplit("/", 1)[-1]
        key = table.manifest_reader.paths.manifest_path(name)
        if name.startswith("manifest-list-") and (cached := lists.get(key)) is not None:
            assert cached == fresh.manifest_list(name), name
            checked += 1
        elif name.startswith("manifest-") and (entries := manifests.get(key)) is not None:
            assert entries == fresh.manifest(name), name
            checked += 1
    assert checked >= 24


def test_a_compact_failure_after_its_append_landed_is_an_unknown_outcome(tmp_path: Path) -> None:
    _, path, _ = make_table(tmp_path)
    c = coordinator(LocalFileIO(), path)
    ghost = data_file(name="data-never-added.parquet")  # compacting a file that is not there: conflict
    msg = CommitMessage(
        partition(0),
        0,
        2,
        append_msg(0, 0, data_file(name="data-new.parquet")).data_increment,
        compact_msg(0, 0, [ghost], [data_file(level=1)]).compact_increment,
    )
    with pytest.raises(CommitOutcomeUnknownError, match="published") as info:
        c.commit([msg], 5)
    assert info.value.fields["snapshot_ids"] == [1]
    snap = FileStoreTable.open(path).latest_snapshot()
    assert snap is not None and (snap.id, snap.commit_identifier) == (1, 5)
