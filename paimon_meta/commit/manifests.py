"""Writing manifests and manifest lists, and Paimon's manifest merge (``ManifestFileMerger``).

Manifests are immutable and named ``manifest-<uuid>-<n>`` / ``manifest-list-<uuid>-<n>`` with a uuid
per writer, so two committers never write the same name and a failed attempt's files are exactly the
ones it names in its result (which is what makes cleanup of a *definitely* failed attempt safe).

Durability: files are created with ``durable=False`` (local disk: without fsync) and listed in
:attr:`ManifestWriter.unsynced`; the coordinator creates the snapshot that references them with
``create_if_absent(sync_first=unsynced)``, which makes them durable (local disk: fsyncs their contents
and ``manifest/``) before the snapshot's name appears, so a durable snapshot never references a
manifest that a crash could still lose. On S3 every PUT is durable and the flag changes nothing.
"""

from __future__ import annotations

import math
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from paimon_meta.commit.conflicts import merge_for_commit
from paimon_meta.io.base import FileIO
from paimon_meta.model.binary_row import EMPTY_ROW_BYTES, deserialize_row, serialize_row
from paimon_meta.model.manifest import (
    FileKind,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from paimon_meta.model.types import DataType
from paimon_meta.serde.avro import encode_index_manifest, encode_manifest, encode_manifest_list

ReadManifest = Callable[[ManifestFileMeta], list[ManifestEntry]]
#: Called with (file name, decoded content) for every manifest or list written, to fill a read cache.
CacheManifest = Callable[[str, tuple[ManifestEntry, ...]], None]
CacheList = Callable[[str, tuple[ManifestFileMeta, ...]], None]


def partition_stats(partitions: Sequence[bytes], types: Sequence[DataType]) -> SimpleStats:
    """Min/max/null counts over partition BinaryRows, as Java's manifest writer collects them."""
    if not types:
        return SimpleStats(EMPTY_ROW_BYTES, EMPTY_ROW_BYTES, ())
    n = len(types)
    mins: list[Any] = [None] * n
    maxs: list[Any] = [None] * n
    nulls = [0] * n
    for raw in set(partitions):
        values = deserialize_row(raw, types)
        for i, v in enumerate(values):
            if v is None:
                nulls[i] += 1
                continue
            if mins[i] is None or v < mins[i]:
                mins[i] = v
            if maxs[i] is None or v > maxs[i]:
                maxs[i] = v
    # Each distinct partition is counted once; Java counts per entry. Both only feed "could this manifest
    # contain a null partition value" checks, for which > 0 is what matters.
    return SimpleStats(serialize_row(mins, types), serialize_row(maxs, types), tuple(nulls))


@dataclass(slots=True)
class ManifestWriter:
    """Writes manifest files and lists for one committer. Records every file it writes in ``written``
    so a definitely-failed attempt can delete exactly those. ``cache_manifest``/``cache_list`` receive
    what each file decodes to (the table's read caches: files are immutable, so the next commit reads
    the previous snapshot's lists from memory)."""

    file_io: FileIO
    manifest_dir: str
    partition_types: Sequence[DataType]
    schema_id: int
    compression: str = "zstd"
    target_file_size: int = 8 * 1024 * 1024
    prefix_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    written: list[str] = field(default_factory=list)
    cache_manifest: CacheManifest | None = None
    cache_list: CacheList | None = None
    #: Paths written with ``durable=False`` since the last :meth:`sync` (or publish).
    unsynced: list[str] = field(default_factory=list)
    #: While set, files are not written but appended here as (path, bytes), for the caller to write
    #: (concurrently, :func:`write_deferred`) before anything can name them. They count as written
    #: (``written``, ``unsynced``, the read caches) from the moment they are staged.
    deferred: list[tuple[str, bytes]] | None = None
    _counter: Any = field(default_factory=count)

    def _name(self, kind: str) -> str:
        return f"{kind}-{self.prefix_uuid}-{next(self._counter)}"

    def _put(self, name: str, data: bytes) -> None:
        path = self.file_io.join(self.manifest_dir, name)
        self.written.append(name)
        if self.deferred is not None:
            self.deferred.append((path, data))
            self.unsynced.append(path)
            return
        # create_if_absent: a manifest name is never reused, so finding one already there is a bug.
        # Durable at sync() or with the snapshot that names it (module docstring).
        self.file_io.create_if_absent(path, data, durable=False)
        self.unsynced.append(path)

    def forget(self, names: Sequence[str]) -> None:
        """Stop tracking files the caller deleted (a definitely failed attempt's)."""
        gone = set(names)
        self.written = [n for n in self.written if n not in gone]
        self.unsynced = [p for p in self.unsynced if p.rsplit("/", 1)[-1] not in gone]

    def sync(self) -> None:
        """Make every file written since the last call durable (local disk: their contents and the
        directory, fsynced concurrently). Call before creating anything durable that references them."""
        if self.unsynced:
            self.file_io.sync(self.unsynced)
        self.unsynced.clear()

    def write_manifests(self, entries: Sequence[ManifestEntry]) -> list[ManifestFileMeta]:
        """Write ``entries`` into one or more manifests of about ``target_file_size`` each."""
        if not entries:
            return []
        data = encode_manifest(entries, compression=self.compression)
        if len(data) <= self.target_file_size or len(entries) == 1:
            return [self._write_one(entries, data)]
        chunks = math.ceil(len(data) / self.target_file_size)
        per = math.ceil(len(entries) / chunks)
        return [
            self._write_one(part, encode_manifest(part, compression=self.compression))
            for part in (entries[i : i + per] for i in range(0, len(entries), per))
        ]

    def _write_one(self, entries: Sequence[ManifestEntry], data: bytes) -> ManifestFileMeta:
        name = self._name("manifest")
        self._put(name, data)
        if self.cache_manifest is not None:
            self.cache_manifest(name, tuple(entries))
        added = sum(1 for e in entries if e.kind is FileKind.ADD)
        return ManifestFileMeta(
            file_name=name,
            file_size=len(data),
            num_added_files=added,
            num_deleted_files=len(entries) - added,
            partition_stats=partition_stats([e.partition for e in entries], self.partition_types),
            schema_id=self.schema_id,
            min_bucket=min(e.bucket for e in entries),
            max_bucket=max(e.bucket for e in entries),
            min_level=min(e.file.level for e in entries),
            max_level=max(e.file.level for e in entries),
        )

    def write_manifest_list(self, metas: Sequence[ManifestFileMeta]) -> tuple[str, int]:
        data = encode_manifest_list(metas, compression=self.compression)
        name = self._name("manifest-list")
        self._put(name, data)
        if self.cache_list is not None:
            self.cache_list(name, tuple(metas))
        return name, len(data)

    def write_index_manifest(self, entries: Sequence[IndexManifestEntry]) -> str:
        data = encode_index_manifest(entries, compression=self.compression)
        name = self._name("index-manifest")
        self._put(name, data)
        return name


# One pool per process (a forked child gets its own: the parent's threads do not exist there).
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    pid = os.getpid()
    with _POOL_LOCK:
        pool = _POOLS.get(pid)
        if pool is None:
            _POOLS.clear()
            pool = _POOLS[pid] = ThreadPoolExecutor(max_workers=16, thread_name_prefix="manifest-put")
        return pool


def run_together(actions: Sequence[Callable[[], None]]) -> None:
    """Run independent ``actions`` concurrently on the process's pool and wait for them all (on S3: one
    round trip for all, not one each); raises the first failure once all ended."""
    if len(actions) <= 1:
        for action in actions:
            action()
        return
    futures = [_pool().submit(action) for action in actions]
    wait(futures)
    for future in futures:
        future.result()


def write_deferred(file_io: FileIO, files: Sequence[tuple[str, bytes]]) -> None:
    """Write what writers staged in ``deferred`` mode, concurrently (each create-if-absent, not durable:
    made durable with the snapshot that names it, as any manifest). On S3 that is one round trip for
    all of them instead of one each. Raises the first failure once every write ended; then some may
    exist and some not: nothing names them yet, so the caller drops them like any failed attempt's.
    Never call it from a task of the same pool (a process-wide pool of 16 threads)."""
    if len(files) <= 1:
        for path, data in files:
            file_io.create_if_absent(path, data, durable=False)
        return
    pool = _pool()
    futures = [pool.submit(file_io.create_if_absent, path, data, durable=False) for path, data in files]
    wait(futures)
    for future in futures:
        future.result()


def start_writes(file_io: FileIO, files: Sequence[tuple[str, bytes]]) -> list[Future[Any]]:
    """Start writing ``files`` as :func:`write_deferred` does (each create-if-absent, not durable), on the
    process's pool, without waiting: the caller waits on the futures (never from a task of the pool)."""
    pool = _pool()
    return [pool.submit(file_io.create_if_absent, path, data, durable=False) for path, data in files]


@dataclass(frozen=True, slots=True)
class MergeOptions:
    target_file_size: int = 8 * 1024 * 1024
    full_compaction_threshold: int = 16 * 1024 * 1024
    merge_min_count: int = 30


def merge_manifests(
    manifests: Sequence[ManifestFileMeta],
    *,
    read: ReadManifest,
    writer: ManifestWriter,
    options: MergeOptions,
) -> list[ManifestFileMeta]:
    """Java ``ManifestFileMerger.merge``: a full compaction when the manifests that must change are big
    enough, else a minor merge of consecutive small manifests. The live file set is unchanged."""
    full = _try_full_compaction(manifests, read=read, writer=writer, options=options)
    if full is not None:
        return full
    return _minor_compaction(manifests, read=read, writer=writer, options=options)


def _merge_group(
    group: Sequence[ManifestFileMeta], *, read: ReadManifest, writer: ManifestWriter
) -> list[ManifestFileMeta]:
    entries: list[ManifestEntry] = []
    for m in group:
        entries.extend(read(m))
    # Dangling DELETEs (their ADD lives in an earlier manifest outside this group) must be kept.
    return writer.write_manifests(list(merge_for_commit(entries).values()))


def _minor_compaction(
    manifests: Sequence[ManifestFileMeta],
    *,
    read: ReadManifest,
    writer: ManifestWriter,
    options: MergeOptions,
) -> list[ManifestFileMeta]:
    result: list[ManifestFileMeta] = []
    candidates: list[ManifestFileMeta] = []
    total = 0
    for m in manifests:
        total += m.file_size
        candidates.append(m)
        if total >= options.target_file_size:
            result.extend(
                candidates if len(candidates) == 1 else _merge_group(candidates, read=read, writer=writer)
            )
            candidates, total = [], 0
    if len(candidates) >= options.merge_min_count:
        result.extend(_merge_group(candidates, read=read, writer=writer))
    else:
        result.extend(candidates)
    return result


def _try_full_compaction(
    manifests: Sequence[ManifestFileMeta],
    *,
    read: ReadManifest,
    writer: ManifestWriter,
    options: MergeOptions,
) -> list[ManifestFileMeta] | None:
    # Leading manifests that are already big and hold no deletes are kept as they are, unless a later
    # DELETE hits one of their files.
    keep = 0
    for m in manifests:
        if m.num_deleted_files == 0 and m.file_size >= options.target_file_size:
            keep += 1
        else:
            break
    rest = manifests[keep:]
    if sum(m.file_size for m in rest) < options.full_compaction_threshold:
        return None
    delta: list[ManifestEntry] = []
    for m in rest:
        delta.extend(read(m))
    deleted = {e.identifier for e in delta if e.kind is FileKind.DELETE}
    result: list[ManifestFileMeta] = []
    to_rewrite: list[ManifestEntry] = []
    for m in manifests[:keep]:
        entries = read(m)
        if deleted and any(e.identifier in deleted for e in entries):
            to_rewrite.extend(entries)
        else:
            result.append(m)
    merged = merge_for_commit([*to_rewrite, *delta])
    survivors = [e for e in merged.values() if e.kind is FileKind.ADD]
    # A DELETE whose ADD is in a kept manifest cannot survive: we rewrote every manifest a delete hits.
    result.extend(writer.write_manifests(survivors))
    return result
