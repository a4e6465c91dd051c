"""Separate virtualenvs for interop peers whose dependencies cannot share the project's venv (pypaimon 2.1.0
pins pyarrow < 20; pypaimon-rust brings its own binary wheel).

A :class:`SideVenv` is created once with ``python3 -m venv`` and ``pip install <requirements>``, marked
ready, and reused while it imports the pinned version. A file lock (outside the repo, keyed by the venv
path) serialises concurrent creators (parallel test runs, make targets); a half-built or wrong-version venv
is rebuilt. Standard library only: these run before anything else is importable.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_CREATE_TIMEOUT_S = 900
_READY_MARKER = ".paimon-meta-ready"


class SideVenvError(RuntimeError):
    """A side venv could not be created or is unusable (the message says why)."""


@dataclass(frozen=True)
class SideVenv:
    """``dist==version`` (+ ``extra`` requirements) in ``$<env>`` (default ``<repo>/<default_dir>``),
    usable when ``import <module>`` works and the installed ``dist`` is ``version``."""

    dist: str
    version: str
    module: str
    env: str
    default_dir: str
    base_env: str  # names a python to build the venv with (default: python3 on PATH)
    extra: tuple[str, ...] = ()
    error: type[SideVenvError] = SideVenvError

    def venv_dir(self) -> Path:
        return Path(os.environ.get(self.env, REPO_ROOT / self.default_dir)).resolve()

    @staticmethod
    def python(venv: Path) -> Path:
        return venv / "bin" / "python"

    def is_usable(self, venv: Path) -> bool:
        python = self.python(venv)
        if not (venv / _READY_MARKER).is_file() or not python.exists():
            return False
        probe = f"import importlib.metadata as m, {self.module}; print(m.version({self.dist!r}))"
        try:
            done = subprocess.run(
                [str(python), "-c", probe], check=False, capture_output=True, text=True, timeout=120
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0 and done.stdout.strip() == self.version

    def _run(self, cmd: list[str], what: str) -> None:
        try:
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=_CREATE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise self.error(f"{what} failed: {e}") from e
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
            raise self.error(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))

    def ensure(self, venv: Path | None = None, base_python: str | None = None) -> Path:
        """The python of a usable venv, creating it first if needed. Raises ``self.error``."""
        venv = venv or self.venv_dir()
        if self.is_usable(venv):
            return self.python(venv)
        base = base_python or os.environ.get(self.base_env) or shutil.which("python3")
        if base is None:
            raise self.error(f"no python3 on PATH to create the {self.dist} venv with")
        digest = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
        lock = Path(tempfile.gettempdir()) / f"paimon-meta-{self.dist}-{digest}.lock"
        with lock.open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, also if we crash
            if self.is_usable(venv):  # another process built it while we waited
                return self.python(venv)
            if venv.exists():
                shutil.rmtree(venv)  # half-built or wrong version: start over
            self._run([base, "-m", "venv", str(venv)], f"{base} -m venv {venv}")
            pip = [str(self.python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
            spec = [f"{self.dist}=={self.version}", *self.extra]
            self._run([*pip, *spec], "pip install " + " ".join(spec))
            (venv / _READY_MARKER).write_text(self.version + "\n")
            if not self.is_usable(venv):
                raise self.error(f"{self.dist} {self.version} installed into {venv} but does not import")
        return self.python(venv)

    def main(self) -> int:
        """Create the venv and print its python (the ``python tests/interop/<x>_env.py`` entry point)."""
        try:
            python = self.ensure()
        except SideVenvError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(python)
        return 0
