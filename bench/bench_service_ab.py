"""The control plane before and after a change, side by side in one run: ``paimon-meta serve`` from a
base revision (a temporary ``git worktree``) against this checkout's, on one metastore and warehouse.

* grouped: ``--clients`` clients x ``--commits`` commits through one replica with group commit (the
  ``service, 1 replica`` mode of ``bench_service.py``), base and this checkout alternating for
  ``--rounds`` rounds (the order flipped each round); each round checked for exactly-once;
* uncontended: ``--sequential`` commits per side, one after the other, in process (this checkout) and
  through each server, alternating in blocks of 10 so load drifts hit every side alike; also in process in
  a child process per revision (``in-process, base`` and ``in-process, this checkout``: the library's own
  commit path of each revision, driven block by block over a pipe, through the public API only).

Also reported per grouped round: metastore transactions per commit (``xact_commit`` of the scratch
database in ``pg_stat_database``, read once the round's server stopped, so its sessions have reported
theirs; read-only statements outside a transaction count as one each, and the round's exactly-once
check adds a few), a count that does not depend on the machine's load.

The clients and the parent's in-process side run this checkout's code; the servers and the two in-process
children run their revision's.

Usage::

    python bench/bench_service_ab.py --base REV [--url postgresql+psycopg://...] [--rounds 3]
                                     [--clients 16] [--commits 50] [--sequential 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_rest_service  # noqa: E402
from bench_commit import SCHEMA, TABLE_OPTIONS, load, scratch_database  # noqa: E402
from bench_service import Target, run_clients  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.metastore import MetastoreCatalog  # noqa: E402
from paimon_meta.catalog.rest import connect_service  # noqa: E402
from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.metastore.principals import Principals  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402


def serve_command(source: Path) -> tuple[str, str, str, str]:
    """``paimon-meta serve`` with ``paimon_meta`` imported from the source tree ``source``."""
    code = (
        f"import sys; sys.path.insert(0, {str(source)!r}); from paimon_meta.cli import main; sys.exit(main())"
    )
    return (sys.executable, "-c", code, "serve")


@contextmanager
def worktree(revision: str) -> Iterator[Path]:
    """``revision`` checked out in a temporary worktree (removed at the end)."""
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        path = Path(tmp) / "base"
        git = ["git", "-C", str(REPO), "worktree"]
        subprocess.run([*git, "add", "--detach", "-q", str(path), revision], check=True)
        try:
            yield path
        finally:
            subprocess.run([*git, "remove", "--force", str(path)], check=False)


@contextmanager
def server(url: str, warehouse: str, log_dir: Path, source: Path) -> Iterator[bench_rest_service.Server]:
    bench_rest_service.SERVE = serve_command(source)
    with bench_rest_service.servers(url, warehouse, log_dir, 1) as (started,):
        yield started


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--base", required=True, help="the revision to compare with (git rev)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--commits", type=int, default=50, help="commits per client")
    parser.add_argument("--sequential", type=int, default=300, help="commits per side, uncontended")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    if min(args.rounds, args.clients, args.commits, args.sequential) < 1:
        parser.error("--rounds, --clients, --commits and --sequential must be >= 1")
    print(f"before: {load()}", flush=True)
    base_label, head_label = f"base ({args.base})", "this checkout"
    rates: dict[str, list[float]] = {base_label: [], head_label: []}
    xacts: dict[str, list[float]] = {base_label: [], head_label: []}
    times: dict[str, list[float]] = {}
    with (
        worktree(args.base) as base,
        scratch_database(args.url) as url,
        tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        warehouse = str(tmp / "warehouse")
        sources = {base_label: base, head_label: REPO}
        with paimon_meta.connect(url, warehouse) as catalog:
            principals = Principals(catalog.engine)
            token = principals.create("bench", created_by="bench")
            principals.grant("bench", Privilege.WRITE)
            tables = iter(range(1_000_000))
            for r in range(args.rounds):
                order = list(sources) if r % 2 == 0 else list(sources)[::-1]
                for label in order:
                    name = f"db.t{next(tables)}"
                    catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
                    before = transactions(catalog)
                    with server(url, warehouse, tmp, sources[label]) as srv:
                        targets = [Target(name, args.commits, service=srv.uri, token=token)] * args.clients
                        run = run_clients(catalog, targets, label)
                    rates[label].append(run["rate"])
                    xacts[label].append((transactions(catalog) - before) / run["commits"])
            with (
                server(url, warehouse, tmp, base) as base_server,
                server(url, warehouse, tmp, REPO) as head_server,
            ):
                times = sequential(
                    catalog,
                    {base_label: base_server.uri, head_label: head_server.uri},
                    {f"in-process, {base_label}": base, f"in-process, {head_label}": REPO},
                    url=url,
                    token=token,
                    args=args,
                )
    print(f"after: {load()}")
    local = statistics.median(times["in-process"][10:])
    print(
        "\n| server | grouped commits/s (median; each round) | metastore transactions per commit "
        "| uncontended median | vs in-process |"
    )
    print("|---|---|---|---|---|")
    print(f"| (in-process) | | | {local:.2f} ms | 1.00x |")
    for label in (f"in-process, {base_label}", f"in-process, {head_label}"):
        median = statistics.median(times[label][10:])
        print(f"| ({label}, child process) | | | {median:.2f} ms | {median / local:.2f}x |")
    for label, rounds in rates.items():
        median = statistics.median(times[label][10:])
        each = ", ".join(f"{x:.1f}" for x in rounds)
        print(
            f"| {label} | {statistics.median(rounds):.1f} ({each}) | {statistics.median(xacts[label]):.2f} "
            f"| {median:.2f} ms | {median / local:.2f}x (+{median - local:.2f} ms) |"
        )
    return {"rates": rates, "transactions": xacts, "sequential": times}


CHILD = """
import json, sys, time
sys.path.insert(0, {source!r})
import paimon_meta
from tests.commit.helpers import append_msg, data_file
assert paimon_meta.__file__.startswith({source!r}), paimon_meta.__file__
catalog = paimon_meta.connect({url!r}, {warehouse!r})
committer = catalog.message_committer({name!r}, "seq")
for line in sys.stdin:
    start, stop = map(int, line.split())
    out = []
    for i in range(start, stop):
        msg = append_msg(i % 2, i % 2, data_file(rows=1))
        t0 = time.perf_counter()
        committer.commit([msg], i)
        out.append((time.perf_counter() - t0) * 1000)
    print(json.dumps(out), flush=True)
"""


class ChildCommitter:
    """The library's in-process commit path of the revision at ``source``, in a child process: each
    ``block(start, stop)`` commits ``stop - start`` appends there and returns their latencies (ms)."""

    def __init__(self, source: Path, url: str, warehouse: str, name: str) -> None:
        code = CHILD.format(source=str(source), url=url, warehouse=warehouse, name=name)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=source
        )

    def block(self, start: int, stop: int) -> list[float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{start} {stop}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the in-process child exited with {self.proc.wait()}")
        return [float(x) for x in json.loads(line)]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def transactions(catalog: MetastoreCatalog) -> int:
    """Transactions committed in the catalog's database so far, as the statistics report them (after a
    second: sessions that just ended report theirs as they exit)."""
    time.sleep(1)
    with catalog.engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        return int(
            conn.execute(
                text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            ).scalar_one()
        )


def sequential(
    catalog: MetastoreCatalog,
    uris: dict[str, str],
    children: dict[str, Path],
    *,
    url: str,
    token: str,
    args: argparse.Namespace,
) -> dict[str, list[float]]:
    catalog.create_table("db.seq_local", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    sides: dict[str, Any] = {"in-process": catalog.message_committer("db.seq_local", "seq")}
    remotes = []
    spawned: dict[str, ChildCommitter] = {}
    try:
        for i, (label, source) in enumerate(children.items()):
            name = f"db.seq_child{i}"
            catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
            spawned[label] = ChildCommitter(source, url, catalog.warehouse, name)
        for i, (label, uri) in enumerate(uris.items()):
            name = f"db.seq_http{i}"
            catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
            remote = connect_service(uri, token)
            remotes.append(remote)
            table = remote.get_table(name)
            assert table.committer_factory is not None
            sides[label] = table.committer_factory(table, "seq")
        times: dict[str, list[float]] = {k: [] for k in [*sides, *spawned]}
        for block in range(0, args.sequential, 10):
            for label, child in spawned.items():
                times[label].extend(child.block(block, min(block + 10, args.sequential)))
            for side, committer in sides.items():
                for i in range(block, min(block + 10, args.sequential)):
                    msg = append_msg(i % 2, i % 2, data_file(rows=1))
                    t0 = time.perf_counter()
                    committer.commit([msg], i)
                    times[side].append((time.perf_counter() - t0) * 1000)
        return times
    finally:
        for remote in remotes:
            remote.close()
        for child in spawned.values():
            child.close()


if __name__ == "__main__":
    main()
