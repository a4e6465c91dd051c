"""Deletion vector decoding: RoaringBitmap portable format, V1/V2 framing, Java-written files."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.table.read.deletion_vectors import DeletionFile, decode_deletion_vector, read_deletion_vector
from tests.fixtures.golden import golden_table_path


def roaring(values: Sequence[int], *, runs: bool = False) -> bytes:
    """A portable RoaringBitmap (RoaringFormatSpec) for ``values``; containers of > 4096 values are
    bitmaps, and with ``runs`` every container is a run container."""
    groups: dict[int, list[int]] = {}
    for v in sorted(set(values)):
        groups.setdefault(v >> 16, []).append(v & 0xFFFF)
    keys = sorted(groups)
    size = len(keys)
    out = bytearray()
    if runs:
        out += struct.pack("<I", 12347 | ((size - 1) << 16))
        out += bytes([0xFF] * ((size + 7) // 8))
    else:
        out += struct.pack("<II", 12346, size)
    for k in keys:
        out += struct.pack("<HH", k, len(groups[k]) - 1)
    bodies = []
    for k in keys:
        low = groups[k]
        if runs:
            spans: list[tuple[int, int]] = []
            for v in low:
                if spans and spans[-1][0] + spans[-1][1] + 1 == v:
                    spans[-1] = (spans[-1][0], spans[-1][1] + 1)
                else:
                    spans.append((v, 0))
            bodies.append(
                struct.pack("<H", len(spans)) + b"".join(struct.pack("<HH", s, n) for s, n in spans)
            )
        elif len(low) <= 4096:
            bodies.append(struct.pack(f"<{len(low)}H", *low))
        else:
            bits = np.zeros(65536, dtype=np.uint8)
            bits[low] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    if not runs or size >= 4:
        offset = len(out) + 4 * size
        for body in bodies:
            out += struct.pack("<I", offset)
            offset += len(body)
    for body in bodies:
        out += body
    return bytes(out)


def v1(values: Sequence[int], *, runs: bool = False) -> bytes:
    data = struct.pack(">i", 1581511376) + roaring(values, runs=runs)
    return struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))


def v2(values: Sequence[int]) -> bytes:
    by_high: dict[int, list[int]] = {}
    for v in sorted(values):
        by_high.setdefault(v >> 32, []).append(v & 0xFFFFFFFF)
    body = struct.pack("<q", len(by_high))
    for high, lows in sorted(by_high.items()):
        body += struct.pack("<i", high) + roaring(lows)
    data = struct.pack("<i", 1681511377) + body
    return struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))


CASES = {
    "empty-ish": [0],
    "array": [1, 5, 70000, 70001, 2**31 - 1],
    "bitmap": list(range(0, 20000, 3)),
    "many-containers": [k << 16 | 7 for k in range(6)],
}


@pytest.mark.parametrize("values", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("runs", [False, True])
def test_v1_round_trip(values: list[int], runs: bool) -> None:
    data = v1(values, runs=runs)
    got = decode_deletion_vector(data, length=len(data) - 8)
    assert got.tolist() == sorted(set(values))


def test_v2_round_trip_with_64_bit_positions() -> None:
    values = [3, 2**32 + 1, 2**32 + 9, 5 * 2**32]
    data = v2(values)
    assert decode_deletion_vector(data, length=len(data)).tolist() == values


def test_index_file_framing() -> None:
    first, second = v1([4]), v1([0, 9])
    index = b"\x01" + first + second
    f1 = DeletionFile("idx", 1, len(first) - 8)
    f2 = DeletionFile("idx", 1 + len(first), len(second) - 8)
    assert read_deletion_vector(index, f1).tolist() == [4]
    assert read_deletion_vector(index, f2).tolist() == [0, 9]


@pytest.mark.parametrize(
    ("index", "dfile"),
    [
        (b"\x02" + v1([1]), DeletionFile("idx", 1, 22)),  # unknown index version
        (b"\x01" + v1([1]), DeletionFile("idx", 1, 99)),  # length beyond the file
        (b"\x01" + v1([1]), DeletionFile("idx", 1, 21)),  # length disagrees with the vector's size
        (b"\x01" + b"\x00\x00\x00\x16" + b"\x00" * 30, DeletionFile("idx", 1, 22)),  # bad magic
        (b"\x01" + v1([1])[:8] + b"\x00" * 22, DeletionFile("idx", 1, 22)),  # bad cookie
    ],
    ids=["version", "range", "length", "magic", "cookie"],
)
def test_corrupt_vectors_name_the_index_file(index: bytes, dfile: DeletionFile) -> None:
    with pytest.raises(CorruptMetadataError) as err:
        read_deletion_vector(index, dfile)
    assert err.value.path == "idx"


def test_java_written_vectors() -> None:
    """pk_09's bucket-0 index holds two vectors (offsets 1 and 31, length 22, as paimon-cpp's
    read test expects); each deletes row 0. Bucket 1's deletes row 4 (Tony)."""
    index_dir = golden_table_path("parquet", "pk_09") / "index"
    bucket0 = (index_dir / "index-ff7801ad-df90-49b2-9619-586eab9c68e3-0").read_bytes()
    bucket1 = (index_dir / "index-ff7801ad-df90-49b2-9619-586eab9c68e3-1").read_bytes()
    assert read_deletion_vector(bucket0, DeletionFile("i0", 1, 22)).tolist() == [0]
    assert read_deletion_vector(bucket0, DeletionFile("i0", 31, 22)).tolist() == [0]
    assert read_deletion_vector(bucket1, DeletionFile("i1", 1, 22)).tolist() == [4]
