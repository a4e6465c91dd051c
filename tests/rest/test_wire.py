"""One definition of the bodies on both ends (``paimon_meta.rest.models``): the client sends, byte for
byte, the JSON it sent when it built its bodies by hand; the route the service serves for each request
parses it into the same values; what the service answers reads back on the client as it was sent."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel

import paimon_meta.catalog.rest
from paimon_meta import errors
from paimon_meta.catalog.rest import RemoteCommitter, RestCatalog, _Answer
from paimon_meta.rest import models, paths
from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings
from paimon_meta.table.write.overwrite import OverwriteSpec
from tests.commit.helpers import append_msg, data_file

NOT_FOUND = models.ErrorResponse(message="no", resource_type="TABLE", resource_name="db.t", code=404)


class _Recorder:
    """A transport in place of the client's keep-alive connections: records each request and answers
    from ``answers`` (by the path's last segment) as the service would."""

    sent: ClassVar[list[tuple[str, str, bytes | None]]] = []

    def __init__(self, uri: str, timeout: float) -> None:
        self.answers: dict[str, tuple[int, Any]] = {
            "config": (200, {"defaults": {"prefix": "paimon"}, "overrides": {}}),
            "commit-messages": (200, {"snapshotIds": [4], "deduplicated": False}),
            "filter-committed": (200, {"identifiers": [8]}),
            "t": (404, models.plain(NOT_FOUND)),
        }

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, resend_safe: bool
    ) -> _Answer:
        self.sent.append((method, target, body))
        status, answer = self.answers.get(target.partition("?")[0].rsplit("/", 1)[-1], (200, None))
        return _Answer(status, b"" if answer is None else json.dumps(answer).encode(), None, None)

    def close(self) -> None:
        return None


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, bytes | None]]]:
    """What the client sends, request by request (method, target, body bytes)."""
    monkeypatch.setattr(paimon_meta.catalog.rest, "_KeepAlive", _Recorder)
    monkeypatch.setattr(_Recorder, "sent", [])
    yield _Recorder.sent


def _old_commit_body(messages: bytes, identifier: int, **extra: Any) -> dict[str, Any]:
    """The commit-messages body as the client built it by hand before the shared models."""
    return {
        "commitUser": "u",
        "commitIdentifier": identifier,
        "messagesVersion": CURRENT_VERSION,
        "messages": base64.b64encode(messages).decode(),
        **extra,
    }


def test_the_client_sends_the_bytes_it_sent_before(sent: list[tuple[str, str, bytes | None]]) -> None:
    catalog = RestCatalog("http://service:1", "token", catalog_name="paimon")
    committer = RemoteCommitter(catalog.client, "db", "t", "u")
    msgs = [append_msg(0, 0, data_file(rows=1))]
    raw = serialize_commit_messages(msgs, CURRENT_VERSION)
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("p", pa.string())])

    catalog.create_database("db")
    with pytest.raises(errors.TableNotFoundError):  # the create was sent; reading the table back is not
        catalog.create_table("db.t", schema, partition_keys=["p"], options={"bucket": "1"})
    with pytest.raises(errors.TableNotFoundError):
        catalog.create_table("db.t", schema, primary_keys=["k"], comment="c\u00e9")
    assert committer.commit(msgs, 7).snapshot_ids == (4,)
    committer.commit(msgs, 8, overwrite=OverwriteSpec({"p": "a"}, dynamic=True), watermark=-1)
    committer.commit(msgs, 9, overwrite=OverwriteSpec({}, dynamic=False), properties={"k": "v"})
    committer.commit(msgs, 10, overwrite={"p": 1})
    assert committer.filter_committed([7, 8]) == [8]

    fields = [
        {"id": 0, "name": "k", "type": "BIGINT NOT NULL"},
        {"id": 1, "name": "p", "type": "STRING"},
    ]
    table = "/v1/paimon/databases/db/tables"
    expected: list[tuple[str, str, Any]] = [
        ("GET", "/v1/config?warehouse=paimon", None),
        ("POST", "/v1/paimon/databases", {"name": "db"}),
        (
            "POST",
            table,
            {
                "identifier": {"database": "db", "object": "t"},
                "schema": {
                    "fields": fields,
                    "partitionKeys": ["p"],
                    "primaryKeys": [],
                    "options": {"bucket": "1"},
                    "comment": None,
                },
            },
        ),
        ("GET", f"{table}/t", None),
        (
            "POST",
            table,
            {
                "identifier": {"database": "db", "object": "t"},
                "schema": {
                    "fields": fields,
                    "partitionKeys": [],
                    "primaryKeys": ["k"],
                    "options": {},
                    "comment": "c\u00e9",
                },
            },
        ),
        ("GET", f"{table}/t", None),
        ("POST", f"{table}/t/commit-messages", _old_commit_body(raw, 7)),
        (
            "POST",
            f"{table}/t/commit-messages",
            _old_commit_body(raw, 8, overwrite={"p": "a"}, overwriteMode="dynamic", watermark=-1),
        ),
        (
            "POST",
            f"{table}/t/commit-messages",
            _old_commit_body(raw, 9, overwrite={}, overwriteMode="static", properties={"k": "v"}),
        ),
        ("POST", f"{table}/t/commit-messages", _old_commit_body(raw, 10, overwrite={"p": "1"})),
        ("POST", f"{table}/t/filter-committed", {"commitUser": "u", "identifiers": [7, 8]}),
    ]
    assert [(m, t) for m, t, _ in sent] == [(m, t) for m, t, _ in expected]
    for (_, target, body), (_, _, old) in zip(sent, expected):
        assert body == (None if old is None else json.dumps(old).encode()), target


def _all_routes(routes: list[Any]) -> list[Any]:
    """The app's routes with included routers flattened (FastAPI keeps those as one entry each)."""
    out: list[Any] = []
    for route in routes:
        included = getattr(route, "original_router", None)
        out.extend(_all_routes(list(included.routes)) if included is not None else [route])
    return out


def test_the_service_route_parses_what_the_client_sends(sent: list[tuple[str, str, bytes | None]]) -> None:
    """Each body the client sends, parsed by the model of the route the service serves it with, has
    the values the client meant (and nothing dropped as an unknown field)."""
    catalog = RestCatalog("http://service:1", "token")
    committer = RemoteCommitter(catalog.client, "db", "t", "u")
    catalog.create_database("db")
    with pytest.raises(errors.TableNotFoundError):
        catalog.create_table("db.t", pa.schema([("k", pa.int64())]), comment=None)
    committer.commit([], 3, overwrite=OverwriteSpec({"p": "a"}, dynamic=False), watermark=5)
    committer.filter_committed([1])
    routes = {
        (method, route.path): route
        for route in _all_routes(list(create_app(ServiceSettings()).routes))
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }
    templates = {
        "/v1/paimon/databases": paths.DATABASES,
        "/v1/paimon/databases/db/tables": paths.TABLES,
        "/v1/paimon/databases/db/tables/t/commit-messages": paths.COMMIT_MESSAGES,
        "/v1/paimon/databases/db/tables/t/filter-committed": paths.FILTER_COMMITTED,
    }
    parsed: dict[str, BaseModel] = {}
    for method, target, body in sent:
        if body is None:
            continue
        route = routes[(method, templates[target])]
        (param,) = route.dependant.body_params
        model = param.field_info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel), target
        as_sent = json.loads(body)
        value = model.model_validate(as_sent)
        assert models.plain(value) | as_sent == models.plain(value), f"{target}: a field the service drops"
        parsed[templates[target]] = value
    assert parsed[paths.DATABASES] == models.CreateDatabaseRequest(name="db")
    create = parsed[paths.TABLES]
    assert isinstance(create, models.CreateTableRequest)
    assert create.identifier == models.Identifier(database="db", object="t")
    assert (
        create.schema_.fields == [{"id": 0, "name": "k", "type": "BIGINT"}] and create.schema_.comment is None
    )
    commit = parsed[paths.COMMIT_MESSAGES]
    assert isinstance(commit, models.CommitMessagesRequest)
    assert (commit.commit_user, commit.commit_identifier, commit.overwrite, commit.overwrite_mode) == (
        "u",
        3,
        {"p": "a"},
        "static",
    )
    assert (commit.watermark, commit.properties, commit.messages_version) == (5, None, CURRENT_VERSION)
    assert parsed[paths.FILTER_COMMITTED] == models.FilterCommittedRequest(commit_user="u", identifiers=[1])


def test_a_body_the_service_would_refuse_is_refused_before_it_is_sent(
    sent: list[tuple[str, str, bytes | None]],
) -> None:
    catalog = RestCatalog("http://service:1", "token")
    before = len(sent)
    with pytest.raises(errors.ValidationError, match="commit_user"):
        RemoteCommitter(catalog.client, "db", "t", "").commit([], 1)
    with pytest.raises(errors.ValidationError, match="commit_identifier"):
        RemoteCommitter(catalog.client, "db", "t", "u").commit([], 2**63)
    with pytest.raises(errors.ValidationError, match="identifiers"):
        RemoteCommitter(catalog.client, "db", "t", "u").filter_committed([-(2**63) - 1])
    # NUL: the service's metastore cannot store it (the same model refuses it on both ends)
    with pytest.raises(errors.ValidationError, match="NUL"):
        RemoteCommitter(catalog.client, "db", "t", "u\x00").commit([], 1)
    assert len(sent) == before


#: One answer of each kind the client reads, as the service builds it.
ANSWERS: list[BaseModel] = [
    models.ConfigResponse(defaults={"prefix": "paimon"}, overrides={"data-token.enabled": "false"}),
    models.ListDatabasesResponse(databases=["a", "b"], next_page_token="b"),
    models.ListTablesResponse(tables=[], next_page_token=None),
    models.GetTableResponse(
        id="uuid",
        name="t",
        path="file:/wh/db.db/t",
        is_external=False,
        schema_id=0,
        schema=models.SchemaBody(fields=[{"id": 0, "name": "k", "type": "BIGINT"}], options={"bucket": "1"}),
        owner="paimon_meta",
        created_at=1,
        created_by="paimon_meta",
    ),
    models.CommitMessagesResponse(snapshot_ids=[3, 4], deduplicated=True),
    models.FilterCommittedResponse(identifiers=[9]),
    models.ListCommitsResponse(
        commits=[
            models.CommitRecord(
                commit_id=str(uuid.uuid4()),
                commit_user="u",
                commit_identifier=2**63 - 1,
                commit_kind="APPEND",
                outcome="published",
                snapshot_id=1,
                attempts=1,
                retries=0,
                conflicts=0,
                elapsed_ms=1.25,
                final_reason=None,
                principal="job",
                started_at=1700000000123,
                conflict_check_ms=0.5,
                first_event_at=datetime(2026, 11, 25, 10, 0, 0, 123456, UTC),
                last_event_at=datetime(2026, 11, 25, 10, 0, 1, tzinfo=UTC),
            )
        ],
        next_page_token="1",
    ),
    models.ListCommitEventsResponse(
        events=[
            models.CommitEvent(
                event_id=5,
                created_at=datetime(2026, 1, 2, 3, 4, 5, 6, UTC),
                table_identifier="db.t",
                commit_id=uuid.uuid4(),
                event_type="prepared",
                attempt=1,
                commit_user="u",
                commit_identifier=1,
                commit_kind="APPEND",
                snapshot_id=None,
                duration_ms=None,
                payload={"files": 1, "nested": {"x": [1, 2.5, None]}},
            )
        ],
        next_page_token=None,
    ),
    models.ListSnapshotRecordingsResponse(
        recordings=[models.SnapshotRecording(snapshot_id=1, event_type="external", commit_id=uuid.uuid4())],
        next_page_token=None,
    ),
    models.TableRegistryResponse(
        identifier="db.t",
        location=None,
        schema_id=0,
        latest_snapshot_id=3,
        timeline=1,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        updated_at=datetime(2026, 1, 1, 0, 0, 0, 1, UTC),
    ),
    models.ErrorResponse(message="m", resource_type=None, resource_name=None, code=500),
]


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: type(a).__name__)
def test_what_the_service_answers_reads_back_as_it_was_sent(answer: BaseModel) -> None:
    """The service writes its answers as FastAPI does (JSON mode, by alias); the client reads them with
    the same model: equal values, and ``plain`` gives back the JSON object the service wrote."""
    wire = json.dumps(answer.model_dump(mode="json", by_alias=True)).encode()
    read = models.load(type(answer), wire)
    assert read == answer
    assert models.plain(read) == json.loads(wire)
