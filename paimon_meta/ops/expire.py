"""Snapshot expiration (Java ``ExpireSnapshotsImpl`` + ``SnapshotDeletion``).

Which snapshots expire follows Java exactly: keep at least ``snapshot.num-retained.min`` (10) and at most
``snapshot.num-retained.max`` (unbounded) snapshots; between the two, a snapshot expires only once the
*next* snapshot is older than ``snapshot.time-retained`` (1 h); at most ``snapshot.expire.limit`` (50)
per run; never a snapshot a consumer (``consumer/consumer-<id>``) still has to read. The snapshots
``[earliest, end)`` expire and ``end`` becomes the earliest.

What is deleted:

1. data files DELETEd by the deltas of snapshots ``(earliest, end]`` (an ADD of the same file in the same
   delta cancels it: an upgrade keeps the file) and changelog files ADDed by expired snapshots;
2. manifest lists, manifests, index manifests, index files and statistics of expired snapshots;
3. the expired snapshot files and the ``EARLIEST`` hint.

Java deletes in that order, so an interrupted run is finished by the next one. Here 3 comes first: under
the table's metastore lock the run decides what expires and what the files of 1 and 2 are, and publishes
the change (3); it releases the lock and only then deletes the files of 1 and 2, so a writer waits for one
decision and publish, never for file deletions. A run interrupted after 3 leaves the files of 1 and 2 as
orphans, which the orphan scan deletes once they are older than its window (disk space, never data).

Every candidate is checked against a keep-set computed from the retained snapshots, the tags and every
snapshot and tag of the table's branches (which read the table's own manifests and data files): files live
in the first retained snapshot, files added by the deltas and changelogs of later ones, every metadata
file any of them references, and files named by commits still in flight. Java trusts the manifest
invariants alone; the keep-set makes a bug or a foreign writer cost disk space instead of data.

Why the files of 1 and 2 may be deleted after the lock is released: they are referenced by no retained
snapshot, tag or branch, and by no commit in flight, at the decision; the expired snapshots are gone before
the lock is released, so every later commit builds on a retained snapshot (whose files are kept), adds new
files of its own, and cannot delete or upgrade a file no longer live (its conflict check refuses); a tag or
branch can only be made of a snapshot that still exists. Commits in flight are read again before deleting,
and a file one of them names is kept.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_meta.commit.metastore.guard import reconcile
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import FileIOError, FileNotFound, UnsupportedError, ValidationError
from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops.common import Progress, maintenance_run, quiet, resolve_table, table_lock
from paimon_meta.ops.references import (
    DataKey,
    FilePaths,
    SnapshotMetadata,
    branch_snapshots,
    consumer_min_next_snapshot,
    data_key,
    live_entries,
    pending_commit_files,
    read_entries,
    read_metadata,
    tag_snapshots,
)
from paimon_meta.ops.tags import expire_tags
from paimon_meta.table.file_guard import path_guard, refused_payload
from paimon_meta.table.table import FileStoreTable

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

CHANGELOG_NUM_RETAINED_MIN = "changelog.num-retained.min"
CHANGELOG_NUM_RETAINED_MAX = "changelog.num-retained.max"
CHANGELOG_TIME_RETAINED = "changelog.time-retained"


@dataclass(frozen=True, slots=True)
class ExpireConfig:
    """Java's ``ExpireConfig``; :meth:`from_table` reads the table's options."""

    retain_min: int = 10
    retain_max: int | None = None
    time_retained_ms: int = 3_600_000
    max_deletes: int = 50

    @classmethod
    def from_table(cls, table: FileStoreTable, **overrides: Any) -> ExpireConfig:
        opts = table.options
        values: dict[str, Any] = {
            "retain_min": opts.snapshot_num_retained_min,
            "retain_max": opts.snapshot_num_retained_max,
            "time_retained_ms": opts.snapshot_time_retained_ms,
            "max_deletes": opts.snapshot_expire_limit,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def validate(self) -> None:
        if self.retain_min < 1:
            raise ValidationError(f"snapshot.num-retained.min must be >= 1, got {self.retain_min}")
        if self.retain_max is not None and self.retain_max < self.retain_min:
            raise ValidationError(
                f"snapshot.num-retained.max ({self.retain_max}) must not be less than "
                f"snapshot.num-retained.min ({self.retain_min})"
            )
        if self.max_deletes < 1:
            raise ValidationError(f"snapshot.expire.limit must be >= 1, got {self.max_deletes}")
        if self.time_retained_ms < 0:
            raise ValidationError("snapshot.time-retained must be >= 0")


@dataclass(slots=True)
class ExpireReport:
    """What one expiration run did (or, dry run, would do)."""

    table: str
    dry_run: bool
    config: ExpireConfig
    earliest_before: int | None = None
    latest: int | None = None
    expired: list[int] = field(default_factory=list)
    earliest_after: int | None = None
    deleted_data_files: list[str] = field(default_factory=list)
    deleted_metadata_files: list[str] = field(default_factory=list)
    kept_referenced: int = 0
    #: candidates not deleted because they are not the table's files (table.file_guard)
    refused_paths: list[str] = field(default_factory=list)
    #: tags deleted because their ``tagTimeRetained`` passed (Java's ``TagTimeExpire``)
    expired_tags: list[str] = field(default_factory=list)
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["config"] = asdict(self.config)
        return out


def expire_snapshots(
    catalog: MetastoreCatalog,
    identifier: str,
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    time_retained_ms: int | None = None,
    max_deletes: int | None = None,
    dry_run: bool = False,
    now_ms: int | None = None,
    progress: Progress = quiet,
    principal: str | None = None,
    reason: str | None = None,
) -> ExpireReport:
    """Expire old snapshots of a catalog table (see the module docstring); arguments left None come
    from the table's options. ``dry_run`` decides under the lock but deletes nothing.

    Raises:
        TableNotFoundError, ValidationError (bad retention), UnsupportedError (decoupled changelog),
        LockTimeoutError, CorruptMetadataError (a retained snapshot's metadata is unreadable: nothing
        is deleted).
    """
    row, table = resolve_table(catalog, identifier)
    config = ExpireConfig.from_table(
        table,
        retain_min=retain_min,
        retain_max=retain_max,
        time_retained_ms=time_retained_ms,
        max_deletes=max_deletes,
    )
    config.validate()
    _refuse_decoupled_changelog(table)
    report = ExpireReport(row.identifier, dry_run, config)
    audit = maintenance_run(
        catalog,
        row,
        MaintenanceOperation.EXPIRE_SNAPSHOTS,
        dry_run=dry_run,
        settings={**asdict(config), **({"reason": reason} if reason else {})},
        principal=principal,
    )
    with audit as run:
        with table_lock(catalog, row, "expire-snapshots", progress=progress):
            if not dry_run:
                # Record what is on storage before any of it can disappear (the event log equals storage).
                reconcile(catalog.registry, catalog.events, row, table.snapshot_manager)
            # Tags past their retention first, as Java's commit does before expiring snapshots: the
            # snapshots only they kept may then expire in this run.
            report.expired_tags = expire_tags(table, now_ms=now_ms, dry_run=dry_run)
            keep_files = pending_commit_files(catalog.events, row.table_id)
            _expire(table, config, report, keep_files, now_ms=now_ms, progress=progress)
        if not dry_run and (report.deleted_data_files or report.deleted_metadata_files):
            # Outside the lock (a writer waits for the decision and the publish only): these files are
            # referenced by no snapshot left, tag, branch or commit in flight, and no later commit can
            # reference them (see the module docstring). A commit that started meanwhile and names one is
            # respected all the same.
            in_flight = pending_commit_files(catalog.events, row.table_id)
            report.deleted_data_files = _unnamed(report.deleted_data_files, in_flight)
            progress(
                f"{report.table}: deleting {len(report.deleted_data_files)} data files and "
                f"{len(report.deleted_metadata_files)} metadata files"
            )
            _delete_all(table, report.deleted_data_files)
            _delete_all(table, report.deleted_metadata_files)
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "earliest_before": report.earliest_before,
                "earliest_after": report.earliest_after,
                "latest": report.latest,
                "expired": len(report.expired),
                "expired_first": report.expired[0] if report.expired else None,
                "expired_last": report.expired[-1] if report.expired else None,
                "deleted_data_files": len(report.deleted_data_files),
                "deleted_metadata_files": len(report.deleted_metadata_files),
                "kept_referenced": report.kept_referenced,
                "expired_tags": report.expired_tags,
                **refused_payload(report.refused_paths),
                "note": report.note,
            },
        )
    return report


def _refuse_decoupled_changelog(table: FileStoreTable) -> None:
    opts = table.options
    if any(
        opts.get(k) for k in (CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX, CHANGELOG_TIME_RETAINED)
    ):
        raise UnsupportedError(
            "tables with a decoupled changelog lifecycle (changelog.num-retained.*, changelog.time-retained) "
            "are not expired by paimon-meta; use Java's expire_snapshots",
            table=table.path,
        )


def plan_end(
    table: FileStoreTable, config: ExpireConfig, *, now_ms: int | None = None
) -> tuple[int, int, int] | None:
    """(earliest, end, latest): snapshots ``[earliest, end)`` expire. None for a table without snapshots.
    Java ``ExpireSnapshotsImpl.expire``."""
    sm = table.snapshot_manager
    latest = sm.latest_snapshot_id()
    earliest = sm.earliest_snapshot_id()
    if latest is None or earliest is None:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    older_than = now - config.time_retained_ms
    retain_max = config.retain_max if config.retain_max is not None else 2**31 - 1
    lowest = max(latest - retain_max + 1, earliest)
    max_exclusive = latest - config.retain_min + 1
    consumer = consumer_min_next_snapshot(table)
    if consumer is not None:
        max_exclusive = min(max_exclusive, consumer)
    max_exclusive = min(max_exclusive, earliest + config.max_deletes)
    for sid in range(lowest, max_exclusive):
        # A snapshot expires only once its successor has been alive longer than time-retained.
        try:
            successor = sm.snapshot(sid + 1)
        except FileNotFound:
            continue
        if older_than <= successor.time_millis:
            return earliest, sid, latest
    return earliest, max_exclusive, latest


def _expire(
    table: FileStoreTable,
    config: ExpireConfig,
    report: ExpireReport,
    keep_files: set[str],
    *,
    now_ms: int | None,
    progress: Progress,
) -> None:
    sm = table.snapshot_manager
    planned = plan_end(table, config, now_ms=now_ms)
    if planned is None:
        report.note = "the table has no snapshots"
        return
    earliest, end, latest = planned
    report.earliest_before, report.latest, report.earliest_after = earliest, latest, earliest
    if end <= earliest:
        report.note = "nothing to expire"
        if not report.dry_run and not sm.file_io.exists(sm.paths.earliest_hint_path):
            sm.commit_earliest_hint(earliest)
        return
    if not sm.snapshot_exists(end):
        report.note = f"snapshot {end} (the first to keep) is missing; nothing expired"
        return
    expiring = [sm.snapshot(sid) for sid in range(earliest, end) if sm.snapshot_exists(sid)]
    retained = [sm.snapshot(sid) for sid in range(end, latest + 1) if sm.snapshot_exists(sid)]
    progress(f"{report.table}: expiring snapshots {earliest}..{end - 1}, keeping {end}..{latest}")
    # a branch's snapshots and tags read the table's own manifests and data files: kept like main's tags
    keep = _KeepSet.build(table, retained, [*tag_snapshots(table), *branch_snapshots(table)], keep_files)
    paths = FilePaths(table)

    data = _data_candidates(table, [*expiring[1:], retained[0]], expiring, paths)
    metadata = _metadata_candidates(table, expiring, paths)
    unused_data = {key: names for key, names in data.items() if not keep.has_data(key, names)}
    doomed_data = [p for names in unused_data.values() for p in names]
    doomed_meta = [path for name, path in metadata.items() if name not in keep.metadata]
    report.kept_referenced = len(data) - len(unused_data) + len(metadata) - len(doomed_meta)
    # Manifests name files by name and external path: one naming another table's file (or any file
    # outside this table's root and external roots) is refused, never deleted; the rest expires.
    guard = path_guard(table)
    what = f"expire-snapshots {report.table}"
    doomed_data = [p for p in doomed_data if guard.allowed(p, report.refused_paths, what=what)]
    doomed_meta = [p for p in doomed_meta if guard.allowed(p, report.refused_paths, what=what)]
    report.expired = [s.id for s in expiring]
    report.earliest_after = end
    report.deleted_data_files = sorted(doomed_data)
    report.deleted_metadata_files = sorted(doomed_meta)
    if report.dry_run:
        return
    # The publish: the expired snapshots leave the table; their files are deleted after the lock.
    for snap in expiring:
        sm.file_io.delete(sm.snapshot_path(snap.id))
    sm.commit_earliest_hint(end)


def _unnamed(paths: list[str], names: set[str]) -> list[str]:
    return [p for p in paths if p.rsplit("/", 1)[-1] not in names]


class _KeepSet:
    """Everything the retained snapshots, the tags and in-flight commits still reference."""

    def __init__(self) -> None:
        self.data: set[DataKey] = set()
        self.names: set[str] = set()  # data/extra/index file names named by in-flight commits
        self.metadata: set[str] = set()

    @classmethod
    def build(
        cls, table: FileStoreTable, retained: list[Snapshot], tags: list[Snapshot], in_flight: set[str]
    ) -> _KeepSet:
        keep = cls()
        keep.names |= in_flight
        # Reading errors propagate: never delete on a partial view of what is referenced.
        first = read_metadata(table, retained[0], missing_ok=False)
        keep._add_live(table, first)
        for snap in retained[1:]:
            md = read_metadata(table, snap, missing_ok=False)
            keep.metadata |= md.metadata_names()
            for e in read_entries(table, md.delta, missing_ok=False, missing=md.missing):
                if e.kind is FileKind.ADD:
                    keep.data.add(data_key(e))
            keep._add_changelog(table, md)
        for tag in tags:
            keep._add_live(table, read_metadata(table, tag, missing_ok=False))
        return keep

    def _add_live(self, table: FileStoreTable, md: SnapshotMetadata) -> None:
        self.metadata |= md.metadata_names()
        self.data.update(data_key(e) for e in live_entries(table, md))
        self._add_changelog(table, md)

    def _add_changelog(self, table: FileStoreTable, md: SnapshotMetadata) -> None:
        for e in read_entries(table, md.changelog, missing_ok=False, missing=md.missing):
            self.data.add(data_key(e))

    def has_data(self, key: DataKey, paths: list[str]) -> bool:
        return key in self.data or any(p.rsplit("/", 1)[-1] in self.names for p in paths)


def _data_candidates(
    table: FileStoreTable, delta_snapshots: list[Snapshot], expiring: list[Snapshot], paths: FilePaths
) -> dict[DataKey, list[str]]:
    """Data files deleted by the deltas of ``(earliest, end]`` and changelog files of expired snapshots
    (Java ``planDeletedInDeltaManifest`` / ``planAddedInChangelogManifest``); missing metadata is
    skipped: an interrupted run already deleted it."""
    out: dict[DataKey, list[str]] = {}
    for snap in delta_snapshots:
        md = read_metadata(table, snap, missing_ok=True)
        in_delta: dict[DataKey, ManifestEntry] = {}
        for e in read_entries(table, md.delta, missing_ok=True, missing=md.missing):
            if e.kind is FileKind.ADD:
                in_delta.pop(data_key(e), None)  # an upgrade re-adds the file it deletes
            else:
                in_delta[data_key(e)] = e
        for key, e in in_delta.items():
            out[key] = paths.data_file(e)
    for snap in expiring:
        md = read_metadata(table, snap, missing_ok=True)
        for e in read_entries(table, md.changelog, missing_ok=True, missing=md.missing):
            if e.kind is FileKind.ADD:
                out[data_key(e)] = paths.data_file(e)
    return out


def _metadata_candidates(table: FileStoreTable, expiring: list[Snapshot], paths: FilePaths) -> dict[str, str]:
    """name -> path of every metadata file of the expired snapshots (Java ``planManifestsCleaner``)."""
    out: dict[str, str] = {}
    for snap in expiring:
        md = read_metadata(table, snap, missing_ok=True)
        for name in md.list_names:
            out[name] = paths.manifest(name)
        for meta in (*md.base, *md.delta, *md.changelog):
            out[meta.file_name] = paths.manifest(meta.file_name)
        if snap.index_manifest:
            out[snap.index_manifest] = paths.manifest(snap.index_manifest)
        for entry in md.index_entries:
            out[entry.index_file.file_name] = paths.index_file(entry.index_file)
        if snap.statistics:
            out[snap.statistics] = paths.statistics(snap.statistics)
    return out


def _delete_all(table: FileStoreTable, paths: list[str]) -> None:
    for path in paths:
        try:
            table.file_io.delete(path)
        except FileIOError:
            # Leftovers are orphans: remove-orphan-files deletes them later.
            continue
