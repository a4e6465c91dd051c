"""The change feed's order: every row of the commit, lock and maintenance logs records the id of the
transaction that wrote it (``txid``, ``pg_current_xact_id()`` as a bigint), indexed with the event id.

Why: event ids come from sequences handed out before commit, so a transaction can commit an event with a
lower id after a reader has passed it; a feed read by event id would skip it. The feed reads instead in
(``txid``, log, event id) order and only rows whose ``txid`` is below the oldest transaction still
running (``pg_snapshot_xmin(pg_current_snapshot())``): every row that becomes visible later has a
``txid`` at or above that horizon, so it sorts after everything already read (metastore/feed.py). Rows
already in the logs get the migration's own transaction id (one value: their order is their event ids).

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOGS = ("paimon_commit_events", "paimon_lock_events", "paimon_maintenance_events")
TXID_DEFAULT = "(pg_current_xact_id())::text::bigint"


def upgrade() -> None:
    for table in LOGS:
        op.add_column(
            table, sa.Column("txid", sa.BigInteger(), server_default=sa.text(TXID_DEFAULT), nullable=False)
        )
        op.create_index(f"ix_{table}_feed", table, ["txid", "event_id"])


def downgrade() -> None:
    for table in LOGS:
        op.drop_index(f"ix_{table}_feed", table_name=table)
        op.drop_column(table, "txid")
