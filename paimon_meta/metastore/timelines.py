"""Timelines of a table: what a rollback leaves behind in the metastore (migration 0003).

A rollback to snapshot T while the latest snapshot is L starts timeline k+1: in one transaction it
inserts ``paimon_table_timelines(table, k+1, base T, from L, identities of T+1..L)``, sets the table's
``timeline`` to k+1 and its pointer to T (compare-and-set from L). Then, still under the table lock, it
deletes ``snapshot-L`` .. ``snapshot-(T+1)`` from storage, newest first (so the files left at any moment
are a contiguous prefix: a reader never sees a gap).

* "No snapshot is ever overwritten" then reads: within one timeline a snapshot id is created once, and a
  file is only ever created where none exists (create-if-absent). A rollback never replaces a snapshot
  file: it deletes T+1..L first, and ids after T are created anew, each once, in the new timeline. The
  event log's uniqueness of published snapshot ids is per (table, timeline).
* Exactly-once lookups count a publishing event only while its snapshot is live: not removed by a later
  rollback (``events.LIVE_SNAPSHOT_SQL``). A commit whose snapshot was rolled back can land again.
* If the rollback dies between its transaction and the last deletion, the files it had still to delete
  are found by whoever next holds the lock (``reconcile``): a snapshot beyond the pointer whose identity
  is in the current timeline's removed set is a leftover and is deleted (newest first), never recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, select, text

from paimon_meta.db.models import TableTimeline
from paimon_meta.errors import CommitConflictError
from paimon_meta.model.snapshot import Snapshot


def snapshot_identity(snapshot: Snapshot) -> str:
    """What tells one snapshot file from another with the same id (uuid where the writer set one)."""
    return "|".join(
        str(v)
        for v in (
            snapshot.uuid or "",
            snapshot.commit_user,
            snapshot.commit_identifier,
            snapshot.commit_kind.value,
            snapshot.time_millis,
        )
    )


def removed_identities(engine: Engine, table_id: int, timeline: int) -> set[str]:
    """The snapshots the rollback that started ``timeline`` removed (empty for timeline 0)."""
    if timeline == 0:
        return set()
    with engine.connect() as conn:
        row = conn.execute(
            select(TableTimeline.removed_uuids).where(
                TableTimeline.table_id == table_id, TableTimeline.timeline == timeline
            )
        ).first()
    return set() if row is None else {str(x) for x in row[0]}


def start_timeline(
    conn: Connection,
    table_id: int,
    *,
    timeline: int,
    base_snapshot_id: int,
    rolled_back_from: int,
    removed: Sequence[Snapshot],
    principal: str | None,
) -> None:
    """In the caller's transaction: record the rollback and move the table to the new timeline, its
    pointer from ``rolled_back_from`` to ``base_snapshot_id``. ``CommitConflictError`` if the pointer or
    timeline moved meanwhile (nothing is changed then)."""
    moved = conn.execute(
        text(
            "UPDATE paimon_tables SET timeline = :new, latest_snapshot_id = :base, updated_at = now() "
            "WHERE table_id = :t AND timeline = :old AND latest_snapshot_id = :latest RETURNING table_id"
        ),
        {
            "new": timeline,
            "old": timeline - 1,
            "base": base_snapshot_id,
            "t": table_id,
            "latest": rolled_back_from,
        },
    ).first()
    if moved is None:
        raise CommitConflictError(
            f"table {table_id} changed while rolling back (expected snapshot {rolled_back_from})",
            reason="pointer_moved",
        )
    conn.execute(
        text(
            "INSERT INTO paimon_table_timelines (table_id, timeline, base_snapshot_id, rolled_back_from,"
            " removed_uuids, principal) VALUES (:t, :k, :base, :latest, :removed, :principal)"
        ),
        {
            "t": table_id,
            "k": timeline,
            "base": base_snapshot_id,
            "latest": rolled_back_from,
            "removed": Jsonb([snapshot_identity(s) for s in removed]),
            "principal": principal,
        },
    )
