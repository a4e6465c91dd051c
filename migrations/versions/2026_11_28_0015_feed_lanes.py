"""The change feed's lanes: indexes that let a read of the feed filtered to some tables or databases
(a filter, or the caller's grants) read only those tables' events, in feed order, from its position.

Each index leads with the lane's key, then the feed order (``txid``, ``event_id``): a read is one index
range per key, bounded below by the position as a row comparison ``(txid, event_id) > (...)`` and above
by the horizon (metastore/feed.py). Without them a reader of one quiet table scanned every other table's
events after its position. The lock log is keyed by its lock id (``<catalog key>.<database>.<table>``):
by the whole id (a table), by catalog key and database (a database), and by catalog key (the catalog:
other catalogs' locks in a shared metastore are not read either).

On a large log the upgrade builds the indexes once, holding a lock that blocks writes to the logs while
it runs (README, "Operating it").

Kind: expand (adds only: indexes): the previous release keeps working on it.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (index, table, key expressions): each followed by ``txid, event_id``.
INDEXES = (
    ("ix_paimon_commit_events_feed_table", "paimon_commit_events", ("table_identifier",)),
    (
        "ix_paimon_commit_events_feed_database",
        "paimon_commit_events",
        ("split_part(table_identifier, '.', 1)",),
    ),
    ("ix_paimon_maintenance_events_feed_table", "paimon_maintenance_events", ("table_identifier",)),
    (
        "ix_paimon_maintenance_events_feed_database",
        "paimon_maintenance_events",
        ("split_part(table_identifier, '.', 1)",),
    ),
    ("ix_paimon_lock_events_feed_table", "paimon_lock_events", ("lock_id",)),
    (
        "ix_paimon_lock_events_feed_database",
        "paimon_lock_events",
        ("split_part(lock_id, '.', 1)", "split_part(lock_id, '.', 2)"),
    ),
    ("ix_paimon_lock_events_feed_catalog", "paimon_lock_events", ("split_part(lock_id, '.', 1)",)),
)


def upgrade() -> None:
    for name, table, keys in INDEXES:
        op.create_index(name, table, [sa.text(k) for k in keys] + ["txid", "event_id"])


def downgrade() -> None:
    for name, table, _ in INDEXES:
        op.drop_index(name, table_name=table)
