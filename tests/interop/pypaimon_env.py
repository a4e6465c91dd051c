"""Create (once) the separate virtualenv that runs pypaimon 2.1.0 for the interop tests.

pypaimon 2.1.0 pins ``pyarrow<20`` and so can never share the project's venv. Its venv lives at
``PAIMON_META_PYPAIMON_VENV`` (default ``<repo>/.venv-pypaimon``), is built with ``python3 -m venv`` and
``pip install pypaimon==2.1.0``, and is reused while its ``pypaimon`` imports at that version. A file lock
serialises concurrent creators (parallel test runs, ``make interop-venv``).

Run as ``python tests/interop/pypaimon_env.py`` to create it and print its python. Standard library only:
it runs before anything else is importable.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PYPAIMON_VERSION = "2.1.0"
REPO_ROOT = Path(__file__).resolve().parents[2]
_CREATE_TIMEOUT_S = 900
_READY_MARKER = ".paimon-meta-ready"


class PypaimonEnvError(RuntimeError):
    """The pypaimon venv could not be created or is unusable (the message says why)."""


def venv_dir() -> Path:
    return Path(os.environ.get("PAIMON_META_PYPAIMON_VENV", REPO_ROOT / ".venv-pypaimon")).resolve()


def venv_python(venv: Path | None = None) -> Path:
    return (venv or venv_dir()) / "bin" / "python"


def _lock_path(venv: Path) -> Path:
    # Outside the repo so the lock never shows up in git status; keyed by the venv path.
    digest = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"paimon-meta-pypaimon-{digest}.lock"


def is_usable(venv: Path) -> bool:
    """True if the venv was finished by us and imports pypaimon at the pinned version."""
    python = venv_python(venv)
    if not (venv / _READY_MARKER).is_file() or not python.exists():
        return False
    probe = "import importlib.metadata as m, pypaimon; print(m.version('pypaimon'))"
    try:
        done = subprocess.run(
            [str(python), "-c", probe], check=False, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == PYPAIMON_VERSION


def _run(cmd: list[str], what: str) -> None:
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=_CREATE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PypaimonEnvError(f"{what} failed: {e}") from e
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise PypaimonEnvError(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))


def ensure_venv(venv: Path | None = None, base_python: str | None = None) -> Path:
    """The python of a usable pypaimon venv, creating it first if needed. Raises PypaimonEnvError."""
    venv = venv or venv_dir()
    if is_usable(venv):
        return venv_python(venv)
    base = base_python or os.environ.get("PAIMON_META_PYPAIMON_BASE_PYTHON") or shutil.which("python3")
    if base is None:
        raise PypaimonEnvError("no python3 on PATH to create the pypaimon venv with")
    lock = _lock_path(venv)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, also if we crash
        if is_usable(venv):  # another process built it while we waited
            return venv_python(venv)
        if venv.exists():
            shutil.rmtree(venv)  # half-built or wrong version: start over
        _run([base, "-m", "venv", str(venv)], f"{base} -m venv {venv}")
        pip = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        _run([*pip, f"pypaimon=={PYPAIMON_VERSION}"], f"pip install pypaimon=={PYPAIMON_VERSION}")
        (venv / _READY_MARKER).write_text(PYPAIMON_VERSION + "\n")
        if not is_usable(venv):
            raise PypaimonEnvError(f"pypaimon {PYPAIMON_VERSION} installed into {venv} but does not import")
    return venv_python(venv)


def main() -> int:
    try:
        python = ensure_venv()
    except PypaimonEnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
