"""The service client's retries (``paimon_meta.catalog.rest``, ``paimon_meta.catalog.retry``) against a
scripted transport and a fake clock: what is sent again and what is not, how long it waits (the server's
``Retry-After`` honoured, never past the deadline), and the typed error naming the last cause."""

from __future__ import annotations

import email.utils
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pytest

import paimon_meta.catalog.rest
from paimon_meta import errors
from paimon_meta.catalog.rest import RemoteCommitter, RestCatalog, RetryEvent, _Answer, _KeepAlive, _NotSent
from paimon_meta.catalog.retry import DEADLINE, MAX_BACKOFF, RetryPolicy, parse_retry_after
from paimon_meta.rest import models

WALL = 1_800_000_000.0
CONFIG = {"defaults": {"prefix": "paimon"}, "overrides": {}}
COMMITTED = {"snapshotIds": [4], "deduplicated": True}
#: What a request is answered when nothing is scripted for it, by its path's last segment.
DEFAULTS: dict[str, Any] = {"config": CONFIG, "databases": {"databases": [], "nextPageToken": None}}


def _error(status: int, retry_after: str | None = None, message: str = "busy") -> _Answer:
    body = models.ErrorResponse(message=message, resource_type=None, resource_name=None, code=status)
    return _Answer(status, json.dumps(models.plain(body)).encode(), retry_after, None)


def _proxy(status: int) -> _Answer:
    """A proxy's own answer (its page, not the protocol's error body)."""
    return _Answer(status, b"<html><body>Bad Gateway</body></html>", None, None)


def _ok(payload: Any = None) -> _Answer:
    return _Answer(200, b"" if payload is None else json.dumps(payload).encode(), None, None)


Step = _Answer | BaseException


@dataclass
class _Sent:
    method: str
    target: str
    body: bytes | None
    request_id: str


class _Script:
    """In place of the keep-alive transport: answers each request with the next step scripted for its
    path's last segment (an answer, or an exception raised as the connection would), else 200."""

    steps: ClassVar[dict[str, list[Step]]] = {}
    sent: ClassVar[list[_Sent]] = []

    def __init__(self, uri: str, timeout: float) -> None:
        return None

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, resend_safe: bool
    ) -> _Answer:
        self.sent.append(_Sent(method, target, body, headers["X-Request-Id"]))
        segment = target.partition("?")[0].rsplit("/", 1)[-1]
        queue = self.steps.get(segment, [])
        step: Step = queue.pop(0) if queue else _ok(DEFAULTS.get(segment, COMMITTED))
        if isinstance(step, BaseException):
            raise step
        return step

    def close(self) -> None:
        return None


@dataclass
class _Clock:
    """Monotonic time that moves only when the client sleeps (and by ``per_attempt`` per request)."""

    now: float = 0.0
    slept: list[float] = field(default_factory=list)
    jitter: float = 0.5

    def policy(self, deadline: float = 30.0, max_backoff: float = 5.0) -> RetryPolicy:
        return RetryPolicy(
            deadline_seconds=deadline,
            max_backoff_seconds=max_backoff,
            clock=lambda: self.now,
            sleep=self.sleep,
            wall=lambda: WALL + self.now,
            uniform=lambda: self.jitter,
        )

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Step]]]:
    monkeypatch.setattr(paimon_meta.catalog.rest, "_KeepAlive", _Script)
    monkeypatch.setattr(_Script, "steps", {})
    monkeypatch.setattr(_Script, "sent", [])
    yield _Script.steps


def _sent(segment: str) -> list[_Sent]:
    return [s for s in _Script.sent if s.target.partition("?")[0].endswith("/" + segment)]


def _catalog(clock: _Clock, events: list[RetryEvent] | None = None, **policy: float) -> RestCatalog:
    on_retry = events.append if events is not None else None
    return RestCatalog("http://service:1", "token", retry=clock.policy(**policy), on_retry=on_retry)


def test_reads_are_sent_again_on_503_and_connection_errors(script: dict[str, list[Step]]) -> None:
    clock, events = _Clock(), list[RetryEvent]()
    script["databases"] = [
        _error(503),
        _NotSent(ConnectionRefusedError(111, "refused")),
        ConnectionResetError(104, "reset by peer"),
        _proxy(502),
        _ok({"databases": ["db"], "nextPageToken": None}),
    ]
    catalog = _catalog(clock, events)
    assert catalog.list_databases() == ["db"]
    assert catalog.client.retries == 4 and len(_sent("databases")) == 5
    # full jitter (0.5 of 0.1 s * 2**n here), nothing from the server to honour
    assert clock.slept == [0.05, 0.1, 0.2, 0.4]
    assert [(e.attempt, e.status) for e in events] == [(1, 503), (2, None), (3, None), (4, 502)]
    # each attempt has its own request id, all of one call
    ids = [s.request_id for s in _sent("databases")]
    assert len(set(ids)) == 5 and len({i.rpartition(".")[0] for i in ids}) == 1
    assert [i.rpartition(".")[2] for i in ids] == ["1", "2", "3", "4", "5"]


def test_the_backoff_is_capped(script: dict[str, list[Step]]) -> None:
    clock = _Clock(jitter=1.0)
    script["databases"] = [_error(503)] * 8
    _catalog(clock, max_backoff=1.0).list_databases()
    assert clock.slept == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]


def test_retry_after_is_honoured_in_seconds_and_as_a_date(script: dict[str, list[Step]]) -> None:
    clock = _Clock(jitter=0.0)
    in_7s = email.utils.formatdate(WALL + 7, usegmt=True)
    script["databases"] = [_error(503, "3"), _error(503, in_7s), _error(503, "not a delay")]
    _catalog(clock).list_databases()
    # the date is read against the wall clock at the time of the answer (WALL + 3 by then)
    assert clock.slept == [3.0, 4.0, 0.0]
    clock = _Clock(jitter=0.5)
    script["databases"] = [_error(503, "2")]
    _catalog(clock).list_databases()
    assert clock.slept == [2.05]  # at least what the server asked, spread by the jitter


def test_retry_after_is_clamped_to_the_deadline_then_the_last_cause_is_raised(
    script: dict[str, list[Step]],
) -> None:
    clock = _Clock()
    script["databases"] = [_error(503, "100", "metastore unavailable"), _error(503, "100", "still down")]
    with pytest.raises(errors.MetastoreUnavailableError) as caught:
        _catalog(clock, deadline=10.0).list_databases()
    assert clock.slept == [10.0] and len(_sent("databases")) == 2
    e = caught.value
    assert e.fields["status"] == 503 and e.fields["attempts"] == 2
    assert e.fields["request_id"] == _sent("databases")[-1].request_id
    assert "still down" in str(e) and e.fields["request_id"] in str(e)
    assert "gave up after 2 attempts" in str(e) and f"{DEADLINE}=10" in str(e)


def test_the_deadline_bounds_the_retries(script: dict[str, list[Step]]) -> None:
    clock = _Clock(jitter=1.0)
    script["databases"] = [_error(503)] * 100
    with pytest.raises(errors.MetastoreUnavailableError) as caught:
        _catalog(clock, deadline=5.0, max_backoff=1.0).list_databases()
    assert sum(clock.slept) == pytest.approx(5.0) and clock.now == pytest.approx(5.0)
    assert caught.value.fields["attempts"] == len(_sent("databases")) == len(clock.slept) + 1


def test_a_deadline_of_zero_sends_once(script: dict[str, list[Step]]) -> None:
    clock = _Clock()
    script["databases"] = [ConnectionResetError(104, "reset")]
    catalog = _catalog(clock, deadline=0.0)
    with pytest.raises(errors.MetastoreUnavailableError, match="unreachable") as caught:
        catalog.list_databases()
    assert clock.slept == [] and catalog.client.retries == 0
    assert caught.value.fields["attempts"] == 1 and caught.value.fields["status"] is None


def test_a_commit_is_sent_again_with_the_same_body_until_it_is_answered(
    script: dict[str, list[Step]],
) -> None:
    clock = _Clock()
    script["commit-messages"] = [
        _error(503, "1"),
        _error(500, message="the outcome is unknown"),
        ConnectionResetError(104, "reset after sending"),
        TimeoutError("timed out"),
        _ok(COMMITTED),
    ]
    catalog = _catalog(clock)
    result = RemoteCommitter(catalog.client, "db", "t", "u").commit([], 7)
    assert result.deduplicated and result.snapshot_ids == (4,)
    bodies = [s.body for s in _sent("commit-messages")]
    assert len(bodies) == 5 and len(set(bodies)) == 1
    assert json.loads(bodies[0] or b"")["commitIdentifier"] == 7


def test_a_commit_is_never_sent_again_on_a_4xx(script: dict[str, list[Step]]) -> None:
    clock = _Clock()
    catalog = _catalog(clock)
    committer = RemoteCommitter(catalog.client, "db", "t", "u")
    for status, error in [
        (409, errors.CommitConflictError),
        (400, errors.ValidationError),
        (403, errors.AccessDeniedError),
        (429, errors.ValidationError),
    ]:
        script["commit-messages"] = [_error(status, "1")]
        with pytest.raises(error) as caught:
            committer.commit([], 7)
        assert caught.value.fields["attempts"] == 1 and caught.value.fields["status"] == status
    assert len(_sent("commit-messages")) == 4 and clock.slept == []


def test_a_conflict_after_an_attempt_that_may_have_landed_is_an_unknown_outcome(
    script: dict[str, list[Step]],
) -> None:
    """A 409 to a re-sent commit cannot say "nothing landed" when an earlier attempt may still be in
    flight on the server: the caller must not delete the commit's files."""
    script["commit-messages"] = [TimeoutError("timed out"), _error(409, message="conflict")]
    with pytest.raises(errors.CommitOutcomeUnknownError, match="earlier attempt") as caught:
        RemoteCommitter(_catalog(_Clock()).client, "db", "t", "u").commit([], 7)
    assert not errors.is_definite_failure(caught.value)


def test_a_commit_past_the_deadline_is_an_unknown_outcome_naming_the_last_cause(
    script: dict[str, list[Step]],
) -> None:
    script["commit-messages"] = [_error(503, "1", "lock unavailable")] * 50
    with pytest.raises(errors.CommitOutcomeUnknownError) as caught:
        RemoteCommitter(_catalog(_Clock(), deadline=3.0).client, "db", "t", "u").commit([], 7)
    e = caught.value
    assert "lock unavailable" in str(e) and "re-send the same identifier" in str(e)
    assert e.fields["status"] == 503 and e.fields["request_id"] == _sent("commit-messages")[-1].request_id


@pytest.mark.parametrize(
    "failure",
    [
        _error(500, message="internal error"),
        _proxy(502),
        _proxy(504),
        ConnectionResetError(104, "reset after sending"),
        TimeoutError("timed out"),
    ],
    ids=["500", "502", "504", "reset", "timeout"],
)
def test_a_create_that_may_have_reached_the_service_is_not_sent_again(
    script: dict[str, list[Step]], failure: Step
) -> None:
    clock = _Clock()
    script["databases"] = [failure]
    with pytest.raises(errors.MetastoreUnavailableError):
        _catalog(clock).create_database("db")
    assert [s.method for s in _sent("databases")] == ["POST"] and clock.slept == []


def test_a_create_is_sent_again_only_when_it_provably_did_nothing(script: dict[str, list[Step]]) -> None:
    """Refused before sending, or answered 503 (the service answers 503 only before any effect)."""
    script["databases"] = [_NotSent(ConnectionRefusedError(111, "refused")), _error(503, "1"), _ok()]
    catalog = _catalog(_Clock())
    catalog.create_database("db")
    assert [s.method for s in _sent("databases")] == ["POST", "POST", "POST"]
    script["t"] = [_error(503), _ok()]
    catalog.drop_table("db.t")
    assert len(_sent("t")) == 2


def test_the_services_own_502_is_not_retried(script: dict[str, list[Step]]) -> None:
    """The service answers 502 when storage refused it (credentials, a missing bucket): not transient."""
    catalog = _catalog(_Clock())
    script["databases"] = [_error(502, message="storage refused the request")]
    with pytest.raises(errors.MetastoreUnavailableError, match="storage refused"):
        catalog.list_databases()
    script["commit-messages"] = [_error(502, message="storage refused the request")]
    with pytest.raises(errors.CommitOutcomeUnknownError, match="storage refused"):
        RemoteCommitter(catalog.client, "db", "t", "u").commit([], 7)
    assert catalog.client.retries == 0
    script["commit-messages"] = [_proxy(502), _proxy(504)]
    assert RemoteCommitter(catalog.client, "db", "t", "u").commit([], 7).deduplicated
    assert catalog.client.retries == 2


def test_a_refused_certificate_is_not_retried(script: dict[str, list[Step]]) -> None:
    script["databases"] = [_NotSent(ssl.SSLCertVerificationError("self-signed certificate"))]
    with pytest.raises(errors.MetastoreUnavailableError, match="self-signed"):
        _catalog(_Clock()).list_databases()
    assert len(_sent("databases")) == 1


def test_the_first_request_is_retried_too(script: dict[str, list[Step]]) -> None:
    """A client created while the service restarts waits for it (``GET /v1/config``)."""
    script["config"] = [_NotSent(ConnectionRefusedError(111, "refused")), _error(503, "1")]
    clock = _Clock()
    catalog = _catalog(clock)
    assert catalog.prefix == "paimon" and catalog.client.retries == 2


def test_retry_options_come_from_the_catalog_options(script: dict[str, list[Step]]) -> None:
    catalog = paimon_meta.catalog.rest.connect_service(
        "http://service:1", "token", **{DEADLINE: "0", MAX_BACKOFF: "2.5", "s3.endpoint": "http://s3"}
    )
    assert (catalog.client.retry.deadline_seconds, catalog.client.retry.max_backoff_seconds) == (0, 2.5)
    assert not catalog.client.retry.enabled and catalog.options["s3.endpoint"] == "http://s3"
    default = RestCatalog("http://service:1", "token").client.retry
    assert (default.deadline_seconds, default.max_backoff_seconds) == (30.0, 5.0)
    for bad in ["-1", "soon", "nan", "inf"]:
        with pytest.raises(errors.ValidationError, match=DEADLINE):
            RetryPolicy.from_options({DEADLINE: bad})


def test_parse_retry_after() -> None:
    assert parse_retry_after("5", WALL) == 5.0
    assert parse_retry_after(" 12 ", WALL) == 12.0
    assert parse_retry_after(email.utils.formatdate(WALL + 30, usegmt=True), WALL) == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000", 1445412470.0) == 10.0  # UTC
    assert parse_retry_after(email.utils.formatdate(WALL - 30, usegmt=True), WALL) == 0.0
    for bad in ["", "-1", "1.5", "soon", "Wed, 99 Foo 2015"]:
        assert parse_retry_after(bad, WALL) is None


def test_a_refused_connection_is_known_not_to_have_been_sent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    transport = _KeepAlive(f"http://127.0.0.1:{port}", 5)
    with pytest.raises(_NotSent) as caught:
        transport.exchange("POST", "/v1/x", b"{}", {}, resend_safe=False)
    assert isinstance(caught.value.cause, ConnectionRefusedError)


def test_create_table_is_not_sent_twice_after_a_lost_answer(script: dict[str, list[Step]]) -> None:
    script["tables"] = [ConnectionResetError(104, "reset after sending")]
    with pytest.raises(errors.MetastoreUnavailableError, match="unreachable"):
        _catalog(_Clock()).create_table("db.t", pa.schema([("k", pa.int64())]))
    assert len(_sent("tables")) == 1


def test_already_exists_after_a_503_says_the_earlier_attempt_may_have_done_it(
    script: dict[str, list[Step]],
) -> None:
    exists = models.ErrorResponse(message="exists", resource_type="TABLE", resource_name="db.t", code=409)
    conflict = _Answer(409, json.dumps(models.plain(exists)).encode(), None, None)
    schema = pa.schema([("k", pa.int64())])
    catalog = _catalog(_Clock())
    script["tables"] = [_error(503, "1"), conflict]
    with pytest.raises(errors.TableAlreadyExistsError, match="answered 503, may have done it"):
        catalog.create_table("db.t", schema)
    script["tables"] = [conflict]
    with pytest.raises(errors.TableAlreadyExistsError) as caught:
        catalog.create_table("db.t", schema)
    assert "may have done it" not in str(caught.value)
    script["t"] = [_error(503, "1"), _error(404, message="no such table")]
    with pytest.raises(errors.NotFoundError, match="may have done it"):
        catalog.drop_table("db.t")
    script["t"] = [_error(503, "1"), _error(404, message="no such table")]
    with pytest.raises(errors.NotFoundError) as missing:
        catalog.get_table("db.t")  # a read's earlier attempts changed nothing: no note
    assert "may have done it" not in str(missing.value)


def test_a_request_lost_on_a_reused_connection_is_not_taken_for_unsent() -> None:
    """A reused connection fails after the request went out, and the new connection is refused: the
    request may have reached the service, so the error is not ``_NotSent``."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_once() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        listener.close()  # nothing listens any more: a new connection is refused
        conn.recv(65536)  # the second request arrives on the kept connection ...
        conn.close()  # ... and is never answered

    server = threading.Thread(target=serve_once, daemon=True)
    server.start()
    transport = _KeepAlive(f"http://127.0.0.1:{port}", 5)
    assert transport.exchange("GET", "/v1/config", None, {}, resend_safe=True).status == 200
    with pytest.raises(ConnectionError) as caught:
        transport.exchange("POST", "/v1/commit", b"{}", {}, resend_safe=True)
    assert not isinstance(caught.value, _NotSent) and isinstance(caught.value.__cause__, _NotSent)
    server.join(5)
    transport.close()
