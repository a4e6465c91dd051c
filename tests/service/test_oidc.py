"""Bearer JWTs of an OIDC issuer (service/oidc.py): signed by keys this test makes, the JWKS served by a
local issuer (tests/fixtures/oidc.py), checked by the app in-process (and once by a real ``serve``)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.cli import serve as serve_cli
from paimon_meta.cli.main import build_parser
from paimon_meta.cli.main import main as cli_main
from paimon_meta.db.models import Privilege
from paimon_meta.errors import PrincipalAlreadyExistsError, ValidationError
from paimon_meta.metastore.principals import Principals, hash_token
from paimon_meta.service.app import create_app
from paimon_meta.service.oidc import OidcSettings
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.oidc import AUDIENCE, IdentityProvider, rsa_key
from tests.fixtures.service import ServiceProcess, make_principal, spawn_service
from tests.service.helpers import P, auth, seed

pytestmark = pytest.mark.postgres

TABLE = f"{P}/databases/db/tables/t"


@contextlib.contextmanager
def oidc_client(
    catalog: MetastoreCatalog, oidc: OidcSettings, *, auth_cache_seconds: float = 0
) -> Iterator[TestClient]:
    """The app in-process with ``oidc`` (no failed-auth throttle: the tests send many bad tokens)."""
    settings = ServiceSettings(auth_cache_seconds=auth_cache_seconds, auth_failure_burst=0, oidc=oidc)
    app = create_app(settings, state=ServiceState(settings, catalog))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def seeded(service_catalog: MetastoreCatalog) -> MetastoreCatalog:
    seed(service_catalog)
    return service_catalog


def metastore_rows(catalog: MetastoreCatalog) -> dict[str, Any]:
    """Principals, tokens and grants as they are, and the row count of every table."""
    with catalog.engine.connect() as conn:
        tables = conn.execute(
            text("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        ).scalars()
        rows: dict[str, Any] = {
            # The names come from the catalog, not from input.
            t: conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one()  # noqa: S608
            for t in sorted(tables)
        }
        for table in ("paimon_principals", "paimon_tokens", "paimon_grants"):
            everything = text(f"SELECT * FROM {table}")  # noqa: S608 (a constant name)
            rows[f"{table} rows"] = sorted(map(tuple, conn.execute(everything).all()))
    return rows


def principal_row(catalog: MetastoreCatalog, name: str) -> Any:
    with catalog.engine.connect() as conn:
        return conn.execute(
            text("SELECT name, created_by FROM paimon_principals WHERE name = :n"), {"n": name}
        ).one_or_none()


def test_a_valid_token_signs_in_a_principal_with_no_grants_until_granted(
    seeded: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    with oidc_client(seeded, idp.settings()) as client:
        assert principal_row(seeded, "user:alice") is None
        r = client.get(f"{P}/databases", headers=auth(idp.token("alice")))
        assert r.status_code == 200, r.text
        assert r.json()["databases"] == []  # no grants: sees nothing
        assert tuple(principal_row(seeded, "user:alice")) == ("user:alice", f"oidc:{idp.issuer}")
        r = client.get(TABLE, headers=auth(idp.token("alice", kid="ec-1")))  # the EC key too
        assert r.status_code == 403, r.text
        assert "user:alice" in r.json()["message"]
        Principals(seeded.engine).grant("user:alice", Privilege.READ, database="db", table="t")
        assert client.get(TABLE, headers=auth(idp.token("alice"))).status_code == 200
        # Signing in again creates nothing more.
        assert len(Principals(seeded.engine).list()) == 1


def test_group_grants_apply_and_names_cannot_impersonate(
    seeded: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    principals = Principals(seeded.engine)
    assert principals.create_group("analysts", created_by="tests") == "group:analysts"
    principals.grant("group:analysts", Privilege.READ, database="db")
    make_principal(seeded, "admin", [("admin", None, None)])  # an operator's principal
    with oidc_client(seeded, idp.settings(groups_claim="groups")) as client:
        member = auth(idp.token("bob", groups=["analysts", "no-such-group", 7]))
        assert client.get(TABLE, headers=member).status_code == 200
        assert client.get(TABLE, headers=auth(idp.token("bob", groups="analysts"))).status_code == 200
        assert client.get(TABLE, headers=auth(idp.token("bob"))).status_code == 403
        # A subject named like a group or an operator's principal is neither.
        for subject in ("analysts", "group:analysts", "admin"):
            r = client.get(TABLE, headers=auth(idp.token(subject)))
            assert r.status_code == 403, (subject, r.text)
        assert client.delete(TABLE, headers=auth(idp.token("admin"))).status_code == 403
        # A group claim naming the operator's principal or a user gives nothing either.
        sneaky = auth(idp.token("eve", groups=["admin", "user:bob", "../admin"]))
        assert client.delete(TABLE, headers=sneaky).status_code == 403
        assert client.get(TABLE, headers=sneaky).status_code == 403
    assert principal_row(seeded, "user:admin") is not None and principal_row(seeded, "admin") is not None
    with pytest.raises(ValidationError, match="no static tokens"):
        principals.issue_token("group:analysts")
    with pytest.raises(ValidationError, match="no static tokens"):
        principals.issue_token("user:bob")


def _refused_tokens(idp: IdentityProvider) -> dict[str, str]:
    now = int(time.time())
    valid = idp.token("mallory")
    header, _, signature = valid.split(".")
    other = idp.token("admin")
    stranger = rsa_key()
    return {
        "expired": idp.token("mallory", iat=now - 600, exp=now - 120),
        "not yet valid (nbf)": idp.token("mallory", nbf=now + 120),
        "issued in the future (iat)": idp.token("mallory", iat=now + 120),
        "wrong audience": idp.token("mallory", aud="someone-else"),
        "wrong issuer": idp.token("mallory", iss=idp.issuer + "-evil"),
        "no exp": idp.token("mallory", drop=("exp",)),
        "no aud": idp.token("mallory", drop=("aud",)),
        "unsigned (alg none)": idp.unsigned("mallory"),
        "HS256 with the public key as secret": idp.hs256_with_public_key("mallory"),
        "unknown kid": idp.token("mallory", kid="not-published", key=stranger),
        "no kid": idp.token("mallory", headers={"kid": None}),
        "tampered payload": f"{header}.{other.split('.')[1]}.{signature}",
        "signed by a key not in the JWKS": idp.token("mallory", kid="rsa-1", key=stranger),
        "alg RS256 on the EC key": idp.token("mallory", kid="ec-1", key=stranger, alg="RS256"),
        "subject not a name": idp.token("mallory", sub="a\nb"),
        "garbage": "eyJhbGciOiJSUzI1NiJ9.not-base64!.x",
    }


def test_invalid_tokens_are_refused_with_401_and_nothing_written(
    seeded: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    refused = _refused_tokens(idp)
    with oidc_client(seeded, idp.settings(leeway_seconds=30)) as client:
        before = metastore_rows(seeded)
        for why, token in refused.items():
            for method, path in (("GET", TABLE), ("GET", f"{P}/databases"), ("DELETE", TABLE)):
                r = client.request(method, path, headers=auth(token))
                assert r.status_code == 401, (why, method, r.text)
                assert r.json()["code"] == 401
        assert metastore_rows(seeded) == before
        # The same client with a valid token is let in (the refusals above were the tokens').
        assert client.get(f"{P}/databases", headers=auth(idp.token("mallory"))).status_code == 200
        assert metastore_rows(seeded) != before


def test_the_refusal_reason_is_logged_without_the_token(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider, caplog: pytest.LogCaptureFixture
) -> None:
    idp = identity_provider
    now = int(time.time())
    tokens = {
        "expired": idp.token(iat=now - 600, exp=now - 300),
        "audience": idp.token(aud="other"),
        "signature": idp.token(key=rsa_key()),
    }
    with (
        oidc_client(service_catalog, idp.settings(leeway_seconds=0)) as client,
        caplog.at_level(logging.INFO, logger="paimon_meta"),
    ):
        for token in tokens.values():
            assert client.get(f"{P}/databases", headers=auth(token)).status_code == 401
    refusals = [r.getMessage() for r in caplog.records if "JWT refused" in r.getMessage()]
    assert len(refusals) == 3, refusals
    for reason, message in zip(tokens, refusals, strict=True):
        assert reason in message, message
    everything = "\n".join(r.getMessage() for r in caplog.records)
    for token in tokens.values():
        assert token not in everything
        assert token.split(".")[2] not in everything  # not even its signature


def test_a_rotated_key_is_accepted_without_a_restart(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    idp.add_key("rsa-2", publish=False)
    settings = idp.settings(refresh_cooldown_seconds=0.3, jwks_cache_seconds=0.6)
    with oidc_client(service_catalog, settings) as client:
        assert client.get(f"{P}/databases", headers=auth(idp.token())).status_code == 200
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="rsa-2"))).status_code == 401
        idp.published.add("rsa-2")
        time.sleep(0.35)
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="rsa-2"))).status_code == 200
        # The old key is still published and still accepted; withdrawn, it is not once the keys expire.
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="rsa-1"))).status_code == 200
        idp.published.discard("rsa-1")
        time.sleep(0.65)
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="rsa-1"))).status_code == 401
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="rsa-2"))).status_code == 200
    assert idp.discovery_fetches == 1


def test_made_up_key_ids_do_not_hammer_the_issuer(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    stranger = rsa_key()
    with oidc_client(service_catalog, idp.settings()) as client:
        assert client.get(f"{P}/databases", headers=auth(idp.token())).status_code == 200
        assert idp.jwks_fetches == 1
        for i in range(40):
            token = idp.token(kid=f"made-up-{i}", key=stranger)
            assert client.get(f"{P}/databases", headers=auth(token)).status_code == 401
    # At most one fetch for all of them (the cooldown is 30 s).
    assert idp.jwks_fetches <= 2


def test_an_issuer_that_is_down_is_a_503_with_retry_after_not_a_500(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    idp.down = True
    settings = idp.settings(fetch_retry_seconds=0.3, jwks_cache_seconds=0.5)
    with oidc_client(service_catalog, settings) as client:
        before = metastore_rows(service_catalog)
        r = client.get(f"{P}/databases", headers=auth(idp.token()))
        assert r.status_code == 503, r.text
        assert r.json()["code"] == 503 and int(r.headers["retry-after"]) >= 1
        assert metastore_rows(service_catalog) == before
        # Within the retry wait nothing is fetched again.
        fetches = idp.discovery_fetches + idp.jwks_fetches
        assert client.get(f"{P}/databases", headers=auth(idp.token())).status_code == 503
        assert idp.discovery_fetches + idp.jwks_fetches == fetches
        idp.down = False
        time.sleep(0.35)
        assert client.get(f"{P}/databases", headers=auth(idp.token())).status_code == 200
        # Down again once the keys are known and expired: the last keys still verify known key ids.
        idp.down = True
        time.sleep(0.55)
        assert client.get(f"{P}/databases", headers=auth(idp.token())).status_code == 200
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="ec-1"))).status_code == 200
        # A key id it does not know cannot be told from a new one while the issuer is down: 503.
        idp.add_key("rsa-3")
        assert client.get(f"{P}/databases", headers=auth(idp.token(kid="rsa-3"))).status_code == 503
        # Bad tokens are still refused without asking the issuer.
        assert client.get(f"{P}/databases", headers=auth(idp.unsigned())).status_code == 401


def test_static_tokens_and_jwts_never_take_each_others_path(
    seeded: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    static = make_principal(seeded, "etl", [("read", "db", None)])
    now = int(time.time())
    expired_jwt = idp.token("etl", iat=now - 600, exp=now - 300)
    # Even if an expired JWT's hash were a live static token of an admin, it is judged as a JWT.
    with seeded.engine.begin() as conn:
        pid = conn.execute(text("SELECT principal_id FROM paimon_principals WHERE name = 'etl'")).scalar()
        conn.execute(
            text("INSERT INTO paimon_tokens (principal_id, token_hash, token_prefix) VALUES (:p, :h, 'x')"),
            {"p": pid, "h": hash_token(expired_jwt)},
        )
    with oidc_client(seeded, idp.settings()) as client:
        assert client.get(TABLE, headers=auth(static)).status_code == 200
        assert client.get(TABLE, headers=auth(expired_jwt)).status_code == 401
        fetches = idp.jwks_fetches + idp.discovery_fetches
        assert client.get(TABLE, headers=auth("pmt_" + idp.token())).status_code == 401
        assert client.get(TABLE, headers=auth("pmt_unknown")).status_code == 401
        assert idp.jwks_fetches + idp.discovery_fetches == fetches  # static tokens never reach the issuer
    # Without OIDC configured a JWT is just an unknown token.
    settings = ServiceSettings(auth_cache_seconds=0, auth_failure_burst=0)
    with TestClient(create_app(settings, state=ServiceState(settings, seeded))) as plain:
        assert plain.get(TABLE, headers=auth(idp.token("etl"))).status_code == 401
        assert plain.get(TABLE, headers=auth(static)).status_code == 200


def test_cached_access_never_outlives_the_tokens_expiry(
    seeded: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    principals = Principals(seeded.engine)
    principals.create_group("readers")
    principals.grant("group:readers", Privilege.READ, database="db")
    static_name = "short-lived"
    principals.create(static_name)
    static = principals.issue_token(static_name, expires_in=timedelta(seconds=2))
    principals.grant(static_name, Privilege.READ, database="db")
    with seeded.engine.connect() as conn:
        static_until = float(
            conn.execute(text("SELECT extract(epoch FROM max(expires_at)) FROM paimon_tokens")).scalar_one()
        )
    jwt_until = int(time.time()) + 2
    jwt_token = idp.token("carol", groups=["readers"], exp=jwt_until)
    settings = idp.settings(groups_claim="groups", leeway_seconds=0)
    with oidc_client(seeded, settings, auth_cache_seconds=600) as client:
        assert client.get(TABLE, headers=auth(jwt_token)).status_code == 200
        assert client.get(TABLE, headers=auth(static)).status_code == 200
        time.sleep(max(0.0, jwt_until - time.time()) + 0.1)
        assert client.get(TABLE, headers=auth(jwt_token)).status_code == 401
        time.sleep(max(0.0, static_until - time.time()) + 0.1)
        assert client.get(TABLE, headers=auth(static)).status_code == 401


@pytest.mark.parametrize("pooled", [False, True], ids=["engine", "sessions"])
def test_replicas_signing_in_one_new_user_at_once_create_it_once(
    service_catalog: MetastoreCatalog, pooled: bool
) -> None:
    # ``sessions``: the service's path (one round trip once the user exists, the engine's transaction
    # to create it).
    sessions = service_catalog.lock.sessions if pooled else None
    principals = Principals(service_catalog.engine, sessions=sessions)
    created_by = "oidc:https://idp.example"
    barrier = threading.Barrier(8)
    results: list[Any] = []

    def sign_in() -> None:
        barrier.wait()
        results.append(principals.sign_in("user:new", created_by=created_by))

    threads = [threading.Thread(target=sign_in) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [a.principal for a in results] == ["user:new"] * 8
    assert [p.name for p in principals.list()] == ["user:new"]
    # Another issuer's user of the same name is not this one.
    with pytest.raises(PrincipalAlreadyExistsError, match="created by"):
        principals.sign_in("user:new", created_by="oidc:https://other.example")
    with pytest.raises(ValidationError):
        principals.sign_in("new", created_by=created_by)


def test_a_principal_of_another_issuer_is_refused(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    idp = identity_provider
    Principals(service_catalog.engine).sign_in("user:dave", created_by="oidc:https://old-idp.example")
    with oidc_client(service_catalog, idp.settings()) as client:
        assert client.get(f"{P}/databases", headers=auth(idp.token("dave"))).status_code == 401
        assert client.get(f"{P}/databases", headers=auth(idp.token("erin"))).status_code == 200


@pytest.mark.parametrize(
    ("fields", "flag"),
    [
        ({"algorithms": ("HS256",)}, "--oidc-algorithms"),
        ({"algorithms": ("RS256", "none")}, "--oidc-algorithms"),
        ({"algorithms": ()}, "--oidc-algorithms"),
        ({"issuer": "file:///etc/passwd"}, "--oidc-issuer"),
        ({"jwks_url": "ftp://idp/keys"}, "--oidc-jwks-url"),
        ({"audience": " "}, "--oidc-audience"),
    ],
)
def test_settings_refuse_what_would_weaken_verification(fields: dict[str, Any], flag: str) -> None:
    with pytest.raises(ValidationError, match=flag):
        OidcSettings(**{"issuer": "https://idp.example", "audience": AUDIENCE, **fields})


def test_static_tokens_may_carry_an_expiry_from_the_cli(
    service_catalog: MetastoreCatalog, clean_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--metastore", clean_db, "--json"]
    assert cli_main([*base, "principals", "create", "job", "--expires-in", "2 h"]) == 0
    assert '"expires_in_seconds": 7200.0' in capsys.readouterr().out
    assert cli_main([*base, "principals", "token", "job", "--expires-in", "90"]) == 2  # no unit
    assert cli_main([*base, "principals", "token", "job"]) == 0
    capsys.readouterr()
    assert cli_main([*base, "principals", "create-group", "ops"]) == 0
    assert '"principal": "group:ops"' in capsys.readouterr().out
    assert cli_main([*base, "principals", "token", "group:ops"]) == 2
    with service_catalog.engine.connect() as conn:
        lifetimes = conn.execute(
            text("SELECT extract(epoch FROM expires_at - created_at) FROM paimon_tokens ORDER BY token_id")
        ).scalars()
        assert [None if s is None else round(float(s)) for s in lifetimes] == [7200, None]


def test_serve_flags_turn_oidc_on(
    service_catalog: MetastoreCatalog,
    clean_db: str,
    tmp_path: Path,
    service_processes: list[ServiceProcess],
    identity_provider: IdentityProvider,
) -> None:
    idp = identity_provider
    service_catalog.create_database("db")
    principals = Principals(service_catalog.engine)
    principals.create_group("ops")
    principals.grant("group:ops", Privilege.READ, database="db")
    args = [
        "--oidc-issuer",
        idp.issuer,
        "--oidc-audience",
        AUDIENCE,
        "--oidc-jwks-url",
        idp.jwks_url,
        "--oidc-principal-claim",
        "email",
        "--oidc-groups-claim",
        "roles",
        "--oidc-algorithms",
        "ES256",
    ]
    warehouse = str(tmp_path / "warehouse")
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path, args=args)
    url = f"{server.base}{P}/databases"
    member = idp.token(kid="ec-1", email="ann@example.com", roles=["ops"])
    r = httpx.get(url, headers=auth(member))
    assert r.status_code == 200 and r.json()["databases"] == ["db"], r.text
    assert principal_row(service_catalog, "user:ann@example.com") is not None
    assert httpx.get(url, headers=auth(idp.token(kid="ec-1", email="x@y"))).json()["databases"] == []
    assert httpx.get(url, headers=auth(idp.token(kid="ec-1"))).status_code == 401  # no email claim
    rs256 = idp.token(kid="rsa-1", email="ann@example.com")
    assert httpx.get(url, headers=auth(rs256)).status_code == 401  # RS256 not allowed here
    assert httpx.get(url, headers=auth(idp.hs256_with_public_key())).status_code == 401
    assert idp.discovery_fetches == 0  # the configured JWKS URL, no discovery


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--oidc-issuer", "https://idp.example"], "--oidc-audience"),
        (["--oidc-audience", "a"], "--oidc-issuer"),
        (
            ["--oidc-issuer", "https://idp.example", "--oidc-audience", "a", "--oidc-algorithms", "HS256"],
            "HS256",
        ),
    ],
)
def test_serve_refuses_incomplete_oidc_flags(args: list[str], flag: str) -> None:
    parsed = build_parser().parse_args(["serve", *args])
    with pytest.raises(ValidationError, match=flag):
        serve_cli._oidc(parsed)
