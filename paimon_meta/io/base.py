"""The FileIO interface: a handful of whole-object operations, chosen by URI scheme.

File formats live outside FileIO (pyiceberg's lesson). Paths are strings: a local absolute path, a
``file://`` URI or an ``s3://bucket/key`` URI; a FileIO accepts the forms of its own scheme only.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FileStatus:
    path: str
    size: int
    mtime_ms: int
    etag: str | None = None  # S3 ETag / a local (inode, mtime_ns) token: lets tests prove nothing was replaced


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the store guarantees. ``atomic_create``: ``create_if_absent`` is a real compare-and-set
    (local: link/O_EXCL; S3: ``PUT If-None-Match: *`` answered by 412). Where False, callers must
    serialise creators by other means (the metastore lock)."""

    atomic_create: bool
    atomic_rename: bool


class FileIO(abc.ABC):
    """Whole-object storage operations. Errors: ``FileNotFound``, ``FileAlreadyExistsError``, ``FileIOError``."""

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """The whole object. ``FileNotFound`` if absent."""

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Write (or replace) the whole object. Readers never see a partial object."""

    @abc.abstractmethod
    def create_if_absent(self, path: str, data: bytes) -> None:
        """Create the object only if absent, atomically where ``capabilities.atomic_create``.
        Raises ``FileAlreadyExistsError`` when it exists; on success the object is durable."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool: ...

    @abc.abstractmethod
    def status(self, path: str) -> FileStatus:
        """``FileNotFound`` if absent."""

    @abc.abstractmethod
    def list(self, directory: str) -> list[FileStatus]:
        """Direct children that are files (not recursive); an absent directory lists as empty."""

    @abc.abstractmethod
    def list_recursive(self, directory: str) -> list[FileStatus]:
        """Every file below ``directory``."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Delete the object; deleting an absent object is not an error."""

    def join(self, base: str, *parts: str) -> str:
        out = base.rstrip("/")
        for p in parts:
            out = out + "/" + p.strip("/")
        return out
