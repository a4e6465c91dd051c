"""``connect_service``'s retries against the real app (uvicorn on a free port, in this process) behind a
fault-injecting ASGI wrapper: 503s with ``Retry-After`` before the app runs, and answers lost after it ran
(a 500 "outcome unknown" in place of the app's answer, a connection cut in the middle of it). A commit sent
through all of them lands exactly once; a create whose answer was lost is not sent again."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from paimon_meta import errors
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.rest import RestCatalog, RetryEvent
from paimon_meta.catalog.retry import RetryPolicy
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.service import free_port, make_principal
from tests.service.helpers import published_count

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


class Faults:
    """The app behind scripted faults. ``plan["POST commit-messages"] = ["503", "500", "reset"]``: the
    next three such requests (method and the path's last segment) get, in order, a 503 with
    ``Retry-After: 1`` without reaching the app; the app's answer replaced by a 500 "outcome unknown";
    the app's answer cut off after its headers (the connection closed before the body is complete).
    ``reached`` counts the requests that reached the app, by the same key."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.plan: dict[str, list[str]] = {}
        self.reached: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = f"{scope['method']} {scope['path'].rsplit('/', 1)[-1]}"
        planned = self.plan.get(key) or []
        fault = planned.pop(0) if planned else None
        if fault == "503":
            await _answer(send, 503, "metastore unavailable (retry)", retry_after="1")
            return
        answer: list[Message] = []

        async def keep(message: Message) -> None:
            answer.append(message)

        # Counted before the app runs: once the app has sent its answer the client may already be
        # asserting on the count (counting after the await raced with it on a loaded machine).
        self.reached[key] += 1
        await self.app(scope, receive, send if fault is None else keep)
        if fault == "500":
            await _answer(send, 500, "the outcome is unknown: re-send the same commit to resolve it")
        elif fault == "reset":
            # The headers, promising one byte more than the app's body (which may be empty), then the
            # connection is cut: the client reads no complete answer.
            start, size = answer[0], sum(len(m.get("body", b"")) for m in answer[1:])
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            headers.append((b"content-length", str(size + 1).encode()))
            await send({**start, "headers": headers})
            raise ConnectionAbortedError("answer lost (injected)")


async def _answer(send: Send, status: int, message: str, retry_after: str | None = None) -> None:
    body = json.dumps({"message": message, "resourceType": None, "resourceName": None, "code": status})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", retry_after.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body.encode()})


@contextlib.contextmanager
def serve_app(app: ASGIApp) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        for _ in range(600):
            if server.started:
                break
            time.sleep(0.05)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def served(service_catalog: MetastoreCatalog) -> Iterator[tuple[Faults, str, str]]:
    """(the faults, the service's URL, an admin token)."""
    token = make_principal(service_catalog, "job", [("admin", None, None)])
    settings = ServiceSettings(auth_cache_seconds=0, max_body_bytes=1 << 20)
    faults = Faults(create_app(settings, state=ServiceState(settings, service_catalog)))
    with serve_app(faults) as base:
        yield faults, base, token


class _Client:
    """A ``RestCatalog`` whose waits are recorded instead of slept, with its retry events."""

    def __init__(self, base: str, token: str) -> None:
        self.slept: list[float] = []
        self.events: list[RetryEvent] = []
        policy = RetryPolicy(sleep=self.slept.append)
        self.catalog = RestCatalog(base, token, retry=policy, on_retry=self.events.append)


def _keys(catalog: RestCatalog, identifier: str) -> list[Any]:
    rb = catalog.get_table(identifier).new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())


def test_a_commit_lands_exactly_once_through_503s_lost_answers_and_cut_connections(
    served: tuple[Faults, str, str], service_catalog: MetastoreCatalog
) -> None:
    faults, base, token = served
    client = _Client(base, token)
    client.catalog.create_database("db")
    faults.plan["POST tables"] = ["503"]
    table = client.catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
    assert faults.reached["POST tables"] == 1  # created once: the 503 did not reach the app

    writes = table.new_batch_write_builder()
    write = writes.new_write()
    write.write_arrow(pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))
    faults.plan["POST commit-messages"] = ["503", "500", "reset", "reset"]
    result = writes.new_commit().commit(write.prepare_commit())

    # The first attempt the app served committed; the three after it were deduplicated by identifier.
    assert faults.reached["POST commit-messages"] == 4
    assert result.snapshot_ids == (1,) and result.deduplicated
    assert published_count(service_catalog) == 1
    assert service_catalog.get_table("db.t").snapshot_manager.list_snapshot_ids() == [1]
    assert _keys(client.catalog, "db.t") == [1, 2, 3]
    commits = [e for e in client.events if e.path.endswith("/commit-messages")]
    assert [e.status for e in commits] == [503, 500, None, None]
    assert client.slept[len(client.events) - len(commits)] >= 1.0  # Retry-After: 1 honoured
    assert client.catalog.client.retries == 5  # one for the create, four for the commit


def test_a_create_whose_answer_was_lost_is_not_sent_again(
    served: tuple[Faults, str, str], service_catalog: MetastoreCatalog
) -> None:
    faults, base, token = served
    client = _Client(base, token)
    faults.plan["POST databases"] = ["reset"]
    with pytest.raises(errors.MetastoreUnavailableError) as caught:
        client.catalog.create_database("db")
    assert caught.value.fields["attempts"] == 1 and client.slept == []
    assert faults.reached["POST databases"] == 1 and service_catalog.list_databases() == ["db"]
    faults.plan["POST databases"] = ["500"]  # what the service answered, not a 503: it may have acted
    with pytest.raises(errors.MetastoreUnavailableError):
        client.catalog.create_database("db2")
    assert faults.reached["POST databases"] == 2 and client.catalog.client.retries == 0


def test_reads_wait_for_the_service(
    served: tuple[Faults, str, str], service_catalog: MetastoreCatalog
) -> None:
    faults, base, token = served
    faults.plan["GET config"] = ["503", "reset"]
    client = _Client(base, token)  # created while the service answers 503, then cuts a connection
    client.catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
    faults.plan["GET t"] = ["503", "reset", "503"]
    assert client.catalog.get_table("db.t").schema.field_names == ["k", "v"]
    assert faults.reached["GET t"] == 3  # the create's own read-back, the cut one, the last one
    assert client.catalog.client.retries == 5


def test_past_the_deadline_the_last_cause_is_raised(served: tuple[Faults, str, str]) -> None:
    faults, base, token = served
    client = _Client(base, token)
    client.catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
    table = client.catalog.get_table("db.t")
    writes = table.new_batch_write_builder()
    write = writes.new_write()
    write.write_arrow(pa.table({"k": pa.array([1], pa.int64()), "v": ["a"]}))
    messages = write.prepare_commit()
    # a deadline the recorded (not slept) waits use up: the clock advances by them
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    client.catalog.client.retry = RetryPolicy(deadline_seconds=5.0, clock=lambda: now[0], sleep=sleep)
    faults.plan["POST commit-messages"] = ["503"] * 100
    with pytest.raises(errors.CommitOutcomeUnknownError, match="gave up after") as caught:
        writes.new_commit().commit(messages)
    e = caught.value
    assert e.fields["status"] == 503 and "metastore unavailable" in str(e)
    assert e.fields["request_id"] in str(e) and e.fields["attempts"] >= 2
    assert faults.reached["POST commit-messages"] == 0
