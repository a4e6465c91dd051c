"""Alembic environment for the paimon_meta metastore.

Works two ways: from ``alembic.ini`` (the ``alembic`` command; URL from ``-x url=...``, the ini's
``sqlalchemy.url`` or ``$PAIMON_META_DATABASE_URL``) and from code (``paimon_meta.db.migrate`` puts an
open Connection in ``config.attributes["connection"]``).
"""

from __future__ import annotations

import os
from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.pool import NullPool

from paimon_meta.db.engine import normalize_url
from paimon_meta.db.migrate import MIGRATION_LOCK_KEY, VERSION_TABLE
from paimon_meta.db.models import Base
from paimon_meta.errors import ValidationError

config = context.config
target_metadata = Base.metadata


def _configure(**kwargs: Any) -> None:
    context.configure(
        target_metadata=target_metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        compare_server_default=True,
        **kwargs,
    )


def _url() -> str:
    url = (
        context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("PAIMON_META_DATABASE_URL")
    )
    if not url:
        raise ValidationError("no database URL: pass -x url=... or set PAIMON_META_DATABASE_URL")
    return url


def _run(connection: Connection) -> None:
    """Migrate through ``connection``: each revision in its own transaction, each statement waiting at
    most ``lock_timeout`` for a table lock (docs/DEPLOYMENT.md, "Rolling upgrades").

    Invariant: a migration never holds one table's lock while it waits for another's for longer than
    the lock timeout, and never holds the locks of an earlier revision at all, so live replicas' queries
    are neither deadlocked by it nor queued behind it for long. A revision that times out (or loses a
    deadlock) rolls back alone; ``paimon_meta.db.migrate.upgrade`` retries from there.
    """
    lock_timeout_ms = int(config.attributes.get("lock_timeout_ms") or 0)
    # Serialise concurrent runs with a session-level advisory lock, taken before Alembic reads the
    # version table, so a waiter re-reads it after the winner finished and does nothing.
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
    if lock_timeout_ms > 0:
        connection.execute(text(f"SET lock_timeout = {lock_timeout_ms}"))
    connection.commit()
    try:
        # Configured outside any transaction, so Alembic begins (and commits) one per revision.
        _configure(connection=connection, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
    finally:
        try:
            if connection.in_transaction():
                connection.rollback()
            # The connection may return to a pool: leave it as it was found.
            connection.execute(text("RESET lock_timeout"))
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})
            connection.commit()
        except Exception:
            # A connection that cannot even reset is closed rather than pooled (its session, and with
            # it the advisory lock, ends); the migration's own error, if any, is what propagates.
            connection.invalidate()


def main() -> None:
    if context.is_offline_mode():
        _configure(url=str(normalize_url(_url())), literal_binds=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    if config.config_file_name is not None:
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    engine = create_engine(normalize_url(_url()), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


main()
