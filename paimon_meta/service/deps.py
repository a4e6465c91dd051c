"""Small helpers every route uses: the process state, the catalog behind the request's prefix, and
identifiers validated as the library validates them."""

from __future__ import annotations

from fastapi import Request

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import NotFoundError
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.service.state import ServiceState
from paimon_meta.table.paths import validate_branch_name

#: How a client names a table's branch in a path (pypaimon's and Java's ``Identifier``: ``t$branch_b1``).
BRANCH_SUFFIX = "$branch_"


def state_of(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


def catalog_of(request: Request) -> MetastoreCatalog:
    """The catalog; 404 when the path's prefix is not this server's catalog name."""
    state = state_of(request)
    prefix = request.path_params.get("prefix")
    if prefix is not None and prefix != state.settings.catalog_name:
        raise NotFoundError(
            f"no catalog {prefix!r} here (this server serves {state.settings.catalog_name!r})"
        )
    return state.catalog


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
