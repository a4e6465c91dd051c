"""Lock rows say since when they are held; commit history names the principal (issue 40 item 6).

* ``paimon_distributed_locks.held_since``: when the current holder acquired the row. ``acquired_at`` is
  refreshed by every heartbeat (Java's expiry predicate reads it), so the time since it is the time
  since the last heartbeat, not how long the lock has been held. Rows inserted without it (Java's
  ``JdbcCatalogLock``, a replica of the previous release) get the insert's ``now()``, which for them is
  the acquisition too (they never refresh ``acquired_at``).
* ``paimon_commit_history.principal``: the principal that prepared the commit (``paimon_commit_events``
  has carried it since 0003), as the last column, so the view is replaced in place.
* ``paimon_access_events``: a commit the service refused for want of a grant (403) is recorded as
  ``commit_refused`` (the route never ran, so the commit log has nothing); ``expires_at`` is NULL for
  it (nothing was handed out), so the column becomes nullable.

Kind: expand (a nullable column with a default, a view column appended, one more event type, a NOT NULL
dropped): the previous release reads and writes these tables unchanged.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HISTORY = """
        SELECT
            e.commit_id,
            min(e.table_id) AS table_id,
            min(e.table_identifier) AS table_identifier,
            min(e.commit_user) AS commit_user,
            min(e.commit_identifier) AS commit_identifier,
            min(e.commit_kind) AS commit_kind,
            CASE
                WHEN bool_or(e.event_type = 'snapshot_published') THEN 'published'
                WHEN bool_or(e.event_type = 'external') THEN 'external'
                WHEN bool_or(e.event_type = 'recovered') THEN 'recovered'
                WHEN bool_or(e.event_type = 'failed') THEN 'failed'
                WHEN bool_or(e.event_type = 'aborted') THEN 'aborted'
                ELSE 'pending'
            END AS outcome,
            max(e.snapshot_id) FILTER (
                WHERE e.event_type IN ('snapshot_published', 'external', 'recovered')
            ) AS snapshot_id,
            max(e.attempt) AS attempts,
            count(*) FILTER (WHERE e.event_type = 'retried') AS retries,
            count(*) FILTER (
                WHERE e.event_type = 'conflict_checked' AND e.payload @> '{"conflict": true}'
            ) AS conflicts,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'prepared') AS prepare_ms,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'conflict_checked') AS conflict_check_ms,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'snapshot_published') AS publish_ms,
            sum((e.payload ->> 'wait_ms')::double precision) FILTER (
                WHERE e.event_type = 'retried'
            ) AS retry_wait_ms,
            (array_agg(e.payload ->> 'reason' ORDER BY e.event_id DESC) FILTER (
                WHERE e.event_type IN ('failed', 'aborted', 'recovered')
            ))[1] AS final_reason,
            min(e.created_at) AS first_event_at,
            max(e.created_at) AS last_event_at,
            EXTRACT(EPOCH FROM max(e.created_at) - min(e.created_at)) * 1000 AS elapsed_ms,
            count(*) AS event_count{principal}
        FROM paimon_commit_events e
        GROUP BY e.commit_id
"""
ACCESS = "paimon_access_events"
ACCESS_CHECK = "ck_paimon_access_events_event_type"
OLD_ACCESS_TYPES = ("credentials_vended",)
ACCESS_TYPES = (*OLD_ACCESS_TYPES, "commit_refused")


def _in(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


_PRINCIPAL = """,
            (array_agg(e.principal ORDER BY e.event_id) FILTER (
                WHERE e.event_type = 'prepared' AND e.principal IS NOT NULL
            ))[1] AS principal"""


def upgrade() -> None:
    op.add_column(
        "paimon_distributed_locks",
        sa.Column("held_since", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=True),
    )
    op.execute(
        "CREATE OR REPLACE VIEW paimon_commit_history AS " + _HISTORY.replace("{principal}", _PRINCIPAL)
    )
    op.drop_constraint(op.f(ACCESS_CHECK), ACCESS, type_="check")
    op.create_check_constraint(op.f(ACCESS_CHECK), ACCESS, _in("event_type", ACCESS_TYPES))
    op.alter_column(ACCESS, "expires_at", nullable=True)


def downgrade() -> None:
    # Event rows are append-only: the refusals stay, unchecked (NOT VALID), as 0013 keeps its rows.
    op.drop_constraint(op.f(ACCESS_CHECK), ACCESS, type_="check")
    op.execute(
        f"ALTER TABLE {ACCESS} ADD CONSTRAINT {ACCESS_CHECK} CHECK ({_in('event_type', OLD_ACCESS_TYPES)}) "
        "NOT VALID"
    )
    # NOT NULL again only when no refusal row has none (those rows cannot be changed or removed).
    op.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM paimon_access_events WHERE expires_at IS NULL) THEN "
        "ALTER TABLE paimon_access_events ALTER COLUMN expires_at SET NOT NULL; END IF; END $$"
    )
    # A view loses a column only by being dropped and created again.
    op.execute("DROP VIEW paimon_commit_history")
    op.execute("CREATE VIEW paimon_commit_history AS " + _HISTORY.replace("{principal}", ""))
    op.drop_column("paimon_distributed_locks", "held_since")
