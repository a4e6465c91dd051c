"""docs/DESIGN.md's crash table, one row at a time, on real processes: a writer dies (``os._exit``) or
freezes (SIGSTOP, heartbeat included) at each named step of the protocol (paimon_meta.commit.crashpoints)
while a second writer commits to the same table; the frozen one is resumed after more than a lease, the
dead one restarted with the same identifiers. The checker then verifies the whole history."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.commit.crashpoints import CRASH_AT_ENV, CRASH_EXIT_CODE, PAUSE_AT_ENV, CrashPoint
from tests.torture import workload
from tests.torture.chaos import REPO_ROOT, _process_state
from tests.torture.checker import CheckResult, check_torture
from tests.torture.journal import History, read_history
from tests.torture.writer import WriterConfig, run

pytestmark = [pytest.mark.postgres]

COMMITS = 3
LEASE = 2
ALL_POINTS = [p.value for p in CrashPoint]


class Scenario:
    def __init__(self, url: str, warehouse: str, options: Mapping[str, str], workdir: Path) -> None:
        self.url, self.warehouse, self.workdir = url, warehouse, workdir
        self.options = {**options, "lock.lease-seconds": str(LEASE), "lock.acquire-timeout-seconds": "60"}
        with paimon_meta.connect(url, warehouse, **options) as catalog:
            catalog.create_table(
                workload.TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS
            )

    def config(self, writer: int) -> WriterConfig:
        return WriterConfig(
            writer=writer,
            commits=COMMITS,
            metastore_url=self.url,
            warehouse=self.warehouse,
            journal=str(self.workdir / f"journal-w{writer}.jsonl"),
            options=dict(self.options),
        )

    def spawn(self, writer: int, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        path = self.workdir / f"writer-w{writer}.json"
        self.config(writer).dump(path)
        clean = {k: v for k, v in os.environ.items() if k not in (CRASH_AT_ENV, PAUSE_AT_ENV)}
        return subprocess.Popen(
            [sys.executable, "-m", "tests.torture.writer", str(path)],
            cwd=REPO_ROOT,
            env={**clean, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def history(self, writer: int) -> History:
        return read_history(writer, self.workdir / f"journal-w{writer}.jsonl")

    def check(self) -> CheckResult:
        with paimon_meta.connect(self.url, self.warehouse, **self.options) as catalog:
            result = check_torture(catalog, [self.history(0), self.history(1)], commits=COMMITS)
        assert not result.violations, "\n".join(result.violations)
        return result


def _wait_stopped(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode() if proc.stdout else ""
            raise AssertionError(f"writer exited {proc.returncode} before pausing:\n{out}")
        if _process_state(proc.pid) == "T":
            return
        time.sleep(0.02)
    raise AssertionError("writer never reached its pause point")


def _finish(proc: subprocess.Popen[bytes], expected: int = 0) -> None:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == expected, out.decode()[-3000:]


def _crash_then_recover(s: Scenario, point: str) -> CheckResult:
    _finish(s.spawn(0, {CRASH_AT_ENV: point}), CRASH_EXIT_CODE)
    assert run(s.config(1)) == 0  # takes over the dead writer's lock after its lease
    _finish(s.spawn(0, {}))  # restarted with the same identifiers
    return s.check()


def _freeze_then_resume(s: Scenario, point: str) -> CheckResult:
    frozen = s.spawn(0, {PAUSE_AT_ENV: point})
    try:
        _wait_stopped(frozen)
        assert run(s.config(1)) == 0  # must not wait for the frozen writer longer than its lease
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    _finish(frozen)
    return s.check()


@pytest.mark.parametrize("point", ALL_POINTS)
def test_crash_at(point: str, clean_db: str, tmp_path: Path) -> None:
    s = Scenario(clean_db, str(tmp_path / "warehouse"), {}, tmp_path)
    result = _crash_then_recover(s, point)
    counts = result.state.event_counts()
    if point in (CrashPoint.AFTER_SNAPSHOT, CrashPoint.AFTER_EVENT):
        # the crashed commit landed: its restart is deduplicated instead of committed again
        assert s.history(0).dedup_acks >= 1
    if point == CrashPoint.AFTER_SNAPSHOT:
        assert counts["recovered"] >= 1, counts  # recorded by the next lock holder's reconcile


@pytest.mark.parametrize(
    "point", [CrashPoint.AFTER_LOCK, CrashPoint.BEFORE_PUBLISH, CrashPoint.AFTER_SNAPSHOT]
)
def test_freeze_at(point: str, clean_db: str, tmp_path: Path) -> None:
    s = Scenario(clean_db, str(tmp_path / "warehouse"), {}, tmp_path)
    _freeze_then_resume(s, point)


@pytest.mark.s3
@pytest.mark.parametrize("point", [CrashPoint.AFTER_SNAPSHOT, CrashPoint.BEFORE_PUBLISH])
def test_s3_crash_and_freeze_at(
    point: str, clean_db: str, pg_db_factory: object, s3_warehouse: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    uri, options = s3_warehouse
    crashed = tmp_path / "crash"
    crashed.mkdir()
    _crash_then_recover(Scenario(clean_db, uri + "/crash", options, crashed), point)
    assert callable(pg_db_factory)
    frozen = tmp_path / "freeze"
    frozen.mkdir()
    _freeze_then_resume(Scenario(pg_db_factory(), uri + "/freeze", options, frozen), point)


@pytest.mark.s3
def test_freeze_before_publish_without_conditional_writes(
    clean_db: str, s3_warehouse_without_conditions: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """Without atomic create the publishing transaction's row lock is all that fences a frozen
    publisher: the other writer must wait for it, and nothing is lost or duplicated."""
    uri, options = s3_warehouse_without_conditions
    s = Scenario(clean_db, uri, {**options, "s3.conditional-writes": "false"}, tmp_path)
    frozen = s.spawn(0, {PAUSE_AT_ENV: CrashPoint.BEFORE_PUBLISH})
    try:
        _wait_stopped(frozen)
        other = s.spawn(1, {})
        time.sleep(3 * LEASE)  # the frozen writer's lease is long over
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    _finish(frozen)
    _finish(other)
    s.check()
