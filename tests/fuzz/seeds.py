"""Valid inputs the fuzzers mutate: hand-built values at every serializer version and codec, plus the
Java-written golden files when they are present (``PAIMON_META_GOLDEN``), and the knobs every fuzz target
shares (example counts scale with ``PAIMON_META_FUZZ_SCALE``, default 1)."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta
from functools import cache
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, settings

from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.binary_row import serialize_row
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement, DataIncrement
from paimon_meta.model.manifest import (
    DeletionVectorMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.model.types import INT, STRING
from paimon_meta.serde.avro import encode_index_manifest, encode_manifest, encode_manifest_list
from paimon_meta.serde.commit_message import SUPPORTED_WRITE_VERSIONS, serialize_commit_messages
from paimon_meta.serde.json import schema_to_json, snapshot_to_json
from tests.commit.helpers import append_msg, compact_msg, data_file, partition
from tests.fixtures.golden import GOLDEN_TABLES, golden_root

CODECS = ("null", "deflate", "snappy", "zstd", "bzip2", "xz")
_SCALE = float(os.environ.get("PAIMON_META_FUZZ_SCALE", "1") or 1)


def fuzz_settings(examples: int) -> settings:
    """``examples`` (times the scale) cases, each bounded by a generous deadline (a hang or a giant
    allocation shows up as a deadline failure rather than a stuck run)."""
    return settings(
        max_examples=max(1, int(examples * _SCALE)),
        deadline=timedelta(seconds=5),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=False,
    )


def _index_file(name: str) -> IndexFileMeta:
    return IndexFileMeta("DELETION_VECTORS", name, 31, 1, (DeletionVectorMeta("data-0.orc", 1, 22),))


def commit_message_seeds() -> list[CommitMessage]:
    key = serialize_row(["a-longer-key", 7], [STRING(), INT()])
    stats = SimpleStats(key, key, (0, None))
    rich = data_file(rows=3, min_key=1, max_key=9)
    rich = replace(rich, key_stats=stats, value_stats=stats, extra_files=("extra-file",))
    return [
        append_msg(0, 1, rich, data_file()),
        compact_msg(1, 0, [data_file()], [data_file(level=1)]),
        CommitMessage(
            partition(7),
            1,
            2,
            DataIncrement((rich,), (), (data_file(),), (_index_file("index-a"),), ()),
        ),
        CommitMessage(partition(3), 0, None, DataIncrement(), CompactIncrement()),
    ]


@cache
def commit_message_bytes() -> list[tuple[int, bytes]]:
    """``(version, bytes of a batch)`` for every write version."""
    out = []
    for version in sorted(SUPPORTED_WRITE_VERSIONS):
        msgs = []
        for m in commit_message_seeds():
            if version < 7:
                m = replace(m, total_buckets=None)
            msgs.append(m)
        out.append((version, serialize_commit_messages(msgs, version)))
    return out


def _entries() -> list[ManifestEntry]:
    return [
        ManifestEntry(FileKind.ADD, partition(i % 3), i % 2, 2, data_file(rows=i + 1, min_key=i, max_key=i))
        for i in range(4)
    ] + [ManifestEntry(FileKind.DELETE, partition(0), 0, 2, data_file(level=1))]


def _metas() -> list[ManifestFileMeta]:
    stats = SimpleStats(partition(0), partition(5), (0,))
    return [
        ManifestFileMeta("manifest-a-0", 1234, 3, 1, stats, 0, 0, 1, 0, 3),
        ManifestFileMeta("manifest-a-1", 99, 0, 2, stats, 1),
    ]


def _index_entries() -> list[IndexManifestEntry]:
    return [
        IndexManifestEntry(FileKind.ADD, partition(1), 0, _index_file("index-b")),
        IndexManifestEntry(FileKind.DELETE, partition(2), 1, _index_file("index-c")),
    ]


@cache
def avro_seeds() -> list[tuple[str, bytes]]:
    """``(kind, bytes)`` with kind manifest / manifest_list / index_manifest, every codec, plus golden
    Avro manifests and lists."""
    out: list[tuple[str, bytes]] = []
    for codec in CODECS:
        out.append(("manifest", encode_manifest(_entries(), compression=codec)))
        out.append(("manifest_list", encode_manifest_list(_metas(), compression=codec)))
        out.append(("index_manifest", encode_index_manifest(_index_entries(), compression=codec)))
    for path in _golden_files("manifest"):
        data = path.read_bytes()
        if data[:4] != b"Obj\x01" or len(data) > 64_000:
            continue
        name = path.name
        kind = (
            "manifest_list"
            if name.startswith("manifest-list-")
            else "index_manifest"
            if name.startswith("index-manifest-")
            else "manifest"
        )
        out.append((kind, data))
    return out


def _golden_files(directory: str) -> list[Path]:
    root = golden_root() / "java-paimon"
    if not root.is_dir():
        return []
    files: list[Path] = []
    for fmt, name in GOLDEN_TABLES:
        d = root / fmt / f"{name}.db" / name / directory
        if d.is_dir():
            files += sorted(p for p in d.iterdir() if p.is_file())
    return files[:60]


def _schema_seed() -> TableSchema:
    arrow = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("name", pa.string()),
            ("price", pa.decimal128(20, 4)),
            ("ts", pa.timestamp("us")),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.int32())),
            ("nested", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.float64()))])),
            ("dt", pa.date32()),
            ("raw", pa.binary()),
        ]
    )
    fields, highest = from_arrow_schema(arrow)
    return TableSchema(
        id=3,
        fields=fields,
        highest_field_id=highest,
        partition_keys=("dt",),
        primary_keys=("id", "dt"),
        options={"bucket": "4", "merge-engine": "deduplicate"},
        comment="fuzz seed",
        time_millis=1_700_000_000_000,
    )


def _snapshot_seeds() -> list[Snapshot]:
    full = Snapshot(
        id=12,
        schema_id=3,
        base_manifest_list="manifest-list-a-0",
        delta_manifest_list="manifest-list-a-1",
        commit_user="user-é",
        commit_identifier=2**63 - 1,
        commit_kind=CommitKind.COMPACT,
        time_millis=1_700_000_000_000,
        base_manifest_list_size=100,
        delta_manifest_list_size=200,
        changelog_manifest_list="manifest-list-a-2",
        changelog_manifest_list_size=10,
        index_manifest="index-manifest-a-0",
        log_offsets={0: 5, 1: 9},
        total_record_count=1000,
        delta_record_count=-5,
        changelog_record_count=3,
        watermark=-(2**63),
        statistics="stats-1",
        properties={"k": "v"},
        next_row_id=77,
        uuid="5f0c3c1e-1b9e-4a8e-9f0a-1b2c3d4e5f60",
    )
    minimal = Snapshot(
        id=1,
        schema_id=0,
        base_manifest_list="b",
        delta_manifest_list="d",
        commit_user="u",
        commit_identifier=0,
        commit_kind=CommitKind.APPEND,
        time_millis=0,
    )
    return [full, minimal]


@cache
def snapshot_json_seeds() -> list[str]:
    out = [snapshot_to_json(s) for s in _snapshot_seeds()]
    out += [p.read_text() for p in _golden_files("snapshot") if p.name.startswith("snapshot-")][:10]
    return out


@cache
def schema_json_seeds() -> list[str]:
    out = [schema_to_json(_schema_seed())]
    out += [p.read_text() for p in _golden_files("schema") if p.name.startswith("schema-")][:10]
    return out
