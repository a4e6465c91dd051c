"""The last check before a file a table's metadata names is opened or deleted: it must be the table's.

A manifest entry names a data file by ``file_name`` (placed in its bucket directory) or by
``external_path``; an index manifest names index and deletion-vector files the same way. The commit
path refuses messages naming anything else, but metadata written before that check, by a foreign writer,
or by a bug reaches the readers and the deleters anyway. So every read and every deletion of such a file
asks a :class:`PathGuard` first (defence in depth): the file must be a plain name in its directory (no
``..``, separator or control character) and its path must lie under the table's root or one of its
external roots. A read that fails the check raises :class:`~paimon_meta.errors.PathOutsideTableError`
naming the file; a deleter skips the file, logs it and reports it (``refused``), and carries on with the
rest of its work.

Which external roots: the table's ``data-file.external-paths`` as its current schema (with dynamic
options) says, widened (lazily, only when a path is not under those) by the roots every earlier schema
of the table configured: files written before an ALTER moved the external root are still the table's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from paimon_meta.errors import PathOutsideTableError
from paimon_meta.io.base import FileIO
from paimon_meta.table.containment import EXTERNAL_PATHS, TableRoots, name_problem, parse_external_roots

log = logging.getLogger(__name__)

#: How many refused paths a maintenance run's payload lists (the count is always complete).
REFUSED_SHOWN = 10


class PathGuard:
    """Answers "is this path one of the table's files" for reads and deletions (see the module doc)."""

    def __init__(self, roots: TableRoots, history: Callable[[], Iterable[str]] | None = None) -> None:
        self._roots = roots
        self._history = history
        # directories a plain, unescaped name was found inside the table in: any such name in them is
        # (one more path segment below a contained directory), so a split's files are not each
        # canonicalised again
        self._inside: set[str] = set()

    @property
    def roots(self) -> TableRoots:
        return self._roots

    def contains(self, path: str) -> bool:
        """``path`` lies under the table's root or one of its external roots (past ones included)."""
        if self._roots.contains(path):
            return True
        if self._history is None:
            return False
        # Only now read the earlier schemas: the common case (every path inside) costs no I/O.
        history, self._history = self._history, None
        extra = tuple(r for r in history() if r not in self._roots.external)
        if extra:
            self._roots = TableRoots(self._roots.root, (*self._roots.external, *extra))
        return self._roots.contains(path)

    def check(self, path: str, *, field: str, **where: object) -> str:
        """``path`` itself, or ``PathOutsideTableError`` naming it and ``field``."""
        if not self.contains(path):
            self._roots.check(path, field=field, **where)
        return path

    def file_path(
        self, directory: str, file_name: str, external_path: str | None, *, field: str, **where: object
    ) -> str:
        """Where a file a manifest names lives (its ``external_path``, else ``directory/file_name``),
        checked: the name is a plain name and the path lies inside the table."""
        problem = name_problem(file_name)
        if problem is not None:
            # a name with a separator or ".." would be resolved against the directory by the file
            # system, i.e. name a file of another directory (another table's)
            raise PathOutsideTableError(
                f"{field} {repr(file_name)[:300]} is not a plain file name ({problem}): it does not name "
                f"a file of table {self._roots.root}",
                path=str(file_name)[:1000],
                table=self._roots.root,
                field=field,
                **where,
            )
        if external_path:
            return self.check(external_path, field=f"{field} external_path", **where)
        directory = directory.rstrip("/")
        path = f"{directory}/{file_name}"
        if "%" in file_name:
            # an escape may decode to a separator or a ".." segment: checked on its own
            return self.check(path, field=field, **where)
        if directory not in self._inside:
            self.check(path, field=field, **where)
            self._inside.add(directory)
        return path

    def allowed(self, path: str, refused: list[str], *, what: str) -> bool:
        """For deleters: True if ``path`` may be deleted; else appends it to ``refused``, logs a warning
        and returns False (the caller skips it and goes on with the rest)."""
        if self.contains(path):
            return True
        self._refuse(path, refused, what=what, why="it lies outside the table and its external roots")
        return False

    def deletable(
        self, directory: str, file_name: str, external_path: str | None, refused: list[str], *, what: str
    ) -> str | None:
        """For deleters of files a manifest or message names: the checked path (:meth:`file_path`), or
        None after appending it to ``refused`` and logging a warning."""
        try:
            return self.file_path(directory, file_name, external_path, field=what)
        except PathOutsideTableError as e:
            path = external_path or f"{directory.rstrip('/')}/{file_name}"
            self._refuse(path, refused, what=what, why=e.message)
            return None

    def _refuse(self, path: str, refused: list[str], *, what: str, why: str) -> None:
        refused.append(path)
        log.warning(
            "%s: refused to delete %r of table %s (external roots %s): %s",
            what,
            path[:1000],
            self._roots.root,
            list(self._roots.external),
            why[:1000],
        )


class _Schema(Protocol):
    @property
    def options(self) -> Mapping[str, str]: ...


class _Schemas(Protocol):
    def list_ids(self) -> list[int]: ...

    def schema(self, schema_id: int) -> _Schema: ...


class _Table(Protocol):
    """What :func:`path_guard` needs of a ``FileStoreTable`` (not imported: it imports this module)."""

    @property
    def file_io(self) -> FileIO: ...

    @property
    def path(self) -> str: ...

    @property
    def branch_root(self) -> str: ...

    @property
    def schema(self) -> _Schema: ...

    @property
    def schema_manager(self) -> _Schemas: ...


def path_guard(table: _Table) -> PathGuard:
    """The guard of ``table``'s files: its root and external roots, past schemas' roots on demand."""

    def history() -> list[str]:
        from paimon_meta.table.snapshots import SchemaManager

        managers: list[_Schemas] = [table.schema_manager]
        if table.branch_root.rstrip("/") != table.path.rstrip("/"):
            # branches share the main branch's data directories, and files it wrote
            managers.append(SchemaManager(table.file_io, table.path))
        out: list[str] = []
        for manager in managers:
            for sid in manager.list_ids():
                out.extend(parse_external_roots(manager.schema(sid).options.get(EXTERNAL_PATHS)))
        return out

    return PathGuard(TableRoots.of(table.path, table.schema.options), history)


def writer_guard(file_io: FileIO, table_path: str, options: Mapping[str, str]) -> PathGuard:
    """The guard a writer of the main branch at ``table_path`` reads its existing files through (the
    first-row writer reads the bucket's files above level 0), with ``options`` of the schema it writes."""

    def history() -> list[str]:
        from paimon_meta.table.snapshots import SchemaManager

        manager = SchemaManager(file_io, table_path)
        out: list[str] = []
        for sid in manager.list_ids():
            out.extend(parse_external_roots(manager.schema(sid).options.get(EXTERNAL_PATHS)))
        return out

    return PathGuard(TableRoots.of(table_path, options), history)


def refused_payload(refused: list[str]) -> dict[str, object]:
    """What a maintenance run's ``finished`` payload says about the paths it refused to delete."""
    return {"refused_paths": len(refused), "refused_first": [p[:1000] for p in refused[:REFUSED_SHOWN]]}
