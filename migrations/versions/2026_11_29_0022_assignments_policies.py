"""Paimon's permission model stored (issue 36, governance phase B): assignments, data policies, roles'
memberships and the governance event log; every grant migrated to its bundle's assignments.

* ``paimon_assignments``: one access on one resource for one principal (docs/GOVERNANCE.md). The resource
  is its type and its locators (``database_name``, ``object_name``: the table, view or function), bound to
  the object's identity where the registry has a stable id (``object_id``: the database's ``database_id``
  for ``DATABASE``/``DATABASE_ALL``, the table's ``table_id`` for ``TABLE``/``COLUMN``, ``view_id``,
  ``function_id``): a rename rewrites the locators of the rows bound to the id, a drop deletes them, a new
  object of the same name gets none of them. NULL: bound by name (a grant made before the object existed,
  or naming no catalog key that could resolve it), as grants were. ``catalog_key`` NULL is the service's
  default catalog (as ``paimon_grants.catalog_key``, migration 0020). Unique identity: (catalog, principal,
  resource, access).
* ``paimon_policies``: a row filter or column mask of one table (by ``table_id``) for one principal; the
  body is the rule's canonical JSON. Unique (table, principal, type, column).
* ``paimon_principal_members``: which principal belongs to which group or role (``role:NAME`` principals,
  created by an operator); its assignments and policies apply to its members.
* ``paimon_governance_events``: the append-only log of every change above (who, what, when, why), with
  the change feed's ``txid`` (migration 0010) and wake-up trigger (0011).

Data migration: each ``paimon_grants`` row becomes the assignments of its bundle
(``paimon_meta.governance.bundles``, the table copied below as it is at this revision), granted by and at
the grant's ``granted_by`` and ``created_at``, reason ``migrated from grant ...``; a grant's database and
table are bound to their ids when its catalog key names them. Downgrade drops the new tables: the grants
were never removed, so what an older release reads is what it read before.

Kind: expand (new tables; ``paimon_grants`` stays and is still written by ``principals grant``): a replica
of the previous release keeps working on it, reading the grants. A grant an old replica's CLI writes during
the rolling upgrade is not mirrored into assignments: run ``paimon-meta principals grant`` again from the
new release once the upgrade is done (docs/GOVERNANCE.md, "Phase B plan").

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ASSIGNMENTS = "paimon_assignments"
POLICIES = "paimon_policies"
MEMBERS = "paimon_principal_members"
EVENTS = "paimon_governance_events"
RESOURCE_TYPES = ("CATALOG", "CATALOG_ALL", "DATABASE", "DATABASE_ALL", "TABLE", "COLUMN", "VIEW", "FUNCTION")
ACCESSES = (
    "ALL", "CREATEDATABASE", "DESCRIBE", "ALTER", "DROP", "CREATETABLE", "CREATEFUNCTION", "CREATEVIEW",
    "LIST", "SELECT", "UPDATE", "GRANT",
)  # fmt: skip
POLICY_TYPES = ("ROW_FILTER", "COLUMN_MASKING")
EVENT_TYPES = (
    "permission_granted",
    "permission_revoked",
    "policy_created",
    "policy_dropped",
    "member_added",
    "member_removed",
    "object_dropped",
    "object_renamed",
)
TXID_DEFAULT = "(pg_current_xact_id())::text::bigint"

#: ``bundle_assignments`` at this revision: (privilege, scope of the grant, resource type, access). Each
#: privilege includes the rows of the ones before it (read < write < admin).
_BUNDLES = (
    ("read", "catalog", "CATALOG_ALL", ("DESCRIBE", "LIST", "SELECT")),
    ("write", "catalog", "CATALOG_ALL", ("UPDATE",)),
    ("admin", "catalog", "CATALOG", ("CREATEDATABASE", "ALTER", "DROP")),
    ("admin", "catalog", "CATALOG_ALL", ("ALTER", "DROP", "CREATETABLE", "CREATEVIEW", "CREATEFUNCTION")),
    ("read", "database", "DATABASE", ("DESCRIBE", "LIST")),
    ("read", "database", "DATABASE_ALL", ("SELECT",)),
    ("write", "database", "DATABASE_ALL", ("UPDATE",)),
    ("admin", "database", "DATABASE", ("ALTER", "DROP", "CREATETABLE", "CREATEVIEW", "CREATEFUNCTION")),
    ("admin", "database", "DATABASE_ALL", ("ALTER", "DROP")),
    ("read", "table", "TABLE", ("SELECT",)),
    ("write", "table", "TABLE", ("UPDATE",)),
    ("admin", "table", "TABLE", ("ALTER", "DROP")),
)
_RANK = {"read": 1, "write": 2, "admin": 3}


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def _jsonb(name: str) -> sa.Column[object]:
    return sa.Column(
        name, postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False
    )


def _principal_fk(column: str, table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column],
        ["paimon_principals.principal_id"],
        name=op.f(f"fk_{table}_{column}_paimon_principals"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        ASSIGNMENTS,
        sa.Column("assignment_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=True),
        sa.Column("principal_id", sa.BigInteger(), nullable=False),
        sa.Column("resource_type", sa.Text(), nullable=False),
        sa.Column("database_name", sa.String(length=255), nullable=True),
        sa.Column("object_name", sa.String(length=255), nullable=True),
        sa.Column("object_id", sa.BigInteger(), nullable=True),
        sa.Column("access", sa.Text(), nullable=False),
        sa.Column("column_names", postgresql.ARRAY(sa.Text()), nullable=True),
        sa.Column("excluded_column_names", postgresql.ARRAY(sa.Text()), nullable=True),
        sa.Column("expire_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("granted_by", sa.Text(), nullable=True),
        sa.Column("granted_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("assignment_id", name=op.f("pk_paimon_assignments")),
        _principal_fk("principal_id", ASSIGNMENTS),
        sa.CheckConstraint(
            _in("resource_type", RESOURCE_TYPES), name=op.f("ck_paimon_assignments_resource_type")
        ),
        sa.CheckConstraint(_in("access", ACCESSES), name=op.f("ck_paimon_assignments_access")),
        sa.CheckConstraint(
            "(resource_type = 'COLUMN') = ((column_names IS NULL) <> (excluded_column_names IS NULL))",
            name=op.f("ck_paimon_assignments_columns_for_column"),
        ),
    )
    op.create_index(
        "uq_paimon_assignments_identity",
        ASSIGNMENTS,
        ["catalog_key", "resource_type", "database_name", "object_name", "access", "principal_id"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    # A subject's assignments (its own, its groups', its roles'): one index range per principal.
    op.create_index("ix_paimon_assignments_principal", ASSIGNMENTS, ["principal_id", "catalog_key"])
    # A rename or drop of a bound object.
    op.create_index(
        "ix_paimon_assignments_object",
        ASSIGNMENTS,
        ["resource_type", "object_id"],
        postgresql_where=sa.text("object_id IS NOT NULL"),
    )
    op.create_table(
        POLICIES,
        sa.Column("policy_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=False),
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("principal_id", sa.BigInteger(), nullable=False),
        sa.Column("policy_type", sa.Text(), nullable=False),
        sa.Column("on_column", sa.Text(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("policy_id", name=op.f("pk_paimon_policies")),
        _principal_fk("principal_id", POLICIES),
        sa.CheckConstraint(_in("policy_type", POLICY_TYPES), name=op.f("ck_paimon_policies_policy_type")),
        sa.CheckConstraint(
            "(policy_type = 'COLUMN_MASKING') = (on_column IS NOT NULL)",
            name=op.f("ck_paimon_policies_column_for_masks"),
        ),
    )
    op.create_index(
        "uq_paimon_policies_identity",
        POLICIES,
        ["table_id", "principal_id", "policy_type", "on_column"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.create_table(
        MEMBERS,
        sa.Column("member_id", sa.BigInteger(), nullable=False),
        sa.Column("group_id", sa.BigInteger(), nullable=False),
        sa.Column("added_by", sa.Text(), nullable=True),
        sa.Column("added_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("member_id", "group_id", name=op.f("pk_paimon_principal_members")),
        _principal_fk("member_id", MEMBERS),
        _principal_fk("group_id", MEMBERS),
        sa.CheckConstraint("member_id <> group_id", name=op.f("ck_paimon_principal_members_not_itself")),
    )
    op.create_index("ix_paimon_principal_members_group", MEMBERS, ["group_id"])
    op.create_table(
        EVENTS,
        sa.Column("event_id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("txid", sa.BigInteger(), server_default=sa.text(TXID_DEFAULT), nullable=False),
        sa.Column("catalog_key", sa.String(length=255), nullable=True),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        _jsonb("payload"),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("clock_timestamp()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_paimon_governance_events")),
        sa.CheckConstraint(
            _in("event_type", EVENT_TYPES), name=op.f("ck_paimon_governance_events_event_type")
        ),
    )
    op.create_index("ix_paimon_governance_events_feed", EVENTS, ["txid", "event_id"])
    op.create_index("ix_paimon_governance_events_subject", EVENTS, ["subject", "event_id"])
    op.create_index("ix_paimon_governance_events_target", EVENTS, ["target", "event_id"])
    op.execute(
        f"CREATE TRIGGER trg_{EVENTS}_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {EVENTS} "
        "FOR EACH STATEMENT EXECUTE FUNCTION paimon_reject_event_mutation()"
    )
    op.execute(
        f"CREATE TRIGGER {EVENTS}_feed_notify AFTER INSERT ON {EVENTS} "
        "FOR EACH STATEMENT EXECUTE FUNCTION paimon_meta_feed_notify()"
    )
    _migrate_grants()


def _migrate_grants() -> None:
    """Every grant's bundle as assignments (bound to the database's and table's ids where its catalog key
    names them; duplicates across a principal's grants kept once)."""
    rows = [
        (privilege, scope, resource_type, access)
        for privilege, scope, resource_type, accesses in _BUNDLES
        for access in accesses
    ]
    values = ", ".join(f"({_RANK[p]}, '{s}', '{t}', '{a}')" for p, s, t, a in rows)
    op.execute(
        f"""
        INSERT INTO {ASSIGNMENTS} (catalog_key, principal_id, resource_type, database_name, object_name,
            object_id, access, granted_by, granted_at, reason)
        SELECT DISTINCT ON (g.catalog_key, b.resource_type, g.database_name, g.table_name, b.access,
                g.principal_id)
            g.catalog_key, g.principal_id, b.resource_type,
            CASE WHEN b.resource_type IN ('CATALOG', 'CATALOG_ALL') THEN NULL ELSE g.database_name END,
            g.table_name,
            CASE
                WHEN b.resource_type IN ('DATABASE', 'DATABASE_ALL') THEN (
                    SELECT d.database_id FROM paimon_databases d
                    WHERE d.catalog_key = g.catalog_key AND d.database_name = g.database_name)
                WHEN b.resource_type = 'TABLE' THEN (
                    SELECT t.table_id FROM paimon_tables t WHERE t.catalog_key = g.catalog_key
                    AND t.database_name = g.database_name AND t.table_name = g.table_name)
            END,
            b.access, g.granted_by, g.created_at,
            'migrated from grant ' || g.privilege || ' on '
                || coalesce(g.database_name || coalesce('.' || g.table_name, ''), 'the catalog')
                || ' (migration 0022)'
        FROM paimon_grants g
        JOIN (VALUES {values}) AS b(rank, scope, resource_type, access)
          ON b.rank <= CASE g.privilege WHEN 'read' THEN 1 WHEN 'write' THEN 2 ELSE 3 END
         AND b.scope = CASE WHEN g.database_name IS NULL THEN 'catalog'
                            WHEN g.table_name IS NULL THEN 'database' ELSE 'table' END
        ORDER BY g.catalog_key, b.resource_type, g.database_name, g.table_name, b.access, g.principal_id,
            g.grant_id
        """  # noqa: S608 - constants
    )


def downgrade() -> None:
    op.drop_table(EVENTS)  # drops its triggers with it
    op.drop_table(MEMBERS)
    op.drop_table(POLICIES)
    op.drop_table(ASSIGNMENTS)
