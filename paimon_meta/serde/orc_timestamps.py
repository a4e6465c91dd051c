"""ORC TIMESTAMP columns read by pyarrow as Java ORC (1.9, what Paimon bundles) reads them.

ORC stores a timestamp as seconds (relative to 2015-01-01 in the writer's zone) and nanos apart. The Java
writer stores an instant before the epoch whose nanos are >= 1 ms with its seconds truncated toward zero
(one second late), and readers take that second off again when the stored seconds are negative. Java's
reader tests the sign of the UTC seconds; the C++ reader in pyarrow tests the sign of the wall-clock
seconds in the writer's zone (the stripe footer's ``writerTimezone``). Where the two signs differ, pyarrow
reads a TIMESTAMP one second off Java: +1 s for wall clocks in [1969-12-31T23:59:59, offset) in a zone
east of UTC, -1 s in [offset, 1969-12-31T23:59:59) west of it (the offset being negative there).
:func:`correct_timestamps` moves those values back. TIMESTAMP_INSTANT columns (TIMESTAMP_LTZ) are read
in UTC by both, so alike. Verified value by value against Java in tests/interop/test_java_orc_timestamps.py.
"""

from __future__ import annotations

import datetime as dt
import zlib
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pyarrow as pa

from paimon_meta.errors import CorruptMetadataError, UnsupportedError

_NONE, _ZLIB, _SNAPPY, _LZO, _LZ4, _ZSTD = range(6)
_NANOS = 1_000_000_000
_UTC_ZONES = frozenset({"", "UTC", "GMT", "Etc/UTC", "Etc/GMT", "Z", "Zulu", "Etc/Zulu"})
# No zone is more than a day off UTC, so only wall clocks this close to the epoch can differ in sign.
_WINDOW_NANOS = 86_400 * _NANOS


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: varints as int, length-delimited as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(buf, pos)
            out.append((number, buf[pos : pos + length]))
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    return out


def _lz4_block(src: bytes) -> bytes:
    """An LZ4 raw block (ORC's LZ4 has no frame); only small metadata sections go through here."""
    out = bytearray()
    pos = 0
    while pos < len(src):
        token = src[pos]
        pos += 1
        literals = token >> 4
        if literals == 15:
            while True:
                b = src[pos]
                pos += 1
                literals += b
                if b != 255:
                    break
        out += src[pos : pos + literals]
        pos += literals
        if pos >= len(src):
            break
        offset = src[pos] | src[pos + 1] << 8
        pos += 2
        match = (token & 15) + 4
        if match == 19:
            while True:
                b = src[pos]
                pos += 1
                match += b
                if b != 255:
                    break
        if offset == 0 or offset > len(out):
            raise ValueError("bad LZ4 match offset")
        for _ in range(match):  # byte by byte: a match may overlap what it copies
            out.append(out[-offset])
    return bytes(out)


def _decompress(kind: int, buf: bytes) -> bytes:
    if kind == _NONE:
        return buf
    out = bytearray()
    pos = 0
    while pos < len(buf):
        header = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        pos += 3
        chunk = buf[pos : pos + (header >> 1)]
        pos += header >> 1
        if header & 1:  # stored uncompressed
            out += chunk
        elif kind == _ZLIB:
            out += zlib.decompressobj(-15).decompress(chunk)
        elif kind == _ZSTD:
            out += pa.CompressedInputStream(pa.BufferReader(chunk), "zstd").read()
        elif kind == _SNAPPY:
            size, _ = _varint(chunk, 0)
            out += pa.Codec("snappy").decompress(chunk, decompressed_size=size).to_pybytes()
        elif kind == _LZ4:
            out += _lz4_block(chunk)
        else:
            raise UnsupportedError(f"ORC compression kind {kind} (LZO) is not supported")
    return bytes(out)


def writer_timezone(data: bytes, *, path: str = "") -> str | None:
    """The ``writerTimezone`` of an ORC file's first stripe footer (None: no stripes, or not recorded)."""
    try:
        ps_len = data[-1]
        postscript = dict(_fields(data[-1 - ps_len : -1]))
        footer_len, kind = int(postscript.get(1, 0)), int(postscript.get(2, 0))
        footer_end = len(data) - 1 - ps_len
        footer = _fields(_decompress(kind, data[footer_end - footer_len : footer_end]))
        stripes = [v for n, v in footer if n == 3 and isinstance(v, bytes)]
        if not stripes:
            return None
        info = {n: int(v) for n, v in _fields(stripes[0]) if isinstance(v, int)}
        start = info.get(1, 0) + info.get(2, 0) + info.get(3, 0)
        stripe_footer = _fields(_decompress(kind, data[start : start + info.get(4, 0)]))
    except (ValueError, IndexError, pa.ArrowException) as e:
        raise CorruptMetadataError(f"cannot read the ORC stripe footer: {e}", path=path) from e
    zones = [v for n, v in stripe_footer if n == 3 and isinstance(v, bytes)]
    return zones[0].decode() if zones else None


def java_second_shift(wall_seconds: int, zone: ZoneInfo) -> int:
    """Seconds to add to pyarrow's reading (``wall_seconds``, floored, nanos >= 1 ms) of a TIMESTAMP Java
    wrote in ``zone`` to get Java's reading of it."""
    pyarrow_took_one_off = wall_seconds < 0  # pyarrow reads W - 1 for a stored wall clock W < 0
    wall = wall_seconds + int(pyarrow_took_one_off)
    local = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall)
    java_takes_one_off = local.replace(tzinfo=zone).timestamp() < 0
    return int(pyarrow_took_one_off) - int(java_takes_one_off)


def _correct_column(column: pa.ChunkedArray, zone: ZoneInfo) -> pa.ChunkedArray:
    nanos = column.cast(pa.timestamp("ns")).cast(pa.int64()).to_numpy(zero_copy_only=False)
    valid = ~column.is_null().to_numpy(zero_copy_only=False)
    values = np.where(valid, nanos, 0)
    candidates = np.flatnonzero(
        valid & (np.mod(values, _NANOS) >= 1_000_000) & (np.abs(values) < _WINDOW_NANOS)
    )
    if not len(candidates):
        return column
    shifted = values.copy()
    for i in candidates:
        shifted[i] += java_second_shift(int(values[i]) // _NANOS, zone) * _NANOS
    if np.array_equal(shifted, values):
        return column
    array = pa.array(shifted, pa.int64(), mask=~valid).cast(pa.timestamp("ns"))
    return pa.chunked_array([array.cast(column.type)])


def correct_timestamps(table: pa.Table, zone_name: str | None, *, path: str = "") -> pa.Table:
    """``table`` (pyarrow's read of an ORC file written in ``zone_name``) with every TIMESTAMP value
    pyarrow reads a second off Java moved to Java's reading (the rule in the module docstring)."""
    if zone_name is None or zone_name in _UTC_ZONES:
        return table
    columns = [i for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type) and f.type.tz is None]
    if not columns:
        return table
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise UnsupportedError(f"ORC writer time zone {zone_name!r} is unknown here", path=path) from e
    for i in columns:
        table = table.set_column(i, table.field(i), _correct_column(table.column(i), zone))
    return table
