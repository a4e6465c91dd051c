"""Table locations in one normal form (issue 34): ``paimon_tables.location`` rewritten to
``normalise_uri`` of itself and a new ``location_key`` (``paimon_meta.io.base.location_key``: the same
place whatever its spelling), indexed bytewise for the overlap check every create, register and drop
makes.

Existing rows are normalised in place. A row whose location has no normal form (a ``..`` segment, a
control character) stops the upgrade with a message naming it: no version of ours stored one, so it was
written by hand, and an operator must decide where that table lives. Rows whose keys are equal or nest
(what the register hole of issue 34 left: ``<warehouse>//db1.db/t1`` beside ``<warehouse>/db1.db/t1``)
are reported, not refused: the upgrade is what closes the hole and makes a drop safe (a drop never
deletes under another row's key), so refusing it would keep the hole open. Each pair is logged as a
warning on ``paimon_meta.migrations``; drop the row that should not be there (its files stay, held by
the other row).

Kind: expand (adds a column and its indexes; stored locations rewritten to their normal form, the same
places to the previous release, which inserts rows without a key that the overlap check still compares): the
previous release keeps working on it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

from paimon_meta.errors import ValidationError
from paimon_meta.io.base import key_ancestors, location_key, normalise_uri

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("paimon_meta.migrations")


def upgrade() -> None:
    op.add_column("paimon_tables", sa.Column("location_key", sa.Text(collation="C"), nullable=True))
    if not context.is_offline_mode():
        _normalise_rows()
    # Offline (``alembic upgrade --sql``) the rows keep their spellings and no key: the code compares
    # such rows by their location's key, as it does rows a replica not yet upgraded inserts.
    op.create_index("ix_paimon_tables_location_key", "paimon_tables", ["location_key"])
    op.create_index(
        "ix_paimon_tables_location_unkeyed",
        "paimon_tables",
        ["table_id"],
        postgresql_where=sa.text("location IS NOT NULL AND location_key IS NULL"),
    )


def _normalise_rows() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "SELECT table_id, catalog_key, database_name, table_name, location FROM paimon_tables "
            "WHERE location IS NOT NULL ORDER BY table_id"
        )
    ).all()
    updates = []
    owners: dict[str, list[str]] = {}
    for row in rows:
        name = f"{row.catalog_key}:{row.database_name}.{row.table_name}"
        try:
            normal, key = normalise_uri(row.location), location_key(row.location)
        except ValidationError as e:  # LocationError and the rest: named so the operator sees which row
            raise RuntimeError(
                f"paimon_tables row {name} (table_id {row.table_id}): location {row.location!r} has no "
                f"normal form ({e.message}); set it to where the table lives, then upgrade again"
            ) from e
        owners.setdefault(key, []).append(name)
        updates.append({"id": row.table_id, "location": normal, "key": key})
    if updates:
        conn.execute(
            sa.text(
                "UPDATE paimon_tables SET location = :location, location_key = :key WHERE table_id = :id"
            ),
            updates,
        )
    for key, names in sorted(owners.items()):
        if len(names) > 1:
            log.warning("tables %s share the location %s: drop the one that should not be there", names, key)
        for ancestor in key_ancestors(key):
            for outer in owners.get(ancestor, ()):
                log.warning(
                    "table %s lies inside table %s (%s contains %s): drop the one that should not be there",
                    names,
                    outer,
                    ancestor,
                    key,
                )


def downgrade() -> None:
    # The locations stay in their normal forms: each names the same place as the spelling it replaced.
    op.drop_index("ix_paimon_tables_location_unkeyed", table_name="paimon_tables")
    op.drop_index("ix_paimon_tables_location_key", table_name="paimon_tables")
    op.drop_column("paimon_tables", "location_key")
