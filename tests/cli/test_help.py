"""The command line explains itself: ``--version``, a description on every command and ACTION, help on
every argument, defaults shown, and each flag listed only where it is accepted."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from paimon_meta.cli.main import build_parser, main


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


PARSERS = list(_parsers(build_parser()))


@pytest.mark.parametrize("parser", [p for _, p in PARSERS], ids=[" ".join(c) or "-" for c, _ in PARSERS])
def test_every_command_and_argument_is_described(parser: argparse.ArgumentParser) -> None:
    assert parser.description, parser.prog
    undescribed = [a.dest for a in parser._actions if not a.help]
    assert not undescribed, f"{parser.prog}: arguments without help: {undescribed}"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("paimon-meta ")


def test_serve_help_shows_each_default_and_variable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split("options:", 1)[1].split())
    (serve,) = [p for c, p in PARSERS if c == ("serve",)]
    for action in serve._actions:
        if not action.option_strings or action.dest == "help" or action.default is argparse.SUPPRESS:
            continue
        start = text.index(max(action.option_strings, key=len))
        entry = text[start : start + 600]
        assert "$PAIMON_META_SERVE_" in entry, action.dest
        if action.default not in (None, False, ""):
            assert "default" in entry.split("$PAIMON_META_SERVE_")[0], (action.dest, entry[:200])


def test_flags_are_listed_only_where_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    # --token is for the commands that read through a commit service, not for database-only ones.
    assert main(["db", "upgrade", "--help"]) == 0
    assert "--token" not in capsys.readouterr().out
    assert main(["db", "upgrade", "--token", "t"]) == 2
    assert "unrecognized arguments: --token" in capsys.readouterr().err
    assert main(["tables", "--help"]) == 0
    assert "--token TOKEN" in capsys.readouterr().out
