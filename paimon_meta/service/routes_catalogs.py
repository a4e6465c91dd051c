"""The catalogs' admin API (our extension, shaped as Apache Polaris' management API): list, create, show,
update and drop the catalogs one service serves, under ``/api/management/v1/catalogs``.

Who may do what (a principal is service-wide; its grants are per catalog):

* create: the service-level privilege ``create_catalog`` (``paimon-meta principals grant-service``); the
  creator gets ``admin`` on the whole of the catalog it created, in the same transaction.
* list: the catalogs the caller holds some grant in (every catalog with ``create_catalog``).
* show: some grant in the catalog, or ``create_catalog``; 403 otherwise, 404 when there is none.
* update, drop: ``admin`` on the whole catalog. The service's default catalog cannot be dropped here (it
  is what ``serve --catalog-name`` serves); dropping one that holds databases needs ``cascade=true``
  and removes its rows (never its files) and its grants.

Secrets (options naming a secret, the STS external id) are never answered: ``secretsSet`` names those set.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from paimon_meta.db.models import Privilege, ServicePrivilege
from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Resource
from paimon_meta.io.sts import StsSettings
from paimon_meta.metastore.catalogs import CatalogInfo, Catalogs, StorageProfile
from paimon_meta.metastore.principals import Access
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.rest import models, paths
from paimon_meta.service.auth import Require, check, not_in_catalog, service_access
from paimon_meta.service.deps import state_of
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import BEARER, CONFLICT, ERRORS
from paimon_meta.service.state import ServiceState

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER], responses=ERRORS)

#: Any valid token: each handler checks the service-level privilege or the catalog's grants itself.
AUTHENTICATED = Depends(Require(None))
CatalogName = Annotated[str, Path(description="The catalog's name (what clients pass as `warehouse`).")]


def _is_default(state: ServiceState, info: CatalogInfo) -> bool:
    return info.name == state.catalogs.default.name


def _in(state: ServiceState, access: Access, info: CatalogInfo) -> Access:
    """The caller's access within ``info`` (its assignments there only)."""
    return access.in_catalog(info.catalog_key, default=_is_default(state, info))


def _response(state: ServiceState, info: CatalogInfo) -> models.CatalogResponse:
    public = info.public()
    return models.CatalogResponse(
        name=public["name"],
        catalog_key=public["catalog_key"],
        warehouse=public["warehouse"],
        storage=models.CatalogStorage(**public["storage"]),
        sts_role_arn=public["sts_role_arn"],
        options=public["options"],
        secrets_set=public["secrets_set"],
        created_by=public["created_by"],
        created_at=public["created_at"],
        default=_is_default(state, info),
    )


def _refused(access: Access, what: str, name: str | None = None) -> ForbiddenError:
    return ForbiddenError(f"principal {access.principal!r} {what}", resource_type=None, resource_name=name)


def _get_visible(request: Request, name: str) -> tuple[ServiceState, Access, CatalogInfo]:
    state, access = state_of(request), service_access(request)
    info = Catalogs(state.catalog.engine).get(validate_identifier("catalog", name))
    if not _in(state, access, info).holds_any() and not access.has_service(ServicePrivilege.CREATE_CATALOG):
        raise not_in_catalog(request, access, name)
    return state, access, info


def _get_admin(
    request: Request, name: str, needs: PermissionAccess
) -> tuple[ServiceState, Access, CatalogInfo]:
    """The catalog ``name``, if the caller may perform ``needs`` (``ALTER``, ``DROP``) on it (403 naming
    the decision's reason otherwise)."""
    state, access, info = _get_visible(request, name)
    check(request, _in(state, access, info), needs, Resource.catalog(), catalog=name)
    return state, access, info


def _check_role(role_arn: str | None, external_id: str | None) -> None:
    """Refuse (400) a role the catalog could not vend with: its requests would all fail later."""
    if role_arn is not None:
        StsSettings(role_arn=role_arn, external_id=external_id)


def _profile(storage: models.CatalogStorage | None) -> StorageProfile | None:
    if storage is None:
        return None
    return StorageProfile(storage.endpoint, storage.region, storage.path_style)


@router.get(paths.CATALOGS, response_model=models.ListCatalogsResponse, tags=["catalogs"])
def list_catalogs(request: Request, _: Annotated[Access, AUTHENTICATED]) -> models.ListCatalogsResponse:
    """The catalogs the caller holds some active assignment in (all of them with the service-level privilege
    ``create_catalog``), by name. Secrets are never answered (``secretsSet`` names them)."""
    state, access = state_of(request), service_access(request)
    every = access.has_service(ServicePrivilege.CREATE_CATALOG)
    infos = Catalogs(state.catalog.engine).list_all()
    return models.ListCatalogsResponse(
        catalogs=[_response(state, i) for i in infos if every or _in(state, access, i).holds_any()]
    )


@router.post(
    paths.CATALOGS,
    response_model=models.CatalogResponse,
    tags=["catalogs"],
    responses=CONFLICT,
)
def create_catalog(
    request: Request, body: models.CreateCatalogRequest, _: Annotated[Access, AUTHENTICATED]
) -> models.CatalogResponse:
    """Create a catalog: its name (what clients pass as ``warehouse``), warehouse (a local path or
    ``s3://``; it must not equal, contain or lie inside another catalog's: 409), storage profile, STS
    role for vending, and options. Needs the service-level privilege ``create_catalog``; the creator
    gets ``admin`` on the whole new catalog."""
    state, access = state_of(request), service_access(request)
    if not access.has_service(ServicePrivilege.CREATE_CATALOG):
        raise _refused(access, "has no service-level create_catalog grant")
    _check_role(body.sts_role_arn, body.sts_external_id)
    with state.catalog.engine.begin() as conn:
        info = Catalogs(state.catalog.engine).create(
            body.name,
            body.warehouse,
            storage=_profile(body.storage),
            sts_role_arn=body.sts_role_arn,
            sts_external_id=body.sts_external_id,
            options=body.options,
            created_by=access.principal,
            conn=conn,
        )
        state.principals.grant(
            access.principal,
            Privilege.ADMIN,
            granted_by=f"{access.principal} (created the catalog)",
            catalog_key=info.catalog_key,
            conn=conn,
        )
    return _response(state, info)


@router.get(paths.CATALOG_ADMIN, response_model=models.CatalogResponse, tags=["catalogs"])
def get_catalog(
    request: Request, catalog: CatalogName, _: Annotated[Access, AUTHENTICATED]
) -> models.CatalogResponse:
    """One catalog: needs some grant in it (or ``create_catalog``); 404 ``CATALOG`` when there is none."""
    state, _access, info = _get_visible(request, catalog)
    return _response(state, info)


@router.put(paths.CATALOG_ADMIN, response_model=models.CatalogResponse, tags=["catalogs"], responses=CONFLICT)
def update_catalog(
    request: Request,
    catalog: CatalogName,
    body: models.UpdateCatalogRequest,
    _: Annotated[Access, AUTHENTICATED],
) -> models.CatalogResponse:
    """Change a catalog's warehouse (refused while it holds databases), storage profile, STS role and
    options. Needs ``ALTER`` on the catalog (``admin`` on the whole catalog gives it). Replicas serve
    the change within their refresh time (``catalog_refresh_seconds``). The default catalog's warehouse
    is the server's flags': not here."""
    state, _access, info = _get_admin(request, catalog, PermissionAccess.ALTER)
    _check_role(body.sts_role_arn or info.sts_role_arn, body.sts_external_id or info.sts_external_id)
    if _is_default(state, info) and body.warehouse is not None:
        raise ValidationError(
            f"catalog {catalog!r} is this service's default catalog: its warehouse is serve --warehouse",
            catalog=catalog,
        )
    changed = Catalogs(state.catalog.engine).alter(
        info.name,
        warehouse=body.warehouse,
        storage=_profile(body.storage),
        sts_role_arn=body.sts_role_arn,
        sts_external_id=body.sts_external_id,
        clear_sts=body.clear_sts,
        set_options=body.set_options,
        remove_options=body.remove_options or (),
    )
    return _response(state, changed)


@router.delete(
    paths.CATALOG_ADMIN, response_model=models.DropCatalogResponse, tags=["catalogs"], responses=CONFLICT
)
def drop_catalog(
    request: Request,
    catalog: CatalogName,
    _: Annotated[Access, AUTHENTICATED],
    cascade: Annotated[bool, Query()] = False,
) -> models.DropCatalogResponse:
    """Drop a catalog and its grants; its files stay where they are. Refused (400) while it holds
    databases unless ``cascade=true`` (their rows go with it). Needs ``DROP`` on the catalog (``admin``
    on the whole catalog gives it).
    The service's default catalog cannot be dropped."""
    state, _access, info = _get_admin(request, catalog, PermissionAccess.DROP)
    if _is_default(state, info):
        raise ValidationError(
            f"catalog {catalog!r} is this service's default catalog (serve --catalog-name): it cannot "
            "be dropped while served",
            catalog=catalog,
        )
    held = Catalogs(state.catalog.engine).drop(info.name, cascade=cascade)  # its grants with it
    return models.DropCatalogResponse(databases=held)
