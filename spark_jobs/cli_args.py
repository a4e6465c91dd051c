"""Command-line pieces shared by the job entry points: naming the target table and opening it."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

from paimon_meta.table.table import FileStoreTable
from spark_jobs.common import connect_catalog, parse_options

TOKEN_ENV = "PAIMON_META_TOKEN"


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """``--table-path`` (storage-guarded) or ``--table db.t`` with ``--metastore-url/--warehouse``."""
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--table-path", help="table location; commits guarded by storage alone")
    target.add_argument("--table", help="db.table in the metastore catalog")
    parser.add_argument(
        "--metastore-url",
        default=None,
        help="metastore URL (default: $PAIMON_META_URL, else embedded Postgres)",
    )
    parser.add_argument("--warehouse", default=None, help="warehouse root of the catalog")
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
    parser.add_argument("--master", default=None, help="Spark master (default $SPARK_MASTER or local[2])")


def _no_retries() -> int:
    return 0


@dataclass(slots=True)
class OpenedTable:
    """A table opened from the command line, the FileIO options executors need, how to close, and how
    many requests the commit service's client has sent again so far (``--service``; else always 0)."""

    table: FileStoreTable
    io_options: dict[str, str]
    close: Callable[[], None]
    service_retries: Callable[[], int] = _no_retries

    def retries_note(self) -> str:
        """``", N requests to the service sent again"`` for a job's summary line, empty when none."""
        retries = self.service_retries()
        return f", {retries} request(s) to the service sent again" if retries else ""


def open_target(args: argparse.Namespace) -> OpenedTable:
    """The table named by :func:`add_table_arguments`' arguments, open for writing."""
    options = parse_options(args.option)
    if args.table_path:
        from paimon_meta.catalog.storage import open_table

        return OpenedTable(open_table(args.table_path, options), options, lambda: None)
    if args.service:
        # Executors write data files with ``options``; the driver's commit goes to the service: no
        # database credentials anywhere in the job.
        from paimon_meta.catalog.rest import connect_service

        token = args.token or os.environ.get(TOKEN_ENV)
        if not token:
            raise SystemExit(f"--service needs --token or ${TOKEN_ENV}")
        # ``options`` carry the client's rest.retry.* options too (the executors' FileIO ignores them).
        remote = connect_service(args.service, token=token, **options)
        return OpenedTable(remote.get_table(args.table), options, remote.close, lambda: remote.client.retries)
    catalog = connect_catalog(args.metastore_url, args.warehouse, options)
    return OpenedTable(catalog.get_table(args.table), dict(catalog.file_io_options), catalog.close)
