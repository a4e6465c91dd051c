"""A writer process that dies (``os._exit``) at one step of the commit protocol.

``python tests/ops/_crash_child.py URL WAREHOUSE TABLE POINT FIRST_KEY USER IDENTIFIER``

When ``paimon_meta.commit.crashpoints`` knows ``POINT`` the parent also sets ``PAIMON_META_TEST_CRASH_AT``
and the coordinator's own crash point fires; the step is wrapped here as well (whichever comes first
kills the process, both at the same step), so the test works before and after the crash points land:

* ``after_prepared``: the ``prepared`` event is written, nothing else;
* ``after_manifests``: the delta manifests are written, the lock was never taken;
* ``after_lock``: the lock is held and storage reconciled, nothing decided (the lock row is left behind);
* ``before_publish``: holding the lock, manifest lists staged, no snapshot (the lock row is left behind);
* ``after_snapshot``: ``snapshot-N`` is on storage, its event is not (lock row left behind);
* ``after_event``: the event and pointer are recorded, the caller was not told.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pyarrow as pa

CRASH_EXIT = 17
POINTS = (
    "after_prepared",
    "after_manifests",
    "after_lock",
    "before_publish",
    "after_snapshot",
    "after_event",
)


def _die(*_args: Any, **_kwargs: Any) -> Any:
    sys.stdout.flush()
    os._exit(CRASH_EXIT)


def arm(point: str) -> None:
    """Make the process die at ``point`` (in-process stand-in for the commit engineer's crash points)."""
    from paimon_meta.commit import coordinator
    from paimon_meta.commit.metastore import guard as metastore_guard

    if point == "after_prepared":
        original = metastore_guard.MetastoreGuard.prepared

        def prepared_then_die(self: Any, record: Any) -> None:
            original(self, record)
            _die()

        metastore_guard.MetastoreGuard.prepared = prepared_then_die  # type: ignore[method-assign]
    elif point == "after_manifests":
        metastore_guard.MetastoreGuard.session = _die  # type: ignore[method-assign]
    elif point == "after_lock":
        coordinator.CommitCoordinator._attempt = _die  # type: ignore[method-assign]
    elif point == "before_publish":
        metastore_guard.MetastoreSession.before_publish = _die  # type: ignore[method-assign]
    elif point == "after_snapshot":
        metastore_guard.MetastoreSession.published = _die  # type: ignore[method-assign]
    elif point == "after_event":
        recorded = metastore_guard.MetastoreSession.published

        def published_then_die(self: Any, *args: Any, **kwargs: Any) -> None:
            recorded(self, *args, **kwargs)
            _die()

        metastore_guard.MetastoreSession.published = published_then_die  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown crash point {point!r}")


def main() -> None:
    url, warehouse, identifier, point, first, user, commit_identifier = sys.argv[1:8]
    import paimon_meta

    catalog = paimon_meta.connect(url, warehouse, **{"lock.lease-seconds": "2"})
    table = catalog.get_table(identifier)
    builder = table.new_stream_write_builder().with_commit_user(user)
    write = builder.new_write()
    keys = list(range(int(first), int(first) + 10))
    write.write_arrow(pa.table({"k": pa.array(keys, pa.int32()), "v": [f"v{k}" for k in keys]}))
    messages = write.prepare_commit()
    arm(point)
    builder.new_commit().commit(messages, int(commit_identifier))
    print("committed without crashing", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
