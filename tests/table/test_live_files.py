"""LiveFiles: which files are live in a snapshot, answered from staged deltas, caught up from storage
deltas, rebuilt from a whole snapshot only when nothing else leads there."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

import pytest

from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.table.live_files import LiveFiles, file_key
from tests.commit.helpers import data_file, partition


def snap(sid: int) -> Snapshot:
    return Snapshot(sid, 0, "base", f"delta-{uuid.uuid4()}", "u", sid, CommitKind.APPEND, 0)


def add(name: str, bucket: int = 0) -> ManifestEntry:
    return ManifestEntry(FileKind.ADD, partition(0), bucket, 2, data_file(name=name))


def delete(name: str, bucket: int = 0, level: int = 0) -> ManifestEntry:
    return ManifestEntry(FileKind.DELETE, partition(0), bucket, 2, data_file(name=name, level=level))


class Storage:
    """Snapshots "on storage" with their deltas; counts what LiveFiles reads."""

    def __init__(self) -> None:
        self.snapshots: dict[int, Snapshot] = {}
        self.deltas: dict[str, list[ManifestEntry]] = {}
        self.delta_reads = 0
        self.full_reads = 0

    def publish(self, s: Snapshot, entries: list[ManifestEntry]) -> Snapshot:
        self.snapshots[s.id] = s
        self.deltas[s.delta_manifest_list] = entries
        return s

    def delta(self, s: Snapshot) -> list[ManifestEntry]:
        self.delta_reads += 1
        return self.deltas[s.delta_manifest_list]

    def everything(self, s: Snapshot) -> list[ManifestEntry]:
        self.full_reads += 1
        out: list[ManifestEntry] = []
        for sid in range(1, s.id + 1):
            out += self.deltas[self.snapshots[sid].delta_manifest_list]
        return out

    def ask(self, live: LiveFiles, base: Snapshot | None, names: Iterable[str]) -> set[str]:
        keys = [file_key(add(n)) for n in names]
        found = live.live_of(
            base, keys, delta=self.delta, everything=self.everything, snapshot=self.snapshots.get
        )
        return {k[2] for k in found if isinstance(k, tuple)}


def test_an_empty_table_has_nothing_live() -> None:
    assert Storage().ask(LiveFiles(), None, ["a"]) == set()


def test_staged_and_published_snapshots_need_no_reads() -> None:
    storage, live = Storage(), LiveFiles()
    s1 = snap(1)
    live.staged(None, s1, [add("a"), add("b")])
    # A batch: s2 staged on s1 before s1 is published, s3 on s2.
    s2, s3 = snap(2), snap(3)
    live.staged(s1, s2, [add("c"), delete("a")])
    live.staged(s2, s3, [add("d")])
    assert storage.ask(live, s1, "abcd") == {"a", "b"}
    assert storage.ask(live, s3, "abcd") == {"b", "c", "d"}
    for s in (s1, s2, s3):
        live.published(s)
    assert storage.ask(live, s3, "abcd") == {"b", "c", "d"}
    assert (storage.delta_reads, storage.full_reads, live.rebuilds) == (0, 0, 0)


def test_snapshots_published_elsewhere_are_caught_up_by_their_deltas() -> None:
    storage, live = Storage(), LiveFiles()
    s1 = storage.publish(snap(1), [add("a"), add("b")])
    assert storage.ask(live, s1, "ab") == {"a", "b"}
    assert storage.full_reads == 1
    storage.publish(snap(2), [delete("a"), add("c")])  # another replica, Java, a REST client
    s3 = storage.publish(snap(3), [add("d")])
    assert storage.ask(live, s3, "abcd") == {"b", "c", "d"}
    assert (storage.delta_reads, storage.full_reads) == (2, 1)


def test_an_attempt_that_lost_its_race_is_not_the_snapshot() -> None:
    """Two attempts for id 2: ours staged (never published), theirs on storage. Keyed by the delta
    list, ours is never taken for theirs."""
    storage, live = Storage(), LiveFiles()
    s1 = storage.publish(snap(1), [add("a")])
    live.staged(None, s1, [add("a")])
    live.published(s1)
    ours = snap(2)
    live.staged(s1, ours, [add("mine")])
    theirs = storage.publish(snap(2), [add("theirs")])
    assert storage.ask(live, theirs, ["a", "mine", "theirs"]) == {"a", "theirs"}


def test_an_upgrade_keeps_the_file_live() -> None:
    """Java's compaction may move a file to another level: DELETE and ADD of it in one snapshot."""
    storage, live = Storage(), LiveFiles()
    s1 = storage.publish(snap(1), [add("a")])
    s2 = storage.publish(snap(2), [delete("a"), add("a")])
    assert storage.ask(live, s2, "a") == {"a"}
    live.staged(s2, s3 := snap(3), [delete("a", level=0), add("a")])
    assert storage.ask(live, s3, "a") == {"a"}
    assert s1.id == 1


def test_a_new_timeline_rebuilds() -> None:
    storage, live = Storage(), LiveFiles()
    s1 = storage.publish(snap(1), [add("a")])
    s2 = storage.publish(snap(2), [add("b")])
    assert storage.ask(live, s2, "ab") == {"a", "b"}
    live.reset()  # a rollback to 1, then another snapshot 2
    s2b = storage.publish(snap(2), [add("c")])
    assert storage.ask(live, s2b, "abc") == {"a", "c"}
    assert live.rebuilds == 2 and s1.id == 1


def test_an_older_snapshot_rebuilds() -> None:
    storage, live = Storage(), LiveFiles()
    s1 = storage.publish(snap(1), [add("a")])
    s2 = storage.publish(snap(2), [delete("a")])
    assert storage.ask(live, s2, "a") == set()
    assert storage.ask(live, s1, "a") == {"a"}
    assert live.rebuilds == 2


@pytest.mark.parametrize("external", [True, False])
def test_files_are_keyed_by_where_they_are(external: bool) -> None:
    e = add("a")
    if external:
        e = dataclasses.replace(e, file=dataclasses.replace(e.file, external_path="s3://b/x/a"))
        assert file_key(e) == "s3://b/x/a"
    else:
        assert file_key(e) == (partition(0), 0, "a")
    # the level is not part of it
    assert file_key(delete("a", level=3)) == (partition(0), 0, "a")


def test_a_base_rolled_back_without_a_new_timeline_is_not_caught_up_from() -> None:
    """Storage-only tables have no timeline: a rollback to 3 and two new snapshots reuse ids 4 and 5.
    The base at the old 4 is checked against storage before its deltas are applied."""
    storage, live = Storage(), LiveFiles()
    for i in range(1, 5):
        storage.publish(snap(i), [add(f"f{i}")])
    assert storage.ask(live, storage.snapshots[4], ["f4"]) == {"f4"}
    new4 = storage.publish(snap(4), [add("g4")])
    new5 = storage.publish(snap(5), [add("g5")])
    assert storage.ask(live, new5, ["f3", "f4", "g4", "g5"]) == {"f3", "g4", "g5"}
    assert live.rebuilds == 2 and new4.id == 4
