"""Tables the catalog keeps as metadata only (format, object and Iceberg tables: their files are their
clients'): ``paimon_tables.table_schema`` holds such a table's schema as Paimon's schema JSON (what a
``schema/schema-<id>`` file would hold), so nothing of ours is written into the table's directory, which
its clients read as a whole. NULL for Paimon tables, whose schemas are on storage.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "paimon_tables", sa.Column("table_schema", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )


def downgrade() -> None:
    # The rows of catalog-only tables would lose their schemas: refuse rather than drop them silently.
    op.execute(
        "DO $$ BEGIN IF EXISTS (SELECT 1 FROM paimon_tables WHERE table_schema IS NOT NULL) THEN "
        "RAISE EXCEPTION 'paimon_tables holds format/object/iceberg tables (table_schema): drop them "
        "before downgrading below 0008'; END IF; END $$"
    )
    op.drop_column("paimon_tables", "table_schema")
