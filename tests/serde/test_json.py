"""Schema and snapshot JSON: golden files, Java's names and layout, unknown fields, legacy files, round
trips of generated objects, and CorruptMetadataError for anything malformed."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.model import types as t
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from paimon_meta.serde.json import (
    schema_from_json,
    schema_to_json,
    snapshot_from_json,
    snapshot_to_json,
    to_java_json,
)
from tests.fixtures.golden import GOLDEN_TABLES, golden_table_path

PATH = "warehouse/db.db/t/snapshot/snapshot-7"
TABLE_IDS = [f"{fmt}/{name}" for fmt, name in GOLDEN_TABLES]


def _files(fmt: str, name: str, kind: str) -> list[Path]:
    directory = golden_table_path(fmt, name) / kind
    files = [p for p in directory.iterdir() if re.fullmatch(rf"{kind}-\d+", p.name)]
    assert files
    return sorted(files)


# ---- golden files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_golden_schemas_reserialise_byte_for_byte(fmt: str, name: str) -> None:
    for path in _files(fmt, name, "schema"):
        text = path.read_text()
        schema = schema_from_json(path.read_bytes(), path=str(path))
        assert schema.id == int(path.name.split("-")[1])
        assert schema_to_json(schema) == text, path
        assert schema_from_json(schema_to_json(schema)) == schema


@pytest.mark.parametrize(("fmt", "name"), GOLDEN_TABLES, ids=TABLE_IDS)
def test_golden_snapshots_round_trip_with_java_names(fmt: str, name: str) -> None:
    for path in _files(fmt, name, "snapshot"):
        text = path.read_text()
        snap = snapshot_from_json(text, path=str(path))
        assert snap.id == int(path.name.split("-")[1])
        assert snap.log_offsets == {}  # written by Java before 1.4 as "logOffsets" : { }
        assert snap.unknown == {}
        out = snapshot_to_json(snap)
        assert snapshot_from_json(out) == snap
        original = json.loads(text)
        assert json.loads(out) == {k: v for k, v in original.items() if v is not None}
        # Java's key order is kept (nulls dropped)
        assert list(json.loads(out)) == [k for k, v in original.items() if v is not None]
        for key in ("baseManifestList", "deltaManifestList", "commitIdentifier", "commitUser", "schemaId"):
            assert f'"{key}" : ' in out


def test_golden_snapshot_fields_are_typed() -> None:
    path = _files("parquet", "append_09", "snapshot")[-1]
    snap = snapshot_from_json(path.read_bytes(), path=str(path))
    assert snap.commit_kind is CommitKind.COMPACT
    assert snap.commit_identifier == BATCH_COMMIT_IDENTIFIER
    assert snap.base_manifest_list.startswith("manifest-list-")
    assert snap.total_record_count == 11 and snap.changelog_manifest_list is None


# ---- unknown, legacy and omitted fields -----------------------------------------------------------------


def _snapshot(**overrides: Any) -> Snapshot:
    base: dict[str, Any] = {
        "id": 7,
        "schema_id": 0,
        "base_manifest_list": "manifest-list-a-0",
        "delta_manifest_list": "manifest-list-a-1",
        "commit_user": "user",
        "commit_identifier": BATCH_COMMIT_IDENTIFIER,
        "commit_kind": CommitKind.APPEND,
        "time_millis": 1_700_000_000_000,
    }
    return Snapshot(**{**base, **overrides})


def test_unknown_fields_are_kept_and_written_back() -> None:
    text = snapshot_to_json(_snapshot(total_record_count=3))
    obj = json.loads(text)
    obj["futureField"] = {"nested": [1, "two", None, True]}
    obj["anotherOne"] = 5
    snap = snapshot_from_json(json.dumps(obj))
    assert snap.unknown == {"futureField": {"nested": [1, "two", None, True]}, "anotherOne": 5}
    again = json.loads(snapshot_to_json(snap))
    assert again == obj and list(again)[-2:] == ["futureField", "anotherOne"]


def test_nulls_are_omitted_and_all_fields_are_written() -> None:
    bare = snapshot_to_json(_snapshot())
    assert "null" not in bare
    assert set(json.loads(bare)) == {
        "version",
        "id",
        "schemaId",
        "baseManifestList",
        "deltaManifestList",
        "commitUser",
        "commitIdentifier",
        "commitKind",
        "timeMillis",
    }
    full = _snapshot(
        base_manifest_list_size=1,
        delta_manifest_list_size=2,
        changelog_manifest_list="manifest-list-a-2",
        changelog_manifest_list_size=3,
        index_manifest="index-manifest-a-0",
        total_record_count=10,
        delta_record_count=-3,
        changelog_record_count=0,
        watermark=-(2**63),
        statistics="stat-a-0",
        properties={"k": "v"},
        next_row_id=42,
        uuid="2b0fd84f-219b-4aab-a45b-114a80e1f448",
        operation="WRITE",
        writer_version="pypaimon-2.1.0",
    )
    text = snapshot_to_json(full)
    assert list(json.loads(text)) == [
        "version",
        "uuid",
        "id",
        "schemaId",
        "baseManifestList",
        "baseManifestListSize",
        "deltaManifestList",
        "deltaManifestListSize",
        "changelogManifestList",
        "changelogManifestListSize",
        "indexManifest",
        "commitUser",
        "writerVersion",
        "commitIdentifier",
        "commitKind",
        "timeMillis",
        "totalRecordCount",
        "deltaRecordCount",
        "changelogRecordCount",
        "watermark",
        "statistics",
        "properties",
        "nextRowId",
        "operation",
    ]
    assert snapshot_from_json(text) == full


def test_legacy_snapshot_fields() -> None:
    obj = json.loads(snapshot_to_json(_snapshot()))
    del obj["version"]
    obj["logOffsets"] = {"0": 12, "3": 40}
    snap = snapshot_from_json(json.dumps(obj))
    assert snap.version == 1 and snap.log_offsets == {0: 12, 3: 40}
    assert json.loads(snapshot_to_json(snap))["logOffsets"] == {"0": 12, "3": 40}


def _schema_json(version: int | None, options: dict[str, str]) -> str:
    obj: dict[str, Any] = {
        "id": 0,
        "fields": [{"id": 0, "name": "a", "type": "INT NOT NULL"}],
        "highestFieldId": 0,
        "partitionKeys": [],
        "primaryKeys": ["a"],
        "options": options,
    }
    if version is not None:
        obj["version"] = version
    return json.dumps(obj)


def test_legacy_schema_defaults_match_java() -> None:
    """SchemaSerializer: version <= 1 defaults bucket to 1; version <= 2 defaults file.format to orc."""
    old = schema_from_json(_schema_json(None, {}))
    assert old.version == 1 and dict(old.options) == {"bucket": "1", "file.format": "orc"}
    assert old.time_millis == 0 and old.comment is None
    v2 = schema_from_json(_schema_json(2, {"bucket": "4"}))
    assert dict(v2.options) == {"bucket": "4", "file.format": "orc"}
    v3 = schema_from_json(_schema_json(3, {}))
    assert dict(v3.options) == {}


def test_jackson_layout_details() -> None:
    assert to_java_json({}) == "{ }"
    assert to_java_json({"a": [], "b": {}}) == '{\n  "a" : [ ],\n  "b" : { }\n}'
    assert to_java_json({"a": [{"x": 1}, {"y": [2, 3]}]}) == (
        '{\n  "a" : [ {\n    "x" : 1\n  }, {\n    "y" : [ 2, 3 ]\n  } ]\n}'
    )
    # control characters use Jackson's upper-case hex escapes; non-ASCII is written as is
    assert to_java_json("\x01\n\\u001f é") == '"\\u0001\\n\\\\u001f é"'
    schema = TableSchema(0, (t.DataField(0, "a", t.INT()),), 0, comment="dépôt\x1f")
    text = schema_to_json(schema)
    assert '"comment" : "dépôt\\u001F"' in text
    assert schema_from_json(text.encode()) == schema


# ---- generated round trips ------------------------------------------------------------------------------

NAMES = st.text(alphabet=string.ascii_letters + string.digits + "_$ é", min_size=1, max_size=12)
INT64 = st.integers(-(2**63), 2**63 - 1)
NULLABLE = st.booleans()

atomic_types = st.one_of(
    st.builds(t.BOOLEAN, NULLABLE),
    st.builds(t.TINYINT, NULLABLE),
    st.builds(t.SMALLINT, NULLABLE),
    st.builds(t.INT, NULLABLE),
    st.builds(t.BIGINT, NULLABLE),
    st.builds(t.FLOAT, NULLABLE),
    st.builds(t.DOUBLE, NULLABLE),
    st.builds(t.STRING, NULLABLE),
    st.builds(t.BYTES, NULLABLE),
    st.builds(t.DATE, NULLABLE),
    st.builds(t.VARCHAR, st.integers(1, 1000), NULLABLE),
    st.builds(t.CHAR, st.integers(1, 255), NULLABLE),
    st.builds(t.BINARY, st.integers(1, 64), NULLABLE),
    st.builds(t.VARBINARY, st.integers(1, 64), NULLABLE),
    st.integers(1, 38).flatmap(lambda p: st.builds(t.DECIMAL, st.just(p), st.integers(0, p), NULLABLE)),
    st.builds(t.TIME, st.integers(0, 3), NULLABLE),
    st.builds(t.TIMESTAMP, st.integers(0, 9), NULLABLE),
    st.builds(t.TIMESTAMP_LTZ, st.integers(0, 9), NULLABLE),
)


@st.composite
def row_types(draw: st.DrawFn, children: st.SearchStrategy[t.DataType]) -> t.RowType:
    names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    fields = tuple(t.DataField(i, n, draw(children)) for i, n in enumerate(names))
    return t.RowType(draw(NULLABLE), fields)


data_types = st.recursive(
    atomic_types,
    lambda children: st.one_of(
        st.builds(t.ArrayType, NULLABLE, children),
        st.builds(t.MultisetType, NULLABLE, children),
        st.builds(t.MapType, NULLABLE, children.map(lambda d: d.with_nullable(False)), children),
        row_types(children),
    ),
    max_leaves=6,
)


@st.composite
def table_schemas(draw: st.DrawFn) -> TableSchema:
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    fields = tuple(
        t.DataField(
            i,
            n,
            draw(data_types),
            draw(st.none() | st.text(max_size=20)),
            draw(st.none() | st.text(max_size=10)),
        )
        for i, n in enumerate(names)
    )
    partition = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    primary: list[str] = []
    if draw(st.booleans()):
        extra = draw(st.lists(st.sampled_from(names), unique=True, max_size=3))
        primary = partition + [n for n in extra if n not in partition]
    return TableSchema(
        id=draw(st.integers(0, 2**31 - 1)),
        fields=fields,
        highest_field_id=len(fields) - 1 + draw(st.integers(0, 5)),
        partition_keys=tuple(partition),
        primary_keys=tuple(primary),
        options=draw(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=4)),
        comment=draw(st.none() | st.text(max_size=30)),
        time_millis=draw(st.integers(0, 2**62)),
    )


@settings(max_examples=80, deadline=None)
@given(schema=table_schemas())
def test_hypothesis_schema_round_trip(schema: TableSchema) -> None:
    assert schema_from_json(schema_to_json(schema)) == schema


json_values = st.recursive(
    st.none() | st.booleans() | INT64 | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
# Every member name the codec knows: a generated "unknown" field must not collide with one of them.
KNOWN = set(json.loads(snapshot_to_json(_snapshot(uuid="u", operation="o", log_offsets={})))) | {
    "baseManifestListSize",
    "deltaManifestListSize",
    "changelogManifestList",
    "changelogManifestListSize",
    "indexManifest",
    "totalRecordCount",
    "deltaRecordCount",
    "changelogRecordCount",
    "watermark",
    "statistics",
    "properties",
    "nextRowId",
    "writerVersion",
    "logOffsets",
}

snapshots = st.builds(
    Snapshot,
    id=st.integers(1, 2**63 - 1),
    schema_id=st.integers(0, 2**63 - 1),
    base_manifest_list=st.text(max_size=40),
    delta_manifest_list=st.text(max_size=40),
    commit_user=st.text(max_size=40),
    commit_identifier=INT64,
    commit_kind=st.sampled_from(CommitKind),
    time_millis=INT64,
    version=st.integers(1, 3),
    base_manifest_list_size=st.none() | INT64,
    delta_manifest_list_size=st.none() | INT64,
    changelog_manifest_list=st.none() | st.text(max_size=40),
    changelog_manifest_list_size=st.none() | INT64,
    index_manifest=st.none() | st.text(max_size=40),
    log_offsets=st.none() | st.dictionaries(st.integers(0, 1000), INT64, max_size=3),
    total_record_count=st.none() | INT64,
    delta_record_count=st.none() | INT64,
    changelog_record_count=st.none() | INT64,
    watermark=st.none() | INT64,
    statistics=st.none() | st.text(max_size=20),
    properties=st.none() | st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
    next_row_id=st.none() | INT64,
    uuid=st.none() | st.uuids().map(str),
    operation=st.none() | st.sampled_from(["WRITE", "OVERWRITE", "DELETE", "MERGE"]),
    writer_version=st.none() | st.text(max_size=20),
    unknown=st.dictionaries(st.text(max_size=12).filter(lambda k: k not in KNOWN), json_values, max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(snap=snapshots)
def test_hypothesis_snapshot_round_trip(snap: Snapshot) -> None:
    text = snapshot_to_json(snap)
    assert snapshot_from_json(text) == snap
    assert snapshot_from_json(text.encode()) == snap


# ---- malformed JSON -------------------------------------------------------------------------------------


def _raises_corrupt(parse: Any, text: str | bytes) -> CorruptMetadataError:
    with pytest.raises(CorruptMetadataError) as info:
        parse(text, path=PATH)
    assert info.value.path == PATH and PATH in str(info.value)
    return info.value


def _valid_snapshot() -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(snapshot_to_json(_snapshot(total_record_count=1)))
    return obj


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("id", "7"),
        ("id", None),
        ("schemaId", True),
        ("schemaId", 1.5),
        ("baseManifestList", 3),
        ("deltaManifestList", None),
        ("commitUser", ["u"]),
        ("commitIdentifier", "9223372036854775807"),
        ("commitKind", "MERGE"),
        ("commitKind", 0),
        ("timeMillis", {}),
        ("totalRecordCount", "1"),
        ("indexManifest", 5),
        ("properties", ["a"]),
        ("properties", {"a": {"b": 1}}),
        ("logOffsets", {"x": 1}),
        ("logOffsets", {"1": "2"}),
        ("logOffsets", []),
    ],
)
def test_snapshot_with_wrong_types_is_corrupt(key: str, value: Any) -> None:
    obj = _valid_snapshot()
    obj[key] = value
    assert repr(key) in str(_raises_corrupt(snapshot_from_json, json.dumps(obj)))


@pytest.mark.parametrize(
    "key",
    ["id", "schemaId", "baseManifestList", "deltaManifestList", "commitUser", "commitKind", "timeMillis"],
)
def test_snapshot_missing_required_field_is_corrupt(key: str) -> None:
    obj = _valid_snapshot()
    del obj[key]
    err = _raises_corrupt(snapshot_from_json, json.dumps(obj))
    assert "missing" in str(err) and err.fields["field"] == key


@pytest.mark.parametrize("parse", [snapshot_from_json, schema_from_json])
def test_not_json_is_corrupt(parse: Any) -> None:
    golden = _files(
        "parquet", "pk_table_with_alter_table", "snapshot" if parse is snapshot_from_json else "schema"
    )
    text = golden[-1].read_text()
    _raises_corrupt(parse, text[: len(text) // 2])
    _raises_corrupt(parse, "")
    _raises_corrupt(parse, "[1, 2]")
    _raises_corrupt(parse, "null")
    _raises_corrupt(parse, b"\xff\xfe{}")
    _raises_corrupt(parse, "[" * 100_000)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("id", "0", "'id'"),
        ("fields", {"a": 1}, "'fields'"),
        ("fields", [{"id": 0, "name": "a", "type": "NOT A TYPE"}], "NOT A TYPE"),
        ("fields", [{"id": 0, "type": "INT"}], "name"),
        (
            "fields",
            [{"id": 0, "name": "a", "type": "INT"}, {"id": 1, "name": "a", "type": "INT"}],
            "duplicate",
        ),
        ("partitionKeys", ["nope"], "nope"),
        ("partitionKeys", "a", "'partitionKeys'"),
        ("primaryKeys", [1], "'primaryKeys'"),
        ("highestFieldId", None, "'highestFieldId'"),
        ("options", {"bucket": {"n": 1}}, "'options'"),
        ("options", None, "'options'"),
        ("comment", 3, "'comment'"),
        ("timeMillis", "now", "'timeMillis'"),
    ],
)
def test_schema_with_wrong_types_is_corrupt(key: str, value: Any, message: str) -> None:
    obj = json.loads(_schema_json(3, {}))
    obj[key] = value
    assert message in str(_raises_corrupt(schema_from_json, json.dumps(obj)))
