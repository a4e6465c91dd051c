"""What a table's snapshots, tags and in-flight commits reference: the keep-sets of snapshot
expiration, orphan cleanup and recovery.

A snapshot references its manifest lists (base, delta, changelog), the manifests they list, its index
manifest and the index files listed there, its statistics file, and the data/changelog files (plus
their extra files) named by the manifests' entries. Tags (``tag/tag-<name>``) are snapshots too, and so
are the snapshots and tags of every branch (``branch/branch-<name>/``). A commit still in flight
references the files named by the CommitMessages of its ``prepared`` event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from paimon_meta.errors import CorruptMetadataError, FileNotFound, PaimonMetaError
from paimon_meta.metastore.events import EventLog
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import (
    DataFileMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
)
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.json import snapshot_from_json
from paimon_meta.table.paths import SNAPSHOT_DIR, SNAPSHOT_PREFIX, join_path
from paimon_meta.table.read.manifest_merge import merge_entries
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.tags import TAG_DIR, TAG_PREFIX

CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"
BRANCH_DIR = "branch"
CHANGELOG_DIR = "changelog"

#: (partition bytes, bucket, file name): how Java's deletion code identifies a data file.
DataKey = tuple[bytes, int, str]


def data_key(entry: ManifestEntry) -> DataKey:
    return (entry.partition, entry.bucket, entry.file.file_name)


@dataclass(slots=True)
class SnapshotMetadata:
    """The metadata files of one snapshot, read. ``missing`` names files that were absent (only
    tolerated when read with ``missing_ok``: a snapshot half-deleted by an interrupted expiration)."""

    snapshot: Snapshot
    base: list[ManifestFileMeta] = field(default_factory=list)
    delta: list[ManifestFileMeta] = field(default_factory=list)
    changelog: list[ManifestFileMeta] = field(default_factory=list)
    index_entries: list[IndexManifestEntry] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def list_names(self) -> list[str]:
        s = self.snapshot
        names = [s.base_manifest_list, s.delta_manifest_list]
        if s.changelog_manifest_list:
            names.append(s.changelog_manifest_list)
        return names

    def metadata_names(self) -> set[str]:
        """Every metadata file name the snapshot references (lists, manifests, index, statistics)."""
        names = set(self.list_names)
        names.update(m.file_name for m in (*self.base, *self.delta, *self.changelog))
        if self.snapshot.index_manifest:
            names.add(self.snapshot.index_manifest)
        names.update(e.index_file.file_name for e in self.index_entries)
        if self.snapshot.statistics:
            names.add(self.snapshot.statistics)
        return names


def read_metadata(table: FileStoreTable, snapshot: Snapshot, *, missing_ok: bool) -> SnapshotMetadata:
    """Read a snapshot's manifest lists and index manifest (not the manifests' entries).

    Raises:
        FileNotFound: a file is absent and not ``missing_ok``.
        CorruptMetadataError: a file cannot be decoded (never tolerated: deciding on a partial view
            could delete a referenced file).
    """
    reader = table.manifest_reader
    md = SnapshotMetadata(snapshot)

    def manifest_list(name: str | None) -> list[ManifestFileMeta]:
        if not name:
            return []
        try:
            return list(reader.manifest_list(name))
        except FileNotFound:
            if not missing_ok:
                raise
            md.missing.append(name)
            return []

    md.base = manifest_list(snapshot.base_manifest_list)
    md.delta = manifest_list(snapshot.delta_manifest_list)
    md.changelog = manifest_list(snapshot.changelog_manifest_list)
    if snapshot.index_manifest:
        try:
            md.index_entries = list(reader.index_manifest(snapshot.index_manifest))
        except FileNotFound:
            if not missing_ok:
                raise
            md.missing.append(snapshot.index_manifest)
    return md


def read_entries(
    table: FileStoreTable, metas: Sequence[ManifestFileMeta], *, missing_ok: bool, missing: list[str]
) -> list[ManifestEntry]:
    """The entries of ``metas`` in order; absent manifests are skipped (and named in ``missing``)
    only with ``missing_ok``."""
    reader = table.manifest_reader
    if not missing_ok:
        return [e for group in reader.manifests(metas) for e in group]
    out: list[ManifestEntry] = []
    for meta in metas:
        try:
            out.extend(reader.manifest(meta.file_name))
        except FileNotFound:
            missing.append(meta.file_name)
    return out


def live_entries(table: FileStoreTable, md: SnapshotMetadata) -> list[ManifestEntry]:
    """The data files live in the snapshot (base + delta merged, Java ``FileEntry.mergeEntries``)."""
    entries = read_entries(table, [*md.base, *md.delta], missing_ok=False, missing=md.missing)
    return [e for e in merge_entries(entries).values() if e.kind is FileKind.ADD]


class FilePaths:
    """Where the files named by manifest entries live (partition directories need the row decoded)."""

    def __init__(self, table: FileStoreTable) -> None:
        self.table = table
        self._types = [f.type for f in table.schema.partition_type.fields]
        self._partitions: dict[bytes, tuple[object, ...]] = {}

    def _values(self, partition: bytes) -> tuple[object, ...]:
        values = self._partitions.get(partition)
        if values is None:
            values = deserialize_row(partition, self._types)
            self._partitions[partition] = values
        return values

    def data_file(self, entry: ManifestEntry) -> list[str]:
        """The data file and its extra files (same directory, as Java's ``toAlignedPath``)."""
        path = self.table.paths.data_file_path(self._values(entry.partition), entry.bucket, entry.file)
        directory = path.rsplit("/", 1)[0]
        return [path, *(join_path(directory, extra) for extra in entry.file.extra_files)]

    def manifest(self, name: str) -> str:
        return self.table.paths.manifest_path(name)

    def index_file(self, index_file: IndexFileMeta) -> str:
        return self.table.paths.index_file_path(index_file)

    def statistics(self, name: str) -> str:
        return join_path(self.table.paths.statistics_dir, name)


def tag_snapshots(table: FileStoreTable) -> list[Snapshot]:
    """Snapshots kept by tags (``tag/tag-<name>``); their files must survive expiration.

    Raises:
        CorruptMetadataError: a tag file cannot be decoded (never guessed around).
    """
    out = []
    for status in table.file_io.list(join_path(table.path, TAG_DIR)):
        name = status.path.rsplit("/", 1)[-1]
        if not name.startswith(TAG_PREFIX):
            continue
        out.append(snapshot_from_json(table.file_io.read(status.path), path=status.path))
    return out


def branch_snapshots(table: FileStoreTable) -> list[Snapshot]:
    """Every snapshot the table's branches hold: the snapshot files and tag files under
    ``branch/branch-<name>/`` (a branch's manifests and data files are the table's own). What a crashed
    drop left (no schema any more) counts too: its files are kept until the directory is gone.

    Raises:
        CorruptMetadataError: a snapshot or tag file cannot be decoded (never guessed around).
    """
    out = []
    for status in table.file_io.list_recursive(join_path(table.path, BRANCH_DIR)):
        parent, _, name = status.path.rpartition("/")
        kind = parent.rsplit("/", 1)[-1]
        if (
            kind == SNAPSHOT_DIR
            and name.startswith(SNAPSHOT_PREFIX)
            and name[len(SNAPSHOT_PREFIX) :].isdigit()
        ) or (kind == TAG_DIR and name.startswith(TAG_PREFIX)):
            out.append(snapshot_from_json(table.file_io.read(status.path), path=status.path))
    return out


def consumer_min_next_snapshot(table: FileStoreTable) -> int | None:
    """The smallest ``nextSnapshot`` of the table's consumers (Java ``ConsumerManager``): snapshots
    from there on are still to be read by a streaming consumer."""
    found: list[int] = []
    for status in table.file_io.list(join_path(table.path, CONSUMER_DIR)):
        if not status.path.rsplit("/", 1)[-1].startswith(CONSUMER_PREFIX):
            continue
        try:
            found.append(int(json.loads(table.file_io.read(status.path))["nextSnapshot"]))
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptMetadataError(f"consumer file is not readable: {e}", path=status.path) from e
    return min(found) if found else None


def has_files_under(table: FileStoreTable, directory: str) -> bool:
    return bool(table.file_io.list_recursive(join_path(table.path, directory)))


def message_files(messages: Iterable[CommitMessage]) -> tuple[set[str], set[str]]:
    """(data/changelog file names incl. extra files, index file names) named by CommitMessages."""
    data: set[str] = set()
    index: set[str] = set()

    def add(files: Iterable[DataFileMeta]) -> None:
        for f in files:
            data.add(f.file_name)
            data.update(f.extra_files)

    for m in messages:
        d, c = m.data_increment, m.compact_increment
        add((*d.new_files, *d.deleted_files, *d.changelog_files))
        add((*c.compact_before, *c.compact_after, *c.changelog_files))
        index.update(
            f.file_name
            for f in (*d.new_index_files, *d.deleted_index_files, *c.new_index_files, *c.deleted_index_files)
        )
    return data, index


def pending_commit_files(events: EventLog, table_id: int) -> set[str]:
    """File names (data, changelog, extra and index files) named by commits still in flight.

    Raises:
        CorruptMetadataError: a pending commit's messages cannot be decoded, so its files are unknown
            (``paimon-meta recover`` aborts such a commit; then cleanup can proceed).
    """
    names: set[str] = set()
    for pending in events.pending_commits(table_id):
        prepared = pending.prepared
        try:
            messages = prepared.commit_messages()
        except PaimonMetaError as e:
            raise CorruptMetadataError(
                f"messages of pending commit {prepared.ref.commit_id} cannot be decoded ({e}); "
                "run `paimon-meta recover` first",
                commit_id=str(prepared.ref.commit_id),
            ) from e
        if messages is None:
            continue
        data, index = message_files(messages)
        names |= data | index
    return names
