"""``bench/bench_rest_service.py`` runs end to end at a tiny size (real ``paimon-meta serve`` processes,
pypaimon 2.1.0 through them and on its filesystem catalog, two writers through one and two replicas).
No timing is asserted: only that each part reports what it promises, that every writer's commit landed
exactly once, and that nothing failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.test_bench_smoke import run_bench, server_url
from tests.fixtures.postgres import PgServer

pytestmark = [pytest.mark.postgres]


def test_service_overhead_only(pg_server: PgServer, tmp_path: Path) -> None:
    out = run_bench(
        "bench_rest_service.py",
        "--url",
        server_url(pg_server),
        "--commits",
        "12",
        "--no-pypaimon",
        "--json",
        str(tmp_path / "out.json"),
        timeout=120,
    )
    assert "before: load average" in out and "after: load average" in out
    assert "HTTP keep-alive / in-process commit() at 1-12" in out
    summary = json.loads(out.strip().splitlines()[-1])
    assert set(summary["service_overhead_ms"]) == {
        "in-process commit()",
        "in-process row + committer + commit()",
        "HTTP, keep-alive",
        "HTTP, new connection",
    }
    assert "pypaimon_sequential" not in summary and "writers" not in summary
    full = json.loads((tmp_path / "out.json").read_text())
    assert all(len(v) == 12 for v in full["service_overhead_raw_ms"].values())


@pytest.mark.interop
def test_all_parts(pg_server: PgServer, pypaimon_python: Path) -> None:
    out = run_bench(
        "bench_rest_service.py",
        "--url",
        server_url(pg_server),
        "--commits",
        "20",
        "--writers",
        "2",
        "--writer-commits",
        "3",
        "--replicas",
        "2",
        timeout=180,
    )
    for heading in ("### (a) pypaimon", "### (b) 2 pypaimon writers", "### (c) Added latency"):
        assert heading in out
    assert "commit service / filesystem at 11-20" in out
    summary = json.loads(out.strip().splitlines()[-1])
    for side in ("service (REST)", "filesystem"):
        assert summary["pypaimon_sequential"][side]["errors"] == 0
        assert "11-20" in summary["pypaimon_sequential"][side]["commit_ms"]
    assert [r["replicas"] for r in summary["writers"]] == [1, 2]
    for run in summary["writers"]:
        assert run["client_errors"] == 0 and run["other_failures"] == 0
        assert run["published"] == run["latest_snapshot_id"] == 6
        assert run["conflicts"] >= 0 and 0.0 <= run["success_false_share"] < 1.0
