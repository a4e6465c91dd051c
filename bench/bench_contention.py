"""Benchmark of writers contending for one table: throughput against the lock's serial bound, hand-off
and crash-takeover times, on a local warehouse and on S3 (a moto server in this process).

``--writers`` processes (spawned, each with its own ``paimon_meta.connect``) start together and each
commits ``--commits`` one-file CommitMessages with its own commit user. Reported per store:

* commits/s over the whole run (first start to last acknowledgement);
* the critical section: how long each commit held the table lock, from the lock log
  (``paimon_lock_activity``: ``acquired`` to ``released`` event, database clock), its mean and the
  serial bound 1 / mean (no scheme that serialises on the lock can beat it), and achieved / bound;
* hand-off: from one holder's ``released`` event to the next holder's ``acquired`` event;
* per-commit latency seen by the writers, and a check that nothing was lost or duplicated;
* crash takeover (once, local): a writer frozen holding the lock is SIGKILLed; time from the kill to the
  next writer's ``expiry_takeover`` (bounded by ``lock.lease-seconds``, here ``--lease``).

Usage::

    python bench/bench_contention.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                     [--writers 8] [--commits 50] [--lease 2] [--no-s3]

The URL (else ``$PAIMON_META_TEST_DSN``) names a server to create scratch databases on.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, load, scratch_database  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.commit.crashpoints import PAUSE_AT_ENV, CrashPoint  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402
from tests.integration.history import check_exactly_once, read_history  # noqa: E402

ctx = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class Job:
    url: str
    warehouse: str
    options: Mapping[str, str]
    commits: int


def _writer(job: Job, user: str, start: Event, out: Queue[Any]) -> None:
    url, warehouse, options, commits = job.url, job.warehouse, job.options, job.commits
    with paimon_meta.connect(url, warehouse, **options) as catalog:
        table = catalog.get_table("db.t")
        assert table.committer_factory is not None
        committer = table.committer_factory(table, user)
        messages = [append_msg(i % 2, i % 2, data_file(rows=1)) for i in range(commits)]
        out.put(("ready", user))
        start.wait(120)
        acked, latencies = {}, []
        for i, msg in enumerate(messages):
            t0 = time.perf_counter()
            committer.commit([msg], i)
            latencies.append((time.perf_counter() - t0) * 1000)
            acked[(user, i)] = msg.data_increment.new_files[0].file_name
        out.put(("done", user, acked, latencies, time.time()))


def _frozen_holder(url: str, warehouse: str, options: Mapping[str, str], out: Queue[Any]) -> None:
    os.environ[PAUSE_AT_ENV] = CrashPoint.AFTER_LOCK.value
    with paimon_meta.connect(url, warehouse, **options) as catalog:
        table = catalog.get_table("db.t")
        assert table.committer_factory is not None
        table.committer_factory(table, "doomed").commit([append_msg(0, 0, data_file(rows=1))], 0)
    out.put("committed")  # not reached: it is killed while frozen


@contextmanager
def moto_warehouse() -> Iterator[tuple[str, dict[str, str]]]:
    """A bucket on a moto server in this process (the test suite's faithful setup)."""
    from moto.server import ThreadedMotoServer

    from tests.fixtures.s3 import MotoS3, _FaithfulS3Middleware

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    starter = threading.Thread(target=server.start, daemon=True)
    starter.start()
    starter.join(30)
    wsgi = server._server
    assert wsgi is not None
    wsgi.app = _FaithfulS3Middleware(wsgi.app)
    host, port = server.get_host_and_port()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    moto = MotoS3(endpoint=f"http://{host}:{port}")
    bucket = moto.create_bucket()
    try:
        yield f"s3://{bucket}/warehouse", moto.options()
    finally:
        moto.drop_bucket(bucket)
        moto.client().close()
        server.stop()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_store(
    label: str, url: str, warehouse: str, options: dict[str, str], args: argparse.Namespace
) -> list[str]:
    with paimon_meta.connect(url, warehouse, **options) as catalog:
        catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    out: Queue[Any] = ctx.Queue()
    start = ctx.Event()
    procs = [
        ctx.Process(target=_writer, args=(Job(url, warehouse, options, args.commits), f"w{w}", start, out))
        for w in range(args.writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        assert out.get(timeout=300)[0] == "ready"
    t_start = time.time()
    start.set()
    results = [out.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join(60)
    wall = max(r[4] for r in results) - t_start
    acked: dict[tuple[str, int], str] = {}
    latencies: list[float] = []
    for r in results:
        acked.update(r[2])
        latencies.extend(r[3])
    with paimon_meta.connect(url, warehouse, **options) as catalog:
        history = read_history(catalog, "db.t")
        check_exactly_once(history, acked)  # raises if anything was lost or duplicated
        with catalog.engine.connect() as conn:
            held = [
                float(r[0])
                for r in conn.execute(
                    text(
                        "SELECT held_ms FROM paimon_lock_activity "
                        "WHERE lock_id = 'jdbc.db.t' AND ended_by = 'released'"
                    )
                )
            ]
            handoff = [
                float(r[0])
                for r in conn.execute(
                    text(
                        "SELECT EXTRACT(EPOCH FROM a.created_at - r.created_at) * 1000 "
                        "FROM paimon_lock_events r JOIN LATERAL ("
                        " SELECT created_at FROM paimon_lock_events x"
                        " WHERE x.lock_id = r.lock_id AND x.event_id > r.event_id"
                        " AND x.event_type = 'acquired'"
                        " ORDER BY x.event_id LIMIT 1) a ON true "
                        "WHERE r.lock_id = 'jdbc.db.t' AND r.event_type = 'released'"
                    )
                )
            ]
    n = len(acked)
    rate = n / wall
    mean_held = statistics.fmean(held)
    bound = 1000.0 / mean_held
    return [
        f"### {label}: {args.writers} writers x {args.commits} commits ({load()})",
        "",
        "| metric | value |",
        "|---|---|",
        f"| commits acknowledged / lost or duplicated | {n} / 0 |",
        f"| wall time | {wall:.2f} s |",
        f"| throughput | {rate:.1f} commits/s |",
        f"| critical section (lock held), mean / median / p90 | {mean_held:.2f} / "
        f"{statistics.median(held):.2f} / {_pct(held, 0.9):.2f} ms |",
        f"| serial bound 1 / mean critical section | {bound:.1f} commits/s |",
        f"| achieved / serial bound | {rate / bound:.2f} |",
        f"| hand-off (released -> next acquired), median / p90 | {statistics.median(handoff):.2f} / "
        f"{_pct(handoff, 0.9):.2f} ms |",
        f"| commit latency seen by writers, median / p90 / max | {statistics.median(latencies):.1f} / "
        f"{_pct(latencies, 0.9):.1f} / {max(latencies):.1f} ms |",
        "",
    ]


def crash_takeover(url: str, warehouse: str, lease: int) -> list[str]:
    options = {"lock.lease-seconds": str(lease), "lock.acquire-timeout-seconds": str(lease + 30)}
    with paimon_meta.connect(url, warehouse, **options) as catalog:
        catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
        out: Queue[Any] = ctx.Queue()
        holder = ctx.Process(target=_frozen_holder, args=(url, warehouse, options, out))
        holder.start()
        stat = Path(f"/proc/{holder.pid}/stat")
        while stat.read_text().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
            time.sleep(0.01)
        killed_at = time.time()
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join(30)
        table = catalog.get_table("db.t")
        assert table.committer_factory is not None
        table.committer_factory(table, "next").commit([append_msg(0, 0, data_file(rows=1))], 0)
        done_at = time.time()
        with catalog.engine.connect() as conn:
            took = conn.execute(
                text(
                    "SELECT EXTRACT(EPOCH FROM created_at) FROM paimon_lock_events "
                    "WHERE event_type = 'expiry_takeover'"
                )
            ).scalar_one()
    return [
        f"### Crash takeover (lease {lease} s, {load()})",
        "",
        "A writer frozen holding the lock (pause point `after_lock`) is SIGKILLed; the next writer commits.",
        "",
        "| metric | value |",
        "|---|---|",
        f"| SIGKILL -> next writer's expiry_takeover | {(float(took) - killed_at) * 1000:.0f} ms |",
        f"| SIGKILL -> next writer's commit acknowledged | {(done_at - killed_at) * 1000:.0f} ms |",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--lease", type=int, default=2)
    parser.add_argument("--no-s3", action="store_true")
    args = parser.parse_args()
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    print(f"before: {load()}", flush=True)
    lines: list[str] = []
    with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-contention-") as tmp:
        lines += run_store("Local warehouse", url, str(Path(tmp) / "local"), {}, args)
        print("\n".join(lines), flush=True)
    if not args.no_s3:
        with scratch_database(args.url) as url, moto_warehouse() as (uri, options):
            s3 = run_store("S3 (moto, in this process)", url, uri, options, args)
            print("\n".join(s3), flush=True)
            lines += s3
    with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-takeover-") as tmp:
        takeover = crash_takeover(url, str(Path(tmp) / "w"), args.lease)
        print("\n".join(takeover), flush=True)
    print(f"after: {load()}")


if __name__ == "__main__":
    main()
