"""Views and functions in the catalog (the REST protocol's view and function operations).

``paimon_views`` is Java Paimon's (``JdbcCatalog`` keeps views since apache/paimon#8208: ``JdbcUtils
.CREATE_VIEW_TABLE``, created by Java when missing): one row per view keyed by (catalog_key,
database_name, view_name) with the protocol's ``ViewSchema`` as JSON text in ``view_schema``. As 0001
does for Java's tables, this creates it in Java's exact DDL only if absent, then extends it with columns
that are nullable or defaulted (Java's INSERTs keep working): a surrogate ``view_id`` that survives a
rename, the protocol's ``id`` (``view_uuid``; NULL for rows Java inserted), a version bumped by every
alter, and who created and last updated it. Downgrading puts it back into Java's shape: its rows may be
a Java catalog's.

``paimon_functions`` is ours (Java keeps functions only behind REST): the protocol's ``Function`` in
columns, with the same ids, version and audit fields.

The name columns are ``COLLATE "C"``: listings page by byte order (Python's ``sorted`` order, the
order of the page token), and a name prefix is a range of the primary key / unique index.

``paimon_catalog_object_events`` is append-only like the commit, lock, maintenance and access logs (the
same statement-level trigger): one row per create, alter, rename and drop of a view or function, with
its surrogate id, its identifier after the change, the version it left behind, the principal and, in
``payload``, the definition created, the changes applied or the name it had before.

Kind: expand (adds only): the previous release keeps working on it.
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


#: Java's DDL, verbatim in shape (JdbcUtils.CREATE_VIEW_TABLE).
JAVA_VIEWS_DDL = (
    "CREATE TABLE IF NOT EXISTS paimon_views("
    "catalog_key VARCHAR(255) NOT NULL, database_name VARCHAR(255) NOT NULL, "
    "view_name VARCHAR(255) NOT NULL, view_schema TEXT NOT NULL, "
    "PRIMARY KEY (catalog_key, database_name, view_name))"
)


def _rename_primary_key(table: str, new_name: str) -> None:
    # As 0001's: a DO block, so offline (--sql) scripts rename correctly too; constant identifiers.
    op.execute(
        f"""
        DO $$
        DECLARE current_name text;
        BEGIN
            SELECT conname INTO current_name FROM pg_constraint
            WHERE conrelid = '{table}'::regclass AND contype = 'p';
            IF current_name IS DISTINCT FROM '{new_name}' THEN
                EXECUTE 'ALTER TABLE {table} RENAME CONSTRAINT ' || quote_ident(current_name)
                    || ' TO {new_name}';
            END IF;
        END
        $$
        """  # noqa: S608 - constant identifiers
    )


def _set_name_collation(collation: str) -> None:
    for column in ("database_name", "view_name"):
        op.execute(f'ALTER TABLE {VIEWS} ALTER COLUMN {column} TYPE VARCHAR(255) COLLATE "{collation}"')


def _upgrade_java_views() -> None:
    op.execute(JAVA_VIEWS_DDL)
    _rename_primary_key(VIEWS, f"pk_{VIEWS}")
    _set_name_collation("C")
    op.add_column(VIEWS, sa.Column("view_id", sa.BigInteger(), sa.Identity(always=False), nullable=False))
    op.add_column(VIEWS, sa.Column("view_uuid", sa.Uuid(), nullable=True))
    for column in _audit_columns():
        op.add_column(VIEWS, column)
    op.create_unique_constraint(op.f("uq_paimon_views_view_id"), VIEWS, ["view_id"])
    op.create_unique_constraint(op.f("uq_paimon_views_view_uuid"), VIEWS, ["view_uuid"])
    op.create_check_constraint(op.f("ck_paimon_views_version_positive"), VIEWS, "version >= 1")


def _downgrade_java_views() -> None:
    op.drop_constraint(op.f("ck_paimon_views_version_positive"), VIEWS, type_="check")
    op.drop_constraint(op.f("uq_paimon_views_view_uuid"), VIEWS, type_="unique")
    op.drop_constraint(op.f("uq_paimon_views_view_id"), VIEWS, type_="unique")
    for column in ("updated_by", "updated_at", "created_by", "created_at", "version", "view_uuid", "view_id"):
        op.drop_column(VIEWS, column)
    _set_name_collation("default")
    _rename_primary_key(VIEWS, f"{VIEWS}_pkey")


def _audit_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    _upgrade_java_views()
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
    _downgrade_java_views()
