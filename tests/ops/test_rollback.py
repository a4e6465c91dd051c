"""Rollback: later snapshots removed newest first, a new timeline in which their ids are created again
(once each), exactly-once lookups that forget rolled-back commits but not live ones, statistics reset to
the target, an interrupted rollback finished by the next lock holder."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import CommitConflictError, SnapshotNotFoundError, TagNotFoundError, ValidationError
from paimon_meta.io.local import LocalFileIO
from paimon_meta.metastore.statistics import list_partitions, table_statistics
from paimon_meta.ops import tags as tag_ops
from paimon_meta.ops.rollback import rollback
from paimon_meta.table.tags import TagManager
from tests.ops.helpers import TABLE, create, prepare, read_keys, write

pytestmark = pytest.mark.postgres


def _published(catalog: MetastoreCatalog) -> list[tuple[int, int, str]]:
    """(timeline, snapshot id, event type) of every event that recorded a snapshot, in order."""
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT timeline, snapshot_id, event_type FROM paimon_commit_events"
                " WHERE event_type IN ('snapshot_published', 'external') ORDER BY event_id"
            )
        ).all()
    return [(r[0], r[1], r[2]) for r in rows]


def _five(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(5):
        assert write(catalog, [i * 10 + 1, i * 10 + 2]) == i + 1


def test_rollback_to_a_snapshot(catalog: MetastoreCatalog) -> None:
    _five(catalog)
    tag_ops.create_tag(catalog, TABLE, "keep", 2)
    tag_ops.create_tag(catalog, TABLE, "gone", 4)
    report = rollback(catalog, TABLE, snapshot_id=3, from_snapshot=5, principal="ops")
    assert (report.target_snapshot_id, report.rolled_back_from, report.removed_snapshots) == (3, 5, [4, 5])
    assert report.deleted_tags == ["gone"] and report.timeline == 1
    table = catalog.get_table(TABLE)
    assert table.snapshot_manager.list_snapshot_ids() == [1, 2, 3]
    assert table.snapshot_manager.latest_snapshot_id() == 3
    assert TagManager(table.file_io, table.path).names() == ["keep"]
    assert read_keys(catalog) == [1, 2, 11, 12, 21, 22]
    row = catalog.table_row(TABLE)
    assert (row.latest_snapshot_id, row.timeline) == (3, 1)
    stats = table_statistics(catalog.engine, row.table_id)
    assert stats.complete and stats.record_count == 6
    assert sum(p.file_count for p in list_partitions(catalog.engine, row.table_id)) == stats.file_count

    # The next commits create snapshots 4 and 5 again, each once, in timeline 1.
    assert write(catalog, [100]) == 4
    assert write(catalog, [101]) == 5
    assert read_keys(catalog) == [1, 2, 11, 12, 21, 22, 100, 101]
    assert _published(catalog)[-2:] == [(1, 4, "snapshot_published"), (1, 5, "snapshot_published")]
    assert [p for p in _published(catalog) if p[1] == 4] == [
        (0, 4, "snapshot_published"),
        (1, 4, "snapshot_published"),
    ]
    with catalog.engine.connect() as conn:
        run = conn.execute(
            text(
                "SELECT event_type, principal, payload FROM paimon_maintenance_events"
                " WHERE operation = 'rollback' ORDER BY event_id DESC LIMIT 1"
            )
        ).one()
    assert run.event_type == "finished" and run.principal == "ops"
    assert run.payload["removed_snapshots"] == [4, 5]


def test_exactly_once_forgets_only_rolled_back_commits(catalog: MetastoreCatalog) -> None:
    table = create(catalog)
    user = f"stream-{uuid.uuid4().hex[:6]}"
    commit = table.committer_factory
    assert commit is not None
    for identifier in (1, 2, 3):
        committer = catalog.get_table(TABLE).committer_factory(catalog.get_table(TABLE), user)  # type: ignore[misc]
        committer.commit(prepare(catalog.get_table(TABLE), [identifier], user=user), identifier)
    rollback(catalog, TABLE, snapshot_id=2)
    committer = catalog.get_table(TABLE).committer_factory(catalog.get_table(TABLE), user)  # type: ignore[misc]
    # identifier 2 is still in snapshot 2: deduplicated
    again = committer.commit(prepare(catalog.get_table(TABLE), [2], user=user), 2)
    assert again.deduplicated and again.snapshot_ids == (2,)
    # identifier 3's snapshot was rolled back: committing it again lands, as snapshot 3 of timeline 1
    redo = committer.commit(prepare(catalog.get_table(TABLE), [3], user=user), 3)
    assert not redo.deduplicated and redo.snapshot_ids == (3,)
    assert read_keys(catalog) == [1, 2, 3]


def test_refusals_change_nothing(catalog: MetastoreCatalog) -> None:
    _five(catalog)
    before = catalog.get_table(TABLE).snapshot_manager.list_snapshot_ids()
    with pytest.raises(CommitConflictError):
        rollback(catalog, TABLE, snapshot_id=2, from_snapshot=4)
    with pytest.raises(SnapshotNotFoundError):
        rollback(catalog, TABLE, snapshot_id=9)
    with pytest.raises(TagNotFoundError):
        rollback(catalog, TABLE, tag="nope")
    with pytest.raises(ValidationError):
        rollback(catalog, TABLE)
    assert catalog.get_table(TABLE).snapshot_manager.list_snapshot_ids() == before
    assert catalog.table_row(TABLE).timeline == 0


def test_rollback_to_a_tag(catalog: MetastoreCatalog) -> None:
    _five(catalog)
    tag_ops.create_tag(catalog, TABLE, "t2", 2)
    assert rollback(catalog, TABLE, tag="t2").removed_snapshots == [3, 4, 5]
    assert read_keys(catalog) == [1, 2, 11, 12]


def test_an_interrupted_rollback_is_finished_by_the_next_lock_holder(
    catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    _five(catalog)
    real_delete = LocalFileIO.delete
    deleted: list[str] = []

    def dies_after_one(self: LocalFileIO, path: str) -> Any:
        if "/snapshot/snapshot-" in path and deleted:
            raise KeyboardInterrupt("process died")  # not an Exception: nothing handles it
        deleted.append(path)
        return real_delete(self, path)

    monkeypatch.setattr(LocalFileIO, "delete", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        rollback(catalog, TABLE, snapshot_id=2)
    monkeypatch.setattr(LocalFileIO, "delete", real_delete)
    table = catalog.get_table(TABLE)
    assert table.snapshot_manager.list_snapshot_ids() == [1, 2, 3, 4]  # 5 went, 3 and 4 are leftovers
    assert catalog.table_row(TABLE).latest_snapshot_id == 2

    # The next commit's reconcile deletes the leftovers (never records them) and builds on snapshot 2.
    assert write(catalog, [99]) == 3
    assert read_keys(catalog) == [1, 2, 11, 12, 99]
    assert [p for p in _published(catalog) if p[0] == 1] == [(1, 3, "snapshot_published")]
    assert not any(p[2] == "external" for p in _published(catalog))


def test_a_long_lived_writer_builds_on_the_new_timeline_not_on_what_it_cached(
    catalog: MetastoreCatalog,
) -> None:
    """Snapshot ids above a rollback's target are created again with other content: a writer that
    published (and so remembers) the old snapshot 3 must build the next one on the new snapshot 3."""
    table = create(catalog)
    writer_table = catalog.get_table(TABLE)
    assert writer_table.committer_factory is not None
    long_lived = writer_table.committer_factory(writer_table, "long-lived")
    for identifier in (1, 2, 3):
        long_lived.commit(prepare(writer_table, [identifier], user="long-lived"), identifier)
    rollback(catalog, TABLE, snapshot_id=2)
    assert write(catalog, [30]) == 3  # another writer: the new snapshot 3
    assert table.snapshot_manager.latest_snapshot_id() == 3
    result = long_lived.commit(prepare(writer_table, [4], user="long-lived"), 4)
    assert result.snapshot_ids == (4,)
    # Built on the new 3 (keys 1, 2, 30), not on the rolled-back one (key 3).
    assert read_keys(catalog) == [1, 2, 4, 30]
