"""A private PostgreSQL 15 cluster for chaos tests, on the machine's own binaries.

``PostgresCluster.start_new()`` runs ``initdb`` (trust auth) in a fresh temporary directory, starts the
server on a free 127.0.0.1 port, creates the database and migrates it to head. The cluster is the test's
alone: restarting or stopping it never touches the machine's shared server on 5432 or any other test's.
``restart``/``stop``/``start`` record every outage as a :class:`Downtime` (when the stop was issued,
when the server accepted connections again) so tests can hold the recorded commit timeline against it.

PostgreSQL refuses to run as root: when we are root, every ``initdb``/``pg_ctl`` runs as the
``postgres`` OS user (``$PAIMON_META_PG_OS_USER`` overrides), which must traverse the data directory's
parents; so the directory lives under the system temp dir (made traversable), never under pytest's
``tmp_path`` below ``/root``.

Where the binaries are missing :func:`require_binaries` skips with the reason (a failure under
``CI=true``: CI must run these tests).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from paimon_meta.db.migrate import upgrade

BIN_DIR = Path(os.environ.get("PAIMON_META_CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin"))
HOST = "127.0.0.1"
SUPERUSER = "postgres"
STOP_MODES = ("smart", "fast", "immediate")


class ClusterError(Exception):
    """An ``initdb``/``pg_ctl`` step failed; the message carries its output and the server log's tail."""


@dataclass(frozen=True, slots=True)
class Downtime:
    """One outage of the cluster: ``down_at`` just before the stop was issued, ``up_at`` when a new
    connection first succeeded (both ``time.time()``, the clock Postgres' ``clock_timestamp()`` reads
    on this machine)."""

    mode: str
    down_at: float
    up_at: float

    @property
    def seconds(self) -> float:
        return self.up_at - self.down_at

    def overlaps(self, start: float, end: float) -> bool:
        return start <= self.up_at and end >= self.down_at


def require_binaries() -> None:
    """Skip (fail under ``CI=true``) unless ``initdb`` and ``pg_ctl`` exist in :data:`BIN_DIR`."""
    missing = [name for name in ("initdb", "pg_ctl", "postgres") if not (BIN_DIR / name).is_file()]
    if os.geteuid() == 0 and missing == []:
        try:
            pwd.getpwnam(_os_user() or SUPERUSER)
        except KeyError:
            missing.append(f"OS user {_os_user()!r} to run the server as")
    if missing:
        message = f"no private PostgreSQL 15 cluster: missing {', '.join(missing)} in {BIN_DIR}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def _os_user() -> str | None:
    """The OS user the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    return os.environ.get("PAIMON_META_PG_OS_USER") or SUPERUSER


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """An initdb'd, running cluster in its own directory; :meth:`close` stops it (``-m immediate``) and
    deletes the directory. ``url`` is the SQLAlchemy URL of the migrated database."""

    def __init__(self, home: Path, port: int, database: str, listen: tuple[str, ...] = (HOST,)) -> None:
        self.home = home
        self.port = port
        self.database = database
        self.listen = listen
        self.downtimes: list[Downtime] = []

    @property
    def pgdata(self) -> Path:
        return self.home / "data"

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@{HOST}:{self.port}/{self.database}"

    @classmethod
    def start_new(
        cls, database: str = "chaos", *, listen: tuple[str, ...] = (HOST,), trust: tuple[str, ...] = ()
    ) -> PostgresCluster:
        """initdb, start on a free port, create and migrate ``database``. ``listen``: the addresses the
        server listens on (127.0.0.1 always first: the test's own connections use it); ``trust``: more
        client networks (CIDR) let in without a password (initdb's trust covers only local ones)."""
        require_binaries()
        home = Path(tempfile.mkdtemp(prefix="paimon-meta-chaos-pg-"))
        user = _os_user()
        cluster = cls(home, free_port(), database, listen)
        try:
            if user is not None:
                entry = pwd.getpwnam(user)
                for parent in [home, *home.parents]:
                    mode = parent.stat().st_mode
                    if not mode & 0o001:
                        parent.chmod(mode | 0o001)
                os.chown(home, entry.pw_uid, entry.pw_gid)
            cluster._run("initdb", "-D", str(cluster.pgdata), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8")
            with (cluster.pgdata / "postgresql.conf").open("a") as conf:
                # Quiet and small: the machine is shared. fsync off: outages, not power loss, are tested.
                conf.write("fsync = off\nshared_buffers = 32MB\nmax_connections = 200\n")
            with (cluster.pgdata / "pg_hba.conf").open("a") as hba:
                hba.writelines(f"host all all {network} trust\n" for network in trust)
            cluster.start()
            with cluster.connect("postgres") as conn:
                conn.execute(f'CREATE DATABASE "{database}"')
            upgrade(cluster.url)
        except BaseException:
            cluster.close()
            raise
        return cluster

    # ---- control ------------------------------------------------------------------------------------

    def start(self) -> None:
        """``pg_ctl start`` on the same port; returns once the server accepts connections."""
        options = f"-p {self.port} -h {','.join(self.listen)} -k ''"
        self._pg_ctl("-l", str(self.log_path), "-o", options, "-w", "-t", "60", "start")
        self._wait_accepting()

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``; returns once the server is down."""
        if mode not in STOP_MODES:
            raise ValueError(f"pg_ctl stop mode is one of {STOP_MODES}, got {mode!r}")
        self._pg_ctl("-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "immediate", while_down: Callable[[], None] | None = None) -> Downtime:
        """Stop (``-m mode``), run ``while_down`` (probes of what answers during the outage), start again;
        the outage is recorded in :attr:`downtimes` and returned."""
        down_at = time.time()
        self.stop(mode)
        try:
            if while_down is not None:
                while_down()
        finally:
            self.start()
            downtime = Downtime(mode, down_at, time.time())
            self.downtimes.append(downtime)
        return downtime

    def running(self) -> bool:
        try:
            with self.connect("postgres", timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def close(self) -> None:
        """Stop the server (``-m immediate``, whatever state it is in) and delete its directory."""
        if (self.pgdata / "postmaster.pid").exists():
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
                self._pg_ctl("-m", "immediate", "-w", "-t", "30", "stop")
        shutil.rmtree(self.home, ignore_errors=True)

    def connect(
        self, database: str | None = None, *, timeout: int = 5
    ) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(
            host=HOST,
            port=self.port,
            user=SUPERUSER,
            dbname=database or self.database,
            autocommit=True,
            connect_timeout=timeout,
        )

    # ---- helpers ------------------------------------------------------------------------------------

    def _wait_accepting(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.running():
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"cluster on port {self.port} not accepting after {timeout}s: {self.log_tail()}"
                )
            time.sleep(0.05)

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), *args)

    def _run(self, binary: str, *args: str) -> None:
        user = _os_user()
        kwargs: dict[str, object] = {}
        if user is not None:
            # The group and supplementary groups dropped too: root's would not traverse a 0701 parent.
            entry = pwd.getpwnam(user)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        # The server's output goes to -l's log: a postmaster holding our pipe open would block run().
        result = subprocess.run(
            [str(BIN_DIR / binary), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=120,
            cwd="/",
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
        if result.returncode != 0:
            output = result.stdout.decode("utf-8", "replace").strip()[-2000:]
            raise ClusterError(
                f"{binary} {' '.join(args)} failed ({result.returncode}): {output}\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""
