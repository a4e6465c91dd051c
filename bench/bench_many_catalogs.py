"""Benchmark: one catalog vs ``--catalogs`` catalogs in one metastore behind one ``serve`` (issue 35,
"Measure"): the commit latency and the listing pages of one catalog (``c000``, not the default one: its
requests resolve their catalog through the served-catalog cache) while the metastore holds the others,
each with the same database and tables.

For each count (1 and ``--catalogs``): ``--tables`` tables in ``db`` of every catalog; a principal that is
admin of ``c000`` only; ``--commits`` sequential commits (our ``connect_service(warehouse="c000")``, one
row each, to ``db.t0000``: latency p50/p99), and ``--sweeps`` walks of ``/v1/c000/databases/db/tables``
and ``/v1/c000/tables`` at ``--page`` per page (latency of a page p50/p99). The load average is reported.

Usage::

    python bench/bench_many_catalogs.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                        [--catalogs 50] [--tables 100] [--commits 100] [--json PATH]
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
from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.metastore.catalogs import Catalogs  # noqa: E402
from paimon_meta.metastore.principals import Principals  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def run(url: str, tmp: Path, catalogs: int, args: argparse.Namespace) -> dict[str, Any]:
    default = paimon_meta.connect(url, str(tmp / "default"))
    try:
        for i in range(catalogs):
            Catalogs(default.engine).create(f"c{i:03d}", str(tmp / f"wh-{i:03d}"))
            with paimon_meta.connect(url, catalog=f"c{i:03d}") as cat:
                for t in range(args.tables):
                    cat.create_table(f"db.t{t:04d}", SCHEMA)
        principals = Principals(default.engine)
        token = principals.create("bench")
        principals.grant("bench", Privilege.ADMIN, catalog_key="c000")
    finally:
        default.close()
    out: dict[str, Any] = {"catalogs": catalogs, "tables_per_catalog": args.tables}
    with servers(url, str(tmp / "default"), tmp, 1) as (server,):
        with paimon_meta.connect_service(server.uri, token, warehouse="c000") as remote:
            table = remote.get_table("db.t0000")
            times = []
            for n in range(args.commits + 5):
                wb = table.new_batch_write_builder()
                write, commit = wb.new_write(), wb.new_commit()
                write.write_arrow(pa.table({"k": pa.array([n], pa.int64()), "v": [str(n)]}, schema=SCHEMA))
                messages = write.prepare_commit()
                t0 = time.perf_counter()
                commit.commit(messages)
                if n >= 5:  # warm-up
                    times.append(time.perf_counter() - t0)
                write.close()
            out["commit_ms_p50"], out["commit_ms_p99"] = page_ms(times, 0.5), page_ms(times, 0.99)
        with httpx.Client(base_url=server.uri, timeout=60) as client:
            for name, path in (
                ("listTables", "/v1/c000/databases/db/tables"),
                ("ListTablesGlobally", "/v1/c000/tables"),
            ):
                walk(client, path, "tables", token, page=args.page)
                per_page: list[float] = []
                for _ in range(args.sweeps):
                    items, pages = walk(client, path, "tables", token, page=args.page)
                    per_page += pages
                assert items == args.tables, (name, items)
                out[name] = {"page_ms_p50": page_ms(per_page, 0.5), "page_ms_p99": page_ms(per_page, 0.99)}
    out["load"] = load()
    print(json.dumps(out), flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--catalogs", type=int, default=50)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--page", type=int, default=20)
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = []
    for count in (1, args.catalogs):
        with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
            results.append(run(url, Path(tmp), count, args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
