"""What the archiver needs of the partitioned event log (``metastore.event_partitions``), as a Protocol.

The event log is partitioned by ``created_at`` (migration 0024); each partition is archived per catalog
(a catalog's rows into its own warehouse) and dropped once every catalog with rows in it is archived. The
archiver is written against this seam only: the metastore's ``EventPartitions`` (:func:`partitioned_log`)
is the implementation, the tests' windows over the log (``tests/archive/window_store.py``) another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Engine

from paimon_meta.metastore.event_partitions import EventPartitions


class EventPartitionLike(Protocol):
    """One partition of ``paimon_commit_events``: ``[start, end)`` of ``created_at`` (``start`` None: the
    legacy first partition, every event before partitioning), the catalogs archived from it (catalog key
    -> the archive's snapshot id) and when it was dropped (None: live)."""

    @property
    def name(self) -> str: ...

    @property
    def start(self) -> datetime | None: ...

    @property
    def end(self) -> datetime: ...

    @property
    def archived(self) -> Mapping[str, int]: ...

    @property
    def dropped_at(self) -> datetime | None: ...


class EventPartitionStore(Protocol):
    """The partitions of the event log and the two changes the archiver makes to them."""

    def partitions(self) -> Sequence[EventPartitionLike]:
        """The live partitions, oldest first."""
        ...

    def catalogs_in(self, name: str) -> list[str]:
        """The catalog keys with rows in partition ``name``."""
        ...

    def rows(
        self, name: str, *, catalog_key: str, after_event_id: int | None, limit: int
    ) -> Sequence[Mapping[str, Any]]:
        """Up to ``limit`` events of ``catalog_key`` in partition ``name`` (every column), by ``event_id``
        after ``after_event_id`` (None: from the first)."""
        ...

    def mark_archived(
        self, name: str, *, catalog_key: str, snapshot_id: int, row_count: int, archived_by: str
    ) -> object:
        """Record that ``catalog_key``'s rows of ``name`` are in its archive at ``snapshot_id``
        (idempotent)."""
        ...

    def drop(self, name: str, *, operator: str) -> object:
        """Drop partition ``name``: refused unless every catalog with rows in it is marked archived, and for
        the current partition (idempotent)."""
        ...


def partitioned_log(engine: Engine) -> EventPartitionStore:
    """The metastore's partitioned event log (``metastore.event_partitions``, migration 0024)."""
    return EventPartitions(engine)
