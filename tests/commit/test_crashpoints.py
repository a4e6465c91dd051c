"""The crash and pause points of the commit protocol, in real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paimon_meta.commit.crashpoints import (
    CRASH_AT_ENV,
    CRASH_EXIT_CODE,
    CRASH_MODE_ENV,
    PAUSE_AT_ENV,
    CrashPoint,
)

REPO = Path(__file__).resolve().parents[2]
# Reaches after_lock twice, then says it survived.
CHILD = (
    "from paimon_meta.commit import crashpoints as c\n"
    "c.reached(c.CrashPoint.AFTER_MANIFESTS)\n"
    "c.reached(c.CrashPoint.AFTER_LOCK)\n"
    "c.reached(c.CrashPoint.AFTER_LOCK)\n"
    "print('survived', flush=True)\n"
)


def child(env: dict[str, str]) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIMON_META_TEST_")}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD], env={**clean, **env}, cwd=REPO, stdout=subprocess.PIPE, text=True
    )


def test_names_are_the_documented_protocol_points() -> None:
    assert [p.value for p in CrashPoint] == [
        "after_manifests",
        "after_lock",
        "before_publish",
        "after_snapshot",
        "after_event",
    ]


@pytest.mark.parametrize(
    ("env", "code", "survived"),
    [
        ({}, 0, True),
        ({CRASH_AT_ENV: "after_snapshot"}, 0, True),  # never reached
        ({CRASH_AT_ENV: "after_snapshot,after_lock"}, CRASH_EXIT_CODE, False),
        ({CRASH_AT_ENV: "after_lock", CRASH_MODE_ENV: "kill"}, -signal.SIGKILL, False),
    ],
)
def test_crash_at_a_point(env: dict[str, str], code: int, survived: bool) -> None:
    proc = child(env)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert ("survived" in out) is survived


def test_pause_at_a_point_stops_the_process_once_until_continued() -> None:
    proc = child({PAUSE_AT_ENV: "after_lock"})
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 60
    while stat.read_text().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=60)  # the second after_lock does not stop it again
    assert (proc.returncode, out.strip()) == (0, "survived")
