"""``bench/bench_service_ab.py`` runs end to end at a tiny size: a base revision's server (here HEAD, from a
temporary worktree) against this checkout's, grouped and uncontended, and each revision's in-process
commit path in a child process. No timing is asserted: only that
both servers served every commit (``run_clients`` checks exactly-once after each round) and that the
report has its rows, and that the worktree is gone afterwards; once on one metastore, once with each side
its own (the path taken when the base's migration head differs from this checkout's)."""

from __future__ import annotations

import subprocess

import pytest

from tests.bench.test_bench_smoke import REPO, run_bench, server_url
from tests.fixtures.postgres import PgServer

pytestmark = [pytest.mark.postgres]


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)


def _worktrees() -> list[str]:
    listing = _git("worktree", "list", "--porcelain")
    assert listing.returncode == 0, listing.stderr
    return [line for line in listing.stdout.splitlines() if line.startswith("worktree ")]


def _run(pg_server: PgServer, *extra: str) -> str:
    return run_bench(
        "bench_service_ab.py",
        "--url",
        server_url(pg_server),
        "--base",
        "HEAD",
        "--rounds",
        "1",
        "--clients",
        "2",
        "--commits",
        "3",
        "--sequential",
        "20",
        *extra,
        timeout=240,
    )


def _assert_report(out: str) -> None:
    assert "before: load average" in out and "after: load average" in out
    assert "| (in-process) |" in out
    assert "| (in-process, base (HEAD), child process) |" in out
    assert "| (in-process, this checkout, child process) |" in out
    assert "| base (HEAD) |" in out and "| this checkout |" in out
    assert "metastore transactions per commit" in out


def test_base_against_this_checkout(pg_server: PgServer) -> None:
    if _git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: the benchmark compares against a git revision")
    before = _worktrees()
    out = _run(pg_server)
    _assert_report(out)
    assert "metastore: one, shared by both sides" in out
    assert _worktrees() == before


def test_separate_metastores(pg_server: PgServer) -> None:
    """The path a base with another migration head takes (forced here, the base being HEAD): each side
    its own database migrated by its own code, the base's tables, token and exactly-once checks made by a
    child process of the base revision; the base server serves only its own database."""
    if _git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout: the benchmark compares against a git revision")
    before = _worktrees()
    out = _run(pg_server, "--separate-metastores")
    _assert_report(out)
    assert "metastores: SEPARATE, one per side" in out
    assert "the base's setup and exactly-once checks by a child process of the base revision" in out
    assert _worktrees() == before
