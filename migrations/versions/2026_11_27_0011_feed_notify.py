"""The change feed's wake-up: a statement-level trigger on the commit, lock and maintenance logs sends
``NOTIFY paimon_meta_feed`` from the transaction that writes events, so feed readers (one per service
replica, metastore/feed.py) read the log as soon as it commits instead of polling it.

The log stays the source of truth: a notification carries nothing (Postgres folds a transaction's equal
notifications into one) and a reader that missed one (its connection broke) catches up from its
position. NOTIFY is delivered only if the transaction commits.

Kind: expand (adds only): the previous release keeps working on it.
Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LOGS = ("paimon_commit_events", "paimon_lock_events", "paimon_maintenance_events")
CHANNEL = "paimon_meta_feed"


def upgrade() -> None:
    op.execute(
        "CREATE FUNCTION paimon_meta_feed_notify() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN PERFORM pg_notify('{CHANNEL}', ''); RETURN NULL; END $$"
    )
    for table in LOGS:
        op.execute(
            f"CREATE TRIGGER {table}_feed_notify AFTER INSERT ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION paimon_meta_feed_notify()"
        )


def downgrade() -> None:
    for table in LOGS:
        op.execute(f"DROP TRIGGER {table}_feed_notify ON {table}")
    op.execute("DROP FUNCTION paimon_meta_feed_notify()")
