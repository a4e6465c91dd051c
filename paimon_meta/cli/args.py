"""Argument parsing the command groups share: the global options, value types and ``Commands``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paimon_meta.cli.config import ENV_CONFIG, HelpFormatter
from paimon_meta.cli.context import ENV_CATALOG, ENV_TOKEN, ENV_URL, ENV_WAREHOUSE, EPILOG, Context, Output

Handler = Callable[[Context, argparse.Namespace], Output]

#: ``--metrics-table-series``' and ``metrics --table-series``' default: ``telemetry.rollup.TABLE_SERIES``
#: (the CLI's parser does not import the package; tests/telemetry check the two agree).
METRICS_TABLE_SERIES = 100


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


# argparse names a type's function when a value does not convert ("invalid _positive value: 'x'"): the
# functions keep the names they had when the CLI was one module, so those messages stay as they were.
positive = _positive
port = _port
non_negative_int = _non_negative_int


def add_globals(parser: argparse.ArgumentParser, default: Any, *, service: bool = True) -> None:
    """``--config``, ``--metastore``, ``--warehouse``, ``--catalog``, ``-o``, ``--token`` (the secrets
    with their ``--X-file`` twins), ``--json``, ``--debug``, ``--log-format``. ``service`` False:
    without the token (a command that never reads through a commit service does not list it)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=default,
        help=f"TOML file of settings: flag > environment > file > default (default ${ENV_CONFIG}; "
        "`paimon-meta config show [COMMAND]` prints what applies)",
    )
    parser.add_argument(
        "--metastore",
        metavar="URL",
        default=default,
        help=f"metastore URL, or a commit service's http(s):// URL (default ${ENV_URL}, else embedded)",
    )
    parser.add_argument(
        "--warehouse",
        metavar="URI",
        default=default,
        help=f"warehouse root (default ${ENV_WAREHOUSE}; not with --catalog)",
    )
    parser.add_argument(
        "--catalog",
        metavar="NAME",
        default=default,
        help=f"act on this catalog of the metastore (paimon-meta catalogs): its warehouse and storage "
        f"profile are the metastore's, not with --warehouse; with a commit service URL, the service's "
        f"catalog NAME (default ${ENV_CATALOG}, else the catalog of --warehouse / the service's default)",
    )
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=default,
        metavar="KEY=VALUE",
        help="catalog/storage option (repeatable)",
    )
    secrets = [("metastore", "the metastore URL (with its password)")]
    secrets.append(("option", "KEY=VALUE options, one a line (storage keys)"))
    if service:
        parser.add_argument(
            "--token",
            metavar="TOKEN",
            default=default,
            help=f"bearer token when --metastore is a commit service URL (default ${ENV_TOKEN})",
        )
        secrets.append(("token", "the bearer token"))
    # A secret's twin: the secret read from a file (a mounted Secret), never needed on the command line.
    for name, what in secrets:
        parser.add_argument(f"--{name}-file", metavar="FILE", default=default, help=f"read {what} from FILE")
    flag_default = False if default is None else default
    parser.add_argument("--json", action="store_true", default=flag_default, help="print results as JSON")
    parser.add_argument(
        "--debug", action="store_true", default=flag_default, help="debug logging and stack traces on errors"
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text" if default is None else default,
        help="log lines as text or as one JSON object each (default text)",
    )


@dataclass(frozen=True, slots=True)
class Commands:
    """Where a command group adds its subcommands: the subparsers of ``paimon-meta`` (or of one of its
    commands that takes an ACTION), and the global options every subcommand accepts after its name too
    (``paimon-meta locks list --json``)."""

    sub: argparse._SubParsersAction[argparse.ArgumentParser]
    common: argparse.ArgumentParser
    #: The global options of a command that only works on the database (no ``--token``).
    local: argparse.ArgumentParser
    #: ``paimon-meta``'s own parser (``config show`` walks it).
    root: argparse.ArgumentParser

    @classmethod
    def of(cls, parser: argparse.ArgumentParser) -> Commands:
        """The commands of the top-level ``parser``."""
        common = argparse.ArgumentParser(add_help=False)
        add_globals(common, argparse.SUPPRESS)
        local = argparse.ArgumentParser(add_help=False)
        add_globals(local, argparse.SUPPRESS, service=False)
        sub = parser.add_subparsers(
            dest="command", metavar="COMMAND", required=True, help="the command (COMMAND --help)"
        )
        return cls(sub, common, local, parser)

    def add(
        self, name: str, handler: Handler, help_text: str, *, remote: bool = False
    ) -> argparse.ArgumentParser:
        """A command; ``remote``: it also reads through a commit service (``--metastore http://``)."""
        p = self.sub.add_parser(
            name,
            parents=[self.common if remote else self.local],
            help=help_text,
            description=help_text,
            epilog=EPILOG,
            formatter_class=HelpFormatter,
        )
        p.set_defaults(handler=handler, remote=remote)
        return p

    def group(self, name: str, help_text: str) -> Commands:
        """A command taking an ACTION (``paimon-meta NAME ACTION``); add the actions with ``action``."""
        parser = self.sub.add_parser(
            name, help=help_text, description=help_text, formatter_class=HelpFormatter
        )
        actions = parser.add_subparsers(
            dest=f"{name}_command", metavar="ACTION", required=True, help=f"what to do ({name} ACTION --help)"
        )
        return Commands(actions, self.common, self.local, self.root)

    def action(self, name: str, handler: Handler, help_text: str, **kwargs: Any) -> argparse.ArgumentParser:
        """An ACTION of a ``group`` (database only); ``kwargs`` go to ``add_parser``."""
        kwargs.setdefault("description", help_text)
        kwargs.setdefault("formatter_class", HelpFormatter)
        p = self.sub.add_parser(name, parents=[self.local], help=help_text, **kwargs)
        p.set_defaults(handler=handler)
        return p
