"""What the commit path's checks cost (issue: close the holes a hostile client finds): commit-messages
with 1, 100 and 10,000 files per commit, through ``paimon-meta serve`` from a base revision (before the
checks; a temporary ``git worktree``) and from this checkout, side by side in one run on one metastore
and warehouse.

Per size, each side gets its own fresh table (``bench_commit.py``'s shape: ``p`` int partition,
``bucket = 2``) and ``--commits`` commits (``--big-commits`` for 10,000 files), the sides alternating
commit by commit so a drift in the machine's load hits both alike. Each commit carries hand-built data
files (the commit path never reads data files) spread over ``--partitions`` partitions x 2 buckets, one
CommitMessage per (partition, bucket), sent by this checkout's remote committer (the client is the same
on both sides: only the server differs). Reported: the median latency per size and side, the ratio
this checkout / base, and the load average before and after.

With ``--rest-rounds`` > 0, also the REST commit (pypaimon 2.1.0, its own venv, through each server):
per round and side a fresh table and ``--rest-commits`` sequential one-row commits (its
``commit.commit(messages)`` timed), the sides' order flipped each round; reported: the median over all
rounds per side and the ratio. The server now also reads the snapshot's delta manifests (entry checks,
server-side statistics) and checks the base list's new manifests.

Then, in process, the checks alone on this checkout: ``MessageValidator.validate`` on the same messages
and the live-file check under the lock (``LiveFiles.live_of`` on a table of 100,000 live files, caught up
incrementally), as medians per commit and per file.

Usage::

    python bench/bench_validation.py --base REV [--url postgresql+psycopg://...] [--commits 30]
                                     [--big-commits 5] [--partitions 10] [--sizes 1,100,10000]
                                     [--rest-rounds 4] [--rest-commits 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_rest_service  # noqa: E402
from bench_commit import PYPAIMON_PYTHON, SCHEMA, TABLE_OPTIONS, load, scratch_database  # noqa: E402
from bench_service_ab import server, worktree  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.metastore import MetastoreCatalog  # noqa: E402
from paimon_meta.catalog.rest import connect_service  # noqa: E402
from paimon_meta.commit.validate import MessageValidator  # noqa: E402
from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.metastore.principals import Principals  # noqa: E402
from paimon_meta.model.commit_message import CommitMessage  # noqa: E402
from paimon_meta.model.manifest import FileKind, ManifestEntry  # noqa: E402
from paimon_meta.model.snapshot import CommitKind, Snapshot  # noqa: E402
from paimon_meta.table.containment import TableRoots  # noqa: E402
from paimon_meta.table.live_files import LiveFiles, file_key  # noqa: E402
from tests.commit.helpers import append_msg, data_file, make_table, partition  # noqa: E402

SIZES = (1, 100, 10_000)


def messages(files: int, partitions: int) -> list[CommitMessage]:
    """``files`` new files over ``partitions`` x 2 buckets, one message per (partition, bucket)."""
    slots = [(p, b) for p in range(partitions) for b in range(2)][:files]
    per, extra = divmod(files, len(slots))
    return [
        append_msg(p, b, *(data_file(rows=1) for _ in range(per + (i < extra))))
        for i, (p, b) in enumerate(slots)
    ]


def through_servers(
    args: argparse.Namespace,
) -> tuple[dict[int, dict[str, list[float]]], dict[str, list[float]]]:
    """(commit-messages latencies by size and side, REST commit latencies by side)."""
    base_label, head_label = f"base ({args.base})", "this checkout"
    out: dict[int, dict[str, list[float]]] = {}
    rest: dict[str, list[float]] = {}
    with (
        worktree(args.base) as base,
        scratch_database(args.url) as url,
        tempfile.TemporaryDirectory(prefix="bench-validation-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        warehouse = str(tmp / "warehouse")
        with paimon_meta.connect(url, warehouse) as catalog:
            principals = Principals(catalog.engine)
            token = principals.create("bench", created_by="bench")
            principals.grant("bench", Privilege.ADMIN)  # pypaimon creates its tables
            with (
                server(url, warehouse, tmp, base) as base_server,
                server(url, warehouse, tmp, REPO) as head_server,
            ):
                uris = {base_label: base_server.uri, head_label: head_server.uri}
                for size in args.sizes:
                    commits = args.big_commits if size >= 10_000 else args.commits
                    out[size] = one_size(
                        catalog, uris, token, size, commits=commits, partitions=args.partitions
                    )
                    print(f"  {size} files: done ({load()})", flush=True)
                if args.rest_rounds:
                    rest = rest_commits({base_label: base_server, head_label: head_server}, token, args, tmp)
    return out, rest


def rest_commits(
    sides: dict[str, bench_rest_service.Server], token: str, args: argparse.Namespace, tmp: Path
) -> dict[str, list[float]]:
    """pypaimon's ``commit.commit`` latencies through each server, rounds alternating (module doc)."""
    if not PYPAIMON_PYTHON.exists():
        raise SystemExit(f"pypaimon's venv is missing ({PYPAIMON_PYTHON}): run `make interop-venv`")
    script = bench_rest_service.write_script(tmp)
    times: dict[str, list[float]] = {label: [] for label in sides}
    for r in range(args.rest_rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for i, label in enumerate(order):
            catalog = bench_rest_service.rest_options(sides[label], token)
            table = f"db.rest_{r}_{i}"
            cfg = {"mode": "sequential", "catalog": catalog, "table": table, "commits": args.rest_commits}
            result = bench_rest_service.run_pypaimon(script, cfg, tmp)
            if result["errors"]:
                raise RuntimeError(f"pypaimon through {label}: {result['errors'][:3]}")
            times[label] += result["commit_ms"]
        print(f"  REST round {r + 1}: done ({load()})", flush=True)
    return times


def one_size(
    catalog: MetastoreCatalog,
    uris: dict[str, str],
    token: str,
    size: int,
    *,
    commits: int,
    partitions: int,
) -> dict[str, list[float]]:
    committers: dict[str, Any] = {}
    remotes = []
    try:
        for i, (label, uri) in enumerate(uris.items()):
            name = f"db.v{size}_{i}"
            catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
            remote = connect_service(uri, token)
            remotes.append(remote)
            table = remote.get_table(name)
            assert table.committer_factory is not None
            committers[label] = table.committer_factory(table, "bench")
        times: dict[str, list[float]] = {label: [] for label in committers}
        for i in range(commits):
            order = list(committers) if i % 2 == 0 else list(committers)[::-1]
            for label in order:
                batch = messages(size, partitions)
                t0 = time.perf_counter()
                committers[label].commit(batch, i)
                times[label].append((time.perf_counter() - t0) * 1000)
        return times
    finally:
        for remote in remotes:
            remote.close()


def checks_alone(args: argparse.Namespace) -> dict[int, tuple[float, float]]:
    """(validate ms, live-file check ms) per commit of each size, medians, this checkout."""
    with tempfile.TemporaryDirectory(prefix="bench-validation-") as tmp:
        _, path, schema = make_table(tmp)  # p int partition, 2 buckets: the shape the messages have
        validator = MessageValidator(schema, TableRoots.of(path, schema.options))
    live = LiveFiles()
    base = Snapshot(1, 0, "b", "d-1", "u", 1, CommitKind.APPEND, 0)
    existing = [
        ManifestEntry(FileKind.ADD, partition(i % 10), i % 2, 2, data_file(rows=1)) for i in range(100_000)
    ]
    live.live_of(base, [], delta=lambda s: [], everything=lambda s: existing, snapshot=lambda i: None)
    out: dict[int, tuple[float, float]] = {}
    for size in args.sizes:
        v_times, l_times = [], []
        for _ in range(args.commits):
            batch = messages(size, args.partitions)
            keys = [
                file_key(ManifestEntry(FileKind.ADD, m.partition, m.bucket, 2, f))
                for m in batch
                for f in m.data_increment.new_files
            ]
            t0 = time.perf_counter()
            validator.validate(batch)
            t1 = time.perf_counter()
            found = live.live_of(
                base, keys, delta=lambda s: [], everything=lambda s: [], snapshot=lambda i: None
            )
            t2 = time.perf_counter()
            assert not found
            v_times.append((t1 - t0) * 1000)
            l_times.append((t2 - t1) * 1000)
        out[size] = (statistics.median(v_times), statistics.median(l_times))
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--base", required=True, help="the revision before the checks (git rev)")
    parser.add_argument("--commits", type=int, default=30, help="commits per side of 1 and 100 files")
    parser.add_argument("--big-commits", type=int, default=5, help="commits per side of 10,000 files")
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--rest-rounds", type=int, default=0, help="pypaimon REST commit rounds (0: none)")
    parser.add_argument("--rest-commits", type=int, default=50, help="pypaimon commits per round and side")
    parser.add_argument(
        "--sizes", type=lambda t: [int(x) for x in t.split(",")], default=list(SIZES), help="files per commit"
    )
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    if min(args.commits, args.big_commits, args.partitions, *args.sizes) < 1:
        parser.error("--commits, --big-commits, --partitions and --sizes must be >= 1")
    print(f"before: {load()}", flush=True)
    served, rest = through_servers(args)
    alone = checks_alone(args)
    print(f"after: {load()}")
    print(
        "\n| files per commit | base median | this checkout median | ratio "
        "| checks alone: validate | live-file check |"
    )
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        (base_label, base_times), (_, head_times) = served[size].items()
        b, h = statistics.median(base_times), statistics.median(head_times)
        v, lv = alone[size]
        print(
            f"| {size:,} | {b:.2f} ms | {h:.2f} ms | {h / b:.3f}x "
            f"| {v:.3f} ms ({v * 1000 / size:.1f} us/file) | {lv:.3f} ms |"
        )
    print(
        f"\n(base = {base_label}; {args.commits} commits per side of 1 and 100 files, "
        f"{args.big_commits} of 10,000)"
    )
    if rest:
        (base_name, base_rest), (_, head_rest) = rest.items()
        b, h = statistics.median(base_rest), statistics.median(head_rest)
        print(
            f"\n| REST commit (pypaimon, one row) | {b:.2f} ms | {h:.2f} ms | {h / b:.3f}x |"
            f" ({args.rest_rounds} rounds x {args.rest_commits} commits per side; base = {base_name})"
        )
    return {"served": served, "alone": alone, "rest": rest}


if __name__ == "__main__":
    main()
