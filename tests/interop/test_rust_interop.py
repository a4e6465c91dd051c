"""paimon-rust (PyPI ``pypaimon-rust`` 0.4.0, in its own venv: ``tests/interop/rust_env.py``) as a peer, live.

1. paimon-rust writes, we commit: we create the table (through our catalog, ``schema-0`` written by us);
   paimon-rust opens that directory with ``Table.from_resolved_schema``, writes rows with
   ``new_batch_write_builder().new_write()`` and prints its ``CommitMessage.serialize()`` bodies (version 14);
   we commit them through the control plane (``POST .../commit-messages``). Our reader and paimon-rust's
   reader must then both return exactly the rows paimon-rust wrote.
2. paimon-rust reads what we write: append tables (bucket -1 and fixed) and a primary-key table with an
   update and a ``_row_kind`` ``-D`` delete, with and without thin mode, Parquet; its rows must equal ours.
3. paimon-rust writes primary-key tables in thin mode (no ``_KEY_*`` columns, whatever
   ``data-file.thin-mode`` says), an insert then updates: the commits land, paimon-rust and we read the
   table alike, and our compaction of its files is read alike too.
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog_api import Catalog
from paimon_meta.ops.references import live_entries, read_metadata
from paimon_meta.serde.commit_message import CURRENT_VERSION, deserialize_commit_messages
from paimon_meta.spec.bucket import bucket_of
from paimon_meta.spec.types import BIGINT
from paimon_meta.table.compact import compact
from paimon_meta.table.table import FileStoreTable
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import make_principal
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


@pytest.fixture
def writer(service_catalog: Catalog) -> dict[str, str]:
    return auth(make_principal(service_catalog, "rust", [("write", "db", None)]))


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


APPEND_LAYOUTS = {
    "fixed": {"bucket": "2", "bucket-key": "k"},
    "unaware": {"bucket": "-1"},
}


@pytest.mark.parametrize("layout", sorted(APPEND_LAYOUTS))
def test_rust_writes_we_commit(
    layout: str,
    rust_python: Path,
    service_client: TestClient,
    service_catalog: Catalog,
    writer: dict[str, str],
) -> None:
    name = f"rust_{layout}"
    table = service_catalog.create_table(
        f"db.{name}",
        SCHEMA,
        partition_keys=["p"],
        options={**APPEND_LAYOUTS[layout], "file.format": "parquet"},
    )
    first, second = _rows(range(20), "r"), _rows(range(20, 27), "s")
    for rows, snapshot_id in ((first, 1), (second, 2)):
        version, raw = _rust_write(rust_python, table, rows)
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
        assert _commit(service_client, writer, name, version, raw) == {
            "snapshotIds": [snapshot_id],
            "deduplicated": False,
        }
    table = service_catalog.get_table(f"db.{name}")
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    # paimon-rust leaves CommitMessage.totalBuckets null; the manifests must still carry the table's count.
    entries = live_entries(table, read_metadata(table, snapshot, missing_ok=False))
    assert {e.total_buckets for e in entries} == {int(APPEND_LAYOUTS[layout]["bucket"])}
    expected = _sorted(first + second)
    assert _our_read(table) == expected
    assert _rust_read(rust_python, table) == expected


def _write(table: FileStoreTable, data: pa.Table) -> None:
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    write.write_arrow(data)
    wb.new_commit().commit(write.prepare_commit())
    write.close()


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@pytest.mark.parametrize("layout", [*sorted(APPEND_LAYOUTS), "primary-key", "primary-key-thin"])
def test_rust_reads_ours(layout: str, rust_python: Path, service_catalog: Catalog) -> None:
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


THIN = ("_SEQUENCE_NUMBER", "_VALUE_KIND", "k", "p", "v")  # p is a partition key: the trimmed key is k


def test_rust_writes_primary_key_thin_mode(
    rust_python: Path, service_client: TestClient, service_catalog: Catalog, writer: dict[str, str]
) -> None:
    table = service_catalog.create_table(
        "db.rust_pk",
        SCHEMA,
        partition_keys=["p"],
        primary_keys=["k", "p"],
        options={"bucket": "2", "file.format": "parquet"},
    )
    first, second = _rows(range(12), "r"), _rows([*range(0, 12, 3), *range(12, 15)], "u")
    expected = {(r["k"], r["p"]): r for r in first + second}  # the second write updates k % 3 == 0
    rust_files: set[str] = set()
    for rows, snapshot_id in ((first, 1), (second, 2)):
        version, raw = _rust_write(rust_python, table, rows)
        messages = deserialize_commit_messages(raw, version)
        names = {f.file_name for m in messages for f in m.data_increment.new_files}
        rust_files |= names
        for name in names:  # thin mode: only the system columns and the values, no _KEY_ copies
            assert tuple(pq.read_schema(next(Path(table.path).rglob(name))).names) == THIN
        # The control plane takes the messages (nothing checks the files' layout) ...
        assert _commit(service_client, writer, "rust_pk", version, raw)["snapshotIds"] == [snapshot_id]
    table = service_catalog.get_table("db.rust_pk")
    want = _sorted(list(expected.values()))
    assert _rust_read(rust_python, table) == want  # ... paimon-rust reads its table back, and so do we
    assert _our_read(table) == want
    # Our compaction merges paimon-rust's overlapping thin files into full ones (data-file.thin-mode is
    # off); a file overlapping no other is upgraded to the max level as it is, still thin.
    assert compact(table).snapshot_ids
    table = service_catalog.get_table("db.rust_pk")
    assert _our_read(table) == want
    layouts = {
        (name in rust_files, tuple(pq.read_schema(path).names))
        for split in table.new_read_builder().new_scan().plan().splits()
        for name, path in zip((f.file_name for f in split.files), split.file_paths)
    }
    assert (False, ("_KEY_k", *THIN)) in layouts and layouts <= {(False, ("_KEY_k", *THIN)), (True, THIN)}
    assert _rust_read(rust_python, table) == want
