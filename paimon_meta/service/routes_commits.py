"""The control plane (our extension of the protocol): writers send the CommitMessages they produced and
the server commits them, conflicts, manifest merge and exactly-once included (``CommitCoordinator``);
streaming writers ask which identifiers are not committed yet; auditors page through the commit history
without database access."""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import functools
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import anyio.to_thread
import pydantic
from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitResult
from paimon_meta.commit.validate import newest_schema_id
from paimon_meta.errors import CorruptMetadataError, TableNotFoundError, TableRowChangedError, ValidationError
from paimon_meta.metastore.branches import MAIN
from paimon_meta.metastore.principals import Access
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.ops import audit
from paimon_meta.ops import branches as branch_ops
from paimon_meta.rest import models, paths
from paimon_meta.serde.commit_message import deserialize_commit_messages
from paimon_meta.service import convert
from paimon_meta.service.auth import Require
from paimon_meta.service.deps import catalog_of, served_of, state_of, table_identifier
from paimon_meta.service.errors import DrainingError
from paimon_meta.service.retry import RetryingRoute
from paimon_meta.service.routes_common import (
    BEARER,
    CONFLICT,
    ERRORS,
    OUTCOME_UNKNOWN,
    PREFIX,
    TABLE_COMMIT,
    TABLE_SELECT,
    TABLE_UPDATE,
    UNSUPPORTED,
)
from paimon_meta.service.state import DRAIN_RETRY_AFTER_SECONDS, ServiceState
from paimon_meta.table.write.overwrite import OverwriteSpec

router = APIRouter(route_class=RetryingRoute, dependencies=[BEARER, PREFIX], responses=ERRORS)

READ = TABLE_SELECT
WRITE = TABLE_UPDATE
#: The commit's grant: a refusal is recorded in the data-access log too.
COMMIT = TABLE_COMMIT


def _messages(body: models.CommitMessagesRequest) -> list[CommitMessage]:
    try:
        raw = base64.b64decode(body.messages, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValidationError(f"messages: not base64: {e}", field="messages") from e
    try:
        return deserialize_commit_messages(raw, body.messages_version)
    except CorruptMetadataError as e:
        raise ValidationError(f"messages: {e.message}", field="messages") from e


def commit_messages(
    request: Request,
    database: str,
    table: str,
    body: models.CommitMessagesRequest,
    access: Annotated[Access, COMMIT],
) -> Response:
    """Commit the messages as one APPEND (or OVERWRITE with ``overwrite``) snapshot, plus a COMPACT one
    if they carry compaction results, exactly as an in-process commit; to ``branch`` when named (404
    ``BRANCH`` without one), with its own dedupe, conflicts and events. 409: a conflict (nothing landed);
    400: undecodable or invalid messages; 500 with an unknown outcome: re-send the same identifier."""
    catalog, identifier, state = catalog_of(request), table_identifier(database, table), state_of(request)
    overwrite: dict[str, str] | OverwriteSpec | None = body.overwrite
    if body.overwrite is not None and body.overwrite_mode is not None:
        overwrite = OverwriteSpec(dict(body.overwrite), dynamic=body.overwrite_mode == "dynamic")
    with state.counted_commit("messages", served_of(request).name):
        messages = _messages(body)  # undecodable: counted as rejected
        with state.admit_commit(identifier, catalog):  # 503 at once when this replica's queues are full
            result = _commit(state, catalog, identifier, body, access, messages, overwrite)
    # Serialized here, not by FastAPI's response_model (which validates the model once more).
    body_json = models.CommitMessagesResponse(
        snapshot_ids=list(result.snapshot_ids), deduplicated=result.deduplicated
    ).model_dump_json(by_alias=True)
    return Response(body_json, media_type="application/json")


def _commit(
    state: ServiceState,
    catalog: MetastoreCatalog,
    identifier: str,
    body: models.CommitMessagesRequest,
    access: Access,
    messages: list[CommitMessage],
    overwrite: dict[str, str] | OverwriteSpec | None,
) -> CommitResult:
    branch = body.branch or MAIN
    while True:
        row, cached = state.commit_row(identifier, catalog)
        try:
            if branch == MAIN:
                table_object = state.commit_table(row, catalog)
                newest = newest_schema_id(messages)
                if newest is not None and newest > table_object.schema.id:
                    # Files of a schema the registry has not recorded (an engine altered the table
                    # straight on storage): commit on storage's latest schema, listed now.
                    table_object = state.commit_table(row, catalog, newer_than=table_object.schema.id)
            else:  # the branch's schema and snapshots; under the table's lock, with the branch's pointer
                table_object = branch_ops.branch_table(catalog, identifier, branch)[1]
            committer = catalog.message_committer(
                identifier,
                body.commit_user,
                principal=access.principal,
                row=row,
                table=table_object,
                # A cached row may be behind another replica's ALTER (ServiceState.commit_table): the
                # guard checks its schema id under the lock; TableRowChangedError below reads it again.
                schema_id=row.schema_id if cached and branch == MAIN else None,
            )
            # Validation, the recovery record and the delta manifests on this thread; then queued behind
            # the table's other commits of this replica, committed back to back under one lock hold
            # (group commit).
            prepared = committer.prepare(
                messages,
                body.commit_identifier,
                overwrite=overwrite,
                properties=body.properties,
                watermark=body.watermark,
            )
            return state.groups.commit(prepared)
        except concurrent.futures.CancelledError:
            # Withdrawn from the table's queue at the drain's deadline, before it ran: nothing published
            # (its files go now; its recovery record is settled by recovery).
            prepared.discard()
            raise DrainingError(
                f"this replica is shutting down and the commit of {identifier} had not started: nothing "
                "was committed; re-send it",
                retry_after=DRAIN_RETRY_AFTER_SECONDS,
            ) from None
        except (TableRowChangedError, TableNotFoundError):
            # A cached row gone stale (renamed, dropped, re-created): nothing was published (found under
            # the lock, before staging); read the row again and commit once more.
            state.forget_row(identifier, catalog)
            if not cached:
                raise


class CommitMessagesRoute(APIRoute):
    """The route of :func:`commit_messages`. FastAPI documents it from the endpoint's signature (the
    grant, the body's model, the answer) as any route, but it is served by a handler written for that
    signature instead of FastAPI's general one: the grant check (``Require``) awaited on the event loop,
    the body parsed straight from its bytes by its model (what it refuses goes to the one exception
    handler as FastAPI's own validation errors do), the endpoint on a worker thread; no dependency
    solving, no second pass over the body. The control plane's commit is the one request whose every
    fraction of a millisecond counts (docs/BENCHMARKS.md)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint
        # The grant the signature declares (and the document and the route test read).
        (require,) = [d.call for d in self.dependant.dependencies if isinstance(d.call, Require)]

        async def handle(request: Request) -> Response:
            access = await require(request)
            raw = await request.body()
            try:
                body = models.CommitMessagesRequest.model_validate_json(raw or b"null")
            except pydantic.ValidationError as e:
                raise RequestValidationError(e.errors(include_url=False)) from None
            params = request.path_params
            call = functools.partial(endpoint, request, params["database"], params["table"], body, access)
            response: Response = await anyio.to_thread.run_sync(call)
            return response

        return handle


def commit_messages_route() -> CommitMessagesRoute:
    """The commit-messages route, which the app matches ahead of the routers' routes."""
    return CommitMessagesRoute(
        paths.COMMIT_MESSAGES,
        commit_messages,
        methods=["POST"],
        response_model=models.CommitMessagesResponse,
        tags=["control plane"],
        # Documented as the routers' routes are (the handler checks the prefix through catalog_of).
        dependencies=[BEARER, PREFIX],
        responses={**ERRORS, **CONFLICT, **OUTCOME_UNKNOWN, **UNSUPPORTED},
    )


@router.post(
    paths.FILTER_COMMITTED,
    response_model=models.FilterCommittedResponse,
    tags=["control plane"],
)
def filter_committed(
    request: Request,
    database: str,
    table: str,
    body: models.FilterCommittedRequest,
    access: Annotated[Access, WRITE],
) -> models.FilterCommittedResponse:
    """The identifiers of ``commitUser`` not committed yet (a streaming writer's restart)."""
    committer = catalog_of(request).message_committer(
        table_identifier(database, table), body.commit_user, principal=access.principal
    )
    return models.FilterCommittedResponse(identifiers=committer.filter_committed(body.identifiers))


@router.get(
    paths.COMMITS,
    response_model=models.ListCommitsResponse,
    tags=["control plane"],
    dependencies=[READ],
)
def list_commits(
    request: Request,
    database: str,
    table: str,
    max_results: Annotated[int | None, Query(alias=paths.MAX_RESULTS)] = None,
    page_token: Annotated[str | None, Query(alias=paths.PAGE_TOKEN)] = None,
) -> models.ListCommitsResponse:
    """The table's commits from the event log, newest first (outcome, snapshot, attempts, principal)."""
    catalog = catalog_of(request)
    row = catalog.table_row(table_identifier(database, table))
    limit, before = convert.position_page(max_results, page_token)
    rows = audit.commit_history(catalog.engine, row.table_id, limit=limit + 1, before=before)
    records = [
        models.CommitRecord(
            **{**r, "commit_id": str(r["commit_id"])}, started_at=convert.millis(r["first_event_at"])
        )
        for r in rows[:limit]
    ]
    return models.ListCommitsResponse(
        commits=records,
        next_page_token=convert.position_token(rows[limit - 1]["position"]) if len(rows) > limit else None,
    )
