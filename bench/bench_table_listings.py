"""Benchmark: the catalog's table listings at ``--tables`` tables (issue 28, "Measure"), through a real
``serve`` over HTTP, as pypaimon pages them (``maxResults`` ``--page``, ``pageToken`` of the previous
answer; the same requests pypaimon 2.1.0's ``list_tables_paged`` sends).

* ``listTables``: one database's names (the existing route: names from the registry, paged in Python);
* ``ListTablesGlobally``: every table of the catalog (keyset pages on the registry's primary key);
* ``listTableDetails``: one database's tables with their schemas (one schema file read per table);

each walked ``--sweeps`` times by an admin (every table visible) and by a principal that may read one
table only (the grant filter reads every row to fill its one-row page: the worst case). Reported per
listing and principal: pages per walk and the latency of one page, p50 and p99, with the load average.

Usage::

    python bench/bench_table_listings.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                         [--tables 1000] [--page 100] [--sweeps 5] [--json PATH]
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
from tests.fixtures.service import make_principal  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"tables": args.tables, "page": args.page, "sweeps": args.sweeps}
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
        warehouse = str(Path(tmp) / "warehouse")
        catalog = paimon_meta.connect(url, warehouse)
        try:
            t0 = time.perf_counter()
            for i in range(args.tables):
                catalog.create_table(f"big.t{i:05d}", SCHEMA)
            results["create_s"] = round(time.perf_counter() - t0, 1)
            tokens = {
                "admin": make_principal(catalog, "admin", [("admin", None, None)]),
                "one_table": make_principal(catalog, "one", [("read", "big", f"t{args.tables - 1:05d}")]),
            }
        finally:
            catalog.close()
        with (
            servers(url, warehouse, Path(tmp), 1) as (server,),
            httpx.Client(base_url=server.uri, timeout=60) as client,
        ):
            listings = {
                "listTables": ("/v1/paimon/databases/big/tables", "tables"),
                "ListTablesGlobally": ("/v1/paimon/tables", "tables"),
                "listTableDetails": ("/v1/paimon/databases/big/table-details", "tableDetails"),
            }
            for who, token in tokens.items():
                for name, (path, key) in listings.items():
                    walk(client, path, key, token, page=args.page)  # warm the server's caches once
                    per_page: list[float] = []
                    for _ in range(args.sweeps):
                        items, times = walk(client, path, key, token, page=args.page)
                        per_page += times
                    results[f"{name}/{who}"] = {
                        "items": items,
                        "pages_per_walk": len(times),
                        "page_ms_p50": page_ms(per_page, 0.5),
                        "page_ms_p99": page_ms(per_page, 0.99),
                    }
                    print(name, who, results[f"{name}/{who}"], flush=True)
    results["load"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
