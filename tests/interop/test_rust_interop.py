"""paimon-rust (PyPI ``pypaimon-rust`` 0.4.0, in its own venv: ``tests/interop/rust_env.py``) as a peer, live.

1. paimon-rust writes, we commit: we create the table (through our catalog, ``schema-0`` written by us);
   paimon-rust opens that directory with ``Table.from_resolved_schema``, writes rows with
   ``new_batch_write_builder().new_write()`` and prints its ``CommitMessage.serialize()`` bodies (version 14);
   we commit them through the control plane (``POST .../commit-messages``). Our reader, paimon-rust's,
   pypaimon 2.1.0's and Java Paimon's (0.9 and 1.0-SNAPSHOT) must then all return exactly the rows
   paimon-rust wrote.
2. paimon-rust reads what we write: append tables (bucket -1 and fixed) and a primary-key table with an
   update and a ``_row_kind`` ``-D`` delete, with and without thin mode, Parquet; its rows must equal ours.
3. paimon-rust writes primary-key tables in thin mode (no ``_KEY_*`` columns, whatever
   ``data-file.thin-mode`` says), an insert then updates: the commits land, paimon-rust, pypaimon and we
   read the table alike, and our compaction of its files is read alike too. Java 0.9/1.0-SNAPSHOT predate
   thin mode: a strict xfail per version.

The tables of 1 and 3 are built once per module (``rust_tables``: one database, one in-process service),
then read by one paimon-rust process, and by one pypaimon process and one JVM per Java version side by
side.
"""

from __future__ import annotations

import base64
import shutil
import struct
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.types import BIGINT
from paimon_meta.ops.references import live_entries, read_metadata
from paimon_meta.serde.commit_message import CURRENT_VERSION, deserialize_commit_messages
from paimon_meta.table.compact import compact
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.bucket import bucket_of
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.postgres import PgServer
from tests.fixtures.service import FAST_LOCK, in_process_client, make_principal
from tests.interop.arrow_reader import ArrowRead
from tests.interop.canonical import (
    assert_java_reads_as_we_do,
    assert_same_rows,
    canonical_arrow,
    canonical_java,
)
from tests.interop.java_env import VERSIONS, JavaHarness, TableRead
from tests.interop.pypaimon_reader import assert_pypaimon_reads_as_we_do, pypaimon_read_tables
from tests.interop.rust_reader import assert_rust_reads_as_we_do, rust_read_tables
from tests.service.helpers import P, auth

pytestmark = [pytest.mark.interop, pytest.mark.postgres]

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("p", pa.string(), nullable=False),
        ("v", pa.string()),
    ]
)
Row = dict[str, Any]

# Shared by the snippets: open the table directory as paimon-rust does without a catalog, from the newest
# schema file we wrote; rows travel as JSON lists of {"k", "p", "v"}.
_OPEN = r"""
import base64, json, os, sys
import pyarrow as pa
from pypaimon_rust.datafusion import CommitMessage, Table

def open_table(location):
    schema_dir = os.path.join(location, "schema")
    latest = max(int(n.split("-", 1)[1]) for n in os.listdir(schema_dir) if n.startswith("schema-"))
    with open(os.path.join(schema_dir, f"schema-{latest}")) as f:
        return Table.from_resolved_schema(location, f.read(), database="db", table=os.path.basename(location))

def read_rows(table):
    rb = table.new_read_builder()
    batches = rb.new_read().read(rb.new_scan().plan().splits())
    return pa.Table.from_batches(batches).to_pylist() if batches else []
"""

RUST_WRITES = (
    _OPEN
    + r"""
spec = json.load(sys.stdin)
table = open_table(spec["location"])
schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    ("v", pa.string())])
write = table.new_batch_write_builder().new_write()
rows = spec["rows"]
write.write_arrow(pa.record_batch({name: [r[name] for r in rows] for name in schema.names}, schema=schema))
messages = write.prepare_commit()
write.close()
bodies = [m.serialize() for m in messages]
# Each body must survive paimon-rust's own decoder unchanged (it is what a driver would ship around).
same = [CommitMessage.deserialize(b, version=14).serialize() == b for b in bodies]
encoded = [base64.b64encode(b).decode() for b in bodies]
print(json.dumps({"version": 14, "bodies": encoded, "roundtrip": same}))
"""
)

RUST_READS = (
    _OPEN
    + r"""
spec = json.load(sys.stdin)
print(json.dumps(read_rows(open_table(spec["location"]))))
"""
)


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r["p"], r["k"]))


def _rows(keys: Iterable[int], prefix: str) -> list[Row]:
    return [{"k": k, "p": "ab"[k % 2], "v": f"{prefix}{k}"} for k in keys]


def _our_read(table: FileStoreTable) -> list[Row]:
    rb = table.new_read_builder()
    rows: list[Row] = rb.new_read().to_arrow(rb.new_scan().plan().splits()).select(SCHEMA.names).to_pylist()
    return _sorted(rows)


def _columns(paths: list[str]) -> set[str]:
    return {name for path in paths for name in pq.read_schema(path).names}


def _rust_read(python: Path, table: FileStoreTable) -> list[Row]:
    rows: list[Row] = run_pypaimon(RUST_READS, input_json={"location": table.path}, python=python)
    return _sorted(rows)


def _rust_write(python: Path, table: FileStoreTable, rows: list[Row]) -> tuple[int, bytes]:
    """paimon-rust writes ``rows`` into ``table``; returns (version, Java ``serializeList`` bytes)."""
    out = run_pypaimon(RUST_WRITES, input_json={"location": table.path, "rows": rows}, python=python)
    assert out["roundtrip"] == [True] * len(out["bodies"])
    bodies = [base64.b64decode(b) for b in out["bodies"]]
    # CommitMessage.serialize() is one message body without a version header; the endpoint takes Java's
    # serializeList framing: an int count, then the bodies back to back.
    return int(out["version"]), struct.pack(">i", len(bodies)) + b"".join(bodies)


def _commit(client: TestClient, headers: dict[str, str], name: str, version: int, raw: bytes) -> Any:
    body = {
        "commitUser": f"rust-{uuid.uuid4().hex[:8]}",
        "commitIdentifier": 1,
        "messagesVersion": version,
        "messages": base64.b64encode(raw).decode(),
    }
    url = f"{P}/databases/db/tables/{name}/commit-messages"
    first = client.post(url, json=body, headers=headers)
    assert first.status_code == 200, first.text
    again = client.post(url, json=body, headers=headers)  # a retried driver: exactly once
    assert again.json() == {**first.json(), "deduplicated": True}
    return first.json()


# ---- 1 and 3: paimon-rust writes, we commit; every engine reads ----------------------------------

APPEND_LAYOUTS = {
    "fixed": {"bucket": "2", "bucket-key": "k"},
    "unaware": {"bucket": "-1"},
}
THIN = ("_SEQUENCE_NUMBER", "_VALUE_KIND", "k", "p", "v")  # p is a partition key: the trimmed key is k
# The tables paimon-rust wrote: the two append layouts; the primary-key table as the two commits of
# paimon-rust's files left it (a copy taken before our compaction), and after our compaction.
RUST_TABLES = (*sorted(APPEND_LAYOUTS), "primary-key", "primary-key-compacted")
# paimon-rust's primary-key files are thin. Java 0.9/1.0-SNAPSHOT merge-read a bucket's files by their
# _KEY_ columns, so they fail on the committed table. After our full compaction every file sits at the max
# level without deletes (one of them still paimon-rust's thin file: test_rust_writes_primary_key_thin_mode
# checks it is there), and Java reads such a split as raw files, value columns only: it reads that table.
JAVA_THIN_MODE = (
    "Java Paimon 0.9.0 and the harness's 1.0-SNAPSHOT (a 2024-09 build) predate data-file.thin-mode (Paimon "
    "1.0.0: apache/paimon#4666 writes it, #4651 reads keys from the value columns): merging paimon-rust's "
    "thin files they read their _KEY_ columns and throw 'Required column is missing in data file. Col: "
    "[_KEY_k]'"
)
JAVA_THIN_MODE_ERROR = ("Required column is missing in data file", "_KEY_k")
JAVA_CANNOT_READ = {"primary-key": JAVA_THIN_MODE}


class JavaThinModeError(AssertionError):
    """Java failed on a table exactly as JAVA_THIN_MODE says (any other failure is a plain failure)."""


@dataclass(frozen=True)
class RustTable:
    """A table paimon-rust wrote and we committed: its directory, the rows it holds by construction."""

    path: str
    expected: list[Row]  # sorted by (p, k)


@dataclass(frozen=True)
class RustTables:
    # the catalog the service committed through (its tables: db.rust_<layout>, db.rust_pk)
    catalog: MetastoreCatalog
    tables: dict[str, RustTable]  # by RUST_TABLES name
    rust_files: frozenset[str]  # the data files paimon-rust wrote into db.rust_pk


@dataclass(frozen=True)
class Service:
    catalog: MetastoreCatalog
    client: TestClient
    headers: dict[str, str]  # a principal with write on database db


@pytest.fixture(scope="module")
def rust_service(
    pg_server: PgServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """A fresh database, a catalog and the in-process service for this module's tables."""
    name = f"paimon_meta_rust_{uuid.uuid4().hex[:12]}"
    url = pg_server.create_database(name, template=pg_template)
    try:
        catalog = paimon_meta.connect(url, str(tmp_path_factory.mktemp("rust-warehouse")), **FAST_LOCK)
        try:
            headers = auth(make_principal(catalog, "rust", [("write", "db", None)]))
            with in_process_client(catalog) as client:
                yield Service(catalog, client, headers)
        finally:
            catalog.close()
    finally:
        pg_server.drop_database(name)


def _build_append(python: Path, service: Service, layout: str) -> RustTable:
    """Two paimon-rust writes into db.rust_<layout>, each committed through the service."""
    name = f"rust_{layout}"
    table = service.catalog.create_table(
        f"db.{name}",
        SCHEMA,
        partition_keys=["p"],
        options={**APPEND_LAYOUTS[layout], "file.format": "parquet"},
    )
    first, second = _rows(range(20), "r"), _rows(range(20, 27), "s")
    for rows, snapshot_id in ((first, 1), (second, 2)):
        version, raw = _rust_write(python, table, rows)
        assert version == CURRENT_VERSION
        messages = deserialize_commit_messages(raw, version)
        assert sum(f.row_count for m in messages for f in m.data_increment.new_files) == len(rows)
        for m in messages:
            for f in m.data_increment.new_files:
                (path,) = Path(table.path).rglob(f.file_name)
                assert path.stat().st_size == f.file_size
                assert path.parent.name == f"bucket-{m.bucket}"
                if layout == "fixed":  # paimon-rust's bucket function is ours
                    keys = pq.read_table(path, columns=["k"]).column("k").to_pylist()
                    assert {bucket_of([k], [BIGINT(False)], 2) for k in keys} == {m.bucket}
                else:
                    assert m.bucket == 0
        assert _commit(service.client, service.headers, name, version, raw) == {
            "snapshotIds": [snapshot_id],
            "deduplicated": False,
        }
    return RustTable(table.path, _sorted(first + second))


def _build_primary_key(
    python: Path, service: Service, copy_to: Path
) -> tuple[RustTable, RustTable, set[str]]:
    """Two paimon-rust writes (insert, then updates) into db.rust_pk committed through the service, a copy
    of the table as they left it, then our compaction: (committed copy, compacted, paimon-rust's files)."""
    table = service.catalog.create_table(
        "db.rust_pk",
        SCHEMA,
        partition_keys=["p"],
        primary_keys=["k", "p"],
        options={"bucket": "2", "file.format": "parquet"},
    )
    first, second = _rows(range(12), "r"), _rows([*range(0, 12, 3), *range(12, 15)], "u")
    expected = _sorted(list({(r["k"], r["p"]): r for r in first + second}.values()))  # k % 3 == 0 updated
    rust_files: set[str] = set()
    for rows, snapshot_id in ((first, 1), (second, 2)):
        version, raw = _rust_write(python, table, rows)
        messages = deserialize_commit_messages(raw, version)
        names = {f.file_name for m in messages for f in m.data_increment.new_files}
        rust_files |= names
        for name in names:  # thin mode: only the system columns and the values, no _KEY_ copies
            assert tuple(pq.read_schema(next(Path(table.path).rglob(name))).names) == THIN
        # The control plane takes the messages (nothing checks the files' layout).
        result = _commit(service.client, service.headers, "rust_pk", version, raw)
        assert result["snapshotIds"] == [snapshot_id]
    # Every reader opens a table by its directory alone: a copy is the table at snapshot 2.
    committed = shutil.copytree(table.path, copy_to / "rust_pk")
    # Our compaction merges paimon-rust's overlapping thin files into full ones (data-file.thin-mode is
    # off); a file overlapping no other is upgraded to the max level as it is, still thin.
    assert compact(service.catalog.get_table("db.rust_pk")).snapshot_ids
    return RustTable(str(committed), expected), RustTable(table.path, expected), rust_files


@pytest.fixture(scope="module")
def rust_tables(
    rust_python: Path, rust_service: Service, tmp_path_factory: pytest.TempPathFactory
) -> RustTables:
    tables = {layout: _build_append(rust_python, rust_service, layout) for layout in sorted(APPEND_LAYOUTS)}
    committed, compacted, rust_files = _build_primary_key(
        rust_python, rust_service, tmp_path_factory.mktemp("rust-committed")
    )
    tables["primary-key"], tables["primary-key-compacted"] = committed, compacted
    assert list(tables) == list(RUST_TABLES)
    return RustTables(rust_service.catalog, tables, frozenset(rust_files))


def _paths(rust_tables: RustTables) -> list[str]:
    return [rust_tables.tables[name].path for name in RUST_TABLES]


@pytest.fixture(scope="module")
def rust_reads(
    rust_tables: RustTables, rust_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ArrowRead]:
    """paimon-rust's read of every RUST_TABLES table (one process), by name."""
    reads = rust_read_tables(rust_python, _paths(rust_tables), tmp_path_factory.mktemp("rust-reads"))
    return dict(zip(RUST_TABLES, reads, strict=True))


@dataclass(frozen=True)
class PeerReads:
    """pypaimon's and Java's reads of every RUST_TABLES table, by name (Java: by version, then name)."""

    pypaimon: dict[str, ArrowRead]
    java: dict[str, dict[str, TableRead]]


@pytest.fixture(scope="module")
def peer_reads(
    rust_tables: RustTables,
    pypaimon_python: Path,
    java_harnesses: dict[str, JavaHarness],
    tmp_path_factory: pytest.TempPathFactory,
) -> PeerReads:
    """One pypaimon process and one JVM per Java version read every table, side by side."""
    paths, work = _paths(rust_tables), tmp_path_factory.mktemp("pypaimon-reads")
    with ThreadPoolExecutor(len(java_harnesses) + 1) as pool:
        pypaimon = pool.submit(pypaimon_read_tables, pypaimon_python, paths, work)
        java = {v: pool.submit(h.read_tables, paths) for v, h in java_harnesses.items()}
        return PeerReads(
            pypaimon=dict(zip(RUST_TABLES, pypaimon.result(), strict=True)),
            java={v: dict(zip(RUST_TABLES, f.result(), strict=True)) for v, f in java.items()},
        )


def _arrow_rows(read: ArrowRead) -> list[Row]:
    return [] if read.data is None else _sorted(canonical_arrow(read.data))


@pytest.mark.parametrize("layout", sorted(APPEND_LAYOUTS))
def test_rust_writes_we_commit(
    layout: str, rust_tables: RustTables, rust_reads: dict[str, ArrowRead]
) -> None:
    table = rust_tables.catalog.get_table(f"db.rust_{layout}")
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None and snapshot.id == 2
    # paimon-rust leaves CommitMessage.totalBuckets null; the manifests must still carry the table's count.
    entries = live_entries(table, read_metadata(table, snapshot, missing_ok=False))
    assert {e.total_buckets for e in entries} == {int(APPEND_LAYOUTS[layout]["bucket"])}
    expected = rust_tables.tables[layout].expected
    assert _our_read(table) == expected
    assert _arrow_rows(rust_reads[layout]) == expected
    assert_rust_reads_as_we_do(rust_reads[layout], table.path)


def test_rust_writes_primary_key_thin_mode(rust_tables: RustTables, rust_reads: dict[str, ArrowRead]) -> None:
    committed = rust_tables.tables["primary-key"]
    want = committed.expected
    # paimon-rust reads its table back (the copy of db.rust_pk at paimon-rust's second commit), and so do we
    before = paimon_meta.open_table(committed.path)
    assert before.snapshot_manager.list_snapshot_ids() == [1, 2]
    assert _arrow_rows(rust_reads["primary-key"]) == want
    assert _our_read(before) == want
    # ... and after our compaction (the catalog's table; a COMPACT snapshot after paimon-rust's two).
    table = rust_tables.catalog.get_table("db.rust_pk")
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.id == 3 and snapshot.commit_kind.name == "COMPACT"
    assert _our_read(table) == want
    assert _arrow_rows(rust_reads["primary-key-compacted"]) == want
    layouts = {
        (name in rust_tables.rust_files, tuple(pq.read_schema(path).names))
        for split in table.new_read_builder().new_scan().plan().splits()
        for name, path in zip((f.file_name for f in split.files), split.file_paths)
    }
    # Merged files are full; one of paimon-rust's thin files overlapped no other and stayed as it is.
    assert layouts == {(False, ("_KEY_k", *THIN)), (True, THIN)}


@pytest.mark.parametrize("name", RUST_TABLES)
def test_pypaimon_reads_rust_tables(name: str, rust_tables: RustTables, peer_reads: PeerReads) -> None:
    """pypaimon 2.1.0 reads every table paimon-rust wrote (thin-mode files too) as we do, and as written."""
    table = rust_tables.tables[name]
    assert_pypaimon_reads_as_we_do(peer_reads.pypaimon[name], table.path)
    assert _arrow_rows(peer_reads.pypaimon[name]) == table.expected


def _java_params() -> Iterator[Any]:
    for version in VERSIONS:
        for name in RUST_TABLES:
            reason = JAVA_CANNOT_READ.get(name)
            marks = (
                [pytest.mark.xfail(strict=True, raises=JavaThinModeError, reason=reason)] if reason else []
            )
            yield pytest.param(version, name, id=f"java{version}-{name}", marks=marks)


@pytest.mark.parametrize(("version", "name"), list(_java_params()))
def test_java_reads_rust_tables(
    version: str, name: str, rust_tables: RustTables, peer_reads: PeerReads
) -> None:
    """Java Paimon reads the tables paimon-rust wrote as we do (rows, fields, latest snapshot), and as
    written."""
    table = rust_tables.tables[name]
    read = peer_reads.java[version][name]
    if name in JAVA_CANNOT_READ and read.error and all(m in read.error for m in JAVA_THIN_MODE_ERROR):
        raise JavaThinModeError(f"Java Paimon {version} on {table.path}:\n{read.error}")
    assert_java_reads_as_we_do(read, table.path, version)
    assert_same_rows(canonical_java(read.rows), table.expected, f"Paimon {version} reading {table.path}")


# ---- 2: paimon-rust reads what we write -----------------------------------------------------------


def _write(table: FileStoreTable, data: pa.Table) -> None:
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    write.write_arrow(data)
    wb.new_commit().commit(write.prepare_commit())
    write.close()


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@pytest.mark.parametrize("layout", [*sorted(APPEND_LAYOUTS), "primary-key", "primary-key-thin"])
def test_rust_reads_ours(layout: str, rust_python: Path, service_catalog: MetastoreCatalog) -> None:
    name = f"ours_{layout.replace('-', '_')}"
    thin = layout == "primary-key-thin"
    if thin:
        layout = "primary-key"
    if layout == "primary-key":
        table = service_catalog.create_table(
            f"db.{name}",
            SCHEMA,
            partition_keys=["p"],
            primary_keys=["k", "p"],
            options={"bucket": "2", "file.format": "parquet", "data-file.thin-mode": str(thin).lower()},
        )
    else:
        options = {**APPEND_LAYOUTS[layout], "file.format": "parquet"}
        table = service_catalog.create_table(f"db.{name}", SCHEMA, partition_keys=["p"], options=options)
    _write(table, _arrow(_rows(range(30), "a")))
    _write(table, _arrow(_rows(range(30, 40), "b")))
    if layout == "primary-key":
        _write(table, _arrow(_rows(range(0, 40, 3), "upd")))  # updates
        deletes = _arrow(_rows(range(1, 40, 5), "gone"))
        _write(table, deletes.append_column("_row_kind", pa.array(["-D"] * deletes.num_rows)))
    table = service_catalog.get_table(f"db.{name}")
    if layout == "primary-key":  # _KEY_k columns unless written in thin mode
        names = {
            n for s in table.new_read_builder().new_scan().plan().splits() for n in _columns(s.file_paths)
        }
        assert ("_KEY_k" in names) is not thin and "_SEQUENCE_NUMBER" in names
    ours = _our_read(table)
    if layout == "primary-key":
        assert len(ours) == 40 - len(range(1, 40, 5))
        assert {r["v"] for r in ours if r["k"] % 3 == 0} <= {f"upd{k}" for k in range(0, 40, 3)}
    else:
        assert len(ours) == 40
    assert _rust_read(rust_python, table) == ours
