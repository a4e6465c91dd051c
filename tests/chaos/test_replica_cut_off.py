"""A replica cut off from the metastore while it holds a table lock: its late publish is fenced (issue 25).

Replica A runs inside a network namespace (``tests.chaos.netns``) and reaches the private cluster only
over a veth pair; replica B runs beside the test. A commit sent to A stops A right after it took the
table lock (crash point ``after_lock``: the lock row is A's, token T). The test downs the veth (a
partition: no resets, packets vanish) and lets A run on, cut off: A's lease can no longer be renewed.
Clients commit to the same table through B, which waits out A's lease, takes the lock over
(``expiry_takeover`` of T) and publishes. Then the link comes back and A, alive all along, tries to
finish its commit. It must not publish on what it read under T: its commit lands exactly once, after
B's snapshots (on a base read under a lock it holds again, or deduplicated), and the table's history is
what the exactly-once checker demands (contiguous snapshot ids, each recorded once, nothing external,
every acknowledged commit once, the rows read back once, nothing pending after ``paimon-meta recover``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.rest import RemoteCommitter, connect_service
from paimon_meta.commit.crashpoints import PAUSE_AT_ENV, CrashPoint
from paimon_meta.model.identifier import split_identifier
from tests.chaos.cluster import HOST, PostgresCluster
from tests.chaos.load import RETRYABLE, SCHEMA, TABLE_OPTIONS, Ack, Load
from tests.chaos.netns import Partition, require_namespaces
from tests.chaos.replicas import REPO, Replica
from tests.chaos.timeline import exactly_once_problems
from tests.fixtures.service import make_principal

pytestmark = pytest.mark.postgres

TABLE = "chaos.t0"
LEASE = {"lock.lease-seconds": "5", "lock.acquire-timeout-seconds": "60"}
CUT_OFF_USER = "chaos-cut-off"


@pytest.fixture
def partition() -> Iterator[Partition]:
    p = require_namespaces()
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def cluster(partition: Partition) -> Iterator[PostgresCluster]:
    c = PostgresCluster.start_new("chaos", listen=(HOST, partition.host_ip), trust=(partition.network,))
    try:
        yield c
    finally:
        c.close()


def _wait(predicate: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)


def test_a_replica_cut_off_while_holding_the_lock_is_fenced(
    partition: Partition, cluster: PostgresCluster, tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(cluster.url, warehouse)
    replicas: list[Replica] = []
    try:
        table = catalog.create_table(TABLE, SCHEMA, options=TABLE_OPTIONS)
        token = make_principal(catalog, "chaos-writers", [("write", "chaos", None)])
        a_url = f"postgresql+psycopg://postgres@{partition.host_ip}:{cluster.port}/chaos"
        a = Replica(
            a_url,
            warehouse,
            tmp_path / "replica-a.log",
            options=LEASE,
            host=partition.ns_ip,
            command_prefix=partition.exec_prefix,
            env={PAUSE_AT_ENV: CrashPoint.AFTER_LOCK.value},
        )
        replicas.append(a)
        a.start()
        b = Replica(cluster.url, warehouse, tmp_path / "replica-b.log", options=LEASE)
        replicas.append(b)
        b.start()

        # The cut-off replica's commit: one real row, committed through A (re-sent through B if A's
        # answer never comes).
        write = table.new_stream_write_builder().with_commit_user(CUT_OFF_USER).new_write()
        write.write_arrow(pa.table({"k": [-1], "c": [-1], "v": ["cut-off"]}, schema=SCHEMA))
        messages = write.prepare_commit()
        write.close()
        db, name = split_identifier(TABLE)
        via_a = RemoteCommitter(connect_service(a.base, token).client, db, name, CUT_OFF_USER)
        via_b = RemoteCommitter(connect_service(b.base, token).client, db, name, CUT_OFF_USER)
        outcome: dict[str, Any] = {}

        def commit_cut_off() -> None:
            sent_at = time.time()
            try:
                answer = via_a.commit(messages, 0)
            except RETRYABLE as e:
                outcome["a_error"] = f"{type(e).__name__}: {e}"
                answer = via_b.commit(messages, 0)
            outcome["ack"] = Ack(
                TABLE, CUT_OFF_USER, 0, -1, answer.snapshot_ids, answer.deduplicated, 1, sent_at, time.time()
            )

        committer = threading.Thread(target=commit_cut_off, name="chaos-cut-off-commit")
        committer.start()
        _wait(a.paused, "replica A stops at after_lock holding the lock")
        lock_id = catalog.registry.lock_id(db, name)
        held = catalog.lock.get_lock(lock_id)
        assert held is not None, "A is paused after taking the lock, but no lock row is held"
        stale_token = held.fencing_token

        partition.cut()
        cut_at = time.time()
        a.resume()
        load = Load([b.base], token, [TABLE], clients=2, commits=6)
        load.start()
        _wait(lambda: load.acked >= 3 or bool(load.result.errors), "B's clients commit while A is cut off")
        published_while_cut = sorted(sid for ack in load.result.acks for sid in ack.snapshot_ids)
        partition.restore()
        restored_at = time.time()
        committer.join(300)
        result = load.join(300)
        assert not committer.is_alive(), f"the cut-off commit never finished: {a.log_tail()}"
        assert not result.errors, result.errors
        assert "ack" in outcome, outcome

        recovered = subprocess.run(
            [sys.executable, "-m", "paimon_meta.cli", "recover", "--older-than", "0s"],
            env={**os.environ, "PAIMON_META_URL": cluster.url, "PAIMON_META_WAREHOUSE": warehouse},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert recovered.returncode == 0, recovered.stdout + recovered.stderr

        # A's lock was taken over by B while A was cut off, not released by A.
        with catalog.engine.connect() as conn:
            takeovers = conn.execute(
                text(
                    "SELECT owner, created_at FROM paimon_lock_events WHERE lock_id = :l "
                    "AND event_type = 'expiry_takeover' AND previous_fencing_token = :t"
                ),
                {"l": lock_id, "t": stale_token},
            ).all()
            released_by_a = conn.execute(
                text(
                    "SELECT count(*) FROM paimon_lock_events WHERE lock_id = :l "
                    "AND event_type = 'released' AND fencing_token = :t"
                ),
                {"l": lock_id, "t": stale_token},
            ).scalar_one()
        assert len(takeovers) == 1 and released_by_a == 0, (takeovers, released_by_a, a.log_tail())
        assert cut_at <= takeovers[0].created_at.timestamp() <= restored_at, (cut_at, takeovers, restored_at)
        # B published while A was cut off; A's commit landed after those snapshots, never at the
        # position it read under the lock it lost.
        assert published_while_cut, "B published nothing while A was cut off"
        ack: Ack = outcome["ack"]
        assert min(ack.snapshot_ids) > max(published_while_cut), (ack, published_while_cut, outcome)
        with catalog.engine.connect() as conn:
            cut_off_events = [
                (r.event_type, (r.payload or {}).get("reason"), r.snapshot_id)
                for r in conn.execute(
                    text(
                        "SELECT event_type, payload, snapshot_id FROM paimon_commit_events "
                        "WHERE commit_user = :u ORDER BY event_id"
                    ),
                    {"u": CUT_OFF_USER},
                )
            ]
        print(
            f"cut-off commit: {outcome}; its events: {cut_off_events}; B's while cut: {published_while_cut}"
        )
        print("A's log:", *a.log_lines("lost", "fenc", "failed", "lock"), sep="\n  ")
        acked = {**result.acked(TABLE), (CUT_OFF_USER, 0): ack}
        problems = exactly_once_problems(catalog, TABLE, acked)
        assert not problems, "\n".join([*problems, a.log_tail(), b.log_tail()])
    finally:
        for r in replicas:
            r.stop()
        catalog.close()
