"""Create (once) the separate virtualenv that runs paimon-rust (``pypaimon-rust`` 0.4.0) for interop tests.

``pypaimon-rust`` is a binary wheel whose pyarrow need not match the project's, so it gets its own venv, like
pypaimon 2.1.0 (``tests/interop/pypaimon_env.py``). The venv lives at ``PAIMON_META_RUST_VENV`` (default
``<repo>/.venv-rust``), is built with ``python3 -m venv`` and ``pip install pypaimon-rust==0.4.0 pyarrow``
(the wheel imports pyarrow but does not declare it), and is reused while it imports that version. A file lock
serialises concurrent creators (parallel test runs, a make target).

Run as ``python tests/interop/rust_env.py`` to create it and print its python. Standard library only:
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

RUST_DIST = "pypaimon-rust"
RUST_VERSION = "0.4.0"
RUST_MODULE = "pypaimon_rust.datafusion"  # where Table, CommitMessage and the readers/writers live
# pypaimon-rust 0.4.0 declares no dependency on pyarrow, yet every read and write exchanges pyarrow objects:
# install it alongside, unpinned (the wheel works with the newest, 26.x at the time of writing).
EXTRA_REQUIREMENTS = ("pyarrow",)
REPO_ROOT = Path(__file__).resolve().parents[2]
_CREATE_TIMEOUT_S = 900
_READY_MARKER = ".paimon-meta-ready"


class RustEnvError(RuntimeError):
    """The pypaimon-rust venv could not be created or is unusable (the message says why)."""


def venv_dir() -> Path:
    return Path(os.environ.get("PAIMON_META_RUST_VENV", REPO_ROOT / ".venv-rust")).resolve()


def venv_python(venv: Path | None = None) -> Path:
    return (venv or venv_dir()) / "bin" / "python"


def _lock_path(venv: Path) -> Path:
    # Outside the repo so the lock never shows up in git status; keyed by the venv path.
    digest = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"paimon-meta-rust-{digest}.lock"


def is_usable(venv: Path) -> bool:
    """True if the venv was finished by us and imports paimon-rust at the pinned version."""
    python = venv_python(venv)
    if not (venv / _READY_MARKER).is_file() or not python.exists():
        return False
    probe = f"import importlib.metadata as m, pyarrow, {RUST_MODULE}; print(m.version({RUST_DIST!r}))"
    try:
        done = subprocess.run(
            [str(python), "-c", probe], check=False, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == RUST_VERSION


def _run(cmd: list[str], what: str) -> None:
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=_CREATE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RustEnvError(f"{what} failed: {e}") from e
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise RustEnvError(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))


def ensure_venv(venv: Path | None = None, base_python: str | None = None) -> Path:
    """The python of a usable pypaimon-rust venv, creating it first if needed. Raises RustEnvError."""
    venv = venv or venv_dir()
    if is_usable(venv):
        return venv_python(venv)
    base = base_python or os.environ.get("PAIMON_META_RUST_BASE_PYTHON") or shutil.which("python3")
    if base is None:
        raise RustEnvError("no python3 on PATH to create the pypaimon-rust venv with")
    lock = _lock_path(venv)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, also if we crash
        if is_usable(venv):  # another process built it while we waited
            return venv_python(venv)
        if venv.exists():
            shutil.rmtree(venv)  # half-built or wrong version: start over
        _run([base, "-m", "venv", str(venv)], f"{base} -m venv {venv}")
        pip = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        spec = [f"{RUST_DIST}=={RUST_VERSION}", *EXTRA_REQUIREMENTS]
        _run([*pip, *spec], "pip install " + " ".join(spec))
        (venv / _READY_MARKER).write_text(RUST_VERSION + "\n")
        if not is_usable(venv):
            raise RustEnvError(f"{RUST_DIST} {RUST_VERSION} installed into {venv} but does not import")
    return venv_python(venv)


def main() -> int:
    try:
        python = ensure_venv()
    except RustEnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
