"""Small helpers every route uses: the process state, the catalog behind the request's prefix, and
identifiers validated as the library validates them."""

from __future__ import annotations

import anyio.to_thread
from fastapi import Request

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.service.state import ServiceState
from paimon_meta.service.tenancy.served import ServedCatalog
from paimon_meta.table.paths import validate_branch_name

#: How a client names a table's branch in a path (pypaimon's and Java's ``Identifier``: ``t$branch_b1``).
BRANCH_SUFFIX = "$branch_"


def state_of(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


def served_of(request: Request) -> ServedCatalog:
    """The catalog the request's ``{prefix}`` names (the default catalog for a path without one; a
    console page: the catalog its route put in the request's state, service.console), kept in the
    request's state: every check and call of one request uses the same catalog. May read the
    metastore (a catalog not served yet, or whose cached row is older than the refresh): call it on a
    worker thread, or :func:`resolve_served` on the event loop.

    Raises:
        CatalogNotFoundError: no catalog of that name (404 ``CATALOG``).
    """
    served: ServedCatalog | None = getattr(request.state, "served", None)
    if served is not None:
        return served
    state = state_of(request)
    prefix = request.path_params.get("prefix")
    served = state.catalogs.default if prefix is None else state.catalogs.get(prefix)
    request.state.served = served
    return served


async def resolve_served(request: Request) -> ServedCatalog:
    """:func:`served_of` on the event loop: no I/O when the catalog is cached and fresh, else the
    metastore is read on a worker thread."""
    served: ServedCatalog | None = getattr(request.state, "served", None)
    if served is not None:
        return served
    prefix = request.path_params.get("prefix")
    state = state_of(request)
    hit = state.catalogs.default if prefix is None else state.catalogs.cached(prefix)
    if hit is None:
        return await anyio.to_thread.run_sync(served_of, request)
    request.state.served = hit
    return hit


def catalog_of(request: Request) -> MetastoreCatalog:
    """The catalog the path's prefix names; 404 (``CATALOG``) when there is none of that name."""
    return served_of(request).catalog


def table_identifier(database: str, table: str) -> str:
    """``database.table``, both validated (``..``, ``/``, quotes, NUL and the like are refused)."""
    return f"{validate_identifier('database', database)}.{validate_identifier('table', table)}"


def table_of_object(table: str) -> str:
    """The table an object name of the path names: ``t`` for ``t$branch_b1`` (grants are the table's)."""
    return table.split(BRANCH_SUFFIX, 1)[0]


def table_and_branch(database: str, table: str) -> tuple[str, str]:
    """``(database.table, branch)`` of a path's object name: ``t$branch_b1`` is branch ``b1`` of ``t``
    (``main`` without the suffix; ``t$branch_main`` is main too, as pypaimon's ``Identifier`` reads it).
    Both names validated; any other ``$`` stays refused by :func:`table_identifier`."""
    name, sep, branch = table.partition(BRANCH_SUFFIX)
    if not sep or branch.lower() == "main":
        return table_identifier(database, name), "main"
    return table_identifier(database, name), validate_branch_name(branch)
