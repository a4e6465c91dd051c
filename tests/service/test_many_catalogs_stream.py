"""The live change feed of one catalog never carries another's events (issue 35): a subscriber of catalog
``b``'s stream (``/v1/b/events``, served by ``b``'s own feed reader) sees ``b``'s ``db.t`` commits and none
of the default catalog's ``db.t``, committed in between through the same ``serve``; the console's live
view under the switcher's cookie likewise."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.principals import Principals
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import FAST_LOCK, ServiceProcess, spawn_service
from tests.service.test_feed_stream import _sse

# The feed's horizon is the oldest transaction of the whole cluster: a cluster of this module's own.
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])


def _commit(catalog: MetastoreCatalog, k: int) -> None:
    wb = catalog.get_table("db.t").new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array([k], pa.int64())}))
    commit.commit(write.prepare_commit())
    write.close()


def _stream(server: ServiceProcess, prefix: str, token: str) -> Iterator[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    with httpx.stream("GET", f"{server.base}/v1/{prefix}/events", headers=headers, timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        for event_id, event in _sse(answer.iter_lines()):
            if event_id is not None and event is not None:
                yield event


def test_a_catalogs_live_stream_carries_only_its_events(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path
) -> None:
    a = paimon_meta.connect(clean_db, str(tmp_path / "wh-a"), **FAST_LOCK)
    try:
        Catalogs(a.engine).create("b", str(tmp_path / "wh-b"))
        principals = Principals(a.engine)
        token = principals.create("bob")
        principals.grant("bob", Privilege.READ, catalog_key="b")
        a.create_table("db.t", SCHEMA)
        with paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK) as b:
            b.create_table("db.t", SCHEMA)
            b_table_id = b.table_row("db.t").table_id
            server = spawn_service(service_processes, clean_db, str(tmp_path / "wh-a"), tmp_path)
            _commit(a, 1)  # before the stream: in its backlog, were it b's
            seen: list[dict[str, Any]] = []

            def commits() -> None:
                _commit(a, 2)
                _commit(b, 1)
                _commit(a, 3)
                _commit(b, 2)

            writer = threading.Thread(target=commits)
            writer.start()
            for event in _stream(server, "b", token):
                seen.append(event)
                data = event["data"]
                if event["type"] == "org.paimon.commit.snapshot_published" and data["snapshotId"] == 2:
                    break
            writer.join()
    finally:
        a.close()
    published = [e["data"]["snapshotId"] for e in seen if e["type"] == "org.paimon.commit.snapshot_published"]
    assert published == [1, 2]
    assert {e["data"]["tableId"] for e in seen if e["data"]["log"] == "commit"} == {b_table_id}
    assert {e["data"]["lockId"] for e in seen if e["data"]["log"] == "lock"} == {"b.db.t"}
    assert {e["source"].rsplit("/", 1)[-1] for e in seen} == {"b"}


def _console_stream(
    server: ServiceProcess, token: str, cookie: str | None, until: Any
) -> list[dict[str, Any]]:
    """The console's live view from the start (under the catalog switcher's ``cookie``), until ``until``."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if cookie is not None:
        headers["Cookie"] = f"paimon_meta_catalog={cookie}"
    seen: list[dict[str, Any]] = []
    url = f"{server.base}/ui/live/events?from=start"
    with httpx.stream("GET", url, headers=headers, timeout=120) as answer:
        assert answer.status_code == 200, answer.read()
        for _, event in _sse(answer.iter_lines()):
            if event is not None:
                seen.append(event)
                if until(event):
                    return seen
    raise AssertionError(f"the stream ended before its last event: {seen}")


def _snapshot(n: int) -> Any:
    return lambda e: e["type"] == "org.paimon.commit.snapshot_published" and e["data"]["snapshotId"] == n


def test_the_console_live_view_of_one_catalog_never_shows_the_others_events(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path
) -> None:
    """The console's live view under the switcher's cookie for ``b`` streams ``b``'s events only; without
    it, the default catalog's only. Commits alternate between the catalogs, and each stream is read up to
    its catalog's last one, so an event of the other catalog would have been read before it."""
    a = paimon_meta.connect(clean_db, str(tmp_path / "wh-a"), **FAST_LOCK)
    try:
        Catalogs(a.engine).create("b", str(tmp_path / "wh-b"))
        principals = Principals(a.engine)
        bob, alice = principals.create("bob"), principals.create("alice")
        principals.grant("bob", Privilege.READ, catalog_key="b")
        principals.grant("alice", Privilege.READ)  # the default catalog's
        a.create_table("db.t", SCHEMA)
        with paimon_meta.connect(clean_db, catalog="b", **FAST_LOCK) as b:
            b.create_table("db.t", SCHEMA)
            ids = {"a": a.table_row("db.t").table_id, "b": b.table_row("db.t").table_id}
            for k in (1, 2):
                _commit(b, k)
                _commit(a, k)
            _commit(b, 3)
            server = spawn_service(service_processes, clean_db, str(tmp_path / "wh-a"), tmp_path)
            in_b = _console_stream(server, bob, "b", _snapshot(3))
            in_a = _console_stream(server, alice, None, _snapshot(2))
    finally:
        a.close()
    assert {e["source"].rsplit("/", 1)[-1] for e in in_b} == {"b"}
    assert {e["data"]["tableId"] for e in in_b if e["data"]["log"] == "commit"} == {ids["b"]}
    assert {e["data"]["lockId"] for e in in_b if e["data"]["log"] == "lock"} == {"b.db.t"}
    assert {e["source"].rsplit("/", 1)[-1] for e in in_a} == {"paimon"}
    assert {e["data"]["tableId"] for e in in_a if e["data"]["log"] == "commit"} == {ids["a"]}
    assert {e["data"]["lockId"] for e in in_a if e["data"]["log"] == "lock"} == {"jdbc.db.t"}
