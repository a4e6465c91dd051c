"""Benchmark: view and function listings at ``--objects`` views and as many functions in one database
(issue 28, "Measure"), through a real ``serve`` over HTTP, paged as pypaimon pages them (``maxResults``
``--page``, ``pageToken`` of the previous answer).

A second database holds as many of each again, so the catalog-wide listings and the grant filter have
rows to skip. Walked ``--sweeps`` times (after one warm-up walk) by an admin (every object visible) and
by a principal with read on the first database only (the catalog-wide listing filters in the query):

* ``listViews`` / ``listFunctions``: one database's names;
* ``listViewDetails`` / ``listFunctionDetails``: one database's objects with their definitions;
* ``listViewsGlobally`` / ``listFunctionsGlobally``: every object the principal may read;
* ``listViews?viewNamePattern=v009%``: a prefix pattern (an index range: 100 of the 1,000).

Reported per listing and principal: objects and pages per walk and one page's latency, p50 and p99,
with the load average.

Usage::

    python bench/bench_catalog_objects.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                          [--objects 1000] [--page 100] [--sweeps 5] [--json PATH]
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402
from bench_rest_service import servers  # noqa: E402
from paged_walk import page_ms, walk  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.model.catalog_objects import FunctionSpec, ViewSchema  # noqa: E402
from paimon_meta.model.types import DataField, parse_type  # noqa: E402
from tests.fixtures.service import make_principal  # noqa: E402

FIELDS = (DataField(0, "k", parse_type("BIGINT")), DataField(1, "v", parse_type("STRING")))
VIEW = ViewSchema(fields=FIELDS, query="SELECT k, v FROM t", dialects={"spark": "SELECT k, v FROM t"})
FUNCTION = FunctionSpec(
    input_params=FIELDS[:1],
    return_params=FIELDS[1:],
    deterministic=True,
    definitions={"spark": {"type": "sql", "definition": "CAST(k AS STRING)"}},
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"objects": args.objects, "page": args.page, "sweeps": args.sweeps}
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
        warehouse = str(Path(tmp) / "warehouse")
        catalog = paimon_meta.connect(url, warehouse)
        try:
            t0 = time.perf_counter()
            for database in ("big", "other"):
                catalog.create_database(database)
                for i in range(args.objects):
                    catalog.objects.create_view(database, f"v{i:05d}", VIEW, principal="bench")
                    catalog.objects.create_function(database, f"f{i:05d}", FUNCTION, principal="bench")
            results["create_s"] = round(time.perf_counter() - t0, 1)
            tokens = {
                "admin": make_principal(catalog, "admin", [("admin", None, None)]),
                "big_reader": make_principal(catalog, "reader", [("read", "big", None)]),
            }
        finally:
            catalog.close()
        with (
            servers(url, warehouse, Path(tmp), 1) as (server,),
            httpx.Client(base_url=server.uri, timeout=60) as client,
        ):
            db = "/v1/paimon/databases/big"
            listings: dict[str, tuple[str, str, dict[str, str]]] = {
                "listViews": (f"{db}/views", "views", {}),
                "listViewDetails": (f"{db}/view-details", "viewDetails", {}),
                "listViewsGlobally": ("/v1/paimon/views", "views", {}),
                "listViews?viewNamePattern=v009%": (f"{db}/views", "views", {"viewNamePattern": "v009%"}),
                "listFunctions": (f"{db}/functions", "functions", {}),
                "listFunctionDetails": (f"{db}/function-details", "functionDetails", {}),
                "listFunctionsGlobally": ("/v1/paimon/functions", "functions", {}),
            }
            for who, token in tokens.items():
                for name, (path, key, params) in listings.items():
                    walk(client, path, key, token, page=args.page, params=params)  # warm the server once
                    per_page: list[float] = []
                    for _ in range(args.sweeps):
                        items, times = walk(client, path, key, token, page=args.page, params=params)
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
