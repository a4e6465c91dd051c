"""Snapshot and schema files of one table: hint rules, listing, cached immutable reads.

Matches Java's ``SnapshotManager``/``HintFileUtils`` and ``SchemaManager``. Snapshot and schema
files are immutable once written (a new version is a new file), so both managers cache what they
have read; hint files are never cached.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from paimon_meta.errors import CorruptMetadataError, FileAlreadyExistsError, FileNotFound
from paimon_meta.io.base import FileIO
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.json import schema_from_json, schema_to_json, snapshot_from_json
from paimon_meta.table.live_files import LiveFiles
from paimon_meta.table.paths import SCHEMA_PREFIX, SNAPSHOT_PREFIX, TablePaths

_SNAPSHOT_NAME = re.compile(rf"^{SNAPSHOT_PREFIX}(\d+)$")
_SCHEMA_NAME = re.compile(rf"^{SCHEMA_PREFIX}(\d+)$")


def _decode_text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptMetadataError(f"not UTF-8 text: {e}", path=path) from e


def _list_versions(file_io: FileIO, directory: str, pattern: re.Pattern[str]) -> list[int]:
    ids = []
    for status in file_io.list(directory):
        name = status.path.rstrip("/").rsplit("/", 1)[-1]
        m = pattern.match(name)
        if m:
            ids.append(int(m.group(1)))
    return sorted(ids)


class SnapshotManager:
    """Reads snapshots and the LATEST/EARLIEST hints of one table."""

    def __init__(self, file_io: FileIO, table_path: str, *, cache_size: int = 256) -> None:
        self.file_io = file_io
        self.paths = TablePaths(table_path)
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._timeline: int | None = None
        # Bumped whenever the cache is dropped for another timeline: a read that began before must not
        # put what it read (maybe a file of the old timeline) into the cache of the new one.
        self._generation = 0
        # The live files of the latest snapshots, for the commit path's re-add check (one per table
        # location wherever the manager is shared, as the service shares it).
        self.live_files = LiveFiles()
        # Commits of this table object prepared and not yet decided (CommitCoordinator.prepare): when
        # some are, a new one will most likely be staged on a snapshot not published yet, so its base
        # list is not staged ahead on the one held now (it would be wasted: a PUT and a DELETE).
        self._in_flight = 0
        # The base manifest list a committer staged ahead for the snapshot after the one it created
        # (``CommitCoordinator``'s ``AheadBase``; opaque here), for the next holder of the table's lock
        # in this process to take: at most one, taken by one.
        self._next_base: object | None = None

    def offer_next_base(self, staged: object) -> object | None:
        """Hold ``staged`` for the next commit to take; returns the one it replaces (never taken: the
        caller deletes its files)."""
        with self._lock:
            previous, self._next_base = self._next_base, staged
        return previous

    def take_next_base(self, fits: Callable[[object], bool]) -> object | None:
        """The held staged-ahead base list if ``fits`` accepts it, no longer held (taken by one
        caller only); None otherwise (it stays)."""
        with self._lock:
            staged = self._next_base
            if staged is None or not fits(staged):
                return None
            self._next_base = None
            return staged

    def begin_commit(self) -> None:
        with self._lock:
            self._in_flight += 1

    def end_commit(self) -> object | None:
        """One commit fewer in flight; when none is left, the staged-ahead base list held (no longer
        held: only a commit in flight can take one, and a commit prepared from now on stages its own
        before the lock), for the caller to delete."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            if self._in_flight:
                return None
            left, self._next_base = self._next_base, None
            return left

    @property
    def commits_in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def observe_timeline(self, timeline: int) -> None:
        """The table's timeline as the metastore has it now. A rollback starts a new one and reuses the
        snapshot ids above its target for different snapshots, so cached snapshots of another timeline
        are dropped (a manager that has not seen one yet drops everything it cached)."""
        with self._lock:
            if self._timeline != timeline:
                self._cache.clear()
                self._timeline = timeline
                self._generation += 1
                self.live_files.reset()

    def snapshot_path(self, snapshot_id: int) -> str:
        return self.paths.snapshot_path(snapshot_id)

    def remember(self, snapshot: Snapshot) -> None:
        """Cache a snapshot this process just created (its bytes are what a read would decode)."""
        with self._lock:
            self._cache[snapshot.id] = snapshot
            self._cache.move_to_end(snapshot.id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def newest_cached(self) -> Snapshot | None:
        """The highest-id snapshot in the cache (of the current timeline), without I/O: a guess at the
        latest, for work done before a lock that is checked under it."""
        with self._lock:
            return self._cache[max(self._cache)] if self._cache else None

    def _read_hint(self, path: str) -> int | None:
        # HintFileUtils.readHint: any failure (absent, partial write, garbage) means "no hint".
        try:
            text = self.file_io.read(path).decode("utf-8").strip()
            value = int(text)
        except (FileNotFound, UnicodeDecodeError, ValueError):
            return None
        return value

    def list_snapshot_ids(self) -> list[int]:
        """Ids of every ``snapshot-<N>`` file, ascending."""
        return _list_versions(self.file_io, self.paths.snapshot_dir, _SNAPSHOT_NAME)

    def latest_snapshot_id(self) -> int | None:
        """The newest snapshot id, or None for an empty table.

        ``LATEST=N`` is trusted only if ``snapshot-(N+1)`` does not exist (the hint is written after
        the snapshot, so it can lag, never lead); otherwise the directory is listed.
        """
        hint = self._read_hint(self.paths.latest_hint_path)
        if hint is not None and hint > 0 and not self.file_io.exists(self.snapshot_path(hint + 1)):
            return hint
        ids = self.list_snapshot_ids()
        return ids[-1] if ids else None

    def earliest_snapshot_id(self) -> int | None:
        """The oldest snapshot id: ``EARLIEST`` if that snapshot exists (expiration may have removed
        it), else the smallest listed id; None for an empty table."""
        hint = self._read_hint(self.paths.earliest_hint_path)
        if hint is not None and self.file_io.exists(self.snapshot_path(hint)):
            return hint
        ids = self.list_snapshot_ids()
        return ids[0] if ids else None

    def snapshot_exists(self, snapshot_id: int) -> bool:
        return self.file_io.exists(self.snapshot_path(snapshot_id))

    def find(self, snapshot_id: int) -> Snapshot | None:
        """Snapshot ``snapshot_id``, or None if there is no such file."""
        try:
            return self.snapshot(snapshot_id)
        except FileNotFound:
            return None

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id``. ``FileNotFound`` if absent, ``CorruptMetadataError`` naming the
        file if it cannot be decoded (or holds another id)."""
        with self._lock:
            cached = self._cache.get(snapshot_id)
            if cached is not None:
                self._cache.move_to_end(snapshot_id)
                return cached
            generation = self._generation
        path = self.snapshot_path(snapshot_id)
        snapshot = snapshot_from_json(_decode_text(self.file_io.read(path), path), path=path)
        if snapshot.id != snapshot_id:
            raise CorruptMetadataError(
                f"snapshot file holds id {snapshot.id}, expected {snapshot_id}", path=path
            )
        with self._lock:
            if generation == self._generation:
                self._cache[snapshot_id] = snapshot
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return snapshot

    def latest_snapshot(self) -> Snapshot | None:
        sid = self.latest_snapshot_id()
        return None if sid is None else self.snapshot(sid)

    def earliest_snapshot(self) -> Snapshot | None:
        sid = self.earliest_snapshot_id()
        return None if sid is None else self.snapshot(sid)

    def snapshots_of_user(
        self,
        user: str,
        start: Snapshot | None,
        *,
        load: Callable[[int], Snapshot | None] | None = None,
    ) -> Iterator[Snapshot]:
        """The snapshots ``user`` committed, newest first, walking back one id at a time from
        ``start`` (Java's ``latestSnapshotOfUser`` walk); the first is the user's latest. Identifiers
        of one user only grow, so a caller looking for one identifier can stop at a smaller one.
        Earlier snapshots are read with ``load`` (default :meth:`snapshot`); the walk ends at
        snapshot 1, where ``load`` returns None, or, as Java's walk, at the earliest snapshot still
        kept (expiration deletes the oldest ones; a snapshot missing above the earliest is an error)."""
        read = self.snapshot if load is None else load
        snap = start
        while snap is not None:
            if snap.commit_user == user:
                yield snap
            previous = snap.id - 1
            if previous < 1:
                return
            try:
                snap = read(previous)
            except FileNotFound:
                earliest = self.earliest_snapshot_id()
                if earliest is None or previous < earliest:
                    return
                raise

    def commit_latest_hint(self, snapshot_id: int, *, durable: bool = True) -> None:
        """Overwrite the LATEST hint (best effort by design: readers verify it, so a writer under the
        lock may skip making it durable: ``durable=False``, see :meth:`FileIO.write`)."""
        self.file_io.write(self.paths.latest_hint_path, str(snapshot_id).encode(), durable=durable)

    def commit_earliest_hint(self, snapshot_id: int) -> None:
        """Overwrite the EARLIEST hint (written by snapshot expiration)."""
        self.file_io.write(self.paths.earliest_hint_path, str(snapshot_id).encode())


class SchemaManager:
    """Reads and creates ``schema/schema-<N>`` files of one table."""

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.paths = TablePaths(table_path)
        self._cache: dict[int, TableSchema] = {}
        self._lock = threading.Lock()

    def schema_path(self, schema_id: int) -> str:
        return self.paths.schema_path(schema_id)

    def list_ids(self) -> list[int]:
        """Ids of every schema file, ascending."""
        return _list_versions(self.file_io, self.paths.schema_dir, _SCHEMA_NAME)

    def schema(self, schema_id: int) -> TableSchema:
        """Schema ``schema_id`` (cached: schema files never change). ``FileNotFound`` if absent,
        ``CorruptMetadataError`` naming the file if it cannot be decoded."""
        with self._lock:
            cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        path = self.schema_path(schema_id)
        schema = schema_from_json(_decode_text(self.file_io.read(path), path), path=path)
        if schema.id != schema_id:
            raise CorruptMetadataError(f"schema file holds id {schema.id}, expected {schema_id}", path=path)
        with self._lock:
            self._cache[schema_id] = schema
        return schema

    def exists(self, schema_id: int) -> bool:
        """Whether schema ``schema_id`` is a readable schema file of the table."""
        try:
            self.schema(schema_id)
        except (FileNotFound, CorruptMetadataError):
            return False
        return True

    def latest(self) -> TableSchema | None:
        """The schema with the highest id, or None if the table has none."""
        ids = self.list_ids()
        return self.schema(ids[-1]) if ids else None

    def commit_new_schema(self, schema: TableSchema) -> bool:
        """Create ``schema-<schema.id>`` if absent. True if this call created it, False if a schema
        with that id already exists (a concurrent ALTER won; re-read and retry).

        Atomic only where ``file_io.capabilities.atomic_create``; elsewhere callers hold the table lock.
        """
        path = self.schema_path(schema.id)
        try:
            self.file_io.create_if_absent(path, schema_to_json(schema).encode("utf-8"))
        except FileAlreadyExistsError:
            return False
        with self._lock:
            self._cache[schema.id] = schema
        return True
