"""``paimon-meta verify``: a read-only consistency check (fsck) of a catalog or of one table.

It compares what the metastore says (registry rows, table pointers, the commit event log, lock rows) with
what storage holds (table directories, snapshot files, LATEST/EARLIEST hints, manifest lists, manifests,
index and statistics files, optionally data files), and names every disagreement as a :class:`Finding`
with a stable ``code``. It takes no lock, writes nothing to storage and nothing to the metastore: on a
live catalog a commit in flight can show as ``snapshots_beyond_pointer`` or a young pending commit (not
reported); run it again, or ``paimon-meta recover`` first.

Findings (docs/OPERATIONS.md describes each and what to do about it):

* registry against storage: ``table_directory_missing``, ``table_unreadable``, ``stray_directory``
  (a table directory of the warehouse layout that no registered table owns);
* event log against storage: ``snapshot_not_recorded`` (a snapshot up to the pointer with no event that
  published, recovered or adopted it), ``recorded_snapshot_missing`` (a snapshot the log recorded,
  between the earliest on storage and the pointer, whose file is gone), ``snapshots_beyond_pointer``;
* hints: ``latest_hint_invalid``, ``earliest_hint_invalid``;
* reachability: ``manifest_list_missing``, ``manifest_missing``, ``index_manifest_missing``,
  ``index_file_missing``, ``statistics_file_missing``, ``data_file_missing`` (``data_files=True``),
  ``metadata_unreadable`` (a file that exists but cannot be decoded);
* commits and locks: ``pending_commit_stale`` (prepared, unfinished, older than recovery's grace),
  ``lock_without_table``, ``lock_expired``;
* ``orphan_files``: files nothing references, older than ``orphan_age_seconds`` (an estimate of what
  ``remove-orphan-files`` would delete).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from paimon_meta.errors import CorruptMetadataError, FileNotFound, PaimonMetaError
from paimon_meta.io.base import FileStatus
from paimon_meta.metastore.events import LIVE_SNAPSHOT_SQL
from paimon_meta.metastore.registry import TableRow
from paimon_meta.model.manifest import FileKind, ManifestEntry, ManifestFileMeta
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops.common import Progress, db_now, quiet
from paimon_meta.ops.orphans import DEFAULT_OLDER_THAN_SECONDS, classify_file
from paimon_meta.ops.recovery import default_grace_seconds
from paimon_meta.ops.references import (
    BRANCH_DIR,
    CHANGELOG_DIR,
    FilePaths,
    pending_commit_files,
    tag_snapshots,
)
from paimon_meta.table.read.manifest_merge import merge_entries
from paimon_meta.table.table import FileStoreTable

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

ERROR = "error"
WARNING = "warning"
#: How many ids or paths a finding's message names (its ``details`` hold them all).
_SHOWN = 10

_RECORDED = text(
    "SELECT DISTINCT e.snapshot_id FROM paimon_commit_events e "  # noqa: S608 - constant SQL text
    "WHERE e.table_id = :table_id AND e.branch = 'main' AND e.snapshot_id IS NOT NULL "
    "AND e.event_type IN ('snapshot_published', 'external', 'recovered') "
    f"AND {LIVE_SNAPSHOT_SQL}"
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One disagreement: its ``code`` (stable, for scripts), ``severity`` (``error``: metastore and storage
    disagree or files are gone; ``warning``: work for recovery or cleanup), the table (None for catalog-wide
    findings), a sentence, and the ids/paths involved."""

    code: str
    severity: str
    table: str | None
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class VerifyReport:
    """What :func:`verify` checked and found. ``clean``: no finding."""

    scope: str
    data_files: bool
    orphan_age_seconds: float
    tables: int = 0
    skipped: list[str] = field(default_factory=list)
    snapshots: int = 0
    manifests: int = 0
    data_files_checked: int = 0
    files_listed: int = 0
    pending_in_flight: int = 0
    orphan_files: int = 0
    orphan_bytes: int = 0
    locks: int = 0
    elapsed_seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings

    def add(self, code: str, severity: str, table: str | None, message: str, **details: Any) -> None:
        self.findings.append(Finding(code, severity, table, message, details))

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "clean": self.clean,
            "errors": sum(1 for f in self.findings if f.severity == ERROR),
            "warnings": sum(1 for f in self.findings if f.severity == WARNING),
            "tables": self.tables,
            "skipped": list(self.skipped),
            "snapshots": self.snapshots,
            "manifests": self.manifests,
            "data_files": self.data_files,
            "data_files_checked": self.data_files_checked,
            "files_listed": self.files_listed,
            "pending_in_flight": self.pending_in_flight,
            "orphan_age_seconds": self.orphan_age_seconds,
            "orphan_files": self.orphan_files,
            "orphan_bytes": self.orphan_bytes,
            "locks": self.locks,
            "elapsed_seconds": self.elapsed_seconds,
            "findings": [
                {"code": f.code, "severity": f.severity, "table": f.table, "message": f.message, **f.details}
                for f in self.findings
            ],
        }


def verify(
    catalog: MetastoreCatalog,
    table: str | None = None,
    *,
    data_files: bool = False,
    orphan_age_seconds: float = DEFAULT_OLDER_THAN_SECONDS,
    pending_grace_seconds: float | None = None,
    progress: Progress = quiet,
) -> VerifyReport:
    """Check the whole catalog, or only ``table`` (``db.table``), without changing anything.

    ``pending_grace_seconds``: a prepared commit idle longer is ``pending_commit_stale`` (default:
    recovery's grace, after which ``paimon-meta recover`` would resolve it).

    Raises:
        TableNotFoundError / ValidationError: ``table`` is not a registered table's name.
    """
    started = time.monotonic()
    report = VerifyReport(table or "catalog", data_files, orphan_age_seconds)
    rows = _registered_rows(catalog, table)
    listings: dict[str, list[FileStatus]] | None = None
    if table is None:
        listings = _warehouse_listing(catalog, rows, report)
    _check_locks(catalog, rows, report, whole_catalog=table is None)
    grace = (
        default_grace_seconds(catalog.lock_settings)
        if pending_grace_seconds is None
        else pending_grace_seconds
    )
    now = db_now(catalog.engine)
    for i, row in enumerate(rows, 1):
        if row.table_schema is not None:  # format/object/Iceberg: metadata only, no Paimon layout
            report.skipped.append(row.identifier)
            continue
        location = catalog.location_of(row).rstrip("/")
        listed = None if listings is None else listings.get(location)
        _TableCheck(catalog, row, location, listed, report).run(grace, now.timestamp())
        report.tables += 1
        if i % 100 == 0:
            progress(f"verify: {i}/{len(rows)} tables, {len(report.findings)} findings")
    report.elapsed_seconds = round(time.monotonic() - started, 3)
    return report


def _registered_rows(catalog: MetastoreCatalog, table: str | None) -> list[TableRow]:
    if table is not None:
        from paimon_meta.model.identifier import split_identifier

        db, name = split_identifier(table)
        return [catalog.registry.get_table_row(db, name)]
    return [
        row
        for db in catalog.registry.list_databases()
        for row in sorted(catalog.registry.list_table_rows(db), key=lambda r: r.name)
    ]


def _warehouse_listing(
    catalog: MetastoreCatalog, rows: list[TableRow], report: VerifyReport
) -> dict[str, list[FileStatus]]:
    """One listing of the warehouse, grouped by table directory (``<warehouse>/<db>.db/<table>``);
    directories no registered table owns are reported as ``stray_directory``."""
    warehouse = catalog.warehouse.rstrip("/")
    owned = {catalog.location_of(r).rstrip("/") for r in rows}
    groups: dict[str, list[FileStatus]] = defaultdict(list)
    for status in catalog.file_io.list_recursive(warehouse):
        parts = status.path[len(warehouse) + 1 :].split("/")
        if status.path.startswith(warehouse + "/") and len(parts) >= 3 and parts[0].endswith(".db"):
            groups[f"{warehouse}/{parts[0]}/{parts[1]}"].append(status)
    for directory in sorted(set(groups) - owned):
        files = groups.pop(directory)
        report.add(
            "stray_directory",
            WARNING,
            None,
            f"{directory} holds {len(files)} files but no registered table lives there (a table dropped "
            "without purge, a crashed create, or files copied in): register it or delete it",
            path=directory,
            files=len(files),
            bytes=sum(f.size for f in files),
        )
    return groups


def _check_locks(
    catalog: MetastoreCatalog, rows: list[TableRow], report: VerifyReport, *, whole_catalog: bool
) -> None:
    registry = catalog.registry
    expected = {registry.lock_id(r.database, r.name): r.identifier for r in rows}
    prefix = registry.catalog_key + "."
    for info in catalog.lock.list_locks():
        if not whole_catalog and info.lock_id not in expected:
            continue
        report.locks += 1
        table = expected.get(info.lock_id)
        holder = info.owner or "a Java writer"
        if table is None and info.lock_id.startswith(prefix):
            report.add(
                "lock_without_table",
                WARNING,
                None,
                f"lock {info.lock_id} (held by {holder}) names no registered table",
                lock_id=info.lock_id,
                owner=info.owner,
            )
        if info.stale:
            report.add(
                "lock_expired",
                WARNING,
                table,
                f"lock {info.lock_id} (held by {holder}) expired "
                f"{info.age_seconds - info.expire_time_seconds:.0f}s ago and was never released: "
                "its holder died (`paimon-meta locks release` removes it; an acquirer takes it over)",
                lock_id=info.lock_id,
                owner=info.owner,
                age_seconds=round(info.age_seconds, 3),
            )


def _ids(values: Iterable[Any]) -> str:
    shown = list(values)
    text_ = ", ".join(str(v) for v in shown[:_SHOWN])
    return text_ + (f" and {len(shown) - _SHOWN} more" if len(shown) > _SHOWN else "")


class _TableCheck:
    """The checks of one table (``run``), adding to the shared report."""

    def __init__(
        self,
        catalog: MetastoreCatalog,
        row: TableRow,
        location: str,
        listed: list[FileStatus] | None,
        report: VerifyReport,
    ) -> None:
        self.catalog = catalog
        self.row = row
        self.name = row.identifier
        self.location = location
        self.listed = listed
        self.report = report

    def add(self, code: str, severity: str, message: str, **details: Any) -> None:
        self.report.add(code, severity, self.name, message, **details)

    def run(self, grace_seconds: float, now_seconds: float) -> None:
        file_io = self.catalog.table_file_io(self.location)
        listed = file_io.list_recursive(self.location) if self.listed is None else self.listed
        self.report.files_listed += len(listed)
        if not listed:
            self.add(
                "table_directory_missing",
                ERROR,
                f"{self.location} holds no files: the table is registered but its directory is gone "
                "(restore it from backup, or drop the table)",
                path=self.location,
            )
            return
        try:
            table = FileStoreTable.load(file_io, self.location)
        except PaimonMetaError as e:
            self.add(
                "table_unreadable",
                ERROR,
                f"{self.location} cannot be opened as a Paimon table: {e}",
                path=self.location,
                error=type(e).__name__,
            )
            return
        self.table = table
        self.existing = {s.path: s for s in listed}
        snapshots = self._check_snapshots()
        referenced = self._check_reachable(snapshots)
        pending_files = self._check_pending(grace_seconds, now_seconds)
        # A branch's or a decoupled changelog's snapshots reference the table's manifests and data
        # files too: without following them an estimate would count those as orphans
        # (remove-orphan-files refuses such tables for the same reason).
        elsewhere = any(
            s.path.startswith((f"{self.location}/{BRANCH_DIR}/", f"{self.location}/{CHANGELOG_DIR}/"))
            for s in listed
        )
        if referenced is not None and pending_files is not None and not elsewhere:
            self._estimate_orphans(listed, referenced | pending_files)

    # -- snapshots, the event log, the pointer and the hints ---------------------------------------

    def _check_snapshots(self) -> list[Snapshot]:
        sm = self.table.snapshot_manager
        on_storage = sm.list_snapshot_ids()
        self.report.snapshots += len(on_storage)
        with self.catalog.engine.connect() as conn:
            recorded = {r[0] for r in conn.execute(_RECORDED, {"table_id": self.row.table_id})}
        pointer = self.row.latest_snapshot_id
        present = set(on_storage)
        if pointer is not None:
            low = on_storage[0] if on_storage else pointer
            unrecorded = [s for s in on_storage if s <= pointer and s not in recorded]
            missing = [s for s in sorted(recorded) if low <= s <= pointer and s not in present]
            if unrecorded:
                self.add(
                    "snapshot_not_recorded",
                    ERROR,
                    f"snapshots {_ids(unrecorded)} are on storage, up to the table pointer {pointer}, but no "
                    "event in the log published, recovered or adopted them",
                    snapshot_ids=unrecorded,
                )
            if missing:
                self.add(
                    "recorded_snapshot_missing",
                    ERROR,
                    f"snapshots {_ids(missing)} were recorded in the event log (pointer {pointer}) but their "
                    "files are gone from storage",
                    snapshot_ids=missing,
                )
        beyond = [s for s in on_storage if pointer is None or s > pointer]
        if beyond:
            self.add(
                "snapshots_beyond_pointer",
                WARNING,
                f"snapshots {_ids(beyond)} are on storage beyond the table pointer {pointer}: a commit in "
                "flight, or one that died after writing its snapshot (`paimon-meta recover` records them)",
                snapshot_ids=beyond,
                pointer=pointer,
            )
        self._check_hints(on_storage)
        snapshots = []
        for sid in on_storage:
            try:
                snapshots.append(sm.snapshot(sid))
            except FileNotFound:  # expired between the listing and the read
                continue
            except CorruptMetadataError as e:
                self._unreadable(sm.snapshot_path(sid), e)
        return snapshots

    def _check_hints(self, on_storage: list[int]) -> None:
        paths = self.table.paths
        for hint, path in (("LATEST", paths.latest_hint_path), ("EARLIEST", paths.earliest_hint_path)):
            status = self.existing.get(path)
            if status is None:
                continue  # a hint is optional: readers list the directory without one
            try:
                value: int | None = int(self.table.file_io.read(path).decode("utf-8").strip())
            except (ValueError, UnicodeDecodeError, FileNotFound):
                value = None
            code = f"{hint.lower()}_hint_invalid"
            if value is None or value not in on_storage:
                # LATEST may lag (it is written after the snapshot), never name a missing snapshot;
                # EARLIEST may name one an interrupted expiration deleted, which readers tolerate too,
                # but then it no longer says where the table starts.
                self.add(
                    code,
                    ERROR if hint == "LATEST" else WARNING,
                    f"the {hint} hint ({path}) says {value if value is not None else 'nothing readable'}, "
                    f"which is not a snapshot on storage "
                    f"({'none' if not on_storage else f'{on_storage[0]}..{on_storage[-1]}'})",
                    path=path,
                    hint=value,
                )
            elif hint == "EARLIEST" and value != on_storage[0]:
                self.add(
                    code,
                    WARNING,
                    f"the EARLIEST hint says {value} but snapshot {on_storage[0]} is on storage (an "
                    "expiration stopped before deleting it)",
                    path=path,
                    hint=value,
                )

    # -- reachability of manifest lists, manifests, index, statistics and data files ---------------

    def _check_reachable(self, snapshots: list[Snapshot]) -> set[str] | None:
        """Check every file the snapshots and tags reference; the names referenced (for the orphan
        estimate), or None when some reference could not be read (no estimate then)."""
        try:
            tags = tag_snapshots(self.table)
        except CorruptMetadataError as e:
            self._unreadable(str(e.fields.get("path", "tag/")), e)
            tags = []
        reader = self.table.manifest_reader
        paths = FilePaths(self.table)
        names: set[str] = set()
        complete = True
        lists: dict[str, tuple[ManifestFileMeta, ...] | None] = {}
        manifests: dict[str, tuple[ManifestEntry, ...] | None] = {}
        missing: dict[tuple[str, str], list[int]] = defaultdict(list)
        data_checked: set[str] = set()
        corrupt: set[str] = set()  # named once as metadata_unreadable, not as missing too

        def read_list(name: str, sid: int) -> tuple[ManifestFileMeta, ...] | None:
            if name not in lists:
                try:
                    lists[name] = reader.manifest_list(name)
                except FileNotFound:
                    lists[name] = None
                except CorruptMetadataError as e:
                    self._unreadable(paths.manifest(name), e)
                    lists[name] = None
                    corrupt.add(name)
            if lists[name] is None and name not in corrupt:
                missing[("manifest_list_missing", paths.manifest(name))].append(sid)
            return lists[name]

        def read_manifest(meta: ManifestFileMeta, sid: int) -> tuple[ManifestEntry, ...] | None:
            name = meta.file_name
            if name not in manifests:
                try:
                    manifests[name] = reader.manifest(name)
                except FileNotFound:
                    manifests[name] = None
                except CorruptMetadataError as e:
                    self._unreadable(paths.manifest(name), e)
                    manifests[name] = None
                    corrupt.add(name)
            if manifests[name] is None and name not in corrupt:
                missing[("manifest_missing", paths.manifest(name))].append(sid)
            return manifests[name]

        for snap in [*snapshots, *tags]:
            sid = snap.id
            groups: dict[str, list[ManifestEntry]] = {}
            for kind, list_name in (
                ("data", snap.base_manifest_list),
                ("delta", snap.delta_manifest_list),
                ("changelog", snap.changelog_manifest_list),
            ):
                if not list_name:
                    continue
                names.add(list_name)
                metas = read_list(list_name, sid)
                if metas is None:
                    complete = False
                    continue
                entries: list[ManifestEntry] = []
                for meta in metas:
                    names.add(meta.file_name)
                    got = read_manifest(meta, sid)
                    if got is None:
                        complete = False
                        continue
                    entries.extend(got)
                    for entry in got:
                        names.add(entry.file.file_name)
                        names.update(entry.file.extra_files)
                groups[kind] = entries
            if snap.index_manifest:
                names.add(snap.index_manifest)
                try:
                    index_entries = reader.index_manifest(snap.index_manifest)
                except FileNotFound:
                    missing[("index_manifest_missing", paths.manifest(snap.index_manifest))].append(sid)
                    complete = False
                except CorruptMetadataError as e:
                    self._unreadable(paths.manifest(snap.index_manifest), e)
                    complete = False
                else:
                    for ie in index_entries:
                        names.add(ie.index_file.file_name)
                        path = paths.index_file(ie.index_file)
                        if not self._exists(path):
                            missing[("index_file_missing", path)].append(sid)
            if snap.statistics:
                names.add(snap.statistics)
                path = paths.statistics(snap.statistics)
                if not self._exists(path):
                    missing[("statistics_file_missing", path)].append(sid)
            if self.report.data_files and "data" in groups and "delta" in groups:
                self._check_data_files(snap, groups["data"] + groups["delta"], paths, missing, data_checked)
        self.report.manifests += len(manifests)
        self.report.data_files_checked += len(data_checked)
        for (code, path), sids in sorted(missing.items()):
            self.add(
                code,
                ERROR,
                f"{path} is referenced by snapshot(s) {_ids(sorted(set(sids)))} but is not on storage",
                path=path,
                snapshot_ids=sorted(set(sids)),
            )
        return names if complete else None

    def _check_data_files(
        self,
        snap: Snapshot,
        entries: list[ManifestEntry],
        paths: FilePaths,
        missing: dict[tuple[str, str], list[int]],
        checked: set[str],
    ) -> None:
        try:
            live = [e for e in merge_entries(entries).values() if e.kind is FileKind.ADD]
        except PaimonMetaError as e:
            self._unreadable(f"{self.location} snapshot {snap.id}", e)
            return
        for entry in live:
            for path in paths.data_file(entry):
                if path in checked:
                    continue
                checked.add(path)
                if not self._exists(path):
                    missing[("data_file_missing", path)].append(snap.id)

    def _exists(self, path: str) -> bool:
        if path in self.existing:
            return True
        if path.startswith(self.location + "/"):
            return False  # the listing covers the table directory
        return self.table.file_io.exists(path)  # an external data path

    def _unreadable(self, path: str, error: Exception) -> None:
        self.add(
            "metadata_unreadable",
            ERROR,
            f"{path} exists but cannot be decoded: {error}",
            path=path,
            error=type(error).__name__,
        )

    # -- pending commits and orphans ----------------------------------------------------------------

    def _check_pending(self, grace_seconds: float, now_seconds: float) -> set[str] | None:
        events = self.catalog.events
        stale = []
        for pending in events.pending_commits(self.row.table_id):
            age = now_seconds - pending.last_event_at.timestamp()
            if age > grace_seconds:
                stale.append((str(pending.prepared.ref.commit_id), round(age, 1)))
            else:
                self.report.pending_in_flight += 1
        if stale:
            self.add(
                "pending_commit_stale",
                WARNING,
                f"{len(stale)} commit(s) prepared but never finished, idle longer than recovery's grace "
                f"({grace_seconds:.0f}s): {_ids(c for c, _ in stale)} (`paimon-meta recover {self.name}`)",
                commit_ids=[c for c, _ in stale],
                idle_seconds=[a for _, a in stale],
            )
        try:
            return pending_commit_files(events, self.row.table_id)
        except CorruptMetadataError as e:
            self._unreadable(f"pending commit {e.fields.get('commit_id')}", e)
            return None

    def _estimate_orphans(self, listed: list[FileStatus], used: set[str]) -> None:
        threshold = self.report.orphan_age_seconds
        now_seconds = time.time()  # files' modification times are this host's clock
        orphans = [
            s
            for s in listed
            if classify_file(self.table, s, used) == "candidate"
            and now_seconds - s.mtime_ms / 1000.0 >= threshold
        ]
        if not orphans:
            return
        size = sum(s.size for s in orphans)
        self.report.orphan_files += len(orphans)
        self.report.orphan_bytes += size
        self.add(
            "orphan_files",
            WARNING,
            f"{len(orphans)} files ({size} bytes) older than {timedelta(seconds=threshold)} are referenced "
            "by no snapshot, tag or pending commit "
            f"(`paimon-meta remove-orphan-files {self.name} --dry-run`)",
            files=len(orphans),
            bytes=size,
            paths=[s.path for s in orphans[:_SHOWN]],
        )
