"""One mapping from paimon_meta's error hierarchy to the protocol's error body and status.

Body: ``{message, resourceType, resourceName, code}`` with ``code`` equal to the status (pypaimon lets
``code`` win over the status). 400 bad input (naming the field), 401 no valid token, 403 no grant, 404
with the resource type (``SNAPSHOT`` for "no snapshot yet": a bare 404 reads as "no such table"), 409
already exists, 413 body or one of its texts too large (naming the field), 429 a principal at its
cap of live streams (``Retry-After``), 501 not implemented, 502 storage (or STS, vending credentials)
refused the server's request (its credentials or configuration: retrying will not help), 500 only
for a commit whose outcome is unknown (the body says so: re-send the same commit) and for bugs. Never
a stack trace in a body: an unexpected error is logged with the request id, and the body names only
the id.

503 with ``Retry-After`` whenever a dependency is down or the replica is full: the metastore
unreachable, restarting or dropping the connection (whatever the driver raised: see
``paimon_meta.db.faults``), the table's lock not acquired in time, storage failing past its retries
(5xx, throttling, timeouts, resets), STS unreachable or throttling, the OIDC issuer's keys
unreachable, and admission control shedding load. A 503 means the request may
be sent again as it is: the server did nothing that a repeat would do twice (a write whose transaction
met a reset mid-COMMIT is the exception: a repeated create answers 409; commits are deduplicated by their
identifier).
"""

from __future__ import annotations

import errno
import logging
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from paimon_meta.db.budget import DISCONNECT, QueryBudget
from paimon_meta.db.faults import FaultKind, fault_of
from paimon_meta.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    CredentialVendingError,
    DeletionProtectedError,
    FieldTooLargeError,
    FileAlreadyExistsError,
    FileIOError,
    FileNotFound,
    GovernanceConflictError,
    LockError,
    MetastoreUnavailableError,
    NotFoundError,
    PaimonMetaError,
    RequestBoundError,
    TableRowChangedError,
    UnsupportedError,
    ValidationError,
)
from paimon_meta.ops.common import RefusedError
from paimon_meta.rest import models

log = logging.getLogger("paimon_meta.service")

_NAME_FIELDS = ("resource_name", "identifier", "table", "database", "tag", "snapshot_id", "principal")

#: Seconds a client is told to wait after a 503 for a dependency that is down (a Postgres restart takes
#: about a second; a lock is usually free again within one).
RETRY_AFTER_SECONDS = 1

#: S3 error codes that mean "slow down / try again later", besides HTTP 5xx.
_STORAGE_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "ServiceUnavailable",
        "InternalError",
        "ConditionalRequestConflict",
        "OperationAborted",
    }
)


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


class TooManyStreamsError(ServiceError):
    """A principal already holds its share of a replica's live streams: 429 with ``Retry-After`` (a
    stream of its own must end first; the message names the cap)."""

    status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OverloadedError(ServiceError):
    """Admission control shed the request (the replica or the table's commit queue is full), or (a
    subclass naming its ``dependency``) a dependency the request needs is down."""

    status = 503
    #: Counted in ``paimon_meta_service_dependency_errors_total{kind}`` when set (shedding is not).
    dependency: str | None = None

    def __init__(self, message: str, *, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DrainingError(OverloadedError):
    """This replica is shutting down (SIGTERM): the request was not started, or a commit was withdrawn
    from its table's queue before anything of it was published. Re-sending it (to another replica) is
    safe: 503 with ``Retry-After``."""


#: Local file-system errors that repeating cannot fix (permissions, a read-only mount, a name the file
#: system refuses): 502, not 503.
_REFUSED_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG, errno.EINVAL, errno.ENOTDIR}
)


@dataclass(frozen=True, slots=True)
class Answer:
    """What a failed request is answered: status, the body's fields, and ``Retry-After`` seconds (503)."""

    status: int
    message: str
    resource_type: str | None = None
    resource_name: str | None = None
    retry_after: int | None = None
    #: The metastore fault's kind (``paimon_meta.db.faults.FaultKind``), or ``storage``, for metrics.
    dependency: str | None = None


def error_body(
    status: int, message: str, resource_type: str | None = None, resource_name: str | None = None
) -> dict[str, Any]:
    body = models.ErrorResponse(
        message=message, resource_type=resource_type, resource_name=resource_name, code=status
    )
    return body.model_dump(by_alias=True)


def error_response(
    status: int,
    message: str,
    resource_type: str | None = None,
    resource_name: str | None = None,
    *,
    retry_after: int | None = None,
) -> JSONResponse:
    response = JSONResponse(error_body(status, message, resource_type, resource_name), status_code=status)
    if retry_after is not None:
        response.headers["retry-after"] = str(retry_after)
    return response


def answer_response(answer: Answer) -> JSONResponse:
    return error_response(
        answer.status,
        answer.message,
        answer.resource_type,
        answer.resource_name,
        retry_after=answer.retry_after,
    )


def _resource_name(e: PaimonMetaError) -> str | None:
    for key in _NAME_FIELDS:
        value = e.fields.get(key)
        if value is not None:
            return str(value)
    return None


#: What the access log records for a request whose client went away before its answer (nginx's code;
#: nobody receives it).
CLIENT_GONE = 499


def classify(e: BaseException, budget: QueryBudget | None = None) -> Answer:
    """The answer to an exception a request raised (any exception: driver errors included). ``budget``:
    the request's (paimon_meta.db.budget): once it is spent, the statement it cancelled answers for it."""
    if isinstance(e, RequestBoundError) or (
        budget is not None and budget.reason is not None and _cancelled(e)
    ):
        bound = e if isinstance(e, RequestBoundError) else (budget or QueryBudget("-", 0)).error()
        if bound.reason == DISCONNECT:
            return Answer(CLIENT_GONE, bound.message)
        return Answer(503, bound.message, retry_after=RETRY_AFTER_SECONDS, dependency="deadline")
    if isinstance(e, OverloadedError):
        return Answer(503, e.message, retry_after=e.retry_after, dependency=e.dependency)
    if isinstance(e, TooManyStreamsError):
        return Answer(429, e.message, retry_after=e.retry_after)
    if isinstance(e, ServiceError):
        return Answer(e.status, e.message, e.resource_type, e.resource_name)
    if isinstance(e, NotFoundError):
        return Answer(404, e.message, e.resource.upper(), _resource_name(e))
    if isinstance(e, (CommitConflictError, TableRowChangedError, DeletionProtectedError)):
        return Answer(409, e.message, None, _resource_name(e))
    if isinstance(e, AlreadyExistsError):
        return Answer(409, e.message, e.resource.upper(), _resource_name(e))
    if isinstance(e, GovernanceConflictError):  # a policy protects what the change would alter
        return Answer(409, e.message, "TABLE", _resource_name(e))
    if isinstance(e, RefusedError):  # an operation refused to protect a live writer (a live lock)
        return Answer(409, e.message, None, _resource_name(e))
    if isinstance(e, UnsupportedError):
        return Answer(501, e.message)
    if isinstance(e, FieldTooLargeError):
        return Answer(413, e.message)
    if isinstance(e, ValidationError):
        return Answer(400, e.message, None, _resource_name(e))
    if isinstance(e, CommitOutcomeUnknownError):
        return Answer(
            500,
            f"{e.message}; the outcome is unknown: read the table's snapshots (or re-send the same commit) "
            "to resolve it",
        )
    fault = fault_of(e)
    if fault is not None:
        return Answer(
            503,
            f"metastore unavailable ({fault.kind}): {fault.message} (retry)",
            retry_after=RETRY_AFTER_SECONDS,
            dependency=str(fault.kind),
        )
    if isinstance(e, (MetastoreUnavailableError, LockError)):
        return Answer(503, f"{e.message} (retry)", retry_after=RETRY_AFTER_SECONDS, dependency="metastore")
    if isinstance(e, FileIOError) and not isinstance(e, (FileNotFound, FileAlreadyExistsError)):
        return _storage_answer(e)
    if isinstance(e, CredentialVendingError):
        # STS down or throttling: retry; STS refusing the server (the role, its trust policy, the
        # duration): an operator must act. The message names the role and STS's code, no credential.
        if e.transient:
            return Answer(503, f"{e.message} (retry)", retry_after=RETRY_AFTER_SECONDS, dependency="sts")
        return Answer(502, f"the credential source refused the server: {e.message}", dependency="sts")
    return Answer(500, "internal error")


def _cancelled(e: BaseException) -> bool:
    """Whether ``e`` is Postgres ending a statement (statement timeout, or a cancel request)."""
    fault = fault_of(e)
    return fault is not None and fault.kind == FaultKind.CANCELED


def _storage_answer(e: FileIOError) -> Answer:
    """Storage failed past the FileIO's own retries: 503 when it is down or throttling (transient), 502
    when it refused the server's request (credentials, a missing bucket: an operator must act)."""
    status = e.fields.get("status")
    code = e.fields.get("code")
    refused_locally = e.fields.get("errno") in _REFUSED_ERRNOS
    transient = not refused_locally and (
        bool(e.fields.get("injected"))
        or status is None  # no HTTP answer: a timeout, a reset, an unreachable endpoint, a local OS error
        or (isinstance(status, int) and status >= 500)
        or code in _STORAGE_TRANSIENT_CODES
    )
    path = e.fields.get("path")
    where = f" ({path})" if path else ""
    if transient:
        return Answer(
            503,
            f"storage unavailable: {e.message}{where} (retry)",
            retry_after=RETRY_AFTER_SECONDS,
            dependency="storage",
        )
    return Answer(502, f"storage refused the server's request: {e.message}{where}", dependency="storage")


async def handle(request: Request, e: Exception) -> JSONResponse:
    """The answer to any exception a request raised: the protocol's error body and status. The one
    exception handler: the app registers it for every exception (:func:`install`), and the middleware
    calls it for what it raises itself."""
    if isinstance(e, RequestValidationError):
        return error_response(400, models.describe_errors(e.errors()))
    if isinstance(e, StarletteHTTPException):
        return error_response(e.status_code, e.detail if isinstance(e.detail, str) else "request refused")
    answer = classify(e, getattr(request.state, "budget", None))
    observe = getattr(getattr(request.app.state, "service", None), "observe_failure", None)
    if observe is not None:
        observe(answer)
    if answer.status == 500 and not isinstance(e, PaimonMetaError):
        rid = request_id(request)
        log.error("request %s failed unexpectedly", rid, exc_info=e)
        return error_response(500, f"internal error (request id {rid})")
    if answer.status >= 500:
        log.warning("request %s failed: %s", request_id(request), e, exc_info=answer.status == 500)
    return answer_response(answer)


def install(app: FastAPI) -> None:
    """Register :func:`handle` for every exception (FastAPI's own for validation and HTTP errors
    included), so every error becomes the protocol's body."""
    for kind in (PaimonMetaError, RequestValidationError, StarletteHTTPException, Exception):
        app.add_exception_handler(kind, handle)


def request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))
