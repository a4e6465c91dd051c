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
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from paimon_meta.commit import crashpoints
from paimon_meta.commit.changes import ChangeSet, collect_changes, partition_deltas
from paimon_meta.commit.conflicts import KeyDecoder, check_conflicts, merge_for_commit
from paimon_meta.commit.crashpoints import CrashPoint
from paimon_meta.commit.guard import CommitGuard, CommitRecord, GuardSession
from paimon_meta.commit.manifests import ManifestWriter, MergeOptions, merge_manifests
from paimon_meta.commit.publish import SnapshotRaceLost, advance_hints, create_snapshot_file
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
    ValidationError,
)
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
from paimon_meta.table.option_policy import check_main_branch
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec, PartitionMatcher

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What ``commit()`` returns once every snapshot of the call is durable on storage."""

    commit_ids: tuple[str, ...]
    snapshot_ids: tuple[int, ...]
    deduplicated: bool
    attempts: int


@dataclass(slots=True)
class _Staged:
    snapshot: Snapshot
    body: bytes
    files: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Pending:
    """One snapshot to commit (one kind of one ``commit()`` call) and what its attempts have written."""

    commit_id: str
    kind: CommitKind
    changes: ChangeSet
    identifier: int
    overwrite: OverwriteSpec | None
    properties: Mapping[str, str] | None
    watermark: int | None
    writer: ManifestWriter
    delta: list[ManifestFileMeta] | None = None
    changelog: list[ManifestFileMeta] = field(default_factory=list)
    # The delta and changelog manifest lists (name, size), written before the lock with the delta.
    delta_list: tuple[str, int] | None = None
    changelog_list: tuple[str, int] | None = None
    # Its ``prepared`` record was handed to the guard (see CommitCoordinator.announce).
    announced: bool = False


@dataclass(slots=True)
class PreparedCommit:
    """A ``commit()`` call up to the lock (:meth:`CommitCoordinator.prepare`): its snapshots planned,
    their delta manifests written. Committed once, by the coordinator that prepared it."""

    coordinator: CommitCoordinator
    identifier: int
    body: bytes
    spec: OverwriteSpec | None
    pendings: list[_Pending]
    used: bool = False

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
        if not self.used:
            self.used = True
            for pending in self.pendings:
                self.coordinator._delete(pending.writer.written)


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
        # Snapshots are published under the table path (main); a table opened on another branch is
        # refused here, before anything is written, rather than committed to main.
        check_main_branch(table.schema.options)
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
        changes = collect_changes(messages, table_buckets=self.schema.num_buckets)
        spec = None if overwrite is None else self._overwrite_spec(overwrite, changes.append)
        plan: list[tuple[CommitKind, ChangeSet]] = []
        if spec is not None:
            # Java: in dynamic mode an overwrite with no new files deletes nothing (no snapshot).
            if not (spec.dynamic and not changes.append.table_files):
                plan.append((CommitKind.OVERWRITE, changes.append))
        elif not changes.append.is_empty():
            plan.append((CommitKind.APPEND, changes.append))
        if not changes.compact.is_empty():
            plan.append((CommitKind.COMPACT, changes.compact))
        keep = self.guard.keeps_messages
        body = serialize_commit_messages(list(messages), CURRENT_VERSION) if keep else b""
        pendings = [
            _Pending(
                str(uuid.uuid4()),
                kind,
                change_set,
                identifier,
                spec if kind is CommitKind.OVERWRITE else None,
                properties,
                watermark,
                self._new_writer(),
            )
            for kind, change_set in plan
        ]
        try:
            for pending in pendings:
                # The delta of APPEND and COMPACT does not depend on the latest snapshot: written here,
                # before any lock, to keep the critical section short. OVERWRITE's is staged under it.
                if pending.kind is not CommitKind.OVERWRITE:
                    pending.delta = pending.writer.write_manifests(pending.changes.table_files)
                    # Its list too: a list of this commit's manifests only.
                    pending.delta_list = pending.writer.write_manifest_list(pending.delta)
                pending.changelog = pending.writer.write_manifests(pending.changes.changelog_files)
                if pending.changelog:
                    pending.changelog_list = pending.writer.write_manifest_list(pending.changelog)
        except BaseException:
            for pending in pendings:
                self._delete(pending.writer.written)
            raise
        crashpoints.reached(CrashPoint.AFTER_MANIFESTS)
        return PreparedCommit(self, identifier, body, spec, pendings)

    def commit_prepared(self, prepared: PreparedCommit) -> CommitResult:
        """Commit what :meth:`prepare` planned (once): each snapshot under the guard, in order."""
        if prepared.coordinator is not self:
            raise ValueError("a prepared commit is committed by the coordinator that prepared it")
        if prepared.used:
            raise ValueError("this prepared commit was already committed")
        prepared.used = True
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
                    self._delete(later.writer.written)  # never to be referenced
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
            ids.append(sid)
            deduplicated = deduplicated or dedup
            attempts += n
        return CommitResult(tuple(commit_ids), tuple(ids), deduplicated, attempts)

    def announce(self, prepared: PreparedCommit) -> str | None:
        """Hand the ``prepared`` record of ``prepared``'s first snapshot to the guard now, ahead of
        :meth:`commit_prepared` (which then does not again); returns its commit id (None: nothing to
        commit). Group commit sends it with the publish of the commit before (one round trip less)."""
        if prepared.coordinator is not self:
            raise ValueError("a prepared commit is announced by the coordinator that prepared it")
        if prepared.used or not prepared.pendings:
            return None
        pending = prepared.pendings[0]
        self._announce(prepared, pending)
        return pending.commit_id

    def _announce(self, prepared: PreparedCommit, pending: _Pending) -> None:
        if pending.announced:
            return
        pending.announced = True
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

    def _commit_kind(self, pending: _Pending) -> tuple[int, bool, int]:
        writer, commit_id = pending.writer, pending.commit_id
        started = time.monotonic()
        # An unknown outcome raises out of this loop (see _publish), so every retry below follows a
        # definite failure: earlier attempts' files can never be referenced by a published snapshot.
        attempt = 0
        while True:
            attempt += 1
            mark = len(writer.written)
            try:
                with self.guard.session(commit_id, attempt) as session:
                    sid, dedup = self._attempt(session, attempt, pending)
                if dedup:
                    # Nothing of ours can be referenced: the match is an earlier commit() call.
                    self._delete(writer.written)
                return sid, dedup, attempt
            except (CommitConflictError, TableRowChangedError, TableNotFoundError) as e:
                # Definite: nothing was published. Java does not retry a real conflict either (and a
                # changed or dropped row, found under the lock before staging, needs the caller to read
                # it again).
                self._delete(writer.written)
                raise e
            except (SnapshotRaceLost, LockLostError) as e:
                # Definite failure of this attempt only: drop what it staged and retry on the new state.
                staged = writer.written[mark:]
                self._delete(staged)
                writer.forget(staged)
                if not self.retry.may_retry(attempt, started):
                    self._delete(writer.written)
                    raise CommitFailedError(
                        f"commit {commit_id} gave up after {attempt} attempts: {e}",
                        commit_id=commit_id,
                        attempts=attempt,
                    ) from e
                wait = self.retry.wait_ms(attempt)
                self._record_retry(commit_id, attempt, str(e), wait)
                time.sleep(wait / 1000)

    def _attempt(self, session: GuardSession, attempt: int, p: _Pending) -> tuple[int, bool]:
        latest = self._base(session)
        staged = self._stage_attempt(session, attempt, p, latest)
        if isinstance(staged, int):
            return staged, True
        # Fencing: a holder whose lease lapsed must not publish (LockLostError -> definite failure).
        session.before_publish()
        crashpoints.reached(CrashPoint.BEFORE_PUBLISH)
        self._publish(staged, p.writer)
        self._created(staged.snapshot)
        # Still under the guard, so hints only move forward (they are only hints: readers verify them).
        # In a group the last commit of the hold writes them (a reader meanwhile lists the directory).
        snap = staged.snapshot
        if snap.id == 1 or not session.defer_hints():
            advance_hints(self.snapshots, snap.id)
        try:
            session.published(snap, attempt=attempt, details=self._details(p, snap))
        except Exception:  # the snapshot is durable: the commit succeeded whatever the log says
            log.exception(
                "snapshot %s is published but recording it failed; recovery will record it", snap.id
            )
        crashpoints.reached(CrashPoint.AFTER_EVENT)
        return snap.id, False

    def _base(self, session: GuardSession) -> Snapshot | None:
        """The latest snapshot, read under the guard: what the next snapshot is built on (I4)."""
        latest_id = session.latest_snapshot_id()
        self._observe_timeline(session)
        latest = self._snapshot(latest_id)
        crashpoints.reached(CrashPoint.AFTER_LOCK)
        return latest

    def _observe_timeline(self, session: GuardSession) -> None:
        # I4 across rollbacks: a rollback (another timeline) reuses snapshot ids, so nothing cached
        # under an earlier timeline may be the base.
        if session.timeline != self._timeline:
            self._last_published = None
            self.snapshots.observe_timeline(session.timeline)
            self._timeline = session.timeline

    def _stage_attempt(
        self, session: GuardSession, attempt: int, p: _Pending, latest: Snapshot | None
    ) -> _Staged | int:
        """Under the guard, on ``latest``: the dedupe lookup (I1; an int: the snapshot that already holds
        this commit), the conflict check (raises ``CommitConflictError``), then the snapshot staged
        (its lists written non-durable; nothing is published)."""
        existing = session.find_committed(self.commit_user, p.identifier, p.kind, latest)
        if existing is not None:
            session.record("deduplicated", attempt=attempt, kind=p.kind.value, snapshot_id=existing)
            return existing
        t0 = time.monotonic()
        table_files = p.changes.table_files
        if p.overwrite is not None:
            table_files = self._overwrite_entries(latest, p.overwrite, p.changes.table_files)
            p.delta = p.writer.write_manifests(table_files)
        outcome: dict[str, Any] = {"outcome": "ok"}
        try:
            self._check(latest, p.kind, p.changes, table_files)
        except CommitConflictError as e:
            outcome = {"outcome": "conflict", "reason": e.fields.get("reason"), "message": str(e)}
            raise
        finally:
            session.record(
                "conflict_checked",
                attempt=attempt,
                kind=p.kind.value,
                base_snapshot_id=None if latest is None else latest.id,
                duration_ms=round((time.monotonic() - t0) * 1000, 3),
                **outcome,
            )
        staged = self._stage(latest, p, table_files)
        self.snapshots.live_files.staged(latest, staged.snapshot, table_files)
        session.set_statistics(partition_deltas(table_files, self.table.partition_spec))
        return staged

    def _created(self, snap: Snapshot) -> None:
        """``snap`` is on storage (durable): build on it without reading it back."""
        self._last_published = snap
        self.snapshots.remember(snap)  # other coordinators sharing this table build on it without a read
        self.snapshots.live_files.published(snap)
        crashpoints.reached(CrashPoint.AFTER_SNAPSHOT)

    @staticmethod
    def _details(p: _Pending, snap: Snapshot) -> dict[str, Any]:
        return {
            "kind": p.kind.value,
            "base_manifest_list": snap.base_manifest_list,
            "delta_manifest_list": snap.delta_manifest_list,
            "record_delta": snap.delta_record_count,
            "total_records": snap.total_record_count,
            "snapshot_uuid": snap.uuid,
            **p.changes.counts(),
        }

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

    def _stage(self, latest: Snapshot | None, p: _Pending, table_files: Sequence[ManifestEntry]) -> _Staged:
        assert p.delta is not None
        writer, watermark = p.writer, p.watermark
        previous: list[ManifestFileMeta] = []
        prev_total = 0
        index_manifest = None
        if latest is not None:
            previous = self._read_list(latest.base_manifest_list) + self._read_list(
                latest.delta_manifest_list
            )
            prev_total = latest.total_record_count or 0
            index_manifest = latest.index_manifest
            if latest.watermark is not None:
                watermark = latest.watermark if watermark is None else max(watermark, latest.watermark)
        base_after = merge_manifests(
            previous, read=self._read_manifest, writer=writer, options=self.merge_options
        )
        base_name, base_size = writer.write_manifest_list(base_after)
        # An OVERWRITE's delta depends on the latest snapshot: its list is written here, each attempt.
        delta_name, delta_size = p.delta_list or writer.write_manifest_list(p.delta)
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
        return _Staged(snapshot, snapshot_to_json(snapshot).encode())

    def _publish(self, staged: _Staged, writer: ManifestWriter) -> None:
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
        # Step 1: nothing a message names may leave the table or break its numbers (commit/validate.py).
        self._validator.validate(messages)

    def _record_retry(self, commit_id: str, attempt: int, reason: str, wait_ms: float) -> None:
        self.guard.event(commit_id, "retried", attempt=attempt, reason=reason, wait_ms=round(wait_ms, 3))

    def _delete(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self.file_io.delete(self.file_io.join(self.manifest_dir, name))
            except FileIOError:
                log.warning("could not delete %s; orphan cleanup will", name)
