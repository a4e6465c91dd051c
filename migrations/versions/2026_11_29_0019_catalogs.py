"""Catalogs as objects of the metastore (issue 35, first phase): ``paimon_catalogs``.

One row per catalog: its name (what clients pass as ``warehouse``), the catalog key its databases,
tables and lock ids are stored under (``paimon_tables.catalog_key`` etc., Java's ``catalog-key``), its
warehouse root in its normal form and that form's key (no two catalogs' keys equal or nest), its storage
profile (endpoint, region, path style; an STS role ARN and external id for vending), its tables'
default options, who created it and when.

Existing rows are not assigned here: a single-catalog metastore's warehouse is known only to
``paimon-meta serve --warehouse`` (and the library's ``connect``), not to the database. ``serve``
adopts it at start-up as "the default catalog" (``--catalog-name``, the ``catalog-key`` option,
``--warehouse``), so every existing row, lock id and token keeps its meaning; ``paimon-meta catalogs
create`` does the same by hand.

Kind: expand (a new table nothing of the previous release reads): the previous release keeps working on
it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "paimon_catalogs",
        sa.Column("catalog_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("catalog_key", sa.String(255), nullable=False),
        sa.Column("warehouse", sa.Text(), nullable=False),
        sa.Column("warehouse_key", sa.Text(collation="C"), nullable=False),
        sa.Column("storage_endpoint", sa.Text(), nullable=True),
        sa.Column("storage_region", sa.Text(), nullable=True),
        sa.Column("storage_path_style", sa.Boolean(), nullable=True),
        sa.Column("sts_role_arn", sa.Text(), nullable=True),
        sa.Column("sts_external_id", sa.Text(), nullable=True),
        sa.Column(
            "options",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("catalog_id", name=op.f("pk_paimon_catalogs")),
        sa.UniqueConstraint("name", name=op.f("uq_paimon_catalogs_name")),
        sa.UniqueConstraint("catalog_key", name=op.f("uq_paimon_catalogs_catalog_key")),
    )
    op.create_index("ix_paimon_catalogs_warehouse_key", "paimon_catalogs", ["warehouse_key"])


def downgrade() -> None:
    op.drop_index("ix_paimon_catalogs_warehouse_key", table_name="paimon_catalogs")
    op.drop_table("paimon_catalogs")
