"""The archiver over the real partitioned commit log (``metastore.event_partitions``, migration 0024).

The current partition cannot be archived (its catalogs keep writing into it, the archive's own commits
included), so the test gives the log a partition in the past of a later clock: real commits are made in a
catalog without retention (``src``), and their events are copied, as a catalog with retention's (``arch``:
another table id, commit ids of their own), into the partition after the current one. With the archiver's
clock and the drop's ``now`` moved past it, that partition is archived into ``arch``'s warehouse and
dropped; the current one stays (``src`` keeps its events)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from paimon_meta.archive.archiver import ARCHIVER_USER, Archiver, Step
from paimon_meta.archive.table import IDENTIFIER
from paimon_meta.archive.twins import (
    CONFLICT_COLUMNS,
    HISTORY_COLUMNS,
    RETRY_COLUMNS,
    commit_conflicts,
    commit_history,
    commit_retries,
)
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.metastore.event_partitions import EventPartition, EventPartitions
from tests.archive.helpers import SCHEMA, archived_rows, assert_same_rows, make_catalog, seed, view_rows

pytestmark = pytest.mark.postgres

_COPY = """
    INSERT INTO paimon_commit_events (commit_id, table_id, table_identifier, event_type, attempt,
        commit_user, commit_identifier, commit_kind, snapshot_id, payload, messages, messages_version,
        created_at, duration_ms, principal, timeline, branch)
    SELECT md5(commit_id::text)::uuid, :table_id, table_identifier, event_type, attempt, commit_user,
        commit_identifier, commit_kind, snapshot_id, payload, messages, messages_version,
        created_at + (CAST(:start AS timestamptz) - :first) + interval '1 minute', duration_ms, principal,
        timeline, branch
    FROM paimon_commit_events WHERE table_id = :source ORDER BY event_id
"""


class Crash(BaseException):
    pass


@dataclass
class LaterClock:
    """The real store seen from a later clock: the drop's ``now`` is the archiver's, and the partition
    that holds the database's real clock is left out (it is the current one: the archive's own commits
    are written into it while the test runs, which a later clock would not see)."""

    store: EventPartitions
    engine: Engine
    now: datetime

    def partitions(self) -> list[EventPartition]:
        with self.engine.connect() as c:
            real = c.execute(text("SELECT clock_timestamp()")).scalar_one()
        return [p for p in self.store.partitions() if not (p.start is None or p.start <= real < p.end)]

    def catalogs_in(self, name: str) -> list[str]:
        return self.store.catalogs_in(name)

    def rows(self, name: str, *, catalog_key: str, after_event_id: int | None, limit: int) -> list[Any]:
        return self.store.rows(name, catalog_key=catalog_key, after_event_id=after_event_id, limit=limit)

    def mark_archived(
        self, name: str, *, catalog_key: str, snapshot_id: int, row_count: int, archived_by: str
    ) -> None:
        self.store.mark_archived(
            name,
            catalog_key=catalog_key,
            snapshot_id=snapshot_id,
            row_count=row_count,
            archived_by=archived_by,
        )

    def drop(self, name: str, *, operator: str) -> None:
        self.store.drop(name, operator=operator, now=self.now)


@dataclass
class Seeded:
    arch: MetastoreCatalog
    partition: EventPartition
    copies: list[dict[str, Any]]
    before: dict[str, dict[Any, dict[str, Any]]]
    later: LaterClock


@pytest.fixture
def seeded(clean_db: str, tmp_path: Path) -> Iterator[Seeded]:
    src = make_catalog(clean_db, str(tmp_path / "wh-src"), "src")
    arch = make_catalog(clean_db, str(tmp_path / "wh-arch"), "arch", retention="1 d")
    try:
        engine = arch.engine
        store = EventPartitions(engine)
        store.ensure_ahead(periods=3)
        seed(src, "db.t", 0)
        arch.create_database("db")
        arch.create_table("db.t", SCHEMA)
        source = src.registry.get_table_row("db", "t").table_id
        target = arch.registry.get_table_row("db", "t").table_id
        current, after = store.partitions()[0], store.partitions()[1]
        assert current.start is None  # p0: everything up to the next period, now included
        with engine.begin() as conn:
            first = conn.execute(
                text("SELECT min(created_at) FROM paimon_commit_events WHERE table_id = :s"), {"s": source}
            ).scalar_one()
            conn.execute(
                text(_COPY), {"table_id": target, "start": after.start, "first": first, "source": source}
            )
        copies = _events(engine, target)
        assert copies and store.catalogs_in(after.name) == ["arch"]
        before = {
            v: view_rows(engine, v)
            for v in ("paimon_commit_history", "paimon_commit_conflicts", "paimon_commit_retries")
        }
        yield Seeded(arch, after, copies, before, LaterClock(store, engine, after.end + timedelta(days=2)))
    finally:
        src.close()
        arch.close()


def _events(engine: Engine, table_id: int) -> list[dict[str, Any]]:
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT * FROM paimon_commit_events WHERE table_id = :t ORDER BY event_id"), {"t": table_id}
        ).mappings()
        return [dict(r) for r in rows]


def _run(s: Seeded, step: Any = None) -> Any:
    return Archiver(
        s.arch.engine, s.later, operator="tester", batch_rows=5, clock=lambda: s.later.now, step=step
    ).run()


def test_archive_then_drop_over_the_partitioned_log(seeded: Seeded) -> None:
    s = seeded
    report = _run(s)
    assert [(a.partition, a.catalog) for a in report.archived] == [(s.partition.name, "arch")]
    assert report.dropped == [s.partition.name]
    assert s.partition.name not in [p.name for p in s.later.store.partitions()]
    archived = archived_rows(s.arch)
    assert [r["event_id"] for r in archived] == [e["event_id"] for e in s.copies]
    engine = s.arch.engine
    for view, twin, key, columns in (
        ("paimon_commit_history", commit_history, "commit_id", HISTORY_COLUMNS),
        ("paimon_commit_conflicts", commit_conflicts, "event_id", CONFLICT_COLUMNS),
        ("paimon_commit_retries", commit_retries, "event_id", RETRY_COLUMNS),
    ):
        live = {k: r for k, r in view_rows(engine, view).items() if r["table_identifier"] != IDENTIFIER}
        arch = {r[key]: r for r in twin(archived)}
        assert arch and not set(arch) & set(live)
        assert_same_rows(s.before[view], {**live, **arch}, columns)
    assert all(
        r["commit_user"] == ARCHIVER_USER
        for r in view_rows(engine, "paimon_commit_history").values()
        if r["table_identifier"] == IDENTIFIER
    )


def test_a_crash_between_commit_and_mark_over_the_partitioned_log(seeded: Seeded) -> None:
    """The step whose re-run records through the real registry what an earlier run committed (every step is
    crashed in test_archiver.py, over the test double)."""
    s = seeded
    step = Step.COMMITTED

    def crash(name: str) -> None:
        if name == step:
            raise Crash(name)

    with pytest.raises(Crash):
        _run(s, crash)
    assert s.partition.name in [p.name for p in s.later.store.partitions()]
    assert [a.already_committed for a in _run(s).archived] == [True]
    assert s.partition.name not in [p.name for p in s.later.store.partitions()]
    (dropped,) = [p for p in s.later.store.dropped() if p.name == s.partition.name]
    assert dropped.archived == {"arch": _latest_archive_snapshot(s.arch)}
    assert [r["event_id"] for r in archived_rows(s.arch)] == [e["event_id"] for e in s.copies]


def _latest_archive_snapshot(catalog: MetastoreCatalog) -> int:
    snapshot = catalog.get_table(IDENTIFIER).latest_snapshot()
    assert snapshot is not None and snapshot.commit_user == ARCHIVER_USER
    return snapshot.id
