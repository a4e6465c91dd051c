"""Manifest Avro codecs: round trips of generated spec objects, every codec, files other Avro readers and
writers (fastavro, pypaimon's schemas) agree on, and encoding errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
from collections.abc import Callable
from typing import Any, cast

import fastavro
import fastavro.read
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import (
    DataFileMeta,
    DeletionVectorMeta,
    FileKind,
    FileSource,
    GlobalIndexMeta,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from paimon_meta.serde import avro_container
from paimon_meta.serde.avro import (
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_index_manifest,
    encode_manifest,
    encode_manifest_list,
)
from paimon_meta.serde.manifest_records import entry_to_record, file_meta_to_record
from paimon_meta.serde.manifest_schemas import MANIFEST_ENTRY_SCHEMA, MANIFEST_FILE_META_SCHEMA

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
ROW = st.binary(max_size=48)  # serialized BinaryRows are opaque bytes to the codec
NAME = st.text(max_size=40)
CODECS = ["zstd", "deflate", "snappy", "bzip2", "xz", "null"]


def opt(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


def tuples(s: st.SearchStrategy[Any], max_size: int = 4) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(s, max_size=max_size).map(tuple)


stats_st = st.builds(SimpleStats, ROW, ROW, opt(tuples(opt(INT64))))
data_file_st = st.builds(
    DataFileMeta,
    file_name=NAME,
    file_size=INT64,
    row_count=INT64,
    min_key=ROW,
    max_key=ROW,
    key_stats=stats_st,
    value_stats=stats_st,
    min_sequence_number=INT64,
    max_sequence_number=INT64,
    schema_id=INT64,
    level=INT32,
    extra_files=tuples(NAME),
    creation_time=opt(INT64),
    delete_row_count=opt(INT64),
    embedded_index=opt(st.binary(max_size=32)),
    file_source=opt(st.sampled_from(FileSource)),
    value_stats_cols=opt(tuples(NAME)),
    external_path=opt(NAME),
    first_row_id=opt(INT64),
    write_cols=opt(tuples(NAME)),
    write_cols_sequences=opt(tuples(INT64)),
)
entry_st = st.builds(ManifestEntry, st.sampled_from(FileKind), ROW, INT32, INT32, data_file_st)
file_meta_st = st.builds(
    ManifestFileMeta,
    file_name=NAME,
    file_size=INT64,
    num_added_files=INT64,
    num_deleted_files=INT64,
    partition_stats=stats_st,
    schema_id=INT64,
    min_bucket=opt(INT32),
    max_bucket=opt(INT32),
    min_level=opt(INT32),
    max_level=opt(INT32),
    min_row_id=opt(INT64),
    max_row_id=opt(INT64),
)
index_entry_st = st.builds(
    IndexManifestEntry,
    st.sampled_from(FileKind),
    ROW,
    INT32,
    st.builds(
        IndexFileMeta,
        index_type=NAME,
        file_name=NAME,
        file_size=INT64,
        row_count=INT64,
        dv_ranges=opt(tuples(st.builds(DeletionVectorMeta, NAME, INT32, INT32, opt(INT64)))),
        external_path=opt(NAME),
        global_index=opt(
            st.builds(
                GlobalIndexMeta,
                INT64,
                INT64,
                INT32,
                opt(tuples(INT32)),
                opt(st.binary(max_size=16)),
                opt(st.binary(max_size=16)),
            )
        ),
    ),
)

ROUND_TRIPS: list[tuple[st.SearchStrategy[Any], Callable[..., bytes], Callable[..., list[Any]]]] = [
    (entry_st, encode_manifest, decode_manifest),
    (file_meta_st, encode_manifest_list, decode_manifest_list),
    (index_entry_st, encode_index_manifest, decode_index_manifest),
]


@pytest.mark.parametrize(("strategy", "encode", "decode"), ROUND_TRIPS, ids=["entry", "list", "index"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hypothesis_round_trip(
    strategy: st.SearchStrategy[Any],
    encode: Callable[..., bytes],
    decode: Callable[..., list[Any]],
    data: st.DataObject,
) -> None:
    items = data.draw(st.lists(strategy, max_size=5))
    codec = data.draw(st.sampled_from(CODECS))
    assert decode(encode(items, compression=codec)) == items


def _full_file(**overrides: Any) -> DataFileMeta:
    base = DataFileMeta(
        file_name="data-1.parquet",
        file_size=1234,
        row_count=10,
        min_key=b"\x00\x00\x00\x01" + bytes(16),
        max_key=b"\x00\x00\x00\x01" + bytes(16),
        key_stats=SimpleStats(b"a", b"b", (0, None, 3)),
        value_stats=SimpleStats(b"c", b"d", None),
        min_sequence_number=0,
        max_sequence_number=9,
        schema_id=0,
        level=5,
        extra_files=("data-1.parquet.index",),
        creation_time=1_755_787_064_077,
        delete_row_count=2,
        embedded_index=b"\x01\x02",
        file_source=FileSource.COMPACT,
        value_stats_cols=("a", "b"),
        external_path="s3://bucket/x/data-1.parquet",
        first_row_id=100,
        write_cols=("a",),
        write_cols_sequences=(1, 2),
    )
    return dataclasses.replace(base, **overrides)


OPTIONAL_FILE_FIELDS = [
    "creation_time",
    "delete_row_count",
    "embedded_index",
    "file_source",
    "value_stats_cols",
    "external_path",
    "first_row_id",
    "write_cols",
    "write_cols_sequences",
]


@pytest.mark.parametrize("codec", CODECS)
def test_all_optional_fields_set_and_all_none(codec: str) -> None:
    full = _full_file()
    bare = _full_file(**dict.fromkeys(OPTIONAL_FILE_FIELDS))
    entries = [
        ManifestEntry(FileKind.ADD, b"p", 1, 2, full),
        ManifestEntry(FileKind.DELETE, b"q", 0, 2, bare),
    ]
    decoded = decode_manifest(encode_manifest(entries, compression=codec))
    assert decoded == entries
    assert decoded[1].file.creation_time is None and decoded[0].file.file_source is FileSource.COMPACT


def test_many_entries_span_several_blocks() -> None:
    stats = SimpleStats(bytes(200), bytes(200), tuple(range(20)))
    entries = [
        ManifestEntry(FileKind.ADD, b"p", i % 7, 7, _full_file(file_name=f"f-{i}", value_stats=stats))
        for i in range(600)
    ]
    data = encode_manifest(entries)
    header = avro_container.read_header(data)
    blocks = list(avro_container.iter_blocks(data, header))
    assert len(blocks) > 1
    assert sum(count for count, _ in blocks) == len(entries)
    assert decode_manifest(data) == entries


def _without_sync(data: bytes) -> bytes:
    return data.replace(avro_container.read_header(data).sync, b"")


def test_a_cached_encoding_is_the_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Encoding the same (immutable) objects again copies their cached records: no fastavro call, and
    the same bytes as a fresh encoding, block framing included."""
    stats = SimpleStats(bytes(200), bytes(200), tuple(range(20)))
    entries = [
        ManifestEntry(FileKind.ADD, b"p", i % 7, 7, _full_file(file_name=f"f-{i}", value_stats=stats))
        for i in range(600)
    ]
    first = encode_manifest(entries, compression="null")  # several blocks
    calls: list[int] = []
    real = fastavro.schemaless_writer

    def counting(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        real(*args, **kwargs)

    monkeypatch.setattr(fastavro, "schemaless_writer", counting)  # looked up per call
    again = encode_manifest(entries, compression="null")
    assert calls == []
    assert _without_sync(again) == _without_sync(first)
    merged = [*entries[::-1], dataclasses.replace(entries[0], bucket=6)]  # a merge: reordered, one new
    data = encode_manifest(merged, compression="zstd")
    assert len(calls) == 1 and decode_manifest(data) == merged
    metas = [_meta(i) for i in range(40)]
    listed = encode_manifest_list(metas, compression="null")
    calls.clear()
    assert _without_sync(encode_manifest_list(metas, compression="null")) == _without_sync(listed)
    assert calls == [] and decode_manifest_list(listed) == metas


def _meta(i: int) -> ManifestFileMeta:
    return ManifestFileMeta(
        file_name=f"manifest-{i}",
        file_size=1000 + i,
        num_added_files=i,
        num_deleted_files=0,
        partition_stats=SimpleStats(b"a", b"b", (0,)),
        schema_id=0,
    )


def test_encoded_records_is_keyed_by_identity_and_bounded() -> None:
    cache = avro_container.EncodedRecords(max_items=3, max_bytes=10)
    a, b = _meta(1), _meta(1)
    assert a == b and a is not b
    cache.put(a, b"xx")
    assert cache.get(a) == b"xx" and cache.get(b) is None  # equal is not enough: only this object
    cache.put(b, b"yyyy")
    cache.put(_meta(2), b"zz")
    assert len(cache) == 3
    fourth = _meta(3)
    cache.put(fourth, b"w")  # max_items: the oldest (a) goes
    assert cache.get(a) is None and cache.get(b) == b"yyyy" and cache.get(fourth) == b"w"
    fifth = _meta(4)
    cache.put(fifth, b"vvvv")  # max_bytes 10: b (4 bytes) goes too, 2 + 1 + 4 = 7 left
    assert cache.get(b) is None and cache.get(fifth) == b"vvvv" and len(cache) == 3
    cache.put(fourth, b"wwwwww")  # replaced, not counted twice: 2 + 4 + 6 > 10 evicts the oldest
    assert cache.get(fourth) == b"wwwwww" and len(cache) == 2


def test_empty_files_round_trip() -> None:
    assert decode_manifest(encode_manifest([])) == []
    assert decode_manifest_list(encode_manifest_list([])) == []
    assert decode_index_manifest(encode_index_manifest([])) == []


# ---- independent readers and writers -------------------------------------------------------------------


def _read_long(fo: Any) -> int:
    z = shift = 0
    while True:
        b: int = fo.read(1)[0]
        z |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (z >> 1) ^ -(z & 1)


def _zstd_block(fo: Any) -> io.BytesIO:
    raw = fo.read(_read_long(fo))
    return io.BytesIO(pa.CompressedInputStream(pa.BufferReader(raw), "zstd").read())


def _snappy_block(fo: Any) -> io.BytesIO:
    raw = fo.read(_read_long(fo))[:-4]
    size = 0
    for shift, b in enumerate(raw[:10]):
        size |= (b & 0x7F) << (7 * shift)
        if b < 0x80:
            break
    return io.BytesIO(pa.decompress(raw, decompressed_size=size, codec="snappy", asbytes=True))


def _as_millis(record: dict[str, Any]) -> dict[str, Any]:
    created = record["_FILE"]["_CREATION_TIME"]
    if isinstance(created, dt.datetime):
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        record["_FILE"]["_CREATION_TIME"] = (created - epoch) // dt.timedelta(milliseconds=1)
    return record


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


@pytest.mark.parametrize("codec", ["zstd", "snappy", "deflate", "null"])
def test_fastavro_reads_what_we_write(codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """fastavro's own container reader (with pyarrow block codecs plugged in for zstd/snappy, which it
    needs optional libraries for) decodes our files to exactly the records we meant to write."""
    monkeypatch.setitem(fastavro.read.BLOCK_READERS, "zstandard", _zstd_block)
    monkeypatch.setitem(fastavro.read.BLOCK_READERS, "snappy", _snappy_block)
    entries = [
        ManifestEntry(FileKind.ADD, b"p", 1, 2, _full_file()),
        ManifestEntry(FileKind.DELETE, b"", 0, 2, _full_file(**dict.fromkeys(OPTIONAL_FILE_FIELDS))),
    ]
    reader = fastavro.reader(io.BytesIO(encode_manifest(entries, compression=codec)))
    assert reader.codec == ("zstandard" if codec == "zstd" else codec)
    writer_schema: Any = reader.writer_schema
    assert writer_schema["name"] == "org.apache.paimon.avro.generated.record"
    got = [_as_millis(cast(dict[str, Any], r)) for r in reader]
    assert got == [_normalise(entry_to_record(e)) for e in entries]


def _pypaimon_list_schema() -> dict[str, Any]:
    """pypaimon 2.1's manifest-list schema: its own record names, plus _TOTAL_BUCKETS and _EXTRA_FILES."""
    stats = {
        "type": "record",
        "name": "record_PARTITION_STATS",
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}]},
        ],
    }
    nullable_int = ["null", "int"]
    return {
        "type": "record",
        "name": "ManifestFileMeta",
        "fields": [
            {"name": "_VERSION", "type": "int"},
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_NUM_ADDED_FILES", "type": "long"},
            {"name": "_NUM_DELETED_FILES", "type": "long"},
            {"name": "_PARTITION_STATS", "type": stats},
            {"name": "_SCHEMA_ID", "type": "long"},
            {"name": "_MIN_BUCKET", "type": nullable_int, "default": None},
            {"name": "_MAX_BUCKET", "type": nullable_int, "default": None},
            {"name": "_MIN_LEVEL", "type": nullable_int, "default": None},
            {"name": "_MAX_LEVEL", "type": nullable_int, "default": None},
            {"name": "_MIN_ROW_ID", "type": ["null", "long"], "default": None},
            {"name": "_MAX_ROW_ID", "type": ["null", "long"], "default": None},
            {"name": "_TOTAL_BUCKETS", "type": nullable_int, "default": None},
            {"name": "_EXTRA_FILES", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        ],
    }


def test_reads_pypaimon_manifest_list_with_extra_fields() -> None:
    metas = [
        ManifestFileMeta("manifest-a-0", 10, 2, 1, SimpleStats(b"x", b"y", (0,)), 3, 0, 1, 0, 0, 5, 9),
        ManifestFileMeta("manifest-a-1", 11, 0, 4, SimpleStats(b"", b"", None), 0),
    ]
    records = [{**file_meta_to_record(m), "_TOTAL_BUCKETS": 4, "_EXTRA_FILES": ["x"]} for m in metas]
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        fastavro.parse_schema(_pypaimon_list_schema()),
        records,
        codec="deflate",
        disable_tuple_notation=True,
    )
    assert decode_manifest_list(buf.getvalue()) == metas


def test_reads_older_layout_without_optional_fields() -> None:
    """A writer that knows only the 0.9 fields (and made the top record nullable, as 0.9 did)."""
    old_file_fields = [f["name"] for f in MANIFEST_ENTRY_SCHEMA["fields"][5]["type"]["fields"]][:16]
    schema = {**MANIFEST_ENTRY_SCHEMA}
    file_schema = {**schema["fields"][5]["type"]}
    file_schema["fields"] = [f for f in file_schema["fields"] if f["name"] in old_file_fields]
    schema["fields"] = [*schema["fields"][:5], {"name": "_FILE", "type": file_schema}]
    full = _full_file()
    record = entry_to_record(ManifestEntry(FileKind.ADD, b"p", 1, 2, full))
    record["_FILE"] = {k: v for k, v in record["_FILE"].items() if k in old_file_fields}
    buf = io.BytesIO()
    fastavro.writer(
        buf, fastavro.parse_schema(["null", schema]), [record], codec="null", disable_tuple_notation=True
    )
    (entry,) = decode_manifest(buf.getvalue())
    assert entry.file.file_source == full.file_source and entry.file.creation_time == full.creation_time
    assert entry.file.value_stats_cols is None and entry.file.external_path is None
    assert entry.file.write_cols_sequences is None


def test_skips_fields_it_does_not_know() -> None:
    schema = {**MANIFEST_FILE_META_SCHEMA}
    schema["fields"] = [*schema["fields"], {"name": "_FROM_THE_FUTURE", "type": "string"}]
    meta = ManifestFileMeta("m", 1, 1, 0, SimpleStats(b"", b"", ()), 0)
    buf = io.BytesIO()
    record = {**file_meta_to_record(meta), "_FROM_THE_FUTURE": "hello"}
    fastavro.writer(
        buf, fastavro.parse_schema(schema), [record], codec="deflate", disable_tuple_notation=True
    )
    assert decode_manifest_list(buf.getvalue()) == [meta]


# ---- encoding errors ------------------------------------------------------------------------------------


def test_int_fields_out_of_range_are_rejected() -> None:
    ok = ManifestEntry(FileKind.ADD, b"p", 0, 1, _full_file())
    too_big_bucket = ManifestEntry(FileKind.ADD, b"p", 2**31, 2, _full_file())
    with pytest.raises(ValidationError, match=r"record 1 .*_BUCKET"):
        encode_manifest([ok, too_big_bucket])
    with pytest.raises(ValidationError, match="record 0"):
        encode_manifest([ManifestEntry(FileKind.ADD, b"p", 0, 1, _full_file(file_size=2**63))])


def test_wrong_objects_and_compressions_are_rejected() -> None:
    meta = ManifestFileMeta("m", 1, 1, 0, SimpleStats(b"", b"", ()), 0)
    with pytest.raises(ValidationError, match="record 0"):
        encode_manifest([meta])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="lz4"):
        encode_manifest_list([meta], compression="lz4")
    with pytest.raises(ValidationError, match="parquet"):
        decode_manifest_list(encode_manifest_list([meta]), fmt="parquet")
