"""The recycle bin's databases (issue 38): ``paimon_dropped_databases``.

A dropped database is kept for the catalog's retention with its row, Java's property rows, its
database-level grants, its views, functions and semantic views, and the bin entries of the tables
dropped with it (``paimon_dropped_tables``); ``undrop`` restores it if the name is free, a purge (or
the maintenance queue, after the retention) removes it once its tables are purged.

Kind: expand (a new table nothing of the previous release reads): the previous release keeps working on
it (its database drops simply do not use the bin).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = postgresql.JSONB(astext_type=sa.Text())


def upgrade() -> None:
    op.create_table(
        "paimon_dropped_databases",
        sa.Column("drop_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("database_name", sa.String(length=255), nullable=False),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("database_row", JSONB, nullable=True),
        sa.Column("properties", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("grants", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("objects", JSONB, server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("table_drop_ids", JSONB, server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=True),
        sa.Column("dropped_by", sa.Text(), nullable=True),
        sa.Column("dropped_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("purge_after", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("drop_id", name=op.f("pk_paimon_dropped_databases")),
    )
    op.create_index(
        "ix_paimon_dropped_databases_name", "paimon_dropped_databases", ["catalog_key", "database_name"]
    )
    op.create_index("ix_paimon_dropped_databases_purge_after", "paimon_dropped_databases", ["purge_after"])


def downgrade() -> None:
    op.drop_table("paimon_dropped_databases")
