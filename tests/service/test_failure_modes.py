"""The service's answers when its dependencies fail or it is full: 503 + ``Retry-After`` with the
protocol's body while the metastore is down (whatever the driver raised), ready again by itself; a
transient fault repeated on the server when that is safe (and only then); load shed at once at the
admission bounds; storage failing past its retries answered 503 (transient) or 502 (refused)."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors
import pytest
import sqlalchemy.exc
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import FileIOError, MetastoreUnavailableError
from paimon_meta.service.app import create_app
from paimon_meta.service.errors import OverloadedError
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.service import FAST_LOCK, make_principal
from tests.ops.helpers import create, prepare, write
from tests.service.helpers import P, auth, messages_body
from tests.torture.pg import PrivatePostgres

pytestmark = pytest.mark.postgres

TABLE_URL = f"{P}/databases/db/tables/t"


def _client(catalog: MetastoreCatalog, **settings: Any) -> TestClient:
    config = ServiceSettings(**{"auth_cache_seconds": 0, "max_body_bytes": 1 << 20, **settings})
    return TestClient(create_app(config, state=ServiceState(config, catalog)), raise_server_exceptions=False)


def _messages_body(
    catalog: MetastoreCatalog, identifier: int, user: str = "writer", table: str = "db.t"
) -> dict[str, Any]:
    return messages_body(prepare(catalog.get_table(table), [identifier], user=user), user, identifier)


def _assert_unavailable(response: Any, what: str) -> None:
    assert response.status_code == 503, (what, response.status_code, response.text)
    assert int(response.headers["retry-after"]) >= 1, what
    body = response.json()
    assert body["code"] == 503 and body["message"], (what, body)
    assert "Traceback" not in response.text


def test_every_route_answers_503_with_retry_after_while_the_metastore_is_down(
    private_pg: PrivatePostgres, tmp_path: Path
) -> None:
    catalog = paimon_meta.connect(private_pg.url, str(tmp_path / "warehouse"), **FAST_LOCK)
    try:
        create(catalog)
        write(catalog, [0])  # a snapshot to read
        admin = auth(make_principal(catalog, "admin", [("admin", None, None)]))
        fresh = auth(make_principal(catalog, "fresh", [("admin", None, None)]))
        body = _messages_body(catalog, 1)
        # The token's answer cached for the whole test: the routes themselves meet the outage (and a
        # token never seen before meets it in the middleware's authentication).
        with _client(catalog, auth_cache_seconds=3600) as client:
            probes: list[tuple[str, str, dict[str, Any] | None]] = [
                ("GET", f"{P}/databases", None),
                ("GET", f"{P}/databases/db", None),
                ("GET", f"{P}/databases/db/tables", None),
                ("GET", TABLE_URL, None),
                ("GET", f"{TABLE_URL}/snapshot", None),
                ("GET", f"{TABLE_URL}/commits", None),
                ("GET", f"{TABLE_URL}/events", None),
                ("POST", f"{P}/databases", {"name": "other", "options": {}}),
                ("POST", f"{TABLE_URL}/commit-messages", body),
                ("POST", f"{TABLE_URL}/filter-committed", {"commitUser": "writer", "identifiers": [1]}),
            ]
            before = {
                (method, url): client.request(method, url, json=payload, headers=admin).status_code
                for method, url, payload in probes
                if method == "GET"
            }
            assert all(status < 300 for status in before.values()), before
            private_pg.stop()
            try:
                for method, url, payload in probes:
                    response = client.request(method, url, json=payload, headers=admin)
                    _assert_unavailable(response, f"{method} {url}")
                _assert_unavailable(client.get(f"{P}/databases", headers=fresh), "authentication")
                _assert_unavailable(client.get("/readyz"), "/readyz")
                assert client.get("/healthz").status_code == 200
            finally:
                private_pg.start()
            # Ready again by itself: the pool's pre-ping replaces the dead connections.
            assert client.get("/readyz").status_code == 200
            for method, url, payload in probes:
                response = client.request(method, url, json=payload, headers=admin)
                assert response.status_code in (200, 204), (method, url, response.text)
            assert client.post(f"{TABLE_URL}/commit-messages", json=body, headers=admin).json()[
                "deduplicated"
            ]
            metrics = client.get("/metrics", headers=admin).text
            assert 'paimon_meta_service_dependency_errors_total{kind="unavailable"}' in metrics
            # The lock's own recovery after an outage is counted in the same registry.
            assert "paimon_meta_lock_released_after_reconnect_total" in metrics
            assert "paimon_meta_lock_deferred_releases_pending 0.0" in metrics
    finally:
        catalog.close()


def _serialization_failure() -> Exception:
    """What SQLAlchemy raises for a serialization failure (the driver's error as ``orig``)."""
    return sqlalchemy.exc.OperationalError(
        "SELECT 1", {}, psycopg.errors.SerializationFailure("could not serialize")
    )


def test_a_serialization_failure_is_repeated_on_the_server(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(service_catalog)
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    original = MetastoreCatalog.create_database
    calls: list[str] = []

    def fails_once(self: MetastoreCatalog, name: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        if len(calls) == 1:
            raise _serialization_failure()
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(MetastoreCatalog, "create_database", fails_once)
    with _client(service_catalog) as client:
        response = client.post(f"{P}/databases", json={"name": "other", "options": {}}, headers=admin)
        assert response.status_code == 200, response.text
        assert calls == ["other", "other"]
        assert "other" in service_catalog.list_databases()
        metrics = client.get("/metrics", headers=admin).text
        assert 'paimon_meta_service_retries_total{kind="serialization"} 1.0' in metrics


def test_a_write_whose_connection_reset_is_not_repeated_but_a_read_is(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(service_catalog)
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    reset = psycopg.OperationalError("server closed the connection unexpectedly")
    calls: list[str] = []
    original_list = MetastoreCatalog.list_databases

    def create_resets(self: MetastoreCatalog, name: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(f"create {name}")
        raise MetastoreUnavailableError("metastore unreachable during create_database") from reset

    def list_resets_once(self: MetastoreCatalog, *args: Any, **kwargs: Any) -> Any:
        calls.append("list")
        if calls.count("list") == 1:
            raise MetastoreUnavailableError("metastore unreachable during list_databases") from reset
        return original_list(self, *args, **kwargs)

    monkeypatch.setattr(MetastoreCatalog, "create_database", create_resets)
    monkeypatch.setattr(MetastoreCatalog, "list_databases", list_resets_once)
    with _client(service_catalog) as client:
        # A COMMIT may have happened before the reset: the server does not run the write again.
        _assert_unavailable(
            client.post(f"{P}/databases", json={"name": "other", "options": {}}, headers=admin), "create"
        )
        assert calls == ["create other"]
        listed = client.get(f"{P}/databases", headers=admin)
        assert listed.status_code == 200 and calls[1:] == ["list", "list"]


def test_an_unexpected_error_is_still_a_500_without_a_trace(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug raised while handling a driver error is a bug (500 naming the request id), not a 503."""
    create(service_catalog)
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))

    def bug(self: MetastoreCatalog, *args: Any, **kwargs: Any) -> Any:
        try:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        except psycopg.Error:
            raise KeyError("a bug in the handler") from None

    monkeypatch.setattr(MetastoreCatalog, "list_databases", bug)
    with _client(service_catalog) as client:
        response = client.get(f"{P}/databases", headers=admin)
    assert response.status_code == 500 and "request id" in response.json()["message"]
    assert "retry-after" not in response.headers and "KeyError" not in response.text


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (FileIOError("S3 write failed (SlowDown, HTTP 503)", code="SlowDown", status=503), 503),
        (
            FileIOError("S3 write failed: ReadTimeoutError", code="ReadTimeoutError", outcome_unknown=True),
            503,
        ),
        (FileIOError("S3 write failed (AccessDenied, HTTP 403)", code="AccessDenied", status=403), 502),
        (FileIOError("write failed: File name too long", errno=errno.ENAMETOOLONG), 502),
        (FileIOError("write failed: No space left on device", errno=errno.ENOSPC), 503),
    ],
    ids=["throttled", "timeout", "access-denied", "name-too-long", "disk-full"],
)
def test_storage_failing_past_its_retries(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch, error: FileIOError, status: int
) -> None:
    create(service_catalog)
    writer = auth(make_principal(service_catalog, "writer", [("write", "db", "t")]))
    body = _messages_body(service_catalog, 1)

    def storage_fails(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise error

    from paimon_meta.commit.metastore.group import GroupCommitter

    monkeypatch.setattr(GroupCommitter, "commit", storage_fails)
    with _client(service_catalog) as client:
        response = client.post(f"{TABLE_URL}/commit-messages", json=body, headers=writer)
    assert response.status_code == status, response.text
    assert response.json()["code"] == status and "storage" in response.json()["message"]
    assert ("retry-after" in response.headers) == (status == 503)


def test_commits_beyond_a_tables_bound_are_shed_at_once(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One commit of db.t in flight and ``max_table_commits=1``: a second one of db.t is answered 503 +
    Retry-After at once (nothing prepared); a commit of another table is not; once the first is done,
    the re-sent one lands."""
    create(service_catalog)
    create(service_catalog, "db.u")
    writer = auth(make_principal(service_catalog, "writer", [("write", "db", None)]))
    from paimon_meta.commit.metastore.group import GroupCommitter

    original = GroupCommitter.commit
    entered, release = threading.Event(), threading.Event()

    def slow_first(self: GroupCommitter, prepared: Any) -> Any:
        if not entered.is_set():
            entered.set()
            assert release.wait(30)
        return original(self, prepared)

    monkeypatch.setattr(GroupCommitter, "commit", slow_first)
    first_body, second_body = _messages_body(service_catalog, 1), _messages_body(service_catalog, 2)
    other = _messages_body(service_catalog, 3, table="db.u")
    with _client(service_catalog, max_table_commits=1, max_in_flight=8) as client:
        results: list[Any] = []
        first = threading.Thread(
            target=lambda: results.append(
                client.post(f"{TABLE_URL}/commit-messages", json=first_body, headers=writer)
            )
        )
        first.start()
        try:
            assert entered.wait(30)
            shed = client.post(f"{TABLE_URL}/commit-messages", json=second_body, headers=writer)
            _assert_unavailable(shed, "second commit of db.t")
            assert "too many commits" in shed.json()["message"]
            # Another table is not held up by db.t's bound.
            landed = client.post(f"{P}/databases/db/tables/u/commit-messages", json=other, headers=writer)
            assert landed.status_code == 200, landed.text
            assert client.get("/healthz").status_code == 200
        finally:
            release.set()
            first.join(30)
        assert results[0].status_code == 200, results[0].text
        again = client.post(f"{TABLE_URL}/commit-messages", json=second_body, headers=writer)
        assert again.status_code == 200 and again.json()["snapshotIds"] == [2]


def test_requests_beyond_the_replicas_bound_are_shed_but_health_is_not(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(service_catalog)
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    entered, release = threading.Event(), threading.Event()
    original = MetastoreCatalog.list_databases

    def blocks(self: MetastoreCatalog, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        assert release.wait(30)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MetastoreCatalog, "list_databases", blocks)
    with _client(service_catalog, max_in_flight=1) as client:
        results: list[Any] = []
        held = threading.Thread(target=lambda: results.append(client.get(f"{P}/databases", headers=admin)))
        held.start()
        try:
            assert entered.wait(30)
            _assert_unavailable(client.get(f"{TABLE_URL}", headers=admin), "a second request")
            assert client.get("/healthz").status_code == 200
            metrics = client.get("/metrics", headers=admin)
            assert metrics.status_code == 200
            assert 'paimon_meta_service_shed_total{bound="in_flight"} 1.0' in metrics.text
        finally:
            release.set()
            held.join(30)
        assert results[0].status_code == 200
        assert client.get(f"{TABLE_URL}", headers=admin).status_code == 200


def test_admission_slots_are_given_back_when_a_commit_fails(service_catalog: MetastoreCatalog) -> None:
    """A failed commit gives its table's and the replica's slots back (a leak would shed every later
    commit of the table); the replica-wide bound holds across tables."""
    state = ServiceState(ServiceSettings(max_table_commits=1, max_commits=1), service_catalog)
    with pytest.raises(RuntimeError), state.admit_commit("db.t"):
        raise RuntimeError("the commit failed")
    # shed if the failed commit's slot had leaked; db.u meets the replica-wide bound
    with (
        state.admit_commit("db.t"),
        pytest.raises(OverloadedError, match="this replica"),
        state.admit_commit("db.u"),
    ):
        pass
    with state.admit_commit("db.u"):
        pass
    assert (
        state.admit_request()
        and not ServiceState(ServiceSettings(max_in_flight=0), service_catalog).admit_request()
    )
    state.request_done()
