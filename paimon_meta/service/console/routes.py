"""The console's routes (``/ui``; not in the OpenAPI document): sign-in, the pages, the live stream and
the admin actions.

Each route declares the grant it needs exactly as the API's routes do (``Require``; the route-privilege
test lists them). The middleware has already checked the session's token (``session``). An action
(POST) is checked in this order, and refused before anything is written: the CSRF token and ``Origin``
(403), the grant (403), a non-empty ``reason`` (400). Its reason and principal are recorded with the
event the action writes (a lock's ``force_released`` event; the maintenance run's ``started`` payload).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

import anyio.to_thread
from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from paimon_meta.errors import CatalogNotFoundError, PaimonMetaError, ValidationError
from paimon_meta.governance.permissions import (
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
    parse_access,
    parse_instant,
)
from paimon_meta.metastore.assignments import COLUMN_MASKING, ROW_FILTER
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.feed import START, FeedFilter, Position, feed_head
from paimon_meta.metastore.principals import Access
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.ops import expire, locks, orphans, recovery, rollback, tags
from paimon_meta.ops import tables as table_ops
from paimon_meta.service import errors
from paimon_meta.service import routes_management as management
from paimon_meta.service.auth import log as auth_log
from paimon_meta.service.auth import log_text
from paimon_meta.service.console import notices, pages, session
from paimon_meta.service.data_policies import TablePolicies, table_policies
from paimon_meta.service.deps import catalog_of, served_of, state_of, table_identifier
from paimon_meta.service.errors import ForbiddenError
from paimon_meta.service.routes_common import (
    AUTHENTICATED,
    CATALOG_CREATEDATABASE,
    DATABASE_CREATETABLE,
    TABLE_ALTER,
    TABLE_SELECT,
    TABLE_UPDATE,
)
from paimon_meta.service.routes_feed import event_stream_response

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
#: The assets ``make console-assets`` installs from the npm registry (not committed).
VENDOR_FILES = ("htmx.min.js", "uPlot.iife.min.js", "uPlot.min.css")
templates = Jinja2Templates(directory=str(HERE / "templates"))


class ConsoleRoute(APIRoute):
    """Errors answered as a page (the API's JSON body is for programs): the status the service's one
    error classification gives, and its message."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                # The catalog switcher: the page is of the catalog its cookie names (before the grant
                # check, which narrows the grants to that catalog).
                await _switched_catalog(request)
                return await handler(request)
            except (PaimonMetaError, RequestValidationError) as e:
                answer = errors.classify(e)
                message = answer.message
                if isinstance(e, RequestValidationError):
                    answer = errors.Answer(400, "bad input")
                    message = str(e.errors()[:1])
                return render(
                    request, "error.html", {"status": answer.status, "message": message}, answer.status
                )

        return route


#: The catalog switcher's route: ``GET /ui/catalog?name=NAME``.
SWITCH = f"{session.PREFIX}/catalog"


async def _switched_catalog(request: Request) -> None:
    """Put the catalog the switcher cookie names in the request's state (service.deps reads it there);
    absent, or a name that is no catalog of the service any more: the default catalog (a cookie is the
    browser's state, not a path). Reads the metastore only for a catalog not cached."""
    if request.url.path == SWITCH:  # switching away from a catalog must work without its grants
        return
    name = session.console_catalog(request.url.path, dict(request.cookies))
    state = state_of(request)
    if name is None or name == state.catalogs.default.name:
        return
    served = state.catalogs.cached(name)
    if served is None:
        try:
            served = await run(functools.partial(state.catalogs.get, name))
        except CatalogNotFoundError:
            return
    request.state.served = served


router = APIRouter(prefix=session.PREFIX, route_class=ConsoleRoute, include_in_schema=False)


def install(app: FastAPI) -> None:
    """The console's routes and its static files (``/ui/static``, public: no data in them)."""
    app.include_router(router)
    app.mount(session.STATIC, StaticFiles(directory=str(STATIC_DIR), check_dir=False), name="console-static")


def vendor_missing() -> list[str]:
    return [f for f in VENDOR_FILES if not (STATIC_DIR / "vendor" / f).is_file()]


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    access: Access | None = request.scope.get("state", {}).get("access")
    token = session.cookie_token(request.headers)
    base = {
        "principal": access.principal if access is not None else None,
        "csrf": session.csrf_token(token) if token else "",
        "vendor_missing": vendor_missing(),
        "prefix": session.PREFIX,
        "catalog": getattr(request.state, "served", state_of(request).catalogs.default).name,
        "notice": notices.message(request.query_params),
    }
    response = templates.TemplateResponse(request, name, {**base, **context}, status_code=status)
    response.headers["cache-control"] = "no-store"
    response.headers["x-frame-options"] = "DENY"
    response.headers["content-security-policy"] = (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
    )
    return response


async def run(call: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(call)


# ---- signing in and out ------------------------------------------------------------------------------


@router.get("/login")
def login_form(request: Request) -> HTMLResponse:
    return render(request, "login.html", {"error": None})


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the token as the API would; on success the session cookie holds it (module docstring of
    ``session``)."""
    form = await _form(request)
    token = form.get("token", "").strip()
    state = state_of(request)
    access = None
    if token and session.cookie_safe(token) and session.same_origin(request.headers, request.url.scheme):
        client = request.client.host if request.client else "-"
        if state.auth_throttle.retry_after(client):
            return render(request, "login.html", {"error": "too many failed sign-ins; wait a moment"}, 429)
        access = await run(functools.partial(state.authenticate, token))
        if access is None:
            state.auth_throttle.failed(client)
    if access is None:
        auth_log.warning(
            "refused console sign-in from %s", log_text(request.client.host if request.client else "-")
        )
        state.metrics.auth_refusals.labels(reason="unauthenticated").inc()
        return render(request, "login.html", {"error": "unknown, revoked or expired token"}, 401)
    response = RedirectResponse(f"{session.PREFIX}/", status_code=303)
    response.headers["set-cookie"] = session.cookie_header(token, secure=request.url.scheme == "https")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session (the cookie is cleared; the token itself stays valid: revoke it to end it)."""
    form = await _form(request)
    token = session.cookie_token(request.headers)
    if token is not None:
        _check_csrf(request, token, form)
    response = RedirectResponse(notices.url(session.LOGIN, "signed-out"), status_code=303)
    response.headers["set-cookie"] = session.clear_cookie_header(secure=request.url.scheme == "https")
    return response


# ---- pages ----------------------------------------------------------------------------------------------


@router.get("/")
def overview(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    database: str | None = None,
    after: str | None = None,
) -> HTMLResponse:
    data = pages.overview(catalog_of(request), access, database=database or None, after=after)
    return render(request, "overview.html", {**data, "catalogs": _switchable(request)})


def _switchable(request: Request) -> list[str]:
    """The catalogs the switcher offers: the default one and each one the principal holds a grant in."""
    state = state_of(request)
    access: Access = request.state.access  # every catalog's grants (service.auth)
    default = state.catalogs.default.name
    others = [
        info.name
        for info in Catalogs(state.catalog.engine).list_all()
        if info.name != default and access.in_catalog(info.catalog_key, default=False).holds_any()
    ]
    return [default, *others]


@router.get(SWITCH.removeprefix(session.PREFIX))
def switch_catalog(request: Request, _: Annotated[Access, AUTHENTICATED], name: str) -> Response:
    """Show catalog ``name`` in the console from now on (a cookie; the default catalog's name switches
    back); 404 when there is no such catalog. Its pages then check the grants in that catalog."""
    state = state_of(request)
    validate_identifier("catalog", name)
    if name != state.catalogs.default.name:
        state.catalogs.get(name)  # CatalogNotFoundError: 404
    response = RedirectResponse(f"{session.PREFIX}/", status_code=303)
    response.headers["set-cookie"] = session.catalog_cookie_header(name, secure=request.url.scheme == "https")
    return response


@router.get("/tables/{database}/{table}")
def table_page(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, TABLE_SELECT],
    policies: Annotated[TablePolicies, Depends(table_policies)],
    commits_before: int | None = None,
    snapshots_before: int | None = None,
    partitions_after: str | None = None,
) -> HTMLResponse:
    catalog = catalog_of(request)
    row = catalog.table_row(table_identifier(database, table))
    data = pages.table_page(
        catalog,
        access,
        row,
        commits_before=commits_before,
        snapshots_before=snapshots_before,
        partitions_after=partitions_after,
        rules=policies.read_rules(access, row.identifier),
    )
    return render(request, "table.html", data)


@router.get("/locks")
def locks_page(request: Request, access: Annotated[Access, AUTHENTICATED]) -> HTMLResponse:
    served = served_of(request)
    return render(request, "locks.html", pages.locks_page(served.catalog, access, default=served.default))


@router.get("/maintenance")
def maintenance_page(
    request: Request, access: Annotated[Access, AUTHENTICATED], before: int | None = None
) -> HTMLResponse:
    return render(
        request, "maintenance.html", pages.maintenance_runs(catalog_of(request), access, before=before)
    )


@router.get("/recycle-bin")
def recycle_bin_page(
    request: Request,
    access: Annotated[Access, AUTHENTICATED],
    tables_before: int | None = None,
    databases_before: int | None = None,
) -> HTMLResponse:
    data = pages.recycle_bin(
        catalog_of(request), access, tables_before=tables_before, databases_before=databases_before
    )
    return render(request, "recycle_bin.html", data)


@router.get("/live")
def live_page(
    request: Request, access: Annotated[Access, AUTHENTICATED], table: str | None = None
) -> HTMLResponse:
    return render(request, "live.html", {"table": table or ""})


@router.get(session.LIVE_EVENTS.removeprefix(session.PREFIX))
def live_events(
    request: Request, access: Annotated[Access, AUTHENTICATED], table: str | None = None
) -> Response:
    """The change feed's live stream for the live view (``EventSource``; resumes from
    ``Last-Event-ID``); from now on when the page opens it (``from=start``: from the beginning)."""
    last = request.headers.get("last-event-id")
    if last:
        after = Position.parse(last, field="Last-Event-ID")
    elif request.query_params.get("from") == "start":
        after = START
    else:
        after = feed_head(catalog_of(request).engine)  # from now on
    response = event_stream_response(request, access, FeedFilter(subject=table or None), after)
    if isinstance(response, StreamingResponse):
        response.body_iterator = _unnamed(response.body_iterator)
    return response


async def _unnamed(chunks: AsyncIterable[Any]) -> AsyncIterator[str]:
    """The stream without its ``event:`` lines: the page's ``EventSource.onmessage`` then receives every
    event (the CloudEvent's ``type`` is in its data); its comments, the last one saying why a stream
    ended included, pass as they are. Closing it closes the stream it wraps at once."""
    try:
        async for chunk in chunks:
            text = chunk if isinstance(chunk, str) else bytes(chunk).decode("utf-8")
            yield "\n".join(line for line in text.split("\n") if not line.startswith("event: "))
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


# ---- admin actions ------------------------------------------------------------------------------------


async def _form(request: Request) -> dict[str, str]:
    """The urlencoded form of a POST (first value of each field)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _check_csrf(request: Request, token: str, form: dict[str, str]) -> None:
    if not session.same_origin(request.headers, request.url.scheme):
        raise ForbiddenError("the request's Origin is not this console's")
    if not session.csrf_valid(token, form.get("csrf_token")):
        raise ForbiddenError("missing or wrong CSRF token (reload the page and try again)")


async def csrf_form(request: Request) -> dict[str, str]:
    """A dependency of every action: the form, once its CSRF token and Origin are checked (403)."""
    form = await _form(request)
    token = session.cookie_token(request.headers)
    if token is None:  # a bearer token, not a session: no browser sent it on a user's behalf
        if request.headers.get("authorization"):
            return form
        raise ForbiddenError("no console session")
    _check_csrf(request, token, form)
    return form


Form = Annotated[dict[str, str], Depends(csrf_form)]


def _reason(form: dict[str, str]) -> str:
    reason = form.get("reason", "").strip()
    if not reason:
        raise ValidationError("every console action needs a reason", field="reason")
    return reason[:1000]


def _back(path: str, code: str, n: int | None = None) -> RedirectResponse:
    """Back to ``path``, which then says ``code``'s fixed message (console.notices)."""
    return RedirectResponse(notices.url(path, code, n), status_code=303)


@router.post("/locks/release")
async def release_lock(request: Request, form: Form, access: Annotated[Access, AUTHENTICATED]) -> Response:
    """Force-release a lock (admin on its table): a ``force_released`` lock event with the principal as
    operator and the reason."""
    served = served_of(request)  # resolved by the route already: no I/O here
    catalog = served.catalog
    lock_id = form.get("lock_id", "")
    foreign = await run(functools.partial(pages.foreign_locks, catalog, default=served.default))
    if not pages.may_release(catalog, access, lock_id, foreign=foreign):
        raise ForbiddenError(f"principal {access.principal!r} may not release lock {lock_id!r}")
    reason = _reason(form)
    operator = f"{access.principal} (console)"
    await run(
        functools.partial(
            locks.release_lock, catalog.lock, lock_id, reason=reason, force=True, operator=operator
        )
    )
    return _back(f"{session.PREFIX}/locks", "lock-released")


def _table_path(database: str, table: str) -> str:
    return f"{session.PREFIX}/tables/{quote(database)}/{quote(table)}"


@router.post("/tables/{database}/{table}/recover")
async def recover(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, TABLE_ALTER]
) -> Response:
    """Run recovery on the table (its pending commits resolved), recorded as a ``recover`` run."""
    reason = _reason(form)
    identifier = table_identifier(database, table)
    report = await run(
        functools.partial(
            recovery.recover_table, catalog_of(request), identifier, principal=access.principal, reason=reason
        )
    )
    return _back(_table_path(database, table), "recovered", len(report.commits))


@router.post("/tables/{database}/{table}/expire-snapshots")
async def expire_snapshots(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, TABLE_ALTER]
) -> Response:
    """Expire snapshots by the table's retention options, recorded as an ``expire_snapshots`` run."""
    reason = _reason(form)
    report = await run(
        functools.partial(
            expire.expire_snapshots,
            catalog_of(request),
            table_identifier(database, table),
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(_table_path(database, table), "expired", len(report.expired))


@router.post("/tables/{database}/{table}/remove-orphan-files")
async def remove_orphan_files(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, TABLE_ALTER]
) -> Response:
    """Delete the table's orphan files older than a day, recorded as a ``remove_orphan_files`` run."""
    reason = _reason(form)
    report = await run(
        functools.partial(
            orphans.remove_orphan_files,
            catalog_of(request),
            table_identifier(database, table),
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(_table_path(database, table), "orphans-removed", len(report.deleted))


@router.post("/tables/{database}/{table}/tags")
async def create_tag(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, TABLE_UPDATE]
) -> Response:
    reason = _reason(form)
    name = form.get("tag", "").strip()
    raw = form.get("snapshot_id", "").strip()
    if raw and not raw.isdigit():
        raise ValidationError("snapshot_id must be a snapshot id", field="snapshot_id")
    snapshot = await run(
        functools.partial(
            tags.create_tag,
            catalog_of(request),
            table_identifier(database, table),
            name,
            int(raw) if raw else None,
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(_table_path(database, table), "tag-created", snapshot.id)


@router.post("/tables/{database}/{table}/tags/{tag}/delete")
async def delete_tag(
    request: Request, database: str, table: str, tag: str, form: Form, access: Annotated[Access, TABLE_UPDATE]
) -> Response:
    reason = _reason(form)
    await run(
        functools.partial(
            tags.delete_tag,
            catalog_of(request),
            table_identifier(database, table),
            tag,
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(_table_path(database, table), "tag-deleted")


@router.post("/tables/{database}/{table}/rollback")
async def roll_back(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, TABLE_ALTER]
) -> Response:
    reason = _reason(form)
    raw = form.get("snapshot_id", "").strip()
    if not raw.isdigit():
        raise ValidationError("snapshot_id must be a snapshot id", field="snapshot_id")
    report = await run(
        functools.partial(
            rollback.rollback,
            catalog_of(request),
            table_identifier(database, table),
            snapshot_id=int(raw),
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(_table_path(database, table), "rolled-back", report.target_snapshot_id)


def _drop_id(form: dict[str, str]) -> int:
    raw = form.get("drop_id", "").strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 18):
        raise ValidationError("drop_id must be the drop id the recycle bin lists", field="drop_id")
    return int(raw)


BIN = f"{session.PREFIX}/recycle-bin"


@router.post("/recycle-bin/tables/{database}/{table}/undrop")
async def undrop_table(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, DATABASE_CREATETABLE]
) -> Response:
    """Restore that drop of the table (its files, logs and grants), recorded as an ``undrop_table`` run
    with the principal and the reason; 409 when the name is taken again, 404 when it left the bin."""
    reason = _reason(form)
    drop_id = _drop_id(form)
    await run(
        functools.partial(
            table_ops.undrop_table,
            catalog_of(request),
            table_identifier(database, table),
            drop_id=drop_id,
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(BIN, "table-undropped")


@router.post("/recycle-bin/databases/{database}/undrop")
async def undrop_database(
    request: Request, database: str, form: Form, access: Annotated[Access, CATALOG_CREATEDATABASE]
) -> Response:
    """Restore that drop of the database with every table dropped with it that is still in the bin (one
    transaction), each table's run recording the principal and the reason; 409 when the name is taken."""
    reason = _reason(form)
    drop_id = _drop_id(form)
    validate_identifier("database", database)
    done = await run(
        functools.partial(
            table_ops.undrop_database,
            catalog_of(request),
            database,
            drop_id=drop_id,
            principal=access.principal,
            reason=reason,
        )
    )
    return _back(BIN, "database-undropped", len(done.tables))


# ---- governance: a table's and a principal's permissions and policies ----------------------------------
#
# Every check is the management API's own (service.routes_management: ``listed_principals``,
# ``check_grant``, ``check_revoke``, ``listed_policy_principals``, ``checked_new_policy``,
# ``require_governs``): a caller the REST route would refuse is refused here (403, nothing written), and a
# change is recorded in the governance event log with the console's principal and the form's reason.


def _governance_path(database: str, table: str) -> str:
    return f"{_table_path(database, table)}/permissions"


@router.get("/tables/{database}/{table}/permissions")
def table_governance_page(
    request: Request,
    database: str,
    table: str,
    access: Annotated[Access, AUTHENTICATED],
    table_after: str | None = None,
    columns_after: str | None = None,
    policies_after: str | None = None,
) -> HTMLResponse:
    """The table's direct assignments (``TABLE``, ``COLUMN``) and policies, as ``GET .../permissions``
    and ``GET .../policies`` list them to the caller (everyone's with ``GRANT`` on the table, resp.
    ``ALTER`` or ``GRANT``; else only its own names')."""
    row = catalog_of(request).table_row(table_identifier(database, table))
    names = management.listed_principals(request, access, Resource.table(database, table))
    policy_names = management.listed_policy_principals(request, access, database, table)
    data = pages.table_governance(
        management.assignments_of(request),
        management.policies_of(request),
        row,
        names=names,
        policy_names=policy_names,
        table_after=table_after or None,
        columns_after=columns_after or None,
        policies_after=policies_after or None,
    )
    return render(request, "table_governance.html", data)


@router.get("/principals/{name:path}")
def principal_page(request: Request, name: str, access: Annotated[Access, AUTHENTICATED]) -> HTMLResponse:
    """A principal's active assignments in the catalog (its own, its groups' and roles') and the policies
    that apply to it: for a caller who may list every principal's assignments on the catalog as
    ``GET /permissions?resourceType=CATALOG`` decides (``GRANT`` on the catalog), else 403."""
    if management.listed_principals(request, access, Resource.catalog()) is not None:
        raise ForbiddenError(
            f"principal {access.principal!r} has no GRANT on the catalog: it may not list another "
            "principal's assignments"
        )
    data = pages.principal_governance(
        management.assignments_of(request), management.policies_of(request), name
    )
    return render(request, "principal.html", data)


def _field(form: dict[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise ValidationError(f"{name} is required", field=name)
    return value


def _granted(form: dict[str, str], database: str, table: str) -> Assignment:
    """The assignment the grant form describes: ``TABLE``, or ``COLUMN`` with the comma-separated
    ``columns`` allowlist; ``expire_time`` an ISO-8601 UTC instant (optional)."""
    principal = _field(form, "principal")
    listed = [c.strip() for c in form.get("columns", "").split(",") if c.strip()]
    resource = Resource.column(database, table) if listed else Resource.table(database, table)
    raw_expiry = form.get("expire_time", "").strip()
    return Assignment(
        principal,
        resource,
        parse_access(_field(form, "access"), resource.type),
        ColumnRange.allowlist(listed) if listed else None,
        parse_instant(raw_expiry) if raw_expiry else None,
    )


@router.post("/tables/{database}/{table}/permissions/grant")
async def grant_permission(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Grant (or replace) an access on the table, or on some of its columns, checked as ``POST
    .../permissions/grant`` checks it; the event records the principal and the reason."""
    assignment = _granted(form, database, table)
    await run(functools.partial(management.check_grant, request, access, assignment))
    reason = _reason(form)
    store = management.assignments_of(request)
    await run(functools.partial(store.grant, assignment, granted_by=access.principal, reason=reason))
    return _back(_governance_path(database, table), "permission-granted")


@router.post("/tables/{database}/{table}/permissions/revoke")
async def revoke_permission(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Revoke one assignment on the table (``resource_type`` ``TABLE`` or ``COLUMN``), checked as ``POST
    .../permissions/revoke`` checks it."""
    kind = form.get("resource_type", "TABLE")
    if kind not in (ResourceType.TABLE.value, ResourceType.COLUMN.value):
        raise ValidationError("resource_type must be TABLE or COLUMN", field="resource_type")
    resource = Resource.column(database, table) if kind == "COLUMN" else Resource.table(database, table)
    principal = _field(form, "principal")
    granted = parse_access(_field(form, "access"), resource.type)
    await run(functools.partial(management.check_revoke, request, access, resource))
    reason = _reason(form)
    store = management.assignments_of(request)
    await run(
        functools.partial(
            store.revoke, resource, granted, principal, revoked_by=access.principal, reason=reason
        )
    )
    return _back(_governance_path(database, table), "permission-revoked")


def _policy_identity(form: dict[str, str]) -> tuple[str, str, str | None]:
    """(principal, type, column) of a policy form: ``ROW_FILTER`` names no column."""
    policy_type = form.get("policy_type", "")
    if policy_type not in (ROW_FILTER, COLUMN_MASKING):
        raise ValidationError("policy_type must be ROW_FILTER or COLUMN_MASKING", field="policy_type")
    column = _field(form, "column") if policy_type == COLUMN_MASKING else None
    return _field(form, "principal"), policy_type, column


@router.post("/tables/{database}/{table}/policies")
async def create_policy(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """A row filter (``rule``: Paimon's predicate JSON) or a column mask (transform JSON) for one
    principal, checked and canonicalized as ``POST .../policies`` does."""
    principal, policy_type, column = _policy_identity(form)
    rule = _field(form, "rule")
    row, canonical = await run(
        functools.partial(
            management.checked_new_policy,
            request,
            access,
            database,
            table,
            principal=principal,
            policy_type=policy_type,
            column=column,
            rule=rule,
        )
    )
    reason = _reason(form)
    await run(
        functools.partial(
            management.policies_of(request).create,
            row.table_id,
            table_identifier(database, table),
            principal,
            policy_type=policy_type,
            on_column=column,
            body=canonical,
            created_by=access.principal,
            reason=reason,
        )
    )
    return _back(_governance_path(database, table), "policy-created")


@router.post("/tables/{database}/{table}/policies/drop")
async def drop_policy(
    request: Request, database: str, table: str, form: Form, access: Annotated[Access, AUTHENTICATED]
) -> Response:
    """Drop a policy of the table, checked as ``POST .../policies/drop`` checks it (404 when absent)."""
    principal, policy_type, column = _policy_identity(form)
    identifier = table_identifier(database, table)
    row = await run(functools.partial(catalog_of(request).table_row, identifier))
    await run(functools.partial(management.require_governs, request, access, database, table))
    reason = _reason(form)
    await run(
        functools.partial(
            management.policies_of(request).drop,
            row.table_id,
            identifier,
            policy_type,
            principal,
            column,
            dropped_by=access.principal,
            reason=reason,
        )
    )
    return _back(_governance_path(database, table), "policy-dropped")


def _human_bytes(n: object) -> str:
    """``n`` bytes in B/KiB/MiB/GiB/TiB (the templates' ``bytes`` filter)."""
    value = float(n) if isinstance(n, (int, float)) else 0.0
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _path_part(value: object) -> str:
    """``value`` quoted as one path segment (``/`` too: the templates' ``pathpart`` filter)."""
    return quote(str(value), safe="")


def _when(value: object) -> str:
    """A moment as every page shows it: ``YYYY-MM-DD HH:MM:SS UTC`` (the templates' ``when`` filter; the
    live view's script writes the same). Naive datetimes are the metastore's UTC; None is empty."""
    if not isinstance(value, datetime):
        return ""
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


templates.env.filters["bytes"] = _human_bytes
templates.env.filters["when"] = _when
templates.env.filters["pathpart"] = _path_part
