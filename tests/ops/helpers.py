"""Shared pieces of the ops tests: a small append table, writes, reads, and the consistency check that
storage, the event log, the pointer and the files must pass after any operation."""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator
from paimon_meta.metastore.principals import Principals
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.identifier import split_identifier
from paimon_meta.ops.references import FilePaths, live_entries, read_metadata
from paimon_meta.table.table import FileStoreTable

TABLE = "db.t"
SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
FAST_LOCK = {"lock.lease-seconds": "2", "lock.acquire-timeout-seconds": "30"}


def create(catalog: MetastoreCatalog, identifier: str = TABLE, **options: str) -> FileStoreTable:
    return catalog.create_table(identifier, SCHEMA, options={"bucket": "2", "bucket-key": "k", **options})


def rows(keys: Iterable[int]) -> pa.Table:
    ks = list(keys)
    return pa.table({"k": pa.array(ks, pa.int32()), "v": [f"v{k}" for k in ks]})


def prepare(table: FileStoreTable, keys: Iterable[int], *, user: str | None = None) -> list[CommitMessage]:
    """Write data files for ``keys`` and return their CommitMessages (nothing committed)."""
    builder = table.new_stream_write_builder().with_commit_user(user or str(uuid.uuid4()))
    write = builder.new_write()
    write.write_arrow(rows(keys))
    return list(write.prepare_commit())


def write(
    catalog: MetastoreCatalog, keys: Iterable[int], *, identifier: str = TABLE, overwrite: bool = False
) -> int:
    """One batch commit of ``keys``; returns its snapshot id."""
    table = catalog.get_table(identifier)
    builder = table.new_batch_write_builder()
    if overwrite:
        builder = builder.overwrite()
    w = builder.new_write()
    w.write_arrow(rows(keys))
    return builder.new_commit().commit(w.prepare_commit()).snapshot_ids[0]


def read_keys(
    catalog: MetastoreCatalog, *, identifier: str = TABLE, snapshot: int | None = None
) -> list[int]:
    builder = catalog.get_table(identifier).new_read_builder()
    if snapshot is not None:
        builder = builder.with_snapshot(snapshot)
    result = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(result.column("k").to_pylist())


def events(catalog: MetastoreCatalog, identifier: str = TABLE) -> list[dict[str, Any]]:
    with catalog.engine.connect() as conn:
        result = conn.execute(
            text(
                "SELECT event_id, commit_id, event_type, commit_user, commit_identifier, commit_kind, "
                "snapshot_id, attempt, payload FROM paimon_commit_events WHERE table_identifier = :t "
                "ORDER BY event_id"
            ),
            {"t": identifier},
        )
        return [dict(r._mapping) for r in result]


def referenced_paths(table: FileStoreTable) -> set[str]:
    """Every file the snapshots on storage need to be read: lists, manifests, live data files."""
    paths = FilePaths(table)
    out: set[str] = set()
    sm = table.snapshot_manager
    for sid in sm.list_snapshot_ids():
        md = read_metadata(table, sm.snapshot(sid), missing_ok=False)
        out.update(paths.manifest(n) for n in md.list_names)
        out.update(paths.manifest(m.file_name) for m in (*md.base, *md.delta, *md.changelog))
        for e in live_entries(table, md):
            out.update(paths.data_file(e))
    return out


def assert_consistent(catalog: MetastoreCatalog, identifier: str = TABLE) -> None:
    """Storage == event log == pointer, nothing pending, every referenced file present, no lock held."""
    db, name = split_identifier(identifier)
    row = catalog.registry.get_table_row(db, name)
    table = catalog.get_table(identifier)
    ids = table.snapshot_manager.list_snapshot_ids()
    assert row.latest_snapshot_id == (ids[-1] if ids else None)
    assert catalog.events.pending_commits(row.table_id) == []
    recorded: dict[int, list[str]] = {}
    terminal: dict[Any, int] = {}
    for e in events(catalog, identifier):
        # The event that recorded a snapshot: published, external, or reconcile's ``recovered`` (it
        # carries the snapshot uuid); recovery's other ``recovered`` events only point at a snapshot.
        if e["event_type"] in ("snapshot_published", "external") or (
            e["event_type"] == "recovered" and "snapshot_uuid" in e["payload"]
        ):
            recorded.setdefault(e["snapshot_id"], []).append(e["event_type"])
        if e["event_type"] in ("snapshot_published", "failed", "aborted", "recovered"):
            terminal[e["commit_id"]] = terminal.get(e["commit_id"], 0) + 1
    assert all(n == 1 for n in terminal.values()), "a commit has more than one terminal event"
    for sid in ids:
        assert len(recorded.get(sid, [])) == 1, (sid, recorded.get(sid))
        snap = table.snapshot_manager.snapshot(sid)
        keys = [table.snapshot_manager.snapshot(o).dedupe_key for o in ids if o != sid]
        assert snap.dedupe_key not in keys, f"snapshot {sid} repeats a commit"
    for path in referenced_paths(table):
        assert table.file_io.exists(path), f"referenced file missing: {path}"
    assert catalog.lock.get_lock(catalog.registry.lock_id(db, name)) is None


def manifest_files(table: FileStoreTable) -> set[str]:
    return {s.path for s in table.file_io.list(table.paths.manifest_dir)}


def unreferenced_manifest_files(table: FileStoreTable) -> set[str]:
    return manifest_files(table) - referenced_paths(table)


def make_old(paths: Sequence[str], seconds: float = 7 * 86400) -> None:
    """Backdate local files' mtimes (orphan cleanup goes by age)."""
    import os
    import time

    when = time.time() - seconds
    for p in paths:
        os.utime(p, (when, when))


class Crash(BaseException):
    """Stands in for the process dying: the commit path handles Exception, never this. In-process, its
    ``finally`` blocks still run (the lock is released); a real death is in test_recovery's child."""


@contextmanager
def crash_at(point: str) -> Iterator[None]:
    """Raise :class:`Crash` when a commit reaches ``point`` (a ``paimon_meta.commit.crashpoints`` name)."""
    patch = pytest.MonkeyPatch()
    try:
        crashpoints: Any = importlib.import_module("paimon_meta.commit.crashpoints")
    except ImportError:
        crashpoints = None
    if crashpoints is not None and point in {p.value for p in crashpoints.CrashPoint}:
        original = crashpoints.reached

        def reached(p: Any) -> None:
            if p.value == point:
                raise Crash(point)
            original(p)

        patch.setattr(crashpoints, "reached", reached)
    elif point == "after_lock":

        def die(*_a: Any, **_k: Any) -> Any:
            raise Crash(point)

        patch.setattr(CommitCoordinator, "_attempt", die)
    else:
        raise ValueError(f"no in-process stand-in for crash point {point!r}")
    try:
        yield
    finally:
        patch.undo()


def all_files(table: FileStoreTable) -> list[str]:
    return [s.path for s in table.file_io.list_recursive(table.path)]


def files_under(location: str) -> list[str]:
    """Every file below a local ``location``, sorted (what a drop kept, an undrop brought back)."""
    return sorted(str(p) for p in Path(location).rglob("*") if p.is_file())


def grants_of(principals: Principals, name: str) -> set[tuple[str, str | None, str | None]]:
    """The principal's grants as (privilege, database, table)."""
    (info,) = [p for p in principals.list() if p.name == name]
    return {(g.privilege.value, g.scope.database, g.scope.table) for g in info.grants}
