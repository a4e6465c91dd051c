"""Benchmark of the metastore lock: hand-off latency between processes, uncontended cost, Java waits.

Hand-off: process A holds the lock; process B announces it is about to wait, calls ``acquire`` and
blocks (LISTEN); A sleeps ``--hold-ms`` so B is surely waiting, then releases. Measured on the shared
CLOCK_MONOTONIC: ``release->acquired`` from the moment A's ``release()`` returned (its DELETE + NOTIFY
committed) to the moment B's ``acquire()`` returned, and ``call->acquired`` from the moment A called
``release()``.

Usage::

    python bench/bench_lock.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                               [--handoffs 200] [--hold-ms 20] [--java-rounds 20]

The URL (else ``$PAIMON_META_TEST_DSN`` / ``$PAIMON_META_DATABASE_URL``, else an embedded Postgres in a
temporary home) names a server and a database to create a scratch database from; it is dropped at the end.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from multiprocessing.connection import Connection as Pipe
from multiprocessing.queues import Queue
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy import make_url, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paimon_meta.db.engine import libpq_conninfo, make_engine
from paimon_meta.db.migrate import upgrade
from paimon_meta.metastore.lock import MetastoreLock


def _releaser(url: str, lock_id: str, rounds: int, hold_s: float, pipe: Pipe) -> None:
    engine = make_engine(url, pool_size=2)
    with MetastoreLock(engine) as lock:
        for _ in range(rounds):
            lease = lock.acquire(lock_id, owner="releaser", lease_seconds=30, timeout_seconds=30)
            pipe.send("holding")
            assert pipe.recv() == "waiting"
            time.sleep(hold_s)  # the waiter is now inside its LISTEN wait
            t0 = time.monotonic()
            lease.release()
            t1 = time.monotonic()
            pipe.send((t0, t1))
            assert pipe.recv() == "done"
    engine.dispose()


def _waiter(url: str, lock_id: str, rounds: int, pipe: Pipe, out: Queue[list[tuple[float, float]]]) -> None:
    engine = make_engine(url, pool_size=2)
    samples: list[tuple[float, float]] = []
    with MetastoreLock(engine) as lock:
        for _ in range(rounds):
            assert pipe.recv() == "holding"
            pipe.send("waiting")
            lease = lock.acquire(lock_id, owner="waiter", lease_seconds=30, timeout_seconds=30)
            t2 = time.monotonic()
            t0, t1 = pipe.recv()
            samples.append((t2 - t0, t2 - t1))
            lease.release()
            pipe.send("done")
    engine.dispose()
    out.put(samples)


def _summary(label: str, values_s: list[float]) -> str:
    ms = sorted(v * 1000.0 for v in values_s)

    def p(q: float) -> float:
        return ms[min(len(ms) - 1, round(q * (len(ms) - 1)))]

    return (
        f"{label:<34} n={len(ms):<4} median={statistics.median(ms):7.2f}  p90={p(0.90):7.2f}  "
        f"p99={p(0.99):7.2f}  max={ms[-1]:7.2f}  mean={statistics.fmean(ms):7.2f}  (ms)"
    )


def bench_handoff(url: str, handoffs: int, hold_ms: float) -> list[str]:
    ctx = multiprocessing.get_context("spawn")
    lock_id = f"jdbc.bench.{uuid.uuid4().hex}"
    releaser_end, waiter_end = ctx.Pipe()
    out: Queue[list[tuple[float, float]]] = ctx.Queue()
    releaser = ctx.Process(target=_releaser, args=(url, lock_id, handoffs, hold_ms / 1000.0, releaser_end))
    waiter = ctx.Process(target=_waiter, args=(url, lock_id, handoffs, waiter_end, out))
    releaser.start()
    waiter.start()
    samples = out.get(timeout=600)
    releaser.join()
    waiter.join()
    return [
        _summary("hand-off release()->acquired", [s[1] for s in samples]),
        _summary("hand-off release call->acquired", [s[0] for s in samples]),
    ]


def bench_uncontended(url: str, rounds: int) -> list[str]:
    engine = make_engine(url, pool_size=2)
    acquire_s, release_s = [], []
    with MetastoreLock(engine) as lock:
        for i in range(rounds):
            t0 = time.monotonic()
            lease = lock.acquire(f"jdbc.bench.u{i % 4}", owner="solo", lease_seconds=30, heartbeat=False)
            t1 = time.monotonic()
            lease.release()
            acquire_s.append(t1 - t0)
            release_s.append(time.monotonic() - t1)
    engine.dispose()
    return [_summary("uncontended acquire()", acquire_s), _summary("uncontended release()", release_s)]


def bench_java_waits(url: str, rounds: int, poll_s: float) -> list[str]:
    """A Java holder never notifies: how long until our waiter notices its DELETE (polling)."""
    engine = make_engine(url, pool_size=2)
    lock_id = f"jdbc.bench.java.{uuid.uuid4().hex}"
    waits = []

    def java_holds_then_releases(delay: float, released: list[float]) -> None:
        time.sleep(delay)
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM paimon_distributed_locks WHERE lock_id = :l"), {"l": lock_id})
        released.append(time.monotonic())

    with MetastoreLock(engine, poll_interval_seconds=poll_s) as lock:
        for i in range(rounds):
            with engine.begin() as conn:  # JdbcCatalogLock's INSERT
                conn.execute(
                    text(
                        "INSERT INTO paimon_distributed_locks (lock_id,expire_time_seconds) VALUES (:l, 480)"
                    ),
                    {"l": lock_id},
                )
            released: list[float] = []
            # Spread the release moments over the poll interval.
            delay = 0.05 + (i % 10) * poll_s / 10
            thread = threading.Thread(target=java_holds_then_releases, args=(delay, released))
            thread.start()
            lease = lock.acquire(lock_id, owner="py", lease_seconds=30, timeout_seconds=30, heartbeat=False)
            got = time.monotonic()
            thread.join()
            waits.append(got - released[0])
            lease.release()
    engine.dispose()
    return [_summary(f"Java row DELETE->acquired (poll {poll_s * 1000:.0f} ms)", waits)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url", default=os.environ.get("PAIMON_META_TEST_DSN") or os.environ.get("PAIMON_META_DATABASE_URL")
    )
    parser.add_argument("--handoffs", type=int, default=200)
    parser.add_argument("--hold-ms", type=float, default=20.0)
    parser.add_argument("--uncontended", type=int, default=200)
    parser.add_argument("--java-rounds", type=int, default=20)
    args = parser.parse_args()

    home = None
    server_url = args.url
    if not server_url:
        from paimon_meta.db.embedded import ensure_embedded_postgres

        home = tempfile.mkdtemp(prefix="paimon-meta-bench-")
        server_url = ensure_embedded_postgres(home, database="postgres").url
    scratch = f"paimon_meta_bench_{uuid.uuid4().hex[:12]}"
    admin = libpq_conninfo(server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(scratch)))
        version = conn.execute("SHOW server_version").fetchone()
    url = make_url(server_url).set(database=scratch).render_as_string(hide_password=False)
    try:
        upgrade(url)
        print(
            f"server: PostgreSQL {version[0] if version else '?'} ({'embedded' if home else 'given URL'}); "
            f"cpus={os.cpu_count()}; handoffs={args.handoffs} hold={args.hold_ms} ms"
        )
        for line in bench_handoff(url, args.handoffs, args.hold_ms):
            print(line)
        for line in bench_uncontended(url, args.uncontended):
            print(line)
        if args.java_rounds:
            for line in bench_java_waits(url, args.java_rounds, 0.5):
                print(line)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(scratch)))
        if home is not None:
            from paimon_meta.db.embedded import stop_embedded_postgres

            stop_embedded_postgres(home, mode="immediate")
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
