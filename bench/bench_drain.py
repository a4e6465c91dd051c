"""How long a replica takes to drain on SIGTERM with 16 clients committing through it (issue 40, item 2).

Two ``paimon-meta serve`` replicas on one scratch metastore and local warehouse; ``--clients`` threads
commit one-file messages to one table through replica A, back to back. After ``--warmup`` seconds A gets
SIGTERM. A client whose commit A refuses (503) or cannot answer re-sends it, same identifier, to replica
B and goes on there. Measured from the signal: until A's ``/readyz`` answers 503 (or refuses the
connection), and until A has exited (its exit status is reported); how A answered the commits in flight
(acknowledged, 503, other); and, with ``--hold-lock``, the same while the bench holds the table's lock
from just before the signal (the commits in flight then wait past ``--drain-seconds`` and are withdrawn
at the deadline). Every acknowledged commit is checked to be in the table exactly once.

Usage::

    python bench/bench_drain.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--clients 16]
                                [--warmup 5] [--drain-seconds 30] [--hold-lock] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, scratch_database  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.rest import RemoteCommitter, connect_service  # noqa: E402
from paimon_meta.errors import PaimonMetaError  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402
from tests.fixtures.service import ServiceProcess, free_port, make_principal  # noqa: E402
from tests.integration.history import read_history  # noqa: E402


def _committer(base: str, token: str, user: str) -> RemoteCommitter:
    remote = connect_service(base, token, **{"rest.retry.deadline-seconds": "0"})
    table = remote.get_table("db.t")
    assert table.committer_factory is not None
    committer = table.committer_factory(table, user)
    assert isinstance(committer, RemoteCommitter)
    return committer


def run(url: str, tmp: Path, *, clients: int, warmup: float, drain: float, hold_lock: bool) -> dict[str, Any]:
    warehouse = str(tmp / "warehouse")
    catalog = paimon_meta.connect(url, warehouse)
    catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    token = make_principal(catalog, "writers", [("write", "db", "t")])
    replicas = [
        ServiceProcess(
            url,
            warehouse,
            free_port(),
            args=["--drain-seconds", f"{drain:g}"],
            log_path=tmp / f"serve-{i}.log",
        ).start()
        for i in range(2)
    ]
    a, b = replicas
    stop = threading.Event()
    signalled = threading.Event()
    mutex = threading.Lock()
    acked: dict[tuple[str, int], str] = {}
    answers = {"acked_by_a_after_signal": 0, "503": 0, "unreachable": 0, "other": 0}

    def client(c: int) -> None:
        user = f"client-{c}"
        on = [_committer(a.base, token, user), _committer(b.base, token, user)]
        i = 0
        while not stop.is_set():
            f = data_file(rows=1)
            messages = [append_msg(i % 2, (c + i) % 2, f)]
            try:
                on[0].commit(messages, i)
                if signalled.is_set() and len(on) == 2:
                    with mutex:
                        answers["acked_by_a_after_signal"] += 1
            except PaimonMetaError as e:
                kind = (
                    "503" if "HTTP 503" in str(e) else "unreachable" if "unreachable" in str(e) else "other"
                )
                with mutex:
                    answers[kind] += 1
                on = on[1:]  # to B, the same identifier
                on[0].commit(messages, i)
            with mutex:
                acked[(user, i)] = f.file_name
            i += 1

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    time.sleep(warmup)
    holder = None
    if hold_lock:
        holder = catalog.lock.acquire(
            catalog.registry.lock_id("db", "t"), owner="bench:holder", lease_seconds=120
        )
        time.sleep(0.5)  # commits queue behind it
    assert a.proc is not None
    t0 = time.monotonic()
    signalled.set()
    a.proc.send_signal(signal.SIGTERM)
    not_ready = None
    while a.proc.poll() is None:
        try:
            ready = httpx.get(f"{a.base}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            ready = False
        if not ready and not_ready is None:
            not_ready = time.monotonic() - t0
        time.sleep(0.01)
    exited = time.monotonic() - t0
    status = a.proc.returncode
    if holder is not None:
        holder.release()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(120)
    b.stop()
    history = read_history(catalog, "db.t")
    keys = [(s.commit_user, s.commit_identifier) for s in history.snapshots.values()]
    exactly_once = len(keys) == len(set(keys)) and set(keys) == set(acked)
    catalog.close()
    log = (tmp / "serve-0.log").read_text(errors="replace")
    return {
        "clients": clients,
        "drain_seconds": drain,
        "hold_lock": hold_lock,
        "not_ready_after_s": not_ready,
        "exited_after_s": exited,
        "exit_status": status,
        "answers": answers,
        "commits": len(acked),
        "exactly_once": exactly_once,
        "tracebacks_in_log": log.count("Traceback"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--drain-seconds", type=float, default=30.0)
    parser.add_argument("--hold-lock", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for hold in (False, True) if args.hold_lock else (False,):
        with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-drain-") as tmp:
            drain = args.drain_seconds if not hold else min(args.drain_seconds, 2.0)
            results.append(
                run(url, Path(tmp), clients=args.clients, warmup=args.warmup, drain=drain, hold_lock=hold)
            )
    results_text = json.dumps({"load_average": os.getloadavg(), "runs": results}, indent=2)
    print(results_text)
    if args.json:
        args.json.write_text(results_text)


if __name__ == "__main__":
    main()
