"""Command-line pieces shared by the job entry points: naming the target table and opening it."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from paimon_meta.errors import FileIOError, StorageOptionsMissingError, ValidationError
from paimon_meta.table.table import FileStoreTable
from spark_jobs.common import connect_catalog, parse_options, refuse_warehouse_and_catalog

TOKEN_ENV = "PAIMON_META_TOKEN"


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """``--table-path`` (storage-guarded) or ``--table db.t`` with ``--metastore`` and ``--warehouse``
    or ``--catalog NAME`` (the ``paimon-meta`` CLI's names; ``--metastore-url`` is kept as an alias)."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--table-path", help="table location; commits guarded by storage alone")
    target.add_argument("--table", help="db.table in the metastore catalog")
    parser.add_argument(
        "--metastore",
        "--metastore-url",
        dest="metastore_url",
        default=None,
        metavar="URL",
        help="metastore URL, as paimon-meta's --metastore (default: $PAIMON_META_URL, else embedded "
        "Postgres); --metastore-url is an alias",
    )
    parser.add_argument(
        "--warehouse", default=None, help="warehouse root of the catalog (not with --catalog)"
    )
    parser.add_argument(
        "--catalog",
        default=None,
        metavar="NAME",
        help="a catalog of the metastore (paimon-meta catalogs create): its warehouse and storage "
        "profile are the metastore's (not with --warehouse); with --service, the service's catalog NAME",
    )
    parser.add_argument(
        "--service",
        default=None,
        metavar="URL",
        help="commit through a paimon-meta serve catalog instead of the database (with --table)",
    )
    parser.add_argument(
        "--token", default=None, help="bearer token for --service (default $PAIMON_META_TOKEN)"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        help="FileIO/catalog option k=v (repeatable); with --service also rest.retry.deadline-seconds "
        "(30; 0: no retries) and rest.retry.max-backoff-seconds (5)",
    )
    parser.add_argument(
        "--option-file",
        default=None,
        metavar="PATH",
        help="FileIO/catalog options from a file, one KEY=VALUE a line (# comments), under --option: "
        "storage keys kept off the command line",
    )
    parser.add_argument("--master", default=None, help="Spark master (default $SPARK_MASTER or local[2])")


def read_option_file(path: str) -> dict[str, str]:
    """The ``KEY=VALUE`` lines of ``path`` (blank lines and ``#`` comments skipped).

    Raises:
        ValidationError: a line that is not ``KEY=VALUE`` (named by its number, never its text: it may
            hold a secret)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            key, sep, value = text.partition("=")
            if not sep or not key.strip():
                raise ValidationError(
                    f"line {number} of the option file {path} is not KEY=VALUE", path=path, line=number
                )
            out[key.strip()] = value.strip()
    return out


def _no_retries() -> int:
    return 0


@dataclass(slots=True)
class OpenedTable:
    """A table opened from the command line (or the data source's options), how to close it, and how
    many requests the commit service's client has sent again so far (``--service``; else always 0).

    ``options`` are the job's own storage options (``--option``; for a metastore catalog its
    ``file_io_options``). They open the table's files unless the service vends credentials, and they
    always open storage outside the table -- a checkpoint, the data source's attempts directory:
    vended credentials are scoped to the table's location and do not reach those.
    ``vended``: set when the service vends credentials; returns the options executors open the table
    with (the job's options with the current vended credentials over them, fetched again when near
    their expiry). Read :attr:`io_options` -- or hand :meth:`fresh_io_options` to a function that starts
    several sets of tasks -- right before starting tasks, never once for a whole long job."""

    table: FileStoreTable
    options: dict[str, str]
    close: Callable[[], None]
    service_retries: Callable[[], int] = _no_retries
    vended: Callable[[], dict[str, str]] | None = None

    @property
    def vends(self) -> bool:
        """Whether the table's files are opened with credentials the service vends."""
        return self.vended is not None

    def fresh_io_options(self) -> dict[str, str]:
        """The options executors open the table's files with, for tasks starting now (a provider:
        see :data:`spark_jobs.common.IoOptions`)."""
        return self.vended() if self.vended is not None else dict(self.options)

    @property
    def io_options(self) -> dict[str, str]:
        """:meth:`fresh_io_options`, taken now."""
        return self.fresh_io_options()

    def retries_note(self) -> str:
        """``", N requests to the service sent again"`` for a job's summary line, empty when none."""
        retries = self.service_retries()
        return f", {retries} request(s) to the service sent again" if retries else ""


def open_service_table(
    uri: str, token: str, identifier: str, options: Mapping[str, str], *, catalog_name: str | None = None
) -> OpenedTable:
    """``identifier`` of the commit service at ``uri``, its commits going to the service. ``options``
    are the job's storage options and the client's ``rest.*`` options (the executors' FileIO ignores
    those). When the service vends storage credentials (its ``/v1/config`` says
    ``data-token.enabled``), the table's files are opened with them: on the driver through the
    catalog's ``VendedFileIO``, on executors through ``RestCatalog.table_io_options`` taken for each
    new set of tasks."""
    from paimon_meta.catalog.rest import connect_service

    remote = connect_service(uri, token=token, catalog_name=catalog_name, **options)
    try:
        table = remote.get_table(identifier)
        vended = (
            functools.partial(remote.table_io_options, identifier)
            if remote.client.data_token_enabled
            else None
        )
    except BaseException:
        remote.close()
        raise
    return OpenedTable(table, dict(options), remote.close, lambda: remote.client.retries, vended)


def open_target(args: argparse.Namespace) -> OpenedTable:
    """The table named by :func:`add_table_arguments`' arguments, open for writing.

    Raises:
        ValidationError: ``--catalog`` with ``--warehouse`` or ``--table-path`` (naming both).
        CatalogNotFoundError: ``--catalog`` is not a catalog of the metastore."""
    option_file: str | None = getattr(args, "option_file", None)
    options = {**(read_option_file(option_file) if option_file else {}), **parse_options(args.option)}
    catalog_name: str | None = getattr(args, "catalog", None)
    # getattr: callers building a Namespace by hand for a table location give neither
    refuse_warehouse_and_catalog(getattr(args, "warehouse", None), catalog_name, "--warehouse", "--catalog")
    if args.table_path and catalog_name is not None:
        raise ValidationError(
            f"give --catalog {catalog_name!r} with --table db.t, not --table-path: a table location "
            "is opened without a catalog",
            options=["--table-path", "--catalog"],
        )
    if args.table_path:
        from paimon_meta.catalog.storage import open_table

        return OpenedTable(open_table(args.table_path, options), options, lambda: None)
    if args.service:
        # The driver's commit goes to the service: no database credentials anywhere in the job; the
        # executors write data files with ``options``, or with the credentials the service vends.
        token = args.token or os.environ.get(TOKEN_ENV)
        if not token:
            raise SystemExit(f"--service needs --token or ${TOKEN_ENV}")
        return open_service_table(args.service, token, args.table, options, catalog_name=catalog_name)
    catalog = connect_catalog(args.metastore_url, args.warehouse, options, catalog=catalog_name)
    try:
        return OpenedTable(catalog.get_table(args.table), dict(catalog.file_io_options), catalog.close)
    except BaseException:
        catalog.close()
        raise


@contextlib.contextmanager
def outside_table_storage(location: str, what: str, *, table_vends: bool) -> Iterator[None]:
    """Storage errors at ``location`` (``what``: "checkpoint location", ...), which is not the table's,
    when the table's files are opened with vended credentials: the job's own options (the only ones
    used there: vended credentials are scoped to the table and must not be used elsewhere) found no
    credentials for it, or were refused. Re-raised as a
    :class:`~paimon_meta.errors.StorageOptionsMissingError` saying so, instead of an error that reads
    as if the table's credentials failed. Without vending, errors pass unchanged."""
    try:
        yield
    except (StorageOptionsMissingError, FileIOError) as e:
        refused = isinstance(e, StorageOptionsMissingError) or e.fields.get("code") in _REFUSED_CODES
        if not table_vends or not refused:
            raise
        raise StorageOptionsMissingError(
            f"the {what} {location} is not in the table's location, so the storage credentials the "
            "commit service vends for the table (scoped to it) are not used there: it is opened with the "
            f"job's own storage options, and those have no working credentials for it ({e}). Give the job "
            "its own storage options for it (the jobs' --option s3.access-key=... --option "
            "s3.secret-key=..., the data source's s3.* options, or the AWS SDK's environment), or use a "
            "location on the driver's file system",
            options=["s3.access-key", "s3.secret-key"],
            uri=location,
        ) from e


#: Storage error codes of credentials that are missing, invalid or not allowed there.
_REFUSED_CODES = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "403"}
)
