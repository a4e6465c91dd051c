"""The FileIO interface: a handful of whole-object operations, chosen by URI scheme.

File formats live outside FileIO (pyiceberg's lesson). Paths are strings: a local absolute path, a
``file://`` URI or an ``s3://bucket/key`` URI; a FileIO accepts the forms of its own scheme only and
returns paths in the form it was given (a listing of ``file:///w`` yields ``file:///w/...``).

Deferred durability: ``write``/``create_if_absent`` with ``durable=False`` may return before the object
would survive a crash (local disk: no fsync), so a commit waits for one batch of fsyncs instead of one
per file. Such an object becomes durable by :meth:`FileIO.sync` or by being named in ``sync_first`` of
the durable ``create_if_absent`` of an object that references it (the snapshot that names a commit's
manifests). Stores whose every write is durable (S3) ignore the flag, and ``sync`` does nothing there.
Wrappers pass the flag, ``sync_first`` and ``sync`` through.
"""

from __future__ import annotations

import abc
import builtins
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from paimon_meta.errors import FileAlreadyExistsError, FileIOError, LocationError, ValidationError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Schemes that name the same object store (Hadoop's s3a/s3n clients read s3 paths).
_SAME_STORE = {"s3a": "s3", "s3n": "s3"}


@dataclass(frozen=True, slots=True)
class FileStatus:
    """One file (object): its path in the caller's form, size in bytes, modification time in epoch ms."""

    path: str
    size: int
    mtime_ms: int
    etag: str | None = None  # S3 ETag / local "inode-mtime_ns": lets tests prove nothing was replaced


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the store guarantees. ``atomic_create``: ``create_if_absent`` is a real compare-and-set
    (local: link/O_EXCL; S3: ``PUT If-None-Match: *`` answered by 412). Where False, callers must
    serialise creators by other means (the metastore lock)."""

    atomic_create: bool
    atomic_rename: bool


@dataclass(frozen=True, slots=True)
class CreatedAll:
    """What :meth:`FileIO.create_all_if_absent` did: ``entries[:created]`` exist with our content and are
    durable; ``entries[created:created + doubtful]`` may or may not exist (never delete what they
    reference: resolve by reading them back); the rest were not created. ``error``: what stopped it
    (``FileAlreadyExistsError``: ``entries[created]`` exists, someone else's)."""

    created: int
    error: Exception | None = None
    doubtful: int = 0


class FileIO(abc.ABC):
    """Whole-object storage operations. Errors: ``FileNotFound``, ``FileAlreadyExistsError``, ``FileIOError``.

    Only files (objects) exist: directories are implied by the paths below them, as on S3, so
    ``exists``/``status`` of a directory report it absent and an absent directory lists as empty.
    Implementations are safe to share between threads.
    """

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    def read(self, path: str) -> bytes:
        """The whole object. ``FileNotFound`` if absent."""

    @abc.abstractmethod
    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Write (or replace) the whole object. Readers never see a partial object and on success it is
        durable, unless ``durable=False`` (only for hints, which readers verify): then a crash may leave
        the old content, the new one, or an empty object until :meth:`sync` covers it."""

    @abc.abstractmethod
    def create_if_absent(
        self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
    ) -> None:
        """Create the object only if absent, atomically where ``capabilities.atomic_create``.
        Raises ``FileAlreadyExistsError`` when it exists; on success the object is durable.
        A ``FileIOError`` carrying ``fields["outcome_unknown"] is True`` means the object may or may
        not have been created by this call: resolve by reading it back, never by deleting it.

        ``sync_first``: objects written earlier with ``durable=False`` that this one references. They
        are made durable before this object's name appears, so a crash never leaves this object
        durable while one of them is lost (local disk: their fsyncs run concurrently with this
        object's own; every call does them again, a failure may have been theirs).

        ``durable=False`` (without ``sync_first``): still one winner, but nothing is made durable
        until :meth:`sync` (or a later ``sync_first``) covers the object, and a concurrent reader may
        see it partially written. Only for objects nothing reads before a durable object references
        them (manifests before their snapshot)."""

    def create_all_if_absent(
        self, entries: Sequence[tuple[str, bytes]], *, sync_first: Sequence[str] = ()
    ) -> CreatedAll:
        """Create each ``(path, data)`` only if absent, in order, as :meth:`create_if_absent` does, stopping
        at the first that fails; ``sync_first`` is made durable before the first name appears. A store
        that can make several objects durable together overrides this (local disk: one round of fsyncs
        for every file and one for the directory, instead of two rounds per file).

        Raises only when nothing was created (every object's outcome is known: absent). Otherwise
        returns what happened (:class:`CreatedAll`)."""
        for i, (path, data) in enumerate(entries):
            try:
                self.create_if_absent(path, data, sync_first=sync_first if i == 0 else ())
            except FileAlreadyExistsError as e:
                return CreatedAll(i, e, doubtful=0)
            except FileIOError as e:
                return CreatedAll(i, e, doubtful=1)
        return CreatedAll(len(entries))

    @abc.abstractmethod
    def sync(self, paths: Sequence[str]) -> None:
        """Make objects written earlier with ``durable=False`` durable (their contents and names).
        Nothing to do where every write is durable. ``FileIOError`` names the first path that failed."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether a file (object) is at ``path``."""

    @abc.abstractmethod
    def status(self, path: str) -> FileStatus:
        """``FileNotFound`` if absent."""

    @abc.abstractmethod
    def list(self, directory: str) -> list[FileStatus]:
        """Direct children that are files (not recursive), sorted by path; an absent directory lists
        as empty."""

    @abc.abstractmethod
    def list_recursive(self, directory: str) -> builtins.list[FileStatus]:  # `list` is shadowed here
        """Every file below ``directory``, sorted by path."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Delete the object; deleting an absent object is not an error."""

    def prune_directories(self, directory: str) -> None:  # noqa: B027 - no-op where directories are implied
        """Remove ``directory`` and every directory below it that holds no file, deepest first. Where
        directories exist on their own (a local disk) they outlive their files, and Java reads some
        directories as things (``BranchManager.branches()`` lists ``branch/branch-*`` directories); on
        object stores a directory is only implied by its files, so there is nothing to do."""

    def join(self, base: str, *parts: str) -> str:
        """``base/part/...``; see :func:`join_uri`."""
        return join_uri(base, *parts)

    def close(self) -> None:  # noqa: B027 - optional hook, most stores hold nothing to release
        """Release connections; the FileIO must not be used afterwards."""


def scheme_of(uri: str) -> str:
    """The lower-cased URI scheme; ``file`` for a plain absolute path. ``ValidationError`` for a
    relative path (a warehouse location must not depend on the working directory)."""
    m = _SCHEME.match(uri)
    if m is not None:
        return m.group(1).lower()
    if not uri.startswith("/"):
        raise ValidationError(f"not an absolute path or URI: {uri!r}", uri=uri)
    return "file"


def resolve_location(location: str) -> str:
    """A location as a user types it, made absolute once: a URI or an absolute path as it is, a relative
    path against the working directory now (so nothing depends on the working directory later)."""
    if _SCHEME.match(location) is not None or location.startswith("/"):
        return location
    if not location.strip():
        raise ValidationError("a location must not be empty", uri=location)
    return os.path.abspath(location)


def join_uri(base: str, *parts: str) -> str:
    """Join path segments with single slashes, keeping the base's form (``s3://b/w`` + ``t`` ->
    ``s3://b/w/t``). Empty parts are skipped; a part may itself contain slashes."""
    out = base.rstrip("/")
    if not out or out.endswith(":"):
        out = base  # a root ("/", "file:///"): its slashes are the path itself
    for p in parts:
        p = p.strip("/")
        if p:
            out = out + p if out.endswith("/") else out + "/" + p
    return out


def normalise_uri(uri: str) -> str:
    """The one normal form of a location, used wherever a location is compared, stored or deleted under
    (issue 34: ``<warehouse>//db1.db/t1`` or ``S3://bucket/...`` must not name a second table's files):

    * the scheme lower-cased (the authority keeps its case: a legacy S3 bucket may have upper-case
      letters; :func:`location_key` compares it lower-cased); ``file:/p``, ``file://localhost/p``
      and ``file:///p`` all as ``file:///p``; a plain absolute path stays plain;
    * percent-encoding decoded once (``%2F`` is a separator, ``%252F`` the text ``%2F``), as readers that
      parse locations as URIs do;
    * empty and ``.`` segments dropped, no trailing separator;
    * a ``..`` segment (after decoding) refused: :class:`LocationError` naming it (object stores do not
      resolve it, local file systems do: one string would name two places); so is a control character.

    Idempotent: ``normalise_uri(normalise_uri(u)) == normalise_uri(u)`` whenever the normal form holds no
    ``%`` (a decoded ``%25`` is the one text decoded again differently)."""
    scheme = scheme_of(uri)
    m = _SCHEME.match(uri)
    rest = uri[m.end() :] if m is not None else uri
    if scheme == "file":
        if rest.startswith("//"):
            authority, _, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise ValidationError(f"file URI with a remote host is not supported: {uri!r}", uri=uri)
            rest = "/" + tail
        path = "/" + "/".join(_normal_segments(uri, rest))
        return f"file://{path}" if m is not None else path
    if not rest.startswith("//"):
        raise ValidationError(f"URI without an authority (bucket): {uri!r}", uri=uri)
    authority, _, tail = rest[2:].partition("/")
    authority = unquote(authority)
    if not authority or "/" in authority or _CONTROL.search(authority):
        raise ValidationError(f"URI without a valid authority (bucket): {uri!r}", uri=uri)
    key = "/".join(_normal_segments(uri, tail))
    return f"{scheme}://{authority}/{key}" if key else f"{scheme}://{authority}"


def location_key(uri: str) -> str:
    """The key two spellings of one place share: :func:`normalise_uri`, with ``file:///p`` as ``/p``,
    Hadoop's ``s3a``/``s3n`` as ``s3`` (the same bucket) and the authority lower-cased (DNS names are
    case-insensitive: refusing a legacy bucket's twin is the safe mistake). Compared segment-wise (a key
    is inside another when it equals it or starts with it plus ``/``); the registry stores it per table
    (``location_key``)."""
    normal = normalise_uri(uri)
    scheme = scheme_of(normal)
    if scheme == "file":
        return normal[len("file://") :] if normal.startswith("file://") else normal
    authority, _, path = normal[len(scheme) + 3 :].partition("/")
    key = f"{_SAME_STORE.get(scheme, scheme)}://{authority.lower()}"
    return f"{key}/{path}" if path else key


def key_ancestors(key: str) -> list[str]:
    """Every proper ancestor of a :func:`location_key` at a segment boundary, outermost first
    (``/a/b/c`` -> ``/``, ``/a``, ``/a/b``; ``s3://b/w/t`` -> ``s3://b``, ``s3://b/w``)."""
    if key.startswith("/"):
        prefix, segments = "", [s for s in key.split("/") if s]
        out = ["/"] if segments else []
    else:
        scheme, _, rest = key.partition("://")
        authority, _, path = rest.partition("/")
        prefix, segments = f"{scheme}://{authority}", [s for s in path.split("/") if s]
        out = [prefix] if segments else []
    out.extend(prefix + "/" + "/".join(segments[:i]) for i in range(1, len(segments)))
    return out


def keys_overlap(a: str, b: str) -> bool:
    """Two :func:`location_key` values name the same place or one lies inside the other."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _normal_segments(uri: str, path: str) -> list[str]:
    try:
        decoded = unquote(path, errors="strict") if "%" in path else path
    except UnicodeDecodeError:
        raise LocationError(
            f"location {uri!r} percent-encodes bytes that are not UTF-8", uri=uri, reason="encoding"
        ) from None
    if _CONTROL.search(decoded):
        raise LocationError(f"location {uri!r} holds a control character", uri=uri, reason="control")
    segments = [s for s in decoded.split("/") if s and s != "."]
    if ".." in segments:
        raise LocationError(
            f"location {uri!r} has a '..' segment (after decoding percent-encoding): refused, a location "
            "must name its place without '..'",
            uri=uri,
            reason="dot-dot",
        )
    return segments
