"""The commit coordinator over the storage-only guard (no metastore): protocol behaviour on local disk."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.commit.guard import StorageGuard
from paimon_meta.commit.retry import RetryPolicy
from paimon_meta.errors import CommitConflictError, ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec
from tests.commit.helpers import append_msg, compact_msg, data_file, make_table, partition


def coordinator(file_io: FileIO, path: str, user: str | None = None, **kw: object) -> CommitCoordinator:
    table = FileStoreTable.open(path)
    guard = StorageGuard(file_io, path, load_snapshot_fn=table.snapshot_manager.snapshot)
    return CommitCoordinator(table, guard, commit_user=user or str(uuid.uuid4()), **kw)  # type: ignore[arg-type]


def live_files(path: str) -> set[str]:
    table = FileStoreTable.open(path)
    plan = table.new_read_builder().new_scan().plan()
    return {f.file_name for s in plan.splits() for f in s.files}


def manifest_dir_files(path: str) -> set[str]:
    return {p.name for p in (Path(path) / "manifest").iterdir()}


def test_append_commits_are_contiguous_and_visible(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    c = coordinator(file_io, path)
    files = []
    for i in range(5):
        f = data_file(rows=i + 1)
        files.append(f.file_name)
        result = c.commit([append_msg(i % 2, i % 2, f)], identifier=i)
        assert result.snapshot_ids == (i + 1,)
    assert live_files(path) == set(files)
    table = FileStoreTable.open(path)
    snap = table.latest_snapshot()
    assert snap is not None and snap.id == 5
    assert snap.total_record_count == 15 and snap.delta_record_count == 5
    assert (Path(path) / "snapshot" / "LATEST").read_text() == "5"
    assert (Path(path) / "snapshot" / "EARLIEST").read_text() == "1"


def test_same_identifier_twice_gives_one_snapshot(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    c = coordinator(file_io, path, user="u1")
    f = data_file()
    first = c.commit([append_msg(0, 0, f)], identifier=7)
    before = manifest_dir_files(path)
    again = coordinator(file_io, path, user="u1").commit([append_msg(0, 0, f)], identifier=7)
    assert again.deduplicated and again.snapshot_ids == first.snapshot_ids
    assert FileStoreTable.open(path).latest_snapshot().id == 1  # type: ignore[union-attr]
    # the duplicate's pre-written delta manifests were cleaned up: definite, nothing referenced them
    assert manifest_dir_files(path) == before


def test_filter_committed_like_java(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    c = coordinator(file_io, path, user="stream")
    for ident in (1, 2, 3):
        c.commit([append_msg()], identifier=ident)
    assert coordinator(file_io, path, user="stream").filter_committed([2, 3, 4, 5]) == [4, 5]
    assert coordinator(file_io, path, user="other").filter_committed([1]) == [1]


def test_two_compactions_deleting_the_same_file_one_conflicts(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    f = data_file(rows=5)
    coordinator(file_io, path).commit([append_msg(0, 0, f)])
    a = compact_msg(0, 0, [f], [data_file(rows=5, name="data-a.parquet")])
    b = compact_msg(0, 0, [f], [data_file(rows=5, name="data-b.parquet")])
    coordinator(file_io, path).commit([a])
    manifests_before = manifest_dir_files(path)
    with pytest.raises(CommitConflictError, match="not previously added"):
        coordinator(file_io, path).commit([b])
    assert live_files(path) == {"data-a.parquet"}
    # a definite conflict leaves nothing behind
    assert manifest_dir_files(path) == manifests_before
    snap = FileStoreTable.open(path).latest_snapshot()
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT and snap.id == 2


def test_append_and_compact_in_one_call_make_two_snapshots(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    old = data_file(rows=3)
    coordinator(file_io, path).commit([append_msg(0, 0, old)])
    new = data_file(rows=4)
    merged = data_file(rows=3, name="data-merged.parquet")
    msg = CommitMessage(
        partition(0),
        0,
        2,
        append_msg(0, 0, new).data_increment,
        compact_msg(0, 0, [old], [merged]).compact_increment,
    )
    result = coordinator(file_io, path).commit([msg], identifier=3)
    assert result.snapshot_ids == (2, 3)
    table = FileStoreTable.open(path)
    assert table.snapshot(2).commit_kind is CommitKind.APPEND
    assert table.snapshot(3).commit_kind is CommitKind.COMPACT
    assert live_files(path) == {new.file_name, "data-merged.parquet"}
    assert table.snapshot(3).total_record_count == 7


def test_lsm_overlap_is_a_conflict(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path, primary_key=True)
    l0 = data_file(rows=2, min_key=0, max_key=10)
    coordinator(file_io, path).commit([append_msg(0, 0, l0)])
    coordinator(file_io, path).commit([compact_msg(0, 0, [l0], [data_file(level=1, min_key=0, max_key=10)])])
    l0b = data_file(rows=2, min_key=5, max_key=20)
    coordinator(file_io, path).commit([append_msg(0, 0, l0b)])
    overlapping = data_file(level=1, min_key=10, max_key=20)
    with pytest.raises(CommitConflictError, match="LSM conflicts detected"):
        coordinator(file_io, path).commit([compact_msg(0, 0, [l0b], [overlapping])])
    disjoint = data_file(level=1, min_key=11, max_key=20)
    coordinator(file_io, path).commit([compact_msg(0, 0, [l0b], [disjoint])])


def test_overwrite_replaces_only_the_named_partition(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    p0, p1 = data_file(), data_file()
    coordinator(file_io, path).commit([append_msg(0, 0, p0), append_msg(1, 1, p1)])
    fresh = data_file(rows=1)
    result = coordinator(file_io, path).commit([append_msg(0, 1, fresh)], overwrite={"p": 0})
    assert FileStoreTable.open(path).snapshot(result.snapshot_ids[0]).commit_kind is CommitKind.OVERWRITE
    assert live_files(path) == {p1.file_name, fresh.file_name}
    with pytest.raises(ValidationError, match="does not belong"):
        coordinator(file_io, path).commit([append_msg(1, 0)], overwrite={"p": 0})


def _three_partitions(tmp_path: Path, **options: str) -> tuple[FileIO, str, dict[int, str]]:
    file_io, path, _ = make_table(tmp_path, options=options)
    files = {p: data_file() for p in range(3)}
    coordinator(file_io, path).commit([append_msg(p, 0, f) for p, f in files.items()])
    return file_io, path, {p: f.file_name for p, f in files.items()}


def test_dynamic_overwrite_replaces_only_the_partitions_of_the_new_files(tmp_path: Path) -> None:
    # Java's default (dynamic-partition-overwrite = true): a whole-table spec replaces p=0 and p=2 only.
    file_io, path, old = _three_partitions(tmp_path)
    new0, new2 = data_file(rows=1), data_file(rows=2)
    result = coordinator(file_io, path).commit([append_msg(0, 1, new0), append_msg(2, 0, new2)], overwrite={})
    snap = FileStoreTable.open(path).snapshot(result.snapshot_ids[0])
    assert snap.commit_kind is CommitKind.OVERWRITE
    assert live_files(path) == {old[1], new0.file_name, new2.file_name}
    assert snap.total_record_count == 10 + 1 + 2 and snap.delta_record_count == 3 - 20


def test_dynamic_overwrite_without_files_commits_nothing(tmp_path: Path) -> None:
    file_io, path, old = _three_partitions(tmp_path)
    result = coordinator(file_io, path).commit([], overwrite={})
    assert result.snapshot_ids == ()
    assert FileStoreTable.open(path).snapshot_manager.latest_snapshot_id() == 1
    assert live_files(path) == set(old.values())


def test_static_overwrite_replaces_everything_the_spec_names(tmp_path: Path) -> None:
    # With the option off (or an explicit OverwriteSpec.static) the spec decides, even with no files.
    file_io, path, old = _three_partitions(tmp_path, **{"dynamic-partition-overwrite": "false"})
    new0 = data_file(rows=1)
    coordinator(file_io, path).commit([append_msg(0, 0, new0)], overwrite={})
    assert live_files(path) == {new0.file_name}
    file_io, path, old = _three_partitions(tmp_path / "explicit")
    result = coordinator(file_io, path).commit([], overwrite=OverwriteSpec.static({"p": 1}))
    assert result.snapshot_ids == (2,)
    assert live_files(path) == {old[0], old[2]}


def test_an_overwrite_file_outside_the_spec_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    file_io, path, old = _three_partitions(tmp_path)
    before = manifest_dir_files(path)
    stray = data_file()
    with pytest.raises(ValidationError, match=f"file {stray.file_name} does not belong") as info:
        coordinator(file_io, path).commit([append_msg(0, 0), append_msg(1, 0, stray)], overwrite={"p": 0})
    assert info.value.fields["file"] == stray.file_name
    assert manifest_dir_files(path) == before
    with pytest.raises(ValidationError, match=r"non-partition columns \['k'\]"):
        coordinator(file_io, path).commit([append_msg(0, 0)], overwrite={"k": 1})
    assert live_files(path) == set(old.values())


def test_bad_messages_are_rejected_before_anything_is_written(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path, buckets=2)
    with pytest.raises(ValidationError, match="bucket 5"):
        coordinator(file_io, path).commit([append_msg(0, 5)])
    assert not (Path(path) / "manifest").exists() or not manifest_dir_files(path)
    # The same file twice in one commit is refused as bad input (it was a conflict once the delta
    # manifests were written; now nothing is written).
    with pytest.raises(ValidationError, match="added twice") as refused:
        f = data_file()
        coordinator(file_io, path).commit([append_msg(0, 0, f), append_msg(0, 0, f)])
    assert refused.value.fields["message_index"] == 1
    assert not (Path(path) / "manifest").exists() or not manifest_dir_files(path)


def test_concurrent_threads_lose_nothing(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path)
    writers, per_writer = 4, 8
    committed: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run(w: int) -> None:
        try:
            c = coordinator(
                file_io, path, user=f"w{w}", retry=RetryPolicy(max_retries=100, min_wait_ms=1, max_wait_ms=20)
            )
            for i in range(per_writer):
                f = data_file(rows=1)
                c.commit([append_msg(w % 2, i % 2, f)], identifier=i)
                with lock:
                    committed.append(f.file_name)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert live_files(path) == set(committed)
    table = FileStoreTable.open(path)
    ids = table.snapshot_manager.list_snapshot_ids()
    assert ids == list(range(1, writers * per_writer + 1))
    # every (user, identifier) exactly once
    keys = [(table.snapshot(i).commit_user, table.snapshot(i).commit_identifier) for i in ids]
    assert len(set(keys)) == len(keys)
    # no orphan manifests: every manifest file is referenced by some snapshot
    referenced: set[str] = set()
    for i in ids:
        snap = table.snapshot(i)
        for lst in (snap.base_manifest_list, snap.delta_manifest_list):
            referenced.add(lst)
            referenced.update(m.file_name for m in table.manifest_reader.manifest_list(lst))
    assert manifest_dir_files(path) - referenced == set()


def test_manifest_merge_keeps_the_base_list_bounded(tmp_path: Path) -> None:
    file_io, path, _ = make_table(tmp_path, options={"manifest.merge-min-count": "5"})
    c = coordinator(file_io, path)
    all_files = []
    for i in range(23):
        f = data_file(rows=1)
        all_files.append(f.file_name)
        c.commit([append_msg(0, 0, f)], identifier=i)
    table = FileStoreTable.open(path)
    snap = table.latest_snapshot()
    assert snap is not None
    base = table.manifest_reader.manifest_list(snap.base_manifest_list)
    assert len(base) < 6
    assert live_files(path) == set(all_files)
