"""A rolling upgrade (docs/DEPLOYMENT.md, "Rolling upgrades"): a replica of the previous release (the commit
``PREVIOUS_RELEASE``, unpacked with ``git archive`` and run from its own tree) serves commits while the
metastore is migrated to this tree's head (``paimon-meta db upgrade``, as the Job does) and a replica of
this tree starts beside it. Clients commit through both the whole time: every commit lands exactly once,
and nothing is answered 5xx but 503 (which a client re-sends)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from paimon_meta.catalog.metastore import connect_catalog
from paimon_meta.catalog.rest import RemoteCommitter, connect_service
from paimon_meta.db import migrate
from paimon_meta.errors import PaimonMetaError
from tests.commit.helpers import append_msg, data_file
from tests.fixtures.postgres import DbFactory
from tests.fixtures.service import FAST_LOCK, REPO, ServiceProcess, free_port, spawn_service
from tests.integration.history import check_exactly_once, read_history

pytestmark = pytest.mark.postgres

#: The previous release: the commit a replica of which must keep working across this tree's migrations.
#: Raise it (to the last merged main) when a release is cut.
PREVIOUS_RELEASE = "1af04605d2f56d28f7ca7d3a9975f54be52cc3b4"
CLIENTS = 4


def _previous_tree(tmp: Path) -> Path:
    tree = tmp / "previous"
    archive = tmp / "previous.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS_RELEASE], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="tar")
    return tree


def _start_previous(tree: Path, url: str, warehouse: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree), "PAIMON_META_URL": url}
    env["PAIMON_META_OPTIONS"] = ",".join(f"{k}={v}" for k, v in FAST_LOCK.items())
    proc = subprocess.Popen(
        [sys.executable, "-m", "paimon_meta.cli", "serve", "--warehouse", warehouse, "--port", str(port)],
        cwd=tree,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)


_SETUP = """
import sys
import pyarrow as pa
import paimon_meta
from paimon_meta.db.models import Privilege
from paimon_meta.metastore.principals import Principals

url, warehouse = sys.argv[1:3]
catalog = paimon_meta.connect(url, warehouse)
schema = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False),
                    ("v", pa.string())])
catalog.create_table("db.t", schema, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"})
principals = Principals(catalog.engine)
token = principals.create("writers", created_by="tests")
principals.grant("writers", Privilege("write"), database="db", table="t")
print(token)
"""


def _previous_setup(tree: Path, url: str, warehouse: str) -> str:
    """The table and a writer's token, made by the previous release's code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _SETUP, url, warehouse], cwd=tree, env=env, capture_output=True, check=True
    )
    return done.stdout.decode().strip().splitlines()[-1]


def _committer(base: str, token: str, user: str) -> RemoteCommitter:
    remote = connect_service(base, token, **{"rest.retry.deadline-seconds": "0"})
    table = remote.get_table("db.t")
    assert table.committer_factory is not None
    committer = table.committer_factory(table, user)
    assert isinstance(committer, RemoteCommitter)
    return committer


def test_previous_release_keeps_serving_across_the_migration_and_a_new_replica(
    pg_db_factory: DbFactory, tmp_path: Path, service_processes: list[ServiceProcess]
) -> None:
    url = pg_db_factory(migrated=False)
    warehouse = str(tmp_path / "warehouse")
    tree = _previous_tree(tmp_path)
    # The previous release's replica migrates an empty metastore to its own head (as it did then).
    old, old_base = _start_previous(tree, url, warehouse, tmp_path / "previous.log")
    try:
        replicas = [old_base]
        acked: dict[tuple[str, int], str] = {}
        refused: list[str] = []
        mutex = threading.Lock()
        stop = threading.Event()
        old_schema = migrate.current(url)
        assert old_schema is not None
        # The table and the writers' token, made by the previous release (this tree's catalog needs the
        # migrated schema: it connects once the Job below ran).
        token = _previous_setup(tree, url, warehouse)

        def client(c: int) -> None:
            user = f"client-{c}"
            i = 0
            while not stop.is_set() or i < 3:
                with mutex:
                    targets = list(replicas)
                f = data_file(rows=1)
                messages = [append_msg(i % 2, (c + i) % 2, f)]
                for attempt in range(20):
                    base = targets[(c + i + attempt) % len(targets)]
                    try:
                        _committer(base, token, user).commit(messages, i)
                        break
                    except PaimonMetaError as e:
                        with mutex:
                            refused.append(str(e))
                else:
                    raise AssertionError(f"{user} commit {i} never landed: {refused[-3:]}")
                with mutex:
                    acked[(user, i)] = f.file_name
                i += 1

        with ThreadPoolExecutor(CLIENTS) as pool:
            futures = [pool.submit(client, c) for c in range(CLIENTS)]
            try:
                _wait_for(lambda: len(acked) >= 2 * CLIENTS, "commits through the previous release")
                # The Job: this tree's migrations, while the previous release keeps committing (each
                # revision waits out the replica's transactions: a lock timeout, then a retry).
                migrate.upgrade(url)
                seen = len(acked)
                _wait_for(lambda: len(acked) >= seen + 2 * CLIENTS, "commits after the migration")
                # A replica of this tree beside it; the clients spread over both.
                new = spawn_service(service_processes, url, warehouse, tmp_path)
                with mutex:
                    replicas.append(new.base)
                seen = len(acked)
                _wait_for(lambda: len(acked) >= seen + 4 * CLIENTS, "commits through both replicas")
            finally:
                # Whatever failed above, the clients stop (else the pool's exit waits for them forever).
                stop.set()
            for future in futures:
                future.result()
        assert migrate.current(url) == migrate.heads()[0]
        # No 5xx but 503 (a 503 is re-sent); no unreachable replica either: both served throughout.
        assert all("HTTP 503" in e for e in refused), refused[:5]
        catalog = connect_catalog(url, warehouse, dict(FAST_LOCK), migrate=False)
        try:
            check_exactly_once(read_history(catalog, "db.t"), acked)
        finally:
            catalog.close()
    finally:
        old.terminate()
        old.wait(30)


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
