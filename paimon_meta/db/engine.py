"""Engine and session factories for the metastore (PostgreSQL through psycopg 3).

Nothing here runs at import time: callers build an engine from a URL and own its lifetime.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import URL, Engine, create_engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from paimon_meta.db import budget
from paimon_meta.errors import ValidationError

#: The driver every engine uses; plain ``postgresql://`` URLs are rewritten to it.
DRIVER = "postgresql+psycopg"

_ACCEPTED_DRIVERS = frozenset({"postgresql", "postgres", "postgresql+psycopg"})


def normalize_url(url: str | URL) -> URL:
    """Return ``url`` as a SQLAlchemy URL using the psycopg 3 driver.

    Raises:
        ValidationError: the URL names another database or driver.
    """
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed.drivername not in _ACCEPTED_DRIVERS:
        raise ValidationError(
            f"metastore URL must be PostgreSQL via psycopg 3, got driver {parsed.drivername!r}",
            driver=parsed.drivername,
        )
    return parsed.set(drivername=DRIVER)


def libpq_conninfo(url: str | URL) -> str:
    """Render ``url`` as a libpq connection URI (for raw psycopg connections such as LISTEN)."""
    return normalize_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def make_engine(
    url: str | URL,
    *,
    pool_size: int = 5,
    max_overflow: int = 5,
    pool_timeout: float = 30.0,
    pool_recycle: int = 1800,
    application_name: str = "paimon_meta",
    connect_timeout: int = 10,
    echo: bool = False,
    **kwargs: Any,
) -> Engine:
    """Create an Engine for the metastore.

    ``pool_pre_ping`` is on so a connection dropped by a server restart is replaced instead of failing
    the next commit. Pass ``poolclass=NullPool`` for one-shot tools. The pool is small by default: a
    process needs a connection for the commit transaction and one per lease heartbeat; lock waiters use
    their own LISTEN connections.
    """
    connect_args: dict[str, Any] = {
        "application_name": application_name,
        "connect_timeout": connect_timeout,
    }
    connect_args.update(kwargs.pop("connect_args", {}))
    if "poolclass" not in kwargs:
        # Sizing arguments only apply to the default QueuePool (NullPool rejects them).
        kwargs.update(
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
            pool_recycle=pool_recycle,
        )
    engine = create_engine(
        normalize_url(url), pool_pre_ping=True, connect_args=connect_args, echo=echo, **kwargs
    )
    # A request's deadline and cancellation (db/budget.py); nothing outside a request.
    budget.install(engine)
    return engine


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """A ``sessionmaker`` bound to ``engine`` (objects stay usable after commit)."""
    return sessionmaker(bind=engine, expire_on_commit=False)
