"""Archive then drop: the commit log's partitions past every catalog's retention.

For each live partition of ``paimon_commit_events`` (oldest first) and each catalog with rows in it whose
retention (``paimon-meta.events.retention``) the partition's end is older than:

1. **write**: stream that catalog's rows (keyset by ``event_id``, bounded batches) into data files of its
   ``system.commit_log`` (``archive.table``), one Paimon partition per event partition;
2. **commit** them through this service's own commit path (the catalog's metastore-guarded commit, as
   any writer) as commit user :data:`ARCHIVER_USER` with the partition's identifier
   (:func:`commit_identifier`);
3. **mark** the partition archived for that catalog (``mark_archived``, with the archive's snapshot id);

and once every catalog with rows in a partition is marked, 4. **drop** it.

Invariant (exactly once): every event of a dropped partition is in its catalog's archive exactly once.
A crash between any two steps leaves everything consistent and the next run converges:

* after 1: the files are referenced by nothing (orphans, removed by orphan cleanup); the re-run writes
  the rows again and commits them;
* after 2: the re-run finds the snapshot of (:data:`ARCHIVER_USER`, identifier) on storage (a walk back
  from the latest snapshot, as Java's ``latestSnapshotOfUser``; the archive's snapshots, not the event
  log, decide, so this holds after the archive's own commit events were archived and dropped) and only
  marks; two archivers racing (a lease lost mid-run) both commit the same identifier and the commit
  path's exactly-once returns the first one's snapshot to the second (``deduplicated``), whose files are
  then deleted (definitely unreferenced);
* after 3: the mark is idempotent; nothing is written again;
* the drop is refused by the event log unless every catalog with rows in the partition is marked.

A catalog's partitions are archived oldest first, and a catalog that failed on one partition is not
archived further in that run, so its identifiers grow as Java's ``filterCommitted`` expects of a commit
user (the walk above does not rely on it).

A partition is dropped only once **every** catalog with rows in it is past its retention and archived: a
catalog with a shorter retention is archived on time, but its live rows stay until the others' are due;
a catalog with no retention (the option absent), or rows of a catalog key no catalog of the metastore
has, keep the partition forever. Events of purged tables (the log attributes them to
:data:`PURGED_CATALOG`) go into the default catalog's archive, with its retention.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from paimon_meta.archive.store import EventPartitionLike, EventPartitionStore
from paimon_meta.archive.table import ensure_archive_table, to_arrow
from paimon_meta.errors import (
    CommitConflictError,
    CommitFailedError,
    PaimonMetaError,
    ValidationError,
)
from paimon_meta.metastore.catalogs import EVENTS_RETENTION, CatalogInfo, Catalogs, events_retention
from paimon_meta.metastore.event_partitions import PURGED_CATALOG

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.model.snapshot import Snapshot
    from paimon_meta.table.table import FileStoreTable

log = logging.getLogger(__name__)

#: The commit user of every archive commit of a catalog's own events.
ARCHIVER_USER = "paimon-meta-archiver"
#: Events whose table was purged (neither registered nor in the recycle bin: the log's
#: :data:`~paimon_meta.metastore.event_partitions.PURGED_CATALOG`) are archived into the default catalog's
#: archive (the one ``serve`` serves by default), with its retention, under a commit user of their own:
#: the default catalog's own rows of the same partition are committed with the same identifier, and each
#: (user, identifier) is committed once.
PURGED_USER = "paimon-meta-archiver-purged"
#: The identifier of the legacy first partition (no start: every event before the log was partitioned).
LEGACY_IDENTIFIER = 0
#: Rows read from the event log and written per batch.
DEFAULT_BATCH_ROWS = 5000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Step:
    """The points between the archiver's steps, where a test injects a crash (:class:`Archiver` ``step``)."""

    FILES_WRITTEN = "files_written"
    COMMITTED = "committed"
    MARKED = "marked"
    DROPPED = "dropped"


def commit_identifier(partition: EventPartitionLike) -> int:
    """The archive commit's identifier of ``partition``: microseconds from the epoch to its start (stable,
    unique per partition, growing with it), :data:`LEGACY_IDENTIFIER` for the legacy first partition."""
    if partition.start is None:
        return LEGACY_IDENTIFIER
    micros = (partition.start - _EPOCH) // timedelta(microseconds=1)
    if micros <= LEGACY_IDENTIFIER:
        raise ValidationError(
            f"event log partition {partition.name} starts at {partition.start}, not after the epoch",
            partition=partition.name,
        )
    return micros


@dataclass(frozen=True, slots=True)
class Archived:
    """One catalog's rows of one partition, in its archive."""

    partition: str
    catalog: str
    catalog_key: str
    snapshot_id: int
    rows: int
    #: The archive commit was found on storage (an earlier run committed it) or deduplicated by the
    #: commit path: nothing new was published.
    already_committed: bool


@dataclass(slots=True)
class ArchiveReport:
    """What one run did (or, with ``dry_run``, would do)."""

    dry_run: bool = False
    archived: list[Archived] = field(default_factory=list)
    #: (partition, catalog name) archived by a dry run
    due: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    #: partition -> why it stays (a catalog not due yet, without retention, unknown, failed)
    kept: dict[str, str] = field(default_factory=dict)
    #: "partition/catalog" -> the error
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(a.rows for a in self.archived if not a.already_committed)

    def as_dict(self) -> dict[str, object]:
        return {
            "dry_run": self.dry_run,
            "archived": [
                {
                    "partition": a.partition,
                    "catalog": a.catalog,
                    "snapshot_id": a.snapshot_id,
                    "rows": a.rows,
                    "already_committed": a.already_committed,
                }
                for a in self.archived
            ],
            "due": [{"partition": p, "catalog": c} for p, c in self.due],
            "dropped": list(self.dropped),
            "kept": dict(self.kept),
            "errors": dict(self.errors),
        }


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _default_opener(engine: Engine) -> Callable[[CatalogInfo], MetastoreCatalog]:
    def open_catalog(info: CatalogInfo) -> MetastoreCatalog:
        from paimon_meta.catalog.metastore import CATALOG_KEY, ConnectInfo, MetastoreCatalog

        return MetastoreCatalog(
            engine,
            info.warehouse,
            {**info.storage_options(), CATALOG_KEY: info.catalog_key},
            info=ConnectInfo(engine.url.render_as_string(hide_password=True), info.warehouse, False),
            own_engine=False,
            default_catalog=info.default,
        )

    return open_catalog


class Archiver:
    """Archives the event log's partitions and drops them (module docstring). One run at a time per
    metastore is the efficient way (``serve`` takes a lease); two at once are still exactly once."""

    def __init__(
        self,
        engine: Engine,
        store: EventPartitionStore,
        *,
        operator: str,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        clock: Callable[[], datetime] | None = None,
        open_catalog: Callable[[CatalogInfo], MetastoreCatalog] | None = None,
        step: Callable[[str], None] | None = None,
    ) -> None:
        """``open_catalog``: the catalog an archive is written through (default: one on ``engine`` with
        the catalog's storage options; ``serve`` passes its served catalogs, with the server's settings).
        ``step``: called after each step with its :class:`Step` name (tests inject crashes there)."""
        if batch_rows < 1:
            raise ValidationError("batch_rows must be at least 1", batch_rows=batch_rows)
        self.engine = engine
        self.store = store
        self.operator = operator
        self.batch_rows = batch_rows
        self.clock = clock or _utcnow
        self._open = open_catalog
        self._step = step or (lambda _name: None)

    @contextmanager
    def _catalogs(self) -> Iterator[Callable[[CatalogInfo], MetastoreCatalog]]:
        """Catalogs opened for this run (those opened here are closed after it)."""
        if self._open is not None:
            yield self._open
            return
        opener = _default_opener(self.engine)
        opened: dict[str, MetastoreCatalog] = {}

        def get(info: CatalogInfo) -> MetastoreCatalog:
            catalog = opened.get(info.name)
            if catalog is None:
                catalog = opened[info.name] = opener(info)
            return catalog

        try:
            yield get
        finally:
            for catalog in opened.values():
                catalog.close()

    def run(self, *, catalog: str | None = None, dry_run: bool = False) -> ArchiveReport:
        """One pass over the live partitions, oldest first. ``catalog``: archive only that catalog's rows
        (a partition is still dropped once every catalog with rows in it is archived, by any run).

        Raises:
            CatalogNotFoundError: ``catalog`` is not a catalog of the metastore.
            MetastoreUnavailableError and other metastore errors: reading the partitions or the catalogs
                failed (nothing was changed by this run after the failure).
        """
        report = ArchiveReport(dry_run=dry_run)
        infos = Catalogs(self.engine).list_all()
        by_key: dict[str, CatalogInfo] = {i.catalog_key: i for i in infos}
        default = next((i for i in infos if i.default), None)
        if default is not None and PURGED_CATALOG not in by_key:
            by_key[PURGED_CATALOG] = default
        if catalog is not None:
            only = Catalogs(self.engine).get(catalog)  # CatalogNotFoundError
            only_key: str | None = only.catalog_key
        else:
            only_key = None
        retention = {key: self._retention(info, report) for key, info in by_key.items()}
        shortest = min((r for r in retention.values() if r is not None), default=None)
        now = self.clock()
        # A catalog that failed on a partition is not archived further in this run (identifiers grow).
        blocked: set[str] = set()
        with self._catalogs() as open_catalog:
            for partition in self.store.partitions():
                if partition.dropped_at is not None:
                    continue
                keys = self.store.catalogs_in(partition.name)
                marked = set(partition.archived)
                waiting: list[str] = []
                for key in keys:
                    if key in marked:
                        continue
                    info = by_key.get(key)
                    if info is None:
                        waiting.append(
                            "events of purged tables, and no default catalog to archive them in"
                            if key == PURGED_CATALOG
                            else f"catalog key {key!r} is no catalog of the metastore"
                        )
                        continue
                    kept = retention.get(key)
                    if kept is None:
                        waiting.append(f"catalog {info.name} keeps its events (no {EVENTS_RETENTION})")
                        continue
                    if partition.end > now - kept:
                        due = partition.end + kept
                        waiting.append(f"catalog {info.name} not due before {due:%Y-%m-%d %H:%M}")
                        continue
                    if (only_key is not None and info.catalog_key != only_key) or key in blocked:
                        waiting.append(f"catalog {info.name} not archived in this run")
                        continue
                    if dry_run:
                        report.due.append((partition.name, info.name))
                        marked.add(key)  # what the drop below would then see
                        continue
                    try:
                        done = self._archive(partition, key, info, open_catalog(info))
                    except PaimonMetaError as e:
                        blocked.add(key)
                        report.errors[f"{partition.name}/{info.name}"] = f"{type(e).__name__}: {e}"
                        waiting.append(f"catalog {info.name} failed")
                        log.warning(
                            "archive of %s for catalog %s failed; retried next run",
                            partition.name,
                            info.name,
                            exc_info=True,
                        )
                        continue
                    report.archived.append(done)
                    marked.add(key)
                if waiting:
                    report.kept[partition.name] = "; ".join(waiting)
                    continue
                if not keys and (shortest is None or partition.end > now - shortest):
                    # An empty partition goes once past the shortest retention (none set: never, as
                    # before archiving existed); the current and future ones never.
                    continue
                if dry_run:
                    report.dropped.append(partition.name)
                    continue
                try:
                    self.store.drop(partition.name, operator=self.operator)
                except PaimonMetaError as e:
                    report.errors[partition.name] = f"{type(e).__name__}: {e}"
                    log.warning("drop of %s refused or failed: %s", partition.name, e)
                    continue
                self._step(Step.DROPPED)
                report.dropped.append(partition.name)
                log.info("event log partition %s dropped (archived for %s)", partition.name, sorted(keys))
        return report

    @staticmethod
    def _retention(info: CatalogInfo, report: ArchiveReport) -> timedelta | None:
        try:
            return events_retention(info.options)
        except ValidationError as e:  # set before the option was checked: never archive on a bad value
            report.errors[info.name] = e.message
            return None

    def _archive(
        self, partition: EventPartitionLike, key: str, info: CatalogInfo, catalog: MetastoreCatalog
    ) -> Archived:
        """Steps 1-3 for the rows of catalog key ``key`` (archived into ``info``'s warehouse) of
        ``partition``."""
        identifier = commit_identifier(partition)
        user = PURGED_USER if key == PURGED_CATALOG else ARCHIVER_USER
        table = ensure_archive_table(catalog)
        existing = committed_snapshot(table, identifier, user=user)
        if existing is not None:
            snapshot_id, rows, already = existing.id, existing.delta_record_count or 0, True
        else:
            snapshot_id, rows, already = self._write_and_commit(partition, key, table, identifier, user)
        self._step(Step.COMMITTED)
        self.store.mark_archived(
            partition.name,
            catalog_key=key,
            snapshot_id=snapshot_id,
            row_count=rows,
            archived_by=self.operator,
        )
        self._step(Step.MARKED)
        log.info(
            "event log partition %s: %d event(s) of catalog %s archived in snapshot %d of its %s%s",
            partition.name,
            rows,
            info.name,
            snapshot_id,
            table.path,
            " (committed earlier)" if already else "",
        )
        return Archived(partition.name, info.name, key, snapshot_id, rows, already)

    def _write_and_commit(
        self, partition: EventPartitionLike, key: str, table: FileStoreTable, identifier: int, user: str
    ) -> tuple[int, int, bool]:
        builder = table.new_stream_write_builder().with_commit_user(user)
        write = builder.new_write()
        rows = 0
        after: int | None = None
        try:
            while True:
                batch = self.store.rows(
                    partition.name, catalog_key=key, after_event_id=after, limit=self.batch_rows
                )
                if not batch:
                    break
                write.write_arrow(to_arrow(batch, partition.name))
                rows += len(batch)
                after = int(batch[-1]["event_id"])
                if len(batch) < self.batch_rows:
                    break
            messages = write.prepare_commit()
        except Exception:
            write.abort()  # nothing of these files was handed to a commit: definitely unreferenced
            raise
        finally:
            write.close()
        if rows == 0:
            raise ValidationError(
                f"the event log says catalog key {key!r} has rows in {partition.name}, but none were read",
                partition=partition.name,
                catalog_key=key,
            )
        self._step(Step.FILES_WRITTEN)
        commit = builder.new_commit()
        try:
            outcome = commit.commit(messages, identifier)
        except (CommitConflictError, CommitFailedError):
            commit.abort(messages)  # definitely not committed (never on an unknown outcome: I3)
            raise
        if outcome.deduplicated:
            # Another run published this identifier first: these files are referenced by nothing.
            commit.abort(messages)
            snap = table.snapshot(outcome.snapshot_ids[-1])
            return snap.id, snap.delta_record_count or 0, True
        return outcome.snapshot_ids[-1], rows, False


def committed_snapshot(
    table: FileStoreTable, identifier: int, *, user: str = ARCHIVER_USER
) -> Snapshot | None:
    """The archive snapshot committed as (``user``, ``identifier``), walking back from the latest to the
    earliest kept. The walk does not stop at a smaller identifier: a catalog's partitions are archived
    oldest first, but a partition that got rows of a catalog only after a later one was archived (a clock
    set back) is archived after it. The archive has one snapshot per partition and catalog, and its
    maintenance expires the old ones: the walk is short."""
    manager = table.snapshot_manager
    for snap in manager.snapshots_of_user(user, manager.latest_snapshot()):
        if snap.commit_identifier == identifier:
            return snap
    return None
