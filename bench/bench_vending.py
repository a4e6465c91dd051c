"""Benchmark: the cost of vending table-scoped storage credentials, and how often clients fetch them
(issue 26, "Measure").

* ``sts``: ``--vends`` STS ``AssumeRole`` calls with a table's session policy, made by the server's
  vendor (:class:`paimon_meta.io.sts.StsVendor`) straight to the STS endpoint (moto here: a local
  server, so this is the floor of the round trip; AWS's regional endpoint adds tens of ms).
* ``token route``: ``GET .../token`` through a real ``serve --sts-role-arn``: the first request for each of
  ``--tables`` tables (an STS call, the access-log row) and then again (reused credentials, the row).
* ``clients``: ``--clients`` threads, each its own principal, each ``connect_service`` with no storage
  keys, commit ``--commits`` batches (real data files written to moto S3 with the vended keys) to one
  of ``--client-tables`` tables. Reported: commits, token requests the server answered (from the
  access log), STS sessions created, and per client and table how many times it fetched. Side by side,
  first: the same clients with their own keys against a server that vends nothing
  (``clients_own_keys``).

Usage::

    python bench/bench_vending.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                  [--vends 200] [--tables 50] [--clients 16] [--commits 10] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
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
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.rest import connect_service  # noqa: E402
from paimon_meta.io.sts import StsSettings, StsVendor  # noqa: E402
from paimon_meta.metastore.access_events import access_events  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/paimon-vending"
SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
CREDENTIALS = {"s3.access-key": "bench", "s3.secret-key": "bench", "s3.region": "us-east-1"}


def _ms(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(_ms(values, 0.5), 2),
        "p99_ms": round(_ms(values, 0.99), 2),
        "mean_ms": round(1000 * statistics.fmean(values), 2),
    }


def bench_sts(options: dict[str, str], vends: int) -> dict[str, float]:
    vendor = StsVendor(StsSettings(role_arn=ROLE), options)
    vendor.vend("s3://bucket/warehouse/db.db/warmup", "write", "bench")  # client build, connection
    took = []
    for i in range(vends):
        started = time.perf_counter()
        vendor.vend(f"s3://bucket/warehouse/db.db/t{i}", "write" if i % 2 else "read", f"p{i}")
        took.append(time.perf_counter() - started)
    vendor.close()
    return _summary(took)


def bench_route(base: str, token: str, tables: Sequence[str]) -> dict[str, dict[str, float]]:
    out: dict[str, list[float]] = {"first (STS)": [], "again (reused)": []}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        for took in out.values():
            for name in tables:
                started = time.perf_counter()
                response = http.get(f"/v1/paimon/databases/bench/tables/{name}/token")
                took.append(time.perf_counter() - started)
                response.raise_for_status()
    return {label: _summary(values) for label, values in out.items()}


def bench_clients(
    base: str,
    tokens: Sequence[str],
    tables: Sequence[str],
    commits: int,
    options: dict[str, str] | None = None,
) -> dict[str, Any]:
    errors: list[str] = []
    latencies: list[float] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        try:
            # Vending: no storage options at all; else the client's own keys (``options``).
            with connect_service(base, tokens[i], **(options or {})) as remote:
                table = remote.get_table(tables[i % len(tables)])
                for n in range(commits):
                    started = time.perf_counter()
                    wb = table.new_batch_write_builder()
                    write, commit = wb.new_write(), wb.new_commit()
                    write.write_arrow(pa.table({"k": [i * 1000 + n], "v": [f"{i}-{n}"]}, schema=SCHEMA))
                    commit.commit(write.prepare_commit())
                    write.close()
                    with lock:
                        latencies.append(time.perf_counter() - started)
        except Exception as e:
            with lock:
                errors.append(f"client {i}: {type(e).__name__}: {e}")

    started = time.perf_counter()
    with ThreadPoolExecutor(len(tokens)) as pool:
        list(pool.map(client, range(len(tokens))))
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError("; ".join(errors[:5]))
    return {"commits": len(latencies), "seconds": round(elapsed, 2), "commit": _summary(latencies)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--vends", type=int, default=200)
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--client-tables", type=int, default=4)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    from moto.server import ThreadedMotoServer

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    options = {**CREDENTIALS, "s3.endpoint": endpoint, "s3.path-style-access": "true"}
    results: dict[str, Any] = {"load_before": load()}
    try:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        ).create_bucket(Bucket="bench")
        results["sts"] = bench_sts(options, args.vends)
        print(f"sts AssumeRole: {results['sts']}  [{load()}]", flush=True)
        with scratch_database(args.url) as url, tempfile.TemporaryDirectory() as tmp:
            warehouse = "s3://bench/warehouse"
            catalog = paimon_meta.connect(url, warehouse, **options)
            try:
                catalog.create_database("bench")
                for i in range(args.tables):
                    catalog.create_table(f"bench.t{i}", SCHEMA, options={"bucket": "1"})
                # Fresh tables per mode: both start from empty tables, side by side.
                own = [f"bench.own{i}" for i in range(args.client_tables)]
                vended = [f"bench.vended{i}" for i in range(args.client_tables)]
                for name in own + vended:
                    catalog.create_table(name, SCHEMA, options={"bucket": "1"})
                admin = make_principal(catalog, "bench-admin", [("admin", None, None)])
                tokens = [
                    make_principal(catalog, f"client-{i}", [("write", "bench", None)])
                    for i in range(args.clients)
                ]
                extra = ["--sts-role-arn", ROLE, *[a for k, v in options.items() for a in ("-o", f"{k}={v}")]]
                # Side by side: the same clients with their own keys against a server that vends nothing.
                plain = [a for k, v in options.items() for a in ("-o", f"{k}={v}")]
                with servers(url, warehouse, Path(tmp), 1, extra=plain) as [server]:
                    results["clients_own_keys"] = bench_clients(
                        server.uri, tokens, own, args.commits, options
                    )
                    print(f"{args.clients} clients, own keys: {results['clients_own_keys']}  [{load()}]")
                with servers(url, warehouse, Path(tmp), 1, extra=extra) as [server]:
                    results["token_route"] = bench_route(
                        server.uri, admin, [f"t{i}" for i in range(args.tables)]
                    )
                    print(f"GET .../token: {results['token_route']}  [{load()}]", flush=True)
                    results["clients"] = bench_clients(server.uri, tokens, vended, args.commits)
                events = [
                    e
                    for e in access_events(catalog.engine, limit=1_000_000)
                    if e.principal.startswith("client-") and e.table_identifier in vended
                ]
                per_pair = Counter((e.principal, e.table_identifier) for e in events)
                results["clients"].update(
                    token_requests=len(events),
                    sts_sessions=sum(1 for e in events if not e.payload["cached"]),
                    fetches_per_client_table=sorted(set(per_pair.values())),
                    client_table_pairs=len(per_pair),
                )
                print(f"{args.clients} clients: {results['clients']}  [{load()}]", flush=True)
            finally:
                catalog.close()
    finally:
        moto.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
