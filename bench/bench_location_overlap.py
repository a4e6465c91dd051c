"""Benchmark: the overlap check of table locations at ``--tables`` registered tables (issue 34, item 1).

Every create, metadata-only create and register asks the registry which rows' locations equal, contain or
lie inside the new one (``Registry.table_rows_overlapping``, on ``paimon_tables.location_key``: equality on
the key and its ancestors, a bytewise range on its descendants), then inserts under one advisory lock.
Measured on a scratch metastore holding ``--tables`` rows (``<warehouse>/db<i % 100>.db/t<i>``, inserted
in bulk with their keys):

* ``check, free``: a location no row overlaps (what a create or register that succeeds asks);
* ``check, other spelling``: another spelling of a registered table's directory (what the issue 34 attack
  sends: refused);
* ``check, database dir``: ``<warehouse>/db7.db``, which contains 1% of the rows (all of them returned);
* ``create + drop row``: ``create_table_row`` (lock, check, insert, commit) then ``drop_table_row``;
* ``before (raw strings)``: the check as it was before migration 0014 (``starts_with`` on the raw
  location, both ways): for scale only, it did not see other spellings.

Each is run ``--rounds`` times; p50 and p99 in ms, with the load average and the plan of the keyed query.

Usage::

    python bench/bench_location_overlap.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                           [--tables 10000] [--rounds 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402

from paimon_meta.db.engine import make_engine  # noqa: E402
from paimon_meta.io.base import location_key  # noqa: E402
from paimon_meta.metastore.registry import Registry  # noqa: E402

WAREHOUSE = "/bench/warehouse"
OLD_CHECK = (
    "SELECT table_id FROM paimon_tables WHERE location = :l OR starts_with(location, :l || '/') "
    "OR starts_with(:l, rtrim(location, '/') || '/')"
)


def _timed(rounds: int, fn: Callable[[int], object]) -> dict[str, float]:
    out = []
    for i in range(rounds):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    out.sort()
    return {
        "p50_ms": round(statistics.median(out), 3),
        "p99_ms": round(out[min(len(out) - 1, int(len(out) * 0.99))], 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"tables": args.tables, "rounds": args.rounds}
    with scratch_database(args.url) as url:
        engine = make_engine(url)
        try:
            registry = Registry(engine)
            for d in range(100):
                registry.create_database(f"db{d}")
            rows = []
            for i in range(args.tables):
                location = f"{WAREHOUSE}/db{i % 100}.db/t{i}"
                rows.append({"d": f"db{i % 100}", "n": f"t{i}", "l": location, "k": location_key(location)})
            with engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO paimon_tables (catalog_key, database_name, table_name, location, "
                        "location_key, table_uuid, schema_id) VALUES ('jdbc', :d, :n, :l, :k, "
                        "gen_random_uuid(), 0)"
                    ),
                    rows,
                )
                conn.execute(text("ANALYZE paimon_tables"))

            def free(i: int) -> None:
                assert not registry.table_rows_overlapping(f"{WAREHOUSE}/db7.db/new{i}", warehouse=WAREHOUSE)

            def spelled(i: int) -> None:
                assert registry.table_rows_overlapping(f"{WAREHOUSE}//db7.db/./t7/", warehouse=WAREHOUSE)

            def database_dir(i: int) -> None:
                found = registry.table_rows_overlapping(f"{WAREHOUSE}/db7.db", warehouse=WAREHOUSE)
                assert len(found) == args.tables // 100

            def create_and_drop(i: int) -> None:
                registry.create_table_row("db7", f"n{i}", f"{WAREHOUSE}/db7.db/n{i}", uuid.uuid4(), 0)
                registry.drop_table_row("db7", f"n{i}")

            def old_check(i: int) -> None:
                with engine.connect() as conn:
                    conn.execute(text(OLD_CHECK), {"l": f"{WAREHOUSE}/db7.db/new{i}"}).all()

            for name, fn in [
                ("check, free", free),
                ("check, other spelling", spelled),
                ("check, database dir", database_dir),
                ("create + drop row", create_and_drop),
                ("before (raw strings)", old_check),
            ]:
                fn(0)  # warm up
                results[name] = _timed(args.rounds, fn)
            key = location_key(f"{WAREHOUSE}/db7.db/new")
            with engine.connect() as conn:
                plan = (
                    conn.execute(
                        text(
                            "EXPLAIN SELECT table_id FROM paimon_tables WHERE location_key = ANY(:a) OR "
                            "(location_key >= :p AND location_key < :u)"
                        ),
                        {
                            "a": [key, "/", "/bench", "/bench/warehouse", "/bench/warehouse/db7.db"],
                            "p": key + "/",
                            "u": key + "0",
                        },
                    )
                    .scalars()
                    .all()
                )
            results["plan"] = plan
        finally:
            engine.dispose()
    results["load"] = load()
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
