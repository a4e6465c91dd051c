"""Benchmark: authenticated commits through one ``paimon-meta serve`` replica, alone and under a flood of
hostile requests, side by side; and the shed path's rate (issue 25, "Measure").

* ``quiet``: ``--writers`` client threads commit ``--commits`` one-file CommitMessages each (hand-built
  metadata: the commit path never reads data files) over ``--tables`` tables through the control plane;
  a commit shed with 503 is re-sent (same identifier) after min(Retry-After, 0.2 s).
* ``flood``: the same, on fresh tables of the same server, while ``--hostile`` threads send malformed
  bodies, unknown or missing tokens, bodies declared over the limit and unknown paths as fast as the
  server answers them.
Both with the server's admission bounds at ``--max-in-flight``/``--max-table-commits``/
``--max-commits``. Reported per mode: commits/s (first send to last acknowledgement), p50/p99/max commit
latency (first send to acknowledgement, re-sends included), how many sends were shed, hostile requests
answered per second by status, and /healthz latency p50/max polled throughout. Each mode is checked
afterwards: every acknowledged commit exactly once on every table.
* ``shed path``: a second server with ``--max-in-flight 0`` (every authenticated request shed);
  ``--shed-clients`` threads send ``GET /v1/{prefix}/databases`` with a valid token for
  ``--shed-seconds``: 503s answered per second.

Usage::

    python bench/bench_flood.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                [--writers 48] [--hostile 16] [--tables 4] [--commits 10] [--json PATH]

The load average is printed with each mode: compare numbers of one run only.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402

import paimon_meta  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402
from tests.integration.history import check_exactly_once, read_history  # noqa: E402
from tests.service.helpers import messages_body  # noqa: E402


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _hostile(base: str, token: str, stop: threading.Event, seen: Counter[int], lock: threading.Lock) -> None:
    bad = {"Authorization": "Bearer pmt_notatoken0000000000000000000000"}
    good = {"Authorization": f"Bearer {token}"}
    url = f"{base}/v1/paimon/databases/db/tables/q0/commit-messages"
    host, port = base.removeprefix("http://").split(":")
    with httpx.Client(timeout=30) as client:
        for kind in itertools.cycle(range(5)):
            if stop.is_set():
                return
            if kind == 0:
                status = client.post(url, content=b"{not json", headers=good).status_code
            elif kind == 1:
                status = client.post(url, json={"commitUser": "x"}, headers=bad).status_code
            elif kind == 2:
                status = client.get(f"{base}/v1/paimon/databases").status_code
            elif kind == 3:
                with socket.create_connection((host, int(port)), timeout=30) as sock:
                    sock.sendall(
                        f"POST {url.removeprefix(base)} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer "
                        f"{token}\r\nContent-Length: {1 << 30}\r\n\r\n".encode()
                    )
                    status = int(sock.recv(65536).decode("latin-1").split(" ", 2)[1])
            else:
                status = client.get(f"{base}/v1/paimon/no/such/thing", headers=good).status_code
            with lock:
                seen[status] += 1


def _run(
    base: str, token: str, reader: str, tables: list[str], *, writers: int, commits: int, hostile: int
) -> tuple[dict[str, Any], dict[str, dict[tuple[str, int], str]]]:
    latencies: list[float] = []
    shed = 0
    acked: dict[str, dict[tuple[str, int], str]] = {t: {} for t in tables}
    hostile_seen: Counter[int] = Counter()
    health: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(w: int) -> None:
        nonlocal shed
        table = tables[w % len(tables)]
        user = f"w{w}"
        url = f"{base}/v1/paimon/databases/db/tables/{table}/commit-messages"
        with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {token}"}) as client:
            for i in range(commits):
                f = data_file(rows=1)
                body = messages_body([append_msg(i % 2, w % 2, f)], user, i)
                started = time.monotonic()
                while True:
                    r = client.post(url, json=body)
                    if r.status_code == 200:
                        break
                    if r.status_code != 503:
                        raise RuntimeError(f"commit answered {r.status_code}: {r.text}")
                    with lock:
                        shed += 1
                    time.sleep(min(float(r.headers["retry-after"]), 0.2))
                with lock:
                    latencies.append(time.monotonic() - started)
                    acked[table][(user, i)] = f.file_name

    def healthz() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                t0 = time.monotonic()
                client.get(f"{base}/healthz")
                health.append(time.monotonic() - t0)
                time.sleep(0.05)

    threading.Thread(target=healthz, daemon=True).start()
    with ThreadPoolExecutor(writers + hostile) as pool:
        floods = [pool.submit(_hostile, base, reader, stop, hostile_seen, lock) for _ in range(hostile)]
        started = time.monotonic()
        for future in [pool.submit(writer, w) for w in range(writers)]:
            future.result()
        elapsed = time.monotonic() - started
        stop.set()
        for future in floods:
            future.result()
    hostile_total = sum(hostile_seen.values())
    return {
        "commits": len(latencies),
        "commits_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(_pct(latencies, 0.5) * 1000, 1),
        "p99_ms": round(_pct(latencies, 0.99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "shed_sends": shed,
        "hostile_per_s": round(hostile_total / elapsed, 1),
        "hostile_by_status": dict(sorted(hostile_seen.items())),
        "healthz_p50_ms": round(_pct(health, 0.5) * 1000, 2),
        "healthz_max_ms": round(max(health) * 1000, 2) if health else None,
        "load": os.getloadavg()[0],
    }, acked


def _shed_rate(base: str, token: str, clients: int, seconds: float) -> dict[str, Any]:
    counts: Counter[int] = Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        local: Counter[int] = Counter()
        with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
            while time.monotonic() < deadline:
                r = http.get(f"{base}/v1/paimon/databases")
                local[r.status_code] += 1
                assert r.status_code != 503 or "retry-after" in r.headers
        with lock:
            counts.update(local)

    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    elapsed = time.monotonic() - started
    return {
        "shed_per_s": round(counts[503] / elapsed, 1),
        "by_status": dict(counts),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--writers", type=int, default=48)
    parser.add_argument("--hostile", type=int, default=16)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--max-table-commits", type=int, default=8)
    parser.add_argument("--max-commits", type=int, default=32)
    parser.add_argument("--shed-clients", type=int, default=16)
    parser.add_argument("--shed-seconds", type=float, default=5.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    bounds = [
        *("--max-in-flight", str(args.max_in_flight)),
        *("--max-table-commits", str(args.max_table_commits)),
        *("--max-commits", str(args.max_commits)),
    ]
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items() if k != "url"}}
    with scratch_database(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp_name:
        tmp = Path(tmp_name)
        warehouse = str(tmp / "warehouse")
        with paimon_meta.connect(url, warehouse) as catalog:
            quiet = [f"q{i}" for i in range(args.tables)]
            flooded = [f"f{i}" for i in range(args.tables)]
            for name in quiet + flooded:
                catalog.create_table(f"db.{name}", SCHEMA, partition_keys=["p"], options=dict(TABLE_OPTIONS))
            token = make_principal(catalog, "writers", [("write", "db", None)])
            reader = make_principal(catalog, "reader", [("read", "db", None)])
            with servers(url, warehouse, tmp, 1, extra=bounds) as (server,):
                for mode, tables, hostile in (("quiet", quiet, 0), ("flood", flooded, args.hostile)):
                    result, acked = _run(
                        server.uri,
                        token,
                        reader,
                        tables,
                        writers=args.writers,
                        commits=args.commits,
                        hostile=hostile,
                    )
                    for name in tables:
                        check_exactly_once(read_history(catalog, f"db.{name}"), acked[name])
                    report[mode] = result
                    print(mode, json.dumps(result), flush=True)
            with servers(url, warehouse, tmp, 1, extra=("--max-in-flight", "0")) as (shedding,):
                report["shed_path"] = _shed_rate(shedding.uri, token, args.shed_clients, args.shed_seconds)
                print("shed path", json.dumps(report["shed_path"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
