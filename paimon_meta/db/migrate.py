"""Run the metastore's Alembic migrations from code.

``upgrade()`` is safe to call from several processes at once: ``migrations/env.py`` takes a
transaction-scoped Postgres advisory lock before Alembic reads the version table, so a second caller
waits, then sees the first caller's result and has nothing left to do. The same env.py serves the
``alembic`` command line (``alembic.ini`` at the repository root).

Where the scripts are found (first hit wins): ``$PAIMON_META_MIGRATIONS``; ``paimon_meta/db/_migrations``
(a link to the top-level ``migrations/`` in a checkout, real files in a built wheel); the top-level
``migrations/`` next to the package directory (source tree or editable install).
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from paimon_meta.db.engine import make_engine
from paimon_meta.errors import PaimonMetaError

#: Alembic's version table, named so it cannot collide with another application's in the same database.
VERSION_TABLE = "paimon_meta_alembic_version"

#: Advisory lock key (signed 64-bit) that serialises concurrent migration runs on one database.
MIGRATION_LOCK_KEY = int.from_bytes(hashlib.sha256(b"paimon_meta.migrate").digest()[:8], "big", signed=True)

_ENV_SCRIPT_LOCATION = "PAIMON_META_MIGRATIONS"

_log = logging.getLogger(__name__)

# Alembic keeps the running environment in module globals (``alembic.context``), so two migration
# runs in one process must not overlap; across processes the advisory lock in env.py serialises them.
_ALEMBIC_IN_PROCESS = threading.Lock()


def script_location() -> Path:
    """The directory holding ``env.py`` and ``versions/``.

    Raises:
        PaimonMetaError: no candidate location holds an ``env.py``.
    """
    candidates: list[Path] = []
    if env := os.environ.get(_ENV_SCRIPT_LOCATION):
        candidates.append(Path(env))
    here = Path(__file__).resolve().parent
    candidates.append(here / "_migrations")
    candidates.append(here.parent.parent / "migrations")
    for candidate in candidates:
        if (candidate / "env.py").is_file():
            return candidate
    raise PaimonMetaError(
        "cannot find the paimon_meta migrations (set PAIMON_META_MIGRATIONS)",
        candidates=[str(c) for c in candidates],
    )


def alembic_config(connection: Connection | None = None, *, lock_timeout: float = 0) -> Config:
    """An Alembic Config built in code; with ``connection`` set, env.py migrates through it, each
    statement waiting at most ``lock_timeout`` seconds for a lock (0: no bound)."""
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["connection"] = connection
    config.attributes["lock_timeout_ms"] = int(lock_timeout * 1000)
    return config


def heads() -> list[str]:
    """The head revision(s) of the migration scripts (exactly one in a healthy tree)."""
    return list(ScriptDirectory.from_config(alembic_config()).get_heads())


@contextmanager
def _connection(url_or_engine: str | URL | Engine) -> Iterator[Connection]:
    if isinstance(url_or_engine, Engine):
        with url_or_engine.connect() as connection:
            yield connection
        return
    engine = make_engine(url_or_engine, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


#: How long one migration statement waits for a table lock before its revision rolls back and is
#: retried (live replicas' queries queue behind a waiting ``ALTER TABLE``: this bounds their stall).
DEFAULT_LOCK_TIMEOUT_SECONDS = 2.0
#: How long :func:`upgrade` keeps retrying revisions that timed out on a lock or lost a deadlock.
DEFAULT_RETRY_FOR_SECONDS = 300.0

#: SQLSTATEs of a revision that lost to live traffic and may simply run again: lock_not_available
#: (``lock_timeout``), deadlock_detected.
_RETRYABLE_SQLSTATES = frozenset({"55P03", "40P01"})


class MigrationLockTimeoutError(PaimonMetaError):
    """A revision kept timing out on table locks (or losing deadlocks) to live traffic for the whole
    retry window (fields: ``revision`` reached so far, ``attempts``, ``last_error``). Nothing is
    half-applied: every revision runs in its own transaction. Run ``paimon-meta db upgrade`` again at a
    quieter time, or with a longer ``--lock-timeout``."""


def _retryable(error: DBAPIError) -> bool:
    return getattr(error.orig, "sqlstate", None) in _RETRYABLE_SQLSTATES


def upgrade(
    url_or_engine: str | URL | Engine,
    revision: str = "head",
    *,
    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS,
    retry_for_seconds: float = DEFAULT_RETRY_FOR_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Upgrade the metastore schema to ``revision`` (serialised across processes), safely beside live
    replicas: each revision in its own transaction, each statement waiting at most
    ``lock_timeout_seconds`` for a lock (0: no bound); a revision that times out or is chosen as a
    deadlock's victim rolls back alone and is retried, with jittered backoff, for ``retry_for_seconds``.

    Raises:
        MigrationLockTimeoutError: the retry window ended with a revision still losing to live traffic.
    """
    deadline = time.monotonic() + retry_for_seconds
    attempt = 0
    while True:
        attempt += 1
        try:
            with _ALEMBIC_IN_PROCESS, _connection(url_or_engine) as connection:
                command.upgrade(alembic_config(connection, lock_timeout=lock_timeout_seconds), revision)
            return
        except DBAPIError as e:
            if not _retryable(e):
                raise
            reached = current(url_or_engine)
            if time.monotonic() >= deadline:
                raise MigrationLockTimeoutError(
                    f"migrating the metastore lost to live traffic for {retry_for_seconds:g} s "
                    f"({attempt} attempts; at revision {reached or '(empty)'}): {e.orig}",
                    revision=reached,
                    attempts=attempt,
                    last_error=str(e.orig),
                ) from e
            pause = min(5.0, 0.1 * 2 ** min(attempt, 6)) * (0.5 + random.random())
            _log.warning(
                "migration attempt %d stopped at revision %s (%s); retrying in %.2f s",
                attempt,
                reached or "(empty)",
                getattr(e.orig, "sqlstate", "?"),
                pause,
            )
            sleep(pause)


def downgrade(url_or_engine: str | URL | Engine, revision: str) -> None:
    """Downgrade the metastore schema to ``revision`` (``"base"`` removes everything ours).

    Java's three tables are left in Java's own shape at base (see the initial migration).
    """
    with _ALEMBIC_IN_PROCESS, _connection(url_or_engine) as connection:
        command.downgrade(alembic_config(connection, lock_timeout=0), revision)


class SchemaNotReadyError(PaimonMetaError):
    """The metastore's schema is not one this code can serve: empty (never migrated) or older than this
    code's head (fields: ``current``, ``head``). Run ``paimon-meta db upgrade`` (or ``serve --migrate``)."""


def compatible(current_revision: str | None) -> bool:
    """Whether code at this tree's head can run against a metastore at ``current_revision``: the
    compatibility window (docs/DEPLOYMENT.md, "Rolling upgrades"). Migrations are expand/contract: a
    release never removes or renames what the previous release reads or writes, so this code serves its
    own head and any revision it does not know (a newer release's migrations, which only added things);
    a revision older than its head lacks what this code writes, and an empty database has nothing."""
    if current_revision is None:
        return False
    script = ScriptDirectory.from_config(alembic_config())
    head_revisions = set(script.get_heads())
    if current_revision in head_revisions:
        return True
    try:
        return script.get_revision(current_revision) is None
    except Exception:  # unknown to this tree: a newer release migrated the metastore
        return True


def check_compatible(url_or_engine: str | URL | Engine) -> str:
    """The metastore's revision, when :func:`compatible`.

    Raises:
        SchemaNotReadyError: it is empty or older than this code's head (the message says what to run).
    """
    rev = current(url_or_engine)
    if compatible(rev):
        assert rev is not None
        return rev
    head = ", ".join(heads())
    what = (
        "is empty (never migrated)" if rev is None else f"is at revision {rev}, older than this code's {head}"
    )
    raise SchemaNotReadyError(
        f"the metastore's schema {what}: run `paimon-meta db upgrade` first (a migration Job), or start "
        "`paimon-meta serve --migrate` to migrate it at start-up",
        current=rev,
        head=head,
    )


def current(url_or_engine: str | URL | Engine) -> str | None:
    """The revision the database is at, or None if it was never migrated."""
    with _connection(url_or_engine) as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
