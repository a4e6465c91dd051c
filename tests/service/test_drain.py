"""SIGTERM to a real ``paimon-meta serve`` with commits in flight (README, "Graceful drain"): the replica
is not ready at once, refuses new requests with 503 + Retry-After while its port stays open, lets the
commits in flight finish within ``--drain-seconds`` and exits 0; commits still waiting for their table's
lock at the deadline are answered 503 (never 500, no traceback) and land exactly once when re-sent to
another replica. Nothing here waits on a clock: each step waits for a condition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.rest import RemoteCommitter, connect_service
from paimon_meta.errors import PaimonMetaError
from paimon_meta.metastore.lock import LockLease
from paimon_meta.ops.orphans import remove_orphan_files
from paimon_meta.ops.recovery import recover_all
from tests.commit.helpers import append_msg, data_file
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.integration.history import check_exactly_once, read_history

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)
CLIENTS = 8


def _wait(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _setup(clean_db: str, tmp_path: Path) -> tuple[MetastoreCatalog, str, str, str]:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"})
    writer = make_principal(catalog, "writers", [("write", "db", "t")])
    admin = make_principal(catalog, "ops", [("admin", None, None)])
    return catalog, warehouse, writer, admin


def _committer(base: str, token: str, user: str) -> RemoteCommitter:
    remote = connect_service(base, token, **{"rest.retry.deadline-seconds": "0"})  # the test re-sends
    table = remote.get_table("db.t")
    assert table.committer_factory is not None
    committer = table.committer_factory(table, user)
    assert isinstance(committer, RemoteCommitter)
    return committer


def _admitted(base: str, admin: str) -> float:
    response = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {admin}"}, timeout=10)
    for line in response.text.splitlines():
        if line.startswith("paimon_meta_service_commits_admitted "):
            return float(line.split()[1])
    return 0.0


def _hold_table_lock(catalog: MetastoreCatalog) -> LockLease:
    """The table's lock, held by the test: the replica's commits queue behind it."""
    return catalog.lock.acquire(
        catalog.registry.lock_id("db", "t"), owner="test:holder", lease_seconds=60, timeout_seconds=30
    )


def _commit_in_flight(
    pool: ThreadPoolExecutor, base: str, writer: str
) -> tuple[dict[tuple[str, int], str], list[Future[None]], list[tuple[str, list[object]]]]:
    acked: dict[tuple[str, int], str] = {}
    sent: list[tuple[str, list[object]]] = []
    lock = threading.Lock()

    def one(c: int) -> None:
        user = f"client-{c}"
        f = data_file(rows=1)
        messages = [append_msg(c % 2, c % 2, f)]
        with lock:
            sent.append((user, [messages, f.file_name]))
        _committer(base, writer, user).commit(messages, 0)
        with lock:
            acked[(user, 0)] = f.file_name

    return acked, [pool.submit(one, c) for c in range(CLIENTS)], sent


def _drain_started(replica: ServiceProcess, admin: str) -> None:
    """SIGTERM, then: /readyz 503 while the port is open, and a new request refused with 503."""
    assert replica.proc is not None
    replica.proc.send_signal(15)
    _wait(lambda: httpx.get(f"{replica.base}/readyz", timeout=5).status_code == 503, "readiness to flip")
    refused = httpx.get(f"{replica.base}/v1/config", headers={"Authorization": f"Bearer {admin}"}, timeout=5)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.text


def _log_clean(replica: ServiceProcess) -> None:
    assert replica.log_path is not None
    text = replica.log_path.read_text(errors="replace")
    assert "Traceback" not in text and "Exception in ASGI application" not in text, text[-3000:]


def test_sigterm_lets_commits_in_flight_finish_and_exits_0(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    catalog, warehouse, writer, admin = _setup(clean_db, tmp_path)
    try:
        replica = spawn_service(
            service_processes, clean_db, warehouse, tmp_path, args=["--drain-seconds", "60"]
        )
        holder = _hold_table_lock(catalog)
        with ThreadPoolExecutor(CLIENTS) as pool:
            acked, futures, _ = _commit_in_flight(pool, replica.base, writer)
            _wait(lambda: _admitted(replica.base, admin) == CLIENTS, "every commit queued on the lock")
            _drain_started(replica, admin)
            holder.release()  # the commits in flight go on, within the drain
            for future in futures:
                future.result()
        assert replica.proc is not None and replica.proc.wait(60) == 0
        _log_clean(replica)
        assert len(acked) == CLIENTS
        check_exactly_once(read_history(catalog, "db.t"), acked)
    finally:
        catalog.close()


def test_commits_waiting_at_the_deadline_get_503_and_land_once_elsewhere(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    catalog, warehouse, writer, admin = _setup(clean_db, tmp_path)
    try:
        doomed = spawn_service(
            service_processes, clean_db, warehouse, tmp_path, args=["--drain-seconds", "1"]
        )
        survivor = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        holder = _hold_table_lock(catalog)
        with ThreadPoolExecutor(CLIENTS) as pool:
            acked, futures, sent = _commit_in_flight(pool, doomed.base, writer)
            _wait(lambda: _admitted(doomed.base, admin) == CLIENTS, "every commit queued on the lock")
            _drain_started(doomed, admin)
            failures = []
            for future in futures:
                with pytest.raises(PaimonMetaError) as raised:
                    future.result()
                failures.append(str(raised.value))
        # Answered 503 (retryable), never 500; the replica exits 0 with the lock still held by another.
        assert all("HTTP 503" in f for f in failures), failures
        assert doomed.proc is not None and doomed.proc.wait(60) == 0
        _log_clean(doomed)
        holder.release()
        # Each client re-sends its commit, same identifier, to the other replica: each lands once.
        for user, (messages, file_name) in sent:
            _committer(survivor.base, writer, user).commit(messages, 0)  # type: ignore[arg-type]
            acked[(user, 0)] = str(file_name)
        reports = recover_all(catalog, older_than_seconds=0)
        assert all(r.error is None for r in reports), reports
        # The commit whose thread was still waiting on the lock when the process exited left its prepared
        # files, as any stopped process does: the orphan cleanup's (the withdrawn ones' went at once).
        orphans = remove_orphan_files(catalog, "db.t", older_than_seconds=0)
        assert len(orphans.deleted) <= 2, orphans
        history = read_history(catalog, "db.t")
        # The withdrawn attempts are on record as failed (definitely not landed), and only they.
        failed = history.events_of("failed")
        assert {(e["commit_user"], e["commit_identifier"]) for e in failed} <= set(acked), failed
        history.events = [e for e in history.events if e["event_type"] != "failed"]
        check_exactly_once(history, acked)
    finally:
        catalog.close()


def test_sigterm_ends_live_streams_at_once_with_a_retry_hint(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    catalog, warehouse, _writer, admin = _setup(clean_db, tmp_path)
    try:
        # A long drain: the stream must end at the signal, not when the drain does.
        replica = spawn_service(
            service_processes, clean_db, warehouse, tmp_path, args=["--drain-seconds", "600"]
        )
        headers = {"Authorization": f"Bearer {admin}", "Accept": "text/event-stream"}
        lines: list[str] = []
        with httpx.stream("GET", f"{replica.base}/v1/paimon/events", headers=headers, timeout=60) as answer:
            assert answer.status_code == 200
            stream = answer.iter_lines()
            lines.append(next(stream))  # the stream is open: its opening comment arrived
            assert replica.proc is not None
            replica.proc.send_signal(15)
            lines.extend(stream)  # until the server ends it
        text = "\n".join(lines)
        # The last frame: a reconnection hint, then why the stream ended.
        assert "retry: 1000\n: stream ended: this replica is shutting down" in text, text
        assert replica.proc.wait(60) == 0
        _log_clean(replica)
    finally:
        catalog.close()
