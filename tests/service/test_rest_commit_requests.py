"""The work a REST commit does outside the table lock (issue 39, item 3), counted: the S3 requests of a
steady-state commit-messages request (the S3 server's request log) and the Postgres round trips of
authenticating a request, by a static token or an OIDC JWT (a hook on the driver's connections)."""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import pq

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db import budget
from paimon_meta.db.models import Privilege
from paimon_meta.errors import RequestBoundError
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from paimon_meta.table import schema_change
from tests.fixtures.oidc import IdentityProvider
from tests.fixtures.s3 import MotoS3, TracedRequest
from tests.fixtures.service import FAST_LOCK, make_principal
from tests.ops.helpers import create, prepare, read_keys
from tests.service.helpers import P, auth, commit_body, messages_body, seed

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

URL = f"{P}/databases/db/tables/t/commit-messages"
USER = "writer"


@pytest.fixture
def s3_catalog(clean_db: str, moto_server: MotoS3) -> Iterator[MetastoreCatalog]:
    bucket = moto_server.create_bucket()
    catalog = paimon_meta.connect(clean_db, f"s3://{bucket}/warehouse", **moto_server.options(), **FAST_LOCK)
    try:
        create(catalog)
        yield catalog
    finally:
        catalog.close()
        moto_server.drop_bucket(bucket)


def _body(catalog: MetastoreCatalog, identifier: int) -> dict[str, Any]:
    return messages_body(prepare(catalog.get_table("db.t"), [identifier], user=USER), USER, identifier)


def _app(catalog: MetastoreCatalog, **settings: Any) -> TestClient:
    configured = ServiceSettings(max_body_bytes=1 << 22, **settings)
    return TestClient(create_app(configured, state=ServiceState(configured, catalog)))


def _schema_lists(log: list[TracedRequest]) -> list[TracedRequest]:
    return [t for t in log if t.method == "GET" and "list-type=2" in t.query and "schema" in t.query]


def test_a_steady_commit_lists_no_schema_directory(s3_catalog: MetastoreCatalog, moto_server: MotoS3) -> None:
    """The first commit of a table lists ``schema/`` (nothing cached); the next ones do not: the
    registry row's schema id names the cached table object (``ServiceState.commit_table``)."""
    writer = auth(make_principal(s3_catalog, "writer", [("write", "db", "t")]))
    with _app(s3_catalog, auth_cache_seconds=0) as client:
        lists = []
        for i in (1, 2, 3):
            body = _body(s3_catalog, i)
            with moto_server.trace() as log:
                response = client.post(URL, json=body, headers=writer)
            assert response.status_code == 200, response.text
            lists.append(len(_schema_lists(log)))
    assert lists == [1, 0, 0]
    assert read_keys(s3_catalog, identifier="db.t") == [1, 2, 3]


def test_a_schema_another_replica_changed_is_used(s3_catalog: MetastoreCatalog) -> None:
    """Replica A caches the table's row and schema; replica B (here: the catalog, as any replica does)
    alters the schema; A's next commit is checked under the lock, reads the row again and publishes on
    the new schema, once."""
    writer = auth(make_principal(s3_catalog, "writer", [("write", "db", "t")]))
    with _app(s3_catalog, auth_cache_seconds=0) as replica_a:
        assert replica_a.post(URL, json=_body(s3_catalog, 1), headers=writer).status_code == 200
        body = _body(s3_catalog, 2)  # built before the ALTER, as a client's in-flight commit
        altered = s3_catalog.alter_table_changes("db.t", [schema_change.SetOption("a", "1")])
        assert altered.id == 1
        response = replica_a.post(URL, json=body, headers=writer)
        assert response.status_code == 200, response.text
    table = s3_catalog.get_table("db.t")
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == 2
    assert latest.schema_id == 1  # not the schema A had cached
    assert read_keys(s3_catalog, identifier="db.t") == [1, 2]


def test_c_a_snapshot_commit_heads_no_file_it_reads(
    s3_catalog: MetastoreCatalog, moto_server: MotoS3
) -> None:
    """The REST ``commit`` (a client-built snapshot) checks the manifest lists it names by reading them
    (a missing one is a 400 naming the field), never a HEAD then a GET of the same file; its schema is
    the table's own (no HEAD of it either)."""
    base = seed(s3_catalog, "db.s")
    writer = auth(make_principal(s3_catalog, "writer", [("write", "db", "s")]))
    with _app(s3_catalog, auth_cache_seconds=0) as client:
        with moto_server.trace() as log:
            response = client.post(
                f"{P}/databases/db/tables/s/commit", json=commit_body(base), headers=writer
            )
        assert response.status_code == 200, response.text
        assert response.json()["success"] is True
        got = {t.key for t in log if t.method == "GET"}
        assert got, log  # the manifest lists were read
        heads = [t.key for t in log if t.method == "HEAD"]
        assert [k for k in heads if k in got or "/manifest/" in k or "/schema/" in k] == []
        # A list that is not there is still refused as the client's mistake, naming the field.
        latest = s3_catalog.get_table("db.s").latest_snapshot()
        assert latest is not None
        missing = commit_body(latest, deltaManifestList="manifest-list-gone-0")
        response = client.post(f"{P}/databases/db/tables/s/commit", json=missing, headers=writer)
        assert response.status_code == 400, response.text
        assert "deltaManifestList" in response.text
        # The next commit of the table on this replica lists no schema directory either.
        with moto_server.trace() as log:
            response = client.post(
                f"{P}/databases/db/tables/s/commit", json=commit_body(latest), headers=writer
            )
        assert response.status_code == 200 and response.json()["success"] is True, response.text
        assert _schema_lists(log) == []
        assert [t.key for t in log if t.method == "HEAD" and "/snapshot/" not in t.key] == []


class _RoundTrips:
    """Every Postgres connection opened while installed traced by libpq (``PQtrace``): a round trip is a
    frontend ``Query`` (simple protocol) or ``Sync`` (extended protocol) message, after which the client
    waits for the server's ``ReadyForQuery``. Connections are traced from after their startup."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.traced: list[tuple[psycopg.Connection[Any], Path]] = []
        self.mutex = threading.Lock()

    def count(self) -> int:
        """Round trips so far on every traced connection (libpq's buffer flushed first)."""
        total = 0
        with self.mutex:
            for conn, path in self.traced:
                if not conn.closed:
                    conn.pgconn.untrace()  # flushes; traced again below
                    self._trace(conn, path)
                text = path.read_text()
                total += len(re.findall(r"^F\t\d+\t(?:Query|Sync)\b", text, re.MULTILINE))
        return total

    @staticmethod
    def _trace(conn: psycopg.Connection[Any], path: Path) -> None:
        conn.pgconn.trace(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT))
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def opened(self, conn: psycopg.Connection[Any]) -> None:
        with self.mutex:
            path = self.directory / f"pq-{len(self.traced)}.trace"
            self._trace(conn, path)
            self.traced.append((conn, path))


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _RoundTrips:
    trips = _RoundTrips(tmp_path)
    connect = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def traced(cls: type[psycopg.Connection[Any]], *args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = connect(cls, *args, **kwargs)
        trips.opened(conn)
        return conn

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(traced))
    # ``psycopg.connect`` (what SQLAlchemy calls) is the class's method bound at import
    monkeypatch.setattr(psycopg, "connect", functools.partial(traced, psycopg.Connection))
    return trips


def test_b_authenticating_a_request_is_one_postgres_round_trip(
    s3_catalog: MetastoreCatalog, round_trips: _RoundTrips
) -> None:
    """A static token's principal, grants and service grants come back in one round trip (one
    statement on an autocommit connection: no ping, BEGIN or ROLLBACK around it); with
    ``auth_cache_seconds=0`` a revoked token is refused by the very next request."""
    token = make_principal(s3_catalog, "writer", [("write", "db", "t")])
    settings = ServiceSettings(auth_cache_seconds=0)
    state = ServiceState(settings, s3_catalog)
    s3_catalog.engine.dispose()  # the engine's connections are opened again, traced
    try:
        assert state.authenticate(token) is not None  # opens (and traces) the connection it needs
        for _ in range(3):
            before = round_trips.count()
            access = state.authenticate(token)
            assert round_trips.count() - before == 1
            assert access is not None and access.principal == "writer"
            assert access.may(PermissionAccess.UPDATE, Resource.table("db", "t"))
        assert round_trips.traced, "no connection was traced: the hook measured nothing"
        # Under a request's deadline: bounded in the same round trip (a local statement_timeout first).
        with budget.bounded(budget.QueryBudget("read", 5.0)):
            before = round_trips.count()
            assert state.authenticate(token) is not None
            assert round_trips.count() - before == 1
        spent = budget.QueryBudget("read", 5.0)
        spent.cancel(budget.DISCONNECT)
        with budget.bounded(spent), pytest.raises(RequestBoundError):
            state.authenticate(token)
        state.principals.revoke_tokens("writer")
        assert state.authenticate(token) is None
    finally:
        state.close()


def test_c_an_oidc_sign_in_of_an_existing_user_is_one_postgres_round_trip(
    s3_catalog: MetastoreCatalog, round_trips: _RoundTrips, identity_provider: IdentityProvider
) -> None:
    """A JWT's user, its groups' grants and its stored assignments come back in one round trip once
    the user exists (its first sign-in creates it: more); with ``auth_cache_seconds=0`` a grant
    revoked from its group is gone at the very next request."""
    principals = Principals(s3_catalog.engine)
    principals.create_group("writers")
    principals.grant("group:writers", Privilege.WRITE, database="db", table="t")
    settings = ServiceSettings(auth_cache_seconds=0, oidc=identity_provider.settings(groups_claim="groups"))
    state = ServiceState(settings, s3_catalog)
    token = identity_provider.token("carol", groups=["writers", "nobody"])
    table = Resource.table("db", "t")
    s3_catalog.engine.dispose()  # the engine's connections are opened again, traced
    try:
        first = state.authenticate(token)  # creates user:carol (its own transaction, once)
        assert first is not None and first.principal == "user:carol"
        for _ in range(3):
            before = round_trips.count()
            access = state.authenticate(token)
            assert round_trips.count() - before == 1
            assert access is not None and access.principal == "user:carol"
            assert access.groups == ("group:writers",)
            assert access.may(PermissionAccess.UPDATE, table)
        assert round_trips.traced, "no connection was traced: the hook measured nothing"
        with budget.bounded(budget.QueryBudget("read", 5.0)):
            before = round_trips.count()
            assert state.authenticate(token) is not None
            assert round_trips.count() - before == 1
        spent = budget.QueryBudget("read", 5.0)
        spent.cancel(budget.DISCONNECT)
        with budget.bounded(spent), pytest.raises(RequestBoundError):
            state.authenticate(token)
        principals.revoke("group:writers", Privilege.WRITE, database="db", table="t")
        access = state.authenticate(token)
        assert access is not None and not access.may(PermissionAccess.UPDATE, table)
        # Another issuer's user of the same name never signs in as it, on the one-round-trip path too.
        principals.sign_in("user:dave", created_by="oidc:https://old-idp.example")
        assert state.authenticate(identity_provider.token("dave")) is None
    finally:
        state.close()
