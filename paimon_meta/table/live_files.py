"""The data files live in a table's latest snapshot, kept up to date commit by commit.

A commit may not add a file that is already live in its base: the snapshot would list it twice, and
every later read fails ("Trying to add file ... which is already added") or returns its rows twice.
Java checks this only when a commit deletes something; a pure append of level-0 files skips the base
scan because writers name new files uniquely. A hostile or buggy client's names are not unique, so the
commit path checks every ADD, and must do so without scanning the whole table per commit.

:class:`LiveFiles` keeps the set of live files of one snapshot (the *base*) and, on top of it, the
deltas of snapshots staged or published after it (*nodes*, each with its parent). A question about a
snapshot is answered through the chain of nodes down to the base, O(files asked + chain length).
Publishing a snapshot folds its node into the base (O(its delta)); a snapshot that somebody else
published (another replica, Java, a REST client) is caught up by reading the delta manifest lists of
the snapshots in between; anything else (a rollback, an unknown ancestor) rebuilds the base from the
snapshot's manifests, which is what a conflict-checked commit reads anyway.

A file is identified by where it is: its external path, else (partition, bucket, file name). The
level is not part of it: an upgrade (Java's compaction moving a file to another level without
rewriting it) deletes and adds the same file in one snapshot, which is allowed.

Invariant: the base set equals the live files of the snapshot it is keyed by, on the timeline the
snapshot manager has seen (a new timeline drops everything: ``reset``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.table.manifests import ManifestReader

FileKey = tuple[bytes, int, str] | str
# A snapshot is named by its id and its delta manifest list (a fresh name per attempt): two attempts
# staged for the same id are different nodes.
SnapshotKey = tuple[int, str]

# Nodes kept beyond the base: staged snapshots that never published are dropped when a sibling is
# folded; this bounds what a long run of unpublished attempts can hold.
MAX_NODES = 256


def file_key(entry: ManifestEntry) -> FileKey:
    """Where the file of ``entry`` is: its external path, else (partition, bucket, name)."""
    f = entry.file
    return f.external_path or (entry.partition, entry.bucket, f.file_name)


def snapshot_key(snapshot: Snapshot) -> SnapshotKey:
    return snapshot.id, snapshot.delta_manifest_list


@dataclass(slots=True)
class _Node:
    parent: SnapshotKey | None
    adds: set[FileKey] = field(default_factory=set)
    deletes: set[FileKey] = field(default_factory=set)


class LiveFiles:
    """Which files are live in a snapshot of one table (see the module docstring). Thread-safe."""

    def __init__(self, max_nodes: int = MAX_NODES) -> None:
        self._lock = threading.Lock()
        self._base_key: SnapshotKey | None = None
        self._base: set[FileKey] = set()
        self._nodes: dict[SnapshotKey, _Node] = {}
        self._max_nodes = max_nodes
        self.rebuilds = 0  # full reads of a snapshot's manifests (tests and benchmarks look)

    def reset(self) -> None:
        """Forget everything (a new timeline: snapshot ids are reused for other snapshots)."""
        with self._lock:
            self._base_key, self._base, self._nodes = None, set(), {}

    def live_of(
        self,
        base: Snapshot | None,
        keys: Iterable[FileKey],
        *,
        delta: Callable[[Snapshot], Iterable[ManifestEntry]],
        everything: Callable[[Snapshot], Iterable[ManifestEntry]],
        snapshot: Callable[[int], Snapshot | None],
    ) -> list[FileKey]:
        """The keys of ``keys`` that are live in ``base`` (None: an empty table, nothing is).

        ``base`` is a snapshot on storage or one staged here (:meth:`staged`). ``delta(s)``: the entries
        of snapshot ``s``'s delta manifest list; ``everything(s)``: every entry of its data manifests;
        ``snapshot(id)``: snapshot ``id`` as storage has it (None if absent)."""
        if base is None:
            return []
        wanted = list(keys)
        with self._lock:
            chain, root = self._walk(snapshot_key(base))
            below: set[FileKey] | frozenset[FileKey] = self._base
            if root is None:
                below = frozenset()  # the chain starts on an empty table
            elif root != self._base_key:
                found = base if not chain else snapshot(root[0])
                if found is not None and snapshot_key(found) == root:
                    self._catch_up(found, delta, everything, snapshot)
                else:  # the chain hangs on a snapshot storage does not have: read base itself
                    self._rebuild(base, everything)
                    chain = []
                below = self._base
            return [k for k in wanted if _live(k, chain, below)]

    def staged(self, parent: Snapshot | None, child: Snapshot, entries: Sequence[ManifestEntry]) -> None:
        """``child`` was staged on ``parent`` with these delta ``entries`` (it may never publish)."""
        node = _Node(None if parent is None else snapshot_key(parent))
        for e in entries:
            key = file_key(e)
            if e.kind is FileKind.ADD:
                node.adds.add(key)
                node.deletes.discard(key)
            elif key in node.adds:
                node.adds.discard(key)
            else:
                node.deletes.add(key)
        with self._lock:
            if len(self._nodes) >= self._max_nodes:
                self._nodes.clear()  # the next question catches up from storage
            self._nodes[snapshot_key(child)] = node

    def published(self, snapshot: Snapshot) -> None:
        """``snapshot`` is on storage: fold its node into the base when it was staged on the base."""
        key = snapshot_key(snapshot)
        with self._lock:
            node = self._nodes.get(key)
            if node is None or node.parent != self._base_key:
                return  # staged on something else: the next question catches up from storage
            self._base -= node.deletes
            self._base |= node.adds
            self._base_key = key
            # Siblings staged on the old base never published (I2: one snapshot per id).
            self._nodes = {k: n for k, n in self._nodes.items() if k[0] > key[0]}

    # ---- under the lock --------------------------------------------------------------------------------

    def _walk(self, key: SnapshotKey) -> tuple[list[_Node], SnapshotKey | None]:
        """The nodes from ``key`` down (newest first) and the key they rest on: the base's, one that is
        not a node (a snapshot published elsewhere), or None (the table was empty)."""
        chain: list[_Node] = []
        current: SnapshotKey | None = key
        while current is not None and current != self._base_key and len(chain) <= len(self._nodes):
            node = self._nodes.get(current)
            if node is None:
                break
            chain.append(node)
            current = node.parent
        return chain, current

    def _catch_up(
        self,
        target: Snapshot,
        delta: Callable[[Snapshot], Iterable[ManifestEntry]],
        everything: Callable[[Snapshot], Iterable[ManifestEntry]],
        snapshot: Callable[[int], Snapshot | None],
    ) -> None:
        """Make the base ``target`` (on storage): from the base by the deltas in between when they are
        all there and lead to ``target``, else by reading ``target``'s manifests."""
        start = self._base_key
        if (
            start is not None
            and start[0] < target.id
            and target.id - start[0] <= self._max_nodes
            and _key_of(snapshot(start[0])) == start  # still the base's snapshot (no rollback since)
        ):
            live = set(self._base)
            found: Snapshot | None = None
            for sid in range(start[0] + 1, target.id + 1):
                found = target if sid == target.id else snapshot(sid)
                if found is None:
                    break
                _apply(live, delta(found))
            if found is not None and snapshot_key(found) == snapshot_key(target):
                self._base, self._base_key = live, snapshot_key(target)
                self._nodes = {k: n for k, n in self._nodes.items() if k[0] > target.id}
                return
        self._rebuild(target, everything)

    def _rebuild(self, target: Snapshot, everything: Callable[[Snapshot], Iterable[ManifestEntry]]) -> None:
        live: set[FileKey] = set()
        _apply(live, everything(target))
        self.rebuilds += 1
        self._base, self._base_key = live, snapshot_key(target)
        self._nodes = {k: n for k, n in self._nodes.items() if k[0] > target.id}


class SnapshotSource(Protocol):
    """What :func:`readded` asks of a table's snapshots (``SnapshotManager``, which holds the
    :class:`LiveFiles` and so is imported after this module, provides it)."""

    @property
    def live_files(self) -> LiveFiles: ...

    def find(self, snapshot_id: int) -> Snapshot | None: ...


def readded(
    snapshots: SnapshotSource,
    reader: ManifestReader,
    base: Snapshot | None,
    entries: Sequence[ManifestEntry],
) -> list[ManifestEntry]:
    """The ADDs of ``entries`` (one snapshot's delta) whose file is live in ``base`` already and that
    ``entries`` do not delete too (an upgrade to another level deletes and adds the same file), asked
    of the table's :class:`LiveFiles` (``snapshots.live_files``)."""
    if base is None:
        return []
    deleted = {file_key(e) for e in entries if e.kind is FileKind.DELETE}
    added = {file_key(e): e for e in entries if e.kind is FileKind.ADD}
    candidates = [k for k in added if k not in deleted]
    if not candidates:
        return []
    live = snapshots.live_files.live_of(
        base,
        candidates,
        delta=lambda s: reader.list_entries(s.delta_manifest_list),
        everything=reader.data_entries,
        snapshot=snapshots.find,
    )
    return [added[k] for k in live]


def _key_of(snapshot: Snapshot | None) -> SnapshotKey | None:
    return None if snapshot is None else snapshot_key(snapshot)


def _live(key: FileKey, chain: Sequence[_Node], below: set[FileKey] | frozenset[FileKey]) -> bool:
    for node in chain:
        if key in node.adds:
            return True
        if key in node.deletes:
            return False
    return key in below


def _apply(live: set[FileKey], entries: Iterable[ManifestEntry]) -> None:
    """Entries in manifest order: an ADD makes a file live, a DELETE makes it not."""
    for e in entries:
        if e.kind is FileKind.ADD:
            live.add(file_key(e))
        else:
            live.discard(file_key(e))
