"""Orphan file cleanup (Java ``OrphanFilesClean``): delete files under the table directory that nothing
references and that are older than a threshold (default 1 day, by modification time).

Referenced, so never deleted: every file a snapshot on storage or a tag references (lists, manifests,
index manifests, index files, statistics, data and changelog files with their extra files, found by
*name* as Java does), and every file named by the CommitMessages of a commit still in flight (its
``prepared`` event). Never considered at all: ``schema/``, the snapshot files and the LATEST/EARLIEST
hints, ``tag/``, ``consumer/``, ``changelog/``, ``branch/``, and anything outside the Paimon layout (a
data file must sit below a ``bucket-*`` directory).

In-flight commits write their delta manifests and manifest lists *after* their ``prepared`` event and
before their snapshot exists, under names no event records: the age threshold is what protects them,
as in Java. It must therefore exceed the longest commit (and the longest a writer keeps data files
before committing them); the default day does, a threshold of minutes is only safe when no writer is
running. Temporary files (a crashed write's ``.<name>.<uuid>.tmp``) are deleted by the same rule.

The directory is listed first; then, holding the table's metastore lock, the referenced set is built
from the snapshots, tags and in-flight commits of that moment (no commit through the lock publishes
meanwhile); the lock is released and the orphans are deleted, so a writer waits for the decision only,
never for the deletions. That is safe because an orphan is unreferenced at the decision and older than the
threshold: a later commit builds on a snapshot whose files were referenced (so are not orphans), writes new
files (younger than the threshold) and names old ones only if it kept them past the threshold, which the
threshold must already exclude (above); commits in flight are read again before deleting, and a file one of
them names is kept. Tables with branches or a decoupled changelog
are refused (their references live elsewhere).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_meta.commit.metastore.guard import reconcile
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import FileIOError, FileNotFound, UnsupportedError
from paimon_meta.io.base import FileStatus
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops.common import Progress, maintenance_run, quiet, resolve_table, table_lock
from paimon_meta.ops.references import (
    BRANCH_DIR,
    CHANGELOG_DIR,
    CONSUMER_DIR,
    has_files_under,
    pending_commit_files,
    read_metadata,
    tag_snapshots,
)
from paimon_meta.table.file_guard import path_guard, refused_payload
from paimon_meta.table.paths import (
    BUCKET_PREFIX,
    EARLIEST,
    INDEX_DIR,
    LATEST,
    MANIFEST_DIR,
    SCHEMA_DIR,
    SNAPSHOT_DIR,
    SNAPSHOT_PREFIX,
    STATISTICS_DIR,
)
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.tags import TAG_DIR

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

DEFAULT_OLDER_THAN_SECONDS = 86_400.0
_METADATA_DIRS = frozenset({MANIFEST_DIR, INDEX_DIR, STATISTICS_DIR})
_NEVER_DIRS = frozenset({SCHEMA_DIR, TAG_DIR, CONSUMER_DIR, CHANGELOG_DIR, BRANCH_DIR, "service"})


@dataclass(frozen=True, slots=True)
class OrphanFile:
    path: str
    size: int
    age_seconds: float


@dataclass(slots=True)
class OrphanReport:
    """What one cleanup run found and (unless dry run) deleted."""

    table: str
    dry_run: bool
    older_than_seconds: float
    scanned: int = 0
    referenced: int = 0
    too_young: int = 0
    orphans: list[OrphanFile] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    #: orphans not deleted because they are not the table's files (table.file_guard)
    refused: list[str] = field(default_factory=list)

    @property
    def orphan_bytes(self) -> int:
        return sum(o.size for o in self.orphans)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["orphan_bytes"] = self.orphan_bytes
        return out


def remove_orphan_files(
    catalog: MetastoreCatalog,
    identifier: str,
    *,
    older_than_seconds: float = DEFAULT_OLDER_THAN_SECONDS,
    dry_run: bool = False,
    now_ms: int | None = None,
    progress: Progress = quiet,
    principal: str | None = None,
    reason: str | None = None,
) -> OrphanReport:
    """Delete the table's orphan files older than ``older_than_seconds`` (see the module docstring).

    Raises:
        TableNotFoundError, UnsupportedError (branches / decoupled changelog), LockTimeoutError,
        CorruptMetadataError (some reference cannot be read: nothing is deleted).
    """
    row, table = resolve_table(catalog, identifier)
    for directory in (BRANCH_DIR, CHANGELOG_DIR):
        if has_files_under(table, directory):
            raise UnsupportedError(
                f"{row.identifier} has a {directory}/ directory; its references are not tracked by "
                "paimon-meta, so orphan cleanup is refused (use Java's remove_orphan_files)",
                table=row.identifier,
            )
    report = OrphanReport(row.identifier, dry_run, older_than_seconds)
    listed = table.file_io.list_recursive(table.path)
    report.scanned = len(listed)
    progress(f"{row.identifier}: listed {len(listed)} files")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    audit = maintenance_run(
        catalog,
        row,
        MaintenanceOperation.REMOVE_ORPHAN_FILES,
        dry_run=dry_run,
        settings={
            "older_than_seconds": older_than_seconds,
            "listed": len(listed),
            **({"reason": reason} if reason else {}),
        },
        principal=principal,
    )
    with audit as run:
        with table_lock(catalog, row, "remove-orphan-files", progress=progress):
            if not dry_run:
                reconcile(catalog.registry, catalog.events, row, table.snapshot_manager)
            used = referenced_names(table) | pending_commit_files(catalog.events, row.table_id)
        for status in listed:
            verdict = classify_file(table, status, used)
            if verdict == "referenced":
                report.referenced += 1
            elif verdict == "candidate":
                age = (now - status.mtime_ms) / 1000.0
                if age < older_than_seconds:
                    report.too_young += 1
                else:
                    report.orphans.append(OrphanFile(status.path, status.size, round(age, 3)))
        progress(
            f"{row.identifier}: {len(report.orphans)} orphans ({report.orphan_bytes} bytes), "
            f"{report.too_young} unreferenced but younger than {older_than_seconds:.0f}s"
        )
        if not dry_run:
            _delete_orphans(catalog, row.table_id, table, report)
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "scanned": report.scanned,
                "referenced": report.referenced,
                "too_young": report.too_young,
                "orphans": len(report.orphans),
                "orphan_bytes": report.orphan_bytes,
                "deleted": len(report.deleted),
                "failed": len(report.failed),
                **refused_payload(report.refused),
            },
        )
    return report


def _delete_orphans(
    catalog: MetastoreCatalog, table_id: int, table: FileStoreTable, report: OrphanReport
) -> None:
    """Delete the orphans found, outside the table's lock (see the module docstring); a file named by a
    commit that went in flight since the decision is kept."""
    in_flight = pending_commit_files(catalog.events, table_id)
    # Only files listed under the table's root are candidates (classify_file); the guard also refuses what
    # the file system resolves elsewhere (a "." or ".." segment, a control character), so no listing
    # quirk of a store turns cleanup into a deletion outside.
    guard = path_guard(table)
    what = f"remove-orphan-files {report.table}"
    for orphan in report.orphans:
        if orphan.path.rsplit("/", 1)[-1] in in_flight:
            continue
        if not guard.allowed(orphan.path, report.refused, what=what):
            continue
        try:
            table.file_io.delete(orphan.path)
        except FileIOError:
            report.failed.append(orphan.path)
        else:
            report.deleted.append(orphan.path)


def classify_file(table: FileStoreTable, status: FileStatus, used: set[str]) -> str:
    """``ignored`` (never ours to delete), ``referenced`` or ``candidate``."""
    root = table.path.rstrip("/") + "/"
    if not status.path.startswith(root):
        return "ignored"
    parts = status.path[len(root) :].split("/")
    name = parts[-1]
    top = parts[0]
    if len(parts) == 1 or top in _NEVER_DIRS:
        return "ignored"
    if top == SNAPSHOT_DIR:
        if len(parts) == 2 and (
            name in (LATEST, EARLIEST)
            or (name.startswith(SNAPSHOT_PREFIX) and name[len(SNAPSHOT_PREFIX) :].isdigit())
        ):
            return "ignored"
        return "candidate" if len(parts) == 2 else "ignored"
    if top in _METADATA_DIRS or any(p.startswith(BUCKET_PREFIX) for p in parts[:-1]):
        return "referenced" if name in used else "candidate"
    return "ignored"


def referenced_names(table: FileStoreTable) -> set[str]:
    """Names of every file referenced by a snapshot on storage or a tag (Java matches by name too).

    Metadata of an older snapshot that an interrupted expiration already removed is skipped (as Java
    does: what such a snapshot still shares with newer ones is referenced by them); missing metadata of
    the latest snapshot or of a tag, or a file that cannot be decoded, raises."""
    sm = table.snapshot_manager
    complete = list(tag_snapshots(table))
    partial: list[Snapshot] = []
    ids = sm.list_snapshot_ids()
    for sid in ids:
        try:
            snap = sm.snapshot(sid)
        except FileNotFound:
            continue
        (complete if sid == ids[-1] else partial).append(snap)
    names: set[str] = set()
    manifests: dict[str, bool] = {}  # name -> must exist
    for snap, required in [*((s, True) for s in complete), *((s, False) for s in partial)]:
        md = read_metadata(table, snap, missing_ok=not required)
        names |= md.metadata_names()
        for meta in (*md.base, *md.delta, *md.changelog):
            manifests[meta.file_name] = manifests.get(meta.file_name, False) or required
    reader = table.manifest_reader
    for name, required in manifests.items():
        try:
            entries = reader.manifest(name)
        except FileNotFound:
            if required:
                raise
            continue
        for e in entries:
            names.add(e.file.file_name)
            names.update(e.file.extra_files)
    return names
