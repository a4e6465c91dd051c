"""The physical floor of a commit: our sequential one-file commits next to the very same operating-system
and database operations replayed raw, so the overhead of everything else (Python, the protocol's logic,
serialisation) is visible as a ratio.

How: a table is created (metastore + local warehouse); then the Postgres database is cloned (``CREATE
DATABASE ... TEMPLATE``) and the warehouse copied, so a second world in the same state exists. In the first
world we run ``--commits`` sequential one-file commits through the metastore guard (as
``bench/bench_commit.py``), recording on the committing thread every file-system call the commit path
makes (``os.open/write/fsync/close/link/replace/rename/unlink/mkdir/stat/scandir`` and reads) and every
statement it sends to Postgres (psycopg cursor executes, with their connection, and explicit
commits/rollbacks). Then the recording is replayed, call by call and in the same order, against the clone:
the same bytes written to the same (re-rooted) paths with the same fsyncs, the same SQL text sent on as
many connections, every result fetched. Because the clone starts in the recorded world's state, every
statement does what it did (the same lock row inserted and deleted, the same pointer CAS, the same event
rows), so the replay is the commit with all of our code removed: a floor no implementation of this
protocol on this machine can go under without doing less I/O.

Reported per commit (median over commits ``--skip``+1 .. ``--commits``): ours, the replay (all), the replay
of only the file calls and only the database calls (each still timed in place), the counts (round trips,
transactions, files created, bytes, fsyncs), and ours/floor.

Usage::

    python bench/bench_floor.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                [--commits 300] [--skip 100]
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import SCHEMA, TABLE_OPTIONS, load  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.db.engine import libpq_conninfo  # noqa: E402
from paimon_meta.db.migrate import upgrade  # noqa: E402
from tests.commit.helpers import append_msg, data_file  # noqa: E402

_FILE_CALLS = ("open", "close", "write", "fsync", "link", "replace", "rename", "unlink", "mkdir", "stat")
# The real functions, bound before any patching: the replay never goes through the recording wrappers.
_OS: dict[str, Any] = {name: getattr(os, name) for name in (*_FILE_CALLS, "scandir")}
_OPEN = builtins.open
_EXECUTE = psycopg.Cursor.execute
_TXN_END = {"commit": psycopg.Connection.commit, "rollback": psycopg.Connection.rollback}


def _creates(flags: int) -> bool:
    """Whether an ``os.open`` with ``flags`` creates a file (by name, or unnamed: ``O_TMPFILE``)."""
    tmpfile = getattr(os, "O_TMPFILE", 0)
    return bool(flags & os.O_CREAT) or (tmpfile != 0 and flags & tmpfile == tmpfile)


@dataclass(slots=True)
class Call:
    """One recorded call: ``kind`` is ``fs`` or ``db``; ``commit`` the commit it belongs to (-1: set-up);
    ``thread`` 0 for the committing thread, else the helper thread's ident (the commit path fsyncs
    files concurrently on a pool); ``start``/``end`` when it ran (perf_counter)."""

    kind: str
    op: str
    args: tuple[Any, ...]
    commit: int
    thread: int
    start: float
    end: float
    result: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)  # dir_fd= / dst_dir_fd= (file descriptors)


# A recorded descriptor is named by the open that made it (an id unique in the recording), not by its
# number: numbers are reused as soon as a file is closed, by any thread (the commit path writes the
# manifest, the delta list and the staged-ahead base list on helper threads, and one thread may sync
# or close what another opened).


# Threads whose calls are not part of a commit (the lock's heartbeat renews the lease in the background).
_IGNORED_THREADS = ("paimon-lock-heartbeat",)


@dataclass
class Recorder:
    """Records the file-system and Postgres calls the commit path makes (the committing thread and the
    helper threads it waits for)."""

    thread: int
    calls: list[Call] = field(default_factory=list)
    commit: int = -1
    on: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _open_ids: dict[int, int] = field(default_factory=dict)  # live descriptor number -> its open's id
    _next_id: int = 0

    def opened(self, fd: int) -> int:
        """A new descriptor ``fd`` (just returned by ``os.open``): its id."""
        with self._lock:
            self._next_id += 1
            self._open_ids[fd] = self._next_id
            return self._next_id

    def fd_id(self, fd: Any) -> Any:
        """The id of the open behind live descriptor ``fd`` (read before the call that uses it, while the
        caller holds it open); a descriptor opened before the recording began keeps its number, as
        ``("raw", fd)``, and the replay refuses it by name."""
        if not isinstance(fd, int):
            return fd
        with self._lock:
            oid = self._open_ids.get(fd)
        return ("raw", fd) if oid is None else oid

    def closed(self, fd: int, oid: Any) -> None:
        """``fd`` was closed: forget it, unless another thread's open already got the number again."""
        with self._lock:
            if self._open_ids.get(fd) == oid:
                del self._open_ids[fd]

    def add(
        self,
        kind: str,
        op: str,
        args: tuple[Any, ...],
        start: float,
        result: Any = None,
        *,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not self.on:
            return
        me = threading.current_thread()
        if me.name.startswith(_IGNORED_THREADS):
            return
        thread = 0 if me.ident == self.thread else (me.ident or -1)
        call = Call(
            kind, op, args, self.commit, thread, start, time.perf_counter(), result, dict(kwargs or {})
        )
        with self._lock:
            self.calls.append(call)

    @contextmanager
    def paused(self) -> Iterator[list[Call]]:
        """Stop recording and hand over (and forget) what was recorded so far; resume afterwards."""
        self.on = False
        with self._lock:
            calls, self.calls = self.calls, []
        try:
            yield calls
        finally:
            self.on = True


@contextmanager
def recording(rec: Recorder) -> Iterator[None]:
    """Patch ``os`` (and ``open`` for reads) and psycopg's execute/commit/rollback to record into ``rec``."""
    saved, real_open = _OS, _OPEN

    def wrap(name: str) -> Callable[..., Any]:
        real = saved[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            # descriptors named by their open's id, read while the caller still holds them open
            ids = {k: rec.fd_id(v) for k, v in kwargs.items() if k in ("dir_fd", "dst_dir_fd")}
            if name in ("write", "fsync", "close"):
                fd_oid = rec.fd_id(args[0])
            elif name in ("link", "replace", "rename") and str(args[0]).startswith("/proc/self/fd/"):
                fd_oid = rec.fd_id(int(str(args[0]).rsplit("/", 1)[1]))
            t0 = time.perf_counter()
            result = real(*args, **kwargs)
            if name == "write":
                rec.add("fs", name, (fd_oid, bytes(memoryview(args[1])[:result])), t0, result)
            elif name == "stat":
                rec.add("fs", name, (args[0],), t0)
            elif name == "open":
                rec.add("fs", name, args, t0, rec.opened(result), kwargs=ids)
            elif name in ("fsync", "close"):
                rec.add("fs", name, (fd_oid,), t0, result)
                if name == "close":
                    rec.closed(args[0], fd_oid)
            elif name in ("link", "replace", "rename") and str(args[0]).startswith("/proc/self/fd/"):
                rec.add("fs", name, (("proc-fd", fd_oid), *args[1:]), t0, result, kwargs=ids)
            else:
                rec.add("fs", name, args, t0, result, kwargs=ids)
            return result

        return call

    def scandir(path: Any = ".") -> Any:
        rec.add("fs", "scandir", (path,), time.perf_counter())
        return saved["scandir"](path)

    def opener(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        handle = real_open(file, mode, *args, **kwargs)
        if isinstance(file, str) and mode == "rb":
            rec.add("fs", "read", (file,), t0)
        return handle

    cursor_execute = _EXECUTE
    conn_commit, conn_rollback = _TXN_END["commit"], _TXN_END["rollback"]

    def execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        conn, t0 = self.connection, time.perf_counter()
        result = cursor_execute(self, query, params, **kwargs)
        rec.add("db", "execute", (id(conn), conn.autocommit, type(self), query, params, kwargs), t0)
        return result

    def commit(self: Any) -> None:
        t0 = time.perf_counter()
        conn_commit(self)
        rec.add("db", "commit", (id(self), self.autocommit), t0)

    def rollback(self: Any) -> None:
        t0 = time.perf_counter()
        conn_rollback(self)
        rec.add("db", "rollback", (id(self), self.autocommit), t0)

    for name in _FILE_CALLS:
        setattr(os, name, wrap(name))
    os.scandir = scandir
    builtins.open = opener
    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    psycopg.Connection.commit = commit  # type: ignore[method-assign]
    psycopg.Connection.rollback = rollback  # type: ignore[method-assign]
    rec.on = True
    try:
        yield
    finally:
        rec.on = False
        for name, fn in saved.items():
            setattr(os, name, fn)
        builtins.open = real_open
        psycopg.Cursor.execute = cursor_execute  # type: ignore[method-assign]
        psycopg.Connection.commit = conn_commit  # type: ignore[method-assign]
        psycopg.Connection.rollback = conn_rollback  # type: ignore[method-assign]


class Replayer:
    """Re-issues recorded calls against the cloned world: paths re-rooted, fds and connections mapped."""

    def __init__(self, old_root: str, new_root: str, conninfo: str) -> None:
        self.old_root, self.new_root, self.conninfo = old_root, new_root, conninfo
        self.fds: dict[Any, int] = {}  # a recorded open's id -> the replay's descriptor
        self._fds_changed = threading.Condition()
        self._workers: dict[int, ThreadPoolExecutor] = {}
        self._pending: list[tuple[float, Future[None]]] = []
        self.conns: dict[int, psycopg.Connection[Any]] = {}
        self.errors: list[str] = []

    def fd(self, oid: Any) -> int:
        """The replay's descriptor for the recorded open ``oid``. Its open may be queued on another helper
        thread's worker (one helper opens, another syncs or writes): wait until that worker has run it;
        it precedes this use in the recording, and a worker only waits on opens recorded before its
        own calls, so the wait ends."""
        if isinstance(oid, tuple) and oid[0] == "raw":
            raise OSError(f"descriptor {oid[1]} was opened before the recording began")
        with self._fds_changed:
            # bounded so a recording that lost an open fails the run by name instead of hanging it
            self._fds_changed.wait_for(lambda: oid in self.fds or bool(self.errors), timeout=120)
            if oid not in self.fds:
                raise OSError(f"the open of recorded descriptor #{oid} was not replayed")
            return self.fds[oid]

    def path(self, p: Any) -> Any:
        if isinstance(p, str) and p.startswith(self.old_root):
            return self.new_root + p[len(self.old_root) :]
        return p

    def conn(self, key: int, autocommit: bool) -> psycopg.Connection[Any]:
        c = self.conns.get(key)
        if c is None:
            c = psycopg.connect(self.conninfo, autocommit=autocommit, prepare_threshold=None)
            self.conns[key] = c
        return c

    def replay(self, calls: list[Call]) -> tuple[float, float]:
        """Replay ``calls`` (one commit) in the order they started; a helper-thread call runs on a worker
        of its own (in order with that thread's other calls), and a committing-thread call first waits
        for every helper call that had finished before it started in the recording (what the commit
        path waited for). Returns the seconds spent in file-system and database calls on this thread."""
        fs = db = 0.0
        for call in sorted(calls, key=lambda c: c.start):
            if call.thread != 0:
                worker = self._workers.get(call.thread)
                if worker is None:
                    worker = self._workers[call.thread] = ThreadPoolExecutor(max_workers=1)
                self._pending.append((call.end, worker.submit(self.run, call)))
                continue
            t0 = time.perf_counter()
            still = []
            for end, future in self._pending:
                if end < call.start:
                    future.result()
                else:
                    still.append((end, future))
            self._pending = still
            self.run(call)
            if call.kind == "fs":
                fs += time.perf_counter() - t0
            else:
                db += time.perf_counter() - t0
        for _, future in self._pending:
            future.result()
        self._pending = []
        return fs, db

    def run(self, call: Call) -> None:
        try:
            if call.kind == "fs":
                self._fs(call)
            else:
                self._db(call)
        except (OSError, psycopg.Error) as e:
            with self._fds_changed:
                self.errors.append(f"{call.op}{call.args[:2]!r}: {e}")
                self._fds_changed.notify_all()

    def _fs(self, call: Call) -> None:
        op, a = call.op, call.args
        kw = {k: self.fd(v) for k, v in call.kwargs.items() if k in ("dir_fd", "dst_dir_fd")}
        if op == "open":
            fd = _OS["open"](self.path(a[0]), *a[1:], **kw)
            with self._fds_changed:
                self.fds[call.result] = fd
                self._fds_changed.notify_all()
        elif op == "close":
            fd = self.fd(a[0])
            with self._fds_changed:
                del self.fds[a[0]]
            _OS["close"](fd)
        elif op == "write":
            _OS["write"](self.fd(a[0]), a[1])
        elif op == "fsync":
            _OS["fsync"](self.fd(a[0]))
        elif op in ("link", "replace", "rename"):
            src = a[0]
            if isinstance(src, tuple) and src[0] == "proc-fd":  # an O_TMPFILE file, by its descriptor
                src = f"/proc/self/fd/{self.fd(src[1])}"
            _OS[op](self.path(src), self.path(a[1]), **kw)
        elif op in ("unlink", "mkdir", "stat"):
            # as in the recording (e.g. a stat probing for a file that is not there)
            with contextlib.suppress(FileNotFoundError):
                _OS[op](self.path(a[0]), *a[1:])
        elif op == "scandir":
            with _OS["scandir"](self.path(a[0])) as it:
                for _ in it:
                    pass
        elif op == "read":
            with _OPEN(self.path(a[0]), "rb") as f:
                f.read()

    def _db(self, call: Call) -> None:
        if call.op == "execute":
            key, autocommit, cursor_type, query, params, kwargs = call.args
            cur = cursor_type(self.conn(key, autocommit))
            _EXECUTE(cur, query, params, **kwargs)
            while True:
                if cur.description is not None:
                    cur.fetchall()
                if not cur.nextset():
                    break
        else:
            key, autocommit = call.args
            _TXN_END[call.op](self.conn(key, autocommit))

    def close(self) -> None:
        for c in self.conns.values():
            c.close()
        for w in self._workers.values():
            w.shutdown()


@contextmanager
def two_databases(server_url: str) -> Iterator[tuple[str, Callable[[], str]]]:
    """A fresh migrated database, and a function cloning it (no session may be connected to it then)."""
    admin = libpq_conninfo(server_url)
    base = f"paimon_meta_floor_{uuid.uuid4().hex[:10]}"
    names = [base]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(base)))
    url = make_url(server_url).set(database=base).render_as_string(hide_password=False)

    def clone() -> str:
        name = base + "_clone"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(base))
            )
        names.append(name)
        return libpq_conninfo(make_url(server_url).set(database=name).render_as_string(hide_password=False))

    try:
        upgrade(url)
        yield url, clone
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in names:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def run(url: str, commits: int, skip: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="paimon-floor-") as tmp, two_databases(url) as (db_url, clone):
        ours_wh, floor_wh = os.path.join(tmp, "ours"), os.path.join(tmp, "floor")
        with paimon_meta.connect(db_url, ours_wh) as catalog:
            catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options=TABLE_OPTIONS)
        conninfo = clone()
        shutil.copytree(ours_wh, floor_wh)

        rec = Recorder(threading.get_ident())
        replayer = Replayer(ours_wh, floor_wh, conninfo)
        latencies: list[float] = []
        floor_all, floor_fs, floor_db = [], [], []
        per_commit: dict[int, list[Call]] = {}
        # Each commit is replayed right after it ran, so load changes hit both sides alike.
        try:
            with recording(rec), paimon_meta.connect(db_url, ours_wh) as catalog:
                table = catalog.get_table("db.t")
                assert table.committer_factory is not None
                committer = table.committer_factory(table, "floor-bench")
                for i in range(commits):
                    msg = append_msg(0, 0, data_file(rows=1))
                    rec.commit = i
                    t0 = time.perf_counter()
                    committer.commit([msg], i)
                    latencies.append((time.perf_counter() - t0) * 1000)
                    rec.commit = -1  # what happens between commits is replayed before the next, untimed
                    with rec.paused() as calls:
                        for c in calls:
                            per_commit.setdefault(c.commit, []).append(c)
                        replayer.replay(per_commit.pop(-1, []))
                        t_all = time.perf_counter()
                        fs, db = replayer.replay(per_commit.get(i, []))
                        floor_all.append((time.perf_counter() - t_all) * 1000)
                        floor_fs.append(fs * 1000)
                        floor_db.append(db * 1000)
        finally:
            replayer.close()

    measured = range(skip, commits)
    sample = [c for i in measured for c in per_commit.get(i, [])]
    n = len(measured)

    def med(xs: list[float]) -> float:
        return statistics.median(xs[skip:])

    def count(pred: Callable[[Call], bool]) -> float:
        return sum(1 for c in sample if pred(c)) / n

    return {
        "ours_ms": med(latencies),
        "floor_ms": med(floor_all),
        "floor_fs_ms": med(floor_fs),
        "floor_db_ms": med(floor_db),
        "round_trips": count(lambda c: c.op == "execute"),
        "db_commits": sum(_commits_in(c) for c in sample) / n,
        "files_created": count(lambda c: c.op == "open" and _creates(c.args[1])),
        "bytes_written": sum(len(c.args[1]) for c in sample if c.op == "write") / n,
        "fsyncs": count(lambda c: c.op == "fsync"),
        "links_renames": count(lambda c: c.op in ("link", "replace", "rename")),
        "other_fs_calls": count(lambda c: c.op in ("stat", "scandir", "read", "mkdir", "unlink")),
        "replay_errors": replayer.errors[:5],
        "replay_error_count": len(replayer.errors),
    }


def _commits_in(call: Call) -> int:
    """Transaction commits a recorded call made (statements are upper-case in our batches)."""
    if call.op == "commit":
        return 1
    if call.op == "execute" and isinstance(call.args[3], str):
        return call.args[3].count("COMMIT")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--skip", type=int, default=100, help="commits not measured (warm-up)")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url or $PAIMON_META_TEST_DSN is required")
    print(load())
    r = run(args.url, args.commits, args.skip)
    print(load())
    if r["replay_error_count"]:
        print(f"replay errors: {r['replay_error_count']}, first: {r['replay_errors']}")
    print(f"commits {args.skip + 1}-{args.commits}, medians per commit:")
    print("| | ms |")
    print("|---|---|")
    print(f"| ours (metastore guard, local warehouse) | {r['ours_ms']:.2f} |")
    print(f"| floor: the same calls replayed raw | {r['floor_ms']:.2f} |")
    print(f"| of which file-system calls | {r['floor_fs_ms']:.2f} |")
    print(f"| of which Postgres round trips | {r['floor_db_ms']:.2f} |")
    print(f"| ours / floor | {r['ours_ms'] / r['floor_ms']:.2f}x |")
    print(f"| ours - floor (our CPU per commit) | {r['ours_ms'] - r['floor_ms']:.2f} |")
    print(
        f"per commit: {r['round_trips']:.1f} Postgres round trips ({r['db_commits']:.1f} of them "
        "BEGIN..COMMIT blocks, the others single autocommit statements), "
        f"{r['files_created']:.1f} files created, {r['bytes_written']:.0f} bytes written, "
        f"{r['fsyncs']:.1f} fsyncs, {r['links_renames']:.1f} links/renames, {r['other_fs_calls']:.1f} "
        "stats/reads/lists"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
