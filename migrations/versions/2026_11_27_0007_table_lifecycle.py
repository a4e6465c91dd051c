"""The maintenance log records a table's life in the catalog: ``register_table`` (an existing table
adopted at its location), ``drop_table`` (alone, or one of a database drop's) and ``rollback_schema``.

Kind: expand (adds only; a check constraint widened): the previous release keeps working on it.
Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OPERATION_CHECK = "ck_paimon_maintenance_events_operation"
OLD_OPERATIONS = (
    "expire_snapshots",
    "remove_orphan_files",
    "create_tag",
    "delete_tag",
    "rollback",
    "create_partitions",
    "drop_partitions",
    "mark_done_partitions",
    "reset_consumer",
    "create_branch",
    "drop_branch",
    "rename_branch",
    "fast_forward_branch",
)
OPERATIONS = (*OLD_OPERATIONS, "register_table", "drop_table", "rollback_schema")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
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
