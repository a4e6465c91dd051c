"""Finding and deleting the metadata files a dead commit attempt left behind.

A commit's manifest writer names every file ``<kind>-<writer uuid>-<n>`` (``manifest``,
``manifest-list``, ``index-manifest``; see :mod:`paimon_meta.commit.manifests`), and no event records
that uuid. A dead attempt's files are found instead by reading the recent unreferenced manifests and
matching their entries to the files the commit's messages name: a delta or changelog manifest adds only
files of its commit (an OVERWRITE delta also deletes others). Once one manifest of a writer matches,
all files of that writer are the attempt's, unless a snapshot references any of them (then the writer
published, and none is touched) or a commit still in flight matches too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from paimon_meta.errors import CorruptMetadataError, FileIOError
from paimon_meta.io.base import FileStatus
from paimon_meta.model.manifest import FileKind
from paimon_meta.ops.references import read_metadata, tag_snapshots
from paimon_meta.table.table import FileStoreTable

log = logging.getLogger(__name__)

WRITER_FILE = re.compile(
    r"^(manifest-list|index-manifest|manifest)-([0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})-\d+$"
)
# An attempt's files may be written shortly before its prepared event is recorded, and storage clocks
# (S3) differ a little from the metastore's: look this far before the event.
CLOCK_SLACK = timedelta(minutes=10)

#: (when the commit's ``prepared`` event was recorded, data file names its messages name or None).
DeadAttempt = tuple[datetime, set[str] | None]


def delete_attempt_files(
    table: FileStoreTable, dead: Sequence[DeadAttempt], alive: Sequence[set[str] | None]
) -> list[str]:
    """Delete the unreferenced writer files of the ``dead`` attempts; never those matching an ``alive``
    (in-flight) commit. Returns the deleted paths, sorted."""
    if not dead:
        return []
    file_io = table.file_io
    since_ms = int((min(at for at, _ in dead) - CLOCK_SLACK).timestamp() * 1000)
    groups: dict[str, list[FileStatus]] = {}
    for status in file_io.list(table.paths.manifest_dir):
        m = WRITER_FILE.match(status.path.rsplit("/", 1)[-1])
        if m is not None:
            groups.setdefault(m.group(2), []).append(status)
    recent = [files for files in groups.values() if max(f.mtime_ms for f in files) >= since_ms]
    if not recent:
        return []
    dead_files = [files for _, files in dead]
    referenced = referenced_metadata(table)
    deleted: list[str] = []
    for files in recent:
        names = [f.path.rsplit("/", 1)[-1] for f in files]
        if any(n in referenced for n in names):
            continue  # this writer's files made it into a snapshot: not a dead attempt's leftovers
        manifests = _entry_names(table, [n for n in names if _kind(n) == "manifest"])
        if not any(_matches(e, dead_files) for e in manifests) or any(_matches(e, alive) for e in manifests):
            continue
        for status in files:
            try:
                file_io.delete(status.path)
            except FileIOError:
                log.warning("could not delete %s; orphan cleanup will", status.path)
                continue
            deleted.append(status.path)
    return sorted(deleted)


def _kind(name: str) -> str | None:
    m = WRITER_FILE.match(name)
    return None if m is None else m.group(1)


def _entry_names(table: FileStoreTable, manifest_names: Sequence[str]) -> list[tuple[set[str], set[str]]]:
    """Per manifest: (names of its ADD entries, names of all its entries). Unreadable ones are skipped."""
    out = []
    for name in manifest_names:
        try:
            entries = table.manifest_reader.manifest(name)
        except (FileIOError, CorruptMetadataError):
            continue
        if entries:
            adds = {e.file.file_name for e in entries if e.kind is FileKind.ADD}
            out.append((adds, {e.file.file_name for e in entries}))
    return out


def _matches(manifest: tuple[set[str], set[str]], commits: Sequence[set[str] | None]) -> bool:
    """Every file the manifest adds is one of the commit's, and it names at least one of them."""
    adds, names = manifest
    return any(files is not None and adds <= files and bool(names & files) for files in commits)


def referenced_metadata(table: FileStoreTable) -> set[str]:
    """Metadata file names referenced by any snapshot on storage or tag (lists read, not manifests)."""
    names: set[str] = set()
    sm = table.snapshot_manager
    snapshots = list(tag_snapshots(table))
    for sid in sm.list_snapshot_ids():
        try:
            snapshots.append(sm.snapshot(sid))
        except FileIOError:
            continue  # expired meanwhile (only by a writer outside the lock)
    for snap in snapshots:
        names |= read_metadata(table, snap, missing_ok=True).metadata_names()
    return names
