"""Commits across implementations with real Java Paimon (0.9.0 and 1.0-SNAPSHOT), both directions.

* Java writes, we commit: we create the table (the catalog's ``create_table`` writes schema-0 at
  ``<warehouse>/<db>.db/<t>``), Java writes data files into it with its BatchWriteBuilder and hands back
  ``CommitMessageSerializer.serializeList`` bytes without committing (``PaimonHarness write``). Those bytes
  go, as they are, to the control plane's ``POST .../commit-messages`` (in-process TestClient over a
  Postgres-backed catalog). Then our reader, Java's, paimon-rust's and pypaimon 2.1.0's must all see
  exactly the rows Java wrote.
  A fixed-bucket append table, an unaware-bucket append table, a fixed-bucket append table partitioned by
  a nullable BOOLEAN, and a primary-key table, each written twice (for the primary-key table the second
  time with updates and a ``-D``; ``primary-key+compacted`` also has Java fully compact the bucket in
  that second write: its compaction results must become a COMPACT snapshot after our APPEND).
* We write, Java commits: our writer prepares CommitMessages on a table created by us on storage
  (``SchemaManager`` + ``paimon_meta.open_table``), we serialize them as version 3 (what Java <= 1.0
  reads), and Java deserializes and commits them with a ``StreamTableCommit`` straight to storage
  (``PaimonHarness commit``). All readers (ours, both Java versions, paimon-rust) must see the rows, in a
  snapshot Java wrote; pypaimon 2.1.0 cannot read the manifests Java 0.9/1.0-SNAPSHOT write (a strict
  xfail per version, ``test_pypaimon_reads_what_java_committed``). Then our full
  compaction (``plan_compaction`` + ``run_tasks_locally``), where there is anything to compact (the
  primary-key table; the append tables' buckets have too few files), is committed by Java as well.

No Java or jars: skipped with the reason, except under ``CI=true`` where that fails.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.io import get_file_io
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, BOOLEAN, DATE, DOUBLE, INT, STRING, DataField
from paimon_meta.serde.commit_message import deserialize_commit_messages, serialize_commit_messages
from paimon_meta.table.compact import plan_compaction, run_tasks_locally
from paimon_meta.table.snapshots import SchemaManager
from tests.fixtures.service import make_principal
from tests.interop.canonical import (
    assert_java_reads_as_we_do,
    assert_same_rows,
    canonical_arrow,
    canonical_float,
    our_read,
)
from tests.interop.java_env import VERSIONS, JavaHarness
from tests.interop.pypaimon_reader import assert_pypaimon_reads_as_we_do, pypaimon_read_tables
from tests.interop.rust_reader import assert_rust_reads_as_we_do, rust_read_tables
from tests.ops.helpers import assert_consistent
from tests.service.helpers import P, auth

pytestmark = pytest.mark.interop

Row = dict[str, Any]

# kind -> (table options, partition keys, primary keys)
KINDS: dict[str, tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]] = {
    "fixed-bucket-append": ({"bucket": "2", "bucket-key": "k"}, (), ()),
    "unaware-bucket-append": ({"bucket": "-1"}, (), ()),
    "primary-key": ({"bucket": "1"}, (), ("k",)),
    # partitioned by a nullable BOOLEAN: true, false and the default partition (null)
    "partitioned-fixed-bucket-append": ({"bucket": "2", "bucket-key": "k"}, ("f",), ()),
}
# Java writes whatever its writer decides (compaction results included, when it compacts on its own);
# "+compacted" has the second Java write also run a full compaction, so a COMPACT snapshot must follow.
JAVA_WRITE_CASES = [*KINDS, "primary-key+compacted"]

ARROW_SCHEMA = pa.schema(
    [
        pa.field("k", pa.int32(), nullable=False),
        ("b", pa.int64()),
        ("s", pa.string()),
        ("d", pa.float64()),
        ("f", pa.bool_()),
        ("dt", pa.date32()),
    ]
)
PAIMON_FIELDS = (
    DataField(0, "k", INT(False)),
    DataField(1, "b", BIGINT()),
    DataField(2, "s", STRING()),
    DataField(3, "d", DOUBLE()),
    DataField(4, "f", BOOLEAN()),
    DataField(5, "dt", DATE()),
)
_EPOCH_DAY = dt.date(1970, 1, 1)


def source_rows(keys: Sequence[int], tag: str = "v") -> list[Row]:
    """Rows as the harness's JSON input: every column type, a null in every nullable column (k=3),
    dates before and after 1970, unicode."""
    out: list[Row] = []
    for k in keys:
        if k % 10 == 3:
            out.append({"k": k, "b": None, "s": None, "d": None, "f": None, "dt": None})
            continue
        out.append(
            {
                "k": k,
                "b": k * 10_000_000_000 - 7,
                "s": f"{tag}{k} héllo 🦀" if k % 2 else f"{tag}{k}",
                "d": k / 3 - 1.5,
                "f": k % 2 == 0,
                "dt": (_EPOCH_DAY + dt.timedelta(days=(k - 5) * 4001)).isoformat(),
            }
        )
    return out


def canonical(row: Row) -> Row:
    """A source row as the canonical values our_read and the harness print."""
    return {
        "k": row["k"],
        "b": row["b"],
        "s": row["s"],
        "d": None if row["d"] is None else canonical_float(row["d"]),
        "f": row["f"],
        "dt": None if row["dt"] is None else (dt.date.fromisoformat(row["dt"]) - _EPOCH_DAY).days,
    }


def java_write(
    harness: JavaHarness, path: str, rows: Sequence[Row], work: Path, *, compact: bool = False
) -> tuple[int, bytes]:
    """Java writes ``rows`` into the table at ``path`` without committing (and with ``compact`` fully
    compacts the buckets it wrote): (serializer version, serializeList bytes)."""
    name = uuid.uuid4().hex[:8]
    rows_file, out_file = work / f"rows-{name}.jsonl", work / f"messages-{name}.bin"
    rows_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    flags = ["--compact"] if compact else []
    out = json.loads(harness.run(["write", *flags, path, str(rows_file), str(out_file)]))
    assert out["rows"] == len(rows)
    return int(out["version"]), out_file.read_bytes()


def java_commit(
    harness: JavaHarness, path: str, raw: bytes, *, version: int, user: str, identifier: int, work: Path
) -> int | None:
    """Java deserializes ``raw`` and commits it for (user, identifier): the latest snapshot id after."""
    messages_file = work / f"ours-{uuid.uuid4().hex[:8]}.bin"
    messages_file.write_bytes(raw)
    out = json.loads(harness.run(["commit", path, str(messages_file), str(version), user, str(identifier)]))
    snapshot: int | None = out["snapshot"]
    return snapshot


@dataclass(frozen=True)
class Readers:
    """The other engines reading the tables here: Java (by version), paimon-rust's and pypaimon's pythons."""

    java: dict[str, JavaHarness]
    rust_python: Path
    pypaimon_python: Path


@pytest.fixture
def readers(java_harnesses: dict[str, JavaHarness], rust_python: Path, pypaimon_python: Path) -> Readers:
    return Readers(java_harnesses, rust_python, pypaimon_python)


def assert_all_read(
    readers: Readers, path: str, expected: Sequence[Row], work: Path, *, pypaimon: bool = True
) -> None:
    """Our reader sees exactly ``expected``; every Java version, paimon-rust and (unless ``pypaimon`` is
    off: for tables Java committed, see PYPAIMON_JAVA_MANIFESTS) pypaimon read the table as we do (one JVM
    per version, one paimon-rust and one pypaimon process, side by side)."""
    _, fields, ours = our_read(path)
    assert fields == [f.name for f in PAIMON_FIELDS]
    assert_same_rows(ours, [canonical(r) for r in expected], f"our read of {path} vs what was written")
    name, harnesses = uuid.uuid4().hex[:8], readers.java
    with ThreadPoolExecutor(len(harnesses) + 2) as pool:
        rust = pool.submit(rust_read_tables, readers.rust_python, [path], work / f"rust-{name}")
        by_pypaimon = (
            pool.submit(pypaimon_read_tables, readers.pypaimon_python, [path], work / f"pypaimon-{name}")
            if pypaimon
            else None
        )
        reads = dict(zip(harnesses, pool.map(lambda h: h.read_tables([path])[0], harnesses.values())))
        (rust_read,) = rust.result()
        pypaimon_reads = [] if by_pypaimon is None else by_pypaimon.result()
    for version, read in reads.items():
        assert_java_reads_as_we_do(read, path, version)
    assert_rust_reads_as_we_do(rust_read, path)
    for pypaimon_read in pypaimon_reads:
        assert_pypaimon_reads_as_we_do(pypaimon_read, path)


# ---- Java writes, we commit (the control plane) --------------------------------------------------


def _post_messages(
    client: TestClient, headers: dict[str, str], raw: bytes, *, version: int, user: str, identifier: int
) -> dict[str, Any]:
    body = {
        "commitUser": user,
        "commitIdentifier": identifier,
        "messagesVersion": version,
        "messages": base64.b64encode(raw).decode(),
    }
    response = client.post(f"{P}/databases/db/tables/t/commit-messages", json=body, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _check_messages(messages: Sequence[CommitMessage], path: str, buckets: int) -> None:
    """What Java reported: files that exist in our table directory, in buckets the table has."""
    assert messages, "Java prepared no CommitMessage"
    for m in messages:
        assert m.bucket == 0 if buckets == -1 else 0 <= m.bucket < buckets
        for f in (*m.data_increment.new_files, *m.compact_increment.compact_after):
            found = list(Path(path).rglob(f"bucket-{m.bucket}/{f.file_name}"))
            assert len(found) == 1, (f.file_name, found)


@pytest.mark.postgres
@pytest.mark.parametrize("case", JAVA_WRITE_CASES)
@pytest.mark.parametrize("version", VERSIONS)
def test_java_writes_we_commit(
    version: str,
    case: str,
    *,
    readers: Readers,
    service_client: TestClient,
    service_catalog: MetastoreCatalog,
    tmp_path: Path,
) -> None:
    kind, _, compact = case.partition("+")
    options, partition_keys, primary_keys = KINDS[kind]
    table = service_catalog.create_table(
        "db.t", ARROW_SCHEMA, partition_keys=partition_keys, primary_keys=primary_keys, options=options
    )
    path = table.path
    headers = auth(make_principal(service_catalog, "java-job", [("write", "db", "t")]))
    harness = readers.java[version]
    user = f"java-{version}-{uuid.uuid4().hex[:6]}"

    first = source_rows(range(10))
    serializer_version, raw = java_write(harness, path, first, tmp_path)
    assert serializer_version == 3  # CommitMessageSerializer.getVersion() of both 0.9.0 and 1.0-SNAPSHOT
    messages = deserialize_commit_messages(raw, serializer_version)
    _check_messages(messages, path, int(options["bucket"]))
    assert sum(f.row_count for m in messages for f in m.data_increment.new_files) == len(first)
    result = _post_messages(service_client, headers, raw, version=serializer_version, user=user, identifier=1)
    assert result == {"snapshotIds": [1], "deduplicated": False}
    snapshot = service_catalog.get_table("db.t").latest_snapshot()
    assert snapshot is not None and snapshot.commit_user == user and snapshot.commit_identifier == 1
    assert_all_read(readers, path, first, tmp_path)

    # Again, the same identifier: deduplicated, nothing new.
    again = _post_messages(service_client, headers, raw, version=serializer_version, user=user, identifier=1)
    assert again == {"snapshotIds": [1], "deduplicated": True}

    # A second Java write, based on what we committed: new rows, and for the primary-key table an
    # update of existing keys and a delete.
    second = source_rows(range(10, 14), tag="w")
    expected = first + second
    if primary_keys:
        updates = source_rows([2, 5], tag="updated")
        second = [*second, *updates, {**first[7], "_row_kind": "-D"}]
        kept = {r["k"]: r for r in first + updates + source_rows(range(10, 14), tag="w")}
        del kept[7]
        expected = list(kept.values())
    serializer_version, raw = java_write(harness, path, second, tmp_path, compact=bool(compact))
    messages = deserialize_commit_messages(raw, serializer_version)
    _check_messages(messages, path, int(options["bucket"]))
    compacts = [m for m in messages if not m.compact_increment.is_empty()]
    if compact:
        assert compacts and all(m.compact_increment.compact_before for m in compacts)
    result = _post_messages(service_client, headers, raw, version=serializer_version, user=user, identifier=2)
    assert not result["deduplicated"]
    assert result["snapshotIds"] == ([2, 3] if compacts else [2])
    committed = service_catalog.get_table("db.t")
    kinds = [committed.snapshot(s).commit_kind.name for s in result["snapshotIds"]]
    assert kinds == (["APPEND", "COMPACT"] if compacts else ["APPEND"])
    assert_all_read(readers, path, expected, tmp_path)
    assert_consistent(service_catalog, "db.t")  # storage == event log == pointer, every file present


# ---- we write, Java commits (straight to storage) -------------------------------------------------


def _create_on_storage(
    path: Path, options: dict[str, str], partition_keys: Sequence[str], primary_keys: Sequence[str]
) -> str:
    schema = TableSchema(
        0,
        PAIMON_FIELDS,
        len(PAIMON_FIELDS) - 1,
        tuple(partition_keys),
        tuple(primary_keys),
        dict(options),
        time_millis=int(time.time() * 1000),
    )
    uri = str(path)
    assert SchemaManager(get_file_io(uri), uri).commit_new_schema(schema)
    return uri


def _arrow(rows: Sequence[Row], with_kinds: bool) -> pa.Table:
    columns: dict[str, Any] = {
        "k": [r["k"] for r in rows],
        "b": [r["b"] for r in rows],
        "s": [r["s"] for r in rows],
        "d": [r["d"] for r in rows],
        "f": [r["f"] for r in rows],
        "dt": [None if r["dt"] is None else dt.date.fromisoformat(r["dt"]) for r in rows],
    }
    schema = ARROW_SCHEMA
    if with_kinds:
        kinds = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
        columns["_row_kind"] = [kinds[r.get("_row_kind", "+I")] for r in rows]
        schema = schema.append(pa.field("_row_kind", pa.int8()))
    return pa.table(columns, schema=schema)


def _our_messages(path: str, rows: Sequence[Row], with_kinds: bool) -> list[CommitMessage]:
    table = paimon_meta.open_table(path)
    write = table.new_stream_write_builder().with_commit_user("our-writer").new_write()
    write.write_arrow(_arrow(rows, with_kinds))
    messages = list(write.prepare_commit())
    write.close()
    return messages


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("version", VERSIONS)
def test_we_write_java_commits(readers: Readers, tmp_path: Path, version: str, kind: str) -> None:
    options, partition_keys, primary_keys = KINDS[kind]
    path = _create_on_storage(tmp_path / "t", options, partition_keys, primary_keys)
    buckets = int(options["bucket"])
    harness = readers.java[version]
    user = f"java-committer-{uuid.uuid4().hex[:6]}"

    first = source_rows(range(10))
    messages = _our_messages(path, first, bool(primary_keys))
    raw = serialize_commit_messages(messages, 3, table_buckets=buckets)
    assert java_commit(harness, path, raw, version=3, user=user, identifier=1, work=tmp_path) == 1
    snapshot = paimon_meta.open_table(path).latest_snapshot()
    assert snapshot is not None and snapshot.commit_user == user and snapshot.commit_identifier == 1
    assert snapshot.commit_kind.name == "APPEND"
    assert_all_read(readers, path, first, tmp_path, pypaimon=False)

    second = source_rows(range(10, 14), tag="w")
    expected = first + second
    if primary_keys:
        updates = source_rows([2, 5], tag="updated")
        second = [*second, *updates, {**first[7], "_row_kind": "-D"}]
        kept = {r["k"]: r for r in first + updates + source_rows(range(10, 14), tag="w")}
        del kept[7]
        expected = list(kept.values())
    messages = _our_messages(path, second, bool(primary_keys))
    raw = serialize_commit_messages(messages, 3, table_buckets=buckets)
    assert java_commit(harness, path, raw, version=3, user=user, identifier=2, work=tmp_path) == 2
    snapshot = paimon_meta.open_table(path).latest_snapshot()
    assert snapshot is not None and snapshot.commit_user == user and snapshot.commit_identifier == 2
    assert_all_read(readers, path, expected, tmp_path, pypaimon=False)

    # Our full compaction (plan + rewrite here), committed by Java as a COMPACT snapshot.
    plan = plan_compaction(paimon_meta.open_table(path))
    if primary_keys:
        assert plan.tasks, "two overlapping sorted runs must be compacted"
    if not plan.tasks:
        return
    messages = run_tasks_locally(paimon_meta.open_table(path), plan.tasks)
    raw = serialize_commit_messages(messages, 3, table_buckets=buckets)
    # A StreamTableCommit does not ignore empty commits: Java writes an empty APPEND (snapshot 3) before
    # the COMPACT (snapshot 4), both for identifier 3.
    assert java_commit(harness, path, raw, version=3, user=user, identifier=3, work=tmp_path) == 4
    table = paimon_meta.open_table(path)
    snapshots = [table.snapshot(i) for i in (3, 4)]
    assert [(s.commit_kind.name, s.commit_user, s.commit_identifier) for s in snapshots] == [
        ("APPEND", user, 3),
        ("COMPACT", user, 3),
    ]
    assert_all_read(readers, path, expected, tmp_path, pypaimon=False)


# Java 0.9.0 and the harness's 1.0-SNAPSHOT write manifests whose DataFileMeta records end at _FILE_SOURCE
# (no _VALUE_STATS_COLS, nor the later fields); our reader takes them as None. pypaimon 2.1.0 builds the
# entry with file_dict.get('_VALUE_STATS_COLS') but its ManifestFileManager._get_value_stats_fields then
# indexes file_dict['_VALUE_STATS_COLS']: a KeyError on every manifest entry Java wrote. So the tables of
# test_we_write_java_commits (Java writes their manifests) are not read by pypaimon; the tables of
# test_java_writes_we_commit (we write the manifests) are.
PYPAIMON_JAVA_MANIFESTS = (
    "pypaimon 2.1.0 cannot read manifests written by Java Paimon 0.9.0 / the harness's 1.0-SNAPSHOT: they "
    "have no _VALUE_STATS_COLS field and pypaimon's ManifestFileManager._get_value_stats_fields reads "
    "file_dict['_VALUE_STATS_COLS'] unconditionally (KeyError)"
)


class PypaimonJavaManifestError(AssertionError):
    """pypaimon failed on a Java-committed table exactly as PYPAIMON_JAVA_MANIFESTS says."""


@pytest.mark.xfail(strict=True, raises=PypaimonJavaManifestError, reason=PYPAIMON_JAVA_MANIFESTS)
@pytest.mark.parametrize("version", VERSIONS)
def test_pypaimon_reads_what_java_committed(readers: Readers, tmp_path: Path, version: str) -> None:
    options, partition_keys, primary_keys = KINDS["fixed-bucket-append"]
    path = _create_on_storage(tmp_path / "t", options, partition_keys, primary_keys)
    rows = source_rows(range(10))
    raw = serialize_commit_messages(_our_messages(path, rows, False), 3, table_buckets=2)
    user = f"java-committer-{uuid.uuid4().hex[:6]}"
    assert (
        java_commit(readers.java[version], path, raw, version=3, user=user, identifier=1, work=tmp_path) == 1
    )
    (read,) = pypaimon_read_tables(readers.pypaimon_python, [path], tmp_path / "pypaimon")
    if read.error is not None and "KeyError: '_VALUE_STATS_COLS'" in read.error:
        raise PypaimonJavaManifestError(f"pypaimon on the table Java {version} committed: {read.error}")
    assert_pypaimon_reads_as_we_do(read, path)
    assert_same_rows(canonical_arrow(read.data) if read.data else [], [canonical(r) for r in rows], path)
