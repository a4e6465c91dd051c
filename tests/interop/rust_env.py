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

import sys
from pathlib import Path

if not __package__:  # run as a script: make ``tests`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.interop.side_venv import SideVenv, SideVenvError

RUST_DIST = "pypaimon-rust"
RUST_VERSION = "0.4.0"
RUST_MODULE = "pypaimon_rust.datafusion"  # where Table, CommitMessage and the readers/writers live


class RustEnvError(SideVenvError):
    """The pypaimon-rust venv could not be created or is unusable (the message says why)."""


RUST = SideVenv(
    dist=RUST_DIST,
    version=RUST_VERSION,
    module=f"pyarrow, {RUST_MODULE}",
    env="PAIMON_META_RUST_VENV",
    default_dir=".venv-rust",
    base_env="PAIMON_META_RUST_BASE_PYTHON",
    # pypaimon-rust 0.4.0 declares no dependency on pyarrow, yet every read and write exchanges pyarrow
    # objects: install it alongside, unpinned (the wheel works with the newest, 26.x at the time of writing).
    extra=("pyarrow",),
    error=RustEnvError,
)


def ensure_venv(venv: Path | None = None, base_python: str | None = None) -> Path:
    """The python of a usable pypaimon-rust venv, creating it first if needed. Raises RustEnvError."""
    return RUST.ensure(venv, base_python)


if __name__ == "__main__":
    sys.exit(RUST.main())
