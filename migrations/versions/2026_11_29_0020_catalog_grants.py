"""Grants per catalog, and service-level grants (issue 35, second phase).

A principal is a service-wide identity; its grants are per catalog. ``paimon_grants.catalog_key`` names
the catalog (by its catalog key, as ``paimon_catalogs.catalog_key`` and every row of the registry do) a
grant applies in. NULL is "the default catalog": the one ``paimon-meta serve --catalog-name`` names.
Every grant that exists before this migration is NULL, so it keeps meaning exactly what it meant (the one
catalog the service served) and applies in no other catalog: nothing anyone could do changes. A
metastore that already records exactly one catalog has its grants assigned to that catalog's key here,
which is the same catalog (serve records the catalog it serves), and so they stay with it even if the
service's default catalog is changed later.

``paimon_service_grants`` holds what is granted at the service level, outside any catalog:
``create_catalog`` (the admin API's ``POST /api/management/v1/catalogs``; the creator gets ``admin`` on the
catalog it created).

The unique index of a grant's scope now includes its catalog.

Kind: expand (a nullable column, a new table, an index that only widens uniqueness): the previous release
ignores the column and the table and keeps working. It also reads a grant made for another catalog as one of
its own catalog: grant in catalogs other than the default only once no replica of the previous release is
left (docs/DESIGN.md, "Many catalogs in one service").

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("paimon_grants", sa.Column("catalog_key", sa.String(255), nullable=True))
    op.create_index(
        "uq_paimon_grants_catalog_scope",
        "paimon_grants",
        ["principal_id", "catalog_key", "privilege", "database_name", "table_name"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.drop_index("uq_paimon_grants_scope", table_name="paimon_grants")
    # The one catalog a metastore records is the one its grants were made for.
    op.execute(
        "UPDATE paimon_grants SET catalog_key = (SELECT catalog_key FROM paimon_catalogs)"
        " WHERE catalog_key IS NULL AND (SELECT count(*) FROM paimon_catalogs) = 1"
    )
    op.create_table(
        "paimon_service_grants",
        sa.Column("grant_id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("principal_id", sa.BigInteger(), nullable=False),
        sa.Column("privilege", sa.Text(), nullable=False),
        sa.Column("granted_by", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "privilege IN ('create_catalog')", name=op.f("ck_paimon_service_grants_privilege")
        ),
        sa.ForeignKeyConstraint(
            ["principal_id"],
            ["paimon_principals.principal_id"],
            name=op.f("fk_paimon_service_grants_principal_id_paimon_principals"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("grant_id", name=op.f("pk_paimon_service_grants")),
        sa.UniqueConstraint(
            "principal_id", "privilege", name=op.f("uq_paimon_service_grants_principal_id_privilege")
        ),
    )


def downgrade() -> None:
    op.drop_table("paimon_service_grants")
    # Grants of other catalogs than the default would widen to it without their column: drop them.
    op.execute(
        "DELETE FROM paimon_grants WHERE catalog_key IS NOT NULL AND catalog_key <> ALL("
        " SELECT catalog_key FROM paimon_catalogs ORDER BY catalog_id LIMIT 1)"
    )
    op.execute(
        "DELETE FROM paimon_grants g USING paimon_grants h WHERE g.grant_id > h.grant_id"
        " AND g.principal_id = h.principal_id AND g.privilege = h.privilege"
        " AND g.database_name IS NOT DISTINCT FROM h.database_name"
        " AND g.table_name IS NOT DISTINCT FROM h.table_name"
    )
    op.create_index(
        "uq_paimon_grants_scope",
        "paimon_grants",
        ["principal_id", "privilege", "database_name", "table_name"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.drop_index("uq_paimon_grants_catalog_scope", table_name="paimon_grants")
    op.drop_column("paimon_grants", "catalog_key")
