"""The ASGI app of ``paimon-meta serve``: Paimon's REST catalog protocol over the metastore.

``create_app(settings)`` builds it; the lifespan connects the catalog (migrating the metastore), sizes
the worker pool that runs the blocking handlers, and closes everything on shutdown (uvicorn stops
accepting on SIGTERM and lets in-flight requests finish within ``drain_seconds``; see ``server.py``).

Every request passes through one middleware: it assigns a request id (``X-Request-Id``, echoed: the
client's when it is a short token of safe characters, else a generated one), refuses bodies over
``max_body_bytes`` with 413, authenticates the bearer token of every route but ``/healthz`` and
``/readyz`` before reading the body (401; 429 with ``Retry-After`` for an address with too many failed
authentications; a console page without a valid session cookie is sent to the sign-in form), reads the
body within ``body_timeout_seconds`` (408), treats any body under ``/v1/``
as JSON whatever its Content-Type (pypaimon sends none), and records the access log line (request id,
principal, route, status, latency; what the client chose is JSON-quoted) and the request metrics.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from fastapi import Depends, FastAPI, Request, Response
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paimon_meta.catalog.metastore import CATALOG_OPTIONS, MetastoreCatalog, connect_catalog
from paimon_meta.db import migrate
from paimon_meta.db.budget import QueryBudget, bounded
from paimon_meta.errors import AlreadyExistsError, ValidationError
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.ops import metrics as event_log_metrics
from paimon_meta.rest import models, paths
from paimon_meta.service import (
    bounds,
    errors,
    routes_access,
    routes_audit,
    routes_branches,
    routes_catalog,
    routes_catalogs,
    routes_commits,
    routes_common,
    routes_feed,
    routes_functions,
    routes_management,
    routes_ops,
    routes_partitions,
    routes_schemas,
    routes_semantic_views,
    routes_snapshots,
    routes_table,
    routes_tables,
    routes_views,
)
from paimon_meta.service.auth import Require, log_text, token_of
from paimon_meta.service.auth import log as auth_log
from paimon_meta.service.console import routes as console_routes
from paimon_meta.service.console import session as console_session
from paimon_meta.service.retry import repeat
from paimon_meta.service.routes_feed import EVENT_STREAM
from paimon_meta.service.state import DRAIN_RETRY_AFTER_SECONDS, ServiceSettings, ServiceState

access_log = logging.getLogger("paimon_meta.service.access")
log = logging.getLogger("paimon_meta.service")

API_VERSION = "0.1.0"
#: Paths answered without a token (they say only whether the process is up / ready).
#: What a browser asks of any address: the root (sent on to the console) and an icon (none).
ROOT = "/"
FAVICON = "/favicon.ico"
PUBLIC_PATHS = frozenset({paths.HEALTHZ, paths.READYZ, ROOT, FAVICON})
#: Paths admission control never sheds (an operator must see an overloaded replica).
NEVER_SHED = PUBLIC_PATHS | {paths.METRICS}
#: The paths of the live streams (the change feed's route, the console's live view): the only requests
#: admission control leaves to the stream slots, when they ask for a stream (``Accept``).
STREAM_PATHS = re.compile(re.escape(paths.CATALOG_EVENTS).replace(re.escape("{prefix}"), "[^/]+"))


def is_stream_request(method: str, path: str, headers: Headers) -> bool:
    """Whether the request asks one of the stream routes for a live stream."""
    return (
        method == "GET"
        and headers.get("accept", "").startswith(EVENT_STREAM)
        and (path == console_session.LIVE_EVENTS or STREAM_PATHS.fullmatch(path) is not None)
    )


#: A client's ``X-Request-Id`` is kept only if it is this (else a generated id is used).
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def create_app(settings: ServiceSettings, *, state: ServiceState | None = None) -> FastAPI:
    """The app. ``state``: an already connected state (tests); else the lifespan connects one."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = state is None
        service = await anyio.to_thread.run_sync(_connect, settings) if state is None else state
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.worker_threads
        app.state.service = service
        if settings.gc_freeze_at_start:
            # Everything built to start (the app, the catalogs, the caches' first entries) moves to the
            # collector's permanent generation: a full collection then traverses what requests made since,
            # not the ~300,000 objects of the start, which paused every request in flight for ~100 ms
            # (the p99 of /metrics and the console, docs/BENCHMARKS.md).
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            if own:
                await anyio.to_thread.run_sync(service.close)
            else:
                await anyio.to_thread.run_sync(service.close_feed_hub)

    app = FastAPI(
        title="paimon_meta commit service",
        version=API_VERSION,
        description=(
            "Apache Paimon's REST catalog protocol (as pypaimon 2.1.0 speaks it) over paimon_meta's "
            "metastore: every commit goes through the table lock, fencing, create-if-absent publish and "
            "the event log. Authenticate with `Authorization: Bearer <token>`."
        ),
        lifespan=lifespan,
        # Served below behind authentication (a token, any grant).
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    if state is not None:
        app.state.service = state
    errors.install(app)
    # Matched first: the control plane's commit (see routes_commits.CommitMessagesRoute).
    app.router.routes.append(routes_commits.commit_messages_route())
    app.include_router(routes_catalog.router)
    app.include_router(routes_table.router)
    app.include_router(routes_commits.router)
    app.include_router(routes_audit.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_access.router)
    app.include_router(routes_management.router)
    app.include_router(routes_partitions.router)
    app.include_router(routes_snapshots.router)
    app.include_router(routes_schemas.router)
    app.include_router(routes_branches.router)
    app.include_router(routes_tables.router)
    app.include_router(routes_views.router)
    app.include_router(routes_semantic_views.router)
    app.include_router(routes_functions.router)
    app.include_router(routes_feed.router)
    app.include_router(routes_catalogs.router)
    console_routes.install(app)
    _name_spec_operations(app)
    _install_ops(app)
    _install_browser_paths(app)
    _install_middleware(app, settings)
    return app


_SPEC_OPERATION_IDS = {
    (method, template): operation
    for method, template, operation in (*paths.SPEC_OPERATIONS, *paths.MANAGEMENT_OPERATIONS)
}


def _name_spec_operations(app: FastAPI) -> None:
    """Name each route of the protocol by the spec's operationId in the served document (one route per
    operation: ``tests/service/test_spec_operations.py``)."""
    stack: list[Any] = list(app.routes)
    while stack:
        route = stack.pop()
        included = getattr(route, "original_router", None)  # FastAPI keeps an included router as one entry
        if included is not None:
            stack.extend(included.routes)
        elif isinstance(route, APIRoute):
            for method in route.methods or ():
                operation = _SPEC_OPERATION_IDS.get((method, route.path))
                if operation is not None:
                    route.operation_id = operation


def _connect(settings: ServiceSettings) -> ServiceState:
    catalog = connect_catalog(
        settings.metastore_url, settings.warehouse, settings.options, migrate=settings.migrate
    )
    try:
        _adopt_default_catalog(settings, catalog)
        return ServiceState(settings, catalog)
    except BaseException:
        catalog.close()
        raise


def _adopt_default_catalog(settings: ServiceSettings, catalog: MetastoreCatalog) -> None:
    """Record the catalog this process serves (``--catalog-name``, the ``catalog-key`` option,
    ``--warehouse``) as a row of ``paimon_catalogs`` if it has none: how a single-catalog metastore
    becomes one catalog with its rows (migration 0019 cannot know its warehouse). The flags stay what
    this process serves: a row that disagrees with them, or a name or place another catalog has, is a
    warning naming both, never a refused start (existing deployments do not change)."""
    try:
        info, created = Catalogs(catalog.engine).ensure_default(
            settings.catalog_name,
            catalog.warehouse,
            catalog_key=catalog.registry.catalog_key,
            options=settings.options,
            sts_role_arn=None if settings.sts is None else settings.sts.role_arn,
            sts_external_id=None if settings.sts is None else settings.sts.external_id,
            skip_options=CATALOG_OPTIONS,
            created_by="serve",
        )
    except (ValidationError, AlreadyExistsError) as e:
        log.warning("default catalog %r not recorded as a catalog: %s", settings.catalog_name, e.message)
        return
    if created:
        log.info(
            "default catalog %r recorded (catalog key %r, warehouse %s)",
            info.name,
            info.catalog_key,
            info.warehouse,
        )


def _install_middleware(app: FastAPI, settings: ServiceSettings) -> None:
    app.add_middleware(
        _EveryRequest,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
    )


class _EveryRequest:
    """Request id, the token, the body's limits, JSON bodies, the access log and the request metrics,
    as a plain ASGI middleware (Starlette's ``BaseHTTPMiddleware`` runs the app in another task and
    streams its response through a queue: ~1 ms a request, a noticeable share of a commit's)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, body_timeout_seconds: float = 30.0) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_seconds = body_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        headers = request.headers
        rid = headers.get("x-request-id") or ""
        if not REQUEST_ID.fullmatch(rid):
            rid = secrets.token_hex(8)
        state = scope.setdefault("state", {})  # what request.state reads and writes
        state["request_id"] = rid
        state["principal"] = None
        started = time.monotonic()
        service: ServiceState | None = getattr(scope["app"].state, "service", None)
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = MutableHeaders(scope=message)
                headers["x-request-id"] = rid
            await send(message)

        method = scope["method"]
        refused = _refuse_body(headers, method, self.max_body_bytes)
        try:
            path = scope["path"]
            if (
                refused is None
                and service is not None
                and path not in PUBLIC_PATHS
                and not console_session.is_public(path)
            ):
                try:
                    refused = await _authenticate(service, scope, headers)
                except Exception as e:  # the metastore did not answer: the one exception handler says how
                    refused = await errors.handle(Request(scope), e)
            # A body (Content-Length; chunked ones were refused) is read here, within the time limit, and
            # handed to the app from memory.
            has_body = refused is None and int(headers.get("content-length") or 0) > 0
            body: bytes | None = None
            if has_body:
                body, refused = await _read_body(receive, self.max_body_bytes, self.body_timeout_seconds)
                if body is not None:
                    receive = _replay(body, receive)
            if refused is not None:
                await refused(scope, receive, send_with_id)
            elif has_body and body is None:
                status = 499  # the client went away while sending its body: nothing to answer
            else:
                _body_as_json(scope)
                # A live change-feed stream lasts as long as its subscriber: bounded by its own counts
                # (service.streams.slots), not by the in-flight slots it would hold for hours. Only
                # the stream routes themselves: any other request is admitted (or shed) whatever its
                # Accept header says.
                stream = is_stream_request(method, scope["path"], headers)
                if service is not None and service.draining and scope["path"] not in NEVER_SHED:
                    # SIGTERM: nothing new starts here; the client re-sends (another replica answers).
                    await _closing(_stopping("this replica is shutting down; retry"))(
                        scope, receive, send_with_id
                    )
                    return
                admitted = service is not None and scope["path"] not in NEVER_SHED and not stream
                if admitted and service is not None and not service.admit_request():
                    shed = errors.error_response(
                        503,
                        f"this replica is handling {service.settings.max_in_flight} requests; retry shortly",
                        retry_after=errors.RETRY_AFTER_SECONDS,
                    )
                    await shed(scope, receive, send_with_id)
                    return
                try:
                    if admitted and service is not None:
                        # the drain's deadline around the route class's budget (service.bounds)
                        bounded_app = functools.partial(_bounded, self.app, service)
                        await _until_deadline(service, bounded_app, scope, receive, send_with_id)
                    else:
                        await self.app(scope, receive, send_with_id)
                finally:
                    if admitted and service is not None:
                        service.request_done()
        finally:
            elapsed = time.monotonic() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            if service is not None:
                service.metrics.requests.labels(route, method, str(status)).inc()
                served = state.get("served")  # the catalog the request resolved (service.deps)
                if served is not None:
                    service.metrics.catalog_requests.labels(served.name, str(status)).inc()
                service.metrics.latency.labels(route, method).observe(elapsed)
            # The client's path and the principal's name JSON-quoted: neither can forge a line or field.
            access_log.info(
                "%s %s %s %s %d %.1fms principal=%s",
                rid,
                method,
                log_text(scope["path"]),
                route,
                status,
                elapsed * 1000,
                log_text(state.get("principal") or "-"),
            )


async def _bounded(app: ASGIApp, service: ServiceState, scope: Scope, receive: Receive, send: Send) -> None:
    """Run the request under its route class's budget, watched for its deadline and its client going
    away (service.bounds); the budget is in the request's state for the error handler."""
    method = scope["method"]
    route_class = bounds.route_class(method, scope["path"])
    budget = QueryBudget(route_class, service.settings.statement_timeouts.get(route_class, 0.0))
    scope.setdefault("state", {})["budget"] = budget
    watcher = bounds.Watcher(receive, budget, cancel_reads=route_class != bounds.WRITE)
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(watcher.run)
        try:
            with bounded(budget):
                await app(scope, watcher.receive, send)
        except Exception as e:  # raised as it is, not in the task group's ExceptionGroup
            failure = e
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure


def _stopping(message: str) -> Response:
    return errors.error_response(503, message, retry_after=DRAIN_RETRY_AFTER_SECONDS)


async def _until_deadline(
    service: ServiceState, app: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> None:
    """Run the request; if the drain's deadline passes first (SIGTERM, then ``drain_seconds``), answer 503
    + Retry-After in its place (never a cancelled task's 500) and leave it to finish on its own: what it
    sends afterwards is dropped. A commit answered so is settled by recovery or the client's re-send of the
    same identifier (deduplicated); one withdrawn from its table's queue was never started."""
    answered = False
    started = False

    async def guarded(message: Message) -> None:
        nonlocal started
        if answered:
            return
        started = started or message["type"] == "http.response.start"
        await send(message)

    task = asyncio.ensure_future(app(scope, receive, guarded))
    deadline = service.deadline()
    await asyncio.wait((task, deadline), return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
        return
    service.abandon()
    task.add_done_callback(functools.partial(_forget, service))
    answered = True
    if not started:
        log.warning(
            "drain deadline: answered %s %s 503 (still running)", scope["method"], log_text(scope["path"])
        )
        message = (
            "this replica shut down before the request finished; re-send it (a commit with the same "
            "identifier is deduplicated)"
        )
        await _closing(_stopping(message))(scope, receive, send)


def _forget(service: ServiceState, task: asyncio.Future[None]) -> None:
    """Collect an abandoned request's outcome (so asyncio does not log it as never retrieved)."""
    service.abandoned_done()
    if not task.cancelled() and task.exception() is not None:
        log.info("a request answered at the drain deadline ended later: %r", task.exception())


async def _authenticate(service: ServiceState, scope: Scope, headers: Headers) -> Response | None:
    """The request's token checked before anything reads its body: None when it is valid (its
    ``access`` is left in the request's state for the route's grant check), else the answer: 401 (no
    token, or one unknown, revoked or expired), 429 when the client's address failed too often (a token
    that authenticated recently is still let through, and checked)."""
    token = token_of(headers.get("authorization"))
    console = console_session.is_console(scope["path"])
    if token is None and console:
        token = console_session.cookie_token(headers)
    if token is None:
        if console:
            return _to_sign_in(scope, headers)
        return _refusal(
            service, scope, 401, "a valid bearer token is required (Authorization: Bearer <token>)"
        )
    client = scope.get("client")
    address = str(client[0]) if client else "-"
    wait = service.auth_throttle.retry_after(address)
    if wait and not service.known_good(token):
        response = _refusal(
            service, scope, 429, f"too many failed authentications from this address; retry in {wait} s"
        )
        response.headers["retry-after"] = str(wait)
        return response
    known, access = service.cached_access(token)
    if not known:
        access = await repeat(
            functools.partial(anyio.to_thread.run_sync, service.authenticate, token),
            service.observe_retry,
            read_only=True,
            what="authentication",
        )
    if access is None:
        service.auth_throttle.failed(address)
        refusal = _refusal(service, scope, 401, "the bearer token is unknown, revoked or expired")
        return _to_sign_in(scope, headers) if console else refusal
    state = scope["state"]
    state["access"] = access
    state["principal"] = access.principal
    state["credential"] = token  # a live stream re-checks it while it is open (service.streams.rights)
    return None


def _to_sign_in(scope: Scope, headers: Headers) -> Response:
    """A console request without a valid session: a page is sent to the sign-in form (303), anything
    else (an action, the live stream) is answered 401."""
    if scope["method"] == "GET" and not headers.get("accept", "").startswith(EVENT_STREAM):
        response: Response = RedirectResponse(console_session.LOGIN, status_code=303)
    else:
        response = PlainTextResponse("sign in first", status_code=401)
    if console_session.cookie_token(headers) is not None:  # a revoked or expired session: forget it
        secure = scope.get("scheme") == "https"
        response.headers["set-cookie"] = console_session.clear_cookie_header(secure=secure)
    return response


def _refusal(service: ServiceState, scope: Scope, status: int, message: str) -> Response:
    reason = "throttled" if status == 429 else "unauthenticated"
    client = scope.get("client")
    auth_log.warning(
        "refused %s %s: %s (from %s)",
        scope["method"],
        log_text(scope["path"]),
        reason,
        log_text(client[0] if client else "-"),
    )
    service.metrics.auth_refusals.labels(reason=reason).inc()
    return errors.error_response(status, message)


async def _read_body(receive: Receive, limit: int, timeout: float) -> tuple[bytes | None, Response | None]:
    """The whole body, read within ``timeout`` seconds and at most ``limit`` bytes: ``(body, None)``;
    ``(None, answer)`` (408, 413) otherwise; ``(None, None)`` when the client disconnected."""
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None, None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None, _closing(errors.error_response(413, f"request body over {limit} bytes"))
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), None
    return None, _closing(
        errors.error_response(408, f"the request body did not arrive within {timeout:g} seconds")
    )


def _closing(response: Response) -> Response:
    """The answer, and the connection closed after it (the rest of the body is never read)."""
    response.headers["connection"] = "close"
    return response


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the body already read, then waits on the connection as usual."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _refuse_body(headers: Headers, method: str, limit: int) -> Response | None:
    declared = headers.get("content-length")
    if declared is not None:
        try:
            too_big = int(declared) > limit
        except ValueError:
            return errors.error_response(400, "Content-Length is not a number")
        if too_big:
            return errors.error_response(413, f"request body over {limit} bytes")
    elif headers.get("transfer-encoding", "").lower() == "chunked" and method != "GET":
        # A body of unknown length is read into memory by the JSON parser: refuse it rather than
        # trusting it to be small.
        return errors.error_response(411, "a request body needs a Content-Length")
    return None


def _body_as_json(scope: Scope) -> None:
    """Parse every body under /v1/ as JSON: pypaimon sends no Content-Type, others may send text/plain."""
    if not scope["path"].startswith(f"{paths.V1}/"):
        return
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    headers.append((b"content-type", b"application/json"))
    scope["headers"] = headers


def _install_browser_paths(app: FastAPI) -> None:
    """``/`` and ``/favicon.ico``, answered without a token (they reveal nothing): a browser opened on
    the service's address lands on the console, and its icon request is neither a refusal nor a
    warning in the log."""

    @app.get(ROOT, include_in_schema=False)
    async def root() -> Response:
        return RedirectResponse(f"{console_session.PREFIX}/", status_code=303)

    @app.get(FAVICON, include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204, headers={"cache-control": "max-age=86400"})


def _install_ops(app: FastAPI) -> None:
    @app.get(paths.HEALTHZ, response_model=models.HealthResponse, tags=["operations"])
    async def healthz() -> models.HealthResponse:
        """The process is up (no dependency checked). No token needed. Answered on the event loop, so
        it answers while every worker thread is busy."""
        return models.HealthResponse(status="ok")

    @app.get(
        paths.READYZ,
        response_model=models.HealthResponse,
        tags=["operations"],
        responses={503: routes_common.ERRORS[503]},
    )
    def readyz(request: Request) -> Response:
        """Postgres answers and its schema is within the compatibility window (this code's head, or a newer
        release's); 503 otherwise, and at once when draining. No token needed,
        so it says only ready or not (the reason is logged)."""
        service: ServiceState = request.app.state.service
        if service.draining:  # SIGTERM: out of the load balancer at once
            return errors.error_response(503, "not ready", retry_after=errors.RETRY_AFTER_SECONDS)
        try:
            current = migrate.current(service.catalog.engine)
            heads = migrate.heads()
        except Exception as e:
            log.warning("not ready: metastore unreachable: %s", e)
            return errors.error_response(503, "not ready", retry_after=errors.RETRY_AFTER_SECONDS)
        if not migrate.compatible(current):
            log.warning("not ready: metastore schema at %s, this code needs %s or newer", current, heads)
            return errors.error_response(503, "not ready", retry_after=errors.RETRY_AFTER_SECONDS)
        body = models.HealthResponse(status="ready")
        return Response(body.model_dump_json(by_alias=True), media_type="application/json")

    @app.get(
        paths.METRICS,
        tags=["operations"],
        response_class=PlainTextResponse,
        dependencies=[routes_common.BEARER, routes_common.CATALOG_ALTER],
        # The errors are JSON (the protocol's body), the route's own answer is text.
        responses={
            code: {
                "description": routes_common.ERRORS[code]["description"],
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
            }
            for code in (401, 403, 503)
        },
    )
    def prometheus(request: Request) -> Response:
        """This process's request, commit and auth metrics, then the event log's commit and lock
        metrics (every writer's, from the metastore's rollup of the log after folding what came since
        the last fold, reused for ``metrics_cache_seconds``). Needs ``ALTER``
        on the catalog (they name tables: only catalog administrators hold it)."""
        service: ServiceState = request.app.state.service
        text = generate_latest(service.metrics.registry).decode("utf-8")
        if service.settings.event_log_metrics:
            engine = service.catalog.engine
            text += service.event_log_scrape(
                lambda: event_log_metrics.scrape(
                    engine,
                    fold_events=event_log_metrics.SCRAPE_FOLD_EVENTS,
                    table_series=service.settings.metrics_table_series,
                    fold_wait_seconds=event_log_metrics.SCRAPE_FOLD_WAIT_SECONDS,
                )
            )
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    # The document and its viewers need a token (any grant): they are the same for every principal,
    # but nothing about the service is shown to anonymous clients. The viewers embed the document (a
    # browser page cannot add the token to the fetch of /openapi.json).
    authenticated = [Depends(Require(None))]

    @app.get(paths.OPENAPI, include_in_schema=False, dependencies=authenticated)
    def openapi_document(request: Request) -> JSONResponse:
        return JSONResponse(request.app.openapi())

    @app.get(paths.DOCS, include_in_schema=False, dependencies=authenticated)
    def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="",
            title=f"{app.title} - Swagger UI",
            swagger_ui_parameters={"spec": request.app.openapi()},
        )

    @app.get(paths.REDOC, include_in_schema=False, dependencies=authenticated)
    def redoc(request: Request) -> HTMLResponse:
        spec = json.dumps(request.app.openapi()).replace("<", "\\u003c")
        return HTMLResponse(
            f'<!DOCTYPE html><html><head><title>{app.title} - ReDoc</title><meta charset="utf-8"/>'
            '</head><body><div id="redoc"></div>'
            f'<script src="{_REDOC_JS}"></script>'
            f'<script>Redoc.init({spec}, {{}}, document.getElementById("redoc"))</script>'
            "</body></html>"
        )


_REDOC_JS = "https://cdn.jsdelivr.net/npm/redoc@2/bundles/redoc.standalone.js"
