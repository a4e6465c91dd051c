"""The maintenance log records recoveries run from the operator console (``recover``), with the
principal and the operator's reason, as it records the console's tag and rollback actions.

Kind: expand (adds only; a check constraint widened): the previous release keeps working on it.
Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
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
    "register_table",
    "drop_table",
    "rollback_schema",
)
OPERATIONS = (*OLD_OPERATIONS, "recover")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    op.create_check_constraint(
        op.f(OPERATION_CHECK), "paimon_maintenance_events", _in("operation", OPERATIONS)
    )


def downgrade() -> None:
    op.drop_constraint(op.f(OPERATION_CHECK), "paimon_maintenance_events", type_="check")
    # Event rows are append-only: a downgrade keeps the recover rows by not re-checking them.
    op.execute(
        f"ALTER TABLE paimon_maintenance_events ADD CONSTRAINT {OPERATION_CHECK} "
        f"CHECK ({_in('operation', OLD_OPERATIONS)}) NOT VALID"
    )
