"""Small helpers every route uses: the process state, the catalog behind the request's prefix, and
identifiers validated as the library validates them."""

from __future__ import annotations

from fastapi import Request

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import NotFoundError
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.service.state import ServiceState


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
