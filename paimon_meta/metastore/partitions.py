"""Partitions registered in the catalog and their done marks (``paimon_partitions``, migration 0006).

Paimon's REST catalog lets a client register partitions before any data lands (``createPartitions``)
and mark them done (``markDonePartitions``, what a streaming writer calls when a partition is complete).
A row here is that registration: who created it and when, and the done mark (who, when). The partition's
totals stay in ``paimon_partition_statistics`` (kept by the commit path); a listing joins the two.

Rows are keyed like the statistics, by the canonical JSON of the spec
(:func:`paimon_meta.model.partition_statistics.partition_key`), so both name a partition the same way
whatever order a client sends the spec's entries in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg.types.json import Jsonb
from sqlalchemy import Engine, text

from paimon_meta.model.partition_statistics import partition_key


@dataclass(frozen=True, slots=True)
class Registration:
    """One registered partition: its spec, who created it and when, and its done mark if any."""

    spec: dict[str, str]
    created_at: datetime
    created_by: str | None
    done_at: datetime | None
    done_by: str | None

    @property
    def done(self) -> bool:
        return self.done_at is not None


def _rows(specs: Sequence[Mapping[str, str]]) -> list[dict[str, object]]:
    return [{"k": partition_key(s), "spec": dict(s)} for s in specs]


def registrations(engine: Engine, table_id: int) -> dict[str, Registration]:
    """The table's registered partitions by key."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT partition_key, spec, created_at, created_by, done_at, done_by"
                " FROM paimon_partitions WHERE table_id = :t"
            ),
            {"t": table_id},
        ).all()
    return {
        r.partition_key: Registration(dict(r.spec), r.created_at, r.created_by, r.done_at, r.done_by)
        for r in rows
    }


def register(
    engine: Engine, table_id: int, specs: Sequence[Mapping[str, str]], *, principal: str | None
) -> set[str]:
    """Register ``specs`` (those not registered yet); returns the keys this call registered."""
    if not specs:
        return set()
    with engine.begin() as conn:
        created = conn.exec_driver_sql(
            "INSERT INTO paimon_partitions (table_id, partition_key, spec, created_by)"
            " SELECT %(t)s, d.k, d.spec, %(p)s"
            " FROM jsonb_to_recordset(%(rows)s::jsonb) AS d(k text, spec jsonb)"
            " ON CONFLICT (table_id, partition_key) DO NOTHING RETURNING partition_key",
            {"t": table_id, "p": principal, "rows": Jsonb(_rows(specs))},
        ).all()
    return {r[0] for r in created}


def mark_done(
    engine: Engine, table_id: int, specs: Sequence[Mapping[str, str]], *, principal: str | None
) -> None:
    """Mark ``specs`` done now by ``principal`` (registering those not registered yet); marking a
    partition done again moves its mark to this call."""
    if not specs:
        return
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO paimon_partitions (table_id, partition_key, spec, created_by, done_at, done_by)"
            " SELECT %(t)s, d.k, d.spec, %(p)s, now(), %(p)s"
            " FROM jsonb_to_recordset(%(rows)s::jsonb) AS d(k text, spec jsonb)"
            " ON CONFLICT (table_id, partition_key)"
            " DO UPDATE SET done_at = now(), done_by = EXCLUDED.done_by",
            {"t": table_id, "p": principal, "rows": Jsonb(_rows(specs))},
        )


def unregister(engine: Engine, table_id: int, keys: Sequence[str]) -> None:
    """Remove the registrations (and done marks) of ``keys``."""
    if not keys:
        return
    with engine.begin() as conn:
        conn.execute(
            text("DELETE FROM paimon_partitions WHERE table_id = :t AND partition_key = ANY(:keys)"),
            {"t": table_id, "keys": list(keys)},
        )
