"""``paimon-meta`` against real Postgres: JSON output, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.ops.common import operator_identity
from tests.cli.helpers import Cli
from tests.fixtures.horizon import wait_for_horizon
from tests.ops.helpers import TABLE, Crash, crash_at, create, prepare, write

pytestmark = pytest.mark.postgres


def test_help_and_usage_errors(cli: Cli) -> None:
    code, out, _ = cli.run("--help")
    assert code == 0 and "exit codes:" in out and "4  conflict or refused" in out and "3  not found" in out
    assert cli.run("read")[0] == 2  # missing TABLE
    assert cli.run("frobnicate")[0] == 2
    code, _, err = cli.run("recover", "--older-than", "soon")
    assert code == 2 and err.strip().splitlines() == [err.strip()] and "not a duration" in err


def test_table_and_audit_commands(cli: Cli, catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(10))
    write(catalog, range(10, 15))

    assert [(t["table"], t["latest_snapshot_id"]) for t in cli.json("tables")] == [(TABLE, 2)]
    assert cli.json("tables", "db")[0]["table"] == TABLE
    snaps = cli.json("snapshots", TABLE)
    assert [(s["snapshot_id"], s["commit_kind"], s["recorded_as"]) for s in snaps] == [
        (1, "APPEND", "snapshot_published"),
        (2, "APPEND", "snapshot_published"),
    ]
    rows = cli.json("read", TABLE, "--limit", "3")
    assert len(rows) == 3 and set(rows[0]) == {"k", "v"}
    assert sorted(r["k"] for r in cli.json("read", TABLE, "--snapshot", "1", "--limit", "100")) == list(
        range(10)
    )
    [projected] = cli.json("read", TABLE, "--columns", "v", "--limit", "1")
    assert list(projected) == ["v"]

    commits = cli.json("commits", TABLE)
    assert [(c["outcome"], c["snapshot_id"], c["attempts"]) for c in commits] == [
        ("published", 2, 1),
        ("published", 1, 1),
    ]
    history = cli.json("events", "--commit", commits[0]["commit_id"])
    assert [e["event_type"] for e in history] == ["prepared", "conflict_checked", "snapshot_published"]
    assert all(e["commit_id"] == commits[0]["commit_id"] for e in history)
    locks = cli.json("events", "--table", TABLE, "--locks")
    assert [e["event_type"] for e in locks] == ["acquired", "released"] * 2

    code, out, _ = cli.run("commits", TABLE)  # the human table
    assert code == 0 and "outcome" in out.splitlines()[0] and "published" in out

    assert cli.json("commits", "db.nope", code=3)["type"] == "TableNotFoundError"
    assert cli.run("read", TABLE, "--snapshot", "99")[0] == 3
    assert cli.run("events", "--commit", str(uuid.uuid4()))[0] == 3
    assert cli.run("events", "--commit", "not-a-uuid")[0] == 2


def test_forced_release_of_a_java_lock_row_is_recorded_with_operator_and_reason(
    cli: Cli, catalog: MetastoreCatalog
) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO paimon_distributed_locks (lock_id, expire_time_seconds) "
                "VALUES ('jdbc.db.t', 480)"
            )
        )
    [row] = cli.json("locks", "list")
    assert (row["lock_id"], row["kind"], row["owner"], row["stale"]) == ("jdbc.db.t", "java", None, False)

    code, out, err = cli.run("locks", "release", "jdbc.db.t", "--reason", "stuck?")
    assert code == 4 and out == "" and "--force" in err and len(err.strip().splitlines()) == 1
    released = cli.json("locks", "release", "jdbc.db.t", "--reason", "java writer killed", "--force")
    assert released["forced"] is True and released["lock"]["kind"] == "java"
    assert cli.json("locks", "list") == []
    with catalog.engine.connect() as conn:
        event = (
            conn.execute(text("SELECT * FROM paimon_lock_events WHERE lock_id = 'jdbc.db.t'")).one()._mapping
        )
    assert (event["event_type"], event["operator"], event["reason"]) == (
        "force_released",
        operator_identity(),
        "java writer killed",
    )
    assert cli.run("locks", "release", "jdbc.db.t", "--reason", "again")[0] == 3


def test_recover_expire_orphans_metrics_and_db(cli: Cli, catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(5))
    table = catalog.get_table(TABLE)
    messages = prepare(table, range(50, 55))

    with crash_at("after_lock"), pytest.raises(Crash):
        table.committer_factory(table, "dead-writer").commit(messages, 3)  # type: ignore[misc]

    [dry] = cli.json("recover", TABLE, "--older-than", "0s", "--dry-run")
    assert dry["dry_run"] and [c["action"] for c in dry["commits"]] == ["finished"]
    [skipped] = cli.json("recover", TABLE)  # default grace: it could still be running
    assert [c["action"] for c in skipped["commits"]] == ["skipped"]
    [done] = cli.json("recover", "--older-than", "0s")  # every table
    assert [(c["action"], c["commit_user"], c["snapshot_id"]) for c in done["commits"]] == [
        ("finished", "dead-writer", 2)
    ]
    assert done["deleted_files"]

    write(catalog, range(5, 8))
    expired = cli.json("expire-snapshots", TABLE, "--retain-min", "1", "--older-than", "0s")
    assert expired["expired"] == [1, 2] and expired["earliest_after"] == 3
    assert sorted(r["k"] for r in cli.json("read", TABLE, "--limit", "100")) == [*range(8), *range(50, 55)]
    orphans = cli.json("remove-orphan-files", TABLE, "--older-than", "0s", "--dry-run")
    assert orphans["dry_run"] and orphans["deleted"] == [] and orphans["referenced"] > 0
    assert all("/manifest/" not in o["path"] for o in orphans["orphans"])  # nothing referenced is listed
    runs = cli.json("events", "--maintenance", "--table", TABLE)
    assert [(r["operation"], r["outcome"], r["dry_run"]) for r in runs] == [
        ("expire_snapshots", "finished", False),
        ("remove_orphan_files", "finished", True),
    ]
    assert runs[0]["result"]["expired"] == 2
    assert cli.run("events", "--maintenance", "--locks")[0] == 2  # one kind of events at a time

    wait_for_horizon(catalog.engine)  # the rollup folds what every running transaction is past
    code, out, _ = cli.run("metrics")
    assert (
        code == 0
        and 'paimon_meta_commits_total{catalog="jdbc",table="db.t",kind="APPEND",outcome="recovered"} 1'
        in out
    )
    assert cli.json("db", "current")["up_to_date"] is True
    assert cli.json("db", "upgrade")["current"] == cli.json("db", "current")["current"]


def test_console_entry_exit_codes_and_one_line_errors(
    clean_db: str, warehouse: str, catalog: MetastoreCatalog
) -> None:
    create(catalog)
    env = {**os.environ, "PAIMON_META_URL": clean_db, "PAIMON_META_WAREHOUSE": warehouse}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "paimon_meta.cli", *args],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = run("--json", "tables")
    assert ok.returncode == 0 and json.loads(ok.stdout)[0]["table"] == TABLE
    missing = run("snapshots", "db.nope")
    assert missing.returncode == 3
    assert missing.stderr.strip() == "paimon-meta: error: table db.nope does not exist"
    debug = run("--debug", "snapshots", "db.nope")
    assert debug.returncode == 3 and "Traceback" in debug.stderr


def test_commits_name_the_principal_from_the_history_view(cli: Cli, catalog: MetastoreCatalog) -> None:
    """``paimon-meta commits`` and ``paimon_commit_history`` say who committed (the service's principal;
    none for a commit made with database credentials)."""
    from paimon_meta.commit.coordinator import CommitCoordinator

    create(catalog)
    write(catalog, range(3))
    row = catalog.registry.get_table_row("db", "t")
    table = catalog.get_table("db.t")
    guard = catalog._guard(row, table.snapshot_manager, principal="etl")
    CommitCoordinator(table, guard, commit_user="u").commit(prepare(table, range(3, 5)), 1)
    commits = cli.json("commits", "db.t")
    assert [(c["snapshot_id"], c["principal"]) for c in commits] == [(2, "etl"), (1, None)]
    code, out, _ = cli.run("commits", "db.t")
    assert code == 0 and "principal" in out.splitlines()[0] and " etl " in out
    with catalog.engine.connect() as conn:
        got = conn.execute(
            text("SELECT snapshot_id, principal FROM paimon_commit_history ORDER BY snapshot_id")
        ).all()
    assert [tuple(r) for r in got] == [(1, None), (2, "etl")]
