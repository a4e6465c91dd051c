"""What every ``paimon-meta`` command shares: exit codes, the environment, ``Context`` and ``Output``.

``Context`` holds one invocation's connections: the metastore catalog (``--metastore`` a database URL,
or an embedded Postgres) or the commit service's catalog (``--metastore http(s)://...`` with a token).
A command returns an ``Output``; the entry module (``cli.main``) prints it and exits with its code.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_meta import errors
from paimon_meta.errors import ValidationError
from paimon_meta.ops.common import RefusedError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.catalog.rest import RestCatalog
    from paimon_meta.table.table import FileStoreTable

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_FINDINGS = 5
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILURE: "operational failure (storage or metastore error, unresolved commit, failed demo check)",
    EXIT_USAGE: "usage error (bad arguments or invalid input)",
    EXIT_NOT_FOUND: "not found (table, database, lock, commit or snapshot)",
    EXIT_REFUSED: (
        "conflict or refused (commit conflict, live lock not forced, table lock busy past timeout, "
        "token refused by the service)"
    ),
    EXIT_FINDINGS: "`verify` found inconsistencies (each named in its report)",
}

ENV_URL = "PAIMON_META_URL"
ENV_WAREHOUSE = "PAIMON_META_WAREHOUSE"
#: ``--catalog``'s environment name (as the config layer derives it for a global flag).
ENV_CATALOG = "PAIMON_META_CATALOG"
ENV_OPTIONS = "PAIMON_META_OPTIONS"
ENV_TOKEN = "PAIMON_META_TOKEN"  # as spark_jobs' --service/--token

#: The commands that work with ``--metastore http(s)://...`` (``tags`` only lists there; the on-call
#: commands need an admin grant on the table).
REMOTE_COMMANDS = (
    "tables",
    "snapshots",
    "read",
    "commits",
    "events --table",
    "tags (listing)",
    "credentials",
    "recover, expire-snapshots, remove-orphan-files, locks (admin)",
)
#: Where to look instead, for read-only commands a service does not answer.
_SERVICE_HINTS = {
    "db current": "the service's GET /readyz says whether it is ready (its log says why not)",
    "metrics": "scrape the service's GET /metrics with an admin token",
    "events --access": "the data-access log is the metastore's (paimon_access_events); a service serves "
    "no route for it",
}

EPILOG = (
    "exit codes:\n" + "".join(f"  {code}  {text}\n" for code, text in EXIT_CODES.items()) + "\nenvironment:\n"
    f"  {ENV_URL}        metastore URL (postgresql+psycopg://user@host:5432/db); unset: an embedded\n"
    "                         Postgres under $PAIMON_META_HOME (default ~/.paimon-meta); a commit\n"
    "                         service's http(s)://host:port serves the read-only commands:\n"
    f"                         {', '.join(REMOTE_COMMANDS)}\n"
    f"  {ENV_TOKEN}      bearer token for a commit service URL; --token wins\n"
    f"  {ENV_WAREHOUSE}  warehouse root (/path or s3://bucket/prefix)\n"
    f"  {ENV_CATALOG}    a catalog of the metastore (paimon-meta catalogs), not with a warehouse\n"
    f"  {ENV_OPTIONS}    catalog/storage options, 'k=v,k=v' (s3.endpoint, s3.access-key, s3.secret-key,\n"
    "                         s3.region, s3.path-style-access, lock.lease-seconds, ...); --option wins\n"
    "  PAIMON_META_CONFIG     a TOML file of settings (--config)\n"
    "  every flag also as PAIMON_META_<COMMAND>_<FLAG> (a global one: PAIMON_META_<FLAG>); secrets\n"
    "  (--metastore, --token, --option) also from a file: --X-file or $NAME_FILE. Precedence: flag >\n"
    "  environment > file > default; `paimon-meta config show [COMMAND]` prints each and its source.\n"
    "\ndurations: 90s, 15min, 2h, 1d, 250ms (a bare number is seconds)"
)


def exit_code(error: BaseException) -> int:
    """The exit code ``paimon-meta`` ends with when a command raised ``error``."""
    if isinstance(error, errors.NotFoundError):  # tables, databases, snapshots, tags, locks, commits
        return EXIT_NOT_FOUND
    if isinstance(
        error,
        errors.CommitConflictError
        | errors.DeletionProtectedError
        | RefusedError
        | errors.LockTimeoutError
        | errors.AlreadyExistsError
        | errors.AccessDeniedError,
    ):
        return EXIT_REFUSED
    if isinstance(error, ValidationError):
        return EXIT_USAGE
    return EXIT_FAILURE


@dataclass(slots=True)
class Output:
    """What a command produced: ``data`` for --json, ``text`` for people, and the exit code."""

    data: Any
    text: str
    code: int = EXIT_OK
    extra: list[str] = field(default_factory=list)


class DatabaseUrlRequiredError(errors.UnsupportedError):
    """The command needs the metastore database, and ``--metastore`` is a commit service's URL."""

    def __init__(self, command: str, url: str) -> None:
        hint = _SERVICE_HINTS.get(command)
        super().__init__(
            f"`paimon-meta {command}` needs a database URL (--metastore postgresql+psycopg://...), "
            f"not the commit service {url}; over a service only {', '.join(REMOTE_COMMANDS)} work"
            + (f" ({hint})" if hint else ""),
            command=command,
            url=url,
        )


def is_service_url(url: str | None) -> bool:
    return url is not None and url.startswith(("http://", "https://"))


def command_name(args: argparse.Namespace) -> str:
    """``locks release``, ``db upgrade``, ``tables``: the command as typed, for messages."""
    action = getattr(args, f"{args.command}_command", None)  # db, locks, principals: their ACTION
    return f"{args.command} {action}" if action else str(args.command)


class Context:
    """Connections shared by one invocation, created on first use and closed at the end."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._catalog: MetastoreCatalog | None = None
        self._remote: RestCatalog | None = None
        self._engine: Engine | None = None

    def progress(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def options(self) -> dict[str, str]:
        out: dict[str, str] = {}
        # The file's, then $PAIMON_META_OPTIONS', then the flags' (cli.config gathers them in that order):
        # a later KEY wins.
        for item in self.args.option or []:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValidationError(f"option {item!r} is not KEY=VALUE")
            out[key.strip()] = value.strip()
        return out

    def service_url(self) -> str | None:
        """The commit service ``--metastore`` names, or None when it is a database (or unset)."""
        url: str | None = self.args.metastore or os.environ.get(ENV_URL)
        return url if is_service_url(url) else None

    def require_database(self, command: str | None = None) -> None:
        """Refuse (before anything is done) when ``--metastore`` is a service, not a database."""
        url = self.service_url()
        if url is not None:
            raise DatabaseUrlRequiredError(command or command_name(self.args), url)

    def metastore_url(self) -> str:
        self.require_database()
        url: str | None = self.args.metastore or os.environ.get(ENV_URL)
        if url:
            return url
        from paimon_meta.db.embedded import ensure_embedded_postgres

        self.progress("no --metastore / PAIMON_META_URL: using the embedded Postgres under PAIMON_META_HOME")
        return str(ensure_embedded_postgres().url)

    def catalog_name(self) -> str | None:
        """The metastore's catalog the command acts on (``--catalog``, ``$PAIMON_META_CATALOG`` or the
        file's ``catalog``), None for the one ``--warehouse`` names (as before catalogs existed)."""
        name: str | None = getattr(self.args, "catalog", None) or os.environ.get(ENV_CATALOG) or None
        return name

    def catalog(self) -> MetastoreCatalog:
        """The metastore catalog: ``--catalog NAME`` (its warehouse and storage profile the
        metastore's), else the warehouse ``--warehouse`` names.

        Raises:
            ValidationError: both ``--catalog`` and ``--warehouse`` given (from any source: a warehouse
                beside a catalog would contradict the catalog's or silently lose to it).
            CatalogNotFoundError: ``--catalog`` is not a catalog of the metastore."""
        self.require_database()
        if self._catalog is None:
            import paimon_meta

            name = self.catalog_name()
            warehouse = self.args.warehouse or os.environ.get(ENV_WAREHOUSE) or None
            if name is not None and warehouse is not None:
                raise ValidationError(
                    f"give --catalog {name!r} or --warehouse {warehouse!r} (${ENV_CATALOG} / "
                    f"${ENV_WAREHOUSE}, or the config file's catalog / warehouse), not both: the catalog's "
                    "warehouse and storage profile are the metastore's",
                    options=["--warehouse", "--catalog"],
                )
            self._catalog = paimon_meta.connect(
                self.metastore_url(), warehouse, catalog=name, **self.options()
            )
        return self._catalog

    def engine(self) -> Engine:
        """The metastore's engine, its schema migrated as :meth:`catalog` does, with no catalog nor
        warehouse opened: for what is the whole metastore's (principals; ``--catalog`` there names the
        catalog a grant is in, not one to open)."""
        self.require_database()
        if self._catalog is not None:
            return self._catalog.engine
        if self._engine is None:
            from paimon_meta.db.engine import make_engine
            from paimon_meta.db.migrate import upgrade

            engine = make_engine(self.metastore_url())
            try:
                upgrade(engine)
            except BaseException:
                engine.dispose()
                raise
            self._engine = engine
        return self._engine

    def remote(self) -> RestCatalog | None:
        """The commit service's catalog when ``--metastore`` is one (token: ``--token`` or
        ``$PAIMON_META_TOKEN``), else None: the database path."""
        url = self.service_url()
        if url is None:
            return None
        if self._remote is None:
            token = self.args.token or os.environ.get(ENV_TOKEN)
            if not token:
                raise ValidationError(
                    f"--metastore {url} is a commit service: give its bearer token with --token or "
                    f"${ENV_TOKEN}",
                    url=url,
                )
            from paimon_meta.catalog.rest import connect_service

            self._remote = connect_service(url, token, warehouse=self.catalog_name(), **self.options())
        return self._remote

    def table(self, identifier: str) -> FileStoreTable:
        """A table to read, opened by the database catalog or the commit service."""
        remote = self.remote()
        return self.catalog().get_table(identifier) if remote is None else remote.get_table(identifier)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        if self._catalog is not None:
            self._catalog.close()
        if self._remote is not None:
            self._remote.close()
