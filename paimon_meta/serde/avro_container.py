"""The Avro object container file format: header, blocks, sync markers and block codecs.

fastavro encodes and decodes the records; the framing and the codecs live here because fastavro only
supports ``zstandard`` and ``snappy`` through optional libraries (``backports.zstd``, ``cramjam``),
while pyarrow (a hard dependency) ships both. Owning the framing also lets every malformed byte
surface as :class:`CorruptMetadataError` naming the file.

Layout (Avro 1.x spec, "Object Container Files"): ``Obj\\x01``, a metadata map<string, bytes> holding
``avro.schema`` and ``avro.codec``, a 16-byte sync marker, then blocks of ``long count, long size,
size bytes of (compressed) records, sync marker``.
"""

from __future__ import annotations

import bz2
import io
import json
import lzma
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa

from paimon_meta.errors import CorruptMetadataError, ValidationError

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
# Java's DataFileWriter flushes a block once its buffer reaches 64000 bytes (DEFAULT_SYNC_INTERVAL).
SYNC_INTERVAL = 64_000
# Java's AvroFileFormat uses CodecFactory.zstandardCodec(zstdLevel) with zstdLevel defaulting to 1.
ZSTD_LEVEL = 1
# Java flushes a block once its buffer reaches 64,000 bytes; a block that expands to far more than that is
# not a manifest block, and refusing it bounds the memory a hostile file can make us allocate.
MAX_BLOCK_BYTES = 64 * 1024 * 1024

# Paimon's manifest.compression names -> Avro codec names (``zstd`` is spelled ``zstandard`` in Avro).
_CODEC_NAMES = {
    "zstd": "zstandard",
    "zstandard": "zstandard",
    "deflate": "deflate",
    "snappy": "snappy",
    "bzip2": "bzip2",
    "xz": "xz",
    "null": "null",
    "none": "null",
    "uncompressed": "null",
}
_AVRO_CODECS = frozenset(_CODEC_NAMES.values())


def avro_codec_name(compression: str) -> str:
    """The Avro codec name for a Paimon ``manifest.compression`` value; ValidationError if unsupported."""
    codec = _CODEC_NAMES.get(compression.strip().lower())
    if codec is None:
        raise ValidationError(
            f"unsupported Avro manifest compression {compression!r} (supported: {sorted(_CODEC_NAMES)})",
            option="manifest.compression",
        )
    return codec


# ---- codecs ---------------------------------------------------------------------------------------------


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "zstandard":
        return bytes(pa.Codec("zstd", compression_level=ZSTD_LEVEL).compress(data, asbytes=True))
    if codec == "deflate":
        # Avro's deflate is raw DEFLATE (RFC 1951): no zlib header or checksum.
        c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if codec == "snappy":
        # Avro appends the big-endian CRC32 of the uncompressed block to each snappy block.
        body = bytes(pa.compress(data, codec="snappy", asbytes=True))
        return body + zlib.crc32(data).to_bytes(4, "big")
    if codec == "bzip2":
        return bz2.compress(data)
    if codec == "xz":
        return lzma.compress(data)
    raise ValidationError(f"unsupported Avro codec {codec!r}")


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint (snappy's length prefix)."""
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or oversized varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _too_big(out: bytes) -> bool:
    return len(out) > MAX_BLOCK_BYTES


def _decompress(codec: str, data: bytes) -> bytes:
    """Decompress one block, refusing any that would expand past ``MAX_BLOCK_BYTES`` (a decompression bomb
    or a lying length must become a typed error, never a multi-GiB allocation)."""
    limit = MAX_BLOCK_BYTES + 1
    if codec == "null":
        return data
    if codec == "zstandard":
        # Java writes zstd through a streaming encoder, so frames carry no content size; stream it.
        out = bytes(pa.CompressedInputStream(pa.BufferReader(data), "zstd").read(limit))
    elif codec == "deflate":
        d = zlib.decompressobj(-15)
        out = d.decompress(data, limit)
        if not _too_big(out):
            out += d.flush()
            if not d.eof:
                raise ValueError("truncated deflate stream")
    elif codec == "snappy":
        if len(data) < 4:
            raise ValueError("snappy block shorter than its CRC")
        body, crc = data[:-4], int.from_bytes(data[-4:], "big")
        size, _ = _read_uvarint(body, 0)
        if size > MAX_BLOCK_BYTES:
            raise ValueError(f"snappy block claims {size} bytes, more than {MAX_BLOCK_BYTES}")
        out = bytes(pa.decompress(body, decompressed_size=size, codec="snappy", asbytes=True))
        if zlib.crc32(out) != crc:
            raise ValueError("snappy block CRC mismatch")
    elif codec == "bzip2":
        out = bz2.BZ2Decompressor().decompress(data, max_length=limit)
    elif codec == "xz":
        out = lzma.LZMADecompressor().decompress(data, max_length=limit)
    else:
        raise ValueError(f"unsupported Avro codec {codec!r}")
    if _too_big(out):
        raise ValueError(f"{codec} block expands past {MAX_BLOCK_BYTES} bytes")
    return out


# ---- zig-zag longs ----------------------------------------------------------------------------------------


def _encode_long(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


class _Cursor:
    """Reads Avro primitives from a byte string, raising ValueError on truncation."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def long(self) -> int:
        z = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("truncated varint")
            if shift > 63:
                raise ValueError("varint longer than 10 bytes")
            b = self.data[self.pos]
            self.pos += 1
            z |= (b & 0x7F) << shift
            if b < 0x80:
                return (z >> 1) ^ -(z & 1)
            shift += 7

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"truncated: wanted {n} bytes at offset {self.pos} of {len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.data)


# ---- writing ----------------------------------------------------------------------------------------------


class EncodedRecords:
    """The Avro encodings of immutable items (frozen dataclasses holding only bytes, numbers, strings and
    tuples), by identity: a manifest entry or manifest file meta encodes to the same bytes every time,
    and a commit re-encodes the same objects again and again (each base manifest list repeats the
    previous one's metas; a manifest merge rewrites entries read from the cache of decoded manifests).

    Keyed by ``id(item)`` with the item itself kept (a live item's id is never reused, and a hit checks
    ``is``), bounded by ``max_items`` and ``max_bytes`` (first in, first out). Thread-safe: a lookup is
    one dict read; insertions and evictions take a lock.
    """

    __slots__ = ("_bytes", "_entries", "_lock", "max_bytes", "max_items")

    def __init__(self, *, max_items: int = 50_000, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._entries: dict[int, tuple[object, bytes]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, item: object) -> bytes | None:
        hit = self._entries.get(id(item))
        return hit[1] if hit is not None and hit[0] is item else None

    def put(self, item: object, encoded: bytes) -> None:
        with self._lock:
            old = self._entries.pop(id(item), None)
            if old is not None:
                self._bytes -= len(old[1])
            self._entries[id(item)] = (item, encoded)
            self._bytes += len(encoded)
            while self._entries and (len(self._entries) > self.max_items or self._bytes > self.max_bytes):
                _, evicted = self._entries.pop(next(iter(self._entries)))  # the oldest
                self._bytes -= len(evicted)

    def __len__(self) -> int:
        return len(self._entries)


def write_container(
    schema_text: str,
    parsed_schema: Any,
    items: Iterable[Any],
    to_record: Callable[[Any], Any],
    *,
    codec: str,
    encoded: EncodedRecords | None = None,
) -> bytes:
    """Encode ``to_record(item)`` for each item into an Avro container file whose header carries
    ``schema_text`` verbatim. ``parsed_schema`` (a fastavro parsed schema) must encode the same bytes as
    ``schema_text``; it may lack its logical-type annotations, which do not change the encoding.
    ``encoded``: a cache of items' encodings under this schema (items must be immutable), used and
    filled. ValidationError names the first item that cannot be encoded.
    """
    sync = os.urandom(SYNC_SIZE)
    out = bytearray(MAGIC)
    meta = {"avro.schema": schema_text.encode(), "avro.codec": codec.encode()}
    out += _encode_long(len(meta))
    for key, value in meta.items():
        kb = key.encode()
        out += _encode_long(len(kb)) + kb + _encode_long(len(value)) + value
    out += _encode_long(0)
    out += sync

    buf = io.BytesIO()
    count = 0

    def flush() -> None:
        nonlocal buf, count
        block = _compress(codec, buf.getvalue())
        out.extend(_encode_long(count) + _encode_long(len(block)))
        out.extend(block)
        out.extend(sync)
        buf = io.BytesIO()
        count = 0

    write = fastavro.schemaless_writer
    for index, item in enumerate(items):
        raw = None if encoded is None else encoded.get(item)
        if raw is None:
            one = io.BytesIO()
            try:
                # Tuples are data here, never fastavro's (type-name, value) union notation.
                write(one, parsed_schema, to_record(item), disable_tuple_notation=True)
            except (TypeError, ValueError, AttributeError, OverflowError) as e:
                raise ValidationError(f"record {index} cannot be encoded: {e}", record=index) from e
            raw = one.getvalue()
            if encoded is not None:
                encoded.put(item, raw)
        buf.write(raw)
        count += 1
        if buf.tell() >= SYNC_INTERVAL:
            flush()
    if count:
        flush()
    return bytes(out)


# ---- reading ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerHeader:
    """What an Avro container says about itself."""

    schema_text: str
    schema: Any  # the JSON-decoded writer schema
    codec: str
    sync: bytes
    data_start: int


def read_header(data: bytes, *, path: str | None = None) -> ContainerHeader:
    """Parse the container header; CorruptMetadataError if it is not a valid Avro container."""
    if data[:4] != MAGIC:
        raise CorruptMetadataError(f"not an Avro container file (magic {bytes(data[:4])!r})", path=path)
    cur = _Cursor(data)
    cur.pos = 4
    meta: dict[str, bytes] = {}
    try:
        while True:
            n = cur.long()
            if n == 0:
                break
            if n < 0:  # a negative count is followed by the block's byte size
                n = -n
                cur.long()
            for _ in range(n):
                key = cur.take(cur.long()).decode()
                meta[key] = cur.take(cur.long())
        sync = cur.take(SYNC_SIZE)
        schema_text = meta["avro.schema"].decode()
        schema = json.loads(schema_text)
    except KeyError as e:
        raise CorruptMetadataError("Avro header has no avro.schema", path=path) from e
    except (ValueError, UnicodeDecodeError) as e:
        raise CorruptMetadataError(f"malformed Avro header: {e}", path=path) from e
    codec = meta.get("avro.codec", b"null").decode(errors="replace")
    if codec not in _AVRO_CODECS:
        raise CorruptMetadataError(f"unsupported Avro codec {codec!r}", path=path)
    return ContainerHeader(schema_text, schema, codec, sync, cur.pos)


def iter_blocks(
    data: bytes, header: ContainerHeader, *, path: str | None = None
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(record count, decompressed block bytes)`` per block; CorruptMetadataError on damage."""
    cur = _Cursor(data)
    cur.pos = header.data_start
    index = 0
    while not cur.at_end:
        try:
            count = cur.long()
            size = cur.long()
            if count < 0 or size < 0:
                raise ValueError(f"negative block count {count} or size {size}")
            raw = cur.take(size)
            if cur.take(SYNC_SIZE) != header.sync:
                raise ValueError("sync marker mismatch")
            payload = _decompress(header.codec, raw)
        except (ValueError, OSError, EOFError, lzma.LZMAError, zlib.error, pa.ArrowException) as e:
            raise CorruptMetadataError(f"Avro block {index} is damaged: {e}", path=path) from e
        yield count, payload
        index += 1


def iter_records(
    data: bytes, parsed_schema: Any, header: ContainerHeader, *, path: str | None = None
) -> Iterator[Any]:
    """Decode every record with ``parsed_schema`` (the writer schema, possibly without logical types)."""
    read = fastavro.schemaless_reader
    for index, (count, payload) in enumerate(iter_blocks(data, header, path=path)):
        fo = io.BytesIO(payload)
        try:
            for _ in range(count):
                yield read(fo, parsed_schema, None)
        except Exception as e:  # fastavro signals malformed data with many exception types
            raise CorruptMetadataError(f"Avro block {index} does not decode: {e!r}", path=path) from e
        if fo.tell() != len(payload):
            raise CorruptMetadataError(
                f"Avro block {index} has {len(payload) - fo.tell()} bytes after its {count} records",
                path=path,
            )
