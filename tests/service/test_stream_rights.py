"""Open streams re-check their principal's rights (the change feed's SSE route and the console's live
view): after the token is revoked, a grant removed, an assignment expired or a JWT expired, a stream
stops delivering and ends with a comment saying why; narrowed grants narrow what an open stream
delivers. Re-checks are one query per replica for all its streams, not one per stream or event."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from typing import Literal

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Assignment, Resource
from paimon_meta.metastore.feed import FeedFilter
from paimon_meta.metastore.principals import Access, GrantRow, Held, Principals, Scope, Standing, hash_token
from paimon_meta.service.app import create_app
from paimon_meta.service.routes_feed import may_read, stream_verdict
from paimon_meta.service.state import ServiceSettings, ServiceState
from paimon_meta.service.streams.rights import (
    EXPIRED,
    REVOKED,
    UNCOVERED,
    UNVERIFIED,
    WHY,
    StreamRights,
    Verdict,
)
from tests.fixtures.oidc import IdentityProvider
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, seed

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

Via = Literal["api", "console"]
#: How long a test waits for a stream to end (it re-checks every 0.2 s here; generous for load 10).
ENDS_WITHIN = 60.0


@pytest.fixture
def feed(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider
) -> Iterator[tuple[TestClient, ServiceState]]:
    settings = ServiceSettings(
        auth_cache_seconds=0, feed_recheck_seconds=0.2, oidc=identity_provider.settings()
    )
    state = ServiceState(settings, service_catalog)
    with TestClient(create_app(settings, state=state), raise_server_exceptions=False) as client:
        yield client, state


@contextlib.contextmanager
def opened(client: TestClient, via: Via, token: str, **params: str) -> Iterator[Iterator[str]]:
    """The lines of a live stream opened with ``token``: the API's (``Authorization``, from the start)
    or the console's live view (a session cookie, from now on)."""
    headers = {"Accept": "text/event-stream"}
    if via == "api":
        path = f"{P}/events"
        headers.update(auth(token))
    else:
        path = "/ui/live/events"
        signed_in = client.post("/ui/login", data={"token": token}, follow_redirects=False)
        assert signed_in.status_code == 303, signed_in.text
    with client.stream("GET", path, params=params, headers=headers) as answer:
        assert answer.status_code == 200, answer.read()
        lines = answer.iter_lines()
        assert next(lines).startswith(": paimon-meta change feed after ")
        yield lines


def until_ended(lines: Iterator[str]) -> tuple[list[str], str]:
    """The subjects of the events the stream delivers until it ends, and its last comment."""
    give_up = time.monotonic() + ENDS_WITHIN
    subjects: list[str] = []
    for line in lines:
        if line.startswith(": stream ended: "):
            rest = list(lines)
            assert not any(x.startswith(("id:", "data:")) for x in rest), rest  # nothing after it
            return subjects, line
        if line.startswith("data: "):
            subjects.append(line.split('"subject":"', 1)[1].split('"', 1)[0])
        assert time.monotonic() < give_up, "the stream kept going"
    raise AssertionError("the stream closed without saying why")


def _reader(catalog: MetastoreCatalog) -> str:
    seed(catalog, "db.t")
    return make_principal(catalog, "reader", [("read", "db", None)])


@pytest.mark.parametrize("via", ["api", "console"])
def test_a_revoked_token_ends_its_open_stream(
    feed: tuple[TestClient, ServiceState], service_catalog: MetastoreCatalog, via: Via
) -> None:
    client, _ = feed
    token = _reader(service_catalog)
    with opened(client, via, token) as lines:
        Principals(service_catalog.engine).revoke_tokens("reader")
        _, last = until_ended(lines)
    assert last == f": stream ended: {WHY[REVOKED]}"
    # and it cannot be reopened
    again = client.get(f"{P}/events", headers={**auth(token), "Accept": "text/event-stream"})
    assert again.status_code == 401


@pytest.mark.parametrize("via", ["api", "console"])
def test_a_removed_grant_ends_the_stream_it_covered(
    feed: tuple[TestClient, ServiceState], service_catalog: MetastoreCatalog, via: Via
) -> None:
    client, _ = feed
    token = _reader(service_catalog)
    with opened(client, via, token, table="db.t") as lines:
        Principals(service_catalog.engine).revoke("reader", Privilege.READ, database="db")
        _, last = until_ended(lines)
    assert last == f": stream ended: {WHY[UNCOVERED]}"


@pytest.mark.parametrize("via", ["api", "console"])
def test_an_expired_jwt_ends_its_open_stream(
    feed: tuple[TestClient, ServiceState],
    service_catalog: MetastoreCatalog,
    identity_provider: IdentityProvider,
    via: Via,
) -> None:
    client, _ = feed
    seed(service_catalog, "db.t")
    # the user exists once signed in; then it is given a grant
    first = identity_provider.token("alice")
    assert client.get("/v1/config", headers=auth(first)).status_code == 200
    Principals(service_catalog.engine).grant("user:alice", Privilege.READ, database="db")
    exp = int(time.time()) + 3
    with opened(client, via, identity_provider.token("alice", exp=exp)) as lines:
        _, last = until_ended(lines)
    assert last == f": stream ended: {WHY[EXPIRED]}"
    assert time.time() >= exp  # not before the token's exp


def test_narrowed_grants_narrow_what_an_open_stream_delivers(
    feed: tuple[TestClient, ServiceState], service_catalog: MetastoreCatalog
) -> None:
    """A grant on one of two tables removed: the open stream goes on, without that table's events."""
    client, state = feed
    seed(service_catalog, "db.t")
    seed(service_catalog, "db.u")
    token = make_principal(service_catalog, "reader", [("read", "db", "t"), ("read", "db", "u")])
    rights = state.stream_rights
    with opened(client, "api", token) as lines:
        seen: set[str] = set()
        for line in lines:
            if '"type":"org.paimon.commit.snapshot_published"' in line:
                seen.add(line.split('"subject":"', 1)[1].split('"', 1)[0])
            if seen == {"db.t", "db.u"}:
                break
        Principals(service_catalog.engine).revoke("reader", Privilege.READ, database="db", table="u")
        checks = rights.checks
        deadline = time.monotonic() + ENDS_WITHIN
        while rights.checks < checks + 2:  # a re-check that began after the revocation has ended
            assert time.monotonic() < deadline, "the rights were never re-checked"
            time.sleep(0.05)
        with service_catalog.engine.connect() as conn:  # events after this were made after the re-check
            mark = conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        seed_more(service_catalog, "db.u")
        seed_more(service_catalog, "db.t")
        after: list[str] = []
        for line in lines:
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if datetime.fromisoformat(event["time"]) <= mark:
                continue  # sent (or in the write sent) before the revocation
            after.append(event["subject"])
            if event["type"].endswith("snapshot_published") and event["data"]["snapshotId"] == 2:
                assert event["subject"] == "db.t"
                break
    assert "db.u" not in after and "db.t" in after


def seed_more(catalog: MetastoreCatalog, identifier: str) -> None:
    """One more APPEND snapshot of ``identifier`` (snapshot 2 after :func:`seed`)."""
    import pyarrow as pa

    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([9], pa.int64()), "p": ["a"], "v": ["w"]}))
    commit.commit(write.prepare_commit())
    write.close()


# ---- the re-check itself (no database: what it asks and what streams are told) ------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _access(name: str, *, until: float | None = None, groups: tuple[str, ...] = ()) -> Access:
    return Access(name, (GrantRow(Privilege.READ, Scope("db")),), groups=groups, valid_until=until)


def test_one_query_re_checks_every_stream_of_the_replica() -> None:
    calls: list[tuple[set[str], set[str]]] = []
    static = [f"pmt_token{i}" for i in range(40)]

    def standing(hashes: Collection[str], names: Collection[str]) -> Standing:
        calls.append((set(hashes), set(names)))
        keep = {hash_token(t): _access(f"p{i}") for i, t in enumerate(static) if i % 2 == 0}
        return Standing(keep, {"user:alice": (), "group:ops": (GrantRow(Privilege.READ, Scope("db")),)})

    clock = _Clock()
    rights = StreamRights(standing, interval=5.0, clock=clock)
    try:
        held = [rights.watch(t, _access(f"p{i}")) for i, t in enumerate(static) for _ in range(3)]
        jwt = rights.watch("eyJ.a.b", _access("user:alice", groups=("group:ops", "group:gone")))
        assert rights.refresh()
        assert len(calls) == 1  # 121 streams of 41 credentials: one query
        assert calls[0][0] == {hash_token(t) for t in static}
        assert calls[0][1] == {"user:alice", "group:ops", "group:gone"}
        verdicts = [rights.verdict(c) for c in held]
        assert (
            sum(v.ended == REVOKED for v in verdicts) == 60
            and sum(v.access is not None for v in verdicts) == 60
        )
        # a user keeps its identity; its grants are those of it and its groups now
        now = rights.verdict(jwt).access
        assert now is not None and now.groups == ("group:ops",) and now.sees("db")
    finally:
        rights.close()


def test_unchecked_rights_hold_the_stream_then_end_it_and_expiry_is_local() -> None:
    failing = True

    def standing(hashes: Collection[str], names: Collection[str]) -> Standing:
        if failing:
            raise OSError("metastore down")
        return Standing({h: _access("a") for h in hashes}, {})

    clock, wall = _Clock(), _Clock()
    rights = StreamRights(standing, interval=1.0, clock=clock, wall=wall)
    try:
        credential = rights.watch("pmt_x", _access("a", until=wall.now + 100))
        assert rights.verdict(credential).access is not None
        clock.now += rights.stale_after + 0.1
        assert not rights.refresh() and rights.failures == 1
        held = rights.verdict(credential)
        assert held.access is None and held.ended is None  # nothing sent, not ended yet
        failing = False
        assert rights.refresh()
        assert rights.verdict(credential).access is not None
        failing = True
        clock.now += rights.give_up_after + 0.1
        assert rights.verdict(credential).ended == UNVERIFIED
        # the token's own expiry is looked at on every verdict, between re-checks too
        other = rights.watch("pmt_y", _access("b", until=wall.now + 10))
        assert rights.verdict(other).access is not None
        wall.now += 10
        assert rights.verdict(other).ended == EXPIRED
        rights.release(other)
        rights.release(credential)
        assert rights.refresh()  # nothing watched: nothing asked
    finally:
        rights.close()


def test_an_open_stream_notices_an_assignments_expiry_at_its_expire_time() -> None:
    """As after a revocation, but at the bound itself (the verdict's wall time, no re-check needed): a
    stream of the table the expired assignment covered ends; an unfiltered one goes on without that
    table's events."""
    bound = datetime(2030, 1, 1, tzinfo=UTC)
    expiring = Held(None, Assignment("a", Resource.table("db", "t"), A.SELECT, expire_time=bound))
    lasting = Held(None, Assignment("a", Resource.table("db", "u"), A.SELECT))
    access = Access("a", (), held=(expiring, lasting))
    wall = _Clock()
    wall.now = bound.timestamp() - 0.001
    rights = StreamRights(
        lambda hashes, _names: Standing({h: access for h in hashes}, {}),
        interval=5.0,
        clock=_Clock(),
        wall=wall,
    )
    try:
        credential = rights.watch("pmt_x", access)
        one, every = FeedFilter(subject="db.t"), FeedFilter()

        def verdict(keep: FeedFilter) -> Verdict:
            return stream_verdict(rights.verdict(credential), "k", default=True, keep=keep, covered=True)

        before = verdict(one)
        assert before.access is not None and may_read(before.access, "db", "t", before.at)
        wall.now = bound.timestamp()
        assert verdict(one) == Verdict(None, UNCOVERED)
        after = verdict(every)
        assert after.access is not None and after.at == bound
        assert not may_read(after.access, "db", "t", after.at) and may_read(after.access, "db", "u", after.at)
    finally:
        rights.close()
