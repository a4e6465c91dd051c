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
