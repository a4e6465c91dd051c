"""Benchmark: the read overhead of a row filter plus a column mask in our reader vs none (issue 36).

One primary-key table (``--rows`` rows, ``--buckets`` buckets, ``query-auth.enabled``) on local disk,
written once. Each round reads it in full through the same read path four ways, in an order shuffled
per round, so the load of the machine falls on all of them alike:

* ``none``: no rules (what a table without ``query-auth.enabled`` reads);
* ``unrestricted``: rules asked and empty (a principal without policies);
* ``filter only``, ``mask only``: each alone;
* ``filter+mask``: ``region = 'eu'`` (keeps a third of the rows) and ``email`` masked as
  ``CONCAT_WS('@', '***', region)`` (computed from the raw row);
* ``filter+mask, projected``: the same rules, selecting ``id, email`` only (the read widens to
  ``region`` for the filter and the mask, then projects back).

The rules are the table's ``query_auth`` (``paimon_meta.table.read.query_auth``), answered in process:
what is measured is applying them (``QueryRules`` over Arrow), not the ``/auth`` round trip, which is one
HTTP request per plan. Reported: the median seconds of each way over ``--rounds`` rounds, the ratio to
``none`` (each round's ratio, then the median), and the load average before and after.

Usage::

    python bench/bench_query_auth_read.py [--rows 1000000] [--buckets 4] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from paimon_meta.governance.policies import QueryRules  # noqa: E402
from paimon_meta.model.schema import TableSchema  # noqa: E402
from paimon_meta.table.read.query_auth import RowRules  # noqa: E402
from paimon_meta.table.table import FileStoreTable  # noqa: E402

TYPES = {"id": "INT NOT NULL", "region": "STRING", "name": "STRING", "email": "STRING"}
INDEX = {n: i for i, n in enumerate(TYPES)}


def ref(name: str) -> dict[str, object]:
    return {"index": INDEX[name], "name": name, "type": TYPES[name]}


EU = json.dumps(
    {"kind": "LEAF", "transform": {"name": "FIELD_REF", "fieldRef": ref("region")}, "function": "EQUAL",
     "literals": ["eu"]}
)  # fmt: skip
MASK = json.dumps({"name": "CONCAT_WS", "inputs": ["@", "***", ref("region")]})


def build(path: str, rows: int, buckets: int) -> FileStoreTable:
    """The table at ``path``, written once (one commit, storage-guarded)."""
    from paimon_meta.catalog.storage import storage_committer
    from paimon_meta.io import get_file_io
    from paimon_meta.model.arrow import from_arrow_schema
    from paimon_meta.table.snapshots import SchemaManager

    arrow = pa.schema(
        [pa.field("id", pa.int32(), nullable=False), ("region", pa.string()), ("name", pa.string()),
         ("email", pa.string())]
    )  # fmt: skip
    fields, _ = from_arrow_schema(arrow)
    options = {"bucket": str(buckets), "query-auth.enabled": "true"}
    schema = TableSchema(0, tuple(fields), len(fields) - 1, (), ("id",), options)
    file_io = get_file_io(path)
    SchemaManager(file_io, path).commit_new_schema(schema)
    table = FileStoreTable(file_io, path, schema)
    table.committer_factory = storage_committer
    regions = ["eu", "us", "apac"]
    ids = list(range(rows))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "region": [regions[i % 3] for i in ids],
            "name": [f"name-{i}" for i in ids],
            "email": [f"user{i}@example.com" for i in ids],
        },
        schema=arrow,
    )
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(data)
    wb.new_commit().commit(w.prepare_commit())
    return FileStoreTable(file_io, path, schema)


def read(table: FileStoreTable, rules: RowRules | None, columns: Sequence[str] | None) -> tuple[float, int]:
    table.query_auth = None if rules is None else (lambda schema, select: rules)
    started = time.perf_counter()
    builder = table.new_read_builder()
    if columns is not None:
        builder = builder.with_projection(columns)
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).num_rows
    return time.perf_counter() - started, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        table = build(str(Path(tmp) / "db.db" / "t"), args.rows, args.buckets)
        schema: TableSchema = table.schema
        restricted = QueryRules.parse([EU], {"email": MASK}, schema.fields)
        ways: dict[str, tuple[RowRules | None, list[str] | None]] = {
            "none": (None, None),
            "unrestricted": (QueryRules(), None),
            "filter only": (QueryRules.parse([EU], {}, schema.fields), None),
            "mask only": (QueryRules.parse([], {"email": MASK}, schema.fields), None),
            "filter+mask": (restricted, None),
            "filter+mask, projected": (restricted, ["id", "email"]),
        }
        read(table, None, None)  # warm the caches and the page cache
        times: dict[str, list[float]] = {w: [] for w in ways}
        counts: dict[str, int] = {}
        for _ in range(args.rounds):
            order = list(ways)
            random.shuffle(order)
            for way in order:
                rules, columns = ways[way]
                seconds, counts[way] = read(table, rules, columns)
                times[way].append(seconds)
    load_after = os.getloadavg()
    print(f"rows {args.rows}, buckets {args.buckets}, rounds {args.rounds}")
    before, after = (f"{a[0]:.2f} {a[1]:.2f}" for a in (load_before, load_after))
    print(f"load average (1, 5 min) before {before}, after {after}")
    base = times["none"]
    print(f"{'read':<26}{'rows out':>10}{'median s':>11}{'ratio to none':>15}")
    for way, samples in times.items():
        ratio = statistics.median(s / b for s, b in zip(samples, base, strict=True))
        print(f"{way:<26}{counts[way]:>10}{statistics.median(samples):>11.3f}{ratio:>15.2f}")


if __name__ == "__main__":
    main()
