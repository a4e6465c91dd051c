"""CommitMessage bytes compatible with Java Paimon's ``CommitMessageSerializer`` (versions 3..14).

The version is not inside the bytes: whoever stores them stores the version beside them. Framing integers
are big-endian (Java ``DataOutput``); booleans are one byte 0/1. One message, by version:

* 3..6:  ``partition`` (``int len`` + serialized BinaryRow) | ``int bucket``
  | newFiles, deletedFiles, changelogFiles | compactBefore, compactAfter, changelogFiles
  | newIndexFiles, deletedIndexFiles (one index increment, see below)
* 7..9:  as 3..6 with ``bool hasTotalBuckets [int totalBuckets]`` after the bucket (Paimon 1.1)
* 10..13: ``partition | bucket | totalBuckets`` | the DataIncrement's 3 file + 2 index lists
  | the CompactIncrement's 3 file + 2 index lists (Paimon 1.3 split the index increment)
* 14:    as 13 followed by ``bool [long checkFromSnapshot]`` (pypaimon 2.1.0,
  ``pypaimon/write/commit_message_serializer.py``; Java master stops at 13)

A list is ``int count`` + per element ``int size`` + BinaryRow bytes (``ObjectSerializer.serializeList``);
the rows' layouts per version live in :mod:`paimon_meta.serde.commit_message_legacy`. A batch
(``CommitMessageSerializer.serializeList``, the golden ``commit_messages-NN`` files) is ``int count`` followed
by the messages back to back, without per-message lengths.

Before version 10 Java had one index increment: on read it goes to the CompactIncrement when that has data
files and to the DataIncrement otherwise. Writing such a version therefore requires the index files to sit
where a reader will put them; anything a version cannot carry is a ``ValidationError``, never dropped.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.model.commit_message import CommitMessage, CompactIncrement, DataIncrement
from paimon_meta.model.manifest import DataFileMeta, IndexFileMeta
from paimon_meta.serde.commit_message_legacy import (
    LAYOUTS,
    RowLayout,
    decode_data_file,
    decode_index_file,
    encode_data_file,
    encode_index_file,
    serialized_row_problem,
)

CURRENT_VERSION = 14
"""What pypaimon 2.1.0 writes (Java master's ``CommitMessageSerializer.CURRENT_VERSION`` is 13)."""

SUPPORTED_READ_VERSIONS: frozenset[int] = frozenset(range(3, 15))
SUPPORTED_WRITE_VERSIONS: frozenset[int] = frozenset(range(3, 15))

_BE_I32 = struct.Struct(">i")
_BE_I64 = struct.Struct(">q")
_T = TypeVar("_T")


def _layout(version: int, supported: frozenset[int]) -> RowLayout:
    if isinstance(version, bool) or not isinstance(version, int) or version not in supported:
        raise ValidationError(
            f"unsupported CommitMessage version {version!r} (supported: {min(supported)}..{max(supported)})",
            field="version",
            version=version,
        )
    return LAYOUTS[version]


# ---- writing ------------------------------------------------------------------------------------------


class _Out:
    """Big-endian framing writer (Java ``DataOutputView``)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i32(self, value: int, what: str) -> None:
        if not -(1 << 31) <= value < (1 << 31):
            raise ValidationError(f"{what}: {value} does not fit a signed 32-bit integer", field=what)
        self.parts.append(_BE_I32.pack(value))

    def i64(self, value: int, what: str) -> None:
        if not -(1 << 63) <= value < (1 << 63):
            raise ValidationError(f"{what}: {value} does not fit a signed 64-bit integer", field=what)
        self.parts.append(_BE_I64.pack(value))

    def flag(self, value: bool) -> None:
        self.parts.append(b"\x01" if value else b"\x00")

    def sized(self, data: bytes) -> None:
        self.parts.append(_BE_I32.pack(len(data)))
        self.parts.append(data)

    def rows(self, items: Sequence[_T], encode: Callable[[_T, str], bytes], what: str) -> None:
        self.parts.append(_BE_I32.pack(len(items)))
        for i, item in enumerate(items):
            self.sized(encode(item, f"{what}[{i}]"))


def _write_message(
    out: _Out, msg: CommitMessage, layout: RowLayout, where: str, table_buckets: int | None = None
) -> None:
    v = layout.version
    if not isinstance(msg.partition, bytes) or serialized_row_problem(msg.partition):
        problem = serialized_row_problem(msg.partition) if isinstance(msg.partition, bytes) else "not bytes"
        raise ValidationError(f"{where}.partition: {problem}", field="partition")
    out.sized(msg.partition)
    out.i32(msg.bucket, f"{where}.bucket")
    if v >= 7:
        out.flag(msg.total_buckets is not None)
        if msg.total_buckets is not None:
            out.i32(msg.total_buckets, f"{where}.total_buckets")
    elif msg.total_buckets is not None and msg.total_buckets != table_buckets:
        # Before version 7 a reader takes the table's bucket count: dropping total_buckets is exact
        # only when it is that count (Java's own writers then omit it too).
        raise ValidationError(
            f"{where}: CommitMessage version {v} cannot carry CommitMessage.total_buckets "
            f"({msg.total_buckets}), and it is not the table's bucket count ({table_buckets}) "
            "that a reader of this version assumes",
            field="total_buckets",
            version=v,
        )
    if v < 14 and msg.check_from_snapshot is not None:
        raise _cannot_carry(where, v, "check_from_snapshot")

    def files(items: Sequence[DataFileMeta], what: str) -> None:
        out.rows(items, lambda m, w: encode_data_file(m, layout, w), f"{where}.{what}")

    def indexes(items: Sequence[IndexFileMeta], what: str) -> None:
        out.rows(items, lambda m, w: encode_index_file(m, layout, w), f"{where}.{what}")

    d, c = msg.data_increment, msg.compact_increment
    if v >= 10:
        files(d.new_files, "data_increment.new_files")
        files(d.deleted_files, "data_increment.deleted_files")
        files(d.changelog_files, "data_increment.changelog_files")
        indexes(d.new_index_files, "data_increment.new_index_files")
        indexes(d.deleted_index_files, "data_increment.deleted_index_files")
        files(c.compact_before, "compact_increment.compact_before")
        files(c.compact_after, "compact_increment.compact_after")
        files(c.changelog_files, "compact_increment.changelog_files")
        indexes(c.new_index_files, "compact_increment.new_index_files")
        indexes(c.deleted_index_files, "compact_increment.deleted_index_files")
        if v >= 14:
            out.flag(msg.check_from_snapshot is not None)
            if msg.check_from_snapshot is not None:
                out.i64(msg.check_from_snapshot, f"{where}.check_from_snapshot")
        return
    files(d.new_files, "data_increment.new_files")
    files(d.deleted_files, "data_increment.deleted_files")
    files(d.changelog_files, "data_increment.changelog_files")
    files(c.compact_before, "compact_increment.compact_before")
    files(c.compact_after, "compact_increment.compact_after")
    files(c.changelog_files, "compact_increment.changelog_files")
    # One index increment: a reader puts it into the CompactIncrement iff that has data files.
    compact_has_files = bool(c.compact_before or c.compact_after or c.changelog_files)
    holder, owner = (c, "compact_increment") if compact_has_files else (d, "data_increment")
    stray, stray_name = (d, "data_increment") if compact_has_files else (c, "compact_increment")
    if stray.new_index_files or stray.deleted_index_files:
        raise ValidationError(
            f"{where}: CommitMessage version {v} has a single index increment, which readers attach to the "
            f"{owner}; index files in the {stray_name} cannot be written",
            field=f"{stray_name}.new_index_files",
            version=v,
        )
    indexes(holder.new_index_files, f"{owner}.new_index_files")
    indexes(holder.deleted_index_files, f"{owner}.deleted_index_files")


def _cannot_carry(where: str, version: int, attr: str) -> ValidationError:
    return ValidationError(
        f"{where}: CommitMessage version {version} cannot carry CommitMessage.{attr}",
        field=attr,
        version=version,
    )


def serialize_commit_message(
    msg: CommitMessage, version: int = CURRENT_VERSION, *, table_buckets: int | None = None
) -> bytes:
    """Java ``CommitMessageSerializer.serialize`` bytes of ``msg`` at ``version`` (stored beside the bytes).
    ``table_buckets``: the table's bucket count, which lets a version before 7 (Java <= 1.0 reads
    version 3) drop a ``total_buckets`` equal to it.

    Raises ValidationError for an unsupported version or a field ``version`` cannot carry.
    """
    layout = _layout(version, SUPPORTED_WRITE_VERSIONS)
    out = _Out()
    _write_message(out, msg, layout, "message", table_buckets)
    return b"".join(out.parts)


def serialize_commit_messages(
    msgs: Sequence[CommitMessage], version: int = CURRENT_VERSION, *, table_buckets: int | None = None
) -> bytes:
    """Java ``CommitMessageSerializer.serializeList`` bytes: ``int count`` + the messages back to back
    (``table_buckets`` as in :func:`serialize_commit_message`)."""
    layout = _layout(version, SUPPORTED_WRITE_VERSIONS)
    out = _Out()
    out.i32(len(msgs), "count")
    for i, msg in enumerate(msgs):
        _write_message(out, msg, layout, f"message[{i}]", table_buckets)
    return b"".join(out.parts)


# ---- reading ------------------------------------------------------------------------------------------


class _In:
    """Big-endian framing reader that checks every length against the bytes left before using it."""

    def __init__(self, data: bytes, path: str | None) -> None:
        self.data = data
        self.pos = 0
        self.path = path

    def corrupt(self, message: str) -> CorruptMetadataError:
        return CorruptMetadataError(
            f"corrupt CommitMessage bytes at offset {self.pos}: {message}", path=self.path
        )

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise self.corrupt(f"{what} needs {n} bytes, {len(self.data) - self.pos} left")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i32(self, what: str) -> int:
        value: int = _BE_I32.unpack(self.take(4, what))[0]
        return value

    def i64(self, what: str) -> int:
        value: int = _BE_I64.unpack(self.take(8, what))[0]
        return value

    def flag(self, what: str) -> bool:
        b = self.take(1, what)[0]
        if b > 1:
            raise self.corrupt(f"{what} is the byte {b}, not a boolean (0 or 1)")
        return b == 1

    def sized(self, what: str) -> bytes:
        n = self.i32(f"{what} size")
        if n < 0:
            raise self.corrupt(f"{what} has negative size {n}")
        return self.take(n, what)

    def rows(self, decode: Callable[[bytes, str], _T], what: str) -> tuple[_T, ...]:
        count = self.i32(f"{what} count")
        # Each element takes at least its 4-byte size: a count beyond that is corrupt, not a reason to loop.
        if count < 0 or count > (len(self.data) - self.pos) // 4:
            raise self.corrupt(
                f"{what} count {count} is impossible with {len(self.data) - self.pos} bytes left"
            )
        return tuple(decode(self.sized(f"{what}[{i}]"), f"{what}[{i}]") for i in range(count))

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise self.corrupt(f"{len(self.data) - self.pos} trailing bytes after the last message")


def _read_message(inp: _In, layout: RowLayout, where: str) -> CommitMessage:
    v, path = layout.version, inp.path
    partition = inp.sized(f"{where}.partition")
    problem = serialized_row_problem(partition)
    if problem:
        raise inp.corrupt(f"{where}.partition: {problem}")
    bucket = inp.i32(f"{where}.bucket")
    total_buckets = None
    if v >= 7 and inp.flag(f"{where}.hasTotalBuckets"):
        total_buckets = inp.i32(f"{where}.total_buckets")

    def files(what: str) -> tuple[DataFileMeta, ...]:
        return inp.rows(lambda row, w: decode_data_file(row, layout, w, path), f"{where}.{what}")

    def indexes(what: str) -> tuple[IndexFileMeta, ...]:
        return inp.rows(lambda row, w: decode_index_file(row, layout, w, path), f"{where}.{what}")

    if v >= 10:
        data = DataIncrement(
            files("data_increment.new_files"),
            files("data_increment.deleted_files"),
            files("data_increment.changelog_files"),
            indexes("data_increment.new_index_files"),
            indexes("data_increment.deleted_index_files"),
        )
        compact = CompactIncrement(
            files("compact_increment.compact_before"),
            files("compact_increment.compact_after"),
            files("compact_increment.changelog_files"),
            indexes("compact_increment.new_index_files"),
            indexes("compact_increment.deleted_index_files"),
        )
        check = None
        if v >= 14 and inp.flag(f"{where}.hasCheckFromSnapshot"):
            check = inp.i64(f"{where}.check_from_snapshot")
        return CommitMessage(partition, bucket, total_buckets, data, compact, check)
    new, deleted, changelog = (
        files(f"data_increment.{n}") for n in ("new_files", "deleted_files", "changelog_files")
    )
    before, after, compact_changelog = (
        files(f"compact_increment.{n}") for n in ("compact_before", "compact_after", "changelog_files")
    )
    new_index = indexes("index_increment.new_index_files")
    deleted_index = indexes("index_increment.deleted_index_files")
    # CommitMessageSerializer.deserialize (version < 10): the index increment joins the CompactIncrement
    # when that is not empty, else the DataIncrement.
    if before or after or compact_changelog:
        data = DataIncrement(new, deleted, changelog)
        compact = CompactIncrement(before, after, compact_changelog, new_index, deleted_index)
    else:
        data = DataIncrement(new, deleted, changelog, new_index, deleted_index)
        compact = CompactIncrement()
    return CommitMessage(partition, bucket, total_buckets, data, compact)


def deserialize_commit_message(data: bytes, version: int, *, path: str | None = None) -> CommitMessage:
    """Decode one message written at ``version``; the bytes must hold exactly one message.

    Raises ValidationError for an unsupported version, CorruptMetadataError (naming ``path``) for bad bytes.
    """
    layout = _layout(version, SUPPORTED_READ_VERSIONS)
    inp = _In(bytes(data), path)
    msg = _read_message(inp, layout, "message")
    inp.finish()
    return msg


def deserialize_commit_messages(data: bytes, version: int, *, path: str | None = None) -> list[CommitMessage]:
    """Decode a batch (``int count`` + messages) written at ``version``, e.g. a ``commit_messages-NN`` file.

    Raises ValidationError for an unsupported version, CorruptMetadataError (naming ``path``) for bad bytes.
    """
    layout = _layout(version, SUPPORTED_READ_VERSIONS)
    inp = _In(bytes(data), path)
    count = inp.i32("message count")
    # The smallest message (empty partition row, no files) takes 44 bytes at version 3; 4 is a safe floor.
    if count < 0 or count > (len(data) - inp.pos) // 4:
        raise inp.corrupt(f"message count {count} is impossible with {len(data) - inp.pos} bytes left")
    msgs = [_read_message(inp, layout, f"message[{i}]") for i in range(count)]
    inp.finish()
    return msgs
