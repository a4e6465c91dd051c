"""The ``paimon-meta`` command: metastore, tables, commits, locks, recovery, maintenance, metrics, demo.

``main(argv)`` returns the exit code (see ``cli.context.EXIT_CODES``); the console script and ``python -m
paimon_meta.cli`` exit with it. Results go to stdout (aligned tables, or JSON with ``--json``); progress
of long work and errors go to stderr, errors as one line (with the traceback under ``--debug``).

``--metastore`` is a database URL, or the URL of a commit service (``paimon-meta serve``) with a token:
then the read-only and audit commands (``REMOTE_COMMANDS``) read through the service (``cli.remote``)
and every other command is refused (``DatabaseUrlRequiredError``) before anything is done.

Each command group is a module of this package with a ``register(commands)`` that adds its subcommands
and their handlers; ``GROUPS`` lists them in the order ``paimon-meta --help`` shows them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence

from paimon_meta.cli import (
    audit,
    catalogs,
    db,
    demo,
    governance,
    locks,
    logs,
    maintain,
    maintenance,
    metrics,
    principals,
    render,
    serve,
    settings,
    tables,
    tags,
    verify,
)
from paimon_meta.cli.args import Commands, add_globals
from paimon_meta.cli.config import ConfigError, ConfigFile, HelpFormatter, Layers, config_path
from paimon_meta.cli.context import EPILOG, EXIT_OK, EXIT_USAGE, Context, Output, exit_code
from paimon_meta.errors import PaimonMetaError

GROUPS = (
    db,
    tables,
    audit,
    locks,
    maintenance,
    maintain,
    verify,
    metrics,
    serve,
    tags,
    principals,
    governance,
    catalogs,
    settings,
    demo,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``paimon-meta --help`` documents exit codes and environment)."""
    parser = argparse.ArgumentParser(
        prog="paimon-meta",
        description="Operate Apache Paimon tables committed through a Postgres metastore.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    add_globals(parser, None)
    # The global options are accepted after the command too (``paimon-meta locks list --json``).
    commands = Commands.of(parser)
    for group in GROUPS:
        group.register(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("paimon-meta")
    except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``paimon-meta`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`| head`): what it did not read is nobody's; nothing to report. Python
        # would complain again flushing stdout at exit, so stdout points at /dev/null from here on.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def parse(
    argv: Sequence[str], environ: Mapping[str, str], parser: argparse.ArgumentParser | None = None
) -> argparse.Namespace:
    """``argv`` parsed, then completed from ``environ`` and the TOML file (flag > environment > file >
    default; ``cli.config``).

    Raises:
        SystemExit: ``--help`` (0) or a usage error (2), as argparse does.
        ConfigError: the file or a variable is unusable (it is named).
    """
    parser = parser or build_parser()
    layers = Layers(parser)
    path = config_path(argv, environ)
    # The file's keys are checked before anything runs, whichever command runs.
    document = ConfigFile.load(path, layers) if path else None
    layers.relax(environ, document)
    args = parser.parse_args(argv)
    layers.apply(args, argv, environ, document)
    return args


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse(argv, os.environ)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return int(e.code or 0) if isinstance(e.code, int) else EXIT_USAGE
    except ConfigError as e:
        return _failed(e, argparse.Namespace(json="--json" in argv, debug=False))
    logs.configure(args.log_format, logging.DEBUG if args.debug else logging.WARNING)
    ctx = Context(args)
    try:
        if not getattr(args, "remote", False):
            ctx.require_database()
        out: Output = args.handler(ctx, args)
    except KeyboardInterrupt:
        print("paimon-meta: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except Exception as e:
        return _failed(e, args)
    finally:
        ctx.close()
    if args.json:
        print(render.to_json(out.data))
    elif out.text:
        print(out.text)
    return out.code


def _failed(error: Exception, args: argparse.Namespace) -> int:
    """Report ``error`` on stderr (and as JSON on stdout under ``--json``); its exit code."""
    code = exit_code(error)
    if args.debug:
        traceback.print_exc()
    print(f"paimon-meta: error: {_one_line(error)}", file=sys.stderr)
    if args.json:
        fields = getattr(error, "fields", {})
        print(
            render.to_json(
                {"error": _one_line(error), "type": type(error).__name__, "exit_code": code, "fields": fields}
            )
        )
    return code


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    if not isinstance(error, PaimonMetaError):
        text = f"{type(error).__name__}: {text}"
    return text
