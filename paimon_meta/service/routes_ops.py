"""On-call work through the service (our extension; admin grants): a table's recovery, snapshot
expiration and orphan cleanup, and the catalog's lock rows with their release, as ``paimon_meta.ops``
does them for the CLI on the database path, so ``paimon-meta --metastore http://... recover|expire-
snapshots|remove-orphan-files|locks`` needs no database or storage credentials. Each run is recorded as
the CLI's are (maintenance runs, lock events) with the principal; answers are the ops reports' fields."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.encoders import jsonable_encoder

from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.principals import Access
from paimon_meta.ops import expire, locks, orphans, recovery
from paimon_meta.rest import models, paths
from paimon_meta.service.console.pages import foreign_locks, lock_table, may_release
from paimon_meta.service.deps import catalog_of, served_of, table_identifier
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import AUTHENTICATED, BEARER, ERRORS, PREFIX, TABLE_ALTER

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)


def _report(value: Any) -> models.OperationReport:
    return models.OperationReport(jsonable_encoder(value))


@router.post(paths.RECOVER, response_model=models.OperationReport, tags=["operations"])
def recover_table(
    request: Request,
    database: str,
    table: str,
    body: models.RecoverTableRequest,
    access: Annotated[Access, TABLE_ALTER],
) -> models.OperationReport:
    """Resolve the table's pending commits (``paimon-meta recover``), recorded as a ``recover`` run."""
    report = recovery.recover_table(
        catalog_of(request),
        table_identifier(database, table),
        older_than_seconds=body.older_than_seconds,
        dry_run=body.dry_run,
        principal=access.principal,
        # a run through the service is always recorded (with the principal): it needs a reason
        reason=body.reason or "on-call recovery through the service",
    )
    return _report(report.to_dict())


@router.post(paths.EXPIRE_SNAPSHOTS, response_model=models.OperationReport, tags=["operations"])
def expire_snapshots(
    request: Request,
    database: str,
    table: str,
    body: models.ExpireSnapshotsRequest,
    access: Annotated[Access, TABLE_ALTER],
) -> models.OperationReport:
    """Expire old snapshots and delete the files only they used (``paimon-meta expire-snapshots``)."""
    report = expire.expire_snapshots(
        catalog_of(request),
        table_identifier(database, table),
        retain_min=body.retain_min,
        retain_max=body.retain_max,
        time_retained_ms=None if body.older_than_seconds is None else int(body.older_than_seconds * 1000),
        max_deletes=body.max_deletes,
        dry_run=body.dry_run,
        principal=access.principal,
    )
    return _report(report.to_dict())


@router.post(paths.REMOVE_ORPHAN_FILES, response_model=models.OperationReport, tags=["operations"])
def remove_orphan_files(
    request: Request,
    database: str,
    table: str,
    body: models.RemoveOrphanFilesRequest,
    access: Annotated[Access, TABLE_ALTER],
) -> models.OperationReport:
    """Delete unreferenced files older than ``olderThanSeconds`` (``paimon-meta remove-orphan-files``)."""
    report = orphans.remove_orphan_files(
        catalog_of(request),
        table_identifier(database, table),
        older_than_seconds=body.older_than_seconds,
        dry_run=body.dry_run,
        principal=access.principal,
    )
    return _report(report.to_dict())


@router.get(paths.LOCKS, response_model=models.ListLocksResponse, tags=["operations"])
def list_locks(request: Request, access: Annotated[Access, AUTHENTICATED]) -> models.ListLocksResponse:
    """The lock rows (``paimon-meta locks list``) of the tables on which the caller holds admin (every
    row, Java's and those of no table, for a catalog admin)."""
    served = served_of(request)
    catalog = served.catalog
    foreign = foreign_locks(catalog, default=served.default)
    rows = []
    for row in locks.list_locks(catalog.lock):
        if foreign(row.lock_id):  # another catalog's: never shown here
            continue
        names = lock_table(catalog, row.lock_id)
        if access.may(A.ALTER, Resource.catalog() if names is None else Resource.table(*names)):
            rows.append(jsonable_encoder(row))
    return models.ListLocksResponse(locks=rows)


@router.post(paths.RELEASE_LOCK, response_model=models.OperationReport, tags=["operations"])
def release_lock(
    request: Request, body: models.ReleaseLockRequest, access: Annotated[Access, AUTHENTICATED]
) -> models.OperationReport:
    """Release a lock row (``paimon-meta locks release``; admin on its table): a stale one with a reason,
    a live one only with ``force``; recorded with the principal as the operator."""
    served = served_of(request)
    catalog = served.catalog
    foreign = foreign_locks(catalog, default=served.default)
    if not may_release(catalog, access, body.lock_id, foreign=foreign):
        raise ForbiddenError(f"principal {access.principal!r} may not release lock {body.lock_id!r}")
    result = locks.release_lock(
        catalog.lock,
        body.lock_id,
        reason=body.reason,
        force=body.force,
        operator=f"{access.principal} (service)",
    )
    return _report(result.to_dict())
