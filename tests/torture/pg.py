"""Postgres faults: terminate the metastore's backends mid-commit, and restart a private embedded server.

Restarts only ever touch an embedded Postgres this module started in its own directory, never the shared
server other tests use. ``pg_ctl restart`` reuses the options of the last start (``postmaster.opts``), so
the server comes back on the same port and clients reconnect to the same URL.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg import sql

from paimon_meta.db.embedded import (
    EmbeddedPostgres,
    _bin,
    _os_user,
    _run,
    ensure_embedded_postgres,
    stop_embedded_postgres,
)
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.migrate import upgrade

APPLICATION_NAME = "paimon_meta"  # what paimon_meta.db.engine.make_engine sets


def terminate_backends(url: str, application_name: str | None = APPLICATION_NAME) -> int:
    """``pg_terminate_backend`` every session of ``url``'s database with that application name (the
    catalog's pool, heartbeats, an open publishing transaction; LISTEN connections use libpq defaults and
    are terminated too when ``application_name`` is None). Returns how many were terminated."""
    query = (
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    params: tuple[str, ...] = ()
    if application_name is not None:
        query += " AND application_name = %s"
        params = (application_name,)
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
    return int(row[0]) if row else 0


class PrivatePostgres:
    """An embedded Postgres in a temporary directory, with a migrated database ``torture``."""

    def __init__(self) -> None:
        # Not pytest's tmp_path: the server runs as an unprivileged user, which must traverse the path.
        self.home = Path(tempfile.mkdtemp(prefix="paimon-meta-torture-pg-"))
        try:
            self.server: EmbeddedPostgres = ensure_embedded_postgres(self.home, database="torture")
            upgrade(self.server.url)
        except BaseException:
            self.close()
            raise
        self.restarts = 0

    @property
    def url(self) -> str:
        return self.server.url

    def restart(self, mode: str = "fast") -> None:
        """Restart the server in place (same data directory and port); returns once it accepts again."""
        base = self.home.resolve() / "postgres"
        _run(
            # -l: without a log file the new postmaster would inherit (and hold open) our output pipe
            [
                str(_bin("pg_ctl")),
                *("-D", str(base / "data"), "-l", str(base / "server.log")),
                *("-m", mode, "-w", "-t", "60", "restart"),
            ],
            user=_os_user(),
            log=base / "server.log",
        )
        self.restarts += 1

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``); :meth:`start` brings it back on the same port."""
        base = self.home.resolve() / "postgres"
        _run(
            [str(_bin("pg_ctl")), "-D", str(base / "data"), "-m", "fast", "-w", "-t", "60", "stop"],
            user=_os_user(),
            log=base / "server.log",
        )

    def start(self) -> None:
        base = self.home.resolve() / "postgres"
        _run(
            [
                str(_bin("pg_ctl")),
                *("-D", str(base / "data"), "-l", str(base / "server.log")),
                *("-o", f"-p {self.server.port} -h 127.0.0.1 -k ''", "-w", "-t", "60", "start"),
            ],
            user=_os_user(),
            log=base / "server.log",
        )

    def copy_database(self, name: str) -> str:
        """A new database ``name``, a copy of the migrated ``torture`` (nothing may be connected to that
        one meanwhile); returns its URL. For tests that each need an empty event log."""
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE torture").format(sql.Identifier(name))
        with psycopg.connect(libpq_conninfo(self.server.url_for("postgres")), autocommit=True) as conn:
            conn.execute(statement)
        return self.server.url_for(name)

    def started_at(self) -> datetime:
        """When the running server started (``pg_postmaster_start_time()``): the end of the last
        restart, or of :meth:`start`, on the clock the event log's timestamps use."""
        with psycopg.connect(libpq_conninfo(self.url), autocommit=True) as conn:
            row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        assert row is not None
        started: datetime = row[0]
        return started

    def close(self) -> None:
        stop_embedded_postgres(self.home, mode="immediate")
        shutil.rmtree(self.home, ignore_errors=True)
