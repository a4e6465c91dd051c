"""Many catalogs in one service (issue 35), in-process: each request is served by the catalog its prefix
names, with the grants of that catalog only.

* The same ``db.t`` in the default catalog (``paimon``) and in catalog ``b``, each with its own rows and
  snapshots; ``/v1/config?warehouse=`` answers each one's prefix (pypaimon's double encoding too); an
  unknown warehouse or prefix is the protocol's 404 ``CATALOG``.
* The route-privilege test per catalog: a principal granted (admin on everything) only in the default
  catalog gets 403 for every route of catalog ``b``, and changes nothing there; and the reverse for a
  principal of ``b`` on the default catalog's guarded routes.
* The change feed of one catalog never shows the other's events.
* A catalog dropped or altered is noticed (404 after a drop; a new warehouse is served).
* The admin API: create needs the service-level ``create_catalog`` (the creator becomes admin of it),
  overlapping warehouses are refused, secrets are never answered, a non-empty catalog's drop needs
  ``cascade``, the default catalog cannot be dropped, and a drop removes the catalog's grants.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege, ServicePrivilege
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.horizon import wait_for_horizon
from tests.fixtures.service import FAST_LOCK, make_principal
from tests.service.helpers import auth, seed, state_of_storage

pytestmark = pytest.mark.postgres

A, B = "/v1/paimon", "/v1/b"
CATALOGS = "/api/management/v1/catalogs"
#: What each path parameter is filled with when every route is tried.
PARAMS = {
    "prefix": "b",
    "database": "db",
    "table": "t",
    "tag": "x",
    "branch": "b1",
    "version": "1",
    "view": "v",
    "function": "f",
    "semantic_view": "sv",
    "tableId": "1",
    "catalog": "b",
}


class Rig:
    def __init__(self, a: MetastoreCatalog, b: MetastoreCatalog, client: TestClient, tokens: dict[str, Any]):
        self.a, self.b, self.client, self.tokens = a, b, client, tokens


@pytest.fixture
def rig(clean_db: str, tmp_path: Path) -> Iterator[Rig]:
    a = paimon_meta.connect(clean_db, str(tmp_path / "wh-a"), **FAST_LOCK)
    Catalogs(a.engine).create("b", str(tmp_path / "wh-b"), created_by="tests")
    b = paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK)
    try:
        a.create_database("db")
        seed(a)  # one snapshot in the default catalog's db.t
        b.create_database("db")
        seed(b)
        for n in range(2):  # three snapshots in b's db.t
            table = b.get_table("db.t")
            wb = table.new_batch_write_builder()
            write, commit = wb.new_write(), wb.new_commit()
            write.write_arrow(pa.table({"k": pa.array([10 + n], pa.int64()), "p": ["b"], "v": [f"b{n}"]}))
            commit.commit(write.prepare_commit())
            write.close()
        principals = Principals(a.engine)
        tokens = {
            "alice": auth(make_principal(a, "alice", [("admin", None, None)])),  # the default catalog's
            "bob": auth(principals.create("bob")),
            "ops": auth(principals.create("ops")),
            "nobody": auth(principals.create("nobody")),
        }
        principals.grant("bob", Privilege.ADMIN, catalog_key="b")
        principals.grant_service("ops", ServicePrivilege.CREATE_CATALOG)
        settings = ServiceSettings(auth_cache_seconds=0, max_body_bytes=1 << 20, catalog_refresh_seconds=0)
        app = create_app(settings, state=ServiceState(settings, a))
        with TestClient(app, raise_server_exceptions=False) as client:
            yield Rig(a, b, client, tokens)
    finally:
        b.close()
        a.close()


def _status(response: Any, status: int, resource: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    if not response.content:
        return {}
    body: dict[str, Any] = response.json()
    if status >= 400:
        assert body["code"] == status
        if resource is not None:
            assert body["resourceType"] == resource, body
    return body


def test_each_prefix_is_its_own_catalog(rig: Rig) -> None:
    c, alice, bob = rig.client, rig.tokens["alice"], rig.tokens["bob"]
    assert _status(c.get("/v1/config", headers=alice), 200)["defaults"]["prefix"] == "paimon"
    assert _status(c.get("/v1/config?warehouse=b", headers=bob), 200)["defaults"]["prefix"] == "b"
    # pypaimon 2.1.0 sends the warehouse URL-encoded twice
    assert _status(c.get("/v1/config?warehouse=%2562", headers=bob), 200)["defaults"]["prefix"] == "b"
    _status(c.get("/v1/config?warehouse=nope", headers=bob), 404, "CATALOG")
    _status(c.get("/v1/nope/databases", headers=bob), 404, "CATALOG")
    # the same db.t, two tables: one snapshot in the default catalog, three in b
    a_t = _status(c.get(f"{A}/databases/db/tables/t/snapshot", headers=alice), 200)
    b_t = _status(c.get(f"{B}/databases/db/tables/t/snapshot", headers=bob), 200)
    assert a_t["snapshot"]["snapshot"]["id"] == 1 and b_t["snapshot"]["snapshot"]["id"] == 3
    a_row = _status(c.get(f"{A}/databases/db/tables/t", headers=alice), 200)
    b_row = _status(c.get(f"{B}/databases/db/tables/t", headers=bob), 200)
    assert a_row["id"] != b_row["id"]
    assert "wh-a" in a_row["path"] and "wh-b" in b_row["path"]
    assert _status(c.get(f"{B}/databases", headers=bob), 200)["databases"] == ["db"]
    # the audit routes of db.t: that catalog's table only
    for prefix, token, snapshots in ((A, alice, [1]), (B, bob, [1, 2, 3])):
        events = _status(c.get(f"{prefix}/databases/db/tables/t/events", headers=token), 200)["events"]
        published = sorted(e["snapshotId"] for e in events if e["eventType"] == "snapshot_published")
        assert published == snapshots, (prefix, events)
        runs = _status(c.get(f"{prefix}/databases/db/tables/t/maintenance-runs", headers=token), 200)
        assert runs["runs"] == []


def _fill(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: PARAMS[m.group(1)], path)


def test_a_principal_of_one_catalog_is_refused_every_route_of_the_other(rig: Rig) -> None:
    """The route-privilege test per catalog: alice is admin of the whole default catalog and holds no
    grant in ``b``: every route under ``/v1/{prefix}`` answers her 403 for ``b``, and nothing of ``b``
    changes (its storage, its rows)."""
    c, alice = rig.client, rig.tokens["alice"]
    before = state_of_storage(rig.b)
    tried = []
    for route in c.app.routes:  # type: ignore[attr-defined]
        routes = getattr(route, "original_router", None)
        for r in [route] if routes is None else routes.routes:
            if not isinstance(r, APIRoute) or "{prefix}" not in r.path:
                continue
            for method in r.methods or ():
                url = _fill(r.path)
                response = c.request(method, url, json={}, headers=alice)
                assert response.status_code == 403, (method, url, response.text)
                assert response.json()["code"] == 403
                tried.append((method, r.path))
    assert len(tried) > 70, len(tried)  # every route of the protocol and ours
    assert state_of_storage(rig.b) == before
    assert rig.b.list_databases() == ["db"] and rig.b.list_tables("db") == ["t"]
    # /v1/config?warehouse=b: refused too; the default catalog's answers any token, as before
    _status(c.get("/v1/config?warehouse=b", headers=alice), 403)
    _status(c.get("/v1/config?warehouse=b", headers=rig.tokens["nobody"]), 403)
    # and the reverse: bob (admin of b) holds nothing in the default catalog
    bob = rig.tokens["bob"]
    _status(c.get(f"{A}/databases/db/tables/t", headers=bob), 403)
    _status(c.get(f"{A}/databases/db/tables/t/snapshot", headers=bob), 403)
    _status(c.delete(f"{A}/databases/db/tables/t", headers=bob), 403)
    assert _status(c.get(f"{A}/databases", headers=bob), 200)["databases"] == []
    _status(c.get("/metrics", headers=bob), 403)
    metrics = c.get("/metrics", headers=alice).text
    assert 'paimon_meta_service_catalog_requests_total{catalog="b",status="403"}' in metrics
    assert 'paimon_meta_service_catalog_requests_total{catalog="paimon",status="403"}' in metrics
    assert rig.a.list_tables("db") == ["t"]


def _feed(c: TestClient, prefix: str, token: dict[str, str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    page = None
    while True:
        query = {"maxResults": "100"} | ({"pageToken": page} if page else {})
        body = _status(c.get(f"{prefix}/events", params=query, headers=token), 200)
        events += body["events"]
        if not body["events"]:
            return events
        page = body["nextPageToken"]


def _published(events: list[dict[str, Any]]) -> list[int]:
    return [
        e["data"].get("snapshotId") for e in events if e["type"] == "org.paimon.commit.snapshot_published"
    ]


def _feed_until(
    c: TestClient, prefix: str, token: dict[str, str], count: int, timeout: float = 120.0
) -> list[dict[str, Any]]:
    """The feed once it holds ``count`` published snapshots: events are delivered only once every
    transaction older than them ended (the feed's horizon), and the Postgres server is shared."""
    deadline = time.monotonic() + timeout
    while True:
        events = _feed(c, prefix, token)
        if len(_published(events)) >= count or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


def test_the_feed_of_one_catalog_never_shows_the_others_events(rig: Rig) -> None:
    c = rig.client
    b_events = _feed_until(c, B, rig.tokens["bob"], 3)
    a_events = _feed_until(c, A, rig.tokens["alice"], 1)
    assert _published(a_events) == [1]
    assert _published(b_events) == [1, 2, 3]
    a_ids = {(e["data"]["log"], e["data"]["eventId"]) for e in a_events}
    b_ids = {(e["data"]["log"], e["data"]["eventId"]) for e in b_events}
    assert a_ids and b_ids and not a_ids & b_ids
    assert {e["source"].rsplit("/", 1)[-1] for e in b_events} == {"b"}
    # the lock events of each are its own catalog's locks
    assert {e["data"]["lockId"] for e in b_events if e["data"]["log"] == "lock"} == {"b.db.t"}
    assert {e["data"]["lockId"] for e in a_events if e["data"]["log"] == "lock"} == {"jdbc.db.t"}
    # alice holds nothing in b: its feed is refused, not shown empty
    _status(c.get(f"{B}/events", headers=rig.tokens["alice"]), 403)


def test_a_dropped_or_altered_catalog_is_noticed(rig: Rig, tmp_path: Path) -> None:
    c, ops = rig.client, rig.tokens["ops"]
    created = _status(
        c.post(CATALOGS, json={"name": "c", "warehouse": str(tmp_path / "wh-c")}, headers=ops), 200
    )
    assert created["name"] == "c" and created["createdBy"] == "ops"
    # ops created it: admin of it
    _status(c.post("/v1/c/databases", json={"name": "d"}, headers=ops), 200)
    assert _status(c.get("/v1/c/databases", headers=ops), 200)["databases"] == ["d"]
    _status(c.delete("/v1/c/databases/d", headers=ops), 200)
    moved = _status(c.put(f"{CATALOGS}/c", json={"warehouse": str(tmp_path / "wh-c2")}, headers=ops), 200)
    assert moved["warehouse"].endswith("wh-c2")
    _status(c.post("/v1/c/databases", json={"name": "d2"}, headers=ops), 200)
    assert _status(c.get("/v1/c/databases/d2", headers=ops), 200)["location"].endswith("wh-c2/d2.db")
    _status(c.delete(f"{CATALOGS}/c", headers=ops), 400)  # holds d2
    assert _status(c.delete(f"{CATALOGS}/c?cascade=true", headers=ops), 200)["databases"] == ["d2"]
    _status(c.get("/v1/c/databases", headers=ops), 404, "CATALOG")
    _status(c.get("/v1/config?warehouse=c", headers=ops), 404, "CATALOG")
    # its grants went with it: a catalog created again under the name starts with none
    assert not [g for p in Principals(rig.a.engine).list() for g in p.grants if g.catalog == "c"]


def test_the_admin_api(rig: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c, alice, bob, ops = rig.client, rig.tokens["alice"], rig.tokens["bob"], rig.tokens["ops"]
    # creating needs the service-level privilege: admin of a catalog is not enough
    _status(c.post(CATALOGS, json={"name": "x", "warehouse": str(tmp_path / "x")}, headers=alice), 403)
    # overlapping warehouses refused (inside b's)
    overlap = c.post(CATALOGS, json={"name": "x", "warehouse": str(tmp_path / "wh-b" / "x")}, headers=ops)
    _status(overlap, 409)
    secret = {
        "name": "s",
        "warehouse": "s3://bucket-s/wh",
        "storage": {"endpoint": "http://127.0.0.1:9", "region": "eu-west-1", "pathStyle": True},
        "stsRoleArn": "arn:aws:iam::123456789012:role/s",
        "stsExternalId": "very-secret-external-id",
        "options": {"s3.secret-key": "very-secret-key", "s3.access-key": "AKIA-S", "a": "1"},
    }
    bad_role = {"name": "r", "warehouse": str(tmp_path / "r"), "stsRoleArn": "not-an-arn"}
    _status(c.post(CATALOGS, json=bad_role, headers=ops), 400)
    shown = c.post(CATALOGS, json=secret, headers=ops)
    _status(shown, 200)
    for answer in (shown, c.get(f"{CATALOGS}/s", headers=ops), c.get(CATALOGS, headers=ops)):
        assert "very-secret" not in answer.text, answer.text
    body = shown.json()
    assert body["secretsSet"] == ["s3.access-key", "s3.secret-key", "sts-external-id"]
    assert body["options"] == {"a": "1"} and body["storage"]["region"] == "eu-west-1"
    # listings show the catalogs the caller holds a grant in
    names = {x["name"] for x in _status(c.get(CATALOGS, headers=bob), 200)["catalogs"]}
    assert names == {"b"}
    _status(c.get(f"{CATALOGS}/s", headers=bob), 403)
    _status(c.get(f"{CATALOGS}/nope", headers=ops), 404, "CATALOG")
    # changing and dropping need admin on the whole catalog
    _status(c.put(f"{CATALOGS}/b", json={"setOptions": {"k": "v"}}, headers=alice), 403)
    assert _status(c.put(f"{CATALOGS}/b", json={"setOptions": {"k": "v"}}, headers=bob), 200)["options"] == {
        "k": "v"
    }
    _status(c.delete(f"{CATALOGS}/b", headers=bob), 400)  # holds db
    _status(c.delete(f"{CATALOGS}/s", headers=bob), 403)
    # the default catalog is what the service serves: it is not dropped here
    Catalogs(rig.a.engine).create("paimon", str(tmp_path / "wh-a"), catalog_key=rig.a.registry.catalog_key)
    _status(c.delete(f"{CATALOGS}/paimon", headers=alice), 400)
    assert _status(c.get(f"{CATALOGS}/paimon", headers=alice), 200)["default"] is True
    # a catalog of the default catalog's key under another name is never served beside it
    Principals(rig.a.engine).grant("bob", Privilege.READ, catalog_key=rig.a.registry.catalog_key)
    _status(c.get("/v1/paimon/databases", headers=bob), 200)
    with rig.a.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE paimon_catalogs SET name = 'alias' WHERE name = 'paimon'")
    _status(c.get("/v1/alias/databases", headers=bob), 404, "CATALOG")


def test_lock_rows_of_one_catalog_are_neither_shown_nor_released_in_the_other(rig: Rig) -> None:
    c, alice, bob = rig.client, rig.tokens["alice"], rig.tokens["bob"]
    a_lease = rig.a.lock.try_acquire("jdbc.db.t", owner="holder-a", lease_seconds=60, heartbeat=False)
    b_lease = rig.b.lock.try_acquire("b.db.t", owner="holder-b", lease_seconds=60, heartbeat=False)
    assert a_lease is not None and b_lease is not None
    try:
        assert [r["lock_id"] for r in _status(c.get(f"{A}/locks", headers=alice), 200)["locks"]] == [
            "jdbc.db.t"
        ]
        assert [r["lock_id"] for r in _status(c.get(f"{B}/locks", headers=bob), 200)["locks"]] == ["b.db.t"]
        # bob is admin of the whole of b: still not of the default catalog's lock
        release = {"lockId": "jdbc.db.t", "reason": "not mine", "force": True}
        _status(c.post(f"{B}/locks/release", json=release, headers=bob), 403)
        release = {"lockId": "b.db.t", "reason": "not mine", "force": True}
        _status(c.post(f"{A}/locks/release", json=release, headers=alice), 403)
        held = {r["lock_id"] for r in _status(c.get(f"{A}/locks", headers=alice), 200)["locks"]}
        held |= {r["lock_id"] for r in _status(c.get(f"{B}/locks", headers=bob), 200)["locks"]}
        assert held == {"jdbc.db.t", "b.db.t"}
    finally:
        a_lease.release()
        b_lease.release()


def test_the_console_switches_catalogs(rig: Rig) -> None:
    """The console's pages are of the catalog its switcher cookie names, with that catalog's grants only."""
    c, alice, bob = rig.client, rig.tokens["alice"], rig.tokens["bob"]
    switched = c.get("/ui/catalog", params={"name": "b"}, headers=bob, follow_redirects=False)
    assert switched.status_code == 303, switched.text
    assert "paimon_meta_catalog=b" in switched.headers["set-cookie"]
    c.cookies.clear()
    in_b = {"Cookie": "paimon_meta_catalog=b"}
    page = c.get("/ui/", headers={**bob, **in_b})
    assert page.status_code == 200 and "Catalog b" in page.text, page.text[:500]
    assert 'data-testid="catalog-switcher"' in page.text  # bob holds grants in b: it is offered
    # alice holds nothing in b: b's pages are refused; without the cookie she sees the default catalog
    assert c.get("/ui/", headers={**alice, **in_b}).status_code == 403
    assert c.get("/ui/tables/db/t", headers={**alice, **in_b}).status_code == 403
    default = c.get("/ui/", headers=alice)
    assert default.status_code == 200 and "Catalog paimon" in default.text
    # bob's table page in b is b's db.t (three snapshots)
    assert c.get("/ui/tables/db/t", headers={**bob, **in_b}).status_code == 200
    assert c.get("/ui/tables/db/t", headers=bob).status_code == 403  # the default catalog's db.t
    # switching to a catalog that does not exist: 404; a stale cookie falls back to the default catalog
    assert c.get("/ui/catalog", params={"name": "nope"}, headers=bob).status_code == 404
    stale = c.get("/ui/", headers={**alice, "Cookie": "paimon_meta_catalog=nope"})
    assert stale.status_code == 200 and "Catalog paimon" in stale.text


def test_a_served_catalog_runs_its_own_maintenance_workers(rig: Rig) -> None:
    """With maintenance workers (``serve --maintenance-workers``), each catalog the replica serves runs its
    own scheduler and workers on its own queue; they stop when the catalogs are closed."""
    from paimon_meta.maintenance.spark import SparkCompaction

    spark = SparkCompaction("spark://spark-master:7077")
    settings = ServiceSettings(
        auth_cache_seconds=0, maintenance_workers=1, catalog_refresh_seconds=0, maintenance_spark=spark
    )
    state = ServiceState(settings, rig.a)
    try:
        with TestClient(create_app(settings, state=state), raise_server_exceptions=False) as client:
            _status(client.get(f"{B}/databases", headers=rig.tokens["bob"]), 200)
            served = state.catalogs.get("b")
            assert served.maintainer is not None and served.maintainer.catalog is served.catalog
            # large compactions of every catalog go to the configured cluster (serve's flag)
            assert served.maintainer.settings.spark is spark and state.maintainer.settings.spark is spark
            threads = list(served.maintainer._threads)
            assert threads and all(t.is_alive() for t in threads)
            state.catalogs.close()
            assert not any(t.is_alive() for t in threads)
    finally:
        state.maintainer.stop(timeout=10)


def _maintained(engine: Any, table_id: int) -> bool:
    """Whether a maintenance worker finished a run on the table (its job deleted on success)."""
    from sqlalchemy import text

    with engine.connect() as conn:
        finished = conn.execute(
            text(
                "SELECT count(*) FROM paimon_maintenance_events WHERE table_id = :t "
                "AND operation = 'maintain' AND event_type = 'finished'"
            ),
            {"t": table_id},
        ).scalar_one()
        queued = conn.execute(
            text("SELECT count(*) FROM paimon_maintenance_jobs WHERE table_id = :t"), {"t": table_id}
        ).scalar_one()
    return bool(finished) and not queued


def test_a_catalog_never_requested_here_is_maintained(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A catalog created by the CLI and never named by a request to this replica is served by the sweep
    (``serve --catalog-sweep-seconds``): the replica's maintenance workers take its due jobs; once dropped
    it is retired (its workers stop)."""
    from paimon_meta.db.models import MaintenanceKind
    from paimon_meta.maintenance.queue import MaintenanceQueue
    from tests.cli.helpers import Cli

    url = rig.a.info.metastore_url
    Cli(url, rig.a.warehouse, capsys).json("catalogs", "create", "c", "--warehouse", str(tmp_path / "wh-c"))
    with paimon_meta.connect(url, catalog="c", **FAST_LOCK) as c:
        c.create_database("db")
        seed(c)
        table_id = c.table_row("db.t").table_id
    MaintenanceQueue(rig.a.engine, "c").enqueue(
        table_id, "db.t", MaintenanceKind.EXPIRE_SNAPSHOTS, reason="due"
    )
    settings = ServiceSettings(
        auth_cache_seconds=0, maintenance_workers=1, catalog_refresh_seconds=0, catalog_sweep_seconds=0.1
    )
    state = ServiceState(settings, rig.a)
    try:
        deadline = time.monotonic() + 60
        while not _maintained(rig.a.engine, table_id):
            assert time.monotonic() < deadline, "catalog c's job was not taken"
            time.sleep(0.1)
        served = next(s for s in state.catalogs.every() if s.name == "c")
        assert served.maintainer is not None
        threads = list(served.maintainer._threads)
        Catalogs(rig.a.engine).drop("c", cascade=True)
        while any(s.name == "c" for s in state.catalogs.every()):
            assert time.monotonic() < deadline + 60, "the dropped catalog is still served"
            time.sleep(0.1)
        state.catalogs.close()  # the retired one's workers stop with it
        assert not any(t.is_alive() for t in threads)
    finally:
        state.begin_drain()  # stops the sweep
        if state._sweeper is not None:
            state._sweeper.join(30)
        state.catalogs.close()
        state.maintainer.stop(timeout=10)


def test_background_recovery_covers_every_served_catalog(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery in the background settles each catalog the replica serves, each under its own lease."""
    from paimon_meta.ops import recovery

    recovered: list[str] = []

    def fake_recover_all(cat: MetastoreCatalog, **kwargs: object) -> list[recovery.RecoveryReport]:
        recovered.append(cat.registry.catalog_key)
        return []

    monkeypatch.setattr(recovery, "recover_all", fake_recover_all)
    settings = ServiceSettings(
        auth_cache_seconds=0, recovery_interval_seconds=0.05, catalog_refresh_seconds=0
    )
    state = ServiceState(settings, rig.a)
    try:
        with TestClient(create_app(settings, state=state), raise_server_exceptions=False) as client:
            _status(client.get(f"{B}/databases", headers=rig.tokens["bob"]), 200)
            deadline = time.monotonic() + 60
            while not {"jdbc", "b"} <= set(recovered):
                assert time.monotonic() < deadline, recovered
                time.sleep(0.05)
    finally:
        state.begin_drain()  # stops the recovery thread
        if state._recovery is not None:
            state._recovery.join(30)
        state.catalogs.close()


def _grants_on(rig: Rig, who: str) -> list[tuple[Any, ...]]:
    from sqlalchemy import text

    with rig.a.engine.connect() as conn:
        return sorted(
            (
                tuple(r)
                for r in conn.execute(
                    text(
                        "SELECT g.catalog_key, g.privilege, g.database_name, g.table_name "
                        "FROM paimon_grants g JOIN paimon_principals p USING (principal_id) "
                        "WHERE p.name = :who"
                    ),
                    {"who": who},
                )
            ),
            key=repr,
        )


def test_a_drop_and_undrop_in_one_catalog_move_only_its_own_grants(rig: Rig) -> None:
    """The recycle bin of catalog ``b`` keeps and restores ``b``'s grants on ``db.t`` only: the default
    catalog's grant on its own ``db.t`` (a grant naming no catalog) is neither moved nor duplicated."""
    principals = Principals(rig.a.engine)
    principals.create("carol")
    principals.grant("carol", Privilege.READ, database="db", table="t")  # the default catalog's db.t
    principals.grant("carol", Privilege.WRITE, database="db", table="t", catalog_key="b")
    principals.grant("carol", Privilege.READ, database="db", catalog_key="b")
    before = _grants_on(rig, "carol")
    bob = rig.tokens["bob"]
    _status(rig.client.delete(f"{B}/databases/db/tables/t", headers=bob), 200)
    assert _grants_on(rig, "carol") == sorted(
        [(None, "read", "db", "t"), ("b", "read", "db", None)], key=repr
    )
    _status(rig.client.post(f"{B}/databases/db/tables/t/undrop", headers=bob, json={}), 200)
    assert _grants_on(rig, "carol") == before


def test_metrics_name_the_catalog(rig: Rig) -> None:
    """A commit in catalog ``b`` through the service is counted under ``catalog="b"`` (the process's
    commit metrics and the event log's), apart from the default catalog's ``db.t``; the default
    catalog's series keep their names, with ``catalog="paimon"``."""
    from tests.service.helpers import commit_body

    c, alice, bob = rig.client, rig.tokens["alice"], rig.tokens["bob"]
    base = seed(rig.b, "db.u")  # one snapshot: commit_body's commit is valid on it
    assert _status(c.post(f"{B}/databases/db/tables/u/commit", json=commit_body(base), headers=bob), 200)[
        "success"
    ]
    stale = _status(c.post(f"{B}/databases/db/tables/u/commit", json=commit_body(base), headers=bob), 200)
    assert stale == {"success": False}
    wait_for_horizon(rig.a.engine)  # the rollup folds what every running transaction is past
    text = c.get("/metrics", headers=alice).text
    family = "paimon_meta_service_commits_total"
    assert f'{family}{{catalog="b",outcome="published",route="snapshot"}} 1.0' in text
    assert f'{family}{{catalog="b",outcome="conflict",route="snapshot"}} 1.0' in text
    assert f'{family}{{catalog="paimon"' not in text  # no commit in the default catalog went through us
    assert 'paimon_meta_service_commit_seconds_count{catalog="b"} 2.0' in text
    assert 'paimon_meta_service_commit_seconds_count{catalog="paimon"} 0.0' in text
    # the event log's: the same db.t, two series (this metastore records no default catalog: its key)
    assert re.search(
        r'^paimon_meta_commits_total\{catalog="b",table="db.t",kind="APPEND",outcome="published"\} 3$',
        text,
        re.M,
    )
    assert re.search(
        r'^paimon_meta_commits_total\{catalog="jdbc",table="db.t",kind="APPEND",outcome="published"\} 1$',
        text,
        re.M,
    )
    assert re.search(r'^paimon_meta_lock_wait_seconds_count\{catalog="b",lock="b.db.t"\} \d+$', text, re.M)
