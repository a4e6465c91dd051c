"""Recovery: resolve commits that were prepared and never reached a terminal event.

A commit is *pending* when its ``prepared`` event has no ``snapshot_published``/``failed``/``aborted``/
``recovered`` after it: its writer died (or is still running). :func:`recover_table` resolves each one:

1. **Published**: its snapshot (commit user, identifier, kind) is on storage. ``reconcile()`` records
   snapshots beyond the table pointer under the lock (``recovered``, resolution ``published``); one that
   the log already attributes to another commit id (a re-run that deduplicated) is recorded the same way.
   Snapshots nobody prepared (Java, pypaimon) are recorded ``external``.
2. **In flight**: left alone. A commit counts as in flight while its last event is younger than the grace
   period (``older_than_seconds``; default :func:`default_grace_seconds`), or while the lock owner that
   last checked it for conflicts is still active (it took or released a lock within the grace period, or
   holds an unexpired lock row). A writer waiting for the lock writes nothing until it gets it or times
   out (``failed``), which is why the default grace covers the acquire timeout plus one lease.
3. **Finished**: otherwise its ``prepared`` messages (stored with their serializer version) are committed
   again through the normal commit path (a :class:`CommitCoordinator` behind the metastore guard) with the
   ORIGINAL commit user and identifier, filtered to the pending kind (APPEND/OVERWRITE or COMPACT).
   Exactly-once holds: the coordinator deduplicates against anything that landed meanwhile, and the
   original writer, should it come back, deduplicates against the new snapshot. The new commit writes
   its own events (``prepared`` .. ``snapshot_published``); the original gets ``recovered`` with
   resolution ``finished``, the snapshot id and ``finished_by_commit_id``.
   An OVERWRITE is finished with the overwrite spec its ``prepared`` event records (static or dynamic,
   resolved when it was prepared), so it replaces exactly what the dead writer's commit would have.
4. **Aborted**: when the conflict check fails now (or the messages cannot be decoded, or the commit is an
   OVERWRITE prepared by a version that did not record its spec), ``recovered`` with resolution
   ``aborted`` and the reason.

The manifests, manifest lists and index manifests the dead attempt wrote (named ``<kind>-<uuid>-<n>`` by
its manifest writer; found by reading the young unreferenced manifests and matching their entries to the
commit's files) are deleted once the commit's outcome is final (finished, aborted, or published by another
commit), provided no snapshot references any file of that writer and no in-flight commit matches it.
Should the original writer be alive after all, it deduplicates against a finished commit before using
those files; an aborted commit's writer is only safe if its own conflict check fails too (see
docs/AUDIT.md, "Recovery", for the fencing the commit path should add). Data files are never deleted
here: a restarted job may commit the same messages again; orphan cleanup removes them once they are old
and unreferenced.

Idempotent and safe while writers run: decisions are taken holding the table lock (after reconciling
storage into the log), finishing goes through the coordinator (which takes the lock itself), and a
per-table advisory lock keeps two recoveries of one table from interleaving. Do not call it while
holding the table's lock: it takes that lock itself.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

from paimon_meta.commit.metastore.guard import LockSettings, reconcile
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import (
    CommitConflictError,
    FileIOError,
    LockTimeoutError,
    PaimonMetaError,
    ValidationError,
)
from paimon_meta.metastore.events import (
    TERMINAL_COMMIT_EVENT_TYPES,
    CommitEventType,
    PendingCommit,
    Recovered,
)
from paimon_meta.metastore.registry import TableRow
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement, DataIncrement
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.ops.attempts import delete_attempt_files
from paimon_meta.ops.common import (
    Progress,
    all_table_identifiers,
    db_now,
    maintenance_run,
    operator_identity,
    quiet,
    resolve_table,
    table_lock,
)
from paimon_meta.ops.references import message_files
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

log = logging.getLogger(__name__)

PUBLISHED = "published"
FINISHED = "finished"
ABORTED = "aborted"
SKIPPED = "skipped"
FAILED = "failed"


def default_grace_seconds(settings: LockSettings) -> float:
    """Two leases, and at least the lock acquire timeout plus one lease: a writer waiting for the lock
    writes no event until it gets it (or gives up with ``failed``)."""
    lease = float(settings.lease_seconds)
    return max(2 * lease, settings.acquire_timeout_seconds + lease)


@dataclass(frozen=True, slots=True)
class CommitResolution:
    """What recovery did (or, in a dry run, would do) with one pending commit."""

    commit_id: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    action: str
    snapshot_id: int | None = None
    reason: str | None = None
    finished_by_commit_id: str | None = None


@dataclass(slots=True)
class RecoveryReport:
    """The outcome of recovering one table."""

    table: str
    dry_run: bool
    grace_seconds: float
    reconciled: list[tuple[int, str]] = field(default_factory=list)
    commits: list[CommitResolution] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """False if the table could not be recovered, or some commit could not be resolved for an
        operational reason (action ``failed``)."""
        return self.error is None and all(c.action != FAILED for c in self.commits)

    def count(self, action: str) -> int:
        return sum(1 for c in self.commits if c.action == action)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "dry_run": self.dry_run,
            "grace_seconds": self.grace_seconds,
            "reconciled": [{"snapshot_id": sid, "event": ev} for sid, ev in self.reconciled],
            "commits": [asdict(c) for c in self.commits],
            "deleted_files": list(self.deleted_files),
            "error": self.error,
        }


@dataclass(slots=True)
class _Decision:
    pending: PendingCommit
    action: str
    reason: str | None = None
    snapshot_id: int | None = None
    messages: list[CommitMessage] | None = None
    overwrite: OverwriteSpec | None = None

    def resolution(self, **changes: Any) -> CommitResolution:
        ref = self.pending.prepared.ref
        base = CommitResolution(
            commit_id=str(ref.commit_id),
            commit_user=ref.commit_user,
            commit_identifier=ref.commit_identifier,
            commit_kind=ref.commit_kind.value,
            action=self.action,
            snapshot_id=self.snapshot_id,
            reason=self.reason,
        )
        return replace(base, **changes)


def recover_all(
    catalog: MetastoreCatalog,
    *,
    older_than_seconds: float | None = None,
    dry_run: bool = False,
    progress: Progress = quiet,
) -> list[RecoveryReport]:
    """:func:`recover_table` for every registered table of the catalog. A table that cannot be
    recovered (no table on storage, lock busy, ...) gets a report with ``error`` set; the others
    still run."""
    reports = []
    for identifier in all_table_identifiers(catalog):
        try:
            reports.append(
                recover_table(
                    catalog,
                    identifier,
                    older_than_seconds=older_than_seconds,
                    dry_run=dry_run,
                    progress=progress,
                )
            )
        except PaimonMetaError as e:
            progress(f"{identifier}: not recovered: {e}")
            reports.append(
                RecoveryReport(
                    identifier, dry_run, older_than_seconds or 0.0, error=f"{type(e).__name__}: {e}"
                )
            )
    return reports


def recover_table(
    catalog: MetastoreCatalog,
    identifier: str,
    *,
    older_than_seconds: float | None = None,
    dry_run: bool = False,
    progress: Progress = quiet,
    principal: str | None = None,
    reason: str | None = None,
) -> RecoveryReport:
    """Resolve every pending commit of ``identifier`` (see the module docstring).

    ``older_than_seconds`` is the grace period after a commit's last event before it may be finished or
    aborted. ``dry_run`` takes no lock and writes nothing: the report says what would happen
    (``finished`` then means "would be finished if the conflict check passes"). ``reason`` (the
    console's recoveries): the run is also recorded as a ``recover`` maintenance run with ``principal``
    and the reason (started), then what it resolved (finished) or why it failed.

    Raises:
        TableNotFoundError: the table is not registered.
        LockTimeoutError: the table lock (or another recovery of the table) did not become free in time.
    """
    row, table = resolve_table(catalog, identifier)
    grace = default_grace_seconds(catalog.lock_settings) if older_than_seconds is None else older_than_seconds
    report = RecoveryReport(row.identifier, dry_run, grace)
    if dry_run:
        beyond = _unrecorded_snapshots(catalog, row, table)
        keys = _pending_keys(catalog, row)
        report.reconciled = [(sid, "recovered" if k in keys else "external") for k, sid in beyond.items()]
        _plan(catalog, row, grace, report, dry_run=True, on_storage=beyond)
        return report
    if reason is None:
        _recover(catalog, row, table, grace, report, progress=progress)
        return report
    settings = {"reason": reason, "grace_seconds": grace}
    with maintenance_run(
        catalog, row, MaintenanceOperation.RECOVER, dry_run=False, settings=settings, principal=principal
    ) as run:
        _recover(catalog, row, table, grace, report, progress=progress)
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "reconciled": len(report.reconciled),
                "commits": {a: report.count(a) for a in sorted({c.action for c in report.commits})},
                "deleted_files": len(report.deleted_files),
            },
        )
    return report


def _recover(
    catalog: MetastoreCatalog,
    row: TableRow,
    table: FileStoreTable,
    grace: float,
    report: RecoveryReport,
    *,
    progress: Progress,
) -> None:
    with _recovery_mutex(catalog.engine, row.table_id, catalog.lock_settings.acquire_timeout_seconds):
        with table_lock(catalog, row, "recover", progress=progress):
            report.reconciled = reconcile(catalog.registry, catalog.events, row, table.snapshot_manager)
            for sid, event in report.reconciled:
                progress(f"{row.identifier}: recorded snapshot {sid} as {event}")
            decisions = _plan(catalog, row, grace, report, dry_run=False)
        for d in decisions:
            if d.action == FINISHED:
                _finish(catalog, row, d, report, progress)  # sets the final action
        # Only now are the outcomes final; the files belong to resolved attempts and no writer other
        # than a (presumed dead) original one names them, so this needs no table lock. A resolved
        # commit claims only manifests of its own kind: the other commit of its call (an APPEND's
        # COMPACT) has its own manifest writer and may still be published by a writer that was frozen.
        dead = [d for d in decisions if d.action in (FINISHED, ABORTED, PUBLISHED)]
        alive = [d for d in decisions if d.action in (SKIPPED, FAILED)]
        report.deleted_files = delete_attempt_files(
            table,
            [(d.pending.prepared.created_at, _commit_files(d)) for d in dead],
            [_commit_files(d, own_kind=False) for d in alive],
        )
        if report.deleted_files:
            progress(f"{row.identifier}: deleted {len(report.deleted_files)} files of dead attempts")


# ---- deciding -------------------------------------------------------------------------------------------


def _plan(
    catalog: MetastoreCatalog,
    row: TableRow,
    grace: float,
    report: RecoveryReport,
    *,
    dry_run: bool,
    on_storage: dict[tuple[str, int, CommitKind], int] | None = None,
) -> list[_Decision]:
    """Classify the pending commits and (not dry run) record the ones decided now. Returns every
    decision; those with action ``finished`` are still to be finished through the coordinator."""
    engine = catalog.engine
    lock_id = catalog.registry.lock_id(row.database, row.name)
    now = db_now(engine)
    decisions = [
        _decide(catalog, lock_id, p, now=now, grace=grace, on_storage=on_storage or {})
        # main's: a branch's pending commits are its own reconcile's (their snapshot ids are the branch's)
        for p in catalog.events.pending_commits(row.table_id, branch="main")
    ]
    claimed: dict[int, uuid.UUID] = {}
    for d in decisions:  # oldest first: one snapshot on storage is recorded on one commit only
        if d.action == PUBLISHED and d.snapshot_id is not None:
            first = claimed.setdefault(d.snapshot_id, d.pending.prepared.ref.commit_id)
            if first != d.pending.prepared.ref.commit_id:
                d.action, d.snapshot_id = ABORTED, None
                d.reason = f"deduplicated: its snapshot is recorded on commit {first}"
    for d in decisions:
        if d.action == FINISHED:
            if dry_run:
                report.commits.append(d.resolution(reason="would be finished if the conflict check passes"))
            continue
        if d.action in (PUBLISHED, ABORTED) and not dry_run:
            _record(catalog, d, resolution=d.action, reason=d.reason, snapshot_id=d.snapshot_id)
        report.commits.append(d.resolution())
    return decisions


def _decide(
    catalog: MetastoreCatalog,
    lock_id: str,
    p: PendingCommit,
    *,
    now: datetime,
    grace: float,
    on_storage: dict[tuple[str, int, CommitKind], int],
) -> _Decision:
    ref = p.prepared.ref
    if p.prepared.payload.get("source") == "rest":
        # A REST commit: the client built the snapshot, so there is nothing to finish here. Reconcile
        # (run just before, under the lock) matched a landed one by its snapshot uuid; what is still
        # pending never reached storage, and its client retries it (with a new snapshot) or gave up.
        # Its (user, identifier, kind) says nothing: a REST client reuses it for many commits.
        in_flight = _in_flight(catalog, lock_id, p, now=now, grace=grace)
        if in_flight is not None:
            return _Decision(p, SKIPPED, reason=in_flight)
        return _Decision(p, ABORTED, reason="REST commit whose snapshot never reached storage")
    sid = on_storage.get((ref.commit_user, ref.commit_identifier, ref.commit_kind))
    if sid is not None:
        return _Decision(p, PUBLISHED, reason="snapshot found on storage", snapshot_id=sid)
    found = catalog.events.find_published(
        ref.table_id, ref.commit_user, ref.commit_identifier, ref.commit_kind
    )
    if found is not None:
        # Another attempt of this (user, identifier, kind) is the one recorded with that snapshot:
        # this one is a duplicate, ended as the commit path ends a deduplicated commit (the snapshot is
        # recorded once, by the commit it is recorded on).
        return _Decision(
            p,
            ABORTED,
            reason=f"deduplicated: already committed as snapshot {found.snapshot_id} by commit "
            f"{found.ref.commit_id}",
        )
    in_flight = _in_flight(catalog, lock_id, p, now=now, grace=grace)
    if in_flight is not None:
        return _Decision(p, SKIPPED, reason=in_flight)
    prepared = p.prepared
    try:
        decoded = prepared.commit_messages()
    except PaimonMetaError as e:
        return _Decision(p, ABORTED, reason=f"messages cannot be decoded: {e}")
    if decoded is None:
        return _Decision(p, ABORTED, reason="the prepared event carries no messages")
    messages = decoded
    kept = _messages_of_kind(messages, ref.commit_kind)
    if ref.commit_kind is CommitKind.OVERWRITE:
        try:
            spec = OverwriteSpec.from_json(prepared.payload.get("overwrite"))
        except ValidationError:
            return _Decision(
                p,
                ABORTED,
                reason="an OVERWRITE cannot be finished: its prepared event records no overwrite spec",
                messages=messages,
            )
        # A static overwrite of no files is still a commit (it empties what the spec names).
        if kept or not spec.dynamic:
            return _Decision(p, FINISHED, messages=kept, overwrite=spec)
    if not kept:
        return _Decision(
            p, ABORTED, reason=f"no {ref.commit_kind.value} changes in the messages", messages=messages
        )
    return _Decision(p, FINISHED, messages=kept)


def _in_flight(
    catalog: MetastoreCatalog, lock_id: str, p: PendingCommit, *, now: datetime, grace: float
) -> str | None:
    """Why ``p`` may still be in flight (young, or its lock owner still active); None if it is not."""
    age = (now - p.last_event_at).total_seconds()
    if age < grace:
        return f"in flight: last event {age:.1f}s ago (grace {grace:.0f}s)"
    owner = _last_checking_owner(catalog, lock_id, p)
    if owner is not None and _owner_active(catalog.engine, owner, grace):
        return f"in flight: its lock owner {owner} is still active"
    return None


def _messages_of_kind(messages: Sequence[CommitMessage], kind: CommitKind) -> list[CommitMessage]:
    """The part of the messages that forms the pending kind's snapshot: ``commit()`` stores all messages
    with each of its (APPEND, then COMPACT) commits, and each is finished on its own."""
    out = []
    for m in messages:
        if kind is CommitKind.COMPACT:
            m = replace(m, data_increment=DataIncrement())
        else:
            m = replace(m, compact_increment=CompactIncrement())
        if not m.is_empty():
            out.append(m)
    return out


def _unrecorded_snapshots(
    catalog: MetastoreCatalog, row: TableRow, table: FileStoreTable
) -> dict[tuple[str, int, CommitKind], int]:
    """Dedupe key -> id of the snapshots on storage beyond the table pointer (what reconcile would record)."""
    pointer = catalog.registry.get_table_row_by_id(row.table_id).latest_snapshot_id or 0
    sm = table.snapshot_manager
    latest = sm.latest_snapshot_id() or 0
    out: dict[tuple[str, int, CommitKind], int] = {}
    for sid in range(pointer + 1, latest + 1):
        if sm.snapshot_exists(sid):
            out[sm.snapshot(sid).dedupe_key] = sid
    return out


def _pending_keys(catalog: MetastoreCatalog, row: TableRow) -> set[tuple[str, int, CommitKind]]:
    refs = [p.prepared.ref for p in catalog.events.pending_commits(row.table_id, branch="main")]
    return {(r.commit_user, r.commit_identifier, r.commit_kind) for r in refs}


def _last_checking_owner(catalog: MetastoreCatalog, lock_id: str, p: PendingCommit) -> str | None:
    """The lock owner that held the table lock when the commit was last conflict-checked, if it ever was."""
    checked = [
        e.created_at
        for e in catalog.events.events_for_commit(p.prepared.ref.commit_id)
        if e.event_type is CommitEventType.CONFLICT_CHECKED
    ]
    if not checked:
        return None
    query = text(
        "SELECT owner FROM paimon_lock_events WHERE lock_id = :lock_id AND event_type = 'acquired' "
        "AND created_at <= :at ORDER BY event_id DESC LIMIT 1"
    )
    with catalog.engine.connect() as conn:
        owner: str | None = conn.execute(query, {"lock_id": lock_id, "at": max(checked)}).scalar()
    return owner


def _owner_active(engine: Engine, owner: str, grace: float) -> bool:
    query = text(
        "SELECT EXISTS (SELECT 1 FROM paimon_lock_events WHERE owner = :owner "
        "  AND created_at > clock_timestamp() - make_interval(secs => :grace)) "
        "OR EXISTS (SELECT 1 FROM paimon_distributed_locks WHERE owner = :owner "
        "  AND EXTRACT(EPOCH FROM AGE(NOW(), acquired_at)) <= expire_time_seconds)"
    )
    with engine.connect() as conn:
        return bool(conn.execute(query, {"owner": owner, "grace": float(grace)}).scalar())


# ---- acting ---------------------------------------------------------------------------------------------


def _record(
    catalog: MetastoreCatalog,
    d: _Decision,
    *,
    resolution: str,
    reason: str | None,
    snapshot_id: int | None = None,
    **payload: Any,
) -> bool:
    """Append the ``recovered`` event that ends the commit, unless something already ended it (a writer's
    ``reconcile`` may have recorded its snapshot meanwhile): one terminal event per commit."""
    p = d.pending
    commit_id = p.prepared.ref.commit_id
    if any(e.event_type in TERMINAL_COMMIT_EVENT_TYPES for e in catalog.events.events_for_commit(commit_id)):
        return False
    with catalog.engine.begin() as conn:
        catalog.events.append(
            conn,
            Recovered(
                ref=p.prepared.ref,
                attempt=max(p.attempts, 1),
                resolution=resolution,
                reason=reason,
                snapshot_id=snapshot_id,
                payload={"operator": operator_identity(), **payload},
                timeline=catalog.registry.get_table_row_by_id(p.prepared.ref.table_id).timeline,
            ),
        )
    return True


def _finish(
    catalog: MetastoreCatalog, row: TableRow, d: _Decision, report: RecoveryReport, progress: Progress
) -> None:
    ref = d.pending.prepared.ref
    assert d.messages is not None
    table = catalog.get_table(row.identifier)
    factory = table.committer_factory
    assert factory is not None  # a catalog table always commits through the metastore guard
    started = time.monotonic()
    try:
        result = factory(table, ref.commit_user).commit(
            d.messages, ref.commit_identifier, overwrite=d.overwrite
        )
    except (CommitConflictError, ValidationError) as e:
        # Definite: a conflict on today's table, or stored messages the commit path refuses (e.g. a
        # file outside the table, stored before the checks existed): they can never be finished.
        kind = "conflict check failed" if isinstance(e, CommitConflictError) else "refused"
        reason = f"{kind}: {e}"
        d.action = ABORTED
        _record(catalog, d, resolution=ABORTED, reason=reason)
        report.commits.append(d.resolution(action=ABORTED, reason=reason))
        progress(f"{row.identifier}: aborted commit {ref.commit_id} ({reason})")
        return
    except (PaimonMetaError, FileIOError) as e:
        # Operational (lock timeout, retries exhausted, unknown outcome): the commit stays pending and a
        # later run resolves it (an unknown outcome is then found on storage by reconcile).
        d.action = FAILED
        report.commits.append(d.resolution(action=FAILED, reason=f"{type(e).__name__}: {e}"))
        progress(f"{row.identifier}: could not finish commit {ref.commit_id}: {e}")
        return
    if not result.snapshot_ids:
        d.action = ABORTED
        _record(catalog, d, resolution=ABORTED, reason="nothing to commit")
        report.commits.append(d.resolution(action=ABORTED, reason="nothing to commit"))
        return
    sid = result.snapshot_ids[0]
    new_ids = getattr(result, "commit_ids", ()) or ()
    finished_by = str(new_ids[0]) if new_ids else None
    if result.deduplicated:
        # Committed by another attempt, which is the one recorded with the snapshot (if it was this
        # one, the finishing commit's reconcile recorded it here and ``_record`` finds it ended).
        d.action = ABORTED
        reason = f"deduplicated: already committed as snapshot {sid}"
        _record(catalog, d, resolution=ABORTED, reason=reason)
        report.commits.append(d.resolution(action=ABORTED, reason=reason))
        return
    reason = f"finished from the stored messages in {time.monotonic() - started:.2f}s"
    _record(
        catalog, d, resolution=FINISHED, reason=reason, snapshot_id=sid, finished_by_commit_id=finished_by
    )
    report.commits.append(
        d.resolution(action=FINISHED, snapshot_id=sid, reason=reason, finished_by_commit_id=finished_by)
    )
    progress(f"{row.identifier}: finished commit {ref.commit_id} as snapshot {sid}")


def _commit_files(d: _Decision, *, own_kind: bool = True) -> set[str] | None:
    """Data file names of the commit's own kind (``own_kind=False``: of all its call's messages, for
    a commit in flight, whose files are spared: more is safer); None if its messages cannot be decoded.

    Only its kind's part: ``commit()`` stores all of a call's messages with each of its commits, and
    the COMPACT commit of a call whose APPEND is resolved here may still be published by its writer,
    with delta manifests written (by their own manifest writer) when the call was prepared. Matching
    those to the APPEND would delete files a snapshot is about to name (I3)."""
    messages = d.messages
    if messages is None:
        try:
            messages = d.pending.prepared.commit_messages()
        except PaimonMetaError:
            return None
        if messages is None:
            return None
    if own_kind:
        messages = _messages_of_kind(messages, d.pending.prepared.ref.commit_kind)
    data, _ = message_files(messages)
    return data


# ---- serialising recoveries of one table ------------------------------------------------------------------


@contextmanager
def _recovery_mutex(engine: Engine, table_id: int, timeout_seconds: float) -> Iterator[None]:
    """A session-level advisory lock per table: two recoveries never resolve the same commit twice.
    Writers do not take it, so it never delays a commit."""
    key = int.from_bytes(
        hashlib.sha256(f"paimon_meta.recover:{table_id}".encode()).digest()[:8], "big", signed=True
    )
    deadline = time.monotonic() + timeout_seconds
    with engine.connect() as conn:
        while not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar():
            conn.rollback()
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"another recovery of table {table_id} is running",
                    table_id=table_id,
                    timeout_seconds=timeout_seconds,
                )
            time.sleep(0.2)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            conn.commit()
