"""Commits on a branch: the commit log names the branch of every event, and a branch other than main has
its own snapshot pointer.

* ``paimon_commit_events.branch`` (``'main'`` for every existing row): a branch's snapshot ids
  (``branch/branch-NAME/snapshot/snapshot-N``) overlap main's, so "no snapshot id is published twice"
  (``uq_paimon_commit_events_table_snapshot``) and the exactly-once lookup
  (``ix_paimon_commit_events_dedupe``) are per (table, branch).
* ``paimon_table_branches``: per table and branch (main excepted: main keeps ``paimon_tables``'
  pointer), the latest snapshot recorded and the branch's ``timeline``. A branch name can be dropped
  and created again, or renamed onto, and its snapshot ids then start over: each such incarnation
  takes a timeline no event of that (table, branch) has used, as a rollback does on main, so the unique
  index holds across incarnations and exactly-once lookups see only the current one.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PUBLISHING = "event_type IN ('snapshot_published', 'external')"
EVENTS = "paimon_commit_events"
UNIQUE_SNAPSHOT = "uq_paimon_commit_events_table_snapshot"
DEDUPE = "ix_paimon_commit_events_dedupe"


def _events_indexes(branch: bool) -> None:
    on_branch = ["branch"] if branch else []
    op.drop_index(UNIQUE_SNAPSHOT, table_name=EVENTS)
    op.create_index(
        UNIQUE_SNAPSHOT,
        EVENTS,
        ["table_id", *on_branch, "timeline", "snapshot_id"],
        unique=True,
        postgresql_where=sa.text(PUBLISHING),
    )
    op.drop_index(DEDUPE, table_name=EVENTS)
    op.create_index(DEDUPE, EVENTS, ["table_id", *on_branch, "commit_user", "commit_identifier"])


def upgrade() -> None:
    # A constant default: existing rows take it without a rewrite (no UPDATE for the append-only trigger).
    op.add_column(EVENTS, sa.Column("branch", sa.Text(), server_default=sa.text("'main'"), nullable=False))
    _events_indexes(branch=True)
    op.create_table(
        "paimon_table_branches",
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("branch", sa.Text(), nullable=False),
        sa.Column("latest_snapshot_id", sa.BigInteger(), nullable=True),
        sa.Column("timeline", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("table_id", "branch", name=op.f("pk_paimon_table_branches")),
        sa.CheckConstraint("branch <> 'main'", name=op.f("ck_paimon_table_branches_not_main")),
        sa.CheckConstraint(
            "latest_snapshot_id IS NULL OR latest_snapshot_id >= 1",
            name=op.f("ck_paimon_table_branches_latest_snapshot_id_positive"),
        ),
        sa.CheckConstraint("timeline >= 0", name=op.f("ck_paimon_table_branches_timeline_non_negative")),
    )


def downgrade() -> None:
    # Below 0009 every event is main's: a branch's events would be read as main snapshots (and collide
    # with main's ids in the unique index). The log is append-only, so refuse rather than lose them.
    op.execute(
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM paimon_commit_events WHERE branch <> 'main') THEN "
        "RAISE EXCEPTION 'paimon_commit_events holds commits on branches: the log below 0009 cannot "
        "tell them from main''s'; END IF; END $$"
    )
    op.drop_table("paimon_table_branches")
    _events_indexes(branch=False)
    op.drop_column(EVENTS, "branch")
