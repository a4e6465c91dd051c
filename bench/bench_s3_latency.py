"""Commits on S3 with network latency: S3 requests under the table lock, commit latency and one table's
throughput, per round-trip time (issue 39).

How: moto's S3 server (``ThreadedMotoServer``) and a user-space delay proxy (asyncio) in front of it,
each in its own process by default (``--s3 process``: they do not share the writers' interpreter and
GIL), or both in this process as threads (``--s3 thread``, the first version of this bench; ``--s3 both``
runs every RTT both ways, one after the other). The proxy delays every chunk, in each direction, by
RTT/2 on a connection that stays open (botocore keeps its connections alive), so each request/response
exchange costs one RTT, as a network would (this kernel has no netem). The catalog talks to S3 through
the proxy; Postgres is local (not delayed). A WSGI middleware logs each request's arrival and answer
(``time.monotonic()``: one clock for every process of the machine, Linux's ``CLOCK_MONOTONIC``) and the
``Expect`` header, in memory or, out of process, as a JSON line per request in a file this process
reads; the bench marks each lock hold of this process (``MetastoreLock.acquire_on`` returned ..
``LockLease.confirm_release``), so the requests inside a hold are counted exactly.

The throughput phases also report the CPU each process spent per commit (this process: the writers;
the S3 server's and the proxy's when out of process), and the load average after each RTT: the
writers' CPU per commit bounds one table's rate on this machine at 1000 / that (one interpreter: at
most one core for the Python work, whatever the RTT).

Per RTT (``--rtts``, default 0 10 20 50 ms):

* **lone hold**: sequential one-file commits (``table.committer_factory(table, user).commit``, the
  library path) after ``--skip`` warm-up ones; per commit the S3 requests that arrived inside its hold,
  and the RTTs they cost (a PUT with ``Expect: 100-continue`` waits for the interim answer: 2), the hold's
  duration and the ``commit()`` latency (p50);
* **group hold**: one hold of ``--group`` commits queued behind a first (all prepared beforehand): the
  S3 requests inside it and the RTTs they cost if sent one after the other;
* **one table, ungrouped**: ``--writers`` threads, each its own coordinator committing one-file commits
  back to back (each acquiring the lock) for ``--seconds``: commits/s;
* **one table, grouped**: the same writers through one ``GroupCommitter`` (``prepare`` on the writer's
  thread, then queued): commits/s and commits per hold.

Bounds: a hold of n sequential RTTs caps one table at 1000 / (n * RTT + hold's local work) commits/s.

Usage::

    python bench/bench_s3_latency.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--rtts 0 10 20 50] [--commits 25] [--skip 5] [--group 8] [--writers 8] [--seconds 5]
        [--s3 process|thread|both] [--stage-ahead on|off|both] [--json out.json]

The URL (else ``$PAIMON_META_TEST_DSN``) names a server to create a scratch database on (dropped at the
end). Runs unchanged against older revisions (it only uses their public API): copy it into their
checkout's ``bench/`` and run it there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, load, scratch_database  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.commit.metastore.group import GroupCommitter  # noqa: E402
from paimon_meta.metastore.lock import LockLease, MetastoreLock  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402

ACCESS_KEY = SECRET_KEY = "testing"


# ---- the delay proxy ---------------------------------------------------------------------------------


class DelayProxy:
    """TCP proxy on 127.0.0.1 delaying every chunk by ``one_way_s`` in each direction (order kept)."""

    def __init__(self, upstream: tuple[str, int], one_way_s: float) -> None:
        self.upstream = upstream
        self.one_way_s = one_way_s
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delay-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the delay proxy did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    break
                dst.write(data)
                try:
                    await dst.drain()
                except (ConnectionError, OSError):
                    break
            with suppress(ConnectionError, OSError, RuntimeError):
                dst.close()

        sender = asyncio.ensure_future(send())
        while True:
            try:
                data = await src.read(65536)
            except (ConnectionError, OSError):
                data = b""
            queue.put_nowait((loop.time() + self.one_way_s, data))
            if not data:
                break
        await sender

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


# ---- the S3 server with its request log --------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    at: float
    expect: bool
    done: float = 0.0  # when the server had answered


@dataclass
class Trace:
    """The S3 requests (in ``requests``, or in the JSON lines of ``log`` a server in another process
    writes, one per answered request) and this process's lock holds, since the last ``clear``."""

    requests: list[Request] = field(default_factory=list)
    holds: list[tuple[float, float]] = field(default_factory=list)
    _acquired: dict[int, float] = field(default_factory=dict)
    mutex: threading.Lock = field(default_factory=threading.Lock)
    log: Path | None = None
    _offset: int = 0

    def clear(self) -> None:
        with self.mutex:
            self.requests.clear()
            self.holds.clear()
            self._acquired.clear()
            if self.log is not None:
                # A request answered before now but logged after is older than any hold to come: the
                # holds' time windows leave it out.
                self._offset = self.log.stat().st_size

    def logged(self) -> list[Request]:
        """The requests since the last ``clear`` (out of process: those answered so far)."""
        with self.mutex:
            if self.log is None:
                return list(self.requests)
            offset = self._offset
        with self.log.open("rb") as f:
            f.seek(offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        return [Request(**json.loads(line)) for line in complete.splitlines()]

    def per_hold(self) -> list[list[Request]]:
        """The requests inside each hold, holds in order of their release."""
        requests = self.logged()
        with self.mutex:
            holds = list(self.holds)
        return [[r for r in requests if a <= r.at <= b] for a, b in holds]


def traced_app(app: Any, trace: Trace) -> Callable[..., Iterable[bytes]]:
    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        request = Request(
            str(environ.get("REQUEST_METHOD")),
            str(environ.get("PATH_INFO", "")),
            time.monotonic(),
            environ.get("HTTP_EXPECT") is not None,
        )
        with trace.mutex:
            trace.requests.append(request)
        result: Iterable[bytes] = app(environ, start_response)
        request.done = time.monotonic()
        return result

    return middleware


def logged_app(app: Any, log: Path) -> Callable[..., Iterable[bytes]]:
    """``traced_app`` for a server in another process: each request a JSON line of ``log`` once
    answered (``Request``'s fields; written and flushed before the answer is sent)."""
    out = log.open("a", buffering=1)
    mutex = threading.Lock()

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        at = time.monotonic()
        result: Iterable[bytes] = app(environ, start_response)
        line = json.dumps(
            {
                "method": str(environ.get("REQUEST_METHOD")),
                "path": str(environ.get("PATH_INFO", "")),
                "at": at,
                "expect": environ.get("HTTP_EXPECT") is not None,
                "done": time.monotonic(),
            }
        )
        with mutex:
            out.write(line + "\n")
        return result

    return middleware


def _moto_server(log: Path | None, trace: Trace | None) -> Any:
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    wsgi = server._server
    assert wsgi is not None
    wsgi.app = logged_app(wsgi.app, log) if log is not None else traced_app(wsgi.app, trace or Trace())
    return server


def _serve_s3(log: str, conn: Any) -> None:
    """The S3 server's process: its address sent on ``conn``, served until ``conn`` says stop."""
    server = _moto_server(Path(log), None)
    conn.send(server.get_host_and_port())
    conn.recv()
    server.stop()


def _serve_proxy(upstream: tuple[str, int], one_way_s: float, conn: Any) -> None:
    """The delay proxy's process: its port sent on ``conn``, served until ``conn`` says stop."""
    proxy = DelayProxy(upstream, one_way_s)
    conn.send(proxy.port)
    conn.recv()
    proxy.close()


class Child:
    """A process running ``target(*args, conn)``, which sends one value (its address) when ready and
    stops when it receives anything."""

    def __init__(self, target: Callable[..., None], *args: Any) -> None:
        context = multiprocessing.get_context("spawn")  # a clean interpreter, no copied threads
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=target, args=(*args, theirs), daemon=True)
        self.process.start()
        if not self.conn.poll(60):
            self.process.kill()
            raise RuntimeError(f"{target.__name__} did not start")
        self.ready: Any = self.conn.recv()

    def cpu_s(self) -> float:
        return process_cpu_s(self.process.pid)

    def stop(self) -> None:
        with suppress(OSError):
            self.conn.send("stop")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds process ``pid`` has spent (every thread), from ``/proc``."""
    fields = Path(f"/proc/{pid or os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class S3:
    """The S3 server's address, the proxy's port and, out of process, both children (for their CPU)."""

    upstream: tuple[str, int]
    proxy_port: int
    children: dict[str, Child] = field(default_factory=dict)

    def cpu_s(self) -> dict[str, float]:
        return {name: child.cpu_s() for name, child in self.children.items()}


@contextmanager
def s3_server(trace: Trace, rtt_ms: float, *, out_of_process: bool) -> Iterator[S3]:
    """moto's S3 server and the delay proxy in front of it: each in its own process, or both threads of
    this one. Out of process, ``trace.log`` is set to the server's request log."""
    if not out_of_process:
        server = _moto_server(None, trace)
        upstream = server.get_host_and_port()
        proxy = DelayProxy(upstream, rtt_ms / 2000)
        try:
            yield S3(upstream, proxy.port)
        finally:
            proxy.close()
            server.stop()
        return
    log = Path(f"/tmp/bench_s3_latency-{os.getpid()}-{uuid.uuid4().hex[:8]}.log")
    log.touch()
    trace.log = log
    children: dict[str, Child] = {}
    try:
        children["s3_server"] = Child(_serve_s3, str(log))
        upstream = tuple(children["s3_server"].ready)
        children["proxy"] = Child(_serve_proxy, upstream, rtt_ms / 2000)
        yield S3((upstream[0], upstream[1]), children["proxy"].ready, children)
    finally:
        for child in reversed(children.values()):
            child.stop()
        trace.log = None
        log.unlink(missing_ok=True)


@contextmanager
def traced_holds(trace: Trace) -> Iterator[None]:
    """Mark every lock hold of this process (acquired .. release committed) in ``trace``: per lease."""
    acquire_on, confirm_release = MetastoreLock.acquire_on, LockLease.confirm_release

    def acquired(self: MetastoreLock, *args: Any, **kwargs: Any) -> Any:
        lease, rows = acquire_on(self, *args, **kwargs)
        with trace.mutex:
            trace._acquired[id(lease)] = time.monotonic()
        return lease, rows

    def released(self: LockLease, deleted: bool) -> None:
        now = time.monotonic()
        with trace.mutex:
            began = trace._acquired.pop(id(self), None)
            if began is not None:
                trace.holds.append((began, now))
        confirm_release(self, deleted)

    MetastoreLock.acquire_on = acquired  # type: ignore[method-assign]
    LockLease.confirm_release = released  # type: ignore[method-assign]
    try:
        yield
    finally:
        MetastoreLock.acquire_on = acquire_on  # type: ignore[method-assign]
        LockLease.confirm_release = confirm_release  # type: ignore[method-assign]


# ---- measurements -------------------------------------------------------------------------------------


def p50(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def rtts_of(requests: list[Request]) -> int:
    """The round trips ``requests`` cost if sent one after the other (an ``Expect: 100-continue`` PUT
    waits for the interim answer first: 2)."""
    return sum(2 if r.expect and r.method in ("PUT", "POST") else 1 for r in requests)


def waves(requests: list[Request], rtt_ms: float) -> int | None:
    """The round trips ``requests`` actually cost in sequence: a request that arrived while an earlier
    one's answer could not yet have reached the client (less than RTT/2 after the server answered it)
    was sent concurrently with it. None at RTT 0 (nothing to tell them apart by)."""
    if rtt_ms <= 0:
        return None
    n, wave_end = 0, float("-inf")
    for r in sorted(requests, key=lambda r: r.at):
        if r.at > wave_end + rtt_ms / 2000:
            n += 2 if r.expect and r.method in ("PUT", "POST") else 1
            wave_end = r.done
        else:
            wave_end = max(wave_end, r.done)
    return n


def lone(catalog: Any, name: str, trace: Trace, commits: int, skip: int, *, rtt_ms: float) -> dict[str, Any]:
    table = catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    committer = table.committer_factory(table, f"lone-{uuid.uuid4().hex[:6]}")
    latencies: list[float] = []
    requests: list[int] = []
    rtts: list[int] = []
    held: list[float] = []
    kinds: dict[str, int] = {}
    for i in range(commits + skip):
        msg = append_msg(0, 0, data_file(rows=1))
        trace.clear()
        t0 = time.perf_counter()
        committer.commit([msg], i)
        elapsed = (time.perf_counter() - t0) * 1000
        if i < skip:
            continue
        latencies.append(elapsed)
        (hold,) = trace.per_hold()
        requests.append(len(hold))
        rtts.append(rtts_of(hold))
        a, b = trace.holds[0]
        held.append((b - a) * 1000)
        for r in hold:
            what = f"{r.method} {r.path.rsplit('/', 1)[-1].split('-')[0]}" + (" (Expect)" if r.expect else "")
            kinds[what] = kinds.get(what, 0) + 1
    return {
        "commit_p50_ms": p50(latencies),
        "hold_p50_ms": p50(held),
        "requests_under_lock": statistics.median(requests),
        "rtts_under_lock": statistics.median(rtts),
        "requests_by_kind": {k: round(v / commits, 2) for k, v in sorted(kinds.items())},
    }


def throughput(
    catalog: Any, name: str, trace: Trace, s3: S3, *, writers: int, seconds: float, grouped: bool
) -> dict[str, Any]:
    table = catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings) if grouped else None
    # warm-up: one commit per writer (table objects and connections made, snapshot 1 exists)
    coordinators = [catalog.message_committer(name, f"w{i}", table=table) for i in range(writers)]
    for _i, c in enumerate(coordinators):
        c.commit([append_msg(0, 0, data_file(rows=1))], 0)
    trace.clear()
    done = [0] * writers
    errors: list[BaseException] = []
    cpu_before = {"writers": process_cpu_s(None), **s3.cpu_s()}
    start = time.monotonic()
    deadline = start + seconds

    def write(i: int) -> None:
        c = coordinators[i]
        n = 1
        try:
            while time.monotonic() < deadline:
                msgs = [append_msg(0, 0, data_file(rows=1))]
                if groups is not None:
                    groups.commit(c.prepare(msgs, n))
                else:
                    c.commit(msgs, n)
                n += 1
                done[i] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    cpu_after = {"writers": process_cpu_s(None), **s3.cpu_s()}
    if groups is not None:
        groups.join(60)  # the hold's end (its after-release writes) before the next phase
    if errors:
        raise errors[0]
    total = sum(done)
    with trace.mutex:
        holds = len(trace.holds)
    # (Requests per hold are not counted here: the other writers' requests made outside the lock arrive
    # during the holds too. ``group_hold`` counts a hold's own.)
    out: dict[str, Any] = {"commits_per_s": round(total / elapsed, 1), "commits": total}
    if holds:
        out["commits_per_hold"] = round(total / holds, 2)
    # CPU per commit of each process (the writers' includes, in thread mode, the S3 server and proxy)
    out["cpu_ms_per_commit"] = {
        k: round((cpu_after[k] - cpu_before[k]) * 1000 / max(total, 1), 2) for k in cpu_before
    }
    # the writers' interpreter at one full core: the rate its CPU per commit allows
    writer_cpu = cpu_after["writers"] - cpu_before["writers"]
    out["cpu_bound_commits_per_s"] = round(total / writer_cpu, 1) if writer_cpu > 0 else None
    out["writers_cpu_share"] = round(writer_cpu / elapsed, 2)
    return out


def group_hold(catalog: Any, name: str, trace: Trace, k: int, rtt_ms: float) -> dict[str, Any]:
    """One hold of ``k`` commits (the first takes the lock while the others queue behind it, all
    prepared beforehand: nothing else runs meanwhile): the S3 requests inside it, the RTTs they cost if
    sent one after the other, and the hold's duration."""
    from paimon_meta.commit.coordinator import CommitCoordinator

    table = catalog.create_table(name, SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
    catalog.message_committer(name, "g", table=table).commit([append_msg(0, 0, data_file(rows=1))], 0)
    prepared = [
        catalog.message_committer(name, "g", table=table).prepare(
            [append_msg(0, 0, data_file(rows=1))], i + 1
        )
        for i in range(k)
    ]
    groups = GroupCommitter(catalog.lock, lock_settings=catalog.lock_settings)
    original = CommitCoordinator.commit_prepared
    entered, go = threading.Event(), threading.Event()

    def first_waits(self: Any, p: Any) -> Any:
        if not entered.is_set():
            entered.set()
            go.wait(30)
        return original(self, p)

    trace.clear()
    CommitCoordinator.commit_prepared = first_waits  # type: ignore[method-assign,assignment]
    try:
        group = groups.group(catalog.registry.lock_id(*name.split(".")))
        futures = [group.submit(prepared[0])]
        entered.wait(30)
        futures += [group.submit(p) for p in prepared[1:]]
    finally:
        go.set()
        CommitCoordinator.commit_prepared = original  # type: ignore[method-assign]
    for f in futures:
        f.result(60)
    groups.join(30)
    holds = trace.per_hold()
    kinds: dict[str, int] = {}
    for r in (r for h in holds for r in h):
        what = f"{r.method} {r.path.rsplit('/', 1)[-1].split('-')[0]}" + (" (Expect)" if r.expect else "")
        kinds[what] = kinds.get(what, 0) + 1
    return {
        "k": k,
        "holds": len(holds),
        "requests_under_lock": sum(len(h) for h in holds),
        "rtts_if_sequential": sum(rtts_of(h) for h in holds),
        "rtts_measured": None if rtt_ms <= 0 else sum(waves(h, rtt_ms) or 0 for h in holds),
        "hold_ms": round(sum((b - a) * 1000 for a, b in trace.holds), 1),
        "requests_by_kind": dict(sorted(kinds.items())),
    }


@contextmanager
def staging_ahead(on: bool) -> Iterator[None]:
    """Off: the committer of snapshot N does not stage N+1's base list (``CommitCoordinator._stage_ahead``
    answers None, as when nothing else is in flight): the commit path before it, in the same run. A
    revision without it runs as is."""
    from paimon_meta.commit.coordinator import CommitCoordinator

    original = getattr(CommitCoordinator, "_stage_ahead", None)
    if on or original is None:
        yield
        return
    CommitCoordinator._stage_ahead = lambda self, snapshot: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        CommitCoordinator._stage_ahead = original  # type: ignore[method-assign]


def run(
    url: str, rtt_ms: float, args: argparse.Namespace, *, out_of_process: bool, ahead: bool = True
) -> dict[str, Any]:
    trace = Trace()
    with (
        s3_server(trace, rtt_ms, out_of_process=out_of_process) as s3,
        traced_holds(trace),
        staging_ahead(ahead),
    ):
        (host, port) = s3.upstream
        import boto3

        bucket = f"bench-{uuid.uuid4().hex[:10]}"
        boto3.session.Session().client(
            "s3",
            endpoint_url=f"http://{host}:{port}",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        ).create_bucket(Bucket=bucket)
        options = {
            "s3.endpoint": f"http://127.0.0.1:{s3.proxy_port}",
            "s3.access-key": ACCESS_KEY,
            "s3.secret-key": SECRET_KEY,
            "s3.region": "us-east-1",
            "s3.path-style-access": "true",
            "s3.conditional-writes": "true",
        }
        with paimon_meta.connect(url, f"s3://{bucket}/warehouse", **options) as catalog:
            mode = "process" if out_of_process else "thread"
            result: dict[str, Any] = {"rtt_ms": rtt_ms, "s3": mode, "stage_ahead": ahead}
            # one scratch database for every RTT and mode: tables per RTT and mode
            n = f"{int(rtt_ms * 1000)}_{mode}_{'ahead' if ahead else 'plain'}"
            result["lone"] = lone(catalog, f"db.lone_{n}", trace, args.commits, args.skip, rtt_ms=rtt_ms)
            result["group_hold"] = group_hold(catalog, f"db.group_{n}", trace, args.group, rtt_ms)
            result["ungrouped"] = throughput(
                catalog,
                f"db.ungrouped_{n}",
                trace,
                s3,
                writers=args.writers,
                seconds=args.seconds,
                grouped=False,
            )
            result["grouped"] = throughput(
                catalog,
                f"db.grouped_{n}",
                trace,
                s3,
                writers=args.writers,
                seconds=args.seconds,
                grouped=True,
            )
            result["load_average"] = [round(v, 2) for v in os.getloadavg()]
            return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--rtts", type=float, nargs="+", default=[0, 10, 20, 50])
    parser.add_argument("--commits", type=int, default=25)
    parser.add_argument("--skip", type=int, default=5)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--group", type=int, default=8, help="commits in the traced group hold")
    parser.add_argument(
        "--s3",
        choices=["process", "thread", "both"],
        default="process",
        help="the S3 server and the delay proxy each in its own process (default), threads of this one,"
        " or every RTT both ways (thread first)",
    )
    parser.add_argument(
        "--stage-ahead",
        choices=["on", "off", "both"],
        default="on",
        help="the committer of snapshot N stages N+1's base list (on: as the library does; off: the"
        " path before it; both: off, then on, for every RTT and --s3 mode)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.url:
        parser.error("--url or $PAIMON_META_TEST_DSN is required")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    print(load(), flush=True)
    results = []
    with scratch_database(args.url) as url:
        modes = {"process": [True], "thread": [False], "both": [False, True]}[args.s3]
        aheads = {"on": [True], "off": [False], "both": [False, True]}[args.stage_ahead]
        for rtt in args.rtts:
            for out_of_process in modes:
                for ahead in aheads:
                    result = run(url, rtt, args, out_of_process=out_of_process, ahead=ahead)
                    results.append(result)
                    print(json.dumps(result), flush=True)
    print(load(), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
