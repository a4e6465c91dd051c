"""Every manifest, manifest list and index manifest Java Paimon wrote into the golden tables decodes,
agrees with the table directory and the snapshots, and survives an Avro re-encode."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq
import pytest

from paimon_meta.model.manifest import FileIdentifier, FileKind, ManifestEntry
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.avro import (
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_index_manifest,
    encode_manifest,
    encode_manifest_list,
)
from paimon_meta.serde.json import schema_from_json, snapshot_from_json
from paimon_meta.serde.manifest_schemas import (
    INDEX_MANIFEST_ENTRY_SCHEMA,
    MANIFEST_ENTRY_SCHEMA,
    MANIFEST_FILE_META_SCHEMA,
    schema_text,
)
from tests.fixtures.golden import GOLDEN_TABLES, golden_table_path

TABLE_IDS = [f"{fmt}/{name}" for fmt, name in GOLDEN_TABLES]


def _manifest_format(table: Path) -> str:
    schema = schema_from_json((table / "schema" / "schema-0").read_bytes())
    return schema.core_options.manifest_format


def _kind_of(name: str) -> str:
    if name.startswith("manifest-list-"):
        return "list"
    if name.startswith("index-manifest-"):
        return "index"
    assert name.startswith("manifest-"), name
    return "manifest"


_DECODERS: dict[str, Callable[..., list[Any]]] = {
    "list": decode_manifest_list,
    "index": decode_index_manifest,
    "manifest": decode_manifest,
}
_ENCODERS: dict[str, Callable[..., bytes]] = {
    "list": encode_manifest_list,
    "index": encode_index_manifest,
    "manifest": encode_manifest,
}
_JAVA_SCHEMAS = {
    "list": MANIFEST_FILE_META_SCHEMA,
    "index": INDEX_MANIFEST_ENTRY_SCHEMA,
    "manifest": MANIFEST_ENTRY_SCHEMA,
}


def _decode_file(path: Path, fmt: str) -> list[Any]:
    return _DECODERS[_kind_of(path.name)](path.read_bytes(), fmt=fmt, path=str(path))


def _snapshots(table: Path) -> list[Snapshot]:
    files = [p for p in (table / "snapshot").iterdir() if re.fullmatch(r"snapshot-\d+", p.name)]
    snaps = [snapshot_from_json(p.read_bytes(), path=str(p)) for p in files]
    return sorted(snaps, key=lambda s: s.id)


def _data_files_on_disk(table: Path) -> dict[str, Path]:
    """Data file name -> path, for every file under a bucket directory (names are UUID-unique)."""
    out: dict[str, Path] = {}
    for dirpath, _, names in os.walk(table):
        if Path(dirpath).name.startswith("bucket-"):
            for n in names:
                assert n not in out, f"duplicate data file name {n}"
                out[n] = Path(dirpath) / n
    return out


def _row_count(path: Path) -> int:
    if path.suffix == ".parquet":
        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".orc":
        return int(pa_orc.ORCFile(str(path)).nrows)
    raise AssertionError(f"unexpected data file format: {path}")


def _read_entries(table: Path, fmt: str, list_name: str) -> list[ManifestEntry]:
    entries: list[ManifestEntry] = []
    for meta in _decode_file(table / "manifest" / list_name, fmt):
        manifest = table / "manifest" / meta.file_name
        assert meta.file_size == os.path.getsize(manifest), meta.file_name
        got = _decode_file(manifest, fmt)
        assert meta.num_added_files == sum(e.kind is FileKind.ADD for e in got), meta.file_name
        assert meta.num_deleted_files == sum(e.kind is FileKind.DELETE for e in got), meta.file_name
        entries.extend(got)
    return entries


def _merge(entries: Sequence[ManifestEntry]) -> dict[FileIdentifier, ManifestEntry]:
    """Java's FileEntry.mergeEntries: an ADD and a later DELETE of the same identifier cancel out."""
    live: dict[FileIdentifier, ManifestEntry] = {}
    for e in entries:
        key = e.identifier
        if e.kind is FileKind.ADD:
            assert key not in live, f"{e.file.file_name} added twice"
            live[key] = e
        else:
            assert key in live, f"{e.file.file_name} deleted but never added"
            del live[key]
    return live


def _only_no_compact(table: Path) -> bool:
    readme = table / "README"
    if not readme.exists():
        return False
    words = re.findall(r"\w*compact\w*", readme.read_text(), flags=re.IGNORECASE)
    return bool(words) and all(w == "NoCompact" for w in words)


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_every_manifest_file_decodes(fmt: str, name: str) -> None:
    table = golden_table_path(fmt, name)
    manifest_format = _manifest_format(table)
    files = sorted((table / "manifest").iterdir())
    assert files
    for path in files:
        magic = path.read_bytes()[:3]
        assert magic == (b"ORC" if manifest_format == "orc" else b"Obj"), path
        assert isinstance(_decode_file(path, manifest_format), list)


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_latest_snapshot_agrees_with_table_directory(fmt: str, name: str) -> None:
    table = golden_table_path(fmt, name)
    manifest_format = _manifest_format(table)
    on_disk = _data_files_on_disk(table)
    latest = _snapshots(table)[-1]
    for list_name, size in (
        (latest.base_manifest_list, latest.base_manifest_list_size),
        (latest.delta_manifest_list, latest.delta_manifest_list_size),
    ):
        if size is not None:
            assert size == os.path.getsize(table / "manifest" / list_name)

    entries = _read_entries(table, manifest_format, latest.base_manifest_list)
    entries += _read_entries(table, manifest_format, latest.delta_manifest_list)
    live = _merge(entries)
    assert live, "the latest snapshot has no data files"
    for entry in live.values():
        f = entry.file
        path = on_disk[f.file_name]
        assert path.parent.name == f"bucket-{entry.bucket}"
        assert f.file_size == os.path.getsize(path), f.file_name
        assert f.row_count == _row_count(path), f.file_name
    assert latest.total_record_count == sum(e.file.row_count for e in live.values())
    if _only_no_compact(table):
        assert {e.file.file_name for e in live.values()} == set(on_disk)


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_every_added_file_of_every_snapshot_exists(fmt: str, name: str) -> None:
    """Nothing was expired in the golden tables, so every file any delta ever added is still there."""
    table = golden_table_path(fmt, name)
    manifest_format = _manifest_format(table)
    on_disk = _data_files_on_disk(table)
    for snap in _snapshots(table):
        delta = _read_entries(table, manifest_format, snap.delta_manifest_list)
        assert snap.delta_record_count == sum(
            e.file.row_count * (1 if e.kind is FileKind.ADD else -1) for e in delta
        )
        for e in delta:
            path = on_disk[e.file.file_name]
            assert e.file.file_size == os.path.getsize(path)
            assert e.file.row_count == _row_count(path)


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_index_manifests_name_existing_index_files(fmt: str, name: str) -> None:
    table = golden_table_path(fmt, name)
    manifest_format = _manifest_format(table)
    latest = _snapshots(table)[-1]
    if latest.index_manifest is None:
        assert not list((table / "manifest").glob("index-manifest-*"))
        return
    entries = _decode_file(table / "manifest" / latest.index_manifest, manifest_format)
    data_files = _data_files_on_disk(table)
    assert entries
    for e in entries:
        assert e.kind is FileKind.ADD
        index_file = table / "index" / e.index_file.file_name
        assert e.index_file.file_size == os.path.getsize(index_file)
        assert e.index_file.index_type == "DELETION_VECTORS"
        for dv in e.index_file.dv_ranges or ():
            assert dv.data_file_name in data_files
            assert dv.offset + dv.length <= e.index_file.file_size


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
@pytest.mark.parametrize("compression", ["zstd", "deflate"])
def test_avro_reencode_of_golden_entries_decodes_equal(fmt: str, name: str, compression: str) -> None:
    table = golden_table_path(fmt, name)
    manifest_format = _manifest_format(table)
    for path in sorted((table / "manifest").iterdir()):
        kind = _kind_of(path.name)
        decoded = _decode_file(path, manifest_format)
        data = _ENCODERS[kind](decoded, compression=compression)
        assert _DECODERS[kind](data, path="reencoded") == decoded, path.name


def _prune(ours: Any, theirs: Any) -> Any:
    """``ours`` restricted to the record fields ``theirs`` has (Java files predate later fields)."""
    if isinstance(ours, dict) and ours.get("type") == "record":
        assert isinstance(theirs, dict) and theirs.get("type") == "record"
        their_fields = {f["name"]: f for f in theirs["fields"]}
        fields = [
            {**f, "type": _prune(f["type"], their_fields[f["name"]]["type"])}
            for f in ours["fields"]
            if f["name"] in their_fields
        ]
        return {**ours, "fields": fields}
    if isinstance(ours, list) and isinstance(theirs, list):
        return [_prune(o, t) for o, t in zip(ours, theirs)]
    if isinstance(ours, dict) and ours.get("type") == "array":
        return {**ours, "items": _prune(ours["items"], theirs["items"])}
    return ours


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_our_avro_schema_text_matches_java(fmt: str, name: str) -> None:
    """Java's header schema equals ours restricted to the fields that Java version knew: same record
    names, field order, nullability, defaults and JSON layout."""
    table = golden_table_path(fmt, name)
    if _manifest_format(table) != "avro":
        pytest.skip("ORC manifests carry no Avro schema")
    compared = 0
    for path in sorted((table / "manifest").iterdir()):
        with path.open("rb") as fo:
            text = fastavro.reader(fo).metadata["avro.schema"]
        theirs = json.loads(text)
        if isinstance(theirs, list):
            continue  # Paimon 0.9 made the top-level record nullable; current Java does not
        ours = _prune(_JAVA_SCHEMAS[_kind_of(path.name)], theirs)
        assert schema_text(ours) == text, path.name
        compared += 1
    if name != "pk_09":
        assert compared
