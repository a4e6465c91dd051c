"""Every metastore path flat in the size of the log and the registry (issue 39 item 5).

* ``ix_paimon_commit_events_identifier`` (table_identifier, event_id) and
  ``ix_paimon_maintenance_events_identifier`` (table_identifier, event_id): the audit listings of a
  table by name (``.../events``, ``.../maintenance-runs``, ``paimon-meta events --table``), newest
  first from a position, read one index range (the feed's lane indexes of 0015 are in feed order,
  (table_identifier, txid, event_id): no bound for a listing by event id, which read every event of
  the name and sorted them).
* ``ix_paimon_commit_events_recorded`` (table_id, event_id) of main's publishing events and
  ``ix_paimon_commit_events_trouble`` (table_id, event_id) of retried, failed and aborted attempts
  (partial: a small part of the log): the snapshot recordings of a table and the console's failed
  attempts, from a position, read only the events they list (they read every event of the table that
  was not one, back to the table's first, when it had few).
* ``paimon_tables.schema_summary``: the table's current schema as Paimon's schema JSON (``id`` inside),
  kept by this release so that ``table-details`` answers from the registry instead of one schema-file
  read per table. Filled lazily (no backfill: reading every table's schema file would make the upgrade
  as long as the registry is large): a row whose summary is NULL, or whose summary's ``id`` is not the
  row's ``schema_id`` (a schema change by a replica of the previous release, or by Java, which leave
  the column alone), is answered from the schema file and its summary written then. So a stale summary
  is never used, whoever changed the schema.

On a large log the upgrade builds the indexes once, holding a lock that blocks writes to the commit
and maintenance logs while it runs (as 0015; README, "Operating it").

Kind: expand (adds only: four indexes, a nullable column nothing of the previous release reads).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0023"
# 0022 is another change not yet on main; this revision is re-pointed to it when both are merged.
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ("ix_paimon_commit_events_identifier", "paimon_commit_events"),
    ("ix_paimon_maintenance_events_identifier", "paimon_maintenance_events"),
)


#: (index, predicate) of the partial indexes on (table_id, event_id); each predicate is implied by the
#: WHERE of the statement it serves (paimon_meta.ops.audit._RECORDED, paimon_meta.ops.activity._TROUBLE).
PARTIAL = (
    (
        "ix_paimon_commit_events_recorded",
        "event_type IN ('snapshot_published', 'external', 'recovered') AND branch = 'main' "
        "AND snapshot_id IS NOT NULL",
    ),
    ("ix_paimon_commit_events_trouble", "event_type IN ('retried', 'failed', 'aborted')"),
)


def upgrade() -> None:
    for name, table in INDEXES:
        op.create_index(name, table, ["table_identifier", "event_id"])
    for name, where in PARTIAL:
        op.create_index(
            name, "paimon_commit_events", ["table_id", "event_id"], postgresql_where=sa.text(where)
        )
    op.add_column(
        "paimon_tables",
        sa.Column("schema_summary", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("paimon_tables", "schema_summary")
    for name, _ in PARTIAL:
        op.drop_index(name, table_name="paimon_commit_events")
    for name, table in INDEXES:
        op.drop_index(name, table_name=table)
