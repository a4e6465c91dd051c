"""ORC timestamp columns read by pyarrow as Java Paimon (ORC Java 1.9, what Paimon bundles) reads them.

TIMESTAMP (Paimon TIMESTAMP): ORC stores seconds (relative to 2015-01-01 in the writer's zone) and nanos
apart. The Java writer stores an instant before the epoch whose nanos are >= 1 ms with its seconds
truncated toward zero (one second late), and readers take that second off again when the stored seconds
are negative. Java's reader tests the sign of the UTC seconds; the C++ reader in pyarrow tests the sign of
the wall-clock seconds in the writer's zone (the stripe footer's ``writerTimezone``). Where the two signs
differ, pyarrow reads a TIMESTAMP one second off Java: +1 s for wall clocks in [1969-12-31T23:59:59,
offset) in a zone east of UTC, -1 s in [offset, 1969-12-31T23:59:59) west of it (the offset being negative
there). :func:`correct_timestamps` moves those values back; a file with such a value nested in an ARRAY,
MAP or ROW is refused instead (the harness cannot have Java write one to check it against).

TIMESTAMP_INSTANT (Paimon TIMESTAMP_LTZ, in every Paimon version; pyarrow reads it as UTC, as Java does, so
the second above never differs there). In Paimon's legacy layout (``orc.timestamp-ltz.legacy.type``, true
by default; Paimon 0.9 and 1.0 know no other) Java's writer stores ``Timestamp.toSQLTimestamp()``: the
instant's UTC wall clock taken as a local time of the writer JVM's zone, i.e. the instant minus that zone's
offset. Java reads it back adding the *reader* JVM's offset (``DateTimeUtils.toInternal``), so only a
reader in the writer's zone gets the instants written. We read such a file as that reader does: for a file
the ORC Java writer made (footer ``writer`` ORC_JAVA, or absent as in files before ORC 1.5) in a non-UTC
zone, each value plus ``java.util.TimeZone.getOffset`` of the writer's zone at it (:func:`java_offsets`).
Files of the C++ writer (pyarrow, so ours) record GMT and hold the instant itself; a non-UTC file of
another writer under the legacy option is refused, as nothing tells what it holds. With the option false
(Paimon >= 1.1) Java stores and reads the instant itself, and so do we. Verified value by value against
Java in tests/interop/test_java_orc_timestamps.py.
"""

from __future__ import annotations

import datetime as dt
import zlib
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import CorruptMetadataError, UnsupportedError

_NONE, _ZLIB, _SNAPPY, _LZO, _LZ4, _ZSTD = range(6)
_NANOS = 1_000_000_000
_UTC_ZONES = frozenset({"", "UTC", "GMT", "Etc/UTC", "Etc/GMT", "Z", "Zulu", "Etc/Zulu"})
# No zone is more than a day off UTC, so only wall clocks this close to the epoch can differ in sign.
_WINDOW_NANOS = 86_400 * _NANOS
JAVA_WRITER = "ORC_JAVA"  # pyarrow's name of the footer's writer 0 (also what it reports when absent)
LTZ_LEGACY_OPTION = "orc.timestamp-ltz.legacy.type"  # OrcOptions.ORC_TIMESTAMP_LTZ_LEGACY_TYPE, default true
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# sun.util.calendar.ZoneInfo's transition table starts at 1900-01-01T00:00Z (ZoneInfoFile.UTC1900).
_JAVA_ZONE_HISTORY_START_NANOS = -2_208_988_800 * _NANOS
_RAW_OFFSET_AT = (dt.datetime(2200, 1, 1, tzinfo=dt.UTC), dt.datetime(2200, 7, 1, tzinfo=dt.UTC))
_MIN_NANOS, _MAX_NANOS = -(2**63), 2**63 - 1


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


def _nanos(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Epoch nanos of a timestamp column as int64 (nulls as 0: never through float64) and its validity."""
    nanos = pc.fill_null(column.cast(pa.timestamp("ns", tz=column.type.tz)).cast(pa.int64()), 0)
    return nanos.to_numpy(), ~column.is_null().to_numpy(zero_copy_only=False)


def _correct_column(column: pa.ChunkedArray, zone: ZoneInfo) -> pa.ChunkedArray:
    values, valid = _nanos(column)
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


def _offset_seconds(epoch_seconds: int, zone: ZoneInfo) -> int:
    moment = _EPOCH + dt.timedelta(seconds=epoch_seconds)
    offset = moment.astimezone(zone).utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def _raw_offset_seconds(zone: ZoneInfo) -> int:
    """The zone's standard offset under its last rules (``TimeZone.getRawOffset``): the smaller of its
    January and July offsets (the JDK's tzdata has no negative daylight saving, so standard is the lower)."""
    return min(_offset_seconds(int((moment - _EPOCH).total_seconds()), zone) for moment in _RAW_OFFSET_AT)


def java_offsets(nanos: np.ndarray, zone: ZoneInfo) -> np.ndarray:
    """Seconds ``java.util.TimeZone.getOffset`` of ``zone`` gives at each instant (epoch nanos): the zone's
    offset there, except before 1900 (``sun.util.calendar.ZoneInfo`` keeps no earlier transition and
    answers with the raw offset, never the local mean time). The zone's history comes from this machine's
    tzdata: where it differs from the JVM's (an older or newer tzdata release), so does the result."""
    seconds = np.floor_divide(nanos, _NANOS)
    # one look-up per UTC day, per value on the days the offset changes: no tzdata zone has two transitions
    # in one UTC day (checked over every zone's transitions), so a day's first and last second show each
    days, inverse = np.unique(np.floor_divide(seconds, 86_400), return_inverse=True)
    first = np.array([_offset_seconds(int(d) * 86_400, zone) for d in days], dtype=np.int64)
    last = np.array([_offset_seconds(int(d) * 86_400 + 86_399, zone) for d in days], dtype=np.int64)
    offsets = first[inverse]
    for i in np.flatnonzero((first != last)[inverse]):
        offsets[i] = _offset_seconds(int(seconds[i]), zone)
    offsets[nanos < _JAVA_ZONE_HISTORY_START_NANOS] = _raw_offset_seconds(zone)
    return offsets


def _shift_ltz_column(column: pa.ChunkedArray, zone: ZoneInfo, path: str) -> pa.ChunkedArray:
    values, valid = _nanos(column)
    if not valid.any():
        return column
    shift = java_offsets(values[valid], zone).astype(object) * _NANOS
    moved = values[valid].astype(object) + shift
    if min(moved) < _MIN_NANOS or max(moved) > _MAX_NANOS:
        raise UnsupportedError(
            "an ORC TIMESTAMP_LTZ value moved to the writer zone's instant leaves the nanosecond range",
            path=path,
        )
    shifted = values.copy()
    shifted[valid] = np.array(moved, dtype=np.int64)
    array = pa.array(shifted, pa.int64(), mask=~valid).cast(pa.timestamp("ns", tz="UTC"))
    return pa.chunked_array([array.cast(column.type)])


def _nested_wall_leaves(array: pa.Array) -> list[pa.Array]:
    """The TIMESTAMP (no zone) values nested in ``array`` (an ARRAY, MAP or ROW), parents' nulls applied."""
    data_type = array.type
    if pa.types.is_timestamp(data_type):
        return [array] if data_type.tz is None else []
    if pa.types.is_map(data_type):
        return [*_nested_wall_leaves(array.keys), *_nested_wall_leaves(array.items)]
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return _nested_wall_leaves(array.flatten())
    if pa.types.is_struct(data_type):
        return [leaf for child in array.flatten() for leaf in _nested_wall_leaves(child)]
    return []


def _check_nested_walls(table: pa.Table, zone: ZoneInfo, path: str) -> None:
    """``UnsupportedError`` when a TIMESTAMP nested in an ARRAY, MAP or ROW holds a value pyarrow reads a
    second off Java (those are not moved; the rare file that has one is refused, never misread)."""
    for f in table.schema:
        if pa.types.is_timestamp(f.type) or not any(
            pa.types.is_timestamp(t) and t.tz is None for t in _leaf_types(f.type)
        ):
            continue
        for chunk in table.column(f.name).chunks:
            for leaf in _nested_wall_leaves(chunk):
                column = pa.chunked_array([leaf], leaf.type)
                if not _correct_column(column, zone).equals(column):
                    raise UnsupportedError(
                        f"a TIMESTAMP nested in {f.name!r} of an ORC file Java wrote in time zone "
                        f"{zone.key!r} holds a value pyarrow reads a second off Java (not corrected there)",
                        path=path,
                        field=f.name,
                    )


def _leaf_types(data_type: pa.DataType) -> list[pa.DataType]:
    if data_type.num_fields == 0:
        return [data_type]
    return [t for i in range(data_type.num_fields) for t in _leaf_types(data_type.field(i).type)]


def _has_ltz(data_type: pa.DataType) -> bool:
    if pa.types.is_timestamp(data_type):
        return data_type.tz is not None
    return any(_has_ltz(data_type.field(i).type) for i in range(data_type.num_fields))


def correct_timestamps(
    table: pa.Table,
    zone_name: str | None,
    *,
    writer: str,
    ltz_legacy: bool = True,
    path: str = "",
) -> pa.Table:
    """``table`` (pyarrow's read of an ORC file written in ``zone_name`` by ``writer``, the footer's writer
    as pyarrow names it: ``ORC_JAVA``, ``ORC_CPP``, ...) as Java reads it in the writer's zone (the rules in
    the module docstring): TIMESTAMP values pyarrow reads a second off moved, and under the legacy LTZ
    layout (``ltz_legacy``, the table's ``orc.timestamp-ltz.legacy.type``) TIMESTAMP_LTZ values of the Java
    writer moved to the instants written. ``UnsupportedError`` where that cannot be told: a legacy
    TIMESTAMP_LTZ of another writer in a non-UTC zone, or one nested in an ARRAY, MAP or ROW."""
    if zone_name is None or zone_name in _UTC_ZONES:
        return table
    wall = [i for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type) and f.type.tz is None]
    ltz = [i for i, f in enumerate(table.schema) if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    nested_ltz = [f.name for f in table.schema if not pa.types.is_timestamp(f.type) and _has_ltz(f.type)]
    if ltz_legacy and (ltz or nested_ltz):
        if writer != JAVA_WRITER:
            raise UnsupportedError(
                f"ORC TIMESTAMP_LTZ written by {writer} in time zone {zone_name!r} under "
                f"{LTZ_LEGACY_OPTION}=true: which instants it holds is unknown",
                path=path,
                option=LTZ_LEGACY_OPTION,
            )
        if nested_ltz:
            raise UnsupportedError(
                f"TIMESTAMP_LTZ nested in {nested_ltz[0]!r} of an ORC file Java wrote in time zone "
                f"{zone_name!r} ({LTZ_LEGACY_OPTION}=true) is not supported",
                path=path,
                option=LTZ_LEGACY_OPTION,
                field=nested_ltz[0],
            )
    else:
        ltz = []
    nested_wall = [
        f.name
        for f in table.schema
        if not pa.types.is_timestamp(f.type)
        and any(pa.types.is_timestamp(t) and t.tz is None for t in _leaf_types(f.type))
    ]
    if not wall and not ltz and not nested_wall:
        return table
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise UnsupportedError(f"ORC writer time zone {zone_name!r} is unknown here", path=path) from e
    if nested_wall:
        _check_nested_walls(table, zone, path)
    for i in wall:
        table = table.set_column(i, table.field(i), _correct_column(table.column(i), zone))
    for i in ltz:
        table = table.set_column(i, table.field(i), _shift_ltz_column(table.column(i), zone, path))
    return table
