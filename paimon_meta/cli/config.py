"""Every flag of every command also from the environment and a TOML file: ``paimon-meta config show``.

Precedence, highest first: a flag on the command line, an environment variable, the TOML file
(``--config FILE`` or ``$PAIMON_META_CONFIG``), the flag's default. Nothing here knows a flag by name
except the few globals whose environment names predate it (``GLOBAL_ENV``) and the secrets
(``SECRET_DESTS``): the settings are found by walking the argparse parser's actions, so a flag added to
any command is configurable the day it is added.

Names, for the flag ``--drain-seconds`` of ``serve`` (``--reason`` of ``locks release`` alike):

- environment: ``PAIMON_META_SERVE_DRAIN_SECONDS`` (``PAIMON_META_LOCKS_RELEASE_REASON``); a global
  flag (accepted by every command) has no command in its name: ``PAIMON_META_WAREHOUSE``, and
  ``--metastore`` / ``--option`` keep their ``PAIMON_META_URL`` / ``PAIMON_META_OPTIONS``;
- file: the key ``drain-seconds`` in the table ``[serve]`` (``reason`` in ``[locks.release]``); a
  global flag's key is at the top level. An unknown key or command is refused, naming every one.

Booleans (``--json``, ``--dry-run``) are ``true``/``false`` (``1``/``0``, ``yes``/``no``, ``on``/``off``
in the environment). A repeatable flag (``--option``) gathers its values from every source, the
lowest first, so a flag's ``KEY=VALUE`` overrides the environment's; in the environment its values are
separated by commas or newlines.

Secrets (``--token``, the ``--metastore`` URL with its password, ``--option`` with storage keys) are
never needed on the command line: each has a twin naming a file to read it from (``--token-file``,
``$PAIMON_META_TOKEN_FILE``, the key ``token-file``), at the same precedence as the value itself (giving
both at one level is refused). ``config show`` masks them (and the password of any URL).
"""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paimon_meta.errors import ValidationError

ENV_PREFIX = "PAIMON_META_"
ENV_CONFIG = "PAIMON_META_CONFIG"
#: Global flags whose environment variables kept the names they had before this layer.
GLOBAL_ENV = {"metastore": "PAIMON_META_URL", "option": "PAIMON_META_OPTIONS"}
#: Flags holding secrets: each has a ``--<flag>-file`` twin (dest ``<dest>_file``) and is masked.
SECRET_DESTS = ("metastore", "token", "option")
FILE_TWIN = "_file"
#: Destinations that are not settings: argparse's own, and the file itself.
NOT_SETTINGS = frozenset({"help", "version", "config"})
#: ``--option`` keys whose values are masked.
SECRET_OPTION = re.compile(r"secret|password|token|access-key|session", re.IGNORECASE)
MASK = "****"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
#: Stands for "not given on the command line" while the command line is probed.
_UNSET = object()


class ConfigError(ValidationError):
    """A setting from the environment or the configuration file is unusable (its name is given)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One flag of one command (``command`` empty: a global flag) and its other names."""

    command: tuple[str, ...]
    action: argparse.Action
    declared: Any

    @property
    def dest(self) -> str:
        return self.action.dest

    @property
    def flag(self) -> str:
        return max(self.action.option_strings, key=len)

    @property
    def key(self) -> str:
        """The key in the file (in the command's table)."""
        return self.flag.lstrip("-")

    @property
    def env(self) -> str:
        return env_name(self.command, self.action)

    @property
    def twin_of(self) -> str | None:
        """The secret this flag names a file of (``token`` for ``--token-file``), else None."""
        if self.dest.endswith(FILE_TWIN) and self.dest[: -len(FILE_TWIN)] in SECRET_DESTS:
            return self.dest[: -len(FILE_TWIN)]
        return None

    @property
    def flag_like(self) -> bool:
        return self.action.nargs == 0

    @property
    def repeated(self) -> bool:
        return isinstance(self.action, argparse._AppendAction)


def env_name(command: Sequence[str], action: argparse.Action) -> str:
    """``PAIMON_META_<COMMAND>_<OPTION>`` (no command for a global flag)."""
    dest = action.dest
    if not command:
        if dest in GLOBAL_ENV:
            return GLOBAL_ENV[dest]
        twin = dest[: -len(FILE_TWIN)] if dest.endswith(FILE_TWIN) else None
        if twin in GLOBAL_ENV:
            return GLOBAL_ENV[twin] + "_FILE"
    option = max(action.option_strings, key=len).lstrip("-")
    words = [*command, option]
    return ENV_PREFIX + "_".join(re.sub(r"[^A-Za-z0-9]", "_", w).upper() for w in words)


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest not in NOT_SETTINGS]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands(parser: argparse.ArgumentParser) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every runnable command of ``parser`` (``("serve",)``, ``("locks", "release")``) and its parser."""
    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(path: tuple[str, ...], p: argparse.ArgumentParser) -> None:
        subs = _subcommands(p)
        if path and not subs:
            out[path] = p
        for name, sub in subs.items():
            walk((*path, name), sub)

    walk((), parser)
    return out


class Layers:
    """The settings of a ``paimon-meta`` parser: what each flag's value is, and where it came from."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser
        self.globals = [Setting((), a, a.default) for a in _options(parser)]
        global_dests = {s.dest for s in self.globals}
        self.commands = commands(parser)
        self.by_command = {
            path: [Setting(path, a, a.default) for a in _options(p) if a.dest not in global_dests]
            for path, p in self.commands.items()
        }

    def settings(self, command: tuple[str, ...] | None) -> list[Setting]:
        """The globals, then ``command``'s own flags."""
        return [*self.globals, *(self.by_command.get(command, []) if command else [])]

    def every(self) -> Iterator[Setting]:
        yield from self.globals
        for settings in self.by_command.values():
            yield from settings

    # -- the command line -------------------------------------------------------------------------------

    def relax(self, environ: Mapping[str, str], document: ConfigFile | None) -> None:
        """A required flag whose value the environment or the file gives is no longer required."""
        for s in self.every():
            if s.action.required and (
                _env_value(s, environ) is not None or (document is not None and document.has(s))
            ):
                s.action.required = False

    def given(self, argv: Sequence[str] | None) -> dict[str, Any]:
        """The flags on the command line ``argv`` (which parsed already) and their values."""
        swapped: list[tuple[argparse.Action, Any]] = []
        for s in [*self.globals, *(s for ss in self.by_command.values() for s in ss)]:
            if s.action.default is not argparse.SUPPRESS:
                swapped.append((s.action, s.action.default))
                s.action.default = None if s.repeated else _UNSET
        try:
            probe = self.parser.parse_args(argv)
        finally:
            for action, default in swapped:
                action.default = default
        return {
            k: v
            for k, v in vars(probe).items()
            if v is not _UNSET and not (v is None and k in self._repeated_dests())
        }

    def _repeated_dests(self) -> set[str]:
        return {s.dest for s in self.every() if s.repeated}

    # -- resolution -------------------------------------------------------------------------------------

    def resolve(
        self,
        command: tuple[str, ...] | None,
        given: Mapping[str, Any],
        environ: Mapping[str, str],
        document: ConfigFile | None,
    ) -> list[Resolved]:
        """Each setting of ``command`` (and the globals) with its value and source.

        Raises:
            ConfigError: a value does not convert, or a secret and its file are both given at one level.
        """
        settings = self.settings(command)
        twins = {s.twin_of: s for s in settings if s.twin_of is not None}
        out: list[Resolved] = []
        for s in settings:
            if s.twin_of is not None:
                continue
            out.append(_resolve(s, twins.get(s.dest), given, environ, document))
        return out

    def apply(
        self,
        args: argparse.Namespace,
        argv: Sequence[str] | None,
        environ: Mapping[str, str],
        document: ConfigFile | None,
    ) -> list[Resolved]:
        """Fill ``args`` (parsed from ``argv``) with what the environment and the file give."""
        resolved = self.resolve(command_of(args), self.given(argv), environ, document)
        for r in resolved:
            if r.source != "default" or not hasattr(args, r.setting.dest):
                setattr(args, r.setting.dest, r.value)
        return resolved


@dataclass(frozen=True, slots=True)
class Resolved:
    setting: Setting
    value: Any
    #: ``flag``, ``env NAME``, ``file PATH [KEY]`` or ``default`` (a repeated flag: each joined by ``+``)
    source: str

    def shown(self) -> dict[str, Any]:
        s = self.setting
        return {
            "option": s.flag,
            "value": mask(s.dest, self.value),
            "source": self.source,
            "env": s.env,
            "key": ".".join([*s.command, s.key]),
        }


def command_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The command path ``args`` were parsed for (``("locks", "release")``)."""
    command = getattr(args, "command", None)
    if command is None:
        return ()
    action = getattr(args, f"{command}_command", None)  # db, locks, principals, config: their ACTION
    return (str(command), str(action)) if action else (str(command),)


def _resolve(
    s: Setting,
    twin: Setting | None,
    given: Mapping[str, Any],
    environ: Mapping[str, str],
    document: ConfigFile | None,
) -> Resolved:
    levels: list[tuple[str, Any]] = []  # (source, value), highest precedence first
    # The command line: argparse converted the value already.
    on_line = given.get(s.dest)
    from_file = given.get(twin.dest) if twin is not None else None
    if on_line is not None and from_file is not None and twin is not None:
        raise ConfigError(f"give {s.flag} or {twin.flag}, not both", option=s.flag)
    if from_file is not None and twin is not None:
        levels.append(("flag " + twin.flag, _convert(s, _read_secret(from_file, twin.flag), twin.flag)))
    elif on_line is not None:
        levels.append(("flag", on_line))
    # The environment.
    raw = environ.get(s.env)
    raw_file = environ.get(s.env + "_FILE") if twin is not None else None
    if raw is not None and raw_file is not None:
        raise ConfigError(
            f"give ${s.env} or ${s.env}_FILE, not both", option=s.flag, env=[s.env, s.env + "_FILE"]
        )
    where = f"${s.env}"
    if raw_file is not None:
        where = f"${s.env}_FILE ({raw_file})"
        raw = _read_secret(raw_file, f"${s.env}_FILE")
    if raw is not None:
        levels.append((f"env {s.env}" + ("_FILE" if raw_file is not None else ""), _convert(s, raw, where)))
    # The file.
    if document is not None:
        found = document.value(s, twin)
        if found is not None:
            source, value = found
            levels.append((source, value))
    if s.repeated:
        values: list[Any] = list(s.declared or [])
        for _, value in reversed(levels):
            values.extend(value)
        source = " + ".join(src for src, _ in reversed(levels)) or "default"
        return Resolved(s, values or s.declared, source)
    if levels:
        return Resolved(s, levels[0][1], levels[0][0])
    return Resolved(s, s.declared, "default")


def _read_secret(path: str, where: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read {path!r}: {e.strerror or e}", path=path) from None


def _env_value(s: Setting, environ: Mapping[str, str]) -> str | None:
    value = environ.get(s.env)
    if value is None and s.dest in SECRET_DESTS:
        value = environ.get(s.env + "_FILE")
    return value


def _convert(s: Setting, raw: Any, where: str) -> Any:
    """``raw`` (text from the environment or a file, or a TOML value) as the flag's value."""
    action = s.action
    if s.flag_like:
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            on = raw.strip().lower() in _TRUE
        elif isinstance(raw, bool):
            on = raw
        else:
            raise ConfigError(f"{where}: {s.flag} is true or false, got {raw!r}", option=s.flag)
        return action.const if on else s.declared
    if s.repeated:
        items = raw if isinstance(raw, list) else _split(raw) if isinstance(raw, str) else None
        if isinstance(raw, dict):
            items = [f"{k}={v}" for k, v in raw.items()]
        if items is None:
            raise ConfigError(f"{where}: {s.flag} takes a list, got {raw!r}", option=s.flag)
        return [_one(s, item, where) for item in items]
    return _one(s, raw, where)


def _one(s: Setting, raw: Any, where: str) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ConfigError(f"{where}: {s.flag} takes one value, got {raw!r}", option=s.flag)
    text = str(raw)
    convert = s.action.type
    try:
        value = convert(text) if callable(convert) else text
    except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
        raise ConfigError(f"{where}: {s.flag} {text!r}: {e}", option=s.flag) from None
    choices = s.action.choices
    if choices is not None and value not in choices:
        raise ConfigError(
            f"{where}: {s.flag} {text!r} is not one of {', '.join(map(str, choices))}", option=s.flag
        )
    return value


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.replace("\n", ",").split(",") if p.strip()]


# -- the file ---------------------------------------------------------------------------------------------


class ConfigFile:
    """A TOML file of settings, its keys checked against the parser's flags."""

    def __init__(self, path: str, data: Mapping[str, Any], layers: Layers) -> None:
        self.path = path
        self.data = data
        unknown = sorted(_unknown(data, layers))
        if unknown:
            raise ConfigError(
                f"config file {path}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                "(see `paimon-meta config show [COMMAND]`)",
                path=path,
                keys=unknown,
            )

    @classmethod
    def load(cls, path: str, layers: Layers) -> ConfigFile:
        """Raises: ConfigError: the file cannot be read, is not TOML, or has an unknown key."""
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except OSError as e:
            raise ConfigError(f"config file {path}: {e.strerror or e}", path=path) from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path}: not TOML: {e}", path=path) from None
        return cls(path, data, layers)

    def _table(self, command: tuple[str, ...]) -> Mapping[str, Any]:
        table: Any = self.data
        for word in command:
            table = table.get(word, {}) if isinstance(table, Mapping) else {}
        return table if isinstance(table, Mapping) else {}

    def _lookup(self, s: Setting) -> tuple[str, Any] | None:
        table = self._table(s.command)
        for key in (s.key, s.key.replace("-", "_")):
            if key in table:
                return ".".join([*s.command, key]), table[key]
        return None

    def has(self, s: Setting) -> bool:
        return self._lookup(s) is not None

    def value(self, s: Setting, twin: Setting | None) -> tuple[str, Any] | None:
        """``(source, value)`` the file gives ``s`` (or its file twin), else None."""
        direct = self._lookup(s)
        indirect = self._lookup(twin) if twin is not None else None
        if direct is not None and indirect is not None:
            raise ConfigError(
                f"config file {self.path}: give {direct[0]} or {indirect[0]}, not both", path=self.path
            )
        if indirect is not None:
            key, path = indirect
            where = f"config file {self.path}, key {key}"
            if not isinstance(path, str):
                raise ConfigError(f"{where}: a file name, got {path!r}", path=self.path, key=key)
            return f"file {self.path} [{key}]", _convert(s, _read_secret(path, where), where)
        if direct is None:
            return None
        key, raw = direct
        where = f"config file {self.path}, key {key}"
        return f"file {self.path} [{key}]", _convert(s, raw, where)


def _keys(settings: Sequence[Setting]) -> set[str]:
    return {k for s in settings for k in (s.key, s.key.replace("-", "_"))}


def _unknown(data: Mapping[str, Any], layers: Layers) -> Iterator[str]:
    top = _keys(layers.globals)
    tree: dict[str, Any] = {}
    for path in layers.commands:
        node = tree
        for word in path:
            node = node.setdefault(word, {})

    def walk(table: Mapping[str, Any], prefix: tuple[str, ...], node: dict[str, Any]) -> Iterator[str]:
        allowed = _keys(layers.by_command.get(prefix, [])) if prefix else top
        for key, value in table.items():
            dotted = ".".join([*prefix, key])
            if key in node:
                if isinstance(value, Mapping):
                    yield from walk(value, (*prefix, key), node[key])
                else:
                    yield f"{dotted} (a command: a table)"
            elif key not in allowed:
                yield dotted

    yield from walk(data, (), tree)


def config_path(argv: Sequence[str] | None, environ: Mapping[str, str]) -> str | None:
    """The file ``--config FILE`` (or ``--config=FILE``) in ``argv`` names, else ``$PAIMON_META_CONFIG``."""
    words = list(argv or [])
    for i, word in enumerate(words):
        if word == "--":
            break
        if word == "--config" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--config="):
            return word.split("=", 1)[1]
    return environ.get(ENV_CONFIG) or None


# -- masking ----------------------------------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<password>[^@/\s]+)(?=@)")


def mask_url(text: str) -> str:
    """``text`` with the password of any URL in it replaced (``postgresql://u:****@h/db``)."""
    return _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def mask(dest: str, value: Any) -> Any:
    """``value`` of the setting ``dest`` as it may be shown: secrets masked."""
    if value is None or value is False:
        return value
    if dest == "token":
        return MASK
    if isinstance(value, list):
        return [_mask_option(v) if dest == "option" else mask(dest, v) for v in value]
    if isinstance(value, str):
        return mask_url(value)
    return value


def _mask_option(item: Any) -> Any:
    key, sep, _ = str(item).partition("=")
    if sep and SECRET_OPTION.search(key):
        return f"{key}={MASK}"
    return mask_url(str(item))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each flag's help with its default (unless the text says it) and its environment variable."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or action.dest in NOT_SETTINGS or text == argparse.SUPPRESS:
            return text
        default = action.default
        command: tuple[str, ...] = tuple(self._prog.split()[1:])
        if default is argparse.SUPPRESS:  # a global flag repeated after the command
            command = ()
        elif default not in (None, False, [], "") and "default" not in text:
            text += f" (default: {str(default).replace('%', '%%')})"
        return f"{text} [${env_name(command, action)}]"
