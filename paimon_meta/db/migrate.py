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
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import URL, Connection, Engine
from sqlalchemy.pool import NullPool

from paimon_meta.db.engine import make_engine
from paimon_meta.errors import PaimonMetaError

#: Alembic's version table, named so it cannot collide with another application's in the same database.
VERSION_TABLE = "paimon_meta_alembic_version"

#: Advisory lock key (signed 64-bit) that serialises concurrent migration runs on one database.
MIGRATION_LOCK_KEY = int.from_bytes(hashlib.sha256(b"paimon_meta.migrate").digest()[:8], "big", signed=True)

_ENV_SCRIPT_LOCATION = "PAIMON_META_MIGRATIONS"

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


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic Config built in code; with ``connection`` set, env.py migrates through it."""
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["connection"] = connection
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


def upgrade(url_or_engine: str | URL | Engine, revision: str = "head") -> None:
    """Upgrade the metastore schema to ``revision`` (serialised across processes)."""
    with _ALEMBIC_IN_PROCESS, _connection(url_or_engine) as connection:
        command.upgrade(alembic_config(connection), revision)


def downgrade(url_or_engine: str | URL | Engine, revision: str) -> None:
    """Downgrade the metastore schema to ``revision`` (``"base"`` removes everything ours).

    Java's three tables are left in Java's own shape at base (see the initial migration).
    """
    with _ALEMBIC_IN_PROCESS, _connection(url_or_engine) as connection:
        command.downgrade(alembic_config(connection), revision)


def current(url_or_engine: str | URL | Engine) -> str | None:
    """The revision the database is at, or None if it was never migrated."""
    with _connection(url_or_engine) as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()
