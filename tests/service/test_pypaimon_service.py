"""Unmodified pypaimon 2.1.0 against real ``paimon-meta serve`` processes over one Postgres metastore.

1. Round trip: pypaimon creates a database, an append table and a primary-key table, commits several
   batches, reads them back; our own read path must see the same rows, the event log one
   ``snapshot_published`` per snapshot (with the principal, ``source: rest``), and the partitions route
   the totals of the data on disk.
2. Concurrency: 4 pypaimon processes x 10 commits on one append table through 2 replicas. Exactly 40
   snapshots (1..40), every row once, one published event per snapshot; each process's write builder
   reuses one (commitUser, batch identifier) for its 10 commits, so each user owns exactly 10 snapshots.
3. SIGKILL mid-commit: the replica pypaimon commits to dies after creating ``snapshot-1`` and before
   answering; pypaimon talks to the replicas through a failover proxy (a load balancer), so its retry
   reaches the other replica and (deduplicating by reading ``snapshot-1`` from storage) succeeds. The
   next commit reconciles the orphaned snapshot: its ``prepared`` event ends as ``recovered``
   (published) for snapshot 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER
from paimon_meta.ops import tables as table_ops
from paimon_meta.ops.recovery import recover_table
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, FailoverProxy, ServiceProcess, make_principal, spawn_service
from tests.interop.canonical import assert_java_reads_as_we_do
from tests.interop.java_env import JavaHarness

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

PRINCIPAL = "etl"
Row = dict[str, Any]

# ---- pypaimon snippets (run in the pypaimon 2.1.0 venv) -----------------------------------------------

#: Shared by every snippet: a REST catalog on ``uri`` with a bearer token.
_PRELUDE = r"""
import json, os, sys, time
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

def rest_catalog(uri, token):
    return CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": "paimon",
                                  "token.provider": "bear", "token": token})

def read_rows(table):
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
"""

#: stdin: {"uri", "token", "t": [[row...] per batch], "kv": [[row...] per batch]}. Creates ``shop``,
#: ``shop.t`` (append, partitioned by day, 2 buckets on id) and ``shop.kv`` (primary key k, 1 bucket),
#: commits each batch with its own write builder, prints what pypaimon reads back.
ROUND_TRIP = (
    _PRELUDE
    + r"""
cfg = json.load(sys.stdin)
cat = rest_catalog(cfg["uri"], cfg["token"])
cat.create_database("shop", False)
t_schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.string()),
                      ("amount", pa.float64())])
cat.create_table("shop.t", Schema.from_pyarrow_schema(
    t_schema, partition_keys=["day"], options={"bucket": "2", "bucket-key": "id"}), False)
kv_schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
cat.create_table("shop.kv", Schema.from_pyarrow_schema(
    kv_schema, primary_keys=["k"], options={"bucket": "1"}), False)
for name, schema in (("shop.t", t_schema), ("shop.kv", kv_schema)):
    table = cat.get_table(name)
    for rows in cfg[name.split(".")[1]]:
        wb = table.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        c.commit(w.prepare_commit())
        w.close(); c.close()
print(json.dumps({"t": read_rows(cat.get_table("shop.t")), "kv": read_rows(cat.get_table("shop.kv"))}))
"""
)

#: argv: uri token table. Creates ``shop`` (if absent) and the append table ``shop.<table>`` (2 buckets).
CREATE_EVENTS_TABLE = (
    _PRELUDE
    + r"""
cat = rest_catalog(sys.argv[1], sys.argv[2])
cat.create_database("shop", True)
schema = pa.schema([pa.field("pid", pa.int32(), nullable=False), pa.field("n", pa.int32(), nullable=False),
                    pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
cat.create_table("shop." + sys.argv[3], Schema.from_pyarrow_schema(
    schema, options={"bucket": "2", "bucket-key": "k"}), False)
print(json.dumps({"created": sys.argv[3]}))
"""
)

#: Rows of commit ``n`` of process ``pid`` in ``shop.<table>``: (pid, n, k) is unique.
_ROWS = r"""
SCHEMA = pa.schema([pa.field("pid", pa.int32(), nullable=False), pa.field("n", pa.int32(), nullable=False),
                    pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
ROWS_PER_COMMIT = 3

def batch(pid, n):
    ks = list(range(ROWS_PER_COMMIT))
    return pa.table({"pid": [pid] * len(ks), "n": [n] * len(ks), "k": ks,
                     "v": [f"{pid}-{n}-{k}" for k in ks]}, schema=SCHEMA)
"""

#: argv: uri token table pid commits go-file. Waits for ``go-file`` (so all writers start together),
#: then commits ``commits`` batches through ONE write builder (one commitUser for all of them).
CONCURRENT_WRITER = (
    _PRELUDE
    + _ROWS
    + r"""
uri, token, name, pid, commits, go = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
    int(sys.argv[5]), sys.argv[6]
cat = rest_catalog(uri, token)
# Conflicts are expected (success:false, then a rebuilt retry): allow many retries, short waits.
table = cat.get_table("shop." + name).copy(
    {"commit.max-retries": "200", "commit.max-retry-wait": "300ms"})
wb = table.new_batch_write_builder()
deadline = time.monotonic() + 120
while not os.path.exists(go):
    if time.monotonic() > deadline:
        raise SystemExit("the go file never appeared")
    time.sleep(0.005)
for n in range(commits):
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(batch(pid, n))
    c.commit(w.prepare_commit())
    w.close(); c.close()
print(json.dumps({"pid": pid, "commit_user": wb.commit_user}))
"""
)

#: argv: uri token table pid n [min-retry-wait]. Commits batch(pid, n) through one write builder and
#: prints its commitUser and what pypaimon reads back. ``min-retry-wait`` spaces the client's retries
#: (the crash test restarts the dead replica within it).
COMMIT_ONE = (
    _PRELUDE
    + _ROWS
    + r"""
uri, token, name, pid, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cat = rest_catalog(uri, token)
table = cat.get_table("shop." + name)
if len(sys.argv) > 6:
    table = table.copy({"commit.min-retry-wait": sys.argv[6], "commit.max-retry-wait": sys.argv[6]})
wb = table.new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
w.write_arrow(batch(pid, n))
c.commit(w.prepare_commit())
w.close(); c.close()
print(json.dumps({"commit_user": wb.commit_user, "rows": read_rows(cat.get_table("shop." + name))}))
"""
)

ROWS_PER_COMMIT = 3


def batch_rows(pid: int, n: int) -> list[Row]:
    """The rows ``batch(pid, n)`` of the snippets writes."""
    return [{"pid": pid, "n": n, "k": k, "v": f"{pid}-{n}-{k}"} for k in range(ROWS_PER_COMMIT)]


# ---- helpers -------------------------------------------------------------------------------------------


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sort_rows(rows: Sequence[Row], *keys: str) -> list[Row]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def our_rows(catalog: MetastoreCatalog, identifier: str) -> list[Row]:
    """What our own read path returns for the latest snapshot of ``identifier``."""
    builder = catalog.get_table(identifier).new_read_builder()
    rows: list[Row] = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return rows


def snapshot_ids(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    ids: list[int] = catalog.get_table(identifier).snapshot_manager.list_snapshot_ids()
    return ids


def events(catalog: MetastoreCatalog, identifier: str, *types: str) -> list[dict[str, Any]]:
    """The table's commit events of ``types``, oldest first."""
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_id, commit_id, event_type, snapshot_id, principal, commit_user, payload "
                "FROM paimon_commit_events WHERE table_identifier = :t AND event_type = ANY(:types) "
                "ORDER BY event_id"
            ),
            {"t": identifier, "types": list(types)},
        )
        return [dict(r._mapping) for r in rows]


PUBLISHING = ("snapshot_published", "recovered", "external")


def finish_pypaimon(proc: subprocess.Popen[str], timeout: float = 300, context: str = "") -> Any:
    """Wait for a pypaimon process; its printed JSON, or AssertionError with its stderr tail."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"pypaimon timed out ({context}):\n{err[-3000:]}") from None
    assert proc.returncode == 0, f"pypaimon exited {proc.returncode} ({context}):\n{err[-3000:]}"
    lines = out.strip().splitlines()
    assert lines, f"pypaimon printed nothing ({context}):\n{err[-3000:]}"
    return json.loads(lines[-1])


@dataclass
class Rig:
    """One test's metastore, warehouse, admin principal's token and pypaimon; ``spawn`` starts a
    ``paimon-meta serve`` replica on them (stopped after the test)."""

    started: list[ServiceProcess]
    db: str
    warehouse: str
    token: str
    tmp: Path
    python: Path

    def spawn(self, **env: str) -> ServiceProcess:
        return spawn_service(self.started, self.db, self.warehouse, self.tmp, **env)

    clients: list[subprocess.Popen[str]] = field(default_factory=list)

    def catalog(self) -> MetastoreCatalog:
        return paimon_meta.connect(self.db, self.warehouse, **FAST_LOCK)

    def start_pypaimon(self, script: str, name: str, *args: str) -> subprocess.Popen[str]:
        """Start ``script`` (saved as ``name``) in pypaimon's venv without waiting for it; killed after
        the test if still running."""
        path = self.tmp / name
        # Written once, atomically: rewriting it while an earlier process is still starting could let
        # that process read an empty file (it then runs nothing and exits 0, printing nothing).
        if not path.exists() or path.read_text() != script:
            staged = path.with_suffix(f".{len(self.clients)}.tmp")
            staged.write_text(script)
            os.replace(staged, path)
        proc = subprocess.Popen(
            [str(self.python), str(path), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.tmp,  # never import this repo's packages by accident
        )
        self.clients.append(proc)
        return proc


@pytest.fixture
def rig(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> Iterator[Rig]:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        # Admin on the catalog: it may create databases and tables, and commit.
        token = make_principal(catalog, PRINCIPAL, [("admin", None, None)])
    finally:
        catalog.close()
    rig = Rig(service_processes, clean_db, warehouse, token, tmp_path, pypaimon_python)
    yield rig
    for proc in rig.clients:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# ---- 1. round trip -------------------------------------------------------------------------------------

T_BATCHES: list[list[Row]] = [
    [
        {"id": 1, "day": "d1", "amount": 1.5},
        {"id": 2, "day": "d1", "amount": 2.5},
        {"id": 3, "day": "d2", "amount": 3.5},
        {"id": 4, "day": "d2", "amount": 4.5},
    ],
    [{"id": 5, "day": "d1", "amount": 5.0}, {"id": 6, "day": "d3", "amount": 6.25}],
    [
        {"id": 7, "day": "d3", "amount": 7.0},
        {"id": 8, "day": "d2", "amount": 8.0},
        {"id": 9, "day": "d1", "amount": -9.5},
    ],
]
KV_BATCHES: list[list[Row]] = [
    [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}],
    [{"k": 2, "v": "b2"}, {"k": 4, "v": "d"}],  # an update of k=2
    [{"k": 1, "v": "a3"}],  # an update of k=1
]


def test_round_trip(rig: Rig, java_harnesses: dict[str, JavaHarness]) -> None:
    server = rig.spawn()
    read = run_pypaimon(
        ROUND_TRIP,
        input_json={"uri": server.base, "token": rig.token, "t": T_BATCHES, "kv": KV_BATCHES},
        python=rig.python,
    )

    expected_t = sort_rows([r for b in T_BATCHES for r in b], "id")
    latest_kv: dict[int, Row] = {}
    for b in KV_BATCHES:
        latest_kv.update({r["k"]: r for r in b})
    expected_kv = sort_rows(list(latest_kv.values()), "k")
    assert sort_rows(read["t"], "id") == expected_t
    assert sort_rows(read["kv"], "k") == expected_kv

    catalog = rig.catalog()
    try:
        assert sort_rows(our_rows(catalog, "shop.t"), "id") == expected_t
        assert sort_rows(our_rows(catalog, "shop.kv"), "k") == expected_kv

        for identifier, n in (("shop.t", len(T_BATCHES)), ("shop.kv", len(KV_BATCHES))):
            assert snapshot_ids(catalog, identifier) == list(range(1, n + 1))
            published = [
                (e["event_type"], e["snapshot_id"], e["principal"], e["payload"].get("source"))
                for e in events(catalog, identifier, *PUBLISHING)
            ]
            assert sorted(published, key=lambda p: p[1]) == [
                ("snapshot_published", sid, PRINCIPAL, "rest") for sid in range(1, n + 1)
            ]
        location = Path(catalog.table_location("shop", "t"))
    finally:
        catalog.close()

    response = httpx.get(
        f"{server.base}/v1/paimon/databases/shop/tables/t/partitions", headers=auth(rig.token), timeout=30
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body.get("nextPageToken") is None
    got = {p["spec"]["day"]: p for p in body["partitions"]}
    rows_per_day = Counter(r["day"] for r in expected_t)
    assert set(got) == set(rows_per_day)
    for day, count in rows_per_day.items():
        # Append only, no compaction: every data file on disk is live.
        files = [f for f in (location / f"day={day}").glob("bucket-*/*") if f.is_file()]
        assert files, f"no data files for day={day} under {location}"
        assert got[day]["recordCount"] == count, got[day]
        assert got[day]["fileCount"] == len(files), got[day]
        assert got[day]["fileSizeInBytes"] == sum(f.stat().st_size for f in files), got[day]
        assert got[day]["totalBuckets"] == 2, got[day]

    # Java Paimon 0.9 and 1.0 read both tables as we do (rows, latest snapshot, fields).
    paths = [str(location), str(location.parent / "kv")]
    for version, harness in java_harnesses.items():
        for read, path in zip(harness.read_tables(paths), paths, strict=True):
            assert_java_reads_as_we_do(read, path, version)


# ---- 2. concurrency ------------------------------------------------------------------------------------

WRITERS = 4
COMMITS = 10


def test_concurrent_writers_two_replicas(rig: Rig) -> None:
    replicas = [rig.spawn() for _ in range(2)]
    run_pypaimon(CREATE_EVENTS_TABLE, replicas[0].base, rig.token, "events", python=rig.python)
    go = rig.tmp / "go"
    procs = [
        rig.start_pypaimon(
            CONCURRENT_WRITER,
            "writer.py",
            replicas[pid % 2].base,  # 2 writers per replica
            rig.token,
            "events",
            str(pid),
            str(COMMITS),
            str(go),
        )
        for pid in range(WRITERS)
    ]
    go.touch()
    results = [finish_pypaimon(p) for p in procs]
    users = {r["pid"]: r["commit_user"] for r in results}
    assert len(set(users.values())) == WRITERS

    total = WRITERS * COMMITS
    catalog = rig.catalog()
    try:
        assert snapshot_ids(catalog, "shop.events") == list(range(1, total + 1))
        manager = catalog.get_table("shop.events").snapshot_manager
        snapshots = [manager.snapshot(sid) for sid in range(1, total + 1)]
        # Each writer's builder reused one (commitUser, batch identifier) for all its commits: the
        # server must neither drop such a commit as a duplicate nor let a retry land twice.
        assert {s.commit_identifier for s in snapshots} == {BATCH_COMMIT_IDENTIFIER}
        user_of = {s.id: s.commit_user for s in snapshots}
        assert Counter(user_of.values()) == Counter({u: COMMITS for u in users.values()})

        rows = our_rows(catalog, "shop.events")
        keys = Counter((r["pid"], r["n"], r["k"]) for r in rows)
        assert [k for k, c in keys.items() if c > 1] == []
        expected = [r for pid in range(WRITERS) for n in range(COMMITS) for r in batch_rows(pid, n)]
        assert sort_rows(rows, "pid", "n", "k") == sort_rows(expected, "pid", "n", "k")

        published = events(catalog, "shop.events", *PUBLISHING)
        assert [e["event_type"] for e in published] == ["snapshot_published"] * total
        assert sorted(e["snapshot_id"] for e in published) == list(range(1, total + 1))
        assert {e["principal"] for e in published} == {PRINCIPAL}
        assert {e["payload"].get("source") for e in published} == {"rest"}
        assert {e["snapshot_id"]: e["commit_user"] for e in published} == user_of

        conflicts = [
            e
            for e in events(catalog, "shop.events", "conflict_checked")
            if e["payload"].get("conflict") is True
        ]
        print(f"conflict_checked with a conflict (client retries): {len(conflicts)}")
    finally:
        catalog.close()


# ---- 3. SIGKILL mid-commit -----------------------------------------------------------------------------

#: pypaimon's wait before retrying a failed commit attempt. Its retry starts by GETting the latest
#: snapshot, and a failed GET ends the commit for good: the proxy in front of the replicas has handed
#: new connections to the live replica long before this.
RETRY_WAIT = "500ms"


def wait_for_exit(server: ServiceProcess, client: subprocess.Popen[str], timeout: float = 120) -> int:
    """Wait until ``server`` exits (it crashes while serving ``client``'s commit); its exit status."""
    assert server.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = server.proc.poll()
        if code is not None:
            return code
        if client.poll() is not None:
            _, err = client.communicate()
            raise AssertionError(f"pypaimon exited {client.returncode} before the crash:\n{err[-3000:]}")
        time.sleep(0.02)
    raise AssertionError(f"the server did not crash in {timeout}s: {server.log_tail()}")


def test_sigkill_after_snapshot_then_client_retry(rig: Rig) -> None:
    crashing = rig.spawn(
        PAIMON_META_TEST_CRASH_AT="after_snapshot",
        PAIMON_META_TEST_CRASH_MODE="kill",
    )
    other = rig.spawn()
    run_pypaimon(CREATE_EVENTS_TABLE, other.base, rig.token, "t", python=rig.python)
    # A load balancer in front of both replicas: new connections go to the first that accepts.
    proxy = FailoverProxy([crashing.port, other.port])
    try:
        client = rig.start_pypaimon(
            COMMIT_ONE, "commit_one.py", proxy.base, rig.token, "t", "0", "0", RETRY_WAIT
        )
        code = wait_for_exit(crashing, client)
        assert code == -signal.SIGKILL, crashing.log_tail()
        assert "crashing at after_snapshot" in crashing.log_tail()
        # pypaimon's retry reaches the live replica and finds its snapshot on storage.
        first = finish_pypaimon(client, context="retry through the proxy after the crash")
        assert proxy.used[-1] == other.port, proxy.used
    finally:
        proxy.close()
    assert sort_rows(first["rows"], "pid", "n", "k") == batch_rows(0, 0)

    catalog = rig.catalog()
    try:
        # The crashed attempt's snapshot is the commit: exactly one snapshot, the rows once.
        assert snapshot_ids(catalog, "shop.t") == [1]
        snap1 = catalog.get_table("shop.t").snapshot_manager.snapshot(1)
        assert snap1.commit_user == first["commit_user"]
        assert sort_rows(our_rows(catalog, "shop.t"), "pid", "n", "k") == batch_rows(0, 0)
        prepared = [
            e for e in events(catalog, "shop.t", "prepared") if e["commit_user"] == first["commit_user"]
        ]
        # One prepared event: the retry found snapshot-1 (its own) and did not commit again.
        assert len(prepared) == 1, prepared
        crashed_commit = prepared[0]["commit_id"]

        # The next commit (the other replica, after the dead one's lease expired) reconciles storage.
        second = run_pypaimon(COMMIT_ONE, other.base, rig.token, "t", "1", "0", python=rig.python)
        expected = sort_rows(batch_rows(0, 0) + batch_rows(1, 0), "pid", "n", "k")
        assert sort_rows(second["rows"], "pid", "n", "k") == expected
        assert sort_rows(our_rows(catalog, "shop.t"), "pid", "n", "k") == expected
        assert snapshot_ids(catalog, "shop.t") == [1, 2]

        published = events(catalog, "shop.t", *PUBLISHING)
        by_snapshot = {sid: [e for e in published if e["snapshot_id"] == sid] for sid in (1, 2)}
        assert len(published) == 2, published
        (recovered,) = by_snapshot[1]
        assert recovered["event_type"] == "recovered", recovered
        assert recovered["commit_id"] == crashed_commit
        assert recovered["payload"].get("resolution") == "published", recovered
        assert recovered["principal"] == PRINCIPAL
        (next_commit,) = by_snapshot[2]
        assert next_commit["event_type"] == "snapshot_published", next_commit
        assert next_commit["commit_user"] == second["commit_user"]
        assert next_commit["principal"] == PRINCIPAL

        row = catalog.table_row("shop.t")
        assert catalog.events.pending_commits(row.table_id) == []
        # Nothing left for recovery: no unrecorded snapshot, no pending commit.
        report = recover_table(catalog, "shop.t", older_than_seconds=0)
        assert (report.ok, report.reconciled, report.commits) == (True, [], [])
        assert len(events(catalog, "shop.t", *PUBLISHING)) == 2
    finally:
        catalog.close()


#: argv: uri token. A database with two tables (one written), a refused plain drop (pypaimon checks for
#: tables itself), then ``drop_database(cascade=True)``, which sends the plain DELETE and expects the
#: server to drop the tables.
CASCADE_DROP = (
    _PRELUDE
    + _ROWS
    + r"""
cat = rest_catalog(sys.argv[1], sys.argv[2])
cat.create_database("gone", False)
for name in ("a", "b"):
    cat.create_table("gone." + name, Schema.from_pyarrow_schema(SCHEMA, options={"bucket": "1"}), False)
table = cat.get_table("gone.a")
wb = table.new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
w.write_arrow(batch(1, 0))
c.commit(w.prepare_commit())
w.close(); c.close()
out = {}
from pypaimon.schema.data_types import AtomicType
from pypaimon.schema.schema_change import SchemaChange
cat.create_tag("gone.a", "daily", time_retained="1d")
cat.create_tag("gone.a", "daily", ignore_if_exists=True)
out["tag"] = cat.get_tag("gone.a", "daily").tag_time_retained
cat.alter_table("gone.a", [SchemaChange.update_column_type("n", AtomicType("BIGINT"))])
out["n"] = [str(f.type) for f in cat.get_table("gone.a").fields if f.name == "n"]
try:
    cat.drop_database("gone", cascade=False)
    out["plain"] = "dropped"
except Exception as e:
    out["plain"] = type(e).__name__
out["before"] = sorted(cat.list_tables("gone"))
cat.drop_database("gone", cascade=True)
out["after"] = sorted(cat.list_databases())
print(json.dumps(out))
"""
)


def test_drop_database_with_cascade_drops_its_tables(rig: Rig) -> None:
    """First, tables this library's writer does not write (dynamic bucket, Avro) served to pypaimon;
    then ``create_tag(time_retained=...)`` and ``update_column_type``. pypaimon's
    ``drop_database(cascade=True)`` sends a plain DELETE and expects the server to drop the tables (Java's
    RESTCatalog does the same): the tables, their files and the database are gone, each table drop
    recorded with the principal; without cascade pypaimon refuses by itself."""
    server = rig.spawn()
    # first, on the same server: tables only pypaimon writes are created, committed and read back
    written = run_pypaimon(CLIENT_WRITTEN_TABLES, server.base, rig.token, python=rig.python)
    assert written == {
        "dyn": 2 * ROWS_PER_COMMIT,
        "av": 2 * ROWS_PER_COMMIT,
        "csv": ["FormatTable", ROWS_PER_COMMIT],
    }, written
    csv_files = list(Path(rig.warehouse, "free.db", "csv").rglob("*.csv"))
    assert csv_files and not Path(rig.warehouse, "free.db", "csv", "schema").exists(), csv_files
    got = run_pypaimon(CASCADE_DROP, server.base, rig.token, python=rig.python)
    assert got["plain"] == "ValueError" and got["before"] == ["a", "b"], got
    # on the way: a tag with a retention, and a column type changed through Java's casts
    assert got["tag"] == "PT24H" and got["n"] == ["BIGINT"], got  # nullable now: no keepNullability
    assert "gone" not in got["after"], got
    catalog = rig.catalog()
    try:
        assert "gone" not in catalog.list_databases()
        # the dropped tables wait in the recycle bin with their files; purged, the files are gone
        assert sorted(d.identifier for d in catalog.recycle_bin.entries(database="gone")) == [
            "gone.a",
            "gone.b",
        ]
        for dropped in catalog.recycle_bin.entries(database="gone"):
            table_ops.purge_dropped(catalog, dropped, reason="operator")
        assert not Path(rig.warehouse, "gone.db", "a").exists() or not any(
            p.is_file() for p in Path(rig.warehouse, "gone.db", "a").rglob("*")
        )
        with catalog.engine.connect() as conn:
            drops = conn.execute(
                text(
                    "SELECT table_identifier, principal FROM paimon_maintenance_events "
                    "WHERE operation = 'drop_table' AND event_type = 'finished' ORDER BY table_identifier"
                )
            ).all()
        assert [(d.table_identifier, d.principal) for d in drops] == [
            ("gone.a", PRINCIPAL),
            ("gone.b", PRINCIPAL),
        ]
    finally:
        catalog.close()


#: argv: uri token. Tables this library's own writer does not write (a primary-key table with dynamic
#: buckets, Avro data files) created, written, committed and read by pypaimon through the service.
CLIENT_WRITTEN_TABLES = (
    _PRELUDE
    + _ROWS
    + r"""
cat = rest_catalog(sys.argv[1], sys.argv[2])
cat.create_database("free", True)
out = {}
TABLES = (("dyn", {"bucket": "-1"}, ["pid", "n", "k"]), ("av", {"bucket": "1", "file.format": "avro"}, None))
for name, options, keys in TABLES:
    schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=keys, options=options)
    cat.create_table("free." + name, schema, False)
    table = cat.get_table("free." + name)
    for n in range(2):
        wb = table.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(batch(1, n))
        c.commit(w.prepare_commit())
        w.close(); c.close()
    out[name] = len(read_rows(cat.get_table("free." + name)))
# a format table: plain CSV files pypaimon writes and reads in the directory the catalog names
fmt = Schema.from_pyarrow_schema(SCHEMA, options={"type": "format-table", "file.format": "csv"})
cat.create_table("free.csv", fmt, False)
table = cat.get_table("free.csv")
wb = table.new_batch_write_builder()
w, c = wb.new_write(), wb.new_commit()
w.write_arrow(batch(1, 0))
c.commit(w.prepare_commit())
w.close(); c.close()
rb = cat.get_table("free.csv").new_read_builder()
out["csv"] = [type(table).__name__, rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows]
print(json.dumps(out))
"""
)
