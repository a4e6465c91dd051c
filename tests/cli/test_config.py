"""Settings from flags, ``PAIMON_META_*`` variables and a TOML file (``cli.config``): precedence for
every flag of ``serve``, the file's errors, secrets from files, masking, JSON log lines."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from paimon_meta.cli import logs
from paimon_meta.cli.config import ConfigError, Layers, Setting
from paimon_meta.cli.main import build_parser, main, parse
from tests.fixtures.service import REPO

SERVE = ("serve",)
_LAYERS = Layers(build_parser())
_SERVE_SETTINGS = [s for s in _LAYERS.settings(SERVE) if s.twin_of is None and s.dest != "config"]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def _write(path: Path, top: dict[str, Any], tables: dict[str, dict[str, Any]]) -> str:
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines += [f'"{k}" = {_toml(v)}' for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _three(s: Setting) -> tuple[Any, Any, Any]:
    """Three different valid values of ``s`` (for the flag, the environment, the file)."""
    if s.action.choices is not None:
        choices = list(s.action.choices)
        from_file = next(c for c in choices if c != s.declared)
        from_env = next(c for c in choices if c != from_file)
        return next(c for c in choices if c != from_env), from_env, from_file
    if s.action.type is float:
        return 1.5, 2.5, 3.5
    if s.action.type is not None:  # int, positive, port
        return 7, 8, 9
    return f"flag-{s.dest}", f"env-{s.dest}", f"file-{s.dest}"


def _arg(s: Setting, value: Any) -> list[str]:
    return [s.flag, str(value)]


def _resolved(argv: list[str], env: dict[str, str]) -> argparse.Namespace:
    return parse(argv, env)


def _base(tmp_path: Path) -> dict[str, str]:
    return {"PAIMON_META_HOME": str(tmp_path)}  # nothing else of the process's environment


@pytest.mark.parametrize("setting", _SERVE_SETTINGS, ids=[s.flag for s in _SERVE_SETTINGS])
def test_precedence_of_every_serve_flag(setting: Setting, tmp_path: Path) -> None:
    """flag > environment > file > default, for each flag of ``serve`` (its own and the global ones)."""
    s = setting
    table = "serve" if s.command else None

    def document(value: Any) -> str:
        key = s.key
        if table is None:
            return _write(tmp_path / "c.toml", {key: value}, {})
        return _write(tmp_path / "c.toml", {}, {table: {key: value}})

    env = _base(tmp_path)
    if s.flag_like:
        # The file says on, the environment off, the flag on.
        assert getattr(_resolved(["serve"], env), s.dest) is False
        path = document(True)
        assert getattr(_resolved(["--config", path, "serve"], env), s.dest) is True
        env[s.env] = "false"
        assert getattr(_resolved(["--config", path, "serve"], env), s.dest) is False
        line = [s.flag, "serve"] if not s.command else ["serve", s.flag]
        assert getattr(_resolved(["--config", path, *line], env), s.dest) is True
        return
    if s.repeated:
        path = document(["k=file", "f=1"])
        env[s.env] = "k=env,e=1"
        line = [s.flag, "k=flag", "serve"] if not s.command else ["serve", s.flag, "k=flag"]
        got = getattr(_resolved(["--config", path, *line], env), s.dest)
        # Every source's values, the lowest first: the flag's KEY=VALUE wins.
        assert got == ["k=file", "f=1", "k=env", "e=1", "k=flag"]
        return
    flag, from_env, from_file = _three(s)
    default = getattr(_resolved(["serve"], env), s.dest)
    assert default == (
        s.action.type(s.declared) if isinstance(s.declared, str) and callable(s.action.type) else s.declared
    )
    path = document(from_file)
    assert getattr(_resolved(["--config", path, "serve"], env), s.dest) == from_file
    env[s.env] = str(from_env)
    assert getattr(_resolved(["--config", path, "serve"], env), s.dest) == from_env
    # A global flag before the command (it is not every command's), a command's flag after it.
    line = [*_arg(s, flag), "serve"] if not s.command else ["serve", *_arg(s, flag)]
    assert getattr(_resolved(["--config", path, *line], env), s.dest) == flag
    # The config file named by the environment as well as by --config.
    env["PAIMON_META_CONFIG"] = path
    del env[s.env]
    assert getattr(_resolved(["serve"], env), s.dest) == from_file


def test_every_setting_has_its_own_environment_variable() -> None:
    names = [s.env for s in _LAYERS.every()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {"PAIMON_META_URL", "PAIMON_META_TOKEN", "PAIMON_META_WAREHOUSE", "PAIMON_META_OPTIONS"} <= set(
        names
    )
    by_flag = {(s.command, s.flag): s.env for s in _LAYERS.every()}
    assert by_flag[(("locks", "release"), "--reason")] == "PAIMON_META_LOCKS_RELEASE_REASON"
    assert by_flag[(SERVE, "--drain-seconds")] == "PAIMON_META_SERVE_DRAIN_SECONDS"


def test_a_required_flag_from_the_environment(tmp_path: Path) -> None:
    env = {**_base(tmp_path), "PAIMON_META_LOCKS_RELEASE_REASON": "stuck writer"}
    args = _resolved(["locks", "release", "db.t"], env)
    assert args.reason == "stuck writer"
    with pytest.raises(SystemExit):
        _resolved(["locks", "release", "db.t"], _base(tmp_path))


def test_values_from_the_environment_are_checked(tmp_path: Path) -> None:
    for name, value, words in (
        ("PAIMON_META_SERVE_PORT", "eighty", "--port 'eighty'"),
        ("PAIMON_META_SERVE_LOG_LEVEL", "loud", "not one of debug, info"),
        ("PAIMON_META_JSON", "maybe", "--json is true or false"),
        ("PAIMON_META_READ_LIMIT", "0", "must be >= 1"),
    ):
        with pytest.raises(ConfigError) as raised:
            _resolved(
                ["serve"] if "SERVE" in name or name == "PAIMON_META_JSON" else ["read", "db.t"],
                {**_base(tmp_path), name: value},
            )
        assert name in str(raised.value) and words in str(raised.value), raised.value


def test_unknown_keys_in_the_file_are_refused_naming_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path / "c.toml",
        {"warehous": "/w", "serve": 1},
        {"servee": {"port": 1}, "locks": {"release": "x"}, "db.upgrade": {"colour": "red"}},
    )
    with pytest.raises(ConfigError) as raised:
        _resolved(["--config", path, "tables"], _base(tmp_path))
    keys = raised.value.fields["keys"]
    assert keys == sorted(
        [
            "warehous",
            "serve (a command: a table)",
            "servee",
            "locks.release (a command: a table)",
            "db.upgrade.colour",
        ]
    )
    for key in ("warehous", "servee", "db.upgrade.colour"):
        assert key in str(raised.value)
    # From the command line: exit 2, one line naming the file and the keys, nothing run.
    assert main(["--config", path, "tables"]) == 2
    err = capsys.readouterr().err
    assert path in err and "db.upgrade.colour" in err and "Traceback" not in err


def test_file_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "absent.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[serve\nport = 1\n")
    wrong = _write(tmp_path / "wrong.toml", {}, {"serve": {"port": "x", "drain-seconds": 1}})
    listing = _write(tmp_path / "list.toml", {}, {"serve": {"host": ["a", "b"]}})
    for path, words in (
        (missing, "No such file"),
        (str(broken), "not TOML"),
        (wrong, "key serve.port: --port 'x'"),
        (listing, "key serve.host: --host takes one value"),
    ):
        assert main(["--config", path, "config", "show", "serve"]) == 2, path
        err = capsys.readouterr().err
        assert path in err and words in err, err
    # --config=FILE and $PAIMON_META_CONFIG find the file too.
    env = {**_base(tmp_path), "PAIMON_META_CONFIG": wrong}
    with pytest.raises(ConfigError):
        _resolved(["serve"], env)
    with pytest.raises(ConfigError):
        _resolved([f"--config={wrong}", "serve"], _base(tmp_path))


def test_secrets_from_files_at_each_level(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("pmt_from_file\n")
    env = _base(tmp_path)
    assert _resolved(["tables", "--token-file", str(secret)], env).token == "pmt_from_file"
    assert _resolved(["tables"], {**env, "PAIMON_META_TOKEN_FILE": str(secret)}).token == "pmt_from_file"
    path = _write(tmp_path / "c.toml", {"token-file": str(secret)}, {})
    assert _resolved(["--config", path, "tables"], env).token == "pmt_from_file"
    # A higher level wins over a lower one's file; one level giving both is refused.
    assert _resolved(["--config", path, "tables"], {**env, "PAIMON_META_TOKEN": "pmt_env"}).token == "pmt_env"
    with pytest.raises(ConfigError, match="not both"):
        _resolved(["tables", "--token", "a", "--token-file", str(secret)], env)
    with pytest.raises(ConfigError, match="not both"):
        _resolved(["tables"], {**env, "PAIMON_META_TOKEN": "a", "PAIMON_META_TOKEN_FILE": str(secret)})
    with pytest.raises(ConfigError, match="cannot read"):
        _resolved(["tables", "--token-file", str(tmp_path / "nope")], env)
    options = tmp_path / "options"
    options.write_text("s3.access-key=AK\ns3.secret-key=SK\n")
    args = _resolved(["tables", "-o", "s3.region=eu"], {**env, "PAIMON_META_OPTIONS_FILE": str(options)})
    assert args.option == ["s3.access-key=AK", "s3.secret-key=SK", "s3.region=eu"]
    dsn = tmp_path / "dsn"
    dsn.write_text("postgresql+psycopg://u:pw@db/x")
    assert (
        _resolved(["tables", "--metastore-file", str(dsn)], env).metastore == "postgresql+psycopg://u:pw@db/x"
    )


def test_config_show_masks_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(
        tmp_path / "c.toml",
        {
            "metastore": "postgresql+psycopg://paimon:db-password@pg:5432/meta",
            "option": ["s3.secret-key=sk-value", "s3.region=eu"],
        },
        {"serve": {"drain-seconds": 12, "events-nats": "nats://u:nats-password@n:4222"}},
    )
    monkeypatch.setenv("PAIMON_META_TOKEN", "pmt_the_token")
    monkeypatch.setenv("PAIMON_META_SERVE_PORT", "9000")
    for extra in ([], ["--json"]):
        assert main(["--config", path, "config", "show", "serve", *extra]) == 0
        out = capsys.readouterr().out
        for secret in ("db-password", "sk-value", "nats-password", "pmt_the_token"):
            assert secret not in out
        assert "s3.region=eu" in out and "postgresql+psycopg://paimon:****@pg:5432/meta" in out
    rows = {r["option"]: r for r in json.loads(out)["settings"]}
    assert rows["--port"]["value"] == 9000 and rows["--port"]["source"] == "env PAIMON_META_SERVE_PORT"
    assert rows["--drain-seconds"]["value"] == 12.0 and rows["--drain-seconds"]["source"].startswith("file ")
    assert rows["--token"]["value"] == "****" and rows["--workers"]["source"] == "default"
    assert rows["--drain-seconds"]["env"] == "PAIMON_META_SERVE_DRAIN_SECONDS"
    assert main(["config", "show", "servve"]) == 2
    assert "no command 'servve'" in capsys.readouterr().err


def test_serve_takes_its_settings_from_env_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: what the environment and the file say reaches the service's settings."""
    from paimon_meta.service import server

    seen: dict[str, Any] = {}

    def fake_serve(settings: Any, **kwargs: Any) -> None:
        seen["settings"], seen["kwargs"] = settings, kwargs

    monkeypatch.setattr(server, "serve", fake_serve)
    secret = tmp_path / "dsn"
    secret.write_text("postgresql+psycopg://u:pw@nowhere:5432/x\n")
    path = _write(
        tmp_path / "c.toml", {"metastore-file": str(secret)}, {"serve": {"drain-seconds": 7, "port": 1}}
    )
    monkeypatch.setenv("PAIMON_META_SERVE_PORT", "9100")
    monkeypatch.setenv("PAIMON_META_SERVE_MAX_IN_FLIGHT", "3")
    # --migrate: the metastore is not checked before serving (there is none here).
    argv = ["--config", path, "serve", "--warehouse", str(tmp_path / "w"), "--workers", "5", "--migrate"]
    assert main(argv) == 0
    settings = seen["settings"]
    assert settings.metastore_url == "postgresql+psycopg://u:pw@nowhere:5432/x"
    assert (settings.drain_seconds, settings.max_in_flight, settings.worker_threads) == (7.0, 3, 5)
    assert seen["kwargs"]["port"] == 9100 and seen["kwargs"]["log_config"] is None
    assert settings.migrate is True


def test_json_log_lines_for_ours_and_uvicorns(capsys: pytest.CaptureFixture[str]) -> None:
    saved = {
        name: (logging.getLogger(name).handlers, logging.getLogger(name).propagate)
        for name in logs.SERVICE_LOGGERS
    }
    try:
        logs.configure_service("json", "info")
        logging.getLogger("paimon_meta.service").info("serving %s", "x")
        logging.getLogger("uvicorn.error").info("Started server process [%d]", 1)
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("uvicorn.error").exception("failed")
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    finally:
        for name, (handlers, propagate) in saved.items():
            logging.getLogger(name).handlers, logging.getLogger(name).propagate = handlers, propagate
    assert [(line["logger"], line["message"]) for line in lines] == [
        ("paimon_meta.service", "serving x"),
        ("uvicorn.error", "Started server process [1]"),
        ("uvicorn.error", "failed"),
    ]
    assert lines[0]["level"] == "INFO" and lines[0]["time"].endswith("+00:00")
    assert "ValueError: boom" in lines[2]["exception"]


def test_output_to_a_closed_pipe_is_quiet() -> None:
    """``paimon-meta ... | head``: the reader leaves; no BrokenPipeError, exit 0."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "paimon_meta.cli", "config", "show", "serve"],
            cwd=REPO,
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert b"BrokenPipe" not in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr
