"""``bench/bench_validation.py`` runs end to end at a tiny size: a base revision's server (here HEAD, from a
temporary worktree) against this checkout's, commit-messages and pypaimon's REST commit, then the checks
alone. No timing is asserted: only that every commit of both sides was served and the report has its
rows, and that the worktree is gone."""

from __future__ import annotations

import pytest

from tests.bench.test_bench_service_ab_smoke import _git, _worktrees
from tests.bench.test_bench_smoke import run_bench, server_url
from tests.fixtures.postgres import PgServer

pytestmark = [pytest.mark.postgres]


def test_validation_cost_base_against_this_checkout(pg_server: PgServer) -> None:
    if _git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: the benchmark compares against a git revision")
    before = _worktrees()
    out = run_bench(
        "bench_validation.py",
        "--url",
        server_url(pg_server),
        "--base",
        "HEAD",
        "--sizes",
        "1,30",
        "--commits",
        "2",
        "--rest-rounds",
        "1",
        "--rest-commits",
        "2",
        timeout=240,
    )
    assert "before: load average" in out and "after: load average" in out
    assert "| 1 |" in out and "| 30 |" in out
    assert "(base = base (HEAD);" in out
    assert "| REST commit (pypaimon, one row) |" in out
    assert _worktrees() == before
