"""Deletion vectors: which row positions of a data file are deleted.

A deletion-vector index file (``DeletionFileWriter``) is a version byte (1) followed by one
serialized vector per data file, located by ``DeletionVectorMeta(offset, length)``:

* V1 (``BitmapDeletionVector``): big-endian int ``size``, big-endian int magic 1581511376, a
  32-bit RoaringBitmap in the portable format (``size - 4`` bytes), big-endian CRC32 of magic+bitmap;
  the meta's ``length`` is ``size``.
* V2 (``Bitmap64DeletionVector``): big-endian int ``size``, then (little-endian) magic 1681511377,
  a 64-bit bitmap (long bucket count, then per bucket an int high key and a portable 32-bit
  RoaringBitmap), then the CRC; the meta's ``length`` is ``size + 8``.

The portable RoaringBitmap format is RoaringFormatSpec's (all little-endian).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.model.manifest import FileKind, IndexManifestEntry
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.table.manifests import ManifestReader

DELETION_VECTORS_INDEX = "DELETION_VECTORS"
_V1_MAGIC = 1581511376
_V2_MAGIC = 1681511377
_SERIAL_COOKIE_NO_RUN = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_MAX = 4096


@dataclass(frozen=True, slots=True)
class DeletionFile:
    """Where one data file's deletion vector is (Java ``DeletionFile``)."""

    path: str
    offset: int
    length: int
    cardinality: int | None = None


class _Bad(Exception):
    pass


def _roaring32(buf: bytes, pos: int) -> tuple[np.ndarray, int]:
    """Decode one portable 32-bit RoaringBitmap at ``pos``: (sorted uint32 values, end position)."""

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(buf):
            raise _Bad("truncated RoaringBitmap")
        out = buf[pos : pos + n]
        pos += n
        return out

    (cookie,) = struct.unpack("<I", take(4))
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        run_flags = take((size + 7) // 8)
        has_runs = True
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        (size,) = struct.unpack("<I", take(4))
        run_flags = b""
        has_runs = False
    else:
        raise _Bad(f"bad RoaringBitmap cookie {cookie}")
    header = np.frombuffer(take(4 * size), dtype="<u2").reshape(size, 2) if size else np.empty((0, 2), "<u2")
    if not has_runs or size >= _NO_OFFSET_THRESHOLD:
        take(4 * size)  # container offsets: the containers follow in order anyway
    parts: list[np.ndarray] = []
    for i in range(size):
        high = np.uint32(int(header[i, 0]) << 16)
        card = int(header[i, 1]) + 1
        if has_runs and run_flags[i // 8] & (1 << (i % 8)):
            (n_runs,) = struct.unpack("<H", take(2))
            runs = np.frombuffer(take(4 * n_runs), dtype="<u2").reshape(n_runs, 2).astype(np.uint32)
            low: np.ndarray = np.empty(0, dtype=np.uint32)
            if n_runs:
                low = np.concatenate([np.arange(s, s + n + 1, dtype=np.uint32) for s, n in runs])
        elif card <= _ARRAY_MAX:
            low = np.frombuffer(take(2 * card), dtype="<u2").astype(np.uint32)
        else:
            words = np.frombuffer(take(8192), dtype=np.uint8)
            low = np.flatnonzero(np.unpackbits(words, bitorder="little")).astype(np.uint32)
        parts.append(np.asarray(low, dtype=np.uint32) | high)
    values = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint32)
    return values, pos


def decode_deletion_vector(data: bytes, *, length: int | None = None, path: str | None = None) -> np.ndarray:
    """Deleted row positions (sorted int64) of one serialized deletion vector (from its size int)."""
    try:
        if len(data) < 8:
            raise _Bad("deletion vector shorter than its header")
        size, magic_be = struct.unpack(">ii", data[:8])
        if magic_be == _V1_MAGIC:
            if length is not None and size != length:
                raise _Bad(f"size {size} does not match the index's length {length}")
            values, _ = _roaring32(data[: 8 + size - 4], 8)
            return values.astype(np.int64)
        (magic_le,) = struct.unpack("<i", data[4:8])
        if magic_le == _V2_MAGIC:
            if length is not None and size != length - 8:
                raise _Bad(f"size {size} does not match the index's length {length}")
            body = data[: 4 + size]
            pos = 8
            if pos + 8 > len(body):
                raise _Bad("truncated 64-bit bitmap")
            (count,) = struct.unpack("<q", body[pos : pos + 8])
            pos += 8
            out: list[np.ndarray] = []
            for _ in range(count):
                (key,) = struct.unpack("<i", body[pos : pos + 4])
                low, pos = _roaring32(body, pos + 4)
                out.append((np.int64(key) << 32) | low.astype(np.int64))
            return np.concatenate(out) if out else np.empty(0, dtype=np.int64)
        raise _Bad(f"invalid deletion vector magic number {magic_be}")
    except (_Bad, struct.error, ValueError) as e:
        raise CorruptMetadataError(f"corrupt deletion vector: {e}", path=path) from e


def read_deletion_vector(index_file: bytes, deletion_file: DeletionFile) -> np.ndarray:
    """The deleted positions of ``deletion_file`` given the bytes of its whole index file."""
    if not index_file or index_file[0] != 1:
        raise CorruptMetadataError("deletion vector index file lacks version byte 1", path=deletion_file.path)
    start, length = deletion_file.offset, deletion_file.length
    if start < 1 or start + max(length, 8) > len(index_file):
        raise CorruptMetadataError(
            f"deletion vector at {start} (+{length}) is outside the index file of {len(index_file)} bytes",
            path=deletion_file.path,
        )
    # V1 vectors are followed by their CRC (length + 8 bytes in all); V2 lengths already include it.
    return decode_deletion_vector(
        index_file[start : start + length + 8], length=length, path=deletion_file.path
    )


def deletion_files(reader: ManifestReader, snapshot: Snapshot) -> dict[str, DeletionFile]:
    """Data file name -> its deletion vector, from the snapshot's index manifest (which lists
    the table's complete index state; DELETE entries, if any, cancel earlier ADDs). Java's
    ``SnapshotReaderImpl`` reading ``IndexFileHandler.scan(snapshot, DELETION_VECTORS_INDEX)``."""
    if snapshot.index_manifest is None:
        return {}
    live: dict[tuple[bytes, int, str], IndexManifestEntry] = {}
    for entry in reader.index_manifest(snapshot.index_manifest):
        if entry.index_file.index_type != DELETION_VECTORS_INDEX:
            continue
        key = (entry.partition, entry.bucket, entry.index_file.file_name)
        if entry.kind is FileKind.ADD:
            live[key] = entry
        else:
            live.pop(key, None)
    out: dict[str, DeletionFile] = {}
    for entry in live.values():
        index_path = reader.paths.index_file_path(entry.index_file)
        for dv in entry.index_file.dv_ranges or ():
            out[dv.data_file_name] = DeletionFile(index_path, dv.offset, dv.length, dv.cardinality)
    return out
