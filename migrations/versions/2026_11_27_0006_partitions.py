"""Partitions registered in the catalog, and their done marks (the REST protocol's partition lifecycle).

``paimon_partitions`` holds one row per partition a client registered (``createPartitions``) or marked
done (``markDonePartitions``), keyed like ``paimon_partition_statistics`` by (table_id, partition_key:
the canonical JSON of the spec), with who created it and when, and the done mark (who, when). A
registered partition is listed with zero totals until a commit writes into it; dropping partitions
removes their rows in the transaction after the OVERWRITE that removed their files.

The maintenance log's operation CHECK grows by the partition and consumer operations recorded there
(``create_partitions``, ``drop_partitions``, ``mark_done_partitions``, ``reset_consumer``) and by the
branch operations (``create_branch``, ``drop_branch``, ``rename_branch``, ``fast_forward_branch``).

Kind: expand (adds only; a check constraint widened): the previous release keeps working on it.
Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "paimon_partitions"
OPERATION_CHECK = "ck_paimon_maintenance_events_operation"
OLD_OPERATIONS = ("expire_snapshots", "remove_orphan_files", "create_tag", "delete_tag", "rollback")
OPERATIONS = (
    *OLD_OPERATIONS,
    "create_partitions",
    "drop_partitions",
    "mark_done_partitions",
    "reset_consumer",
    "create_branch",
    "drop_branch",
    "rename_branch",
    "fast_forward_branch",
)


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("partition_key", sa.Text(), nullable=False),
        sa.Column("spec", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("done_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("table_id", "partition_key", name=op.f("pk_paimon_partitions")),
    )
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    op.create_check_constraint(
        op.f(OPERATION_CHECK), "paimon_maintenance_events", _in("operation", OPERATIONS)
    )


def downgrade() -> None:
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    # Event rows are append-only: a downgrade keeps rows of the newer operations by not re-checking them.
    op.execute(
        f"ALTER TABLE paimon_maintenance_events ADD CONSTRAINT {OPERATION_CHECK} "
        f"CHECK ({_in('operation', OLD_OPERATIONS)}) NOT VALID"
    )
    op.drop_table(TABLE)
