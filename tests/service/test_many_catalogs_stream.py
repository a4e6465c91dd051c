"""The live change feed of one catalog never carries another's events (issue 35): a subscriber of catalog
``b``'s stream (``/v1/b/events``, served by ``b``'s own feed reader) sees ``b``'s ``db.t`` commits and none
of the default catalog's ``db.t``, committed in between through the same ``serve``."""

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
