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
a re-sent identifier finds (I1). A metastore connection that dies at step 4 (a Postgres restart) is not a
crash: the holder records the batch under its lease once the metastore answers, or hands it to recovery
at once (``guard``'s module docstring). A snapshot that fails to link (someone outside our lock has the name)
stops the batch there: the commits before it are published, the ones after it were never named and go
back to the one-at-a-time path (I3: only their own attempt's files are deleted); a link whose outcome is
unknown is reported as such, never cleaned up.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from paimon_meta.commit import crashpoints
from paimon_meta.commit.coordinator import (
    CommitCoordinator,
    CommitResult,
    Deduplicated,
    Pending,
    PreparedCommit,
    Staged,
)
from paimon_meta.commit.crashpoints import CrashPoint
from paimon_meta.commit.manifests import write_deferred
from paimon_meta.commit.metastore.guard import LockHold, MetastoreGuard, MetastoreSession
from paimon_meta.commit.publish import advance_hints, earliest_hint
from paimon_meta.errors import CommitConflictError, CommitOutcomeUnknownError
from paimon_meta.io.base import CreatedAll
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
    # How many files its writer had written before this batch attempt: the attempt's own files are
    # ``writer.written[mark:]``, what ``drop_attempt`` deletes when the commit goes back to the
    # one-at-a-time path. I3: those are the only files a fallback may delete; the ones before ``mark``
    # (the delta manifests and lists prepared before the lock) are what the commit's snapshot names
    # when it goes on alone. So ``mark`` is taken here, when the entry is made and before anything of
    # the attempt runs (the opening, ``base()``, a ``_Reopen``, another commit's staging, any of which
    # can raise), never left at a default that would count the prepared files as the attempt's.
    mark: int = field(init=False)
    staged: Staged | None = None
    deduplicated: int | None = None
    conflict: CommitConflictError | None = None

    def __post_init__(self) -> None:
        self.mark = len(self.pending.writer.written)

    @property
    def pending(self) -> Pending:
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
        self.coordinator.drop_attempt(self.pending, self.mark)
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
    batch = _Batch(hold, prepared)
    live = batch.open()
    if not live:
        hold.record_batch([], [])
        return batch.outcome
    try:
        staged, done = batch.stage_and_link(live)
    except BaseException:
        # Nothing was named (create_all_if_absent raises only then): the publishing transaction is
        # rolled back with the lock, and every commit goes one at a time.
        hold.abandon()
        batch.back_to_single(live)
        return batch.outcome
    created, doubtful, stop = batch.settle_links(staged, done)
    decided = [e for e in live if e.deduplicated is not None or e.conflict is not None]
    batch.record(created, decided)
    crashpoints.reached(CrashPoint.AFTER_EVENT)
    batch.decide(created, doubtful, decided, stop)
    batch.outcome.rest.sort()
    return batch.outcome


class _Batch:
    """The steps of :func:`commit_batch`: open (plan), stage and link (attempt), settle the links,
    record and decide, each commit keeping its own outcome in ``outcome``."""

    def __init__(self, hold: LockHold, prepared: Sequence[PreparedCommit]) -> None:
        self.hold = hold
        self.entries = [_Entry(p) for p in prepared]
        self.outcome = BatchOutcome({}, [])
        self._index = {id(e): i for i, e in enumerate(self.entries)}

    def open(self) -> list[_Entry]:
        """Announce every commit and open a session for each under the hold, in one round trip (step 1
        of the module docstring: every ``prepared`` record committed before anything can publish).
        A commit whose session could not be opened goes one at a time (its own session finds the same
        and fails or retries as it should). Returns the opened ones."""
        for e in self.entries:
            e.coordinator.announce(e.prepared)
        opened = self.hold.open_batch([(e.guard, e.commit_id) for e in self.entries])
        live: list[_Entry] = []
        for i, (e, session) in enumerate(zip(self.entries, opened, strict=True)):
            if isinstance(session, Exception):
                self.outcome.rest.append(i)
            else:
                e.session = session
                live.append(e)
        return live

    def stage_and_link(self, live: Sequence[_Entry]) -> tuple[list[tuple[_Entry, Staged]], CreatedAll | None]:
        """Stage each commit on the one before it (step 2), check the lease (fencing: a lapsed lease
        publishes nothing), then make every file durable and link the snapshots in order, each only if
        absent (step 3, I2). Raises only when nothing was named."""
        _stage_all(live)
        staged = [(e, e.staged) for e in live if e.staged is not None]
        self.hold.lease_check()  # fencing, as before_publish: a lapsed lease publishes nothing
        crashpoints.reached(CrashPoint.BEFORE_PUBLISH)
        if not staged:
            return staged, None
        snapshots = staged[0][0].coordinator.snapshots
        done = snapshots.file_io.create_all_if_absent(
            [(snapshots.snapshot_path(st.snapshot.id), st.body) for _, st in staged],
            sync_first=[path for e, _ in staged for path in e.pending.writer.unsynced],
        )
        return staged, done

    def settle_links(
        self, staged: list[tuple[_Entry, Staged]], done: CreatedAll | None
    ) -> tuple[list[tuple[_Entry, Staged]], list[tuple[_Entry, Staged]], Exception | None]:
        """Split the staged commits by what their link did: created (durable: built on from now on),
        doubtful (unknown outcome: I3, never cleaned up) and undone (never named: their attempt is
        dropped and they go one at a time). Returns (created, doubtful, the error that stopped the
        links)."""
        if done is None:
            return [], [], None
        stop = done.error
        created = staged[: done.created]
        doubtful = staged[done.created : done.created + done.doubtful]
        for e, _ in staged[: done.created + done.doubtful]:
            e.pending.writer.unsynced.clear()  # the round synced them before any name appeared
        for e, st in created:
            e.coordinator.created(st.snapshot)
        if created:
            # Once the lock is released: hints are verified by every reader (coordinator._commit_kind).
            guard, snapshots = created[0][0].guard, created[0][0].coordinator.snapshots
            guard.after_release(
                functools.partial(advance_hints, snapshots, created[-1][1].snapshot.id),
                key=snapshots.paths.latest_hint_path,
            )
            if created[0][1].snapshot.id == 1:
                guard.after_release(functools.partial(earliest_hint, snapshots))
        undone = [e for e, _ in staged[done.created + done.doubtful :]]
        if stop is not None:
            log.warning("batch of %s stopped after %s snapshots: %s", self.hold.lock_id, len(created), stop)
            for e in undone:
                # The name may be taken because storage was ahead of the pointer read unchecked (the
                # guard's "S3 floor" invariant): each goes on alone with storage checked first.
                e.guard.storage_may_be_ahead()
        for e in undone:
            e.coordinator.record_retry(e.commit_id, 1, f"the batch stopped before it: {stop}", 0.0)
        self.back_to_single(undone)
        return created, doubtful, stop

    def record(self, created: Sequence[tuple[_Entry, Staged]], decided: Sequence[_Entry]) -> None:
        """Step 4: one transaction records every created snapshot (pointer compare-and-sets in order,
        events, statistics) and the events of the commits that publish nothing."""
        try:
            self.hold.record_batch(
                [(e.opened, st.snapshot, 1, e.pending.published_details(st.snapshot)) for e, st in created],
                [e.opened for e in decided],
            )
        except Exception:  # the snapshots are durable: the commits succeeded whatever the log says
            # A connection failure left the record to the lock's retrier (LockHold.record_batch: it
            # records them under the lease once the metastore answers, or hands them to recovery at
            # once); anything else leaves it to the next holder's reconcile.
            log.exception(
                "batch of %s is published but recording it failed; recorded later (see the deferred "
                "recording's log line) or by the next holder",
                self.hold.lock_id,
            )
            self.hold.abandon()

    def decide(
        self,
        created: Sequence[tuple[_Entry, Staged]],
        doubtful: Sequence[tuple[_Entry, Staged]],
        decided: Sequence[_Entry],
        stop: Exception | None,
    ) -> None:
        """Each commit's outcome, as a lone commit would have it: published, unknown (nothing cleaned
        up: I3), deduplicated or conflicting (everything it wrote deleted: nothing can name it)."""
        for e, st in created:
            sid = st.snapshot.id
            e.coordinator.guard.finished(e.commit_id, outcome="published", snapshot_id=sid)
            unused = functools.partial(e.coordinator.discard_unused_base, e.pending, st.snapshot)
            e.guard.after_release(unused)
            e.prepared.used = True
            self._result(e, CommitResult((e.commit_id,), (sid,), False, 1))
        for e, st in doubtful:
            e.coordinator.guard.finished(e.commit_id, outcome="unknown")
            e.prepared.used = True
            self._result(
                e,
                CommitOutcomeUnknownError(
                    f"publishing snapshot {st.snapshot.id} failed with an unknown outcome: {stop}; "
                    "commit the same identifier again to resolve it",
                    snapshot_id=st.snapshot.id,
                ),
            )
        for e in decided:
            e.coordinator.delete_written(e.pending)
            e.prepared.used = True
            if e.deduplicated is not None:
                e.coordinator.guard.finished(e.commit_id, outcome="deduplicated", snapshot_id=e.deduplicated)
                self._result(e, CommitResult((e.commit_id,), (e.deduplicated,), True, 1))
            else:
                assert e.conflict is not None
                e.coordinator.guard.finished(
                    e.commit_id, outcome="failed", error=type(e.conflict).__name__, reason=str(e.conflict)
                )
                self._result(e, e.conflict)

    def back_to_single(self, group: Sequence[_Entry]) -> None:
        """Drop the attempt of each of ``group`` (never named: I3 allows it) and leave them undecided,
        to be committed one at a time."""
        for e in group:
            e.drop_attempt()
            self.outcome.rest.append(self._index[id(e)])
        self.outcome.rest.sort()

    def _result(self, e: _Entry, result: CommitResult | BaseException) -> None:
        e.prepared.settled()
        self.outcome.results[self._index[id(e)]] = result


def _stage_all(live: Sequence[_Entry]) -> None:
    """Stage each commit on the one staged before it (the first on the latest snapshot, read under the
    lock). A conflict fails only its commit; a dedupe hit publishes nothing for it."""
    first = live[0]
    assert first.session is not None
    pointer = first.session.pointer
    head = first.coordinator.base(first.session)
    if first.session.pointer != pointer:
        # Storage was ahead of the pointer and the first session recorded what it found: the other
        # sessions' dedupe lookups predate that. Rare (a crash, another engine): commit one at a time.
        raise _Reopen("the log caught up with storage while opening the batch")
    # Each commit's base list (and any manifest its merge rewrites) is staged on the snapshot staged
    # before it, in memory (the writers' read caches hold what they staged); the files are then PUT
    # together, concurrently (one round trip on S3, not one per commit), before anything can name them:
    # the links come after, in order (stage_and_link). A failed write raises before any link: nothing
    # is named, every commit goes one at a time (their attempts' files dropped, I3).
    # Only where every commit reads through one table object (a service's shared table, one process's
    # writers of one table): the staging of each reads what the one before staged from that object's
    # caches, filled as the files are staged; another table object would look for them on storage (a
    # miss fails the batch, safely, back to one at a time: so then the files are written as staged).
    one_reader = len({id(e.coordinator.reader) for e in live}) == 1
    deferred: list[tuple[str, bytes]] = []
    try:
        for e in live:
            assert e.session is not None
            e.coordinator.observe_timeline(e.session)
            e.pending.writer.deferred = deferred if one_reader else None
            try:
                out = e.coordinator.stage(e.session, 1, e.pending, head)
            except CommitConflictError as exc:
                e.conflict = exc
                continue
            finally:
                e.pending.writer.deferred = None
            if isinstance(out, Deduplicated):
                e.deduplicated = out.snapshot_id
            else:
                e.staged = out
                head = out.snapshot
    finally:
        for e in live:
            e.pending.writer.deferred = None
    write_deferred(first.coordinator.file_io, deferred)


class _Reopen(Exception):
    """The batch cannot go on as opened; its commits go one at a time."""
