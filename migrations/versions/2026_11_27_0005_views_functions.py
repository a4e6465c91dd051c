"""Views and functions in the catalog (the REST protocol's view and function operations).

``paimon_views`` and ``paimon_functions`` hold one row per live object, keyed like ``paimon_tables``
by (catalog_key, database_name, name) and carrying a surrogate id that survives a rename and is never
reused, the protocol's ``id`` / ``uuid``, the object's definition as the protocol sends it, a version
bumped by every alter, and who created and last updated it. Names are ``COLLATE "C"``: listings page by
byte order (the same order as Python's ``sorted``), and a name prefix is a range of the unique index.

``paimon_catalog_object_events`` is append-only like the commit, lock, maintenance and access logs (the
same statement-level trigger): one row per create, alter, rename and drop, with the object's id, its
identifier at that time, the version it left behind, the principal and, in ``payload``, the definition
created, the changes applied or the name it had before.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VIEWS = "paimon_views"
FUNCTIONS = "paimon_functions"
EVENTS = "paimon_catalog_object_events"
OBJECT_TYPES = ("view", "function")
EVENT_TYPES = ("created", "altered", "renamed", "dropped")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _jsonb(name: str, default: str) -> sa.Column[object]:
    return sa.Column(
        name,
        postgresql.JSONB(astext_type=sa.Text()),
        server_default=sa.text(f"'{default}'::jsonb"),
        nullable=False,
    )


def _audit_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        VIEWS,
        sa.Column("view_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("view_uuid", sa.Uuid(), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("database_name", sa.String(length=255, collation="C"), nullable=False),
        sa.Column("view_name", sa.String(length=255, collation="C"), nullable=False),
        _jsonb("fields", "[]"),
        sa.Column("query", sa.Text(), nullable=False),
        _jsonb("dialects", "{}"),
        sa.Column("comment", sa.Text(), nullable=True),
        _jsonb("options", "{}"),
        *_audit_columns(),
        sa.PrimaryKeyConstraint("view_id", name=op.f("pk_paimon_views")),
        sa.UniqueConstraint("view_uuid", name=op.f("uq_paimon_views_view_uuid")),
        sa.UniqueConstraint(
            "catalog_key",
            "database_name",
            "view_name",
            name=op.f("uq_paimon_views_catalog_key_database_name_view_name"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_paimon_views_version_positive")),
    )
    op.create_table(
        FUNCTIONS,
        sa.Column("function_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("function_uuid", sa.Uuid(), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("database_name", sa.String(length=255, collation="C"), nullable=False),
        sa.Column("function_name", sa.String(length=255, collation="C"), nullable=False),
        sa.Column("input_params", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("return_params", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("deterministic", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        _jsonb("definitions", "{}"),
        sa.Column("comment", sa.Text(), nullable=True),
        _jsonb("options", "{}"),
        *_audit_columns(),
        sa.PrimaryKeyConstraint("function_id", name=op.f("pk_paimon_functions")),
        sa.UniqueConstraint("function_uuid", name=op.f("uq_paimon_functions_function_uuid")),
        sa.UniqueConstraint(
            "catalog_key",
            "database_name",
            "function_name",
            name=op.f("uq_paimon_functions_catalog_key_database_name_function_name"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_paimon_functions_version_positive")),
    )
    op.create_table(
        EVENTS,
        sa.Column("event_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("object_type", sa.Text(), nullable=False),
        sa.Column("object_id", sa.BigInteger(), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("identifier", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=True),
        _jsonb("payload", "{}"),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_paimon_catalog_object_events")),
        sa.CheckConstraint(
            _in("object_type", OBJECT_TYPES), name=op.f("ck_paimon_catalog_object_events_object_type")
        ),
        sa.CheckConstraint(
            _in("event_type", EVENT_TYPES), name=op.f("ck_paimon_catalog_object_events_event_type")
        ),
    )
    op.create_index(
        "ix_paimon_catalog_object_events_object", EVENTS, ["object_type", "object_id", "event_id"]
    )
    # By name too: a dropped object's history is still found by the name it had.
    op.create_index(
        "ix_paimon_catalog_object_events_identifier", EVENTS, ["object_type", "identifier", "event_id"]
    )
    op.execute(
        f"CREATE TRIGGER trg_{EVENTS}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {EVENTS} "
        "FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()"
    )


def downgrade() -> None:
    op.drop_table(EVENTS)  # drops its trigger with it
    op.drop_table(FUNCTIONS)
    op.drop_table(VIEWS)
