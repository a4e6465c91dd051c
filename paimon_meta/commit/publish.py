"""The publish step every commit path shares: ``snapshot-N`` created only if absent, then the hints.

I2 (docs/DESIGN.md): a snapshot file is never replaced. ``create_if_absent`` is the only way one is
written; an error that leaves the outcome unknown is resolved by repeating the same create and, if the
file is there, comparing it with what was meant to be written.
"""

from __future__ import annotations

import logging
from collections.abc import MutableSequence

from paimon_meta.errors import CommitOutcomeUnknownError, FileAlreadyExistsError, FileIOError
from paimon_meta.table.snapshots import SnapshotManager

log = logging.getLogger(__name__)

_UNKNOWN_OUTCOME_TRIES = 3


class SnapshotRaceLost(Exception):
    """``snapshot-N`` exists with other content: a writer outside our exclusion got there first."""


def create_snapshot_file(
    snapshots: SnapshotManager,
    snapshot_id: int,
    body: bytes,
    *,
    sync_first: MutableSequence[str] | None = None,
) -> None:
    """Create ``snapshot-<snapshot_id>`` with ``body`` only if absent. ``sync_first``: files this one
    references that were written non-durable; made durable before its name appears, and cleared once
    it is created.

    Raises:
        SnapshotRaceLost: the file exists with other content.
        CommitOutcomeUnknownError: every try failed with an unknown outcome (never clean up after it).
    """
    file_io = snapshots.file_io
    path = snapshots.snapshot_path(snapshot_id)
    last_error: Exception | None = None
    for _ in range(_UNKNOWN_OUTCOME_TRIES):
        try:
            file_io.create_if_absent(path, body, sync_first=list(sync_first or ()))
            if sync_first is not None:
                sync_first.clear()
            return
        except FileAlreadyExistsError:
            try:
                existing = file_io.read(path)
            except FileIOError as e:
                last_error = e
                continue
            if existing == body:
                return  # an earlier try of ours landed
            raise SnapshotRaceLost(f"snapshot {snapshot_id} was published by another writer") from None
        except FileIOError as e:
            last_error = e
    raise CommitOutcomeUnknownError(
        f"publishing snapshot {snapshot_id} failed with an unknown outcome: {last_error}",
        snapshot_id=snapshot_id,
        path=path,
    )


def advance_hints(snapshots: SnapshotManager, snapshot_id: int) -> None:
    """LATEST (and EARLIEST for the first snapshot), called under the guard so hints only move forward.
    Hints are only hints (readers verify them): a failure never fails the commit, and LATEST is not made
    durable (local disk: no fsync; a crash may leave it stale or empty: readers then list)."""
    try:
        snapshots.commit_latest_hint(snapshot_id, durable=False)
        if snapshot_id == 1:
            snapshots.commit_earliest_hint(1)
    except FileIOError:
        log.warning("could not update snapshot hints after snapshot %s", snapshot_id, exc_info=True)


def earliest_hint(snapshots: SnapshotManager) -> None:
    """EARLIEST=1 (after the table's first snapshot), best effort as :func:`advance_hints`. Given apart
    from LATEST where only a group's last LATEST is written (``CommitGuard.after_release``'s key)."""
    try:
        snapshots.commit_earliest_hint(1)
    except FileIOError:
        log.warning("could not write the EARLIEST hint", exc_info=True)
