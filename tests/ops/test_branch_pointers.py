"""A branch's pointer row (``paimon_table_branches``, migration 0009) follows create, rename, drop and
fast-forward; a name made again takes a timeline its events never used; the commit log's unique index
is per branch."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy.exc
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import BranchAlreadyExistsError, BranchNotFoundError
from paimon_meta.metastore.branches import BranchPointer, branch_pointer, branch_pointers
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.ops.audit import recording_events
from tests.ops.helpers import TABLE, create, write
from tests.ops.test_branches import commit_on_branch

pytestmark = pytest.mark.postgres


def _rows(catalog: MetastoreCatalog) -> list[tuple[str, int | None, int]]:
    table_id = catalog.table_row(TABLE).table_id
    with catalog.engine.connect() as conn:
        return [(p.branch, p.latest_snapshot_id, p.timeline) for p in branch_pointers(conn, table_id)]


def _published(catalog: MetastoreCatalog, branch: str, timeline: int, snapshot_id: int) -> None:
    """A publishing event as the commit path writes one for ``branch`` (straight into the log)."""
    table_id = catalog.table_row(TABLE).table_id
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type, "
                "commit_user, commit_identifier, commit_kind, snapshot_id, timeline, branch) VALUES "
                "(:c, :t, :i, 'snapshot_published', 'u', 1, 'APPEND', :s, :tl, :b)"
            ),
            {"c": uuid.uuid4(), "t": table_id, "i": TABLE, "s": snapshot_id, "tl": timeline, "b": branch},
        )


def test_rows_follow_create_rename_drop_and_fast_forward(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(3):
        write(catalog, [i])
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    branch_ops.create_branch(catalog, TABLE, "b1", "t2")
    branch_ops.create_branch(catalog, TABLE, "empty")
    assert _rows(catalog) == [("b1", 2, 0), ("empty", None, 0)]
    branch_ops.rename_branch(catalog, TABLE, "b1", "b2")
    assert _rows(catalog) == [("b2", 2, 0), ("empty", None, 0)]
    table = catalog.get_table(TABLE)
    commit_on_branch(table, "b2", [100])
    branch_ops.fast_forward(catalog, TABLE, "b2")
    # only main moved; the branch's row is the branch's (what reconcile records on it comes with step 2)
    assert _rows(catalog) == [("b2", 2, 0), ("empty", None, 0)]
    assert catalog.table_row(TABLE).latest_snapshot_id == 3
    branch_ops.drop_branch(catalog, TABLE, "empty")
    assert _rows(catalog) == [("b2", 2, 0)]
    # refusals change no row
    with pytest.raises(BranchAlreadyExistsError):
        branch_ops.create_branch(catalog, TABLE, "b2")
    with pytest.raises(BranchNotFoundError):
        branch_ops.rename_branch(catalog, TABLE, "nope", "b9")
    assert _rows(catalog) == [("b2", 2, 0)]


def test_a_name_made_again_takes_a_new_timeline(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, [1])
    tag_ops.create_tag(catalog, TABLE, "t1", 1)
    branch_ops.create_branch(catalog, TABLE, "b1", "t1")
    _published(catalog, "b1", 0, 2)  # b1's snapshot 2 in its first incarnation
    branch_ops.drop_branch(catalog, TABLE, "b1")
    assert _rows(catalog) == []
    branch_ops.create_branch(catalog, TABLE, "b1", "t1")
    assert _rows(catalog) == [("b1", 1, 1)]
    # snapshot 2 of the new incarnation can be recorded: another timeline
    _published(catalog, "b1", 1, 2)
    # renamed onto a name with events: a timeline past them
    branch_ops.create_branch(catalog, TABLE, "b2")
    _published(catalog, "b2", 0, 1)
    branch_ops.drop_branch(catalog, TABLE, "b2")
    branch_ops.rename_branch(catalog, TABLE, "b1", "b2")
    assert _rows(catalog) == [("b2", 1, 1)]
    with catalog.engine.connect() as conn:
        table_id = catalog.table_row(TABLE).table_id
        assert branch_pointer(conn, table_id, "b2") == BranchPointer(table_id, "b2", 1, 1)
        assert branch_pointer(conn, table_id, "b1") is None


def test_the_log_is_unique_per_branch(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, [1])  # main's snapshot 1, timeline 0
    _published(catalog, "b1", 0, 1)  # the same id on a branch is another snapshot
    with pytest.raises(sqlalchemy.exc.IntegrityError, match="uq_paimon_commit_events_table_snapshot"):
        _published(catalog, "b1", 0, 1)
    with pytest.raises(sqlalchemy.exc.IntegrityError, match="uq_paimon_commit_events_table_snapshot"):
        _published(catalog, "main", 0, 1)
    with catalog.engine.connect() as conn:
        branches = conn.execute(
            text("SELECT branch FROM paimon_commit_events WHERE event_type = 'snapshot_published' ORDER BY 1")
        ).scalars()
        assert list(branches) == ["b1", "main"]  # the commit path's events are main's by default
    # the log's record of main's snapshots (the audit's) is main's alone
    assert [e[:2] for e in recording_events(catalog.engine, catalog.table_row(TABLE).table_id)] == [
        (1, "snapshot_published")
    ]


def test_main_has_no_row(catalog: MetastoreCatalog) -> None:
    create(catalog)
    table_id = catalog.table_row(TABLE).table_id
    with catalog.engine.begin() as conn, pytest.raises(sqlalchemy.exc.IntegrityError, match="not_main"):
        conn.execute(
            text("INSERT INTO paimon_table_branches (table_id, branch) VALUES (:t, 'main')"), {"t": table_id}
        )
