"""Batch commit: several queued commits of one table, under a lock hold, made durable together.

Group commit (:mod:`paimon_meta.commit.metastore.group`) commits the queue of a table one commit
after the other
under one lock hold; each commit then still waits on its own for its snapshot's fsyncs and for the
metastore's commit of its record. A batch takes the commits queued at the head (each a single APPEND or
COMPACT snapshot) and pays those waits once:

1. one round trip opens them all (:meth:`LockHold.open_batch`): every ``prepared`` event committed
   first, each commit's pointer and dedupe lookup, the publishing transaction opened with the lease
   validated in it, each commit's resolution (I5);
2. each commit, in arrival order, is deduplicated (I1), conflict-checked and staged on the one staged
   before it (I4: snapshot N+1 on N, N+2 on N+1, ... in memory; nothing named yet);
3. every file they wrote and every snapshot are made durable in one round, then the snapshots are
   linked in order (``FileIO.create_all_if_absent``: each only if absent, I2), then the directory;
4. one transaction records them all (pointer compare-and-sets in order, events, statistics).

Every commit keeps its own snapshot, events and outcome, exactly as one committed alone. What a crash
leaves is what a crash leaves after a lone commit's snapshot, several times over: snapshots on storage
beyond the pointer whose ``prepared`` events are durable, which the next holder records (reconcile) and
a re-sent identifier finds (I1). A snapshot that fails to link (someone outside our lock has the name)
stops the batch there: the commits before it are published, the ones after it were never named and go
back to the one-at-a-time path (I3: only their own attempt's files are deleted); a link whose outcome is
unknown is reported as such, never cleaned up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from paimon_meta.commit import crashpoints
from paimon_meta.commit.coordinator import CommitCoordinator, CommitResult, PreparedCommit, _Pending, _Staged
from paimon_meta.commit.crashpoints import CrashPoint
from paimon_meta.commit.metastore.guard import LockHold, MetastoreGuard, MetastoreSession
from paimon_meta.commit.publish import advance_hints
from paimon_meta.errors import CommitConflictError, CommitOutcomeUnknownError
from paimon_meta.model.snapshot import CommitKind

log = logging.getLogger(__name__)


def batchable(prepared: PreparedCommit) -> bool:
    """Whether ``prepared`` can be committed in a batch: one APPEND or COMPACT snapshot (an OVERWRITE is
    staged from what it replaces, a two-snapshot commit publishes in two steps) through the metastore."""
    return (
        not prepared.used
        and len(prepared.pendings) == 1
        and prepared.pendings[0].kind is not CommitKind.OVERWRITE
        and isinstance(prepared.coordinator.guard, MetastoreGuard)
    )


def dedupe_key(prepared: PreparedCommit) -> tuple[str, int, CommitKind]:
    return (prepared.coordinator.commit_user, prepared.identifier, prepared.pendings[0].kind)


@dataclass(slots=True)
class _Entry:
    prepared: PreparedCommit
    session: MetastoreSession | None = None
    mark: int = 0  # how many files its writer had written before this attempt
    staged: _Staged | None = None
    deduplicated: int | None = None
    conflict: CommitConflictError | None = None

    @property
    def pending(self) -> _Pending:
        return self.prepared.pendings[0]

    @property
    def coordinator(self) -> CommitCoordinator:
        return self.prepared.coordinator

    @property
    def commit_id(self) -> str:
        return self.pending.commit_id

    @property
    def guard(self) -> MetastoreGuard:
        guard = self.coordinator.guard
        assert isinstance(guard, MetastoreGuard)  # batchable()
        return guard

    @property
    def opened(self) -> MetastoreSession:
        assert self.session is not None
        return self.session

    def drop_attempt(self) -> None:
        """Delete what this attempt staged (never named: definite) and forget it; the prepared delta stays."""
        writer = self.pending.writer
        staged = writer.written[self.mark :]
        self.coordinator._delete(staged)
        writer.forget(staged)
        self.staged = None


@dataclass(slots=True)
class BatchOutcome:
    """What :func:`commit_batch` decided: ``results[i]`` is the result or the error of ``prepared[i]``;
    the indexes in ``rest`` were not decided (nothing of them is published) and are to be committed
    one at a time."""

    results: dict[int, CommitResult | BaseException]
    rest: list[int]


def commit_batch(hold: LockHold, prepared: Sequence[PreparedCommit]) -> BatchOutcome:
    """Commit ``prepared`` (each :func:`batchable`, distinct :func:`dedupe_key`, one table, the lock
    held by ``hold``) as one batch (module docstring). Raises, deciding nothing, when the batch could
    not be opened (the hold dropped the lock)."""
    entries = [_Entry(p) for p in prepared]
    for e in entries:
        e.coordinator._announce(e.prepared, e.pending)
    opened = hold.open_batch([(e.guard, e.commit_id) for e in entries])
    outcome = BatchOutcome({}, [])
    live: list[_Entry] = []
    for i, (e, session) in enumerate(zip(entries, opened, strict=True)):
        if isinstance(session, Exception):
            outcome.rest.append(i)  # its own session finds the same and fails or retries as it should
        else:
            e.session = session
            live.append(e)
    if not live:
        hold.record_batch([], [])
        return outcome
    index = {id(e): i for i, e in enumerate(entries)}

    def back_to_single(group: Sequence[_Entry]) -> BatchOutcome:
        for e in group:
            e.drop_attempt()
            outcome.rest.append(index[id(e)])
        outcome.rest.sort()
        return outcome

    staged: list[tuple[_Entry, _Staged]] = []
    try:
        _stage_all(live)
        staged = [(e, e.staged) for e in live if e.staged is not None]
        hold.lease_check()  # fencing, as before_publish: a lapsed lease publishes nothing
        crashpoints.reached(CrashPoint.BEFORE_PUBLISH)
        if staged:
            snapshots = staged[0][0].coordinator.snapshots
            done = snapshots.file_io.create_all_if_absent(
                [(snapshots.snapshot_path(st.snapshot.id), st.body) for _, st in staged],
                sync_first=[path for e, _ in staged for path in e.pending.writer.unsynced],
            )
    except BaseException:
        # Nothing was named (create_all_if_absent raises only then): the publishing transaction is
        # rolled back with the lock, and every commit goes one at a time.
        hold.abandon()
        return back_to_single(live)
    created: list[tuple[_Entry, _Staged]] = []
    doubtful: list[tuple[_Entry, _Staged]] = []
    stop: Exception | None = None
    if staged:
        stop = done.error
        created = staged[: done.created]
        doubtful = staged[done.created : done.created + done.doubtful]
        for e, _ in staged[: done.created + done.doubtful]:
            e.pending.writer.unsynced.clear()  # the round synced them before any name appeared
        for e, st in created:
            e.coordinator._created(st.snapshot)
        if created:
            advance_hints(snapshots, created[-1][1].snapshot.id)  # under the lock: hints only move forward
        undone = [e for e, _ in staged[done.created + done.doubtful :]]
        if stop is not None:
            log.warning("batch of %s stopped after %s snapshots: %s", hold.lock_id, len(created), stop)
        for e in undone:
            e.coordinator._record_retry(e.commit_id, 1, f"the batch stopped before it: {stop}", 0.0)
        back_to_single(undone)  # (sorted again at the end)
    decided = [e for e in live if e.deduplicated is not None or e.conflict is not None]
    try:
        hold.record_batch(
            [(e.opened, st.snapshot, 1, e.coordinator._details(e.pending, st.snapshot)) for e, st in created],
            [e.opened for e in decided],
        )
    except Exception:  # the snapshots are durable: the commits succeeded whatever the log says
        log.exception("batch of %s is published but recording it failed; recovery records it", hold.lock_id)
        hold.abandon()
    crashpoints.reached(CrashPoint.AFTER_EVENT)
    for e, st in created:
        sid = st.snapshot.id
        e.coordinator.guard.finished(e.commit_id, outcome="published", snapshot_id=sid)
        e.prepared.used = True
        outcome.results[index[id(e)]] = CommitResult((e.commit_id,), (sid,), False, 1)
    for e, st in doubtful:
        e.coordinator.guard.finished(e.commit_id, outcome="unknown")
        e.prepared.used = True
        outcome.results[index[id(e)]] = CommitOutcomeUnknownError(
            f"publishing snapshot {st.snapshot.id} failed with an unknown outcome: {stop}; "
            "commit the same identifier again to resolve it",
            snapshot_id=st.snapshot.id,
        )
    for e in decided:
        # Nothing of these can be referenced: delete everything they wrote, as a lone commit does.
        e.coordinator._delete(e.pending.writer.written)
        e.prepared.used = True
        if e.deduplicated is not None:
            e.coordinator.guard.finished(e.commit_id, outcome="deduplicated", snapshot_id=e.deduplicated)
            outcome.results[index[id(e)]] = CommitResult((e.commit_id,), (e.deduplicated,), True, 1)
        else:
            assert e.conflict is not None
            e.coordinator.guard.finished(
                e.commit_id, outcome="failed", error=type(e.conflict).__name__, reason=str(e.conflict)
            )
            outcome.results[index[id(e)]] = e.conflict
    outcome.rest.sort()
    return outcome


def _stage_all(live: Sequence[_Entry]) -> None:
    """Stage each commit on the one staged before it (the first on the latest snapshot, read under the
    lock). A conflict fails only its commit; a dedupe hit publishes nothing for it."""
    first = live[0]
    assert first.session is not None
    pointer = first.session.pointer
    head = first.coordinator._base(first.session)
    if first.session.pointer != pointer:
        # Storage was ahead of the pointer and the first session recorded what it found: the other
        # sessions' dedupe lookups predate that. Rare (a crash, another engine): commit one at a time.
        raise _Reopen("the log caught up with storage while opening the batch")
    for e in live:
        assert e.session is not None
        e.coordinator._observe_timeline(e.session)
        e.mark = len(e.pending.writer.written)
        try:
            out = e.coordinator._stage_attempt(e.session, 1, e.pending, head)
        except CommitConflictError as exc:
            e.conflict = exc
            continue
        if isinstance(out, int):
            e.deduplicated = out
        else:
            e.staged = out
            head = out.snapshot


class _Reopen(Exception):
    """The batch cannot go on as opened; its commits go one at a time."""
