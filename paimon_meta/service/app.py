"""The ASGI app of ``paimon-meta serve``: Paimon's REST catalog protocol over the metastore.

``create_app(settings)`` builds it; the lifespan connects the catalog (migrating the metastore), sizes
the worker pool that runs the blocking handlers, and closes everything on shutdown (uvicorn stops
accepting on SIGTERM and lets in-flight requests finish within ``drain_seconds``; see ``server.py``).

Every request passes through one middleware: it assigns a request id (``X-Request-Id``, echoed), treats
any body under ``/v1/`` as JSON whatever its Content-Type (pypaimon sends none), refuses bodies over
``max_body_bytes`` with 413, and records the access log line (request id, principal, route, status,
latency) and the request metrics.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paimon_meta import metrics as event_log_metrics
from paimon_meta.catalog_api import connect
from paimon_meta.db import migrate
from paimon_meta.service import errors, models, routes_audit, routes_catalog, routes_commits, routes_table
from paimon_meta.service.state import ServiceSettings, ServiceState

access_log = logging.getLogger("paimon_meta.service.access")

API_VERSION = "0.1.0"


def create_app(
    settings: ServiceSettings, *, state: ServiceState | None = None, fast_routes: bool = True
) -> FastAPI:
    """The app. ``state``: an already connected state (tests); else the lifespan connects one.
    ``fast_routes=False`` leaves out ``routes_commits.FAST_ROUTES``, so their documented twins answer
    (tests compare the two)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = state is None
        service = await anyio.to_thread.run_sync(_connect, settings) if state is None else state
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.worker_threads
        app.state.service = service
        try:
            yield
        finally:
            if own:
                await anyio.to_thread.run_sync(service.close)

    app = FastAPI(
        title="paimon_meta commit service",
        version=API_VERSION,
        description=(
            "Apache Paimon's REST catalog protocol (as pypaimon 2.1.0 speaks it) over paimon_meta's "
            "metastore: every commit goes through the table lock, fencing, create-if-absent publish and "
            "the event log. Authenticate with `Authorization: Bearer <token>`."
        ),
        lifespan=lifespan,
    )
    if state is not None:
        app.state.service = state
    errors.install(app)
    fast = routes_commits.FAST_ROUTES if fast_routes else []
    # Matched before the API routes that follow (see routes_commits.FAST_ROUTES); the middleware hands
    # their requests to them directly.
    app.router.routes.extend(fast)
    app.include_router(routes_catalog.router)
    app.include_router(routes_table.router)
    app.include_router(routes_commits.router)
    app.include_router(routes_audit.router)
    _install_ops(app)
    _install_middleware(app, settings, fast)
    return app


def _connect(settings: ServiceSettings) -> ServiceState:
    catalog = connect(settings.metastore_url, settings.warehouse, **settings.options)
    return ServiceState(settings, catalog)


def _install_middleware(app: FastAPI, settings: ServiceSettings, fast_routes: Sequence[Route]) -> None:
    app.add_middleware(_EveryRequest, max_body_bytes=settings.max_body_bytes, fast_routes=fast_routes)


class _EveryRequest:
    """Request id, JSON bodies, the body limit, the access log and the request metrics, as a plain ASGI
    middleware (Starlette's ``BaseHTTPMiddleware`` runs the app in another task and streams its response
    through a queue: ~1 ms a request, a noticeable share of a commit's).

    A request for one of ``fast_routes`` (``routes_commits.FAST_ROUTES``, also installed first in the
    router) is handed to its endpoint here, past the exception middleware, the router's matching and the
    endpoint wrapper, with the app's own exception handlers applied to what it raises: the same answers."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, fast_routes: Sequence[Route] = ()) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.fast_routes = tuple(fast_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        headers = request.headers
        rid = headers.get("x-request-id") or secrets.token_hex(8)
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
            if refused is not None:
                await refused(scope, receive, send_with_id)
            else:
                _body_as_json(scope)
                if service is not None:
                    service.metrics.in_flight.inc()
                try:
                    fast = self._fast_route(scope)
                    if fast is not None:
                        await _serve_fast(fast, scope, receive, send_with_id)
                    else:
                        await self.app(scope, receive, send_with_id)
                finally:
                    if service is not None:
                        service.metrics.in_flight.dec()
        finally:
            elapsed = time.monotonic() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            if service is not None:
                service.metrics.requests.labels(route, method, str(status)).inc()
                service.metrics.latency.labels(route, method).observe(elapsed)
            access_log.info(
                "%s %s %s %s %d %.1fms principal=%s",
                rid,
                method,
                scope["path"],
                route,
                status,
                elapsed * 1000,
                state.get("principal") or "-",
            )

    def _fast_route(self, scope: Scope) -> Route | None:
        for route in self.fast_routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                scope.update(child)
                scope["route"] = route  # the metrics' and access log's route label
                return route
        return None


async def _serve_fast(route: Route, scope: Scope, receive: Receive, send: Send) -> None:
    """Call a fast route's endpoint; what it raises goes to the app's handler for that exception (by
    its classes' order, as Starlette looks them up), the one of ``Exception`` last."""
    request = Request(scope, receive)
    try:
        response = await route.endpoint(request)
    except Exception as e:
        handlers = scope["app"].exception_handlers
        handler = next((handlers[c] for c in type(e).__mro__ if c in handlers), None)
        if handler is None:
            raise
        response = await handler(request, e)
    await response(scope, receive, send)


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
    if not scope["path"].startswith("/v1/"):
        return
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    headers.append((b"content-type", b"application/json"))
    scope["headers"] = headers


def _install_ops(app: FastAPI) -> None:
    @app.get("/healthz", response_model=models.HealthResponse, tags=["operations"])
    def healthz() -> models.HealthResponse:
        """The process is up (no dependency checked)."""
        return models.HealthResponse(status="ok")

    @app.get("/readyz", response_model=models.HealthResponse, tags=["operations"])
    def readyz(request: Request) -> Response:
        """Postgres answers and its schema is at the migrations' head; 503 otherwise."""
        service: ServiceState = request.app.state.service
        try:
            current = migrate.current(service.catalog.engine)
            heads = migrate.heads()
        except Exception as e:
            return errors.error_response(503, f"metastore unreachable: {type(e).__name__}")
        if current not in heads:
            return errors.error_response(503, f"metastore schema at {current}, expected {heads}")
        body = models.HealthResponse(status="ready", detail={"revision": current, "replica": service.replica})
        return Response(body.model_dump_json(by_alias=True), media_type="application/json")

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    def prometheus(request: Request) -> Response:
        """This process's request, commit and auth metrics, then the event log's commit and lock
        metrics (every writer's, computed in SQL on each scrape)."""
        service: ServiceState = request.app.state.service
        text = generate_latest(service.metrics.registry).decode("utf-8")
        if service.settings.event_log_metrics:
            text += event_log_metrics.scrape(service.catalog.engine)
        return Response(text, media_type=CONTENT_TYPE_LATEST)
