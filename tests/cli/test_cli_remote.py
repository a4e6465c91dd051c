"""``paimon-meta --metastore http://...``: the read-only and audit commands through a served catalog print
exactly what they print against the database; every other command is refused, and so are bad tokens,
each as one line with a non-zero exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text

import paimon_meta
import paimon_meta.catalog.rest
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.metastore.principals import Principals
from tests.cli.helpers import Cli
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import REPO, ServiceProcess, make_principal, spawn_service
from tests.ops.helpers import TABLE, create, write

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

#: Every command of REMOTE_COMMANDS, with each of its modes.
READ_COMMANDS: list[tuple[str, ...]] = [
    ("tables",),
    ("tables", "db"),
    ("snapshots", TABLE),
    ("read", TABLE, "--limit", "100"),
    ("read", TABLE, "--snapshot", "1", "--columns", "v", "--limit", "3"),
    ("commits", TABLE),
    ("commits", TABLE, "--limit", "2"),
    ("events", "--table", TABLE),
    ("events", "--table", TABLE, "--limit", "5"),
    ("events", "--table", TABLE, "--locks"),
    ("events", "--table", TABLE, "--maintenance"),
    ("tags", TABLE),
]
#: Commands that write, or read what only the database has: refused over a service, nothing done.
DATABASE_COMMANDS: list[tuple[str, ...]] = [
    ("db", "upgrade"),
    ("db", "current"),
    ("metrics",),
    ("rollback", TABLE, "--to-snapshot", "1"),
    ("tags", TABLE, "--create", "v2"),
    ("tags", TABLE, "--delete", "v1"),
    ("principals", "create", "intruder"),
    ("principals", "grant", "reader", "admin"),
    ("principals", "list"),
    ("events",),
    ("events", "--locks"),
    ("serve", "--port", "1"),
    ("demo",),
]


@dataclass
class Served:
    db: Cli  # the commands against the database
    url: str
    tokens: dict[str, str]
    capsys: pytest.CaptureFixture[str]
    commit_id: str

    def over_http(self, *args: str, token: str | None = "reader") -> tuple[int, str, str]:
        cli = Cli(self.url, "", self.capsys)
        cli.base = ["--metastore", self.url] + ([] if token is None else ["--token", self.tokens[token]])
        return cli.run(*args)


@pytest.fixture
def served(
    *,
    clean_db: str,
    warehouse: str,
    catalog: MetastoreCatalog,
    cli: Cli,
    tmp_path: Path,
    service_processes: list[ServiceProcess],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Served]:
    """db.t with three snapshots, a tag and two maintenance runs; other.u; a served catalog on them."""
    monkeypatch.delenv("PAIMON_META_TOKEN", raising=False)
    create(catalog)
    for keys in (range(10), range(10, 15), range(15, 17)):
        write(catalog, keys)
    create(catalog, "other.u")
    assert cli.run("tags", TABLE, "--create", "v1", "--snapshot", "2")[0] == 0
    assert cli.run("expire-snapshots", TABLE, "--dry-run")[0] == 0
    assert cli.run("remove-orphan-files", TABLE, "--dry-run")[0] == 0
    tokens = {
        "reader": make_principal(catalog, "reader", [("read", None, None)]),
        "db-reader": make_principal(catalog, "db-reader", [("read", "other", None)]),
        "nobody": make_principal(catalog, "nobody"),
    }
    commit_id = cli.json("commits", TABLE)[1]["commit_id"]
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    # Pages of 2 rows, so every listing the commands read is followed over several pages.
    monkeypatch.setattr(paimon_meta.catalog.rest, "_PAGE", 2)
    yield Served(cli, server.base, tokens, capsys, commit_id)


def test_read_and_audit_commands_print_what_the_database_path_prints(
    served: Served, catalog: MetastoreCatalog
) -> None:
    commands = [*READ_COMMANDS, ("events", "--table", TABLE, "--commit", served.commit_id)]
    for command in commands:
        for mode in ((), ("--json",)):
            expected = served.db.run(*command, *mode)
            got = served.over_http(*command, *mode)
            assert expected[0] == 0, (command, expected)
            assert got == expected, command

    # ... and those outputs are the real thing, not two empty answers
    def data(*command: str) -> list[dict[str, object]]:
        code, out, err = served.over_http(*command, "--json")
        assert code == 0, err
        rows: list[dict[str, object]] = json.loads(out)
        return rows

    assert [(t["table"], t["latest_snapshot_id"]) for t in data("tables")] == [(TABLE, 3), ("other.u", None)]
    assert [(s["snapshot_id"], s["recorded_as"]) for s in data("snapshots", TABLE)] == [
        (i, "snapshot_published") for i in (1, 2, 3)
    ]
    assert sorted(r["k"] for r in data("read", TABLE, "--limit", "100")) == list(range(17))  # type: ignore[type-var]
    assert [c["snapshot_id"] for c in data("commits", TABLE)] == [3, 2, 1]
    events = data("events", "--table", TABLE)
    assert len(events) == 9 and {e["commit_id"] for e in events} >= {served.commit_id}
    assert [e["event_type"] for e in data("events", "--table", TABLE, "--commit", served.commit_id)] == [
        "prepared",
        "conflict_checked",
        "snapshot_published",
    ]
    assert [e["event_type"] for e in data("events", "--table", TABLE, "--locks")] == [
        "acquired",
        "released",
    ] * 6
    assert [r["operation"] for r in data("events", "--table", TABLE, "--maintenance")] == [
        "create_tag",
        "expire_snapshots",
        "remove_orphan_files",
    ]
    assert data("tags", TABLE) == [{"tag": "v1", "snapshot_id": 2}]

    # a table's commits follow it across a rename, on both paths
    catalog.rename_table(TABLE, "db.t2")
    for mode in ((), ("--json",)):
        assert served.over_http("commits", "db.t2", *mode) == served.db.run("commits", "db.t2", *mode)
    assert [c["snapshot_id"] for c in data("commits", "db.t2")] == [3, 2, 1]


def test_not_found_and_usage_errors_match_the_database_path(served: Served) -> None:
    for command, code in (
        (("commits", "db.nope"), 3),
        (("snapshots", "db.nope"), 3),
        (("read", "db.nope"), 3),
        (("tables", "nope"), 3),
        (("read", TABLE, "--snapshot", "99"), 3),
        (("events", "--table", TABLE, "--commit", "00000000-0000-0000-0000-000000000000"), 3),
        (("events", "--table", TABLE, "--commit", "not-a-uuid"), 2),
    ):
        assert served.db.run(*command)[0] == code, command
        got, out, err = served.over_http(*command)
        assert (got, out) == (code, ""), (command, got, out, err)
        assert err.count("\n") == 1 and err.startswith("paimon-meta: error: "), err


def test_database_commands_are_refused_and_change_nothing(served: Served, catalog: MetastoreCatalog) -> None:
    before = (
        served.db.run("snapshots", TABLE, "--json")[1],
        served.db.run("tags", TABLE, "--json")[1],
        served.db.run("events", "--table", TABLE, "--maintenance", "--json")[1],
        [p.name for p in Principals(catalog.engine).list()],
    )
    for command in DATABASE_COMMANDS:
        code, out, err = served.over_http(*command)
        assert code == 2, (command, code, out, err)
        assert out == "" and err.count("\n") == 1, (command, err)
        assert "needs a database URL" in err and served.url in err, err
        assert f"`paimon-meta {command[0]}" in err, err
        code, out, _ = served.over_http(*command, "--json")
        assert code == 2 and json.loads(out)["type"] == "DatabaseUrlRequiredError", command
    # a refused command is refused before the token matters
    assert served.over_http("metrics", token=None)[0] == 2
    assert "needs a database URL" in served.over_http("metrics", token=None)[2]
    after = (
        served.db.run("snapshots", TABLE, "--json")[1],
        served.db.run("tags", TABLE, "--json")[1],
        served.db.run("events", "--table", TABLE, "--maintenance", "--json")[1],
        [p.name for p in Principals(catalog.engine).list()],
    )
    assert after == before


def test_tokens_missing_unknown_and_without_grant(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = served.over_http("commits", TABLE, token=None)
    assert (code, out) == (2, "") and "--token or $PAIMON_META_TOKEN" in err and err.count("\n") == 1
    monkeypatch.setenv("PAIMON_META_TOKEN", served.tokens["reader"])
    assert served.over_http("commits", TABLE, token=None) == served.db.run("commits", TABLE)

    served.tokens["bogus"] = "pmt_not_a_token"
    code, out, err = served.over_http("tables", token="bogus")  # --token wins over the environment
    assert (code, out) == (4, "") and err.count("\n") == 1 and "HTTP 401" in err, err
    code, out, err = served.over_http("commits", TABLE, token="db-reader")
    assert (code, out) == (4, "") and err.count("\n") == 1 and "HTTP 403" in err and "read grant" in err, err
    code, out, _ = served.over_http("events", "--table", TABLE, "--locks", "--json", token="nobody")
    assert code == 4 and json.loads(out)["type"] == "AccessDeniedError"
    # listings show what the grants reach
    code, out, _ = served.over_http("tables", "--json", token="db-reader")
    assert code == 0 and [t["table"] for t in json.loads(out)] == ["other.u"]


def test_console_script_over_http_one_line_errors(served: Served) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PAIMON_META_URL", "PAIMON_META_TOKEN")}

    def run(*args: str, token: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "paimon_meta.cli", "--metastore", served.url, *args],
            env={**env, "PAIMON_META_TOKEN": token},
            cwd=REPO,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = run("--json", "snapshots", TABLE, token=served.tokens["reader"])
    assert ok.returncode == 0 and ok.stdout == served.db.run("--json", "snapshots", TABLE)[1]
    for result, code in (
        (run("metrics", token=served.tokens["reader"]), 2),
        (run("expire-snapshots", TABLE, token=served.tokens["reader"]), 4),  # needs admin
        (run("commits", TABLE, token="pmt_unknown"), 4),
        (run("commits", TABLE, token=served.tokens["nobody"]), 4),
    ):
        assert result.returncode == code and result.stdout == "", result
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr


def test_follow_prints_the_change_feed_from_the_database_or_the_service(
    served: Served, catalog: MetastoreCatalog
) -> None:
    """``events --follow``: one CloudEvent a line, the same events from the database and through the
    service (paged there by 2: ``_PAGE`` is not used, the feed's pages are its own), resumable with
    ``--after``; through the service only what the token may read."""

    def follow(run: tuple[int, str, str]) -> list[dict[str, object]]:
        code, out, err = run
        assert code == 0, (out, err)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    from_db = follow(served.db.run("events", "--follow", "--follow-seconds", "1", "--limit", "3"))
    kinds = {e["type"] for e in from_db}
    assert {"org.paimon.commit.snapshot_published", "org.paimon.lock.acquired"} <= kinds
    assert "org.paimon.maintenance.create_tag.finished" in kinds
    http = follow(served.over_http("events", "--follow", "--follow-seconds", "1", "--limit", "3"))
    # line for line: ids, source, time, data (the reader may read every table); the governance log (the
    # tokens' grants) is the operator's from the database, a grantor's through the service: not the reader's
    governance = [e for e in from_db if str(e["type"]).startswith("org.paimon.governance.")]
    assert {e["type"] for e in governance} == {"org.paimon.governance.permission_granted"}
    assert http == [e for e in from_db if e not in governance]
    assert {e["source"] for e in from_db} == {"/paimon-meta/catalogs/paimon"}
    after = str(from_db[2]["id"])
    resumed = follow(served.db.run("events", "--follow", "--follow-seconds", "0.5", "--after", after))
    assert [e["id"] for e in resumed] == [e["id"] for e in from_db[3:]]
    theirs = follow(served.over_http("events", "--follow", "--follow-seconds", "1", token="db-reader"))
    assert theirs == []  # a reader of `other` sees none of db.t's events (other.u has none yet)
    assert served.db.run("events", "--after", after)[0] != 0  # --after goes with --follow
    # --from-now: none of the past, from the database and through the service
    assert follow(served.db.run("events", "--follow", "--follow-seconds", "0.5", "--from-now")) == []
    assert follow(served.over_http("events", "--follow", "--follow-seconds", "0.5", "--from-now")) == []
    assert served.db.run("events", "--follow", "--from-now", "--after", after)[0] == 2
    # ... and "now" is a position the events after it come from
    remote = paimon_meta.connect_service(served.url, token=served.tokens["reader"])
    try:
        page, token = remote.catalog_events(after="now")
        assert page == []
        write(catalog, [99])
        new: list[dict[str, object]] = []
        while not any(e["type"] == "org.paimon.commit.snapshot_published" for e in new):
            page, token = remote.catalog_events(after=token)
            new += page
            time.sleep(0.05)  # the horizon may hold the new events back a moment
        assert {e["subject"] for e in new} == {TABLE} and all(
            e["id"] not in {x["id"] for x in from_db} for e in new
        )
    finally:
        remote.close()


def test_on_call_commands_run_through_the_service_for_an_admin(
    served: Served, catalog: MetastoreCatalog
) -> None:
    """recover, expire-snapshots, remove-orphan-files and locks through the service: with an admin token
    they print what the database path prints and act (recorded with the principal); a reader is refused
    (exit 4) with nothing done."""
    served.tokens["oncall"] = make_principal(catalog, "oncall", [("admin", None, None)])
    dry_runs: list[tuple[str, ...]] = [
        ("recover", TABLE, "--dry-run", "--older-than", "60s"),  # the grace: else each side's lock settings
        ("expire-snapshots", TABLE, "--retain-min", "1", "--older-than", "0s", "--dry-run"),
        ("locks", "list"),
    ]
    for command in dry_runs:
        for mode in ((), ("--json",)):
            expected = served.db.run(*command, *mode)
            assert expected[0] == 0, (command, expected)
            # stdout and exit code (the database path also prints its progress on stderr)
            assert served.over_http(*command, *mode, token="oncall")[:2] == expected[:2], command
    for command in (
        ("recover", TABLE),
        ("expire-snapshots", TABLE, "--retain-min", "1", "--older-than", "0s"),
        ("remove-orphan-files", TABLE, "--older-than", "0s"),
        ("locks", "release", "jdbc.db.t", "--reason", "test", "--force"),
    ):
        code, _, err = served.over_http(*command)  # the reader
        assert code == 4 and "HTTP 403" in err and ("admin" in err or "may not release" in err), (
            command,
            err,
        )
    assert catalog.get_table(TABLE).snapshot_manager.list_snapshot_ids() == [1, 2, 3]

    code, out, err = served.over_http(
        "expire-snapshots", TABLE, "--retain-min", "1", "--older-than", "0s", token="oncall"
    )
    assert code == 0 and "expired snapshots 1..2" in out, err
    assert catalog.get_table(TABLE).snapshot_manager.list_snapshot_ids() == [3]
    code, out, err = served.over_http(
        "remove-orphan-files", TABLE, "--older-than", "0s", "--json", token="oncall"
    )
    assert code == 0 and json.loads(out)["table"] == TABLE, err
    code, out, err = served.over_http("recover", "--json", token="oncall")  # every table it may see
    assert code == 0 and sorted(r["table"] for r in json.loads(out)) == [TABLE, "other.u"], err
    with catalog.engine.connect() as conn:
        runs = conn.execute(
            text(
                "SELECT operation, principal FROM paimon_maintenance_events WHERE event_type = 'started' "
                "AND table_identifier = :t AND principal IS NOT NULL AND NOT dry_run ORDER BY event_id"
            ),
            {"t": TABLE},
        ).all()
    assert [tuple(r) for r in runs] == [
        ("expire_snapshots", "oncall"),
        ("remove_orphan_files", "oncall"),
        ("recover", "oncall"),
    ]

    # a lock left by a dead holder, listed and released through the service
    lease = catalog.lock.acquire("jdbc.db.t", owner="dead-writer", lease_seconds=60, timeout_seconds=5)
    lease.stop_heartbeat()
    code, out, _ = served.over_http("locks", "list", "--json", token="oncall")
    assert [r["owner"] for r in json.loads(out)] == ["dead-writer"]
    code, out, err = served.over_http("locks", "release", "jdbc.db.t", "--reason", "on call", token="oncall")
    assert code == 4 and "live" in err  # refused: it is within its lease
    code, out, err = served.over_http(
        "locks", "release", "jdbc.db.t", "--reason", "on call", "--force", token="oncall"
    )
    assert (
        code == 0
        and "released jdbc.db.t (forced; was held by dead-writer" in out
        and "oncall (service)" in out
    ), err
    assert catalog.lock.get_lock("jdbc.db.t") is None
