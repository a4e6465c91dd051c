"""One mapping from paimon_meta's error hierarchy to the protocol's error body and status.

Body: ``{message, resourceType, resourceName, code}`` with ``code`` equal to the status (pypaimon lets
``code`` win over the status). 400 bad input (naming the field), 401 no valid token, 403 no grant, 404
with the resource type (``SNAPSHOT`` for "no snapshot yet": a bare 404 reads as "no such table"), 409
already exists, 413 body too large, 501 not implemented, 503 metastore or lock unavailable (retry), 500
otherwise. Never a stack trace in a body: an unexpected error is logged with the request id, and the
body names only the id.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from paimon_meta.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    LockError,
    MetastoreUnavailableError,
    NotFoundError,
    PaimonMetaError,
    TableRowChangedError,
    UnsupportedError,
    ValidationError,
)
from paimon_meta.rest import models

log = logging.getLogger("paimon_meta.service")

_NAME_FIELDS = ("resource_name", "identifier", "table", "database", "tag", "snapshot_id", "principal")


class ServiceError(PaimonMetaError):
    """An error the service raises itself, with its HTTP status."""

    status: int = 400

    def __init__(
        self, message: str, *, resource_type: str | None = None, resource_name: str | None = None
    ) -> None:
        super().__init__(message)
        self.resource_type = resource_type
        self.resource_name = resource_name


class NotAuthenticatedError(ServiceError):
    status = 401


class ForbiddenError(ServiceError):
    status = 403


class PayloadTooLargeError(ServiceError):
    status = 413


def error_body(
    status: int, message: str, resource_type: str | None = None, resource_name: str | None = None
) -> dict[str, Any]:
    body = models.ErrorResponse(
        message=message, resource_type=resource_type, resource_name=resource_name, code=status
    )
    return body.model_dump(by_alias=True)


def error_response(
    status: int, message: str, resource_type: str | None = None, resource_name: str | None = None
) -> JSONResponse:
    return JSONResponse(error_body(status, message, resource_type, resource_name), status_code=status)


def _resource_name(e: PaimonMetaError) -> str | None:
    for key in _NAME_FIELDS:
        value = e.fields.get(key)
        if value is not None:
            return str(value)
    return None


def classify(e: Exception) -> tuple[int, str, str | None, str | None]:
    """(status, message, resourceType, resourceName) for an exception raised by a route."""
    if isinstance(e, ServiceError):
        return e.status, e.message, e.resource_type, e.resource_name
    if isinstance(e, NotFoundError):
        return 404, e.message, e.resource.upper(), _resource_name(e)
    if isinstance(e, (CommitConflictError, TableRowChangedError)):
        return 409, e.message, None, _resource_name(e)
    if isinstance(e, AlreadyExistsError):
        return 409, e.message, e.resource.upper(), _resource_name(e)
    if isinstance(e, UnsupportedError):
        return 501, e.message, None, None
    if isinstance(e, ValidationError):
        return 400, e.message, None, _resource_name(e)
    if isinstance(e, (MetastoreUnavailableError, LockError)):
        return 503, f"{e.message} (retry)", None, None
    if isinstance(e, CommitOutcomeUnknownError):
        return (
            500,
            f"{e.message}; the outcome is unknown: read the table's snapshots (or re-send the same commit) "
            "to resolve it",
            None,
            None,
        )
    return 500, "internal error", None, None


async def handle(request: Request, e: Exception) -> JSONResponse:
    """The answer to any exception a request raised: the protocol's error body and status. The one
    exception handler: the app registers it for every exception (:func:`install`), and the middleware
    calls it for what it raises itself."""
    if isinstance(e, PaimonMetaError):
        status, message, rtype, rname = classify(e)
        if status >= 500:
            log.warning("request %s failed: %s", request_id(request), e, exc_info=status == 500)
        return error_response(status, message, rtype, rname)
    if isinstance(e, RequestValidationError):
        return error_response(400, models.describe_errors(e.errors()))
    if isinstance(e, StarletteHTTPException):
        return error_response(e.status_code, e.detail if isinstance(e.detail, str) else "request refused")
    rid = request_id(request)
    log.error("request %s failed unexpectedly", rid, exc_info=e)
    return error_response(500, f"internal error (request id {rid})")


def install(app: FastAPI) -> None:
    """Register :func:`handle` for every exception (FastAPI's own for validation and HTTP errors
    included), so every error becomes the protocol's body."""
    for kind in (PaimonMetaError, RequestValidationError, StarletteHTTPException, Exception):
        app.add_exception_handler(kind, handle)


def request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))
