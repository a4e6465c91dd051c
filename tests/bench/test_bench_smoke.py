"""Every benchmark under bench/ runs end to end at a small size, so a refactor cannot silently break
one (CI runs these; the documented sizes are in docs/BENCHMARKS.md). Nothing here asserts a timing:
only that each script completes and reports what it promises, and that measurements which can go
wrong on their own (the floor's replay, pypaimon's side) did not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.postgres import PgServer

REPO = Path(__file__).resolve().parents[2]


def run_bench(script: str, *args: str, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def server_url(pg_server: PgServer) -> str:
    return pg_server.url_for(pg_server.admin_url.database or "postgres")


def test_bucket_assignment() -> None:
    out = run_bench("bench_bucket.py", "--rows", "20000", "--repeat", "1")
    assert "rows/s" in out


def test_manifest_codec() -> None:
    out = run_bench("bench_manifest_decode.py", "--entries", "200", "--repeat", "1")
    assert "entries/s" in out


def test_scan_planning() -> None:
    out = run_bench("bench_scan.py", "--manifests", "20", "--entries", "5", "--repeat", "1")
    assert "ms" in out


def test_writers() -> None:
    out = run_bench("bench_write.py", "--rows", "20000", "--batch", "5000")
    assert "rows/s" in out


@pytest.mark.postgres
def test_floor_replays_every_call(pg_server: PgServer) -> None:
    out = run_bench("bench_floor.py", "--url", server_url(pg_server), "--commits", "30", "--skip", "10")
    # The replay runs the recorded calls against a clone: any error means the floor is not the same work.
    assert "replay errors" not in out
    assert "ours / floor" in out and "Postgres round trips" in out


@pytest.mark.postgres
def test_lock_handoff(pg_server: PgServer) -> None:
    out = run_bench(
        "bench_lock.py",
        "--url",
        server_url(pg_server),
        "--handoffs",
        "10",
        "--uncontended",
        "10",
        "--java-rounds",
        "2",
    )
    assert "hand-off" in out or "handoff" in out


@pytest.mark.postgres
@pytest.mark.s3
def test_contention(pg_server: PgServer) -> None:
    out = run_bench("bench_contention.py", "--url", server_url(pg_server), "--writers", "2", "--commits", "5")
    assert "lost" in out


@pytest.mark.postgres
@pytest.mark.interop
def test_sequential_commits_against_pypaimon(pg_server: PgServer, pypaimon_python: Path) -> None:
    out = run_bench("bench_commit.py", "--url", server_url(pg_server), "--commits", "20")
    assert "pypaimon" in out and "ours/pypaimon at 11-20" in out


@pytest.mark.postgres
@pytest.mark.interop
def test_one_big_commit_against_pypaimon(pg_server: PgServer, pypaimon_python: Path) -> None:
    out = run_bench(
        "bench_big_commit.py",
        "--url",
        server_url(pg_server),
        "--files",
        "200",
        "--partitions",
        "2",
        "--repeat",
        "1",
    )
    assert "pypaimon" in out


@pytest.mark.postgres
def test_catalog_listings(pg_server: PgServer) -> None:
    """Issue 28's listings (tables, views and functions, partitions) page through a real serve."""
    url = server_url(pg_server)
    out = run_bench("bench_table_listings.py", "--url", url, "--tables", "12", "--page", "5", "--sweeps", "1")
    assert '"ListTablesGlobally/admin"' in out and '"items": 12' in out
    out = run_bench(
        "bench_catalog_objects.py", "--url", url, "--objects", "6", "--page", "4", "--sweeps", "1"
    )
    assert "listViewsGlobally" in out
    out = run_bench(
        "bench_partitions_list.py", "--url", url, "--partitions", "10", "--page", "4", "--sweeps", "1"
    )
    assert "listPartitions" in out


@pytest.mark.postgres
def test_change_feed(pg_server: PgServer) -> None:
    out = run_bench(
        "bench_feed.py",
        "--url",
        server_url(pg_server),
        "--clients",
        "2",
        "--commits",
        "2",
        "--subscribers",
        "2",
    )
    assert '"2_subscribers"' in out and '"delivered"' in out


@pytest.mark.postgres
def test_console_pages(pg_server: PgServer) -> None:
    """Issue 27's console pages render through a real serve, signed in with the session cookie."""
    url = server_url(pg_server)
    out = run_bench(
        "bench_console.py",
        "--url",
        url,
        "--tables",
        "12",
        "--events",
        "600",
        "--snapshots",
        "3",
        "--requests",
        "1",
    )
    assert '"table_hot/admin"' in out and '"overview/one_table"' in out


@pytest.mark.postgres
def test_flat_metastore_paths(pg_server: PgServer, tmp_path: Path) -> None:
    """Issue 39 item 5's paths on a seeded metastore: each answers 200 (a status is reported otherwise)."""
    url = server_url(pg_server)
    database = f"paimon_meta_bench_flat_{os.getpid()}"
    env = {"PAIMON_META_BENCH_FLAT_STATE": str(tmp_path)}
    common = ("--url", url, "--database", database)
    seed = ("--events", "3000", "--tables", "300", "--databases", "3", "--real", "3", "--xids", "300")
    run_bench("bench_flat.py", "seed", *common, *seed, env=env)
    try:
        folded = run_bench("bench_flat.py", "fold", *common, env=env)
        out = run_bench("bench_flat.py", "measure", *common, "--requests", "1", env=env)
    finally:
        run_bench("bench_flat.py", "drop", *common, env=env)
    assert '"events_per_s"' in folded and '"caught_up": true' in folded
    assert '"table-details (big, 100 tables)"' in out and '"commits, 30th page (hot table)"' in out
    assert '"/metrics after 20 commits"' in out
    assert '"status"' not in out, out[-3000:]


def test_outbox_to_nats(pg_server: PgServer) -> None:
    from tests.fixtures.nats import require_nats_server

    require_nats_server()
    out = run_bench("bench_outbox.py", "--url", server_url(pg_server), "--clients", "2", "--commits", "2")
    assert '"publisher_on"' in out and '"catch_up"' in out and '"events_per_s"' in out


def test_verify_at_a_few_tables(pg_server: PgServer) -> None:
    """Issue 40's verify benchmark: every run clean (the script fails on a finding)."""
    out = run_bench(
        "bench_verify.py", "--url", server_url(pg_server), "--tables", "4", "--commits", "2", "--repeat", "1"
    )
    assert '"verify_data_files"' in out and '"snapshots": 8' in out


def test_query_auth_read_overhead() -> None:
    out = run_bench("bench_query_auth_read.py", "--rows", "3000", "--buckets", "2", "--rounds", "1")
    assert "load average" in out
    # the filter keeps every third row (region 'eu'), in both restricted reads
    assert [line.split()[-3] for line in out.splitlines() if line.startswith("filter+mask")] == [
        "1000",
        "1000",
    ]
