"""``paimon-meta config show [COMMAND]``: every setting of a command, its value and where it came from."""

from __future__ import annotations

import argparse
import os

from paimon_meta.cli import render
from paimon_meta.cli.args import Commands
from paimon_meta.cli.config import ConfigError, ConfigFile, Layers, config_path
from paimon_meta.cli.context import Context, Output

PRECEDENCE = "flag > environment > file > default"


def register(commands: Commands) -> None:
    config = commands.group(
        "config", "the settings of every command: flags, PAIMON_META_* variables and a TOML file (--config)"
    )
    p = config.action(
        "show",
        _show,
        f"print the settings of COMMAND (and the global ones) with their values, secrets masked, and where "
        f"each came from ({PRECEDENCE})",
    )
    p.add_argument(
        "words",
        nargs="*",
        metavar="COMMAND",
        help="a command, e.g. serve or locks release (default: only the global settings)",
    )
    p.set_defaults(remote=True, parser=commands.root)  # reads no database


def _show(ctx: Context, args: argparse.Namespace) -> Output:
    layers = Layers(args.parser)
    command = tuple(args.words)
    if command and command not in layers.commands:
        known = ", ".join(" ".join(c) for c in sorted(layers.commands))
        raise ConfigError(f"no command {' '.join(command)!r}; one of: {known}", command=" ".join(command))
    path = config_path([], os.environ) if args.config is None else args.config
    document = ConfigFile.load(path, layers) if path else None
    rows = [r.shown() for r in layers.resolve(command or None, {}, os.environ, document)]
    head = f"precedence: {PRECEDENCE}; file: {path or '(none: --config or $PAIMON_META_CONFIG)'}"
    data = {"command": " ".join(command), "file": path, "precedence": PRECEDENCE, "settings": rows}
    return Output(data, head + "\n" + render.table(rows, ["option", "value", "source", "env", "key"]))
