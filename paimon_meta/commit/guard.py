"""What the coordinator needs from its surroundings: mutual exclusion, fencing, exactly-once lookups and
an audit trail. Two implementations share one commit path:

* :class:`StorageGuard` — no metastore. Exclusion is optimistic: ``create_if_absent`` of
  ``snapshot-N`` is the compare-and-set, so it requires a store with atomic create (local disk, S3 with
  ``If-None-Match``). Dedupe scans snapshots on storage.
* ``MetastoreGuard`` (``paimon_meta.commit.metastore.guard``) — the Postgres lock with lease, heartbeat
  and fencing token, the event log, and the table pointer.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from paimon_meta.errors import ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.partition_statistics import PartitionDelta
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.table.snapshots import SnapshotManager


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """What a guard is told when a commit starts (the ``prepared`` event)."""

    commit_id: str
    commit_user: str
    commit_identifier: int
    kind: CommitKind
    counts: dict[str, Any]
    messages: bytes
    messages_version: int
    # An OVERWRITE's resolved scope (``OverwriteSpec.to_json``), so recovery can finish it exactly.
    overwrite: dict[str, Any] | None = None


class GuardSession(abc.ABC):
    """One lock hold. Everything between ``__enter__`` and ``__exit__`` of ``CommitGuard.session`` is
    serialised against other committers that respect the same guard."""

    # The table's timeline (bumped by every rollback, which reuses the snapshot ids above its target),
    # valid once ``latest_snapshot_id`` returned. A guard that cannot know keeps 0.
    timeline: int = 0

    @abc.abstractmethod
    def latest_snapshot_id(self) -> int | None:
        """The id of the latest snapshot on storage, read under the guard (I4: the next snapshot is
        built on it). A metastore guard first records every snapshot on storage that its log lacks."""

    @abc.abstractmethod
    def find_committed(
        self, user: str, identifier: int, kind: CommitKind, latest: Snapshot | None
    ) -> int | None:
        """Snapshot id that already holds this (user, identifier, kind), if any (exactly-once)."""

    @abc.abstractmethod
    def before_publish(self) -> None:
        """Raise ``LockLostError`` if this holder may no longer publish (fencing)."""

    @abc.abstractmethod
    def record(self, event_type: str, *, attempt: int, **details: Any) -> None:
        """Append an audit event (conflict_checked, deduplicated). A guard may hold it back until the
        next transaction of this session (at the latest, the one that ends the session): it describes
        a decision, not a state change, so a crash may lose it."""

    @abc.abstractmethod
    def published(self, snapshot: Snapshot, *, attempt: int, details: dict[str, Any]) -> None:
        """Record the published snapshot (and advance the table pointer) after it is on storage."""

    def storage_unverified(self) -> bool:
        """True if ``latest_snapshot_id`` answered from the guard's own record without looking at
        storage (a metastore guard on a store with a real create-if-absent: see
        ``MetastoreSession.latest_snapshot_id``). Then losing the create of ``snapshot-N`` means
        storage was ahead of the record, not that this holder's exclusion failed: the caller asks
        :meth:`CommitGuard.storage_may_be_ahead` and tries again at once."""
        return False

    def defer_hints(self) -> bool:
        """True if the next commit under this same lock hold will move the hints past this snapshot
        (group commit), so this one need not write them. Asked once, after the snapshot is created."""
        return False

    def set_statistics(self, deltas: Sequence[PartitionDelta]) -> None:  # noqa: B027 - optional hook
        """The per-partition deltas of the snapshot about to be published, recorded with it (a guard
        without a metastore keeps none)."""


class CommitGuard(abc.ABC):
    # Whether ``prepared`` keeps ``CommitRecord.messages`` (a recovery record). A guard that does not
    # (storage only: no metastore to keep it in) is handed empty bytes: serialising thousands of files
    # is a large share of a big commit.
    keeps_messages: bool = True
    # The branch whose snapshot/ this guard publishes into (the metastore's guard may name another).
    branch: str = "main"

    @abc.abstractmethod
    def prepared(self, record: CommitRecord) -> None:
        """Record the intent (with the serialized messages) before any lock is taken."""

    @abc.abstractmethod
    def session(self, commit_id: str, attempt: int) -> Any:
        """A context manager yielding a :class:`GuardSession` while the table lock is held."""

    def after_release(self, action: Callable[[], None], *, key: str | None = None) -> None:
        """Run ``action`` once the lock of the session that just ended is released: at once, unless
        the guard's lock outlives the session (a group's hold: then when the hold releases it, the
        actions concurrently, and of those given the same ``key`` only the last: a hint). For what
        must not cost a round trip under the lock (the hints, deleting unused files)."""
        action()

    def storage_may_be_ahead(self) -> None:  # noqa: B027 - optional hook
        """A create of ``snapshot-N`` found the name taken after an unverified read of the latest id
        (:meth:`GuardSession.storage_unverified`): the next session must look at storage first."""

    def event(self, commit_id: str, event_type: str, *, attempt: int, **details: Any) -> None:  # noqa: B027
        """Append an audit event that needs no lock (``retried``)."""

    def finished(self, commit_id: str, *, outcome: str, **details: Any) -> None:  # noqa: B027 - optional hook
        """Called once when ``commit()`` returns or raises."""


@dataclass(slots=True)
class _StorageSession(GuardSession):
    guard: StorageGuard

    def latest_snapshot_id(self) -> int | None:
        return self.guard.snapshots.latest_snapshot_id()

    def find_committed(
        self, user: str, identifier: int, kind: CommitKind, latest: Snapshot | None
    ) -> int | None:
        # Walk back through this user's snapshots: identifiers of one user only grow, so anything older
        # than a smaller identifier cannot match.
        for snap in self.guard.snapshots.snapshots_of_user(user, latest, load=self.guard.load_snapshot):
            if snap.commit_identifier == identifier and snap.commit_kind is kind:
                return snap.id
            if snap.commit_identifier < identifier:
                return None
        return None

    def before_publish(self) -> None:
        return None

    def record(self, event_type: str, *, attempt: int, **details: Any) -> None:
        return None

    def published(self, snapshot: Snapshot, *, attempt: int, details: dict[str, Any]) -> None:
        return None


@dataclass(slots=True)
class StorageGuard(CommitGuard):
    """Metastore-less guard: optimistic concurrency on ``create_if_absent(snapshot-N)``."""

    keeps_messages = False  # nowhere to keep a recovery record

    file_io: FileIO
    table_path: str
    load_snapshot_fn: Any = field(default=None)
    snapshots: SnapshotManager = field(init=False)

    def __post_init__(self) -> None:
        if not self.file_io.capabilities.atomic_create:
            raise ValidationError(
                f"the store of {self.table_path} has no atomic create-if-absent; concurrent commits need "
                "the metastore lock (paimon_meta.connect(...))",
                table=self.table_path,
            )
        # Only for the latest id (hint rules); snapshots themselves come from load_snapshot_fn.
        self.snapshots = SnapshotManager(self.file_io, self.table_path)

    def load_snapshot(self, snapshot_id: int) -> Snapshot | None:
        if snapshot_id < 1 or self.load_snapshot_fn is None:
            return None
        result: Snapshot | None = self.load_snapshot_fn(snapshot_id)
        return result

    def prepared(self, record: CommitRecord) -> None:
        return None

    @contextmanager
    def session(self, commit_id: str, attempt: int) -> Iterator[GuardSession]:
        # No exclusion here: two committers may build snapshot-N at once and the loser of
        # create_if_absent retries on top of the winner (optimistic concurrency, as Java without a lock).
        yield _StorageSession(self)
