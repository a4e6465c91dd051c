"""The catalog of every table that left the registry (``paimon_removed_tables``): which catalog a commit
event belongs to after its table was purged.

The event log refers to a table by ``table_id`` only; its catalog was read from ``paimon_tables`` or the
recycle bin (``paimon_dropped_tables``). Once a table was purged from both, its events had no catalog and
the archiver put them into the default catalog's ``system.commit_log``: one team's commit history in
another's warehouse. Here every row deleted from either table leaves ``(table_id, catalog_key)`` behind,
kept by row triggers in the deleting transaction (so a purge by any code path, this release's, the
previous release's during a rolling upgrade, or an operator's SQL, records it), and the event log's
catalog becomes: the registry's, else the bin's, else this table's. A drop into the bin writes a row too
(the registry row is deleted); it is the same key, and the live rows come first. ``table_id`` is never
reused (an identity), so a row never names the wrong table.

Tables purged before this revision have no row: their events stay attributed to ``(purged)`` and are
archived into the default catalog (docs/OPERATIONS.md).

Kind: expand (a new table and two AFTER DELETE triggers; the previous release neither reads nor writes
the table, and its deletes fire the triggers like this release's).

Downgrade: the triggers, their function and the table are dropped.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = r"""
CREATE FUNCTION paimon_remember_removed_table() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO paimon_removed_tables (table_id, catalog_key) VALUES (OLD.table_id, OLD.catalog_key)
    ON CONFLICT (table_id) DO UPDATE SET catalog_key = EXCLUDED.catalog_key, removed_at = now();
    RETURN OLD;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "paimon_removed_tables",
        sa.Column("table_id", sa.BigInteger(), nullable=False),
        sa.Column("catalog_key", sa.String(255), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("table_id", name=op.f("pk_paimon_removed_tables")),
    )
    op.execute(_FUNCTION)
    for table in ("paimon_tables", "paimon_dropped_tables"):
        op.execute(
            f"CREATE TRIGGER trg_{table}_removed AFTER DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION paimon_remember_removed_table()"
        )


def downgrade() -> None:
    for table in ("paimon_tables", "paimon_dropped_tables"):
        op.execute(f"DROP TRIGGER IF EXISTS trg_{table}_removed ON {table}")
    op.execute("DROP FUNCTION IF EXISTS paimon_remember_removed_table()")
    op.drop_table("paimon_removed_tables")
