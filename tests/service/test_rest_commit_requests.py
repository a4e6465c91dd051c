"""The work a REST commit does outside the table lock (issue 39, item 3), counted: the S3 requests of a
steady-state commit-messages request (the S3 server's request log) and the Postgres round trips of
authenticating a request (a hook on the driver's connections)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from paimon_meta.table import schema_change
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
        base = s3_catalog.get_table("db.s").latest_snapshot()
        assert base is not None
        missing = commit_body(base, deltaManifestList="manifest-list-gone-0")
        response = client.post(f"{P}/databases/db/tables/s/commit", json=missing, headers=writer)
        assert response.status_code == 400, response.text
        assert "deltaManifestList" in response.text
