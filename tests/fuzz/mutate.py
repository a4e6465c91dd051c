"""Hypothesis strategies that damage valid inputs: byte-level edits aimed at length and count fields,
structure-aware edits of JSON documents, and Avro container edits (block counts, sizes, codec, schema)."""

from __future__ import annotations

import json
import struct
from typing import Any

from hypothesis import strategies as st

from paimon_meta.serde import avro_container

# Values that break length and count checks: signs, the int32/int64 edges, "just past the end".
_EXTREME_I32 = [0, 1, -1, 2, 3, 4, 7, 8, 255, 256, 65535, 2**31 - 1, -(2**31), 2**30, 2**24]
_EXTREME_I64 = [0, -1, 1, 2**63 - 1, -(2**63), 2**32, 2**53 + 1]


def _i32s() -> st.SearchStrategy[int]:
    return st.sampled_from(_EXTREME_I32) | st.integers(-(2**31), 2**31 - 1)


def _i64s() -> st.SearchStrategy[int]:
    return st.sampled_from(_EXTREME_I64) | st.integers(-(2**63), 2**63 - 1)


@st.composite
def byte_mutations(draw: st.DrawFn, valid: bytes, others: tuple[bytes, ...] = ()) -> bytes:
    """1..4 edits of ``valid``: big-endian int32/int64 overwrites anywhere (the framing of CommitMessage
    bytes and BinaryRow offsets), byte flips, inserts, deletes, truncation and splices of other seeds."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["i32", "i64", "byte", "insert", "delete", "truncate", "splice"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "i32" and len(data) >= 4:
            pos = min(pos, len(data) - 4)
            data[pos : pos + 4] = struct.pack(">i", draw(_i32s()))
        elif op == "i64" and len(data) >= 8:
            pos = min(pos, len(data) - 8)
            data[pos : pos + 8] = struct.pack(">q", draw(_i64s()))
        elif op == "byte" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 16))]
        elif op == "truncate":
            del data[pos:]
        elif op == "splice" and others:
            other = draw(st.sampled_from(others))
            start = draw(st.integers(0, max(0, len(other) - 1)))
            data[pos : pos + draw(st.integers(0, 32))] = other[start : start + draw(st.integers(1, 64))]
    return bytes(data)


# ---- JSON ---------------------------------------------------------------------------------------------

_HUGE = [10**30, -(10**30), 2**63, -(2**63) - 1, 2**64, 2**31, -(2**31) - 1]
_FLOATS = [float("inf"), float("-inf"), float("nan"), 1e308, -0.0, 0.5, 1.0]

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.sampled_from(_HUGE)
    | st.sampled_from(_FLOATS)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(
        ["", "APPEND", "COMPACT", "INT", "STRING NOT NULL", "ARRAY<INT>", "ROW<>", "\x00", "😀"]
    )
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


@st.composite
def json_mutations(draw: st.DrawFn, text: str) -> str:
    """1..3 structure-aware edits of a JSON document: a field removed, given a value of another type
    (huge numbers, NaN/Infinity, unicode, containers), an unknown field added, a list element dropped or
    duplicated; then serialised with or without ASCII escapes."""
    doc = json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["set", "delete", "add", "dup", "wrap"]))
        if not path:
            if op == "add" and isinstance(doc, dict):
                doc[draw(st.text(max_size=12))] = draw(json_values)
            continue
        parent, key = _parent(doc, path), path[-1]
        if op == "set":
            parent[key] = draw(json_values)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent[key], dict):
            parent[key][draw(st.text(max_size=12))] = draw(json_values)
        elif op == "dup" and isinstance(parent, list):
            parent.insert(key, parent[key])
        elif op == "wrap":
            parent[key] = [parent[key]] if draw(st.booleans()) else {"value": parent[key]}
    return json.dumps(doc, ensure_ascii=draw(st.booleans()), allow_nan=True)


# ---- Avro containers -----------------------------------------------------------------------------------


def _long(n: int) -> bytes:
    return avro_container._encode_long(n)


def _header(schema_text: str, codec: str, sync: bytes) -> bytes:
    meta = {"avro.schema": schema_text.encode(), "avro.codec": codec.encode()}
    out = bytearray(avro_container.MAGIC)
    out += _long(len(meta))
    for key, value in meta.items():
        out += _long(len(key)) + key.encode() + _long(len(value)) + value
    return bytes(out + _long(0) + sync)


def _blocks(data: bytes, header: avro_container.ContainerHeader) -> list[tuple[int, bytes]]:
    """(count, raw compressed bytes) of each block of a valid container."""
    cur = avro_container._Cursor(data)
    cur.pos = header.data_start
    out = []
    while not cur.at_end:
        count, size = cur.long(), cur.long()
        out.append((count, cur.take(size)))
        cur.take(avro_container.SYNC_SIZE)
    return out


@st.composite
def avro_mutations(draw: st.DrawFn, valid: bytes) -> bytes:
    """Container-aware edits of a valid Avro file: a block's record count or byte size replaced by an
    extreme value, the codec name swapped, the writer schema edited structurally, blocks dropped or
    repeated; the result is re-assembled with the original sync marker."""
    header = avro_container.read_header(valid)
    schema_text, codec, sync = header.schema_text, header.codec, header.sync
    blocks = [(count, raw, len(raw)) for count, raw in _blocks(valid, header)]
    op = draw(st.sampled_from(["count", "size", "codec", "schema", "blocks"]))
    longs = st.sampled_from([0, 1, -1, 2**31, 2**62, -(2**62), 10**6]) | st.integers(-(2**40), 2**40)
    if op == "count" and blocks:
        i = draw(st.integers(0, len(blocks) - 1))
        _, raw, size = blocks[i]
        blocks[i] = (draw(longs), raw, size)
    elif op == "size" and blocks:
        i = draw(st.integers(0, len(blocks) - 1))
        count, raw, _ = blocks[i]
        blocks[i] = (count, raw, draw(longs))
    elif op == "codec":
        codec = draw(st.sampled_from(["null", "deflate", "snappy", "zstandard", "bzip2", "xz", "lz4", ""]))
    elif op == "schema":
        schema_text = draw(json_mutations(schema_text))
    elif op == "blocks" and blocks:
        i = draw(st.integers(0, len(blocks) - 1))
        blocks = blocks[:i] + blocks[i + 1 :] if draw(st.booleans()) else [*blocks, blocks[i]]
    out = bytearray(_header(schema_text, codec, sync))
    for count, raw, size in blocks:
        out += _long(count) + _long(size) + raw + sync
    return bytes(out)
