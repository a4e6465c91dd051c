"""Semantic views and replaced tables (the Java client's ``semantic-views`` operations and
``replaceTable``).

``paimon_semantic_views``: a database's named semantic models, each an opaque document ``{format,
content}`` (content up to 1 MiB of UTF-8) kept verbatim, with the ids, version and audit columns of
``paimon_functions`` (0005): a surrogate ``semantic_view_id`` the event log refers to, the
``semantic_view_uuid``, a version bumped by every upsert that replaces the definition. Its changes go to
``paimon_catalog_object_events`` with ``object_type`` ``semantic-view``; a table's replacement is a
``replace_table`` run of the maintenance log (both CHECK constraints widened here). The logs are
append-only: a downgrade keeps their newer rows by not re-checking them (as 0013 does).

Kind: expand (adds only; check constraints widened): the previous release keeps working on it.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "paimon_semantic_views"
OBJECT_CHECK = ("paimon_catalog_object_events", "ck_paimon_catalog_object_events_object_type", "object_type")
OLD_OBJECT_TYPES = ("view", "function")
OBJECT_TYPES = (*OLD_OBJECT_TYPES, "semantic-view")
OPERATION_CHECK = ("paimon_maintenance_events", "ck_paimon_maintenance_events_operation", "operation")
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
    "recover",
)
OPERATIONS = (*OLD_OPERATIONS, "replace_table")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _widen(check: tuple[str, str, str], values: Sequence[str]) -> None:
    table, name, column = check
    op.drop_constraint(op.f(name), table, type_="check")
    op.create_check_constraint(op.f(name), table, _in(column, values))


def _narrow(check: tuple[str, str, str], values: Sequence[str]) -> None:
    table, name, column = check
    op.drop_constraint(op.f(name), table, type_="check")
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({_in(column, values)}) NOT VALID")


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("semantic_view_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("semantic_view_uuid", sa.Uuid(), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("database_name", sa.String(length=255, collation="C"), nullable=False),
        sa.Column("name", sa.String(length=255, collation="C"), nullable=False),
        sa.Column("format", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("semantic_view_id", name=op.f("pk_paimon_semantic_views")),
        sa.UniqueConstraint("semantic_view_uuid", name=op.f("uq_paimon_semantic_views_semantic_view_uuid")),
        sa.UniqueConstraint(
            "catalog_key",
            "database_name",
            "name",
            name=op.f("uq_paimon_semantic_views_catalog_key_database_name_name"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_paimon_semantic_views_version_positive")),
    )
    _widen(OBJECT_CHECK, OBJECT_TYPES)
    _widen(OPERATION_CHECK, OPERATIONS)


def downgrade() -> None:
    _narrow(OPERATION_CHECK, OLD_OPERATIONS)
    _narrow(OBJECT_CHECK, OLD_OBJECT_TYPES)
    op.drop_table(TABLE)
