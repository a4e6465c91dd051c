"""What belongs to a table: plain file names, and the roots every path of the table must lie under.

A CommitMessage, a REST snapshot's manifests and a table's options all name files. Whoever holds a
``write`` grant on one table must not be able to make it name (and so read through it, or delete by
expiring it) a file of another table or one outside the warehouse. Two rules close that:

* names a commit carries (data, changelog, extra, index and deletion-vector files, manifests) are plain
  names: one path component, no ``..``, separator, scheme colon, NUL or other control character
  (:func:`name_problem`); the table's own directories give them their place;
* a path (a data file's ``external_path``, an index file's, a file to delete or read) must lie under the
  table's root or under one of the table's configured external roots (``data-file.external-paths``),
  compared segment by segment after normalising the URI, with any ``.``/``..`` segment refused outright
  (object stores do not resolve them, local file systems do: the same string names different objects)
  (:class:`TableRoots`).

Which external roots a table may configure at all is the catalog's decision (an allowlist of the
server's: ``paimon_meta.catalog.metastore``); this module only answers "is this path inside".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from paimon_meta.errors import PathOutsideTableError, ValidationError
from paimon_meta.io.base import location_key

# BIGINT, Java's long: every count, size, sequence number and id a commit carries must fit one.
MAX_BIGINT = 2**63 - 1
MIN_BIGINT = -(2**63)
# S3's key limit is 1024 bytes; no engine's generated names come near it.
MAX_NAME_BYTES = 1024

EXTERNAL_PATHS = "data-file.external-paths"

# A plain name in one C-level match (the common case: a generated name): no separator, colon or control
# character, at most 256 characters (so at most 1024 UTF-8 bytes).
_PLAIN_NAME = re.compile(r"[^/\\:\x00-\x1f\x7f]{1,256}")


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a plain file name (one path component a table directory may hold), or None."""
    if isinstance(name, str) and _PLAIN_NAME.fullmatch(name) is not None and name not in (".", ".."):
        return None
    if not isinstance(name, str):
        return f"not a string: {type(name).__name__}"
    if not name:
        return "empty"
    if name in (".", ".."):
        return f"{name!r} is a directory reference"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"longer than {MAX_NAME_BYTES} bytes"
    for c in name:
        if c in "/\\":
            return "contains a path separator"
        if ord(c) < 0x20 or ord(c) == 0x7F:
            return f"contains the control character U+{ord(c):04X}"
        if c == ":":
            # Hadoop's Path (Java readers) parses "x:y" as a URI with scheme x: not a name any more.
            return "contains ':'"
    return None


def _canonical(path: str) -> tuple[str, tuple[str, ...]] | None:
    """(store, path segments) of ``path``'s location key (:func:`paimon_meta.io.base.location_key`), or
    None when it cannot be inside anything: not absolute, a control character, or a ``.``/``..``
    segment (refused here, not collapsed: a file path names one object, and on an object store
    ``a/./b`` is another key than ``a/b``)."""
    if not isinstance(path, str) or not path or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return None
    try:
        raw = unquote(path, errors="strict") if "%" in path else path
        if any(s in (".", "..") for s in raw.split("/")):
            return None
        key = location_key(path)
    except (ValidationError, UnicodeDecodeError):
        return None
    if key.startswith("/"):
        store, rest = "file", key
    else:
        scheme, _, rest = key.partition("://")
        authority, _, rest = rest.partition("/")
        store = f"{scheme}://{authority}"
    return store, tuple(s for s in rest.split("/") if s)


def is_under(path: str, root: str) -> bool:
    """``path`` is ``root`` itself or below it (segment-wise, after normalising both)."""
    p, r = _canonical(path), _canonical(root)
    if p is None or r is None or p[0] != r[0]:
        return False
    return p[1][: len(r[1])] == r[1]


def parse_external_roots(value: str | None) -> tuple[str, ...]:
    """The roots of ``data-file.external-paths`` (comma-separated URIs), blanks dropped."""
    if not value:
        return ()
    return tuple(p.strip() for p in value.split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class TableRoots:
    """A table's root and its configured external roots: every file of the table lies under one."""

    root: str
    external: tuple[str, ...] = ()

    @staticmethod
    def of(table_path: str, options: Mapping[str, str | None] | None = None) -> TableRoots:
        """The roots of the table at ``table_path`` with ``options`` (its schema's options)."""
        external = parse_external_roots((options or {}).get(EXTERNAL_PATHS))
        return TableRoots(table_path, external)

    def contains(self, path: str) -> bool:
        """``path`` lies under the root or an external root."""
        return is_under(path, self.root) or self.in_external(path)

    def in_external(self, path: str) -> bool:
        """``path`` lies under one of the external roots."""
        return any(is_under(path, r) for r in self.external)

    def check(self, path: str, *, field: str, **where: object) -> None:
        """``PathOutsideTableError`` unless ``path`` lies under the root or an external root."""
        if not self.contains(path):
            shown = repr(path)[:300]
            raise PathOutsideTableError(
                f"{field} {shown} lies outside table {self.root} and its external roots "
                f"{list(self.external)}",
                path=path[:1000] if isinstance(path, str) else None,
                table=self.root,
                field=field,
                **where,
            )
