"""Command-line pieces shared by the job entry points: naming the target table and opening it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from paimon_meta.table.table import FileStoreTable
from spark_jobs.common import connect_catalog, parse_options


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
        "--option", action="append", default=[], help="FileIO/catalog option k=v (repeatable)"
    )
    parser.add_argument("--master", default=None, help="Spark master (default $SPARK_MASTER or local[2])")


@dataclass(slots=True)
class OpenedTable:
    """A table opened from the command line, the FileIO options executors need, and how to close."""

    table: FileStoreTable
    io_options: dict[str, str]
    close: Callable[[], None]


def open_target(args: argparse.Namespace) -> OpenedTable:
    """The table named by :func:`add_table_arguments`' arguments, open for writing."""
    options = parse_options(args.option)
    if args.table_path:
        from paimon_meta.client import open_table

        return OpenedTable(open_table(args.table_path, options), options, lambda: None)
    catalog = connect_catalog(args.metastore_url, args.warehouse, options)
    return OpenedTable(catalog.get_table(args.table), dict(catalog.file_io_options), catalog.close)
