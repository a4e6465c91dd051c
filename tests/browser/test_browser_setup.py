"""``make browser`` (a step of ``make test``): nothing to do when Chromium is there; as root, apt-get
installs Debian's chromium and chromium-driver, refreshing the package lists only when the first install
fails; otherwise it prints what to install. Run against a stand-in apt-get that records its calls."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.service import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")

INSTALL = "install -y chromium chromium-driver"

# Fails the install until the lists were updated when $FAIL_FIRST is set, like a stale package list.
FAKE_APT = """#!/bin/sh
echo "$*" >> "{calls}"
[ "$1" = update ] && touch "{calls}.updated"
[ "$1" = install ] && [ -n "$FAIL_FIRST" ] && [ ! -e "{calls}.updated" ] && exit 100
exit 0
"""


def _make_browser(
    tmp_path: Path, chromium: Path, uid: int, fail_first: bool = False
) -> tuple[str, list[str]]:
    calls = tmp_path / "calls"
    apt = tmp_path / "apt-get"
    apt.write_text(FAKE_APT.format(calls=calls))
    apt.chmod(apt.stat().st_mode | stat.S_IEXEC)
    done = subprocess.run(
        ["make", "-s", "-C", str(REPO), "browser", f"CHROMIUM={chromium}", f"APT_GET={apt}", f"AS_UID={uid}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", **({"FAIL_FIRST": "1"} if fail_first else {})},
        check=True,
    )
    return done.stdout, calls.read_text().splitlines() if calls.exists() else []


def test_nothing_is_installed_when_chromium_is_there(tmp_path: Path) -> None:
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    out, calls = _make_browser(tmp_path, chromium, uid=0)
    assert calls == [] and "is there" in out


def test_root_installs_and_updates_the_lists_only_when_the_install_fails(tmp_path: Path) -> None:
    _, calls = _make_browser(tmp_path, tmp_path / "missing", uid=0)
    assert calls == [INSTALL]
    (tmp_path / "calls").unlink()
    _, calls = _make_browser(tmp_path, tmp_path / "missing", uid=0, fail_first=True)
    assert calls == [INSTALL, "update", INSTALL]


def test_not_root_prints_what_to_install(tmp_path: Path) -> None:
    out, calls = _make_browser(tmp_path, tmp_path / "missing", uid=1000)
    assert calls == [] and "apt-get install -y chromium chromium-driver" in out
