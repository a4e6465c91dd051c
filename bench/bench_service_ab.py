"""The control plane before and after a change, side by side in one run: ``paimon-meta serve`` from a
base revision (a temporary ``git worktree``) against this checkout's, on one metastore and warehouse.

Where the two revisions' migration heads differ (or with ``--separate-metastores``), one metastore
cannot serve both (each revision's code expects its own schema), so each side gets its own: a scratch
database migrated by that side's own code and a warehouse of its own. The base's setup (its principal
and token, its tables, each round's exactly-once check) is then done by a child process of the base
revision (``Agent``), this checkout's by this process; the output says which it was. The sides still
alternate round by round on the one machine and Postgres server.

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
children run their revision's (and so does the base's setup, on separate metastores).

Usage::

    python bench/bench_service_ab.py --base REV [--url postgresql+psycopg://...] [--rounds 3]
                                     [--clients 16] [--commits 50] [--sequential 300]
                                     [--separate-metastores] [--head-serve-arg ARG ...]
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
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import make_url, text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_rest_service  # noqa: E402
from bench_commit import SCHEMA, TABLE_OPTIONS, load, scratch_database  # noqa: E402
from bench_service import Target, run_clients, verify_round  # noqa: E402

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
def server(
    url: str, warehouse: str, log_dir: Path, source: Path, extra: Sequence[str] = ()
) -> Iterator[bench_rest_service.Server]:
    bench_rest_service.SERVE = serve_command(source)
    with bench_rest_service.servers(url, warehouse, log_dir, 1, extra=extra) as (started,):
        yield started


def child_env() -> dict[str, str]:
    """The environment of a child running another source tree: no override of where migrations are."""
    return {k: v for k, v in os.environ.items() if k != "PAIMON_META_MIGRATIONS"}


def migration_heads(source: Path) -> list[str]:
    """The migration head(s) of the source tree ``source``, as its own code finds them."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from paimon_meta.db.migrate import heads; "
        "print(json.dumps(sorted(heads())))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(source)],
        cwd=source,
        env=child_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"cannot read the migration heads of {source}:\n{out.stderr[-2000:]}")
    return [str(h) for h in json.loads(out.stdout.splitlines()[-1])]


class Local:
    """A side's setup through this checkout's library: the parent's own catalog."""

    def __init__(self, catalog: MetastoreCatalog) -> None:
        self.catalog = catalog
        self._token: str | None = None

    def token(self) -> str:
        if self._token is None:  # one principal per metastore, whichever sides share it
            principals = Principals(self.catalog.engine)
            self._token = principals.create("bench", created_by="bench")
            principals.grant("bench", Privilege.WRITE)
        return self._token

    def create_table(self, name: str) -> None:
        self.catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)

    def verify(self, table: str, acked: dict[tuple[str, int], str]) -> int:
        return verify_round(self.catalog, table, acked)


#: A side's setup through another revision's code (``Agent``): argv[1] is its JSON config. It migrates its
#: database with its own ``upgrade`` first, then answers one JSON request a line; replies are the lines
#: that start with "AGENT " (anything else the library prints is not a reply).
AGENT = r"""
import json, sys, traceback
cfg = json.loads(sys.argv[1])
sys.path[:0] = [cfg["source"], cfg["source"] + "/bench"]
import paimon_meta
assert paimon_meta.__file__.startswith(cfg["source"]), paimon_meta.__file__
from paimon_meta.db.migrate import upgrade
upgrade(cfg["url"])
from sqlalchemy import text
from bench_commit import SCHEMA, TABLE_OPTIONS
from paimon_meta.db.models import Privilege
from paimon_meta.metastore.principals import Principals
from tests.integration.history import check_exactly_once, read_history
catalog = paimon_meta.connect(cfg["url"], cfg["warehouse"])

def token():
    principals = Principals(catalog.engine)
    created = principals.create("bench", created_by="bench")
    principals.grant("bench", Privilege.WRITE)
    return created

def create_table(name):
    catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)

def verify(table, acked):
    check_exactly_once(read_history(catalog, table), {(user, i): f for user, i, f in acked})
    db, name = table.split(".")
    with catalog.engine.connect() as conn:
        return int(conn.execute(
            text("SELECT count(*) FROM paimon_lock_events WHERE lock_id = :l AND event_type = 'acquired'"),
            {"l": catalog.registry.lock_id(db, name)},
        ).scalar_one())

OPS = {"token": token, "create_table": create_table, "verify": verify}
print("AGENT " + json.dumps({"result": "ready"}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    try:
        reply = {"result": OPS[request["op"]](*request["args"])}
    except BaseException:
        reply = {"error": traceback.format_exc()}
    print("AGENT " + json.dumps(reply), flush=True)
catalog.close()
"""


class Agent:
    """A side's setup through the revision at ``source``, in a child process of that revision, on its own
    database ``url`` (migrated by that revision's code as the child starts) and warehouse."""

    def __init__(self, source: Path, url: str, warehouse: str) -> None:
        config = json.dumps({"source": str(source), "url": url, "warehouse": warehouse})
        self.proc = subprocess.Popen(
            [sys.executable, "-c", AGENT, config],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=source,
            env=child_env(),
        )
        self._reply()  # "ready": the database is migrated

    def _reply(self) -> Any:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("AGENT "):
                reply = json.loads(line[len("AGENT ") :])
                if "error" in reply:
                    raise RuntimeError(f"the base revision's setup process failed:\n{reply['error']}")
                return reply["result"]
        raise RuntimeError(f"the base revision's setup process exited with {self.proc.wait()}")

    def _call(self, op: str, *args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def token(self) -> str:
        return str(self._call("token"))

    def create_table(self, name: str) -> None:
        self._call("create_table", name)

    def verify(self, table: str, acked: dict[tuple[str, int], str]) -> int:
        return int(self._call("verify", table, [[user, i, f] for (user, i), f in acked.items()]))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Side:
    """One revision's side: its source tree, the metastore and warehouse its server and in-process child
    use, what sets them up (``Local`` or ``Agent``) and the token its clients send."""

    source: Path
    url: str
    warehouse: str
    setup: Local | Agent
    token: str
    serve_args: Sequence[str] = ()

    @property
    def database(self) -> str:
        return str(make_url(self.url).database)


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
    parser.add_argument(
        "--separate-metastores",
        action="store_true",
        help="each side its own metastore even if the migration heads match (they must where they differ)",
    )
    parser.add_argument(
        "--head-serve-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument to this checkout's `serve` only (repeat for each), e.g. "
        "--head-serve-arg=--maintenance-workers --head-serve-arg=0 (an option the base may not know)",
    )
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    if min(args.rounds, args.clients, args.commits, args.sequential) < 1:
        parser.error("--rounds, --clients, --commits and --sequential must be >= 1")
    print(f"before: {load()}", flush=True)
    base_label, head_label = f"base ({args.base})", "this checkout"
    rates: dict[str, list[float]] = {base_label: [], head_label: []}
    xacts: dict[str, list[float]] = {base_label: [], head_label: []}
    with ExitStack() as stack:
        base = stack.enter_context(worktree(args.base))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ab-")))
        base_heads, head_heads = migration_heads(base), migration_heads(REPO)
        separate = args.separate_metastores or base_heads != head_heads
        url = stack.enter_context(scratch_database(args.url))
        warehouse = str(tmp / "warehouse")
        catalog = stack.enter_context(paimon_meta.connect(url, warehouse))
        local = Local(catalog)
        head_side = Side(REPO, url, warehouse, local, local.token(), args.head_serve_arg)
        if separate:
            base_url = stack.enter_context(scratch_database(args.url, migrate=False))
            base_warehouse = str(tmp / "warehouse-base")
            agent = stack.enter_context(closing(Agent(base, base_url, base_warehouse)))
            base_side = Side(base, base_url, base_warehouse, agent, agent.token())
            metastores = (
                f"metastores: SEPARATE, one per side (migration heads: base {', '.join(base_heads)}, this "
                f"checkout {', '.join(head_heads)}): each side its own scratch database, migrated by its "
                "own code, and its own warehouse, on the same Postgres server; the base's setup and "
                "exactly-once checks by a child process of the base revision"
            )
        else:
            base_side = Side(base, url, warehouse, local, local.token())
            metastores = (
                f"metastore: one, shared by both sides (migration head {', '.join(head_heads)}), "
                "and one warehouse"
            )
        if args.head_serve_arg:
            metastores += f"; this checkout's server run with {' '.join(args.head_serve_arg)}"
        print(metastores, flush=True)
        sides = {base_label: base_side, head_label: head_side}
        tables = iter(range(1_000_000))
        for r in range(args.rounds):
            order = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for label in order:
                side = sides[label]
                name = f"db.t{next(tables)}"
                side.setup.create_table(name)
                before = transactions(catalog, side.database)
                with server(side.url, side.warehouse, tmp, side.source, side.serve_args) as srv:
                    targets = [Target(name, args.commits, service=srv.uri, token=side.token)] * args.clients
                    run = run_clients(None, targets, label, verify=side.setup.verify)
                rates[label].append(run["rate"])
                xacts[label].append((transactions(catalog, side.database) - before) / run["commits"])
        with (
            server(base_side.url, base_side.warehouse, tmp, base) as base_server,
            server(head_side.url, head_side.warehouse, tmp, REPO, head_side.serve_args) as head_server,
        ):
            times = sequential(
                catalog, sides, {base_label: base_server.uri, head_label: head_server.uri}, args=args
            )
    print(f"after: {load()}")
    local_median = statistics.median(times["in-process"][10:])
    print(f"\n({metastores})")
    print(
        "\n| server | grouped commits/s (median; each round) | metastore transactions per commit "
        "| uncontended median | vs in-process |"
    )
    print("|---|---|---|---|---|")
    print(f"| (in-process) | | | {local_median:.2f} ms | 1.00x |")
    for label in (f"in-process, {base_label}", f"in-process, {head_label}"):
        median = statistics.median(times[label][10:])
        print(f"| ({label}, child process) | | | {median:.2f} ms | {median / local_median:.2f}x |")
    for label, rounds in rates.items():
        median = statistics.median(times[label][10:])
        each = ", ".join(f"{x:.1f}" for x in rounds)
        print(
            f"| {label} | {statistics.median(rounds):.1f} ({each}) | {statistics.median(xacts[label]):.2f} "
            f"| {median:.2f} ms | {median / local_median:.2f}x (+{median - local_median:.2f} ms) |"
        )
    return {"rates": rates, "transactions": xacts, "sequential": times, "separate_metastores": separate}


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
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=source,
            env=child_env(),
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


def transactions(catalog: MetastoreCatalog, database: str) -> int:
    """Transactions committed in ``database`` (on the catalog's server) so far, as the statistics report
    them (after a second: sessions that just ended report theirs as they exit)."""
    time.sleep(1)
    with catalog.engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        return int(
            conn.execute(
                text("SELECT xact_commit FROM pg_stat_database WHERE datname = :d"), {"d": database}
            ).scalar_one()
        )


def sequential(
    catalog: MetastoreCatalog, sides: dict[str, Side], uris: dict[str, str], *, args: argparse.Namespace
) -> dict[str, list[float]]:
    """In process (the parent, on this checkout's metastore), in each side's child and through each
    side's server, on each side's metastore: blocks of 10 commits per side in turn."""
    catalog.create_table("db.seq_local", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    committers: dict[str, Any] = {"in-process": catalog.message_committer("db.seq_local", "seq")}
    remotes = []
    spawned: dict[str, ChildCommitter] = {}
    try:
        for i, (label, side) in enumerate(sides.items()):
            name = f"db.seq_child{i}"
            side.setup.create_table(name)
            spawned[f"in-process, {label}"] = ChildCommitter(side.source, side.url, side.warehouse, name)
        for i, (label, side) in enumerate(sides.items()):
            name = f"db.seq_http{i}"
            side.setup.create_table(name)
            remote = connect_service(uris[label], side.token)
            remotes.append(remote)
            table = remote.get_table(name)
            assert table.committer_factory is not None
            committers[label] = table.committer_factory(table, "seq")
        times: dict[str, list[float]] = {k: [] for k in [*committers, *spawned]}
        for block in range(0, args.sequential, 10):
            for label, child in spawned.items():
                times[label].extend(child.block(block, min(block + 10, args.sequential)))
            for label, committer in committers.items():
                for i in range(block, min(block + 10, args.sequential)):
                    msg = append_msg(i % 2, i % 2, data_file(rows=1))
                    t0 = time.perf_counter()
                    committer.commit([msg], i)
                    times[label].append((time.perf_counter() - t0) * 1000)
        return times
    finally:
        for remote in remotes:
            remote.close()
        for child in spawned.values():
            child.close()


if __name__ == "__main__":
    main()
