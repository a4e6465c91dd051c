"""The ``Catalog`` protocol: the operations every catalog offers (the part of Java's
``org.apache.paimon.catalog.Catalog`` that both of ours implement).

Two implementations, one module each:

* :class:`paimon_meta.catalog.metastore.MetastoreCatalog` (``paimon_meta.connect``): databases and tables
  registered in the Postgres metastore; commits go through its lock and event log. It also offers what
  needs the database itself (``get_database``, ``drop_database``, ``rename_table``, ``alter_table``, ...).
* :class:`paimon_meta.catalog.rest.RestCatalog` (``paimon_meta.connect_service``): the same over the
  commit service's REST protocol, with a bearer token and no database credentials.

``paimon_meta.open_table`` (:mod:`paimon_meta.catalog.storage`) is not a catalog: it opens one table by
path, with commits guarded by storage alone, and has no databases to list.

Code that takes either catalog annotates it as ``Catalog``; mypy checks that both implementations
satisfy it (tests/catalog/test_protocol.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa

    from paimon_meta.table.table import FileStoreTable


@runtime_checkable
class Catalog(Protocol):
    """Databases and the tables in them, addressed as ``"<database>.<table>"``. Tables it returns commit
    through the catalog. Close it (or use ``with``) when done.

    Errors are those of :mod:`paimon_meta.errors`: ``DatabaseNotFoundError``/``TableNotFoundError``,
    ``DatabaseAlreadyExistsError``/``TableAlreadyExistsError``, ``ValidationError`` for a bad name or
    schema, ``MetastoreUnavailableError`` when the catalog's backend cannot be reached.
    """

    def create_database(self, name: str, ignore_if_exists: bool = True) -> None:
        """Create database ``name``; one that already exists is kept (or, without ``ignore_if_exists``,
        is a ``DatabaseAlreadyExistsError``). ``ignore_if_exists`` is positional too, as pypaimon's."""
        ...

    def list_databases(self) -> list[str]:
        """The names of all databases."""
        ...

    def list_tables(self, database: str) -> list[str]:
        """The names of the tables in ``database``."""
        ...

    def create_table(
        self,
        identifier: str,
        schema: pa.Schema,
        *,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
        ignore_if_exists: bool = False,
    ) -> FileStoreTable:
        """Create table ``identifier`` (``"db.table"``) with the columns of ``schema`` and return it. Its
        database is created if missing. Options the readers and writers do not implement are refused
        before anything is written. A table that already exists is returned with
        ``ignore_if_exists``, else it is a ``TableAlreadyExistsError``."""
        ...

    def get_table(self, identifier: str) -> FileStoreTable:
        """Table ``identifier``, read from where it lives, committing through this catalog."""
        ...

    def drop_table(self, identifier: str) -> None:
        """Remove table ``identifier`` from the catalog and delete its files (Java's behaviour)."""
        ...

    def close(self) -> None:
        """Release what the catalog holds open (connections, storage clients)."""
        ...

    def __enter__(self) -> Catalog:
        """The catalog itself, closed at the end of the ``with`` block."""
        ...

    def __exit__(self, *exc: object) -> None:
        """Close the catalog."""
        ...
