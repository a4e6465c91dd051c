"""S3 faults through the service, at each step of a commit (delta manifests, manifest lists, the snapshot,
the LATEST hint): throttling and lost answers that the S3 FileIO's retries absorb (the client sees a
plain success), and faults past the retry budget (the project's fault-injecting FileIO) that the
client sees as 503 (or 500 "outcome unknown" after the snapshot may have landed) and resolves by
re-sending the same commit. Every commit lands exactly once."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.io import FaultInjectingFileIO
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.s3 import MotoS3, StoreFault
from tests.fixtures.service import FAST_LOCK, make_principal
from tests.ops.helpers import create, prepare, read_keys
from tests.service.helpers import P, auth, messages_body

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

URL = f"{P}/databases/db/tables/t/commit-messages"
USER = "writer"

#: What each step of a commit writes: (FileIO op, path substring), and the S3 key's test.
STEPS: dict[str, tuple[str, str, Callable[[str], bool]]] = {
    "manifest": (
        "create_if_absent",
        "/manifest/manifest-",
        lambda key: "/manifest/manifest-" in key and "manifest-list" not in key,
    ),
    "manifest-list": (
        "create_if_absent",
        "/manifest/manifest-list-",
        lambda key: "/manifest/manifest-list-" in key,
    ),
    "snapshot": ("create_if_absent", "/snapshot/snapshot-", lambda key: "/snapshot/snapshot-" in key),
    "hint": ("write", "/snapshot/LATEST", lambda key: key.endswith("/snapshot/LATEST")),
}


@pytest.fixture
def s3_catalog(clean_db: str, moto_server: MotoS3) -> Iterator[MetastoreCatalog]:
    bucket = moto_server.create_bucket()
    # Short backoff between S3 attempts: the faults here are few and the test need not wait.
    catalog = paimon_meta.connect(clean_db, f"s3://{bucket}/warehouse", **moto_server.options(), **FAST_LOCK)
    try:
        create(catalog)
        yield catalog
    finally:
        catalog.close()
        moto_server.clear_faults()
        moto_server.drop_bucket(bucket)


def _client(catalog: MetastoreCatalog) -> TestClient:
    settings = ServiceSettings(auth_cache_seconds=60, max_body_bytes=1 << 22)
    return TestClient(
        create_app(settings, state=ServiceState(settings, catalog)), raise_server_exceptions=False
    )


def _body(catalog: MetastoreCatalog, identifier: int) -> dict[str, Any]:
    return messages_body(prepare(catalog.get_table("db.t"), [identifier], user=USER), USER, identifier)


def _commit_until_acknowledged(
    client: TestClient, body: dict[str, Any], headers: dict[str, str]
) -> list[int]:
    """What a client does: re-send the same commit on 503 (and on 500 "outcome unknown") until it is
    acknowledged; every other answer is a failure of the test. Returns the statuses seen."""
    statuses: list[int] = []
    for _ in range(5):
        response = client.post(URL, json=body, headers=headers)
        statuses.append(response.status_code)
        if response.status_code == 200:
            return statuses
        assert response.status_code in (500, 503), response.text
        if response.status_code == 503:
            assert int(response.headers["retry-after"]) >= 1
            assert "storage" in response.json()["message"]
        else:
            assert "outcome is unknown" in response.json()["message"]
    raise AssertionError(f"not acknowledged after {statuses}")


def _exactly_once(catalog: MetastoreCatalog, identifiers: list[int]) -> None:
    assert read_keys(catalog, identifier="db.t") == sorted(identifiers)
    table = catalog.get_table("db.t")
    latest = table.latest_snapshot()
    assert latest is not None
    published = [table.snapshot_manager.snapshot(sid).commit_identifier for sid in range(1, latest.id + 1)]
    assert sorted(published) == sorted(identifiers)  # one snapshot per commit, none twice
    assert catalog.table_row("db.t").latest_snapshot_id == latest.id


def _put_of(matches: Callable[[str], bool], method: str, path: str) -> bool:
    return method == "PUT" and matches(path)


@pytest.mark.parametrize("kind", ["slowdown", "lost"])
def test_faults_the_s3_retries_absorb_are_invisible(
    s3_catalog: MetastoreCatalog, moto_server: MotoS3, kind: Literal["slowdown", "lost"]
) -> None:
    writer = auth(make_principal(s3_catalog, "writer", [("write", "db", "t")]))
    identifiers: list[int] = []
    with _client(s3_catalog) as client:
        for i, (step, (_, _, matches)) in enumerate(STEPS.items(), start=1):
            body = _body(s3_catalog, i)
            fault = moto_server.inject(
                StoreFault(kind, functools.partial(_put_of, matches), times=2 if kind == "slowdown" else 1)
            )
            response = client.post(URL, json=body, headers=writer)
            assert response.status_code == 200, (step, response.text)
            assert fault.fired, f"no {kind} fault fired on the {step} step"
            moto_server.clear_faults()
            identifiers.append(i)
    _exactly_once(s3_catalog, identifiers)


@pytest.mark.parametrize("after_write", [False, True], ids=["before-the-write", "answer-lost"])
def test_faults_past_the_retry_budget_answer_503_and_the_re_send_lands_once(
    s3_catalog: MetastoreCatalog, after_write: bool
) -> None:
    fio = FaultInjectingFileIO(s3_catalog.file_io)
    s3_catalog.file_io = fio  # every table the catalog opens from now on goes through it
    writer = auth(make_principal(s3_catalog, "writer", [("write", "db", "t")]))
    identifiers: list[int] = []
    seen: dict[str, list[int]] = {}
    with _client(s3_catalog) as client:
        for i, (step, (op, substring, _)) in enumerate(STEPS.items(), start=1):
            body = _body(s3_catalog, i)
            rule = fio.fail_nth(op, 1, path_contains=substring, after_write=after_write)
            seen[step] = _commit_until_acknowledged(client, body, writer)
            assert rule.fired == 1, f"the {step} fault did not fire"
            fio.clear()
            identifiers.append(i)
    _exactly_once(s3_catalog, identifiers)
    # A fault on a delta manifest or a manifest list fails the commit (503: nothing was published); the
    # client's re-send lands it. A snapshot whose create provably did not happen is retried by the
    # commit path itself under the lock; one whose answer was lost is settled by reading it back. The
    # hint is only a hint: its failure is not the commit's.
    for step in ("manifest", "manifest-list"):
        assert seen[step] == [503, 200], seen
    assert seen["snapshot"] == [200] and seen["hint"] == [200], seen
