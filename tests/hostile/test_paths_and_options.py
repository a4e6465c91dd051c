"""Hostile-client probes, files and options: a table's metadata naming files outside the table, and table
options that would place files outside it (issue 23, items 2 and 3).

The poisoned tables are built below the commit path (legitimate commits, then their manifests rewritten
on storage, as a client with storage access or a foreign writer could), so these tests exercise the
readers and deleters themselves, whatever the commit validation refuses: ``db1.t1``'s metadata names
``db2.t2``'s data file through ``../../../db2.db/t2/bucket-0/<name>`` and a file outside the warehouse
through an absolute ``external_path``. Reads must refuse them; expiration, orphan cleanup, rollback and
aborts must delete neither, and the victim table must still read.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import ValidationError
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.orphans import remove_orphan_files
from paimon_meta.ops.references import FilePaths, live_entries, read_metadata
from paimon_meta.ops.rollback import rollback
from paimon_meta.serde.avro import (
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_index_manifest,
    encode_manifest,
)
from paimon_meta.table import schema_change
from paimon_meta.table.table import FileStoreTable
from tests.fixtures.golden import golden_table_path
from tests.ops.helpers import FAST_LOCK, SCHEMA, create, prepare, read_keys, write

T1, T2 = "db1.t1", "db2.t2"
# PathOutsideTableError (a ValidationError); matched by name so this module imports only the API that
# predates the fix, and each test fails on its own against the code before it
OUTSIDE = ValidationError
VICTIM_KEYS = [100, 101]


# ---- building a poisoned table below the commit path ------------------------------------------------


def _rewrite_delta(
    table: FileStoreTable, snapshot_id: int, change: Callable[[list[ManifestEntry]], list[ManifestEntry]]
) -> None:
    """Rewrite the delta manifests of one snapshot in place (what a client with storage access can do)."""
    snapshot = table.snapshot_manager.snapshot(snapshot_id)
    listing = Path(table.paths.manifest_path(snapshot.delta_manifest_list))
    for meta in decode_manifest_list(listing.read_bytes()):
        path = Path(table.paths.manifest_path(meta.file_name))
        entries = decode_manifest(path.read_bytes())
        path.write_bytes(encode_manifest(change(entries)))


def _live_paths(catalog: MetastoreCatalog, identifier: str) -> list[str]:
    table = catalog.get_table(identifier)
    md = read_metadata(table, table.latest_snapshot(), missing_ok=False)  # type: ignore[arg-type]
    paths = FilePaths(table)
    return [paths.data_file(e)[0] for e in live_entries(table, md)]


@dataclasses.dataclass
class Poisoned:
    catalog: MetastoreCatalog
    victim: Path  # db2.t2's data file, which db1.t1 names through "../../../db2.db/t2/..."
    outside: Path  # a file outside the warehouse, which db1.t1 names as an external path
    poisoned_names: list[str]


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    cat = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **FAST_LOCK)
    try:
        yield cat
    finally:
        cat.close()


def _poison(
    catalog: MetastoreCatalog,
    tmp_path: Path,
    *,
    then_delete: bool,
    kinds: tuple[str, ...] = ("name", "external"),
    third: bool = False,
) -> Poisoned:
    """db2.t2 with the victim file; db1.t1 whose snapshot 1 names the victim by a relative name and whose
    snapshot 2 names a copy of it outside the warehouse by external path; with ``then_delete``, snapshot 3
    DELETEs both (what an overwrite of db1.t1 commits), so expiring 1..2 plans to delete them. ``kinds``:
    which of the two poisonings to apply (the other snapshot stays as committed); ``third``: snapshot 3
    (a third file) without the DELETEs."""
    create(catalog, T2, bucket="1")
    write(catalog, VICTIM_KEYS, identifier=T2)
    [victim] = _live_paths(catalog, T2)
    outside = tmp_path / "outside" / "secret.parquet"
    outside.parent.mkdir()
    shutil.copy(victim, outside)

    create(catalog, T1, bucket="1")
    write(catalog, [1], identifier=T1)
    write(catalog, [2], identifier=T1)
    if then_delete or third:
        write(catalog, [3], identifier=T1)
    table = catalog.get_table(T1)
    relative = f"../../../db2.db/t2/bucket-0/{Path(victim).name}"
    poisoned: list[ManifestEntry] = []

    def by_name(entries: list[ManifestEntry]) -> list[ManifestEntry]:
        out = [dataclasses.replace(e, file=dataclasses.replace(e.file, file_name=relative)) for e in entries]
        poisoned.extend(out)
        return out

    def by_external(entries: list[ManifestEntry]) -> list[ManifestEntry]:
        out = [
            dataclasses.replace(e, file=dataclasses.replace(e.file, external_path=str(outside)))
            for e in entries
        ]
        poisoned.extend(out)
        return out

    if "name" in kinds:
        _rewrite_delta(table, 1, by_name)
    if "external" in kinds:
        _rewrite_delta(table, 2, by_external)
    if then_delete:
        _rewrite_delta(
            table, 3, lambda es: [*es, *(dataclasses.replace(p, kind=FileKind.DELETE) for p in poisoned)]
        )
    return Poisoned(catalog, Path(victim), outside, [p.file.file_name for p in poisoned])


def _finished_payload(catalog: MetastoreCatalog, operation: str) -> dict[str, Any]:
    with catalog.engine.connect() as conn:
        payload: dict[str, Any] = conn.execute(
            text(
                "SELECT payload FROM paimon_maintenance_events WHERE table_identifier = :t "
                "AND operation = :o AND event_type = 'finished' ORDER BY event_id DESC LIMIT 1"
            ),
            {"t": T1, "o": operation},
        ).scalar_one()
    return payload


def _assert_untouched(p: Poisoned) -> None:
    assert p.victim.exists(), "db2.t2's data file was deleted through db1.t1"
    assert p.outside.exists(), "a file outside the warehouse was deleted through db1.t1"
    assert read_keys(p.catalog, identifier=T2) == VICTIM_KEYS


# ---- item 2: reads ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["name", "external"])
def test_read_refuses_a_file_of_another_table_or_outside_the_warehouse(
    catalog: MetastoreCatalog, tmp_path: Path, kind: str
) -> None:
    p = _poison(catalog, tmp_path, then_delete=False, kinds=(kind,))
    # before: a read of db1.t1 returned db2.t2's rows (100, 101) with its own
    with pytest.raises(OUTSIDE) as err:
        read_keys(catalog, identifier=T1)
    assert type(err.value).__name__ == "PathOutsideTableError"
    named = str(p.victim.name) if kind == "name" else str(p.outside)
    assert named in err.value.message
    _assert_untouched(p)


def test_compaction_refuses_to_read_another_tables_file(catalog: MetastoreCatalog, tmp_path: Path) -> None:
    from paimon_meta.table.compact import compact

    p = _poison(catalog, tmp_path, then_delete=False, third=True)  # 3 small files: a rewrite is planned
    with pytest.raises(OUTSIDE) as err:
        compact(catalog.get_table(T1))  # before: rewrote db2.t2's rows into db1.t1
    assert type(err.value).__name__ == "PathOutsideTableError"
    _assert_untouched(p)


def test_first_row_writer_refuses_to_read_another_tables_file(
    catalog: MetastoreCatalog, tmp_path: Path
) -> None:
    """A first-row writer reads the bucket's files above level 0 to keep each key's first row: a
    manifest naming another table's file there must not make it read (and dedupe against) that file."""
    from paimon_meta.table.compact import compact

    create(catalog, T2, bucket="1")
    write(catalog, VICTIM_KEYS, identifier=T2)
    [victim] = _live_paths(catalog, T2)
    catalog.create_table(T1, SCHEMA, primary_keys=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    write(catalog, [100], identifier=T1)
    compact(catalog.get_table(T1))  # snapshot 2 adds the file at the max level
    relative = f"../../../db2.db/t2/bucket-0/{Path(victim).name}"
    _rewrite_delta(
        catalog.get_table(T1),
        2,
        lambda es: [
            dataclasses.replace(e, file=dataclasses.replace(e.file, file_name=relative))
            if e.kind is FileKind.ADD
            else e
            for e in es
        ],
    )
    with pytest.raises(OUTSIDE) as err:
        prepare(catalog.get_table(T1), [100, 101])  # before: read db2.t2's file as db1.t1's
    assert type(err.value).__name__ == "PathOutsideTableError"
    assert Path(victim).exists() and read_keys(catalog, identifier=T2) == VICTIM_KEYS


def test_read_refuses_a_deletion_vector_outside_the_table(golden_copy: Any, tmp_path: Path) -> None:
    golden_table_path("orc", "pk_dv_index_with_commit_message_version10")
    path = golden_copy("orc", "pk_dv_index_with_commit_message_version10")
    table = FileStoreTable.open(str(path))
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.index_manifest
    manifest = Path(table.paths.manifest_path(snapshot.index_manifest))
    data = manifest.read_bytes()
    entries = decode_index_manifest(data, fmt="orc" if data.startswith(b"ORC") else "avro")
    outside = tmp_path / "outside-dv"
    outside.mkdir()
    moved = []
    for e in entries:
        target = outside / e.index_file.file_name
        shutil.copy(table.paths.index_file_path(e.index_file), target)
        moved.append(
            dataclasses.replace(e, index_file=dataclasses.replace(e.index_file, external_path=str(target)))
        )
    assert moved
    manifest.write_bytes(encode_index_manifest(moved))
    table = FileStoreTable.open(str(path))
    builder = table.new_read_builder()
    with pytest.raises(OUTSIDE) as err:  # before: read the vectors from outside the table
        builder.new_read().to_arrow(builder.new_scan().plan().splits())
    assert type(err.value).__name__ == "PathOutsideTableError"
    assert str(outside) in err.value.message


def test_read_refuses_a_manifest_named_outside_the_table(catalog: MetastoreCatalog, tmp_path: Path) -> None:
    p = _poison(catalog, tmp_path, then_delete=False)
    table = catalog.get_table(T1)
    snapshot = table.snapshot_manager.snapshot(1)
    listing = Path(table.paths.manifest_path(snapshot.delta_manifest_list))
    metas = decode_manifest_list(listing.read_bytes())
    t2 = catalog.get_table(T2)
    t2_snapshot = t2.latest_snapshot()
    assert t2_snapshot is not None
    [t2_meta] = decode_manifest_list(
        Path(t2.paths.manifest_path(t2_snapshot.delta_manifest_list)).read_bytes()
    )
    from paimon_meta.serde.avro import encode_manifest_list

    other = dataclasses.replace(metas[0], file_name=f"../../../db2.db/t2/manifest/{t2_meta.file_name}")
    listing.write_bytes(encode_manifest_list([other]))
    with pytest.raises(OUTSIDE) as err:
        read_keys(catalog, identifier=T1, snapshot=1)
    assert type(err.value).__name__ == "PathOutsideTableError"
    _assert_untouched(p)


# ---- item 2: deletions ------------------------------------------------------------------------------


def test_expiration_after_an_overwrite_deletes_nothing_outside_the_table(
    catalog: MetastoreCatalog, tmp_path: Path
) -> None:
    p = _poison(catalog, tmp_path, then_delete=True)
    report = expire_snapshots(catalog, T1, retain_min=1, time_retained_ms=0)
    # before: deleted db2.t2's data file and the file outside the warehouse
    _assert_untouched(p)
    # the legitimate work is done: snapshots 1 and 2 expired, their manifests deleted
    assert report.expired == [1, 2]
    assert report.deleted_metadata_files
    assert not any(Path(f).exists() for f in report.deleted_metadata_files)
    assert len(report.refused_paths) == 2
    payload = _finished_payload(catalog, "expire_snapshots")
    assert payload["refused_paths"] == 2
    assert sorted(payload["refused_first"]) == sorted(report.refused_paths)
    assert read_keys(catalog, identifier=T1) == [3]


def test_orphan_cleanup_deletes_nothing_outside_the_table(catalog: MetastoreCatalog, tmp_path: Path) -> None:
    p = _poison(catalog, tmp_path, then_delete=True)
    report = remove_orphan_files(catalog, T1, older_than_seconds=0)
    _assert_untouched(p)
    assert report.deleted  # db1.t1's own files the rewritten manifests no longer name
    assert all(d.startswith(catalog.get_table(T1).path + "/") for d in report.deleted)
    assert read_keys(catalog, identifier=T1) == [3]


def test_rollback_deletes_nothing_outside_the_table(catalog: MetastoreCatalog, tmp_path: Path) -> None:
    p = _poison(catalog, tmp_path, then_delete=True)
    rollback(catalog, T1, snapshot_id=1)
    _assert_untouched(p)
    expire_snapshots(catalog, T1, retain_min=1, time_retained_ms=0)
    _assert_untouched(p)


def test_abort_refuses_to_delete_files_a_message_names_outside_the_table(
    catalog: MetastoreCatalog, tmp_path: Path
) -> None:
    p = _poison(catalog, tmp_path, then_delete=False)
    table = catalog.get_table(T1)
    [message] = prepare(table, [7])
    [own] = message.data_increment.new_files
    own_path = Path(table.paths.bucket_path((), message.bucket)) / own.file_name
    assert own_path.exists()
    hostile = [
        dataclasses.replace(
            message, data_increment=dataclasses.replace(message.data_increment, new_files=(f,))
        )
        for f in (
            dataclasses.replace(own, file_name=f"../../../db2.db/t2/bucket-0/{p.victim.name}"),
            dataclasses.replace(own, external_path=str(p.outside)),
        )
    ]
    messages: list[CommitMessage] = [*hostile, message]
    table.new_batch_write_builder().new_commit().abort(messages)
    _assert_untouched(p)  # before: both deleted
    assert not own_path.exists()  # the writer's own file is still cleaned up


def test_expiration_deletes_files_under_the_tables_own_external_root(clean_db: str, tmp_path: Path) -> None:
    """Reads and deletions use the table's configured roots: a file under its external root (as a Java
    writer places it) is read and expired like any other; moving the root keeps the old files readable."""
    ext = tmp_path / "ext"
    ext.mkdir()
    options = {**FAST_LOCK, "external-roots.allowed": f"file://{ext}"}
    with paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **options) as catalog:
        create(catalog, T1, bucket="1", **{"data-file.external-paths": f"file://{ext}/t1"})
        write(catalog, [1], identifier=T1)
        table = catalog.get_table(T1)
        [entry] = live_entries(table, read_metadata(table, table.latest_snapshot(), missing_ok=False))  # type: ignore[arg-type]
        moved = ext / "t1" / "bucket-0" / entry.file.file_name
        moved.parent.mkdir(parents=True)
        shutil.move(FilePaths(table).data_file(entry)[0], moved)
        _rewrite_delta(
            table,
            1,
            lambda es: [
                dataclasses.replace(e, file=dataclasses.replace(e.file, external_path=str(moved))) for e in es
            ],
        )
        catalog.alter_table_changes(
            T1, [schema_change.SetOption("data-file.external-paths", f"file://{ext}/t1-new")]
        )
        assert read_keys(catalog, identifier=T1) == [1]  # the old root is still the table's
        write(catalog, [2], identifier=T1, overwrite=True)
        report = expire_snapshots(catalog, T1, retain_min=1, time_retained_ms=0)
        assert report.refused_paths == []
        assert str(moved) in report.deleted_data_files
        assert not moved.exists()


# ---- item 3: options that place files ---------------------------------------------------------------


BAD_PLACEMENTS = [
    ("data-file.path-directory", "../../db2.db/t2"),
    ("data-file.path-directory", "/tmp/elsewhere"),
    ("data-file.path-directory", "data/../../../db2.db/t2"),
    ("data-file.prefix", "../../../db2.db/t2/bucket-0/data-"),
    ("changelog-file.prefix", "x/changelog-"),
    ("file.compression", "zstd/../../x"),
    ("branch", "../x"),
    ("scan.fallback-branch", "a/b"),
    ("scan.tag-name", "../../t"),
    ("consumer-id", "../../c"),
    ("data-file.external-paths", "/tmp/anywhere"),
    ("data-file.external-paths", "s3://other-bucket/x"),
    ("global-index.external-path", "/tmp/anywhere"),
]


@pytest.mark.parametrize(("key", "value"), BAD_PLACEMENTS)
def test_create_refuses_options_that_place_files_outside(
    catalog: MetastoreCatalog, key: str, value: str
) -> None:
    with pytest.raises(ValidationError) as err:
        create(catalog, T1, **{key: value})
    assert err.value.fields.get("option") == key
    assert "db1" not in catalog.list_databases() or "t1" not in catalog.list_tables("db1")


@pytest.mark.parametrize(("key", "value"), BAD_PLACEMENTS)
def test_set_option_refuses_options_that_place_files_outside(
    catalog: MetastoreCatalog, key: str, value: str
) -> None:
    create(catalog, T1)
    schema_id = catalog.get_table(T1).schema.id
    with pytest.raises(ValidationError) as err:
        catalog.alter_table_changes(T1, [schema_change.SetOption(key, value)])
    assert err.value.fields.get("option") == key
    assert catalog.get_table(T1).schema.id == schema_id  # nothing written


def test_path_directory_cannot_put_files_in_another_tables_bucket(
    catalog: MetastoreCatalog, tmp_path: Path
) -> None:
    """The issue's reproduction: files of db1.t1 landed in db2.t2's bucket directory."""
    create(catalog, T2, bucket="1")
    write(catalog, VICTIM_KEYS, identifier=T2)
    t2_bucket = Path(catalog.get_table(T2).paths.bucket_path((), 0))
    before = set(t2_bucket.iterdir())
    with pytest.raises(ValidationError):
        create(catalog, T1, bucket="1", **{"data-file.path-directory": "../../db2.db/t2"})
        write(catalog, [1], identifier=T1)
    create(catalog, "db1.t3", bucket="1")
    with pytest.raises(ValidationError):
        catalog.alter_table_changes(
            "db1.t3", [schema_change.SetOption("data-file.path-directory", "../../db2.db/t2")]
        )
        write(catalog, [1], identifier="db1.t3")
    assert set(t2_bucket.iterdir()) == before
    assert read_keys(catalog, identifier=T2) == VICTIM_KEYS


def test_external_paths_only_under_an_allowed_root(clean_db: str, tmp_path: Path) -> None:
    allowed = tmp_path / "ext"
    warehouse = tmp_path / "warehouse"
    options = {**FAST_LOCK, "external-roots.allowed": f"file://{allowed},{tmp_path}"}
    with paimon_meta.connect(clean_db, str(warehouse), **options) as catalog:
        create(catalog, "db.ok", **{"data-file.external-paths": f"file://{allowed}/ok,{allowed}/ok2"})
        create(catalog, "db.alter")
        catalog.alter_table_changes(
            "db.alter", [schema_change.SetOption("data-file.external-paths", f"file://{allowed}/alter")]
        )
        for value in (
            f"file://{tmp_path.parent}/x",  # not under an allowed root
            f"file://{allowed}/../escape",  # '..'
            f"file://{warehouse}/db2.db/t2",  # under an allowed root, but inside the warehouse
            str(tmp_path),  # around the warehouse
            "relative/dir",
        ):
            with pytest.raises(ValidationError) as err:
                create(catalog, "db.bad", **{"data-file.external-paths": value})
            assert err.value.fields.get("option") == "data-file.external-paths", value
    with pytest.raises(ValidationError):
        paimon_meta.connect(clean_db, str(warehouse), **{"external-roots.allowed": "relative/root"})


def test_harmless_placement_options_are_accepted(catalog: MetastoreCatalog) -> None:
    create(
        catalog,
        T1,
        bucket="1",
        **{
            "data-file.path-directory": "data/files",
            "data-file.prefix": "part-",
            "changelog-file.prefix": "cl-",
            "scan.fallback-branch": "",
            "path": catalog.table_location("db1", "t1"),
        },
    )
    write(catalog, [1, 2], identifier=T1)
    assert read_keys(catalog, identifier=T1) == [1, 2]
    [path] = _live_paths(catalog, T1)
    assert "/t1/data/files/bucket-0/part-" in path
    with pytest.raises(ValidationError):
        create(catalog, "db1.t2", **{"path": catalog.table_location("db2", "t2")})
