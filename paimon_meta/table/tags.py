"""Tags of one table: ``tag/tag-<name>`` files, each the JSON of the snapshot it keeps (Java's
``TagManager``). A tag made with a retention also carries Java's ``tagCreateTime`` (a local date-time
as Jackson writes ``LocalDateTime``: ``[year, month, day, hour, minute(, second(, nano))]``) and
``tagTimeRetained`` (a ``Duration`` as decimal seconds, ``86400.000000000``); snapshot expiration deletes
it once ``now > tagCreateTime + tagTimeRetained`` (Java's ``TagTimeExpire``). Tag files are created only
if absent and never rewritten; expiration keeps tagged snapshots' files (``ops.references.tag_snapshots``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from paimon_meta.errors import (
    CorruptMetadataError,
    FileAlreadyExistsError,
    FileNotFound,
    TagAlreadyExistsError,
    TagNotFoundError,
    ValidationError,
)
from paimon_meta.io.base import FileIO
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.json import snapshot_from_json, snapshot_to_json
from paimon_meta.table.paths import join_path

TAG_DIR = "tag"
TAG_PREFIX = "tag-"
# Java refuses blank and purely numeric names (a number means a snapshot id in time travel). Single
# inner spaces are Java's too: its automatic hourly tags are named ``2023-07-18 11``.
_TAG_NAME = re.compile(r"[A-Za-z0-9_.\-]+(?: [A-Za-z0-9_.\-]+)*")


def validate_tag_name(name: str) -> str:
    if (
        not isinstance(name, str)
        or len(name) > 255
        or not _TAG_NAME.fullmatch(name)
        or name.isdigit()
        or name in {".", ".."}
    ):
        raise ValidationError(
            f"invalid tag name {name!r}: 1-255 of [A-Za-z0-9_.-] with single inner spaces, not only digits",
            tag=str(name),
        )
    return name


#: Members a tag file carries beyond its snapshot (Java's ``Tag``; ``trimToSnapshot`` drops them).
TAG_CREATE_TIME = "tagCreateTime"
TAG_TIME_RETAINED = "tagTimeRetained"


@dataclass(frozen=True, slots=True)
class Tag:
    """A tag: the snapshot it keeps (without the tag's own members), when it was made (``tagCreateTime``,
    else the file's modification time) and how long it is kept (None: until deleted)."""

    name: str
    snapshot: Snapshot
    created_ms: int | None
    time_retained_ms: int | None = None

    def expired(self, now_ms: int) -> bool:
        """Whether its retention has passed (Java's ``TagTimeExpire``); a tag without one never expires."""
        if self.time_retained_ms is None or self.created_ms is None:
            return False
        return now_ms > self.created_ms + self.time_retained_ms


def local_date_time(epoch_ms: int) -> list[int]:
    """``epoch_ms`` as Jackson writes a ``LocalDateTime`` of this machine's zone (Java's
    ``LocalDateTime.now()``): seconds and nanoseconds only when not zero."""
    moment = datetime.fromtimestamp(epoch_ms / 1000)
    parts = [moment.year, moment.month, moment.day, moment.hour, moment.minute]
    nanos = (epoch_ms % 1000) * 1_000_000
    if moment.second or nanos:
        parts.append(moment.second)
        if nanos:
            parts.append(nanos)
    return parts


def _epoch_ms(value: Any, path: str) -> int:
    if not isinstance(value, Sequence) or isinstance(value, str) or not 5 <= len(value) <= 7:
        raise CorruptMetadataError(f"{TAG_CREATE_TIME} is not a local date-time array: {value!r}", path=path)
    try:
        y, mo, d, h, mi, *rest = (int(v) for v in value)
        second = rest[0] if rest else 0
        nanos = rest[1] if len(rest) > 1 else 0
        return int(datetime(y, mo, d, h, mi, second, nanos // 1000).timestamp() * 1000)
    except (TypeError, ValueError) as e:
        raise CorruptMetadataError(f"{TAG_CREATE_TIME} {value!r}: {e}", path=path) from e


def _retained_ms(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CorruptMetadataError(f"{TAG_TIME_RETAINED} is not a number of seconds: {value!r}", path=path)
    try:
        return round(float(value) * 1000)
    except ValueError as e:
        raise CorruptMetadataError(f"{TAG_TIME_RETAINED} {value!r}: {e}", path=path) from e


def java_duration_text(ms: int) -> str:
    """``ms`` as Java's ``Duration.toString`` writes it (``PT24H``, ``PT1H30M``, ``PT0.5S``)."""
    if ms == 0:
        return "PT0S"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    out = "PT" + (f"{hours}H" if hours else "") + (f"{minutes}M" if minutes else "")
    if seconds or millis:
        out += f"{seconds}.{millis:03d}".rstrip("0").rstrip(".") + "S"
    return out


class TagManager:
    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.directory = join_path(table_path.rstrip("/"), TAG_DIR)

    def path(self, name: str) -> str:
        return join_path(self.directory, TAG_PREFIX + validate_tag_name(name))

    def create(
        self, name: str, snapshot: Snapshot, *, time_retained_ms: int | None = None, now_ms: int | None = None
    ) -> None:
        """``TagAlreadyExistsError`` if the name is taken (whatever snapshot it keeps). With
        ``time_retained_ms`` the tag records when it was made (``now_ms``, default now) and expires that
        long after."""
        text = snapshot_to_json(snapshot)
        if time_retained_ms is not None:
            if time_retained_ms <= 0:
                raise ValidationError(
                    f"a tag's time retained must be positive, got {time_retained_ms} ms", tag=name
                )
            created = int(time.time() * 1000) if now_ms is None else now_ms
            stamp = ", ".join(str(p) for p in local_date_time(created))
            seconds, millis = divmod(time_retained_ms, 1000)
            # appended as Jackson's pretty printer writes them (a Duration is a decimal, not a float)
            text = (
                text[: text.rindex("}")].rstrip()
                + f',\n  "{TAG_CREATE_TIME}" : [ {stamp} ],\n  "{TAG_TIME_RETAINED}" : '
                + f"{seconds}.{millis * 1_000_000:09d}\n}}"
            )
        try:
            self.file_io.create_if_absent(self.path(name), text.encode("utf-8"))
        except FileAlreadyExistsError:
            raise TagAlreadyExistsError(f"tag {name!r} already exists", tag=name) from None

    def get(self, name: str) -> Tag:
        path = self.path(name)
        try:
            data = self.file_io.read(path)
        except FileNotFound:
            raise TagNotFoundError(f"tag {name!r} does not exist", tag=name) from None
        snapshot = snapshot_from_json(data, path=path)
        extra = snapshot.unknown
        retained = (
            None if extra.get(TAG_TIME_RETAINED) is None else _retained_ms(extra[TAG_TIME_RETAINED], path)
        )
        if extra.get(TAG_CREATE_TIME) is not None:
            created: int | None = _epoch_ms(extra[TAG_CREATE_TIME], path)
        else:
            suffix = "/" + TAG_PREFIX + name
            created = next(
                (s.mtime_ms for s in self.file_io.list(self.directory) if s.path.endswith(suffix)), None
            )
        if TAG_CREATE_TIME in extra or TAG_TIME_RETAINED in extra:
            kept = {k: v for k, v in extra.items() if k not in (TAG_CREATE_TIME, TAG_TIME_RETAINED)}
            snapshot = replace(snapshot, unknown=kept)
        return Tag(name, snapshot, created, retained)

    def names(self) -> list[str]:
        out = []
        for status in self.file_io.list(self.directory):
            base = status.path.rstrip("/").rsplit("/", 1)[-1]
            if base.startswith(TAG_PREFIX):
                out.append(base[len(TAG_PREFIX) :])
        return sorted(out)

    def delete(self, name: str) -> Snapshot:
        """Delete the tag file (the files of its snapshot become orphans if nothing else keeps them);
        returns the snapshot it kept. ``TagNotFoundError`` if absent."""
        tag = self.get(name)
        self.file_io.delete(self.path(name))
        return tag.snapshot
