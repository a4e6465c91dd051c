"""Group commit across real replicas: 16 clients commit to one table through two ``paimon-meta serve``
processes; then one replica is SIGKILLed in the middle of a group. Every acknowledged commit is in the
table exactly once, snapshot ids are contiguous, and nothing is committed twice (clients re-send an
unanswered identifier to the other replica; recovery resolves what the dead replica left)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.rest import RemoteCommitter, connect_service
from paimon_meta.commit.crashpoints import PAUSE_AT_ENV, POINT_HIT_ENV, CrashPoint
from paimon_meta.errors import CommitOutcomeUnknownError, MetastoreUnavailableError
from paimon_meta.ops.recovery import recover_all
from tests.commit.helpers import append_msg, data_file
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.integration.history import History, check_exactly_once, read_history

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)
CLIENTS = 16


def _setup(clean_db: str, tmp_path: Path) -> tuple[MetastoreCatalog, str, str]:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"})
    return catalog, warehouse, make_principal(catalog, "writers", [("write", "db", "t")])


def _committer(base: str, token: str, user: str) -> RemoteCommitter:
    # The test fails over to the other replica itself: the client's own retries of a dead replica off.
    remote = connect_service(base, token, **{"rest.retry.deadline-seconds": "0"})
    table = remote.get_table("db.t")
    assert table.committer_factory is not None
    committer = table.committer_factory(table, user)
    assert isinstance(committer, RemoteCommitter)
    return committer


def _run_clients(
    replicas: Sequence[str], token: str, commits: int, on_failover: Callable[[], None] = lambda: None
) -> tuple[dict[tuple[str, int], str], int]:
    """``CLIENTS`` threads, client i on replica i % 2, each committing ``commits`` one-file messages one
    after the other. An unanswered commit is re-sent, same identifier, to the other replica. Returns
    the acknowledged commits and how many were re-sent."""
    acked: dict[tuple[str, int], str] = {}
    failovers = 0
    mutex = threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(c: int) -> None:
        nonlocal failovers
        user = f"client-{c}"
        committers = [
            _committer(replicas[(c + i) % len(replicas)], token, user) for i in range(len(replicas))
        ]
        start.wait()
        for i in range(commits):
            f = data_file(rows=1)
            messages = [append_msg(i % 2, (c + i) % 2, f)]
            try:
                committers[0].commit(messages, i)
            except (CommitOutcomeUnknownError, MetastoreUnavailableError):
                with mutex:
                    failovers += 1
                on_failover()
                # Unanswered: it may or may not have landed. The same identifier resolves it, exactly once.
                committers = committers[1:] + committers[:1]
                committers[0].commit(messages, i)
            with mutex:
                acked[(user, i)] = f.file_name

    with ThreadPoolExecutor(CLIENTS) as pool:
        for future in [pool.submit(client, c) for c in range(CLIENTS)]:
            future.result()
    return acked, failovers


def _lock_holds(catalog: MetastoreCatalog) -> int:
    with catalog.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM paimon_lock_events WHERE lock_id = :l AND event_type = 'acquired'"
                ),
                {"l": catalog.registry.lock_id("db", "t")},
            ).scalar_one()
        )


def test_sixteen_clients_through_two_replicas_commit_exactly_once(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    catalog, warehouse, token = _setup(clean_db, tmp_path)
    try:
        replicas = [spawn_service(service_processes, clean_db, warehouse, tmp_path).base for _ in range(2)]
        acked, failovers = _run_clients(replicas, token, commits=10)
        assert failovers == 0 and len(acked) == CLIENTS * 10
        h = read_history(catalog, "db.t")
        check_exactly_once(h, acked)
        # Grouped: 8 clients per replica keep its queue busy, so lock holds are fewer than commits.
        assert _lock_holds(catalog) < len(acked)
        ops = make_principal(catalog, "ops", [("admin", None, None)])  # /metrics needs an admin grant
        for replica in replicas:
            metrics = paimon_meta_metrics(replica, ops)
            assert metrics["paimon_meta_service_group_commits_count"] >= 1
            assert (
                metrics["paimon_meta_service_group_commits_sum"]
                > metrics["paimon_meta_service_group_commits_count"]
            )
    finally:
        catalog.close()


def paimon_meta_metrics(base: str, token: str) -> dict[str, float]:
    out: dict[str, float] = {}
    response = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert response.status_code == 200, response.text
    for line in response.text.splitlines():
        if line.startswith("paimon_meta_service_group_commits_"):
            name, value = line.rsplit(" ", 1)
            out[name.split("{")[0]] = out.get(name.split("{")[0], 0.0) + float(value)
    return out


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t")


def test_a_replica_killed_in_the_middle_of_a_group(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    catalog, warehouse, token = _setup(clean_db, tmp_path)
    try:
        # Replica A freezes right after the snapshot of its 12th commit is durable (nothing of it in
        # Postgres yet: when that commit went in a batch, neither is anything of the batch's other
        # snapshots, linked with it), holding the lock with more requests queued behind it; the test
        # then SIGKILLs it.
        doomed = spawn_service(
            service_processes,
            clean_db,
            warehouse,
            tmp_path,
            **{PAUSE_AT_ENV: CrashPoint.AFTER_SNAPSHOT.value, POINT_HIT_ENV: "12"},
        )
        survivor = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        assert doomed.proc is not None
        pid = doomed.proc.pid
        killed = threading.Event()
        at_kill: dict[str, Any] = {}
        snapshot_dir = Path(warehouse) / "db.db" / "t" / "snapshot"

        def snapshot_ids() -> list[int]:
            return sorted(int(f.name.split("-")[1]) for f in snapshot_dir.glob("snapshot-*"))

        def killer() -> None:
            deadline = time.monotonic() + 300
            while not _stopped(pid):
                if time.monotonic() > deadline or doomed.proc is None or doomed.proc.poll() is not None:
                    return
                time.sleep(0.02)
            time.sleep(0.5)  # let more requests queue behind the frozen group
            os.kill(pid, signal.SIGKILL)
            pointer = catalog.table_row("db.t").latest_snapshot_id
            at_kill.update(pointer=pointer, beyond=[i for i in snapshot_ids() if i > (pointer or 0)])
            killed.set()

        watcher = threading.Thread(target=killer, daemon=True)
        watcher.start()
        acked, failovers = _run_clients([doomed.base, survivor.base], token, commits=8)
        watcher.join(10)
        assert killed.is_set(), doomed.log_tail()
        # Frozen right after its snapshot (and its batch's) was created: on storage, not in the log.
        beyond = at_kill["beyond"]
        assert beyond and beyond == list(range(at_kill["pointer"] + 1, at_kill["pointer"] + 1 + len(beyond)))
        # Every client of A with a request in flight (the frozen commit and those queued behind it),
        # and every later one of A's clients, went over to B.
        assert failovers >= 2
        # What A left: the durable snapshots of its frozen commit and batch (recorded by B's first
        # reconcile, the clients' re-sends deduplicated) and no other commit that could still land.
        # Recovery finds nothing left to finish twice.
        reports = recover_all(catalog, older_than_seconds=0)
        assert all(r.error is None for r in reports), reports
        h = read_history(catalog, "db.t")
        _check_after_crash(h, acked)
        # The frozen commit: published by A, recorded by B's reconcile, its re-send deduplicated.
        unusual = [
            (e["event_type"], e["commit_user"], e["commit_identifier"], e["snapshot_id"])
            for e in h.events
            if e["event_type"] not in ("prepared", "conflict_checked", "snapshot_published")
        ]
        recovered = h.events_of("recovered")
        assert sorted(e["snapshot_id"] for e in recovered) == beyond, (unusual, at_kill, doomed.log_tail())
        for e in recovered:
            frozen = h.snapshots[e["snapshot_id"]]
            assert (frozen.commit_user, frozen.commit_identifier) in acked
            assert any(
                d["event_type"] == "aborted"
                and (d["commit_user"], d["commit_identifier"])
                == (frozen.commit_user, frozen.commit_identifier)
                for d in h.events
            ), "a re-sent frozen commit was not deduplicated"
        assert any(e["event_type"] == "expiry_takeover" for e in h.lock_events)
    finally:
        catalog.close()


def _check_after_crash(h: History, acked: dict[tuple[str, int], str]) -> None:
    """``check_exactly_once`` for a history with a crash in it: a snapshot may be recorded by
    ``recovered`` instead of ``snapshot_published``, and the dead replica's unfinished commits may leave
    delta manifests no snapshot references (orphan cleanup removes them)."""
    ids = sorted(h.snapshots)
    assert ids == list(range(1, len(acked) + 1)), f"snapshot ids not 1..{len(acked)}: {ids}"
    keys = [(s.commit_user, s.commit_identifier) for s in h.snapshots.values()]
    assert len(set(keys)) == len(keys), "a (user, identifier) is in two snapshots"
    assert set(keys) == set(acked)
    assert h.live_files == set(acked.values())
    recorded = [e["snapshot_id"] for e in h.events if e["event_type"] in ("snapshot_published", "recovered")]
    twice = {i for i in recorded if recorded.count(i) > 1}
    assert sorted(recorded) == ids, (
        "every snapshot recorded exactly once",
        sorted(set(ids) - set(recorded)),
        [
            {
                k: e.get(k)
                for k in ("event_type", "commit_id", "commit_user", "commit_identifier", "snapshot_id")
            }
            for e in h.events
            if e["snapshot_id"] in twice
            or any(
                (e["commit_user"], e["commit_identifier"])
                == (h.snapshots[i].commit_user, h.snapshots[i].commit_identifier)
                for i in twice
            )
        ],
    )
    assert not h.events_of("external")
    assert h.pointer == ids[-1]
