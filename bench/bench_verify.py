"""Benchmark: ``paimon-meta verify`` of a whole catalog at ``--tables`` tables (issue 40, "Measure").

Each table gets ``--commits`` small commits through the metastore (so each has that many snapshots,
manifest lists and manifests, and the event rows that recorded them); then ``verify`` runs ``--repeat``
times over the catalog, without and with ``--data-files``, on a local warehouse. Reported: the build
time, each verify's wall time (median of the repeats), what it checked, and the load average. Every run
must be clean (a finding is a bug of the benchmark or of verify: the script fails).

Usage::

    python bench/bench_verify.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                 [--tables 1000] [--commits 3] [--repeat 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import load, scratch_database  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.ops.verify import verify  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {
        "tables": args.tables,
        "commits_per_table": args.commits,
        "repeat": args.repeat,
    }
    with tempfile.TemporaryDirectory() as tmp, scratch_database(args.url) as url:
        catalog = paimon_meta.connect(url, str(Path(tmp) / "warehouse"))
        try:
            t0 = time.perf_counter()
            for i in range(args.tables):
                table = catalog.create_table(f"db{i % 10}.t{i:05d}", SCHEMA)
                for c in range(args.commits):
                    builder = table.new_batch_write_builder()
                    write = builder.new_write()
                    write.write_arrow(pa.table({"k": [c], "v": [f"v{c}"]}, schema=SCHEMA))
                    builder.new_commit().commit(write.prepare_commit())
            results["build_s"] = round(time.perf_counter() - t0, 1)
            for data_files in (False, True):
                times = []
                for _ in range(args.repeat):
                    report = verify(catalog, data_files=data_files)
                    if not report.clean:
                        print(json.dumps(report.to_dict()["findings"][:5], indent=2), file=sys.stderr)
                        raise SystemExit("verify found problems in the benchmark's own catalog")
                    times.append(report.elapsed_seconds)
                results["verify_data_files" if data_files else "verify"] = {
                    "median_s": round(statistics.median(times), 2),
                    "runs_s": times,
                    "tables": report.tables,
                    "snapshots": report.snapshots,
                    "manifests": report.manifests,
                    "data_files_checked": report.data_files_checked,
                    "files_listed": report.files_listed,
                }
        finally:
            catalog.close()
    results["load"] = load()
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
