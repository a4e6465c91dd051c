"""A branch's snapshot pointer in the metastore (``paimon_table_branches``, migration 0009).

Main's pointer is ``paimon_tables.latest_snapshot_id``; every other branch of a table has a row here
with its latest recorded snapshot and its ``timeline``. Invariants (every writer holds the table's lock:
branch operations in :mod:`paimon_meta.ops.branches`, commits on a branch in the commit path):

* B1: a row's ``timeline`` is one no commit event of its (table, branch) used before the row was
  written. A branch name dropped and created again, or renamed onto, starts its snapshot ids over; the
  new timeline keeps the log's "no snapshot id published twice" index (table, branch, timeline,
  snapshot id) true, and an exactly-once lookup of the branch counts only the current timeline's events.
* B2: the storage operation comes first, the row after it (its own transaction). A crash between them
  leaves a branch on storage without a row (created when the branch is next committed to, from
  storage, by reconcile) or a row without a branch (replaced by the next create of that name): the
  row never names a branch whose files it has not seen, so it is never the only record of anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

MAIN = "main"

# The first timeline no event of (table, branch) has used. Uses ix_paimon_commit_events_dedupe's prefix.
_NEXT_TIMELINE_SQL = text(
    "SELECT coalesce(max(timeline) + 1, 0) FROM paimon_commit_events "
    "WHERE table_id = :table_id AND branch = :branch"
)
_UPSERT_SQL = text(
    "INSERT INTO paimon_table_branches (table_id, branch, latest_snapshot_id, timeline) "
    "VALUES (:table_id, :branch, :pointer, :timeline) "
    "ON CONFLICT (table_id, branch) DO UPDATE SET latest_snapshot_id = excluded.latest_snapshot_id, "
    "timeline = excluded.timeline, created_at = now(), updated_at = now()"
)


@dataclass(frozen=True, slots=True)
class BranchPointer:
    """One ``paimon_table_branches`` row."""

    table_id: int
    branch: str
    latest_snapshot_id: int | None
    timeline: int


def _not_main(branch: str) -> None:
    if branch == MAIN:
        raise ValueError("main's pointer is paimon_tables', not a branch row")


def next_timeline(conn: Connection, table_id: int, branch: str) -> int:
    """The first timeline of ``branch`` of table ``table_id`` that no commit event used (B1)."""
    return int(conn.execute(_NEXT_TIMELINE_SQL, {"table_id": table_id, "branch": branch}).scalar_one())


def branch_pointer(conn: Connection, table_id: int, branch: str) -> BranchPointer | None:
    """The row of ``branch`` (None: none recorded, e.g. a branch made before migration 0009)."""
    row = conn.execute(
        text(
            "SELECT latest_snapshot_id, timeline FROM paimon_table_branches "
            "WHERE table_id = :table_id AND branch = :branch"
        ),
        {"table_id": table_id, "branch": branch},
    ).first()
    return None if row is None else BranchPointer(table_id, branch, row[0], row[1])


def branch_pointers(conn: Connection, table_id: int) -> list[BranchPointer]:
    """Every branch row of table ``table_id``, by name."""
    rows = conn.execute(
        text(
            "SELECT branch, latest_snapshot_id, timeline FROM paimon_table_branches "
            "WHERE table_id = :table_id ORDER BY branch"
        ),
        {"table_id": table_id},
    )
    return [BranchPointer(table_id, r[0], r[1], r[2]) for r in rows]


def put_branch(conn: Connection, table_id: int, branch: str, pointer: int | None) -> BranchPointer:
    """Record ``branch`` as just made on storage with latest snapshot ``pointer`` (None: empty) in a new
    timeline (B1); a row left by an earlier incarnation (B2) is replaced. Hold the table lock."""
    _not_main(branch)
    timeline = next_timeline(conn, table_id, branch)
    conn.execute(
        _UPSERT_SQL, {"table_id": table_id, "branch": branch, "pointer": pointer, "timeline": timeline}
    )
    return BranchPointer(table_id, branch, pointer, timeline)


def drop_branch_row(conn: Connection, table_id: int, branch: str) -> BranchPointer | None:
    """Forget ``branch``'s row (its events stay in the log); returns it, if there was one."""
    _not_main(branch)
    row = conn.execute(
        text(
            "DELETE FROM paimon_table_branches WHERE table_id = :table_id AND branch = :branch "
            "RETURNING latest_snapshot_id, timeline"
        ),
        {"table_id": table_id, "branch": branch},
    ).first()
    return None if row is None else BranchPointer(table_id, branch, row[0], row[1])


def rename_branch_row(conn: Connection, table_id: int, branch: str, to: str) -> BranchPointer | None:
    """Move ``branch``'s pointer to ``to``, in a new timeline of ``to`` (B1: ``to`` may have had
    events of an earlier incarnation). Without a row for ``branch`` (made before migration 0009) any
    row of ``to`` goes too (B2) and ``to`` is recorded when next committed to. Returns the new row."""
    _not_main(to)
    moved = drop_branch_row(conn, table_id, branch)
    if moved is None:
        drop_branch_row(conn, table_id, to)
        return None
    return put_branch(conn, table_id, to, moved.latest_snapshot_id)


# ---- the commit path's statements (plain psycopg paramstyle) ----------------------------------------

#: A branch's pointer (no row: none recorded).
BRANCH_POINTER_SQL = (
    "SELECT latest_snapshot_id FROM paimon_table_branches "  # (a comment keeps the formatter from joining)
    "WHERE table_id = %(table_id)s AND branch = %(branch)s"
)
#: The branch pointer's compare-and-set ``expected_prev`` -> ``new_snapshot_id``; returns the table_id iff
#: it moved (the commit path's record makes its ``snapshot_published`` event depend on that row).
ADVANCE_BRANCH_POINTER_SQL = (
    "UPDATE paimon_table_branches SET latest_snapshot_id = %(new_snapshot_id)s, updated_at = now() "
    "WHERE table_id = %(table_id)s AND branch = %(branch)s "
    "AND latest_snapshot_id IS NOT DISTINCT FROM %(expected_prev)s::bigint "
    "RETURNING table_id"
)


def advance_branch_pointer(
    conn: Connection, table_id: int, branch: str, expected_prev: int | None, new_snapshot_id: int
) -> bool:
    """Compare-and-set ``branch``'s pointer (reconcile's form of :data:`ADVANCE_BRANCH_POINTER_SQL`, run
    in the transaction that records the snapshot); False if it was not ``expected_prev``."""
    _not_main(branch)
    result = conn.execute(
        text(
            "UPDATE paimon_table_branches SET latest_snapshot_id = :new, updated_at = now() "
            "WHERE table_id = :table_id AND branch = :branch "
            "AND latest_snapshot_id IS NOT DISTINCT FROM CAST(:prev AS bigint)"
        ),
        {"new": new_snapshot_id, "table_id": table_id, "branch": branch, "prev": expected_prev},
    )
    return result.rowcount == 1
