"""Tags of one table: ``tag/tag-<name>`` files, each the JSON of the snapshot it keeps (Java's
``TagManager``; Java's optional ``tagCreateTime``/``tagTimeRetained`` members are not written, which
Java reads as a tag without retention). Tag files are created only if absent and never rewritten;
expiration keeps tagged snapshots' files (``ops.references.tag_snapshots``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from paimon_meta.errors import (
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
# Java refuses blank and purely numeric names (a number means a snapshot id in time travel).
_TAG_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,255}")


def validate_tag_name(name: str) -> str:
    if not isinstance(name, str) or not _TAG_NAME.fullmatch(name) or name.isdigit() or name in {".", ".."}:
        raise ValidationError(
            f"invalid tag name {name!r}: 1-255 of [A-Za-z0-9_.-], not only digits", tag=str(name)
        )
    return name


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    snapshot: Snapshot
    created_ms: int | None


class TagManager:
    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.directory = join_path(table_path.rstrip("/"), TAG_DIR)

    def path(self, name: str) -> str:
        return join_path(self.directory, TAG_PREFIX + validate_tag_name(name))

    def create(self, name: str, snapshot: Snapshot) -> None:
        """``TagAlreadyExistsError`` if the name is taken (whatever snapshot it keeps)."""
        try:
            self.file_io.create_if_absent(self.path(name), snapshot_to_json(snapshot).encode("utf-8"))
        except FileAlreadyExistsError:
            raise TagAlreadyExistsError(f"tag {name!r} already exists", tag=name) from None

    def get(self, name: str) -> Tag:
        path = self.path(name)
        try:
            data = self.file_io.read(path)
        except FileNotFound:
            raise TagNotFoundError(f"tag {name!r} does not exist", tag=name) from None
        suffix = "/" + TAG_PREFIX + name
        created = next(
            (s.mtime_ms for s in self.file_io.list(self.directory) if s.path.endswith(suffix)), None
        )
        return Tag(name, snapshot_from_json(data, path=path), created)

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
