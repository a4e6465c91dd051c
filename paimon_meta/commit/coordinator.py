"""The commit coordinator: prepare -> lock -> dedupe -> conflict check -> stage -> publish -> record.

This is the only commit path. Whether the guard is the Postgres lock + event log or storage-only
optimistic concurrency, the steps and their invariants are the same (docs/DESIGN.md, "Commit protocol"):

* I1 exactly-once: a (commit user, identifier, kind) is published at most once — checked under the
  guard before staging, and again (by reading storage) whenever an attempt's outcome is unknown.
* I2 no overwrite: ``snapshot-N`` is only ever created with ``create_if_absent``; losing that race is a
  definite failure of the attempt, never a replace.
* I3 cleanup only on definite failure: files of an attempt are deleted only when the attempt is known not
  to have published; an unknown outcome deletes nothing.
* I4 contiguity: snapshot N+1 is staged from snapshot N read under the guard, so ids have no gaps.

The attempt API. A ``commit()`` call is planned without any lock (:meth:`CommitCoordinator.prepare`: a
:class:`PreparedCommit` holding one :class:`Pending` per snapshot, its delta manifests written), then
each snapshot is attempted under the guard and its outcome decided. The single path
(:meth:`CommitCoordinator.commit_prepared`) and a batch of queued commits
(``paimon_meta.commit.metastore.batch``) drive the same public steps, in this order:

1. :meth:`~CommitCoordinator.announce`: the ``prepared`` record goes to the guard, before the lock;
2. :meth:`~CommitCoordinator.base`: the latest snapshot, read under the guard (I4);
   :meth:`~CommitCoordinator.observe_timeline` for a further session of the same hold;
3. :meth:`~CommitCoordinator.stage`: the dedupe lookup (I1, :class:`Deduplicated`), the conflict check,
   then a :class:`Staged` snapshot on that base (I4), named by nothing yet;
4. publish: ``snapshot-N`` created only if absent (I2, :mod:`paimon_meta.commit.publish`), then
   :meth:`~CommitCoordinator.created`;
5. decide: the guard records the outcome; after a definite failure
   :meth:`~CommitCoordinator.drop_attempt` (that attempt's files, before a retry, logged by
   :meth:`~CommitCoordinator.record_retry`) or :meth:`~CommitCoordinator.delete_written` (all of a
   commit's files), never after an unknown outcome (I3).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

from paimon_meta.commit import crashpoints
from paimon_meta.commit.changes import ChangeSet, CollectedChanges, collect_changes, partition_deltas
from paimon_meta.commit.conflicts import KeyDecoder, check_conflicts, merge_for_commit
from paimon_meta.commit.crashpoints import CrashPoint
from paimon_meta.commit.guard import CommitGuard, CommitRecord, GuardSession
from paimon_meta.commit.manifests import (
    ManifestWriter,
    MergeOptions,
    merge_manifests,
    start_writes,
    write_deferred,
)
from paimon_meta.commit.publish import SnapshotRaceLost, advance_hints, create_snapshot_file, earliest_hint
from paimon_meta.commit.retry import RetryPolicy
from paimon_meta.commit.validate import MessageValidator
from paimon_meta.errors import (
    CommitConflictError,
    CommitFailedError,
    CommitOutcomeUnknownError,
    FileIOError,
    LockLostError,
    TableNotFoundError,
    TableRowChangedError,
    UnsupportedError,
    ValidationError,
)
from paimon_meta.model import limits
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import (
    FileKind,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
)
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages
from paimon_meta.serde.json import snapshot_to_json
from paimon_meta.table.containment import MAX_BIGINT, TableRoots
from paimon_meta.table.live_files import readded
from paimon_meta.table.option_policy import MAIN_BRANCH, check_main_branch
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec, PartitionMatcher

#: Options under which a commit assigns row ids to new files (Paimon's row tracking, which
#: ``data-evolution.enabled`` requires): messages to such a table are refused by :meth:`_validate`.
ROW_ID_OPTIONS = ("row-tracking.enabled", "data-evolution.enabled")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What ``commit()`` returns once every snapshot of the call is durable on storage."""

    commit_ids: tuple[str, ...]
    snapshot_ids: tuple[int, ...]
    deduplicated: bool
    attempts: int


@dataclass(frozen=True, slots=True)
class Pending:
    """One snapshot of a ``commit()`` call (one kind) as :meth:`CommitCoordinator.prepare` planned it.

    ``writer`` records every file written for it (``writer.written``): the delta manifests and lists
    written before the lock, then each attempt's. I3: they are deleted only once the commit or the
    attempt definitely failed (:meth:`CommitCoordinator.delete_written`,
    :meth:`CommitCoordinator.drop_attempt`), never after an unknown outcome."""

    commit_id: str
    kind: CommitKind
    changes: ChangeSet
    identifier: int
    overwrite: OverwriteSpec | None
    properties: Mapping[str, str] | None
    watermark: int | None
    writer: ManifestWriter
    # The delta manifests, written before the lock; None for an OVERWRITE, whose delta depends on what
    # it replaces in the latest snapshot (written under the guard, each attempt).
    delta: list[ManifestFileMeta] | None = None
    changelog: list[ManifestFileMeta] = field(default_factory=list)
    # The delta and changelog manifest lists (name, size), written before the lock with the delta.
    delta_list: tuple[str, int] | None = None
    changelog_list: tuple[str, int] | None = None
    # The base manifest list merged before the lock on the snapshot the table object held then
    # (:meth:`CommitCoordinator.prestage_base`); used under the guard only if that snapshot is the latest.
    base: PrestagedBase | None = None

    def published_details(self, snapshot: Snapshot) -> dict[str, Any]:
        """The payload of the ``snapshot_published`` event of ``snapshot``, this commit's snapshot."""
        return {
            "kind": self.kind.value,
            "base_manifest_list": snapshot.base_manifest_list,
            "delta_manifest_list": snapshot.delta_manifest_list,
            "record_delta": snapshot.delta_record_count,
            "total_records": snapshot.total_record_count,
            "snapshot_uuid": snapshot.uuid,
            **self.changes.counts(),
        }


@dataclass(frozen=True, slots=True)
class PrestagedBase:
    """A base manifest list written before the lock: the merge of ``on``'s base and delta lists.

    Invariant: a snapshot's base list depends on nothing but the snapshot it is built on (its base and
    delta lists, merged by the table's options), never on the commit's own changes. So a list merged
    from snapshot S before the lock is exactly what staging on S under the lock would write, and it is
    used iff the latest snapshot read under the guard is S (same id, uuid and lists: ids are reused
    after a rollback); otherwise the base list is staged under the guard as before (restage) and this
    one, named by nothing, is deleted once the commit is decided. ``files``: what writing it wrote
    (the list and any manifests the merge rewrote), all recorded in the pending's writer."""

    on: tuple[int, str | None, str, str]
    name: str
    size: int
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AheadBase:
    """The base manifest list of the snapshot after ``on``, staged by the committer of ``on`` while it
    created ``on`` (concurrently with its ``PUT snapshot-N``), for the next holder of the lock in this
    process: with other commits of the table object waiting, the next one is staged on ``on`` under
    the lock, and takes this list instead of merging and PUTting its own there (one S3 round trip
    less in its hold).

    Invariants (docs/DESIGN.md, commit path step 7): it is offered (``SnapshotManager.offer_next_base``)
    only once every file of it was written without error and ``on`` was created by us (a snapshot never
    names a list that is not on storage; on local disk the taker syncs it with its own snapshot, as any
    list it wrote: ``paths`` join its writer's ``unsynced``); it is taken by one commit only, and only
    if the latest snapshot read under the lock is ``on`` (same id, uuid and lists: ids are reused after
    a rollback) and the taker merges with the same options (``schema_id``: the manifests' schema and
    compression, ``options``), so it is exactly what staging on ``on`` would write (:class:`PrestagedBase`'s
    argument). Once taken its files are the taker's attempt's (deleted on a definite failure, as
    anything the attempt wrote); one never taken is named by nothing: deleted when another replaces it or
    when no commit of the table object is left in flight (``PreparedCommit.settled``), else (a crash)
    an orphan for orphan cleanup."""

    on: tuple[int, str | None, str, str]
    schema_id: int
    options: MergeOptions
    name: str
    size: int
    files: tuple[str, ...]
    paths: tuple[str, ...]


def snapshot_key(snapshot: Snapshot) -> tuple[int, str | None, str, str]:
    """What tells two snapshots apart when ids are reused (a rollback): id, uuid and lists."""
    return (snapshot.id, snapshot.uuid, snapshot.base_manifest_list, snapshot.delta_manifest_list)


@dataclass(frozen=True, slots=True)
class Staged:
    """A snapshot staged under the guard on the latest one (I4): its manifest lists are written (not yet
    durable) and its JSON serialized, but nothing names it. Publishing it is creating ``snapshot-N``
    with ``body``, only if absent (I2)."""

    snapshot: Snapshot
    body: bytes


class StorageAhead(SnapshotRaceLost):
    """``snapshot-N`` was taken after the guard answered the latest id without checking storage
    (``GuardSession.storage_unverified``): storage is ahead of the guard's record. A definite failure
    of the attempt; the next one checks storage first."""


@dataclass(frozen=True, slots=True)
class Deduplicated:
    """I1: the commit's (user, identifier, kind) is already published as ``snapshot_id`` (an earlier
    ``commit()`` call); this attempt staged nothing and must publish nothing."""

    snapshot_id: int


@dataclass(slots=True)
class PreparedCommit:
    """A ``commit()`` call up to the lock (:meth:`CommitCoordinator.prepare`): its snapshots planned,
    their delta manifests written. Committed once, by the coordinator that prepared it."""

    coordinator: CommitCoordinator
    identifier: int
    body: bytes
    spec: OverwriteSpec | None
    pendings: list[Pending]
    used: bool = False
    # Commit ids of the pendings whose ``prepared`` record was handed to the guard (see announce).
    announced: set[str] = field(default_factory=set)
    # Counted in the table object's commits in flight until settled (SnapshotManager.begin_commit).
    in_flight: bool = False

    def settled(self) -> None:
        """The commit is decided (or will never be attempted): no longer in flight. Idempotent."""
        if self.in_flight:
            self.in_flight = False
            left = self.coordinator.snapshots.end_commit()
            if isinstance(left, AheadBase):
                # Staged ahead and never taken, with no commit of the table object left to take it:
                # named by nothing (AheadBase's invariant). Deleted once the lock is released.
                coordinator = self.coordinator
                coordinator.guard.after_release(functools.partial(coordinator.delete_files, left.files))

    @property
    def kinds(self) -> tuple[CommitKind, ...]:
        return tuple(p.kind for p in self.pendings)

    def sync(self) -> None:
        """Make what :meth:`CommitCoordinator.prepare` wrote durable now (local disk: fsyncs, on the
        caller's thread), so the publish, under the lock, has only its own new files to sync. Group
        commit does this for a commit that queues behind a running hold (it waits anyway)."""
        if self.used:
            raise ValueError("this prepared commit was already committed")
        for pending in self.pendings:
            pending.writer.sync()

    def discard(self) -> None:
        """Delete what :meth:`CommitCoordinator.prepare` wrote (it will never be committed)."""
        self.settled()
        if not self.used:
            self.used = True
            for pending in self.pendings:
                self.coordinator.delete_written(pending)


class CommitCoordinator:
    """Commits CommitMessages to one table through a :class:`CommitGuard`.

    One coordinator per writer (its ``commit_user``); it is not meant to be shared between threads.
    """

    def __init__(
        self,
        table: FileStoreTable,
        guard: CommitGuard,
        *,
        commit_user: str,
        retry: RetryPolicy | None = None,
    ) -> None:
        # Snapshots are published where the guard publishes (main, unless a metastore guard names a
        # branch, with the table opened on that branch); a table opened on another branch is refused
        # here, before anything is written, rather than committed to main.
        if table.branch_name != guard.branch or guard.branch == MAIN_BRANCH:
            check_main_branch(table.schema.options)
        if table.branch_name != guard.branch:
            raise ValidationError(
                f"a table opened on branch {table.branch_name!r} committed to branch {guard.branch!r}",
                branch=guard.branch,
            )
        self.table = table
        self.file_io = table.file_io
        self.table_path = table.path
        self.schema = table.schema
        self.guard = guard
        self.commit_user = commit_user
        opts = table.options
        self.retry = retry or RetryPolicy.from_options(opts)
        self.merge_options = MergeOptions(
            target_file_size=opts.manifest_target_file_size,
            full_compaction_threshold=opts.manifest_full_compaction_threshold,
            merge_min_count=opts.manifest_merge_min_count,
        )
        self.snapshots = table.snapshot_manager
        self.reader = table.manifest_reader
        self.manifest_dir = self.file_io.join(self.table_path, "manifest")
        self._partition_types = [f.type for f in self.schema.partition_type.fields]
        self.roots = TableRoots.of(self.table_path, self.schema.options)
        self._validator = MessageValidator(self.schema, self.roots, schema_exists=table.schema_manager.exists)
        key_types = [self.schema.field(k).type for k in self.schema.trimmed_primary_keys]
        self._key_decoder: KeyDecoder | None = (
            (lambda raw: deserialize_row(raw, key_types)) if key_types else None
        )
        # The last snapshot this coordinator created: exactly the bytes on storage, so when it is still
        # the latest the next commit builds on it without reading it back.
        self._last_published: Snapshot | None = None
        # Staged-ahead base lists named by nothing, to delete once the lock is released (``_offer_ahead``)
        self._discarded: list[str] = []
        self._discarded_lock = threading.Lock()
        self._timeline: int | None = None

    # ---- public API -------------------------------------------------------------------------------

    def commit(
        self,
        messages: Sequence[CommitMessage],
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        *,
        overwrite: Mapping[str, Any] | OverwriteSpec | None = None,
        properties: Mapping[str, str] | None = None,
        watermark: int | None = None,
    ) -> CommitResult:
        """Commit ``messages`` as one APPEND (or OVERWRITE) snapshot and, if they carry compaction
        results, one COMPACT snapshot. Returns once both are durable; raises ``CommitConflictError``
        (nothing landed), ``CommitFailedError`` or ``CommitOutcomeUnknownError`` (resolve by reading
        storage or committing the same identifier again; nothing was cleaned up). A failure of the
        COMPACT part after the APPEND part landed is a ``CommitOutcomeUnknownError``.

        ``overwrite`` makes the first snapshot an OVERWRITE: a partition spec (static or dynamic by
        the table's ``dynamic-partition-overwrite`` option, as Java) or a resolved
        :class:`OverwriteSpec`; see :mod:`paimon_meta.table.write.overwrite`. A dynamic overwrite without
        new files commits no OVERWRITE snapshot.

        The same as :meth:`prepare` then :meth:`commit_prepared`."""
        prepared = self.prepare(
            messages, identifier, overwrite=overwrite, properties=properties, watermark=watermark
        )
        return self.commit_prepared(prepared)

    def prepare(
        self,
        messages: Sequence[CommitMessage],
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        *,
        overwrite: Mapping[str, Any] | OverwriteSpec | None = None,
        properties: Mapping[str, str] | None = None,
        watermark: int | None = None,
    ) -> PreparedCommit:
        """Everything of :meth:`commit` that needs no lock: validate the messages, plan the snapshots,
        serialize the recovery record and write the delta manifests of APPEND and COMPACT and their
        lists, and the changelog's (they do not depend on the latest snapshot). Nothing is recorded and
        nothing can be referenced yet: if the result is never committed its manifests are orphans
        (orphan cleanup removes them)."""
        self._validate(messages)
        limits.check_options("commit", "properties", properties or {})
        changes = collect_changes(messages, table_buckets=self.schema.num_buckets)
        spec = None if overwrite is None else self._overwrite_spec(overwrite, changes.append)
        plan = self._plan(changes, spec)
        keep = self.guard.keeps_messages
        body = serialize_commit_messages(list(messages), CURRENT_VERSION) if keep else b""
        writers = [self._new_writer() for _ in plan]
        pendings: list[Pending] = []
        # The delta manifests, their lists, the changelog's and the prestaged base list depend on no
        # write of each other (a list needs only its manifests' metadata, computed before the write;
        # the base merge reads the held snapshot's files, already on storage): staged in memory, then
        # PUT concurrently (one round trip on S3, not one per file). Nothing names them before the
        # snapshot does, and that is created only after this returned (I3 as before: on failure here
        # every one of them is deleted).
        deferred: list[tuple[str, bytes]] = []
        for writer in writers:
            writer.deferred = deferred
        # Other commits of this table object in flight: this one will most likely be staged on one of
        # theirs, not on the snapshot held now; its base list is staged under the lock then.
        busy = self.snapshots.commits_in_flight > 0
        try:
            for (kind, change_set), writer in zip(plan, writers, strict=True):
                pending = Pending(
                    str(uuid.uuid4()),
                    kind,
                    change_set,
                    identifier,
                    spec if kind is CommitKind.OVERWRITE else None,
                    properties,
                    watermark,
                    writer,
                )
                pendings.append(self._write_ahead(pending))
            if pendings and not busy:
                pendings[0] = self.prestage_base(pendings[0])
            for writer in writers:
                writer.deferred = None
            write_deferred(self.file_io, deferred)
        except BaseException:
            # Nothing names these files yet (I3: definitely unreferenced).
            for writer in writers:
                writer.deferred = None
                self._delete(writer.written)
            raise
        crashpoints.reached(CrashPoint.AFTER_MANIFESTS)
        self.snapshots.begin_commit()
        return PreparedCommit(self, identifier, body, spec, pendings, in_flight=True)

    @staticmethod
    def _plan(changes: CollectedChanges, spec: OverwriteSpec | None) -> list[tuple[CommitKind, ChangeSet]]:
        """The snapshots of one ``commit()`` call, in Java's order: APPEND (or OVERWRITE), then COMPACT."""
        plan: list[tuple[CommitKind, ChangeSet]] = []
        if spec is not None:
            # Java: in dynamic mode an overwrite with no new files deletes nothing (no snapshot).
            if not (spec.dynamic and not changes.append.table_files):
                plan.append((CommitKind.OVERWRITE, changes.append))
        elif not changes.append.is_empty():
            plan.append((CommitKind.APPEND, changes.append))
        if not changes.compact.is_empty():
            plan.append((CommitKind.COMPACT, changes.compact))
        return plan

    @staticmethod
    def _write_ahead(pending: Pending) -> Pending:
        """``pending`` with what it can write before any lock: the delta of APPEND and COMPACT (it does
        not depend on the latest snapshot; OVERWRITE's is staged under the guard) and the changelog,
        each with its list (a list of this commit's manifests only). Keeps the critical section short."""
        writer = pending.writer
        delta, delta_list = None, None
        if pending.kind is not CommitKind.OVERWRITE:
            delta = writer.write_manifests(pending.changes.table_files)
            delta_list = writer.write_manifest_list(delta)
        changelog = writer.write_manifests(pending.changes.changelog_files)
        changelog_list = writer.write_manifest_list(changelog) if changelog else None
        return dataclasses.replace(
            pending, delta=delta, delta_list=delta_list, changelog=changelog, changelog_list=changelog_list
        )

    def held_latest(self) -> Snapshot | None:
        """The newest snapshot this coordinator or its table object holds in memory (no I/O): the
        one it last created, else the newest its snapshot manager cached. A guess at the latest
        snapshot, checked under the guard by whoever builds on it."""
        return self._last_published or self.snapshots.newest_cached()

    def prestage_base(self, pending: Pending) -> Pending:
        """``pending`` with its base manifest list written now, before the lock, on :meth:`held_latest`
        (:class:`PrestagedBase`: used under the guard only if that is still the latest). Unchanged when
        nothing is held (an empty table, a fresh table object): staged under the guard then."""
        on = self.held_latest()
        if on is None:
            return pending
        writer = pending.writer
        mark = len(writer.written)
        name, size = self._write_base_list(on, writer)
        base = PrestagedBase(snapshot_key(on), name, size, tuple(writer.written[mark:]))
        return dataclasses.replace(pending, base=base)

    def discard_unused_base(self, pending: Pending, snapshot: Snapshot) -> None:
        """``snapshot``, the one published for ``pending``, is durable: delete ``pending``'s prestaged
        base list (and what its merge wrote) unless ``snapshot`` names it (it was restaged on another
        latest under the guard). Nothing else can name those files (I3: definitely unreferenced)."""
        base = pending.base
        if base is None or snapshot.base_manifest_list == base.name:
            return
        self._delete(base.files)
        pending.writer.forget(base.files)

    def commit_prepared(self, prepared: PreparedCommit) -> CommitResult:
        """Commit what :meth:`prepare` planned (once): each snapshot under the guard, in order."""
        if prepared.coordinator is not self:
            raise ValueError("a prepared commit is committed by the coordinator that prepared it")
        if prepared.used:
            raise ValueError("this prepared commit was already committed")
        prepared.used = True
        try:
            return self._commit_prepared(prepared)
        finally:
            prepared.settled()

    def _commit_prepared(self, prepared: PreparedCommit) -> CommitResult:
        identifier = prepared.identifier
        ids: list[int] = []
        commit_ids: list[str] = []
        deduplicated = False
        attempts = 0
        # Each snapshot of the call is its own commit (own commit id and events), in Java's order:
        # APPEND/OVERWRITE first, then COMPACT. The messages are stored with each so either can be finished.
        for index, pending in enumerate(prepared.pendings):
            commit_id, kind = pending.commit_id, pending.kind
            commit_ids.append(commit_id)
            self._announce(prepared, pending)
            try:
                sid, dedup, n = self._commit_kind(pending)
            except CommitOutcomeUnknownError:
                self.guard.finished(commit_id, outcome="unknown")
                raise
            except Exception as e:
                self.guard.finished(commit_id, outcome="failed", error=type(e).__name__, reason=str(e))
                for later in prepared.pendings[index + 1 :]:
                    self.delete_written(later)  # never to be referenced
                if ids:
                    # An earlier snapshot of this call is durable: "nothing landed" (what the other
                    # errors say) would be false. Re-committing the same identifier finishes the call
                    # exactly once (the published part is deduplicated).
                    raise CommitOutcomeUnknownError(
                        f"snapshots {ids} of commit {identifier} are published, its {kind.value} part "
                        f"failed: {e}; commit the same identifier again to finish it",
                        snapshot_ids=list(ids),
                        kind=kind.value,
                    ) from e
                raise
            self.guard.finished(commit_id, outcome="deduplicated" if dedup else "published", snapshot_id=sid)
            last = self._last_published
            if not dedup and last is not None and last.id == sid:
                self.guard.after_release(functools.partial(self.discard_unused_base, pending, last))
            ids.append(sid)
            deduplicated = deduplicated or dedup
            attempts += n
        return CommitResult(tuple(commit_ids), tuple(ids), deduplicated, attempts)

    def announce(self, prepared: PreparedCommit) -> str | None:
        """Hand the ``prepared`` record of ``prepared``'s first snapshot to the guard now, ahead of
        :meth:`commit_prepared` (which then does not again); returns its commit id (None: nothing to
        commit). Group commit sends it with the publish of the commit before (one round trip less), a
        batch with its opening round trip.

        Keeps step 3's invariant: the record (with the serialized messages) reaches the guard before
        anything of the commit can be published, so recovery can finish or abort it after a crash. The
        guard makes it durable no later than the lock is taken for it."""
        if prepared.coordinator is not self:
            raise ValueError("a prepared commit is announced by the coordinator that prepared it")
        if prepared.used or not prepared.pendings:
            return None
        pending = prepared.pendings[0]
        self._announce(prepared, pending)
        return pending.commit_id

    def _announce(self, prepared: PreparedCommit, pending: Pending) -> None:
        if pending.commit_id in prepared.announced:
            return
        prepared.announced.add(pending.commit_id)
        spec, kind = prepared.spec, pending.kind
        self.guard.prepared(
            CommitRecord(
                commit_id=pending.commit_id,
                commit_user=self.commit_user,
                commit_identifier=prepared.identifier,
                kind=kind,
                counts=pending.changes.counts(),
                messages=prepared.body,
                messages_version=CURRENT_VERSION,
                overwrite=spec.to_json() if spec is not None and kind is CommitKind.OVERWRITE else None,
            )
        )

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]:
        """Java ``filterCommitted``: the identifiers not yet committed by this user (restart recovery of a
        streaming writer). Identifiers of one user only grow, so anything <= its latest is committed."""
        latest_of_user = self._latest_identifier_of_user()
        if latest_of_user is None:
            return list(identifiers)
        return [i for i in identifiers if i > latest_of_user]

    # ---- one snapshot -----------------------------------------------------------------------------

    def _new_writer(self) -> ManifestWriter:
        paths, reader = self.reader.paths, self.reader
        return ManifestWriter(
            self.file_io,
            self.manifest_dir,
            self._partition_types,
            self.schema.id,
            compression=self.schema.core_options.manifest_compression,
            target_file_size=self.merge_options.target_file_size,
            # What we write is what a read would decode (files are immutable, names never reused), so
            # the next commit's merge and list reads come from memory.
            cache_manifest=lambda name, entries: reader.cache.put(paths.manifest_path(name), entries),
            cache_list=lambda name, metas: reader.list_cache.put(paths.manifest_path(name), metas),
        )

    def _commit_kind(self, pending: Pending) -> tuple[int, bool, int]:
        """Attempt ``pending`` under the guard until it is published or deduplicated (then decide, as
        below), retrying only definite failures of an attempt."""
        commit_id = pending.commit_id
        started = time.monotonic()
        # An unknown outcome raises out of this loop (see _publish), so every retry below follows a
        # definite failure: earlier attempts' files can never be referenced by a published snapshot.
        attempt = 0
        free = 0  # retries after StorageAhead: not counted against the retry policy (see below)
        while True:
            attempt += 1
            mark = len(pending.writer.written)
            try:
                try:
                    with self.guard.session(commit_id, attempt) as session:
                        sid, dedup, hint = self._attempt(session, attempt, pending)
                finally:
                    self._delete_discarded()
                if hint:
                    # After the lock's release (the publishing transaction released it, or the group's
                    # hold does): LATEST is only a hint, verified by every reader
                    # (``SnapshotManager.latest_snapshot_id`` trusts LATEST=N only if snapshot-(N+1)
                    # is absent, as Java's ``SnapshotManager.latestSnapshotId``), so a hint that a
                    # later commit's overtook and this one then set back is only a slower read, never
                    # a wrong one.
                    self.guard.after_release(
                        functools.partial(advance_hints, self.snapshots, sid),
                        key=self.snapshots.paths.latest_hint_path,
                    )
                    if sid == 1:  # the keyed LATEST above may be a later one's in a group
                        self.guard.after_release(functools.partial(earliest_hint, self.snapshots))
                if dedup:
                    # Nothing of ours can be referenced: the match is an earlier commit() call.
                    self.delete_written(pending)
                return sid, dedup, attempt
            except (CommitConflictError, TableRowChangedError, TableNotFoundError) as e:
                # Definite: nothing was published. Java does not retry a real conflict either (and a
                # changed or dropped row, found under the lock before staging, needs the caller to read
                # it again).
                self.delete_written(pending)
                raise e
            except StorageAhead as e:
                # The create lost after a latest id not checked against storage (guard: "S3 floor"):
                # storage is ahead of the log (another engine, a crashed writer, maybe an earlier send
                # of this very commit). Definite: nothing of ours is named. The next session checks
                # storage, records what it finds and redoes the dedupe lookup (I1), at once and without
                # spending the retry budget (a table must stay committable with commit.max-retries=0).
                # Bounded: that next session is verified, so it cannot raise this again.
                self.drop_attempt(pending, mark)
                self.guard.storage_may_be_ahead()
                free += 1
                self.record_retry(commit_id, attempt, str(e), 0.0, error=type(e).__name__)
            except (SnapshotRaceLost, LockLostError) as e:
                # Definite failure of this attempt only: drop what it staged and retry on the new state.
                self.drop_attempt(pending, mark)
                if not self.retry.may_retry(attempt - free, started):
                    self.delete_written(pending)
                    raise CommitFailedError(
                        f"commit {commit_id} gave up after {attempt} attempts: {e}",
                        commit_id=commit_id,
                        attempts=attempt,
                    ) from e
                wait = self.retry.wait_ms(attempt - free)
                self.record_retry(commit_id, attempt, str(e), wait, error=type(e).__name__)
                time.sleep(wait / 1000)

    def _attempt(self, session: GuardSession, attempt: int, p: Pending) -> tuple[int, bool, bool]:
        """One attempt under the guard: base, stage, fence, publish, record. (snapshot id,
        deduplicated, whether to write the hints once the session ended)."""
        latest = self.base(session)
        staged = self.stage(session, attempt, p, latest)
        if isinstance(staged, Deduplicated):
            return staged.snapshot_id, True, False
        # Other commits of this table object waiting: the next holder stages on this snapshot; its base
        # list is merged now, in memory, before the fencing check (so the publishing transaction's idle
        # window, bounded by the lease, holds no more local work than before), and PUT together with
        # the snapshot once fenced (one round trip for both).
        ahead = self._stage_ahead(staged.snapshot) if self.snapshots.commits_in_flight > 1 else None
        # Fencing: a holder whose lease lapsed must not publish (LockLostError -> definite failure).
        session.before_publish()
        crashpoints.reached(CrashPoint.BEFORE_PUBLISH)
        writes = start_writes(self.file_io, ahead[1]) if ahead is not None else []
        published = False
        try:
            self._publish(staged, p.writer)
            published = True
        except SnapshotRaceLost as e:
            if session.storage_unverified():
                raise StorageAhead(f"{e} (storage was ahead of the metastore's pointer)") from None
            raise
        finally:
            if ahead is not None:
                self._offer_ahead(ahead[0], writes, published=published)
        self.created(staged.snapshot)
        # The hints are written by the caller after the session (the lock released), by the last commit
        # of a group hold (a reader meanwhile lists the directory).
        snap = staged.snapshot
        hint = snap.id == 1 or not session.defer_hints()
        try:
            session.published(snap, attempt=attempt, details=p.published_details(snap))
        except Exception:  # the snapshot is durable: the commit succeeded whatever the log says
            log.warning(
                "snapshot %s is published but recording it failed: the holder records it once the "
                "metastore answers (a 'deferred recording' line says so), else the next holder or "
                "paimon-meta recover does",
                snap.id,
                exc_info=True,
            )
        crashpoints.reached(CrashPoint.AFTER_EVENT)
        return snap.id, False, hint

    # ---- the attempt API: the steps every commit path drives (module docstring) ----------------------

    def base(self, session: GuardSession) -> Snapshot | None:
        """The latest snapshot, read under the guard of ``session``: what the next snapshot is built on.

        Keeps I4 (contiguity): snapshot N+1 is staged only on snapshot N read under the guard, never on
        a cached or earlier read (a metastore guard first records what storage has beyond its log)."""
        latest_id = session.latest_snapshot_id()
        self.observe_timeline(session)
        latest = self._snapshot(latest_id)
        crashpoints.reached(CrashPoint.AFTER_LOCK)
        return latest

    def observe_timeline(self, session: GuardSession) -> None:
        """Adopt the table's timeline as ``session`` read it (after its ``latest_snapshot_id``).

        Keeps I4 across rollbacks: a rollback starts another timeline and reuses snapshot ids, so
        nothing cached under an earlier timeline may be a base. A batch calls it for each session after
        the first, whose :meth:`base` it builds on."""
        if session.timeline != self._timeline:
            self._last_published = None
            self.snapshots.observe_timeline(session.timeline)
            self._timeline = session.timeline

    def stage(
        self, session: GuardSession, attempt: int, pending: Pending, latest: Snapshot | None
    ) -> Staged | Deduplicated:
        """Under the guard, on ``latest`` (:meth:`base`, or the snapshot a batch staged just before):
        the dedupe lookup, the conflict check, then the snapshot staged. Nothing is published.

        Keeps I1 (a commit already published is :class:`Deduplicated`, never staged again), no lost
        update (``CommitConflictError`` when the changes do not apply to ``latest``; the
        ``conflict_checked`` event records either outcome) and I4 (the snapshot is ``latest`` + 1).
        The files it writes are this attempt's (see :meth:`drop_attempt`)."""
        existing = session.find_committed(self.commit_user, pending.identifier, pending.kind, latest)
        if existing is not None:
            session.record("deduplicated", attempt=attempt, kind=pending.kind.value, snapshot_id=existing)
            return Deduplicated(existing)
        started = time.monotonic()
        table_files: Sequence[ManifestEntry] = pending.changes.table_files
        delta = pending.delta
        if pending.overwrite is not None:
            table_files = self._overwrite_entries(latest, pending.overwrite, pending.changes.table_files)
            delta = pending.writer.write_manifests(table_files)
        self._checked(session, attempt, pending, latest, table_files, started=started)
        assert delta is not None
        staged = self._stage(latest, pending, table_files, delta)
        self.snapshots.live_files.staged(latest, staged.snapshot, table_files)
        session.set_statistics(partition_deltas(table_files, self.table.partition_spec))
        return staged

    def created(self, snapshot: Snapshot) -> None:
        """``snapshot`` is on storage (durable, created only if absent): build on it from now on.

        Call it under the guard right after ``snapshot-N`` was created, before anything else is
        published: the next commit of this coordinator (or of another sharing the table) then stages
        on it without reading it back, which keeps I4 without a read."""
        self._last_published = snapshot
        self.snapshots.remember(snapshot)  # other coordinators sharing this table build on it without a read
        self.snapshots.live_files.published(snapshot)
        crashpoints.reached(CrashPoint.AFTER_SNAPSHOT)

    def drop_attempt(self, pending: Pending, mark: int) -> None:
        """Delete the files ``pending``'s writer wrote after ``mark`` (``len(writer.written)`` when the
        attempt began) and forget them; what was written before (the prepared delta) stays.

        I3: call it only once the attempt definitely failed (nothing it staged is named by a snapshot),
        never after an unknown outcome. The commit may then be attempted again."""
        staged = pending.writer.written[mark:]
        self._delete(staged)
        pending.writer.forget(staged)

    def delete_written(self, pending: Pending) -> None:
        """Delete every file written for ``pending`` (before the lock and by every attempt).

        I3: call it only when no snapshot can ever name them: the commit definitely failed, was
        deduplicated (an earlier call published it) or will never be attempted."""
        self._delete(pending.writer.written)

    def record_retry(
        self, commit_id: str, attempt: int, reason: str, wait_ms: float, *, error: str | None = None
    ) -> None:
        """Log (``retried``, no lock needed) that attempt ``attempt`` definitely failed for ``reason``
        (``error``: the failure's class, e.g. ``LockLostError`` for a lease not renewed in time) and the
        commit is attempted again after ``wait_ms``."""
        details: dict[str, object] = {"reason": reason, "wait_ms": round(wait_ms, 3)}
        if error is not None:
            details["error"] = error
        self.guard.event(commit_id, "retried", attempt=attempt, **details)

    def _checked(
        self,
        session: GuardSession,
        attempt: int,
        pending: Pending,
        latest: Snapshot | None,
        table_files: Sequence[ManifestEntry],
        *,
        started: float,
    ) -> None:
        """The conflict check of ``table_files`` on ``latest`` and its ``conflict_checked`` event (its
        duration counted from ``started``)."""
        outcome: dict[str, Any] = {"outcome": "ok"}
        try:
            self._check(latest, pending.kind, pending.changes, table_files)
        except CommitConflictError as e:
            outcome = {"outcome": "conflict", "reason": e.fields.get("reason"), "message": str(e)}
            raise
        finally:
            session.record(
                "conflict_checked",
                attempt=attempt,
                kind=pending.kind.value,
                base_snapshot_id=None if latest is None else latest.id,
                duration_ms=round((time.monotonic() - started) * 1000, 3),
                **outcome,
            )

    def _snapshot(self, snapshot_id: int | None) -> Snapshot | None:
        if snapshot_id is None:
            return None
        last = self._last_published
        if last is not None and last.id == snapshot_id:
            return last
        return self.snapshots.snapshot(snapshot_id)

    # ---- steps ------------------------------------------------------------------------------------

    def _check(
        self,
        latest: Snapshot | None,
        kind: CommitKind,
        changes: ChangeSet,
        table_files: Sequence[ManifestEntry],
    ) -> None:
        needs_base = kind is not CommitKind.APPEND or changes.has_deletes or bool(changes.index_files)
        self._check_not_live(latest, table_files)
        if latest is None:
            check_conflicts([], table_files, key_decoder=self._key_decoder)
            return
        if not needs_base:
            # Java skips the base scan for pure appends (level-0 ADDs of fresh names cannot conflict), but
            # still refuses a bucket count that differs from the table's.
            n = self.schema.num_buckets
            for e in table_files:
                if n > 0 and e.total_buckets not in (n, 0):
                    raise CommitConflictError(
                        f"file {e.file.file_name} was written for {e.total_buckets} buckets, "
                        f"the table has {n}",
                        reason="bucket_count_changed",
                        file=e.file.file_name,
                    )
            merge_for_commit(table_files)
            return
        partitions = {e.partition for e in table_files}
        base = [e for e in self._live_entries(latest) if e.partition in partitions]
        check_conflicts(base, table_files, key_decoder=self._key_decoder)

    def _check_not_live(self, latest: Snapshot | None, table_files: Sequence[ManifestEntry]) -> None:
        """No file is added that is live in ``latest`` already, unless this change deletes it too (an
        upgrade to another level). Java skips this for pure appends, trusting writers to name files
        uniquely; a client of the service is not trusted (a re-added file breaks every later read)."""
        again = readded(self.snapshots, self.reader, latest, table_files)
        if again:
            name = again[0].file.file_name
            raise CommitConflictError(
                f"Trying to add file {name} which is already added (live in snapshot "
                f"{latest.id if latest else None}).",
                reason="file_already_added",
                file=name,
                files=len(again),
            )

    def _overwrite_spec(
        self, overwrite: Mapping[str, Any] | OverwriteSpec, changes: ChangeSet
    ) -> OverwriteSpec:
        """Resolve the caller's overwrite and check, before anything is written, that every new file
        lies inside its partition spec."""
        spec = OverwriteSpec.resolve(overwrite, self.schema)
        matcher = PartitionMatcher(spec, self.schema)
        for e in changes.table_files:
            if not matcher.matches(e.partition):
                raise ValidationError(
                    f"file {e.file.file_name} does not belong to the overwritten partition "
                    f"{dict(spec.partition)}",
                    file=e.file.file_name,
                )
        return spec

    def _overwrite_entries(
        self, latest: Snapshot | None, spec: OverwriteSpec, adds: Sequence[ManifestEntry]
    ) -> list[ManifestEntry]:
        """The new files plus a DELETE of every live file the overwrite replaces: the partitions of the
        new files (dynamic) or every partition the spec matches (static)."""
        replaced: Callable[[bytes], bool]
        if spec.dynamic:
            new_partitions = {e.partition for e in adds}
            replaced = new_partitions.__contains__
        else:
            replaced = PartitionMatcher(spec, self.schema).matches
        deletes = []
        if latest is not None:
            for e in self._live_entries(latest):
                if replaced(e.partition):
                    deletes.append(
                        ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                    )
        return [*deletes, *adds]

    def _stage(
        self,
        latest: Snapshot | None,
        p: Pending,
        table_files: Sequence[ManifestEntry],
        delta: list[ManifestFileMeta],
    ) -> Staged:
        """Snapshot ``latest`` + 1 with ``table_files`` (whose manifests are ``delta``): the merged base
        list, the delta, changelog and index lists written (non-durable), the JSON serialized."""
        writer, watermark = p.writer, p.watermark
        prev_total = 0
        index_manifest = None
        if latest is not None:
            prev_total = latest.total_record_count or 0
            index_manifest = latest.index_manifest
            if latest.watermark is not None:
                watermark = latest.watermark if watermark is None else max(watermark, latest.watermark)
        pre = p.base
        if pre is not None and latest is not None and pre.on == snapshot_key(latest):
            # Merged before the lock from this very snapshot (PrestagedBase's invariant): no write here.
            base_name, base_size = pre.name, pre.size
        elif latest is not None and (ahead := self._take_ahead(latest)) is not None:
            # Staged on this very snapshot by its committer, on storage already (AheadBase's
            # invariant): this attempt's from now on (deleted if it definitely fails; on local disk
            # synced with its snapshot).
            base_name, base_size = ahead.name, ahead.size
            writer.written.extend(ahead.files)
            writer.unsynced.extend(ahead.paths)
        else:
            base_name, base_size = self._write_base_list(latest, writer)
        # An OVERWRITE's delta depends on the latest snapshot: its list is written here, each attempt.
        delta_name, delta_size = p.delta_list or writer.write_manifest_list(delta)
        changelog_name: str | None = None
        changelog_size: int | None = None
        if p.changelog:
            changelog_name, changelog_size = p.changelog_list or writer.write_manifest_list(p.changelog)
        if p.changes.index_files:
            index_manifest = writer.write_index_manifest(
                self._merge_index(index_manifest, p.changes.index_files)
            )
        record_delta = sum(
            e.file.row_count if e.kind is FileKind.ADD else -e.file.row_count for e in table_files
        )
        if prev_total + record_delta > MAX_BIGINT:
            # Java keeps the total in a long, the statistics in a BIGINT: an overflow would break both.
            # Each file's count is within BIGINT (step 1); their sum on this base is not.
            raise CommitConflictError(
                f"the table would hold {prev_total + record_delta} rows, over BIGINT "
                f"({prev_total} in snapshot {latest.id if latest else None} + {record_delta})",
                reason="total_record_count_overflow",
            )
        snapshot = Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=self.schema.id,
            base_manifest_list=base_name,
            base_manifest_list_size=base_size,
            delta_manifest_list=delta_name,
            delta_manifest_list_size=delta_size,
            changelog_manifest_list=changelog_name,
            changelog_manifest_list_size=changelog_size,
            index_manifest=index_manifest,
            commit_user=self.commit_user,
            commit_identifier=p.identifier,
            commit_kind=p.kind,
            time_millis=int(time.time() * 1000),
            total_record_count=prev_total + record_delta,
            delta_record_count=record_delta,
            changelog_record_count=sum(e.file.row_count for e in p.changes.changelog_files),
            watermark=watermark,
            properties=dict(p.properties) if p.properties else None,
            next_row_id=latest.next_row_id if latest else None,
            uuid=str(uuid.uuid4()),
        )
        return Staged(snapshot, snapshot_to_json(snapshot).encode())

    def _stage_ahead(self, snapshot: Snapshot) -> tuple[AheadBase, list[tuple[str, bytes]]] | None:
        """The base list of the snapshot after ``snapshot`` (about to be created), staged in memory by a
        writer of its own (never this attempt's: nothing of this commit names it), with the files to
        write; None if merging fails (the next holder stages its own, as without it)."""
        writer = self._new_writer()
        deferred: list[tuple[str, bytes]] = []
        writer.deferred = deferred
        try:
            name, size = self._write_base_list(snapshot, writer)
        except Exception:
            log.warning("staging the base list after snapshot %s failed", snapshot.id, exc_info=True)
            return None
        ahead = AheadBase(
            snapshot_key(snapshot),
            self.schema.id,
            self.merge_options,
            name,
            size,
            tuple(writer.written),
            tuple(path for path, _ in deferred),
        )
        return ahead, deferred

    def _offer_ahead(self, ahead: AheadBase, writes: Sequence[Future[Any]], *, published: bool) -> None:
        """Once every write of ``ahead`` ended: offer it to the next holder if they all succeeded and
        its snapshot was created (``published``), else delete it (named by nothing: no one could take
        it). A list it replaces, never taken, is deleted too. Either once the lock is released."""
        wait(writes)
        ok = published and all(f.exception() is None for f in writes)
        if not ok:
            self._discard(ahead.files)
            return
        replaced = self.snapshots.offer_next_base(ahead)
        if isinstance(replaced, AheadBase):
            self._discard(replaced.files)

    def _discard(self, names: Sequence[str]) -> None:
        """``names``, named by nothing, are deleted once this session's lock is released."""
        with self._discarded_lock:
            self._discarded.extend(names)

    def _delete_discarded(self) -> None:
        """After a session: delete what :meth:`_discard` was given, once the lock is released (at once,
        or when a group's hold ends)."""
        with self._discarded_lock:
            names, self._discarded = self._discarded, []
        if names:
            self.guard.after_release(functools.partial(self._delete, names))

    def delete_files(self, names: Sequence[str]) -> None:
        """Delete manifest files ``names`` (best effort: one that cannot be is left to orphan cleanup).

        I3: only files nothing names and nothing can name any more."""
        self._delete(names)

    def _take_ahead(self, latest: Snapshot) -> AheadBase | None:
        """The base list staged ahead on ``latest`` (:class:`AheadBase`), taken, if there is one that
        fits this commit; None otherwise."""
        key = snapshot_key(latest)

        def fits(staged: object) -> bool:
            return (
                isinstance(staged, AheadBase)
                and staged.on == key
                and staged.schema_id == self.schema.id
                and staged.options == self.merge_options
            )

        taken = self.snapshots.take_next_base(fits)
        return taken if isinstance(taken, AheadBase) else None

    def _write_base_list(self, latest: Snapshot | None, writer: ManifestWriter) -> tuple[str, int]:
        """The base manifest list of the snapshot after ``latest``: its base and delta lists merged
        (the table's merge options), written by ``writer``. Depends on ``latest`` only."""
        previous: list[ManifestFileMeta] = []
        if latest is not None:
            previous = self._read_list(latest.base_manifest_list) + self._read_list(
                latest.delta_manifest_list
            )
        base_after = merge_manifests(
            previous, read=self._read_manifest, writer=writer, options=self.merge_options
        )
        return writer.write_manifest_list(base_after)

    def _publish(self, staged: Staged, writer: ManifestWriter) -> None:
        """I2: create snapshot-N only if absent (:func:`create_snapshot_file`).

        A snapshot must never be durable while a manifest it references is not. Every manifest and
        list of this commit (the delta written before the lock included) was created non-durable;
        ``sync_first`` makes them durable (local disk: fsyncs them, concurrently with the snapshot's own
        content) before the snapshot's name appears (every repeat does it again: a failure may have
        been theirs). On S3 each manifest was durable when written."""
        create_snapshot_file(self.snapshots, staged.snapshot.id, staged.body, sync_first=writer.unsynced)

    # ---- reading ----------------------------------------------------------------------------------

    def _read_list(self, name: str) -> list[ManifestFileMeta]:
        return list(self.reader.manifest_list(name))

    def _read_manifest(self, meta: ManifestFileMeta) -> list[ManifestEntry]:
        # Manifests are immutable, so the table's cache by file name is always valid.
        return list(self.reader.manifest(meta.file_name))

    def _live_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        entries = self.reader.data_entries(snapshot)
        return [e for e in merge_for_commit(entries).values() if e.kind is FileKind.ADD]

    def _merge_index(
        self, previous: str | None, changes: Sequence[IndexManifestEntry]
    ) -> list[IndexManifestEntry]:
        entries: dict[tuple[bytes, int, str], IndexManifestEntry] = {}
        if previous is not None:
            for e in self.reader.index_manifest(previous):
                entries[(e.partition, e.bucket, e.index_file.file_name)] = e
        for e in changes:
            key = (e.partition, e.bucket, e.index_file.file_name)
            if e.kind is FileKind.ADD:
                entries[key] = e
            else:
                entries.pop(key, None)
        return list(entries.values())

    def _latest_identifier_of_user(self) -> int | None:
        mine = self.snapshots.snapshots_of_user(self.commit_user, self.snapshots.latest_snapshot())
        snap = next(mine, None)
        return None if snap is None else snap.commit_identifier

    # ---- housekeeping -----------------------------------------------------------------------------

    def _validate(self, messages: Sequence[CommitMessage]) -> None:
        # Step 0: a table whose rows carry ids assigned at commit is not committed here.
        for key in ROW_ID_OPTIONS:
            if (self.schema.options.get(key) or "false").strip().lower() == "true":
                raise UnsupportedError(
                    f"table option {key}=true: committing messages to such a table is not supported: its "
                    "commit assigns row ids (each new file's firstRowId, the snapshot's nextRowId) that "
                    "paimon_meta's committer does not assign; commit through POST .../commit with the "
                    "snapshot the client builds (pypaimon and Java do), which the service publishes as is",
                    option=key,
                )
        # Step 1: nothing a message names may leave the table or break its numbers (commit/validate.py).
        self._validator.validate(messages)

    def _delete(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.file_io.delete(self.file_io.join(self.manifest_dir, name))
            except FileIOError:
                log.warning("could not delete %s; orphan cleanup will", name)
