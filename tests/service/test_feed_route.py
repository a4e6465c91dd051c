"""``GET /v1/{prefix}/events``: the change feed over HTTP as CloudEvents 1.0, paged and resumable from
``nextPageToken``, showing only the events of tables the caller may read, with filters."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.service import routes_feed
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import make_principal
from tests.service.helpers import P, auth, seed

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

EVENT = "text/event-stream"


def _walk(client: TestClient, headers: dict[str, str], page: int, **params: Any) -> tuple[list[Any], str]:
    events: list[Any] = []
    token: str | None = None
    while True:
        query = {"maxResults": page, **params} | ({"pageToken": token} if token else {})
        answer = client.get(f"{P}/events", params=query, headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["nextPageToken"]
        if not body["events"]:
            return events, body["nextPageToken"]
        events += body["events"]
        token = body["nextPageToken"]


def test_the_feed_pages_resumes_and_filters_by_grant(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    seed(service_catalog, "db.t")
    seed(service_catalog, "db.u")
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", "u")]))

    everything, end = _walk(service_client, admin, 1000)
    assert {e["subject"] for e in everything} == {"db.t", "db.u"}
    for event in everything:
        assert event["specversion"] == "1.0" and event["source"] == "/paimon-meta/catalogs/paimon"
        assert event["type"].startswith(("org.paimon.commit.", "org.paimon.lock.", "org.paimon.maintenance."))
        assert event["datacontenttype"] == "application/json" and event["time"]
    published = [e for e in everything if e["type"] == "org.paimon.commit.snapshot_published"]
    assert [(e["subject"], e["data"]["snapshotId"]) for e in published] == [("db.t", 1), ("db.u", 1)]
    assert len({e["id"] for e in everything}) == len(everything)

    # pages of 2 give the same events once each; resuming at the end gives nothing new
    paged, _ = _walk(service_client, admin, 2)
    assert paged == everything
    tail = service_client.get(f"{P}/events", params={"pageToken": end}, headers=admin).json()
    assert tail == {"events": [], "nextPageToken": end}
    # a new commit shows up after the token the caller kept
    seed(service_catalog, "db.v")
    later = service_client.get(f"{P}/events", params={"pageToken": end}, headers=admin).json()["events"]
    assert later and {e["subject"] for e in later} == {"db.v"}

    # a reader of db.u sees db.u's events only
    mine, _ = _walk(service_client, reader, 1000)
    assert mine == [e for e in everything if e["subject"] == "db.u"]
    kinds, _ = _walk(service_client, admin, 1000, kind="snapshot_published,acquired", table="db.t")
    assert {e["type"] for e in kinds} == {"org.paimon.commit.snapshot_published", "org.paimon.lock.acquired"}
    assert {e["subject"] for e in kinds} == {"db.t"}

    for bad in ({"pageToken": "nope"}, {"maxResults": 0}, {"maxResults": 5000}, {"since": "yesterday"}):
        answer = service_client.get(f"{P}/events", params=bad, headers=admin)
        assert answer.status_code == 400, (bad, answer.text)
    assert service_client.get(f"{P}/events").status_code == 401


def test_an_idle_stream_carries_heartbeats(
    service_client: TestClient, service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routes_feed, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(routes_feed, "POLL_SECONDS", 0.01)
    seed(service_catalog, "db.t")
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    end = service_client.get(f"{P}/events", params={"maxResults": 1000}, headers=admin).json()[
        "nextPageToken"
    ]
    headers = {**admin, "Accept": "text/event-stream", "Last-Event-ID": end}
    lines: list[str] = []
    with service_client.stream("GET", f"{P}/events", headers=headers) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        for line in answer.iter_lines():
            lines.append(line)
            if line == ": keep-alive":
                break
    assert lines[0] == f": paimon-meta change feed after {end}"
    assert not any(line.startswith("id:") for line in lines)  # nothing after the resume point
    bad = service_client.get(f"{P}/events", headers={**admin, "Last-Event-ID": "nope"})
    assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["message"]


def test_streams_are_bounded_by_their_own_count_not_the_in_flight_slots(
    service_catalog: MetastoreCatalog,
) -> None:
    """A stream lasts as long as its subscriber: it takes no in-flight slot (with one slot, a request is
    still answered while a stream is open), and beyond ``max_feed_streams`` a new stream is a 503."""
    settings = ServiceSettings(auth_cache_seconds=0, max_in_flight=1, max_feed_streams=1)
    app = create_app(settings, state=ServiceState(settings, service_catalog))
    admin = auth(make_principal(service_catalog, "root", [("admin", None, None)]))
    other = auth(make_principal(service_catalog, "other", [("admin", None, None)]))
    stream_headers = {**admin, "Accept": "text/event-stream"}
    with TestClient(app, raise_server_exceptions=False) as client:
        with client.stream("GET", f"{P}/events", headers=stream_headers) as first:
            assert first.status_code == 200
            assert next(first.iter_lines()).startswith(": paimon-meta change feed")
            assert client.get(f"{P}/databases", headers=admin).status_code == 200  # the slot is free
            second = client.get(f"{P}/events", headers={**other, "Accept": "text/event-stream"})
            assert second.status_code == 503 and second.headers["Retry-After"], second.text
        # the first stream's slot is given back when it ends
        with client.stream("GET", f"{P}/events", headers=stream_headers) as again:
            assert again.status_code == 200


def test_one_principal_holds_at_most_its_share_of_the_streams(service_catalog: MetastoreCatalog) -> None:
    """One reader could open every ``--max-feed-streams`` slot and lock the others out of the feed and
    the live view: beyond its cap a principal's new stream is 429 naming the cap, with Retry-After."""
    assert ServiceSettings(max_feed_streams=512).feed_streams_per_principal == 32  # the default share
    assert ServiceSettings(max_feed_streams=8).feed_streams_per_principal == 1
    settings = ServiceSettings(auth_cache_seconds=0, max_feed_streams=8, max_feed_streams_per_principal=2)
    app = create_app(settings, state=ServiceState(settings, service_catalog))
    greedy = {**auth(make_principal(service_catalog, "greedy", [("read", None, None)])), "Accept": EVENT}
    other = {**auth(make_principal(service_catalog, "other", [("read", None, None)])), "Accept": EVENT}
    with TestClient(app, raise_server_exceptions=False) as client:
        with client.stream("GET", f"{P}/events", headers=greedy) as first:
            assert first.status_code == 200
            with client.stream("GET", "/ui/live/events", headers=greedy) as second:  # the live view counts
                assert second.status_code == 200
                with client.stream("GET", f"{P}/events", headers=greedy) as third:  # a stream if let in
                    assert third.status_code == 429
                    assert "--max-feed-streams-per-principal 2" in json.loads(third.read())["message"]
                    assert int(third.headers["Retry-After"]) >= 1
                with client.stream("GET", f"{P}/events", headers=other) as theirs:
                    assert theirs.status_code == 200  # another principal is not locked out
        # a stream that ended gives its principal's slot back
        with client.stream("GET", f"{P}/events", headers=greedy) as again:
            assert again.status_code == 200


def test_only_the_stream_routes_skip_admission_control(service_catalog: MetastoreCatalog) -> None:
    """``Accept: text/event-stream`` on any request skipped ``--max-in-flight`` (30 concurrent
    table-details with it against one slot: none shed). Only the feed's route and the live view's
    stream are left to the stream slots."""
    seed(service_catalog, "db.t")
    settings = ServiceSettings(auth_cache_seconds=0, max_in_flight=1)
    state = ServiceState(settings, service_catalog)
    admin = {**auth(make_principal(service_catalog, "root", [("admin", None, None)])), "Accept": EVENT}
    with TestClient(create_app(settings, state=state), raise_server_exceptions=False) as client:
        assert state.admit_request()  # the one in-flight slot is taken for the whole test
        try:
            with ThreadPoolExecutor(30) as pool:
                answers = list(
                    pool.map(
                        lambda _: client.get(f"{P}/databases/db/table-details", headers=admin), range(30)
                    )
                )
            assert [a.status_code for a in answers] == [503] * 30, [a.text for a in answers[:3]]
            assert all(a.headers["Retry-After"] for a in answers)
            # another route with the header: shed as well
            assert client.get(f"{P}/databases", headers=admin).status_code == 503
            # the streams themselves are not
            with client.stream("GET", f"{P}/events", headers=admin) as stream:
                assert stream.status_code == 200
        finally:
            state.request_done()
