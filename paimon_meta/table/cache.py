"""A small thread-safe LRU for decoded immutable metadata (manifests, manifest lists).

Manifest files are never rewritten in place (a change writes a new file with a new name), so a
decoded manifest can be cached by path for as long as memory allows. The cache is bounded by a
weight (the number of entries held), not by the number of files, because manifests vary in size.
Caches belong to a table object (or are passed in explicitly); there is no global instance.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V", bound=Sequence[object])


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    entries: int
    weight: int


class LruCache(Generic[V]):
    """LRU of sequences keyed by string, bounded by the total length of the cached sequences.

    A value heavier than the whole budget is returned but not kept. Concurrent loads of the same key
    may both run the loader (the second result simply replaces the first): decoding twice is cheaper
    than serialising every reader behind one lock.
    """

    def __init__(self, max_weight: int) -> None:
        if max_weight < 0:
            raise ValueError("max_weight must be >= 0")
        self.max_weight = max_weight
        self._items: OrderedDict[str, V] = OrderedDict()
        self._weight = 0
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self._misses += 1
                return None
            self._items.move_to_end(key)
            self._hits += 1
            return value

    def put(self, key: str, value: V) -> None:
        weight = max(1, len(value))
        if weight > self.max_weight:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= max(1, len(old))
            self._items[key] = value
            self._weight += weight
            while self._weight > self.max_weight:
                _, evicted = self._items.popitem(last=False)
                self._weight -= max(1, len(evicted))

    def get_or_load(self, key: str, loader: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            value = loader()
            self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._items), self._weight)
