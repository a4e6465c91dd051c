"""Branches of one table (``paimon_meta.ops.branches``): list, create (empty or from a tag), drop, rename,
fast-forward main to a branch.

Grants: listing reads the table; creating, dropping and renaming a branch need the table's write grant,
as creating and deleting tags do (they touch only the branch's own files); fast-forward replaces main's
snapshots after the branch's first, so it needs the admin grant, as a rollback does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response

from paimon_meta.metastore.principals import Access
from paimon_meta.ops import branches as branch_ops
from paimon_meta.rest import models, paths
from paimon_meta.service.deps import catalog_of, table_identifier
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    CONFLICT,
    ERRORS,
    NO_BODY,
    PREFIX,
    TABLE_ALTER,
    TABLE_SELECT,
    TABLE_UPDATE,
    UNSUPPORTED,
)

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)

ADMIN = TABLE_ALTER


@router.get(
    paths.BRANCHES, response_model=models.ListBranchesResponse, tags=["branches"], dependencies=[TABLE_SELECT]
)
def list_branches(request: Request, database: str, table: str) -> models.ListBranchesResponse:
    """Every branch of the table but main, sorted (not paged, as Java's ``listBranches``)."""
    names = branch_ops.list_branches(catalog_of(request), table_identifier(database, table))
    return models.ListBranchesResponse(branches=names)


@router.post(
    paths.BRANCHES,
    tags=["branches"],
    dependencies=[TABLE_UPDATE],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def create_branch(
    request: Request,
    database: str,
    table: str,
    body: models.CreateBranchRequest,
    access: Annotated[Access, TABLE_UPDATE],
) -> Response:
    """Create a branch from main's latest schema, or from ``fromTag`` (its snapshot, tag and schemas):
    409 ``BRANCH`` when the name is taken, 404 ``TAG`` when the tag does not exist."""
    branch_ops.create_branch(
        catalog_of(request),
        table_identifier(database, table),
        body.branch,
        body.from_tag,
        principal=access.principal,
    )
    return Response(status_code=200)


@router.delete(
    paths.BRANCH,
    tags=["branches"],
    dependencies=[TABLE_UPDATE],
    response_class=Response,
    responses=NO_BODY,
)
def drop_branch(
    request: Request, database: str, table: str, branch: str, access: Annotated[Access, TABLE_UPDATE]
) -> Response:
    """Drop the branch (its directory); 404 ``BRANCH`` when there is none."""
    branch_ops.drop_branch(
        catalog_of(request), table_identifier(database, table), branch, principal=access.principal
    )
    return Response(status_code=200)


@router.post(
    paths.RENAME_BRANCH,
    tags=["branches"],
    dependencies=[TABLE_UPDATE],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT},
)
def rename_branch(
    request: Request,
    database: str,
    table: str,
    branch: str,
    body: models.RenameBranchRequest,
    access: Annotated[Access, TABLE_UPDATE],
) -> Response:
    """Rename the branch to ``toBranch``: 404 ``BRANCH`` when it does not exist, 409 when the new name is
    taken."""
    branch_ops.rename_branch(
        catalog_of(request),
        table_identifier(database, table),
        branch,
        body.to_branch,
        principal=access.principal,
    )
    return Response(status_code=200)


@router.post(
    paths.FORWARD_BRANCH,
    tags=["branches"],
    dependencies=[ADMIN],
    response_class=Response,
    responses={**NO_BODY, **CONFLICT, **UNSUPPORTED},
)
def forward_branch(
    request: Request,
    database: str,
    table: str,
    branch: str,
    body: models.ForwardBranchRequest,
    access: Annotated[Access, ADMIN],
) -> Response:
    """Fast-forward main to the branch (Java's ``fastForward``): 404 ``BRANCH`` when it does not exist,
    400 when it has no snapshot, 501 when main would lose every snapshot."""
    branch_ops.fast_forward(
        catalog_of(request), table_identifier(database, table), branch, principal=access.principal
    )
    return Response(status_code=200)
