"""A tagged snapshot outlives its expiration: the tag still reads, and neither snapshot expiration nor
orphan cleanup deletes a file the tag needs, until the tag is deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.orphans import referenced_names, remove_orphan_files
from paimon_meta.ops.references import FilePaths, live_entries, read_metadata
from paimon_meta.ops.tags import create_tag, delete_tag
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.time_travel import tag_snapshot
from tests.ops.helpers import TABLE, assert_consistent, create, make_old, read_keys, write

pytestmark = pytest.mark.postgres


def _needed(table: FileStoreTable, snapshot: Snapshot) -> set[str]:
    """Every file reading ``snapshot`` opens: its manifest lists, their manifests, its live data files."""
    md = read_metadata(table, snapshot, missing_ok=False)
    paths = FilePaths(table)
    out = {paths.manifest(n) for n in md.list_names}
    out.update(paths.manifest(m.file_name) for m in (*md.base, *md.delta))
    for entry in live_entries(table, md):
        out.update(paths.data_file(entry))
    return out


def _tag_keys(table: FileStoreTable, name: str) -> list[int]:
    builder = table.new_read_builder().with_tag(name)
    return sorted(builder.new_read().to_arrow(builder.new_scan().plan().splits()).column("k").to_pylist())


def test_expiration_and_orphan_cleanup_keep_a_tagged_snapshot(catalog: MetastoreCatalog) -> None:
    create(catalog)
    for i in range(5):  # each snapshot replaces the whole table: only snapshot i reads its files
        write(catalog, range(i * 10, i * 10 + 10), overwrite=True)
    create_tag(catalog, TABLE, "k2", 2)
    table = catalog.get_table(TABLE)
    tagged = tag_snapshot(table, "k2")
    needed = _needed(table, tagged)
    only_s1 = _needed(table, table.snapshot(1)) - needed
    assert any("/data-" in p for p in needed) and any("/data-" in p for p in only_s1)

    report = expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0)
    assert report.expired == [1, 2, 3, 4]
    table = catalog.get_table(TABLE)
    assert not table.snapshot_manager.snapshot_exists(2)
    missing = sorted(p for p in needed if not table.file_io.exists(p))
    assert missing == [], missing
    assert not any(table.file_io.exists(p) for p in only_s1)  # expiration did delete what only s1 used
    assert _tag_keys(table, "k2") == list(range(10, 20))
    assert read_keys(catalog) == list(range(40, 50))

    make_old([str(p) for p in Path(table.path).rglob("*") if p.is_file()])
    orphans = remove_orphan_files(catalog, TABLE, older_than_seconds=3600)
    assert not set(orphans.deleted) & needed
    missing = sorted(p for p in needed if not table.file_io.exists(p))
    assert missing == [], missing
    assert _tag_keys(catalog.get_table(TABLE), "k2") == list(range(10, 20))
    assert_consistent(catalog)

    # deleting the tag turns the files only it kept into orphans, which cleanup then deletes
    # (those the latest snapshot's manifests still name, by an entry of any kind, stay: Java matches names)
    assert delete_tag(catalog, TABLE, "k2") == 2
    still_named = referenced_names(catalog.get_table(TABLE))
    freed = {p for p in needed if p.rsplit("/", 1)[-1] not in still_named}
    lists = {FilePaths(table).manifest(n) for n in (tagged.base_manifest_list, tagged.delta_manifest_list)}
    assert lists <= freed
    orphans = remove_orphan_files(catalog, TABLE, older_than_seconds=3600)
    assert set(orphans.deleted) == freed
    assert read_keys(catalog) == list(range(40, 50))
    assert_consistent(catalog)
