"""``paimon-meta principals`` and ``paimon-meta serve`` from the command line."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.cli.helpers import Cli
from tests.fixtures.service import REPO, free_port

pytestmark = pytest.mark.postgres


def test_principals_lifecycle(cli: Cli) -> None:
    created = cli.json("principals", "create", "etl")
    token = created["token"]
    assert created["principal"] == "etl" and token.startswith("pmt_")
    assert cli.json("principals", "grant", "etl", "write", "--table", "db.t")["new"] is True
    assert cli.json("principals", "grant", "etl", "write", "--table", "db.t")["new"] is False
    assert cli.json("principals", "grant", "etl", "read", "--database", "db")["scope"] == "db"
    listed = cli.json("principals", "list")
    assert [
        (p["principal"], sorted(g["privilege"] + "@" + g["scope"] for g in p["grants"])) for p in listed
    ] == [("etl", ["read@db", "write@db.t"])]
    assert token not in str(listed)  # only prefixes are ever shown again
    assert cli.json("principals", "revoke", "etl", "read", "--database", "db")["revoked"] is True
    assert cli.json("principals", "token", "etl")["token"] != token
    assert cli.json("principals", "revoke-token", "etl")["revoked"] == 2
    code, _, err = cli.run("principals", "create", "etl")
    assert code == 4 and "already exists" in err
    code, _, err = cli.run("principals", "grant", "ghost", "read")
    assert code == 3 and "ghost" in err
    code, _, _ = cli.run("principals", "grant", "etl", "superuser")
    assert code == 2


def test_serve_answers_and_stops_on_sigterm(clean_db: str, tmp_path: object) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "paimon_meta.cli",
            "--metastore",
            clean_db,
            "serve",
            "--warehouse",
            str(tmp_path),
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--maintenance-workers",
            "0",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else b""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert httpx.get(f"http://127.0.0.1:{port}/v1/config").status_code == 401
        proc.send_signal(signal.SIGTERM)
        # uvicorn drains, then re-raises the signal so the exit status says how the process ended
        assert proc.wait(30) in (0, -signal.SIGTERM)
        output = proc.stdout.read().decode() if proc.stdout else ""
        assert "Traceback" not in output, output
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
