"""The event log's metrics folded as the log grows (issue 39: ``/metrics`` flat in the size of the log).

Every scrape aggregated the whole commit, lock and maintenance logs, with series per table: at 2x10^7
events and 10^5 tables one scrape took 529 s and returned 173 MB. These tables hold a rollup that each fold
advances by the events since the last one (``paimon_meta.telemetry.rollup``):

* ``paimon_metric_folds``: per log, the feed position folded through, the events folded, the layout;
* ``paimon_metric_series``: counters, and histograms (sum and counts per bucket), per catalog, subject
  (a table, a lock, ``(other)``) and labels;
* ``paimon_metric_subjects``: the tables and locks with series of their own (the cardinality cap);
* ``paimon_metric_open_commits`` / ``paimon_metric_open_locks``: commits prepared and not concluded,
  acquisitions not ended, as far as the fold has read.

And three indexes of ``paimon_maintenance_debts`` (one row per table): the debt pressure per catalog
(``(catalog_key, greatest(sorted runs, small files), table_identifier)``, read backward: the console's
tables most in debt and ``/metrics``' worst table per catalog), the tables over the stop trigger (partial:
counted per catalog), and (catalog_key, table_identifier) (the debt gauges of the tables with series).
Before, the console's maintenance page and each scrape read every table's debt (5.2 s and 123 ms at
10^5 tables).

They start empty: the first fold after the upgrade reads the log from its start (in the background of
``serve``, a chunk per transaction; ``paimon_meta_event_log_metrics_caught_up`` says when it is done).

Kind: expand (new tables and indexes only; the previous release neither reads nor writes the tables).

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "paimon_metric_folds",
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("txid", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("event_id", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("events", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("layout", sa.Text(), nullable=False),
        sa.Column("folded_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("log", name=op.f("pk_paimon_metric_folds")),
    )
    op.create_table(
        "paimon_metric_series",
        sa.Column("family", sa.Text(), nullable=False),
        sa.Column("catalog_key", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("labels", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("buckets", postgresql.ARRAY(sa.Double()), nullable=True),
        sa.PrimaryKeyConstraint(
            "family", "catalog_key", "subject", "labels", name=op.f("pk_paimon_metric_series")
        ),
    )
    op.create_table(
        "paimon_metric_subjects",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("catalog_key", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "catalog_key", "subject", name=op.f("pk_paimon_metric_subjects")),
    )
    op.create_table(
        "paimon_metric_open_commits",
        sa.Column("commit_id", sa.Uuid(), nullable=False),
        sa.Column("catalog_key", sa.Text(), nullable=False),
        sa.Column("table_identifier", sa.Text(), nullable=False),
        sa.Column("commit_kind", sa.Text(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("commit_id", name=op.f("pk_paimon_metric_open_commits")),
    )
    op.create_table(
        "paimon_metric_open_locks",
        sa.Column("lock_id", sa.Text(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("lock_id", "fencing_token", name=op.f("pk_paimon_metric_open_locks")),
    )

    # Every fold updates the same few hundred series and the positions: room on each page for the new
    # versions (HOT updates, pruned on the page) and a vacuum after a few thousand dead versions, not
    # after a fifth of a table this small (the first fold of a large log left 250,000 behind).
    for table in ("paimon_metric_series", "paimon_metric_folds"):
        op.execute(
            f"ALTER TABLE {table} SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, "
            "autovacuum_vacuum_threshold = 5000)"
        )
    for name, columns, where in _DEBT_INDEXES:
        op.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON paimon_maintenance_debts ({columns})"
            + (f" WHERE {where}" if where else "")
        )


_PRESSURE = (
    "greatest(COALESCE(((debt ->> 'max_sorted_runs'::text))::double precision, (0)::double precision), "
    "COALESCE(((debt ->> 'max_small_files'::text))::double precision, (0)::double precision))"
)
_DEBT_INDEXES = (
    ("ix_paimon_maintenance_debts_pressure", f"catalog_key, ({_PRESSURE}), table_identifier", None),
    (
        "ix_paimon_maintenance_debts_stopped",
        "catalog_key",
        "((debt ->> 'buckets_over_stop_trigger'::text))::double precision > (0)::double precision",
    ),
    ("ix_paimon_maintenance_debts_identifier", "catalog_key, table_identifier", None),
)


def downgrade() -> None:
    for name, _, _ in _DEBT_INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    for table in (
        "paimon_metric_open_locks",
        "paimon_metric_open_commits",
        "paimon_metric_subjects",
        "paimon_metric_series",
        "paimon_metric_folds",
    ):
        op.drop_table(table)
