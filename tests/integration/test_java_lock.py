"""Issue 4: a lock row inserted exactly as Java's JdbcCatalogLock does blocks our commits until Java
deletes it or it expires, and while we hold the lock Java's insert fails (unique violation)."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.crashpoints import PAUSE_AT_ENV, CrashPoint
from paimon_meta.db.engine import libpq_conninfo
from tests.commit.helpers import append_msg, data_file
from tests.integration._workers import Target
from tests.integration.history import read_history
from tests.integration.procs import collect, ctx, resume, start_writer, wait_until_stopped

pytestmark = pytest.mark.postgres

# PostgresqlDistributedLockDialect / JdbcUtils, verbatim, with JDBC's positional parameters.
JAVA_ACQUIRE = "INSERT INTO paimon_distributed_locks (lock_id,expire_time_seconds) VALUES (%s, %s)"
JAVA_RELEASE = "DELETE FROM paimon_distributed_locks WHERE lock_id = %s"
LOCK_ID = "jdbc.db.t"  # JdbcCatalogLock: <catalog-key>.<database>.<table>

# The catalog options of the ``target``/``catalog`` fixtures (conftest.py) and of every writer.
OPTIONS = {"lock.lease-seconds": "2", "lock.acquire-timeout-seconds": "60"}


def java(url: str, statement: str, *params: Any) -> None:
    """Run one statement the way Java's JDBC lock does: its own autocommit connection."""
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
        conn.execute(statement, params)


def commit_in_background(catalog: MetastoreCatalog, results: list[Any]) -> threading.Thread:
    table = catalog.get_table("db.t")
    assert table.committer_factory is not None
    committer = table.committer_factory(table, "py")
    msg = append_msg(0, 0, data_file(rows=1, name="data-py.parquet"))
    thread = threading.Thread(target=lambda: results.append(committer.commit([msg], 1)))
    thread.start()
    return thread


def prepared_events(catalog: MetastoreCatalog) -> int:
    return len(read_history(catalog, "db.t").events_of("prepared"))


def test_a_java_row_blocks_our_commit_until_java_deletes_it(
    target: Target, catalog: MetastoreCatalog
) -> None:
    java(target.url, JAVA_ACQUIRE, LOCK_ID, 480)  # Java's default lock-acquire-timeout: 8 minutes
    results: list[Any] = []
    thread = commit_in_background(catalog, results)
    # The prepared event is written by the first lock attempt: once it is there, that attempt ran and
    # found Java's row, and the committer is waiting for it.
    while prepared_events(catalog) == 0:
        assert thread.is_alive(), "the commit ended without waiting for Java's lock"
        thread.join(0.05)
    thread.join(0.5)
    assert thread.is_alive() and not results
    assert catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == []
    java(target.url, JAVA_RELEASE, LOCK_ID)  # Java never NOTIFYs: the waiter polls
    thread.join(60)
    assert [r.snapshot_ids for r in results] == [(1,)]
    kinds = [e["event_type"] for e in read_history(catalog, "db.t").lock_events]
    assert kinds == ["acquired", "released"]  # no takeover: Java deleted its row


def test_an_expired_java_row_is_taken_over(target: Target, catalog: MetastoreCatalog) -> None:
    java(target.url, JAVA_ACQUIRE, LOCK_ID, 1)  # a Java writer that died holding a 1 s lock
    results: list[Any] = []
    commit_in_background(catalog, results).join(60)
    assert [r.snapshot_ids for r in results] == [(1,)]
    takeover = [e for e in read_history(catalog, "db.t").lock_events if e["event_type"] == "expiry_takeover"]
    assert len(takeover) == 1
    assert takeover[0]["previous_owner"] is None and takeover[0]["payload"]["java"] is True


def test_java_cannot_insert_while_we_hold_the_lock(target: Target, catalog: MetastoreCatalog) -> None:
    out = ctx.Queue()
    writer = start_writer(target, "py", [1], out, env={PAUSE_AT_ENV: CrashPoint.AFTER_LOCK.value})
    try:
        wait_until_stopped(writer)  # our writer holds the table's lock
        with pytest.raises(psycopg.errors.UniqueViolation):
            java(target.url, JAVA_ACQUIRE, LOCK_ID, 480)
    finally:
        resume(writer)
    (ack,) = [m for m in collect(out, [writer], timeout=120) if m[0] == "acked"]
    # it resumed within its lease (2 s) or re-acquired after: either way it committed once
    assert ack[4] == (1,)
    h = read_history(catalog, "db.t")
    assert sorted(h.snapshots) == [1]
    assert [e["snapshot_id"] for e in h.events_of("snapshot_published")] == [1]
