"""Operations on catalog tables: recovery, lock tooling, snapshot expiration, orphan cleanup, audit.

The entry points are re-exported here, imported on first use:
``recover_table`` (:mod:`.recovery`), ``expire_snapshots`` (:mod:`.expire`), ``remove_orphan_files``
(:mod:`.orphans`), ``list_locks`` / ``release_lock`` (:mod:`.locks`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "recover_table": "recovery",
    "recover_all": "recovery",
    "expire_snapshots": "expire",
    "remove_orphan_files": "orphans",
    "list_locks": "locks",
    "release_lock": "locks",
}
__all__ = [
    "expire_snapshots",
    "list_locks",
    "recover_all",
    "recover_table",
    "release_lock",
    "remove_orphan_files",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'paimon_meta.ops' has no attribute {name!r}")
    return getattr(importlib.import_module(f"paimon_meta.ops.{module}"), name)
