"""Vended storage credentials (``GET .../token``) through the service, in process, on moto S3 and STS.

What a principal gets follows its grant (read: read-only actions, write: read-write), the answer carries
the storage options a client needs and an expiry both Java/pypaimon (``expiresAtMillis``) and the spec
(``expiresAt``) name, credentials are reused per principal/table/level instead of one STS call per
fetch, every answer is in the access log, STS failures are 503 (transient) or 502 (refused), a server
without vending says so (501, ``data-token.enabled=false``), and no secret reaches a log line, an
event, an error body or the metrics.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Assignment, ColumnRange, Resource, ResourceType
from paimon_meta.io import get_file_io
from paimon_meta.io.sts import StsSettings
from paimon_meta.metastore.access_events import access_events
from paimon_meta.metastore.assignments import Assignments, Policies
from paimon_meta.metastore.principals import Access, Principals
from paimon_meta.service.app import create_app
from paimon_meta.service.data_policies import Restriction, table_policies
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.s3 import MotoS3
from tests.fixtures.service import FAST_LOCK, make_principal
from tests.service.helpers import P, auth, seed

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

ROLE = "arn:aws:iam::123456789012:role/paimon-vending"
TOKEN_URL = f"{P}/databases/db/tables/t/token"
SECRET_KEYS = ("s3.access-key", "s3.secret-key", "s3.session-token")


@dataclass
class Service:
    client: TestClient
    catalog: MetastoreCatalog
    state: ServiceState
    moto: MotoS3
    reader: str
    writer: str
    stranger: str


def _service(catalog: MetastoreCatalog, sts: StsSettings | None, options: dict[str, str]) -> ServiceState:
    settings = ServiceSettings(auth_cache_seconds=60, options=options, sts=sts)
    return ServiceState(settings, catalog)


@pytest.fixture
def service(clean_db: str, moto_server: MotoS3) -> Iterator[Service]:
    bucket = moto_server.create_bucket()
    options = moto_server.options()
    catalog = paimon_meta.connect(clean_db, f"s3://{bucket}/warehouse", **options, **FAST_LOCK)
    try:
        seed(catalog)
        reader = make_principal(catalog, "reader", [("read", "db", "t")])
        writer = make_principal(catalog, "writer", [("write", "db", None)])
        stranger = make_principal(catalog, "stranger", [("admin", "other", None)])
        state = _service(catalog, StsSettings(role_arn=ROLE), options)
        client = TestClient(create_app(state.settings, state=state), raise_server_exceptions=False)
        yield Service(client, catalog, state, moto_server, reader, writer, stranger)
    finally:
        catalog.close()
        moto_server.drop_bucket(bucket)


def _token(svc: Service, token: str, **params: str) -> dict[str, object]:
    response = svc.client.get(TOKEN_URL, headers=auth(token), params=params)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_config_tells_clients_to_fetch_data_tokens(service: Service) -> None:
    body = service.client.get("/v1/config?warehouse=paimon", headers=auth(service.reader)).json()
    assert body["overrides"]["data-token.enabled"] == "true"
    assert body["defaults"]["paimon-meta.storage-credentials"].startswith("sts:")


def test_a_reader_gets_read_credentials_that_reach_the_table(service: Service) -> None:
    before = time.time() * 1000
    body = _token(service, service.reader)
    token = body["token"]
    assert isinstance(token, dict)
    assert set(SECRET_KEYS) <= set(token)
    # The connection options the client needs besides keys, from the server's own s3.* options.
    assert token["s3.endpoint"] == service.moto.endpoint
    assert token["s3.path-style-access"] == "true"
    assert token["s3.access-key"] != service.moto.options()["s3.access-key"]
    expires = body["expiresAtMillis"]
    assert body["expiresAt"] == expires
    assert isinstance(expires, int)
    # 6 h by default: well over the hour before expiry at which pypaimon and Java fetch again.
    assert 5.9 * 3600e3 < expires - before < 6.1 * 3600e3
    # A FileIO built from the token alone reads the table's files.
    table = service.catalog.get_table("db.t")
    io = get_file_io(table.path, {k: str(v) for k, v in token.items()})
    assert io.exists(f"{table.path}/snapshot/snapshot-1")

    [event] = access_events(service.catalog.engine, principal="reader")
    assert (event.table_identifier, event.level, event.event_type) == ("db.t", "read", "credentials_vended")
    assert event.actions == ["s3:GetObject", "s3:ListBucket"]
    assert event.expires_at is not None  # a vend hands out credentials until then
    assert abs(event.expires_at.timestamp() * 1000 - expires) < 1000
    assert event.payload["session_name"] == "pm-read-reader"
    assert event.payload["cached"] is False


def test_the_grant_decides_the_level(service: Service) -> None:
    write = _token(service, service.writer)
    [event] = access_events(service.catalog.engine, principal="writer")
    assert event.level == "write" and "s3:PutObject" in event.actions and "s3:DeleteObject" in event.actions
    # A writer may ask for less.
    read = _token(service, service.writer, access="read")
    assert read["token"] != write["token"]
    assert access_events(service.catalog.engine, principal="writer")[0].level == "read"
    # A reader asking for write credentials is refused, and nothing is vended or recorded.
    refused = service.client.get(TOKEN_URL, headers=auth(service.reader), params={"access": "write"})
    assert refused.status_code == 403
    assert "no UPDATE on TABLE" in refused.json()["message"]
    assert access_events(service.catalog.engine, principal="reader") == []


@pytest.mark.parametrize("who", ["stranger", "nobody"])
def test_no_read_grant_no_credentials(service: Service, who: str) -> None:
    token = service.stranger if who == "stranger" else "pmt_not-a-token"
    response = service.client.get(TOKEN_URL, headers=auth(token))
    assert response.status_code == (403 if who == "stranger" else 401)
    assert not set(SECRET_KEYS) & set(response.text.split('"'))
    assert access_events(service.catalog.engine) == []


def test_unknown_table_is_404_and_vends_nothing(service: Service) -> None:
    admin = make_principal(service.catalog, "admin", [("admin", None, None)])
    response = service.client.get(f"{P}/databases/db/tables/nope/token", headers=auth(admin))
    assert response.status_code == 404
    assert response.json()["resourceType"] == "TABLE"
    assert access_events(service.catalog.engine) == []


def test_credentials_are_reused_per_principal_table_and_level(service: Service) -> None:
    first = _token(service, service.reader)
    again = _token(service, service.reader)
    assert again == first
    other = _token(service, service.writer, access="read")
    assert other["token"] != first["token"]  # another principal: its own STS session
    events = access_events(service.catalog.engine, principal="reader")
    assert [e.payload["cached"] for e in events] == [True, False]
    text_ = service.client.get("/metrics", headers=auth(_admin(service))).text
    assert (
        'paimon_meta_service_credentials_vended_total{catalog="paimon",level="read",source="sts"} 2.0'
        in text_
    )
    assert (
        'paimon_meta_service_credentials_vended_total{catalog="paimon",level="read",source="cache"} 1.0'
        in text_
    )


def test_credentials_near_the_end_of_their_use_are_vended_again(service: Service) -> None:
    first = _token(service, service.reader)
    vending = service.state.vending
    assert vending is not None
    # Pretend half the lifetime has passed: the cached credentials are no longer handed out.
    key = next(iter(vending._cache))
    old = vending._cache[key]
    vending._cache[key] = type(old)(
        **{
            **{f: getattr(old, f) for f in old.__dataclass_fields__},
            "expires_at": old.expires_at.fromtimestamp(time.time() + 2 * 3600, old.expires_at.tzinfo),
        }
    )
    again = _token(service, service.reader)
    assert again["token"] != first["token"]
    assert [e.payload["cached"] for e in access_events(service.catalog.engine)] == [False, False]


def _admin(svc: Service) -> str:
    return make_principal(svc.catalog, f"admin-{time.monotonic_ns()}", [("admin", None, None)])


def test_sts_unreachable_is_503_with_retry_after(clean_db: str, moto_server: MotoS3) -> None:
    bucket = moto_server.create_bucket()
    catalog = paimon_meta.connect(clean_db, f"s3://{bucket}/warehouse", **moto_server.options(), **FAST_LOCK)
    try:
        seed(catalog)
        reader = make_principal(catalog, "reader", [("read", "db", "t")])
        state = _service(
            catalog, StsSettings(role_arn=ROLE, endpoint="http://127.0.0.1:9"), moto_server.options()
        )
        client = TestClient(create_app(state.settings, state=state), raise_server_exceptions=False)
        response = client.get(TOKEN_URL, headers=auth(reader))
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "1"
        assert "STS unreachable" in response.json()["message"]
        assert access_events(catalog.engine) == []
    finally:
        catalog.close()
        moto_server.drop_bucket(bucket)


def test_sts_refusing_the_server_is_502_naming_the_role(clean_db: str, moto_server: MotoS3) -> None:
    bucket = moto_server.create_bucket()
    catalog = paimon_meta.connect(clean_db, f"s3://{bucket}/warehouse", **moto_server.options(), **FAST_LOCK)
    try:
        seed(catalog)
        reader = make_principal(catalog, "reader", [("read", "db", "t")])
        # An ExternalId STS's own parameter rules refuse (too short once past our check: 2 characters
        # is STS's minimum, so use one character by building the settings' fields directly).
        sts = StsSettings(role_arn=ROLE)
        object.__setattr__(sts, "external_id", "x")
        state = _service(catalog, sts, moto_server.options())
        client = TestClient(create_app(state.settings, state=state), raise_server_exceptions=False)
        response = client.get(TOKEN_URL, headers=auth(reader))
        assert response.status_code == 502, response.text
        assert ROLE in response.json()["message"]
        assert "retry-after" not in response.headers
    finally:
        catalog.close()
        moto_server.drop_bucket(bucket)


def test_without_vending_the_server_says_so(clean_db: str, tmp_path: object) -> None:
    catalog = paimon_meta.connect(clean_db, str(tmp_path), **FAST_LOCK)
    try:
        seed(catalog)
        reader = make_principal(catalog, "reader", [("read", "db", "t")])
        state = _service(catalog, None, {})
        client = TestClient(create_app(state.settings, state=state), raise_server_exceptions=False)
        config = client.get("/v1/config", headers=auth(reader)).json()
        assert config["overrides"]["data-token.enabled"] == "false"
        assert config["defaults"]["paimon-meta.storage-credentials"].startswith("off")
        response = client.get(TOKEN_URL, headers=auth(reader))
        assert response.status_code == 501
        assert "--sts-role-arn" in response.json()["message"]
    finally:
        catalog.close()


def test_a_vended_secret_is_never_logged_recorded_or_shown(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = _token(service, service.writer)
    _token(service, service.writer)  # a cached answer logs too
    token = body["token"]
    assert isinstance(token, dict)
    secrets = [str(token[k]) for k in SECRET_KEYS]
    # Errors after a vend (a refused level, a missing table) name no secret either.
    bodies = [
        service.client.get(TOKEN_URL, headers=auth(service.reader), params={"access": "write"}).text,
        service.client.get(f"{P}/databases/db/tables/nope/token", headers=auth(service.writer)).text,
        service.client.get("/metrics", headers=auth(_admin(service))).text,
    ]
    with service.catalog.engine.connect() as conn:
        rows = conn.execute(text("SELECT to_jsonb(e)::text FROM paimon_access_events e")).scalars().all()
        lines = [json.dumps(r) for r in rows]
    logged = [record.getMessage() for record in caplog.records] + [
        repr(record.args) for record in caplog.records
    ]
    assert any("vended write credentials for db.t" in line for line in logged)
    for secret in secrets:
        for where, texts in (("log", logged), ("event", lines), ("body", bodies)):
            assert not any(secret in t for t in texts), f"a vended secret appears in a {where}"
    # The dataclass's repr hides them too (it is what a debugger or an f-string shows).
    vending = service.state.vending
    assert vending is not None
    shown = repr(next(iter(vending._cache.values())))
    assert not any(secret in shown for secret in secrets)


def test_vending_needs_a_warehouse_on_s3(clean_db: str, tmp_path: object) -> None:
    catalog = paimon_meta.connect(clean_db, str(tmp_path), **FAST_LOCK)
    try:
        with pytest.raises(ValidationError, match="not on S3") as raised:
            _service(catalog, StsSettings(role_arn=ROLE), {})
        assert raised.value.fields["option"] == "sts-role-arn"
    finally:
        catalog.close()


def test_serve_refuses_sts_on_a_local_warehouse(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "paimon_meta.cli",
            "serve",
            "--warehouse",
            str(tmp_path),
            "--sts-role-arn",
            ROLE,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "--sts-role-arn" in done.stderr and "not on S3" in done.stderr


@dataclass
class _Policies:
    """A policy source scripted by the test: the restrictions of (principal, table)."""

    of: dict[tuple[str, str], list[Restriction]]

    def restrictions(self, access: Access, identifier: str) -> list[Restriction]:
        return self.of.get((access.principal, identifier), [])


def test_a_principal_whose_reads_a_policy_restricts_gets_no_data_token(service: Service) -> None:
    """Raw file access would bypass a row filter, a mask or a column range: refused (403 naming the
    policies, nothing vended or recorded) unless the operator marked the principal a trusted engine."""
    policies = _Policies(
        {
            ("reader", "db.t"): [
                Restriction("ROW_FILTER", "group:analysts"),
                Restriction("COLUMN_MASKING", "reader", "email"),
            ],
            ("writer", "db.t"): [Restriction("COLUMN", "writer")],
        }
    )
    settings = dataclasses.replace(service.state.settings, trusted_engines=frozenset({"writer"}))
    app = create_app(settings, state=ServiceState(settings, service.catalog))
    app.dependency_overrides[table_policies] = lambda: policies
    with TestClient(app, raise_server_exceptions=False) as client:
        refused = client.get(TOKEN_URL, headers=auth(service.reader))
        assert refused.status_code == 403, refused.text
        body = refused.json()
        assert (body["resourceType"], body["resourceName"]) == ("TABLE", "db.t")
        assert "a row filter (of group:analysts)" in body["message"]
        assert "a column mask on 'email' (of reader)" in body["message"]
        assert "trusted engine" in body["message"]
        assert access_events(service.catalog.engine, principal="reader") == []
        # the trusted engine, restricted too, gets its credentials
        trusted = client.get(TOKEN_URL, headers=auth(service.writer))
        assert trusted.status_code == 200, trusted.text
        assert set(SECRET_KEYS) <= set(trusted.json()["token"])
        assert [e.principal for e in access_events(service.catalog.engine, principal="writer")] == ["writer"]
        # the policies gone, the reader gets its credentials again
        policies.of.clear()
        assert client.get(TOKEN_URL, headers=auth(service.reader)).status_code == 200


def test_serve_reads_the_trusted_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    from paimon_meta.cli.main import build_parser
    from paimon_meta.cli.serve import _trusted_engines

    parser = build_parser()
    monkeypatch.setenv("PAIMON_META_TRUSTED_ENGINES", "spark-etl, ,user:trino")
    assert _trusted_engines(parser.parse_args(["serve"])) == frozenset({"spark-etl", "user:trino"})
    flag = parser.parse_args(["serve", "--trusted-engines", "engine-a"])
    assert _trusted_engines(flag) == frozenset({"engine-a"})
    monkeypatch.delenv("PAIMON_META_TRUSTED_ENGINES")
    assert _trusted_engines(parser.parse_args(["serve"])) == frozenset()


def test_stored_policies_and_column_ranges_refuse_the_data_token(service: Service) -> None:
    """The token route reads the catalog's stored policies (its own, a group's) and column ranges."""
    catalog = service.catalog
    key = catalog.registry.catalog_key
    row = catalog.table_row("db.t")
    Principals(catalog.engine).create_group("analysts", created_by="tests")
    engine_token = make_principal(catalog, "etl-engine", [("read", "db", "t")])
    store = Assignments(catalog.engine, catalog_key=key)
    store.add_member("group:analysts", "reader", added_by="tests")
    filter_json = json.dumps(
        {
            "kind": "LEAF",
            "transform": {"name": "FIELD_REF", "fieldRef": {"index": 0, "name": "k", "type": "BIGINT"}},
            "function": "GREATER_THAN",
            "literals": [0],
        }
    )
    Policies(catalog.engine, catalog_key=key).create(
        row.table_id,
        "db.t",
        "group:analysts",
        policy_type="ROW_FILTER",
        on_column=None,
        body=filter_json,
        created_by="tests",
    )
    columns = Assignment(
        "etl-engine",
        Resource(ResourceType.COLUMN, "db", "t"),
        PermissionAccess.SELECT,
        columns=ColumnRange.allowlist(["k"]),
    )
    store.grant(columns, granted_by="tests")
    refused = service.client.get(TOKEN_URL, headers=auth(service.reader))
    assert refused.status_code == 403, refused.text
    assert "a row filter (of group:analysts)" in refused.json()["message"]
    refused = service.client.get(TOKEN_URL, headers=auth(engine_token))
    assert refused.status_code == 403 and "a column range (of etl-engine)" in refused.json()["message"]
    # a writer with neither gets its credentials
    assert service.client.get(TOKEN_URL, headers=auth(service.writer)).status_code == 200
    # the operator trusts the engine
    settings = dataclasses.replace(service.state.settings, trusted_engines=frozenset({"etl-engine"}))
    app = create_app(settings, state=ServiceState(settings, catalog))
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.get(TOKEN_URL, headers=auth(engine_token)).status_code == 200
        assert client.get(TOKEN_URL, headers=auth(service.reader)).status_code == 403
