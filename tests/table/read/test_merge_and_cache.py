"""FileEntry merge semantics and the manifest LRU."""

from __future__ import annotations

import threading

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.model.types import INT
from paimon_meta.table.cache import LruCache
from paimon_meta.table.read.manifest_merge import (
    dangling_deletes,
    delete_of_absent_message,
    live_files,
    merge_entries,
)
from tests.table.synthetic import data_file, entry

ADD, DELETE = FileKind.ADD, FileKind.DELETE


def _e(kind: FileKind, name: str, *, part: int = 1, bucket: int = 0, level: int = 0) -> ManifestEntry:
    return entry(kind, [part], [INT()], bucket, data_file(name, level=level))


def _names(entries: list[ManifestEntry]) -> list[str]:
    return [e.file.file_name for e in entries]


def test_add_then_delete_cancels_and_order_is_kept() -> None:
    merged = merge_entries([_e(ADD, "a"), _e(ADD, "b"), _e(ADD, "c"), _e(DELETE, "b")])
    assert _names(live_files(merged)) == ["a", "c"]
    assert dangling_deletes(merged) == []


def test_dangling_delete_is_kept_for_the_conflict_check() -> None:
    merged = merge_entries([_e(DELETE, "x"), _e(ADD, "a")])
    assert _names(live_files(merged)) == ["a"]
    assert _names(dangling_deletes(merged)) == ["x"]
    assert delete_of_absent_message(dangling_deletes(merged)[0], "db.t") == (
        "Trying to delete file x for table db.t which is not previously added."
    )
    # the ADD arriving later (e.g. merging delta first, base into the same map) does not cancel it:
    # Java's map holds the DELETE, so a later ADD of the same identifier is a double add
    with pytest.raises(ValidationError):
        merge_entries([_e(ADD, "x")], merged)


def test_double_add_raises_javas_message() -> None:
    with pytest.raises(ValidationError) as err:
        merge_entries([_e(ADD, "a"), _e(ADD, "a")])
    assert "Trying to add file" in err.value.message
    assert "which is already in the the map" in err.value.message
    assert err.value.fields["file_name"] == "a"


def test_identity_includes_partition_bucket_and_level() -> None:
    entries = [_e(ADD, "a"), _e(ADD, "a", part=2), _e(ADD, "a", bucket=1), _e(ADD, "a", level=1)]
    merged = merge_entries(entries)
    assert len(live_files(merged)) == 4
    merge_entries([_e(DELETE, "a", level=1)], merged)  # an upgrade removes only the level-1 copy
    assert sorted((e.partition, e.bucket, e.file.level) for e in live_files(merged)) == sorted(
        (e.partition, e.bucket, e.file.level) for e in entries[:3]
    )


def test_readd_after_delete_is_allowed() -> None:
    merged = merge_entries([_e(ADD, "a"), _e(DELETE, "a"), _e(ADD, "a")])
    assert _names(live_files(merged)) == ["a"]


def test_lru_is_bounded_by_weight() -> None:
    cache: LruCache[tuple[int, ...]] = LruCache(max_weight=5)
    cache.put("a", (1, 2))
    cache.put("b", (1, 2))
    assert cache.get("a") == (1, 2)  # "a" is now most recent
    cache.put("c", (1, 2))  # weight 6 > 5: evicts the least recent, "b"
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None
    cache.put("huge", tuple(range(6)))  # heavier than the budget: not kept
    assert cache.get("huge") is None
    stats = cache.stats()
    assert (stats.entries, stats.weight) == (2, 4)
    assert stats.hits == 3 and stats.misses == 2


def test_get_or_load_loads_once_and_is_thread_safe() -> None:
    cache: LruCache[tuple[int, ...]] = LruCache(max_weight=10_000)
    calls: list[str] = []

    def loader(key: str) -> tuple[int, ...]:
        calls.append(key)
        return (len(key),)

    for key in ("a", "bb", "a", "bb"):
        assert cache.get_or_load(key, lambda key=key: loader(key)) == (len(key),)  # type: ignore[misc]
    assert calls == ["a", "bb"]
    cache.clear()

    def hammer(i: int) -> None:
        for j in range(200):
            key = f"{(i * 7 + j) % 50}"
            cache.get_or_load(key, lambda key=key: (int(key),) * 50)  # type: ignore[misc]

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache.stats()
    assert stats.weight <= cache.max_weight
    assert stats.weight == sum(len(cache.get(str(k)) or ()) for k in range(50))
