"""The change feed's kind lanes (issue 39 item 5): one index per table log on (feed kind, txid, event_id).

A read of every event of a catalog filtered by kind (``?kind=failed``, ``events --kind``) read the three
logs in feed order and kept the few matching events, up to the scan cap of 10,000 events a page: from an
old position each page took ~0.2-0.3 s at 10^6 events and returned few events. With these indexes it
reads, per log, one index range per kind the log can have (``metastore.feed``: kind lanes):

* ``ix_paimon_commit_events_feed_kind`` (event_type, txid, event_id) on the commit log (a partitioned
  index: one per partition, made with each new partition);
* ``ix_paimon_lock_events_feed_kind`` (event_type, txid, event_id);
* ``ix_paimon_maintenance_events_feed_kind`` ((operation || '.' || event_type), txid, event_id), the
  maintenance log's feed kind.

On a large log the upgrade builds them holding a lock that blocks writes to the three logs while it runs
(as 0015 and 0023; README, "Operating it"); an operator can build the lock and maintenance logs' first
with ``CREATE INDEX CONCURRENTLY`` under these names, which this migration then finds (``IF NOT EXISTS``).
New partitions of the commit log get theirs when they are made (a partitioned index).

Kind: expand (adds indexes only).

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = (
    ("ix_paimon_commit_events_feed_kind", "paimon_commit_events", "event_type, txid, event_id"),
    ("ix_paimon_lock_events_feed_kind", "paimon_lock_events", "event_type, txid, event_id"),
    (
        "ix_paimon_maintenance_events_feed_kind",
        "paimon_maintenance_events",
        "((operation || '.' || event_type)), txid, event_id",
    ),
)


def upgrade() -> None:
    for name, table, columns in _INDEXES:
        op.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")


def downgrade() -> None:
    for name, _, _ in _INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
