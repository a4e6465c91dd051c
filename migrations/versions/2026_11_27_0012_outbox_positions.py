"""The outbox's positions: how far each publisher of the change feed to a broker got (``serve
--events-nats``, service/outbox.py).

One row per (catalog key, sink): the feed position (metastore/feed.py: ``txid``, log ``rank``,
``event_id``) of the last event the broker acknowledged, how many events were published in all, when
and by which replica. The publisher writes it only after the broker acked every event up to it, from the
session that holds the catalog's outbox advisory lock, and only forward.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "paimon_outbox_positions"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("catalog_key", sa.Text(), nullable=False),
        sa.Column("sink", sa.Text(), nullable=False),
        sa.Column("txid", sa.BigInteger(), nullable=False),
        sa.Column("rank", sa.SmallInteger(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=False),
        sa.Column("published", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("catalog_key", "sink", name=op.f("pk_paimon_outbox_positions")),
    )


def downgrade() -> None:
    op.drop_table(TABLE)
