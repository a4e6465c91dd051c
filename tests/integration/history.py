"""Reading a table's whole history (storage and metastore) and checking the invariants every history
must keep after concurrent writers, crashes and takeovers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.identifier import split_identifier
from paimon_meta.model.manifest import FileKind
from paimon_meta.model.snapshot import Snapshot


@dataclass
class History:
    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    live_files: set[str] = field(default_factory=set)
    events: list[dict[str, Any]] = field(default_factory=list)
    lock_events: list[dict[str, Any]] = field(default_factory=list)
    pointer: int | None = None
    manifest_files: set[str] = field(default_factory=set)
    referenced: set[str] = field(default_factory=set)

    def events_of(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event_type"] == event_type]


def read_history(catalog: MetastoreCatalog, identifier: str) -> History:
    """Everything about ``identifier``: snapshots, the final live files, events, pointer, manifests."""
    h = History()
    db, name = split_identifier(identifier)
    row = catalog.registry.get_table_row(db, name)
    table = catalog.get_table(identifier)
    manager, reader, file_io = table.snapshot_manager, table.manifest_reader, table.file_io
    for sid in manager.list_snapshot_ids():
        h.snapshots[sid] = manager.snapshot(sid)
    if h.snapshots:
        live: Counter[str] = Counter()
        final = h.snapshots[max(h.snapshots)]
        for group in reader.manifests(reader.data_manifests(final)):
            for entry in group:
                live[entry.file.file_name] += 1 if entry.kind is FileKind.ADD else -1
        assert all(n in (0, 1) for n in live.values()), f"a file added twice: {live.most_common(3)}"
        h.live_files = {f for f, n in live.items() if n == 1}
    for snap in h.snapshots.values():
        for listed in (snap.base_manifest_list, snap.delta_manifest_list, snap.changelog_manifest_list):
            if listed is not None:
                h.referenced.add(listed)
                h.referenced.update(m.file_name for m in reader.manifest_list(listed))
        if snap.index_manifest is not None:
            h.referenced.add(snap.index_manifest)
    manifest_dir = file_io.join(table.path, "manifest")
    h.manifest_files = {s.path.rsplit("/", 1)[-1] for s in file_io.list(manifest_dir)}
    with catalog.engine.connect() as conn:
        h.events = [
            dict(r._mapping)
            for r in conn.execute(
                text(
                    "SELECT event_id, commit_id, event_type, commit_user, commit_identifier, commit_kind, "
                    "snapshot_id, attempt, payload FROM paimon_commit_events WHERE table_id = :t "
                    "ORDER BY event_id"
                ),
                {"t": row.table_id},
            )
        ]
        h.lock_events = [
            dict(r._mapping)
            for r in conn.execute(
                text(
                    "SELECT event_id, event_type, owner, fencing_token, previous_owner, "
                    "previous_fencing_token, payload FROM paimon_lock_events WHERE lock_id = :l "
                    "ORDER BY event_id"
                ),
                {"l": catalog.registry.lock_id(db, name)},
            )
        ]
    h.pointer = catalog.registry.get_table_row(db, name).latest_snapshot_id
    return h


def check_exactly_once(h: History, acked: dict[tuple[str, int], str]) -> None:
    """The invariants of concurrent writers without crashes. ``acked``: (user, identifier) -> the data
    file of every acknowledged commit."""
    ids = sorted(h.snapshots)
    assert ids == list(range(1, len(acked) + 1)), f"snapshot ids {ids[:5]}..{ids[-5:]} not 1..{len(acked)}"
    # every acknowledged commit present exactly once, nothing else
    assert h.live_files == set(acked.values())
    keys = [(s.commit_user, s.commit_identifier) for s in h.snapshots.values()]
    assert len(set(keys)) == len(keys), "a (user, identifier) is in two snapshots"
    assert set(keys) == set(acked)
    # the event log matches storage: one snapshot_published per snapshot, with the snapshot's key
    published = h.events_of("snapshot_published")
    assert sorted(e["snapshot_id"] for e in published) == ids
    for e in published:
        snap = h.snapshots[e["snapshot_id"]]
        assert (e["commit_user"], e["commit_identifier"], e["commit_kind"]) == (
            snap.commit_user,
            snap.commit_identifier,
            snap.commit_kind.value,
        )
    assert not h.events_of("failed") and not h.events_of("external")
    assert h.pointer == ids[-1]
    check_no_orphan_manifests(h)


def check_no_orphan_manifests(h: History) -> None:
    """Every file in manifest/ is referenced by some snapshot's lists."""
    orphans = h.manifest_files - h.referenced
    assert not orphans, f"orphan manifests: {sorted(orphans)[:5]}"
