"""Benchmark: partition listings at ``--partitions`` partitions of one table (issue 28, "Measure"), through
a real ``serve`` over HTTP, paged as pypaimon 2.1.0's ``list_partitions_paged`` pages them
(``maxResults`` ``--page``, ``pageToken`` of the previous answer).

Half the partitions hold data (one commit of the library writing one row into each), half are only
registered (``createPartitions``); a tenth are marked done. Walked ``--sweeps`` times after one warm-up
walk:

* ``listPartitions``: every partition, with totals and registrations;
* ``listPartitions?partitionNamePattern=day=d009%``: a prefix pattern (100 of 1,000);
* ``listPartitionsByNames``: ``--page`` names per request (the whole table in pages of names).

Reported per listing: partitions and pages per walk and one page's latency, p50 and p99, with the load
average.

Usage::

    python bench/bench_partitions_list.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                          [--partitions 1000] [--page 100] [--sweeps 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402
from paged_walk import page_ms, walk  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.ops import partitions as partition_ops  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string())])
TABLE = "/v1/paimon/databases/bench/tables/t"


def by_names(client: httpx.Client, token: str, names: list[str], *, page: int) -> tuple[int, list[float]]:
    """(partitions, per-request seconds) of asking for ``names`` ``page`` at a time."""
    items, times = 0, []
    for i in range(0, len(names), page):
        specs = [{"day": n} for n in names[i : i + page]]
        t0 = time.perf_counter()
        answer = client.post(
            f"{TABLE}/partitions/list-by-names",
            json={"specs": specs},
            headers={"Authorization": f"Bearer {token}"},
        )
        times.append(time.perf_counter() - t0)
        answer.raise_for_status()
        items += len(answer.json()["partitions"])
    return items, times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"partitions": args.partitions, "page": args.page, "sweeps": args.sweeps}
    days = [f"d{i:05d}" for i in range(args.partitions)]
    written, registered = days[: len(days) // 2], days[len(days) // 2 :]
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
        warehouse = str(Path(tmp) / "warehouse")
        catalog = paimon_meta.connect(url, warehouse)
        try:
            t0 = time.perf_counter()
            catalog.create_database("bench")
            table = catalog.create_table("bench.t", SCHEMA, partition_keys=["day"], options={"bucket": "1"})
            wb = table.new_batch_write_builder()
            write, commit = wb.new_write(), wb.new_commit()
            write.write_arrow(pa.table({"id": list(range(len(written))), "day": written}, schema=SCHEMA))
            commit.commit(write.prepare_commit())
            write.close()
            partition_ops.create_partitions(catalog, "bench.t", [{"day": d} for d in registered])
            partition_ops.mark_done_partitions(catalog, "bench.t", [{"day": d} for d in days[::10]])
            results["setup_s"] = round(time.perf_counter() - t0, 1)
            token = make_principal(catalog, "reader", [("read", "bench", "t")])
        finally:
            catalog.close()
        with (
            servers(url, warehouse, Path(tmp), 1) as (server,),
            httpx.Client(base_url=server.uri, timeout=60) as client,
        ):
            listings: dict[str, dict[str, str]] = {
                "listPartitions": {},
                "listPartitions?partitionNamePattern=day=d009%": {"partitionNamePattern": "day=d009%"},
            }
            for name, params in listings.items():
                walk(
                    client, f"{TABLE}/partitions", "partitions", token, page=args.page, params=params
                )  # warm the server once
                per_page: list[float] = []
                for _ in range(args.sweeps):
                    items, times = walk(
                        client, f"{TABLE}/partitions", "partitions", token, page=args.page, params=params
                    )
                    per_page += times
                results[name] = {
                    "items": items,
                    "pages_per_walk": len(times),
                    "page_ms_p50": page_ms(per_page, 0.5),
                    "page_ms_p99": page_ms(per_page, 0.99),
                }
                print(name, results[name], flush=True)
            by_names(client, token, days, page=args.page)
            per_request: list[float] = []
            for _ in range(args.sweeps):
                items, times = by_names(client, token, days, page=args.page)
                per_request += times
            results["listPartitionsByNames"] = {
                "items": items,
                "requests_per_walk": len(times),
                "request_ms_p50": page_ms(per_request, 0.5),
                "request_ms_p99": page_ms(per_request, 0.99),
            }
            print("listPartitionsByNames", results["listPartitionsByNames"], flush=True)
    results["load"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
