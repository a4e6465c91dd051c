"""Partition statistics kept by the commit path (``paimon_partition_statistics``, migration 0003).

Paimon's REST catalog lists partitions with their record count, file count, size and last file creation
time (Java's ``Partition``/``PartitionStatistics``) without scanning manifests: the server keeps totals and
every commit applies its per-partition deltas. Here the deltas are applied in the transaction that
publishes the snapshot, after the pointer compare-and-set and only if it moved the pointer to that
snapshot, so the totals never count a snapshot that was not published, nor one twice.

``paimon_tables.stats_snapshot_id`` says up to which snapshot the totals are complete: a commit moves it
from N-1 to N only if it was N-1, so a snapshot published without statistics (reconciled from another
engine, or a commit that sent none) leaves the totals marked incomplete from then on, and readers can
tell (:attr:`TableStatistics.complete`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Engine, text

from paimon_meta.db.pool import Statement
from paimon_meta.model.partition_statistics import PartitionDelta


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """Totals of one partition after the latest snapshot that changed it."""

    spec: dict[str, str]
    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int
    total_buckets: int | None
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class TableStatistics:
    """Totals over a table's partitions; ``complete`` is False when a published snapshot carried none."""

    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int
    complete: bool


# Deltas are applied only if this transaction's pointer compare-and-set moved the pointer to the
# snapshot (it ran earlier in the same transaction). Rows whose file count drops to zero stay (with
# zeros): a partition emptied by an overwrite is no longer listed (see list_partitions).
_APPLY_SQL = (
    "INSERT INTO paimon_partition_statistics (table_id, partition_key, spec, record_count,"
    " file_size_in_bytes, file_count, last_file_creation_time, total_buckets, snapshot_id)"
    " SELECT %(table_id)s, d.k, d.spec, d.rc, d.fs, d.fc, d.lt, d.tb, %(snapshot_id)s"
    " FROM jsonb_to_recordset(%(deltas)s::jsonb)"
    " AS d(k text, spec jsonb, rc bigint, fs bigint, fc bigint, lt bigint, tb int)"
    " WHERE EXISTS (SELECT 1 FROM paimon_tables t WHERE t.table_id = %(table_id)s"
    " AND t.latest_snapshot_id = %(snapshot_id)s)"
    " ON CONFLICT (table_id, partition_key) DO UPDATE SET"
    " record_count = paimon_partition_statistics.record_count + EXCLUDED.record_count,"
    " file_size_in_bytes = paimon_partition_statistics.file_size_in_bytes + EXCLUDED.file_size_in_bytes,"
    " file_count = paimon_partition_statistics.file_count + EXCLUDED.file_count,"
    " last_file_creation_time = GREATEST(paimon_partition_statistics.last_file_creation_time,"
    " EXCLUDED.last_file_creation_time),"
    " total_buckets = COALESCE(EXCLUDED.total_buckets, paimon_partition_statistics.total_buckets),"
    " snapshot_id = EXCLUDED.snapshot_id, updated_at = now()"
)
# Complete up to N only if complete up to N-1 (NULL before the first snapshot counts as complete).
_COMPLETE_SQL = (
    "UPDATE paimon_tables SET stats_snapshot_id = %(snapshot_id)s"
    " WHERE table_id = %(table_id)s AND latest_snapshot_id = %(snapshot_id)s"
    " AND stats_snapshot_id IS NOT DISTINCT FROM %(previous)s::bigint"
)


def apply_statements(table_id: int, snapshot_id: int, deltas: Sequence[PartitionDelta]) -> list[Statement]:
    """The statements that add ``deltas`` for ``snapshot_id``, to run in the publishing transaction
    after the pointer compare-and-set (they do nothing if it did not move the pointer there)."""
    merged: dict[str, dict[str, object]] = {}
    for d in deltas:
        row = merged.setdefault(
            d.key, {"k": d.key, "spec": dict(d.spec), "rc": 0, "fs": 0, "fc": 0, "lt": 0, "tb": None}
        )
        row["rc"] = int(str(row["rc"])) + d.record_count
        row["fs"] = int(str(row["fs"])) + d.file_size_in_bytes
        row["fc"] = int(str(row["fc"])) + d.file_count
        row["lt"] = max(int(str(row["lt"])), d.last_file_creation_time)
        if d.total_buckets is not None:
            row["tb"] = d.total_buckets
    previous = snapshot_id - 1 if snapshot_id > 1 else None
    ids = {"table_id": table_id, "snapshot_id": snapshot_id}
    statements: list[Statement] = []
    if merged:
        statements.append((_APPLY_SQL, {**ids, "deltas": Jsonb(list(merged.values()))}))
    statements.append((_COMPLETE_SQL, {**ids, "previous": previous}))
    return statements


def list_partitions(engine: Engine, table_id: int) -> list[PartitionStats]:
    """The table's non-empty partitions, ordered by their canonical key."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT spec, record_count, file_size_in_bytes, file_count, last_file_creation_time,"
                " total_buckets, snapshot_id FROM paimon_partition_statistics"
                " WHERE table_id = :t AND file_count > 0 ORDER BY partition_key"
            ),
            {"t": table_id},
        ).all()
    return [PartitionStats(**{**r._asdict(), "spec": dict(r.spec)}) for r in rows]


def table_statistics(engine: Engine, table_id: int) -> TableStatistics:
    """Totals over the table's partitions, and whether they cover its latest snapshot."""
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT coalesce(sum(s.record_count), 0) AS rc, coalesce(sum(s.file_size_in_bytes), 0) AS fs,"
                " coalesce(sum(s.file_count), 0) AS fc, coalesce(max(s.last_file_creation_time), 0) AS lt,"
                " (SELECT t.stats_snapshot_id IS NOT DISTINCT FROM t.latest_snapshot_id"
                "  FROM paimon_tables t WHERE t.table_id = :t) AS complete"
                " FROM paimon_partition_statistics s WHERE s.table_id = :t"
            ),
            {"t": table_id},
        ).one()
    return TableStatistics(int(row.rc), int(row.fs), int(row.fc), int(row.lt), bool(row.complete))


def replace_statements(
    table_id: int, snapshot_id: int, totals: Sequence[PartitionDelta]
) -> list[tuple[str, dict[str, Any]]]:
    """Statements that set the table's statistics to ``totals`` (each partition's absolute numbers at
    ``snapshot_id``, e.g. after a rollback) and mark them complete up to it."""
    rows = [
        {
            "k": t.key,
            "spec": dict(t.spec),
            "rc": t.record_count,
            "fs": t.file_size_in_bytes,
            "fc": t.file_count,
            "lt": t.last_file_creation_time,
            "tb": t.total_buckets,
        }
        for t in totals
    ]
    ids = {"table_id": table_id, "snapshot_id": snapshot_id}
    return [
        ("DELETE FROM paimon_partition_statistics WHERE table_id = %(table_id)s", ids),
        (_APPLY_SQL, {**ids, "deltas": Jsonb(rows)}),
        (
            "UPDATE paimon_tables SET stats_snapshot_id = %(snapshot_id)s WHERE table_id = %(table_id)s"
            " AND latest_snapshot_id = %(snapshot_id)s",
            ids,
        ),
    ]
