"""Which snapshot a batch read reads: the latest, or the one time travel selects.

A read is told the snapshot either explicitly (``ReadBuilder.with_snapshot``/``with_tag``) or by the
table's options, as Java's ``TimeTravelUtil`` and its static starting scanners resolve them:

* ``scan.snapshot-id``: that snapshot (``SnapshotNotFoundError`` if it was never written or expired).
* ``scan.tag-name``: the snapshot the tag file ``tag/tag-<name>`` holds. A tag file is a whole snapshot,
  so a tag whose snapshot expired still reads: expiration keeps the files tagged snapshots reference.
* ``scan.timestamp-millis``: the latest snapshot committed at or before that time (Java's
  ``SnapshotManager.earlierOrEqualTimeMills``). When every snapshot is newer, Java 0.9/1.0 read the
  earliest snapshot (a snapshot after the time asked for) and Java 1.1 on refuses
  (``StaticFromTimestampStartingScanner``); we refuse as 1.1 does (``SnapshotNotFoundError``).

As Java's ``SchemaValidation.validateStartupMode``, at most one of them may be set, and only with
``scan.mode`` unset or ``default``. A time-travelled read uses the schema its snapshot was committed
with. An explicit snapshot or tag wins over the options.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from paimon_meta.errors import SnapshotNotFoundError, ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.table.option_policy import (
    SCAN_MODE,
    SCAN_SNAPSHOT_ID,
    SCAN_TAG_NAME,
    SCAN_TIMESTAMP_MILLIS,
    check_read_options,
)
from paimon_meta.table.snapshots import SnapshotManager
from paimon_meta.table.tags import TagManager

TIME_TRAVEL_OPTIONS = (SCAN_SNAPSHOT_ID, SCAN_TAG_NAME, SCAN_TIMESTAMP_MILLIS)


class TravelTable(Protocol):
    """What time travel needs of a table (``FileStoreTable`` provides it): its branch's snapshots and
    tags, and the options of its latest schema."""

    @property
    def file_io(self) -> FileIO: ...

    @property
    def path(self) -> str: ...

    @property
    def branch_root(self) -> str: ...

    @property
    def schema(self) -> TableSchema: ...

    @property
    def snapshot_manager(self) -> SnapshotManager: ...

    def snapshot(self, snapshot_id: int) -> Snapshot: ...


class TravelKind(enum.Enum):
    SNAPSHOT = "snapshot"
    TAG = "tag"
    TIMESTAMP = "timestamp"


@dataclass(frozen=True, slots=True)
class TimeTravel:
    """The snapshot a read travels to, how it was chosen, and ``target`` naming what was asked (for
    messages: ``snapshot 3``, ``tag 't1'``, ``scan.timestamp-millis=...``)."""

    snapshot: Snapshot
    kind: TravelKind
    target: str


def tag_manager(table: TravelTable) -> TagManager:
    """The tags of the table's branch (Java's ``TagManager`` rooted at the branch path)."""
    return TagManager(table.file_io, table.branch_root)


def tag_snapshot(table: TravelTable, name: str) -> Snapshot:
    """The snapshot tag ``name`` keeps, read from the tag file (whether or not the snapshot file still
    exists). ``TagNotFoundError`` if there is no such tag, ``ValidationError`` for a bad name."""
    return tag_manager(table).get(name).snapshot


def is_stored(table: TravelTable, snapshot: Snapshot) -> bool:
    """Whether the table's snapshot file of ``snapshot.id`` exists and holds this very commit (not one
    re-created under the same id after a rollback)."""
    manager = table.snapshot_manager
    if not manager.snapshot_exists(snapshot.id):
        return False
    return _identity(manager.snapshot(snapshot.id)) == _identity(snapshot)


def _identity(snapshot: Snapshot) -> tuple[object, ...]:
    return (
        snapshot.dedupe_key,
        snapshot.time_millis,
        snapshot.base_manifest_list,
        snapshot.delta_manifest_list,
    )


def snapshot_at_or_before(table: TravelTable, millis: int) -> Snapshot | None:
    """The latest snapshot on storage committed at or before ``millis`` (Java's
    ``SnapshotManager.earlierOrEqualTimeMills``), None if every snapshot is newer."""
    manager = table.snapshot_manager
    for snapshot_id in reversed(manager.list_snapshot_ids()):
        snapshot = manager.snapshot(snapshot_id)
        if snapshot.time_millis <= millis:
            return snapshot
    return None


def resolve(
    table: TravelTable, *, snapshot_id: int | None = None, tag: str | None = None
) -> TimeTravel | None:
    """The time travel of a read of ``table``: the explicit ``snapshot_id`` or ``tag`` if given, else
    the one the table's options select; None to read the latest snapshot.

    Raises:
        SnapshotNotFoundError: the snapshot asked for does not exist (none at or before the timestamp).
        TagNotFoundError: no such tag.
        ValidationError: conflicting or malformed time-travel options (``UnsupportedError`` for an
            option that selects other rows and is not implemented).
    """
    if tag is not None:
        return TimeTravel(tag_snapshot(table, tag), TravelKind.TAG, f"tag {tag!r}")
    if snapshot_id is not None:
        return TimeTravel(table.snapshot(snapshot_id), TravelKind.SNAPSHOT, f"snapshot {snapshot_id}")
    return _from_options(table, table.schema.options)


def _from_options(table: TravelTable, options: Mapping[str, str]) -> TimeTravel | None:
    present = [key for key in TIME_TRAVEL_OPTIONS if key in options]
    if not present:
        return None
    # the options that select the snapshot are the table's own (Java's tryTimeTravel reads them), so
    # an option there this module does not implement is refused before any is honoured
    check_read_options(options)
    if len(present) > 1:
        raise ValidationError(
            f"only one of {', '.join(TIME_TRAVEL_OPTIONS)} may be set, got {', '.join(present)}",
            option=present[1],
        )
    key = present[0]
    value = options[key].strip()
    mode = (options.get(SCAN_MODE) or "default").strip().lower()
    if mode != "default":
        # SchemaValidation: in any other batch mode the option "must be null"
        raise ValidationError(
            f"{key} cannot be used with {SCAN_MODE}={mode!r} (only with {SCAN_MODE} unset or 'default')",
            option=key,
            value=value,
        )
    target = f"{key}={value}"
    if key == SCAN_TAG_NAME:
        if not value:
            raise ValidationError(f"{key} is empty", option=key, value=value)
        return TimeTravel(tag_snapshot(table, value), TravelKind.TAG, target)
    number = _integer(key, value)
    if key == SCAN_SNAPSHOT_ID:
        if not table.snapshot_manager.snapshot_exists(number):
            raise SnapshotNotFoundError(
                f"{target}: table {table.path} has no snapshot {number} (snapshots "
                f"{table.snapshot_manager.earliest_snapshot_id()} to "
                f"{table.snapshot_manager.latest_snapshot_id()} exist)",
                option=key,
                snapshot_id=number,
            )
        return TimeTravel(table.snapshot_manager.snapshot(number), TravelKind.SNAPSHOT, target)
    snapshot = snapshot_at_or_before(table, number)
    if snapshot is None:
        earliest = table.snapshot_manager.earliest_snapshot()
        raise SnapshotNotFoundError(
            f"{target}: table {table.path} has no snapshot committed at or before {number} (the earliest "
            f"was committed at {None if earliest is None else earliest.time_millis})",
            option=key,
            value=value,
        )
    return TimeTravel(snapshot, TravelKind.TIMESTAMP, target)


def _integer(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValidationError(f"{key} must be an integer, got {value!r}", option=key, value=value) from None
