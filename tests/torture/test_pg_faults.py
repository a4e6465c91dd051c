"""Postgres faults during commits: the metastore's connections terminated while a writer is paused at each
step of the protocol, a lock waiter losing its LISTEN connection, and Postgres restarted (a private
embedded server) under a chaos run of writer processes."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.errors import CommitOutcomeUnknownError, PaimonMetaError
from tests.torture import workload
from tests.torture.chaos import ChaosRun, TortureSize
from tests.torture.checker import check_table, check_torture
from tests.torture.inproc import FaultBench, chain_live_files, chain_messages
from tests.torture.pg import PrivatePostgres, terminate_backends
from tests.torture.workload import TABLE

pytestmark = [pytest.mark.postgres]

# (FileIO op, path substring, which matching call): where the writer is when its connections die.
PAUSE_POINTS = {
    # prepared is recorded, the delta manifest is being written: no lock yet
    "before-lock": ("create_if_absent", "/manifest/manifest-", 1),
    # holding the lock, reading the latest snapshot to build on
    "under-lock": ("read", "/snapshot/snapshot-", 1),
    # holding the lock, staging the manifest lists
    "staging": ("create_if_absent", "/manifest/manifest-list-", 1),
    # the publishing transaction is open (lease validated FOR KEY SHARE), the snapshot not yet created
    "publishing": ("create_if_absent", "/snapshot/snapshot-", 1),
    # snapshot published and recorded, the LATEST hint is being written, the lock not yet released
    "after-publish": ("write", "/snapshot/LATEST", 1),
}


@pytest.fixture
def bench(clean_db: str, tmp_path: Path) -> Iterator[FaultBench]:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **{"lock.lease-seconds": "2"})
    try:
        yield FaultBench(catalog, warehouse, {})
    finally:
        catalog.close()


def _finish(bench: FaultBench, extra_live: frozenset[str] = frozenset()) -> None:
    result = check_table(bench.catalog, TABLE)
    bench.violations += result.violations
    want = chain_live_files(bench.next_identifier) | extra_live
    if result.state.live_files != want:
        diff = sorted(result.state.live_files ^ want)
        bench.violations.append(f"live files differ from the committed history: {diff}")
    assert not bench.violations, "\n".join(bench.violations)


@pytest.mark.parametrize("point", sorted(PAUSE_POINTS))
def test_connections_terminated_mid_commit(bench: FaultBench, clean_db: str, point: str) -> None:
    bench.run_case("first")
    bench.run_case("second")
    op, path, n = PAUSE_POINTS[point]
    for round_ in range(2):
        gate = threading.Event()
        rule = bench.fio.pause_on(op, path, gate, n=n, timeout=60)
        worker = threading.Thread(target=bench.run_case, args=(f"{point}#{round_}", [rule]))
        worker.start()
        try:
            assert rule.reached.wait(30), f"the commit never reached {point}"
            assert terminate_backends(clean_db) >= 1
        finally:
            gate.set()
            worker.join(120)
        assert not worker.is_alive()
        bench.run_case(f"after {point}#{round_}")
    _finish(bench)


def test_lock_waiter_loses_its_connections(bench: FaultBench, clean_db: str) -> None:
    """Writer A holds the lock (paused); writer B waits for it (LISTEN); every connection of the
    database is terminated, LISTEN ones included; both commits must still resolve exactly once."""
    bench.run_case("first")
    gate = threading.Event()
    rule = bench.fio.pause_on("read", "/snapshot/snapshot-", gate, timeout=60)
    holder = threading.Thread(target=bench.run_case, args=("holder", [rule]))
    holder.start()
    outcome: list[str] = []

    def waiter() -> None:
        try:
            committer = bench.committer("fault-waiter")
            committer.commit(workload.messages(0, 0), 0)
            outcome.append("ok")
        except PaimonMetaError as e:
            outcome.append(f"typed {type(e).__name__}")
        except Exception as e:
            outcome.append(f"untyped {type(e).__name__}: {e}\n{traceback.format_exc()}")

    try:
        assert rule.reached.wait(30)
        waiting = threading.Thread(target=waiter)
        waiting.start()
        _wait_for_waiter(clean_db)
        assert terminate_backends(clean_db, application_name=None) >= 2
    finally:
        gate.set()
        holder.join(120)
    waiting.join(120)
    assert outcome and not outcome[0].startswith("untyped"), outcome[0]
    if outcome[0] != "ok":  # a typed failure: the retry must resolve it
        bench.committer("fault-waiter").commit(workload.messages(0, 0), 0)
    bench.refresh()
    assert len(bench.seen.get(("fault-waiter", 0, workload.kinds(0)[0]), [])) == 1
    bench.run_case("after")
    _finish(bench, frozenset({workload.file_name(0, 0)}))


def _wait_for_waiter(url: str, timeout: float = 20.0) -> None:
    """Until some session of the database is LISTENing (the lock waiter)."""
    import time

    import psycopg

    from paimon_meta.db.engine import libpq_conninfo

    deadline = time.monotonic() + timeout
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND query ILIKE 'LISTEN%'"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError("no lock waiter showed up")


def _terminate_all(url: str) -> None:
    terminate_backends(url, application_name=None)


@pytest.mark.timeout(600)
def test_postgres_restarts_under_chaos(tmp_path: Path) -> None:
    """Writer processes commit while a private embedded Postgres is restarted, every session of the
    database is terminated, and writers are killed: the checker must find the full history exactly
    once, whatever the writers were told on the way."""
    pg = PrivatePostgres()
    try:
        size = TortureSize(
            writers=3,
            commits=12,
            kills=1,
            stops=0,
            lease_seconds=2,
            seed=TortureSize.from_env().seed,
            pace_seconds=0.15,  # the server faults must land while the writers still run
        )
        warehouse = str(tmp_path / "warehouse")
        with paimon_meta.connect(pg.url, warehouse) as catalog:
            catalog.create_table(TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS)
            report = ChaosRun(
                size,
                metastore_url=pg.url,
                warehouse=warehouse,
                options={},
                workdir=tmp_path,
                server_actions={
                    "postgres-restart": (2, pg.restart),
                    "terminate-sessions": (2, lambda: _terminate_all(pg.url)),
                },
            ).run()
            result = check_torture(catalog, report.histories, commits=size.commits)
        print(report.summary())
        # Untyped errors while the server is down are covered by the focused tests below; here the
        # history must be intact whatever the writers were told.
        problems = [
            *result.violations,
            *(f"writer exited unexpectedly: {u}" for u in report.unexpected_exits),
        ]
        assert report.server_actions["postgres-restart"] == 2, report.summary()
        assert report.server_actions["terminate-sessions"] == 2, report.summary()
        assert not problems, report.summary() + "\n" + "\n".join(problems)
    finally:
        pg.close()


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres()
    try:
        yield pg
    finally:
        pg.close()


def test_commit_with_the_metastore_down_raises_a_typed_error(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    """With Postgres unreachable a commit cannot even be prepared: it must fail with a PaimonMetaError
    (callers decide retry vs. give up by type, and only PaimonMetaError says what is known)."""
    warehouse = str(tmp_path / "warehouse")
    with paimon_meta.connect(private_pg.url, warehouse, **{"lock.lease-seconds": "2"}) as catalog:
        bench = FaultBench(catalog, warehouse, {})
        bench.run_case("first")
        committer = bench.committer()  # opened while the metastore is up: only commit() meets the outage
        i = bench.next_identifier
        private_pg.stop()
        try:
            with pytest.raises(PaimonMetaError):
                committer.commit(chain_messages(i), i)
        finally:
            private_pg.start()
        bench.run_case("after the outage")  # the same identifier
        _finish(bench)


def test_get_table_with_the_metastore_down_raises_a_typed_error(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    with paimon_meta.connect(private_pg.url, str(tmp_path / "warehouse")) as catalog:
        catalog.create_table(TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS)
        private_pg.stop()
        try:
            with pytest.raises(PaimonMetaError):
                catalog.get_table(TABLE)
        finally:
            private_pg.start()


def test_first_commit_after_a_postgres_restart_succeeds(private_pg: PrivatePostgres, tmp_path: Path) -> None:
    """A restart of Postgres between two commits of a long-lived writer must not fail its next commit:
    connections the restart broke are to be replaced, not used (make_engine's pool_pre_ping promise)."""
    warehouse = str(tmp_path / "warehouse")
    with paimon_meta.connect(private_pg.url, warehouse, **{"lock.lease-seconds": "2"}) as catalog:
        bench = FaultBench(catalog, warehouse, {})
        bench.run_case("first")
        bench.run_case("second")
        private_pg.restart()
        bench.run_case("after the restart")
        _finish(bench)


def test_metastore_down_right_after_the_snapshot_is_published(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    """The snapshot is durable, then Postgres goes away before the commit is recorded and the lock
    released. The commit succeeded (storage is the source of truth): commit() must say so, or at worst
    raise CommitOutcomeUnknownError; a retry after the outage finds it exactly once."""
    warehouse = str(tmp_path / "warehouse")
    with paimon_meta.connect(private_pg.url, warehouse, **{"lock.lease-seconds": "2"}) as catalog:
        bench = FaultBench(catalog, warehouse, {})
        bench.run_case("first")
        gate = threading.Event()
        # the LATEST hint is written right after snapshot-N is created, before the publishing
        # transaction records it
        rule = bench.fio.pause_on("write", "/snapshot/LATEST", gate, timeout=60)
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                bench.commit_clean(bench.next_identifier)
                outcome.append(None)
            except BaseException as e:
                outcome.append(e)

        worker = threading.Thread(target=commit)
        worker.start()
        try:
            assert rule.reached.wait(30)
            private_pg.stop()
        finally:
            gate.set()
            worker.join(120)
            bench.fio.clear()
            private_pg.start()
        bench.run_case("retry after the outage")  # the same identifier: deduplicated
        _finish(bench)
        error = outcome[0]
        print(f"commit() with the metastore gone after the publish: {error!r}")
        assert error is None or isinstance(error, CommitOutcomeUnknownError), "".join(
            traceback.format_exception(error)
        )
