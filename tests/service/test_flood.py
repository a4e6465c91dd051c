"""A flood against a real ``paimon-meta serve`` with small admission bounds: 64 concurrent clients, a
quarter of them hostile (malformed bodies, unknown or missing tokens, oversized and chunked bodies,
unknown paths), the rest committing through the control plane to four tables and re-sending a shed
commit (same identifier) after its ``Retry-After``. Every authenticated commit lands exactly once,
``/healthz`` answers throughout, a shed request gets 503 + Retry-After, and nobody gets a 500."""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

import paimon_meta
from tests.commit.helpers import append_msg, data_file
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.integration.history import check_exactly_once, read_history
from tests.service.helpers import messages_body

pytestmark = pytest.mark.postgres

SLOW = os.environ.get("PAIMON_META_SLOW") == "1"
CLIENTS = 64
HOSTILE = CLIENTS // 4
TABLES = ["t0", "t1", "t2", "t3"]
COMMITS = 12 if SLOW else 4  # per writer
SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)
#: Sends of one commit before the test gives up on it (a shed that never ends is a failure, not a hang).
MAX_SENDS = 1000
#: Small bounds, so that 48 writers over 4 tables meet them.
BOUNDS = ["--max-in-flight", "24", "--max-table-commits", "4", "--max-commits", "12", "--workers", "16"]
#: What a hostile request may be answered (never 5xx but a shed 503).
HOSTILE_ANSWERS = {400, 401, 403, 404, 405, 408, 411, 413, 429, 503}


def _oversized(base: str, url: str, token: str) -> int:
    """POST declaring a 1 GiB body, over a raw socket (an HTTP client would insist on sending it):
    the status the server answers before reading it."""
    host, port = base.removeprefix("http://").split(":")
    path = url.removeprefix(base)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Length: {1 << 30}\r\n\r\n".encode()
        )
        head = sock.recv(65536).decode("latin-1")
    return int(head.split(" ", 2)[1])


def _hostile_requests(base: str, token: str, stop: threading.Event, seen: Counter[int], n: int) -> None:
    bad = {"Authorization": "Bearer pmt_notatoken0000000000000000000000"}
    good = {"Authorization": f"Bearer {token}"}
    url = f"{base}/v1/paimon/databases/db/tables/t0/commit-messages"
    kinds = itertools.cycle(range(6))
    with httpx.Client(timeout=30) as client:
        for kind in kinds:
            if stop.is_set():
                return
            if kind == 0:  # malformed JSON with a good token
                r = client.post(url, content=b"{not json", headers=good)
            elif kind == 1:  # an unknown token
                r = client.post(url, json={"commitUser": "x"}, headers=bad)
            elif kind == 2:  # no token
                r = client.get(f"{base}/v1/paimon/databases")
            elif kind == 3:  # a declared body over the limit (refused before it is read)
                seen[_oversized(base, url, token)] += 1
                continue
            elif kind == 4:  # valid JSON, invalid messages
                r = client.post(
                    url,
                    json={"commitUser": "x", "commitIdentifier": n, "messagesVersion": 14, "messages": "!!"},
                    headers=good,
                )
            else:  # a path that does not exist
                r = client.get(f"{base}/v1/paimon/no/such/thing", headers=good)
            seen[r.status_code] += 1
            if r.status_code == 503:
                assert "retry-after" in r.headers


def test_a_flood_does_not_starve_or_break_authenticated_commits(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        for name in TABLES:
            catalog.create_table(
                f"db.{name}", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"}
            )
        writers = make_principal(catalog, "writers", [("write", "db", None)])
        readers = make_principal(catalog, "reader", [("read", "db", None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path, args=BOUNDS)
        base = server.base
        stop = threading.Event()
        hostile_seen: Counter[int] = Counter()
        writer_seen: Counter[int] = Counter()
        health: Counter[int] = Counter()
        acked: dict[str, dict[tuple[str, int], str]] = {name: {} for name in TABLES}
        mutex = threading.Lock()

        def healthz() -> None:
            with httpx.Client(timeout=30) as client:
                while not stop.is_set():
                    health[client.get(f"{base}/healthz").status_code] += 1
                    time.sleep(0.02)

        def writer(w: int) -> None:
            name = TABLES[w % len(TABLES)]
            user = f"writer-{w}"
            url = f"{base}/v1/paimon/databases/db/tables/{name}/commit-messages"
            with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {writers}"}) as client:
                for i in range(COMMITS):
                    f = data_file(rows=1)
                    body = messages_body([append_msg(i % 2, w % 2, f)], user, i)
                    for _ in range(MAX_SENDS):  # re-sent, same identifier, until acknowledged
                        r = client.post(url, json=body)
                        with mutex:
                            writer_seen[r.status_code] += 1
                        if r.status_code == 200:
                            break
                        assert r.status_code == 503, r.text
                        time.sleep(min(float(r.headers["retry-after"]), 0.2))
                    else:
                        raise AssertionError(f"{user} {i}: shed {MAX_SENDS} times ({writer_seen})")
                    with mutex:
                        acked[name][(user, i)] = f.file_name

        threading.Thread(target=healthz, daemon=True).start()
        with ThreadPoolExecutor(CLIENTS) as pool:
            hostile = [
                pool.submit(_hostile_requests, base, readers, stop, hostile_seen, n) for n in range(HOSTILE)
            ]
            writing = [pool.submit(writer, w) for w in range(CLIENTS - HOSTILE)]
            for future in writing:
                future.result()
            stop.set()
            for future in hostile:
                future.result()
        assert set(health) == {200}, health
        assert set(writer_seen) <= {200, 503}, writer_seen
        assert set(hostile_seen) <= HOSTILE_ANSWERS, hostile_seen
        assert sum(hostile_seen.values()) >= HOSTILE, hostile_seen
        # 48 writers against bounds of 12 commits: the bounds were met (so the 503s above were checked).
        assert writer_seen[503] + hostile_seen[503] > 0, (writer_seen, hostile_seen)
        for name in TABLES:
            check_exactly_once(read_history(catalog, f"db.{name}"), acked[name])
        # Nothing written by a refused request: every live file is an acknowledged commit's (above),
        # and the server's log has no unexpected error.
        assert "failed unexpectedly" not in server.log_tail(10_000)
    finally:
        catalog.close()
