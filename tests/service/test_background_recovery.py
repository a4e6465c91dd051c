"""``serve`` runs recovery itself, in the background, one replica at a time (a lease on the metastore's
lock ``RECOVERY_LOCK``): a replica whose lease is taken by another skips its turn."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.ops import recovery
from paimon_meta.service.state import RECOVERY_LOCK, ServiceSettings, ServiceState
from tests.fixtures.service import FAST_LOCK

pytestmark = pytest.mark.postgres


def test_recovery_runs_in_the_background_under_a_lease(
    clean_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = paimon_meta.connect(clean_db, str(tmp_path / "w"), **FAST_LOCK)
    runs: list[bool] = []
    ran = threading.Event()
    lock_id = f"{RECOVERY_LOCK}:{catalog.registry.catalog_key}"

    def fake_recover_all(cat: object, **kwargs: object) -> list[recovery.RecoveryReport]:
        # Under the lease: the lock row is this replica's while it runs.
        runs.append(
            any(r.lock_id == lock_id and r.owner != "other-replica" for r in catalog.lock.list_locks())
        )
        ran.set()
        return []

    monkeypatch.setattr(recovery, "recover_all", fake_recover_all)
    # Another replica holds the lease: this one's turns are skipped (it tries, gets nothing, runs nothing).
    other = catalog.lock.acquire(lock_id, owner="other-replica", lease_seconds=60)
    tries: list[bool] = []
    try_acquire = catalog.lock.try_acquire

    def counted(lock: str, **kwargs: Any) -> Any:
        lease = try_acquire(lock, **kwargs)
        tries.append(lease is not None)
        return lease

    monkeypatch.setattr(catalog.lock, "try_acquire", counted)
    state = ServiceState(ServiceSettings(recovery_interval_seconds=0.05), catalog)
    try:
        _wait(lambda: tries.count(False) >= 3)
        assert runs == []
        other.release()
        assert ran.wait(30)
        assert runs[0] is True  # it ran holding the lease
        # A drain stops it.
        state.begin_drain()
        seen = len(tries)
        _wait(lambda: state._recovery is not None and not state._recovery.is_alive())
        assert len(tries) <= seen + 1
    finally:
        state.close()
        catalog.close()


def _wait(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)
