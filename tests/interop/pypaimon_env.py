"""Create (once) the separate virtualenv that runs pypaimon 2.1.0 for the interop tests.

pypaimon 2.1.0 pins ``pyarrow<20`` and so can never share the project's venv. Its venv lives at
``PAIMON_META_PYPAIMON_VENV`` (default ``<repo>/.venv-pypaimon``; see :mod:`tests.interop.side_venv`).
Run as ``python tests/interop/pypaimon_env.py`` to create it and print its python.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script: make ``tests`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.interop.side_venv import SideVenv, SideVenvError

PYPAIMON_VERSION = "2.1.0"


class PypaimonEnvError(SideVenvError):
    """The pypaimon venv could not be created or is unusable (the message says why)."""


PYPAIMON = SideVenv(
    dist="pypaimon",
    version=PYPAIMON_VERSION,
    module="pypaimon",
    env="PAIMON_META_PYPAIMON_VENV",
    default_dir=".venv-pypaimon",
    base_env="PAIMON_META_PYPAIMON_BASE_PYTHON",
    error=PypaimonEnvError,
)


def ensure_venv(venv: Path | None = None, base_python: str | None = None) -> Path:
    """The python of a usable pypaimon venv, creating it first if needed. Raises PypaimonEnvError."""
    return PYPAIMON.ensure(venv, base_python)


if __name__ == "__main__":
    sys.exit(PYPAIMON.main())
