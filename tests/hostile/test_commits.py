"""A principal with ``write`` on one table tries to make its commits name another table's files.

Each probe of the review as a test: the control plane (CommitMessage bytes over HTTP), the REST commit
(a snapshot the client built, with manifests it wrote), and the in-process library. Every refusal is a
400 (or, in process, a ``ValidationError``) naming the field, and nothing is published; the victim
table keeps its files and rows.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.validate import MessageValidator
from paimon_meta.errors import CommitConflictError, ValidationError
from paimon_meta.model.binary_row import serialize_row
from paimon_meta.model.commit_message import CommitMessage, DataIncrement
from paimon_meta.model.manifest import DataFileMeta, FileKind, IndexFileMeta, ManifestEntry
from paimon_meta.model.types import INT
from paimon_meta.ops.recovery import recover_table
from paimon_meta.serde.commit_message import serialize_commit_messages
from paimon_meta.table.containment import TableRoots
from paimon_meta.table.table import FileStoreTable
from tests.commit.helpers import append_msg, data_file, make_table
from tests.fixtures.service import in_process_client, make_principal
from tests.ops.helpers import Crash, crash_at, create, prepare, read_keys, write
from tests.service.helpers import P, auth, commit_body, write_delta

pytestmark = pytest.mark.postgres

URL = f"{P}/databases/db1/tables/t1"


@dataclasses.dataclass
class World:
    catalog: MetastoreCatalog
    client: TestClient
    mallory: dict[str, str]  # write on db1.t1 only
    reader: dict[str, str]  # read on db1.t1 only
    victim_file: str  # absolute path of a data file of db2.t2
    victim_relative: str  # the same, relative to a bucket directory of db1.t1
    outside: Path  # a file outside the warehouse


@pytest.fixture
def world(service_catalog: MetastoreCatalog, tmp_path: Path) -> Iterator[World]:
    create(service_catalog, "db1.t1")
    create(service_catalog, "db2.t2")
    write(service_catalog, [1, 2, 3], identifier="db2.t2")
    victim = service_catalog.get_table("db2.t2")
    plan = victim.new_read_builder().new_scan().plan()
    split = plan.splits()[0]
    victim_file = split.file_paths[0]
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(Path(victim_file).read_bytes())
    # <warehouse>/db1.db/t1/bucket-N/../../../ is the warehouse
    warehouse = Path(service_catalog.get_table("db1.t1").path).parent.parent
    relative = "../../../" + str(Path(victim_file).relative_to(warehouse))
    with in_process_client(service_catalog) as client:
        yield World(
            service_catalog,
            client,
            auth(make_principal(service_catalog, "mallory", [("write", "db1", "t1")])),
            auth(make_principal(service_catalog, "reader", [("read", "db1", "t1")])),
            victim_file,
            relative,
            outside,
        )


def _body(messages: list[CommitMessage], identifier: int, user: str = "mallory-writer") -> dict[str, Any]:
    raw = serialize_commit_messages(messages, 14, table_buckets=2)
    return {
        "commitUser": user,
        "commitIdentifier": identifier,
        "messagesVersion": 14,
        "messages": base64.b64encode(raw).decode(),
    }


def _own_message(table: FileStoreTable, keys: list[int]) -> CommitMessage:
    """A real message of ``table`` (the writer's own file, written) holding all of ``keys``."""
    messages = [m for m in prepare(table, keys, user="mallory-writer") if m.data_increment.new_files]
    assert len(messages) == 1, "keys of one bucket expected"
    return messages[0]


def _with_file(msg: CommitMessage, **changes: Any) -> CommitMessage:
    f = dataclasses.replace(msg.data_increment.new_files[0], **changes)
    return dataclasses.replace(msg, data_increment=DataIncrement(new_files=(f,)))


def _snapshots(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    return catalog.get_table(identifier).snapshot_manager.list_snapshot_ids()


def _assert_refused(response: Any, *words: str) -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == 400
    for word in words:
        assert word in body["message"], body["message"]


# ---- the control plane: file names and paths -----------------------------------------------------------

PATH_PROBES: dict[str, Callable[[World], dict[str, Any]]] = {
    "file_name climbing into db2.t2": lambda w: {"file_name": w.victim_relative},
    "external_path at db2.t2's file": lambda w: {"external_path": w.victim_file},
    "external_path outside the warehouse": lambda w: {"external_path": str(w.outside)},
    "external_path in another bucket": lambda w: {"external_path": "s3://other-bucket/x/data-1.parquet"},
    "file_name with NUL": lambda w: {"file_name": "data-\x00.parquet"},
    "extra file climbing out": lambda w: {"extra_files": ("../../../db2.db/t2/bucket-0/x.index",)},
}


@pytest.mark.parametrize("probe", sorted(PATH_PROBES))
def test_control_plane_refuses_files_outside_the_table(world: World, probe: str) -> None:
    table = world.catalog.get_table("db1.t1")
    msg = _with_file(_own_message(table, [100]), **PATH_PROBES[probe](world))
    r = world.client.post(f"{URL}/commit-messages", json=_body([msg], 1), headers=world.mallory)
    _assert_refused(r, "message 0", "data_increment.new_files")
    assert _snapshots(world.catalog, "db1.t1") == []
    # Nothing of db2.t2 is reachable through db1.t1, and the victim reads as before.
    assert read_keys(world.catalog, identifier="db1.t1") == []
    assert read_keys(world.catalog, identifier="db2.t2") == [1, 2, 3]
    assert Path(world.victim_file).exists() and world.outside.exists()


def test_control_plane_refuses_index_files_outside_the_table(world: World) -> None:
    table = world.catalog.get_table("db1.t1")
    msg = _own_message(table, [100])
    index = IndexFileMeta("HASH", "../../../db2.db/t2/index/x", 10, 1)
    msg = dataclasses.replace(
        msg, data_increment=dataclasses.replace(msg.data_increment, new_index_files=(index,))
    )
    r = world.client.post(f"{URL}/commit-messages", json=_body([msg], 1), headers=world.mallory)
    _assert_refused(r, "message 0", "new_index_files", "file_name")
    assert _snapshots(world.catalog, "db1.t1") == []


# ---- the control plane: numbers and placement --------------------------------------------------------------

FIELD_PROBES: dict[str, tuple[Callable[[CommitMessage], CommitMessage], str]] = {
    "bucket -65536": (lambda m: dataclasses.replace(m, bucket=-65536), "bucket"),
    "bucket beyond the table's": (lambda m: dataclasses.replace(m, bucket=7), "bucket"),
    "schema id -554050781184": (lambda m: _with_file(m, schema_id=-554050781184), "schema_id"),
    "a schema the table lacks": (lambda m: _with_file(m, schema_id=5), "schema_id"),
    "row count -5": (lambda m: _with_file(m, row_count=-5), "row_count"),
    "file size -1": (lambda m: _with_file(m, file_size=-1), "file_size"),
    "level 1000": (lambda m: _with_file(m, level=1000), "level"),
    "sequence numbers reversed": (
        lambda m: _with_file(m, min_sequence_number=10, max_sequence_number=3),
        "max_sequence_number",
    ),
    "more deleted rows than rows": (lambda m: _with_file(m, delete_row_count=10**6), "delete_row_count"),
    "a partition of the wrong arity": (
        lambda m: dataclasses.replace(m, partition=serialize_row([1], [INT(False)])),
        "partition",
    ),
}


@pytest.mark.parametrize("probe", sorted(FIELD_PROBES))
def test_control_plane_refuses_numbers_out_of_range(world: World, probe: str) -> None:
    mutate, field = FIELD_PROBES[probe]
    msg = mutate(_own_message(world.catalog.get_table("db1.t1"), [100]))
    r = world.client.post(f"{URL}/commit-messages", json=_body([msg], 1), headers=world.mallory)
    _assert_refused(r, "message 0", field)
    assert _snapshots(world.catalog, "db1.t1") == []


def test_table_totals_stay_within_bigint(world: World) -> None:
    """Each file's row count is the writer's claim; the table's total, which Java keeps in a long and
    the statistics in a BIGINT, may not overflow: the commit that would overflow it is refused."""
    table = world.catalog.get_table("db1.t1")
    big = 2**62
    first = _with_file(_own_message(table, [100]), row_count=big)
    assert world.client.post(
        f"{URL}/commit-messages", json=_body([first], 1), headers=world.mallory
    ).is_success
    second = _with_file(_own_message(table, [101]), row_count=big)
    r = world.client.post(f"{URL}/commit-messages", json=_body([second], 2), headers=world.mallory)
    assert r.status_code == 409 and "over BIGINT" in r.json()["message"], r.text
    assert _snapshots(world.catalog, "db1.t1") == [1]


def test_the_same_file_twice_in_one_commit(world: World) -> None:
    msg = _own_message(world.catalog.get_table("db1.t1"), [100])
    r = world.client.post(f"{URL}/commit-messages", json=_body([msg, msg], 1), headers=world.mallory)
    _assert_refused(r, "message 1", "added twice")
    assert _snapshots(world.catalog, "db1.t1") == []


def test_re_adding_a_live_file_with_a_new_identifier(world: World) -> None:
    """The review published 18 snapshots this way, after which every read failed until a rollback."""
    msg = _own_message(world.catalog.get_table("db1.t1"), [100])
    assert world.client.post(f"{URL}/commit-messages", json=_body([msg], 1), headers=world.mallory).is_success
    for identifier in range(2, 5):
        r = world.client.post(f"{URL}/commit-messages", json=_body([msg], identifier), headers=world.mallory)
        assert r.status_code == 409, r.text
        assert "already added" in r.json()["message"]
    assert _snapshots(world.catalog, "db1.t1") == [1]
    keys = read_keys(world.catalog, identifier="db1.t1")
    assert keys and len(keys) == len(set(keys))
    # A reader of db1.t1 reads db1.t1's rows, once each.
    rows = world.client.get(f"{URL}/snapshot", headers=world.reader)
    assert rows.status_code == 200


def test_a_compaction_may_move_a_file_to_another_level(world: World) -> None:
    """Java's upgrade: DELETE at level 0 and ADD at level 5 of the same file in one snapshot."""
    table = world.catalog.get_table("db1.t1")
    msg = _own_message(table, [100])
    assert world.client.post(f"{URL}/commit-messages", json=_body([msg], 1), headers=world.mallory).is_success
    f = msg.data_increment.new_files[0]
    upgraded = CommitMessage(
        msg.partition,
        msg.bucket,
        msg.total_buckets,
        compact_increment=dataclasses.replace(
            msg.compact_increment, compact_before=(f,), compact_after=(dataclasses.replace(f, level=4),)
        ),
    )
    r = world.client.post(f"{URL}/commit-messages", json=_body([upgraded], 2), headers=world.mallory)
    assert r.is_success, r.text
    assert read_keys(world.catalog, identifier="db1.t1") == [100]


# ---- the REST commit: manifests the client wrote ----------------------------------------------------------


def _poisoned_entry(world: World, **changes: Any) -> ManifestEntry:
    table = world.catalog.get_table("db1.t1")
    msg = _own_message(table, [200])
    f: DataFileMeta = dataclasses.replace(msg.data_increment.new_files[0], **changes)
    return ManifestEntry(FileKind.ADD, msg.partition, msg.bucket, 2, f)


def _rest_base(world: World) -> Any:
    write(world.catalog, [1], identifier="db1.t1")
    base = world.catalog.get_table("db1.t1").latest_snapshot()
    assert base is not None
    return base


def test_rest_commit_refuses_a_delta_naming_another_tables_file(world: World) -> None:
    base = _rest_base(world)
    delta = write_delta(world.catalog, "db1.t1", [_poisoned_entry(world, file_name=world.victim_relative)])
    body = commit_body(base, deltaManifestList=delta, commitKind="APPEND")
    r = world.client.post(f"{URL}/commit", content=json.dumps(body), headers=world.mallory)
    _assert_refused(r, "deltaManifestList entry 0", "file_name")
    assert _snapshots(world.catalog, "db1.t1") == [1]


def test_rest_commit_refuses_a_base_list_smuggling_a_file_in(world: World) -> None:
    """The client writes the base list too: a manifest there that the base did not have is checked."""
    base = _rest_base(world)
    smuggled = write_delta(world.catalog, "db1.t1", [_poisoned_entry(world, external_path=world.victim_file)])
    empty = write_delta(world.catalog, "db1.t1", [])
    body = commit_body(base, baseManifestList=smuggled, deltaManifestList=empty, commitKind="APPEND")
    r = world.client.post(f"{URL}/commit", content=json.dumps(body), headers=world.mallory)
    _assert_refused(r, "baseManifestList", "external_path")
    assert _snapshots(world.catalog, "db1.t1") == [1]
    assert read_keys(world.catalog, identifier="db1.t1") == [1]


def test_rest_commit_refuses_re_adding_a_live_file(world: World) -> None:
    base = _rest_base(world)
    table = world.catalog.get_table("db1.t1")
    live = next(
        e for g in table.manifest_reader.manifests(table.manifest_reader.data_manifests(base)) for e in g
    )
    delta = write_delta(world.catalog, "db1.t1", [live])
    body = commit_body(base, deltaManifestList=delta, commitKind="APPEND")
    r = world.client.post(f"{URL}/commit", content=json.dumps(body), headers=world.mallory)
    _assert_refused(r, "live in snapshot 1")
    assert _snapshots(world.catalog, "db1.t1") == [1]


def test_rest_commit_records_the_statistics_storage_holds(world: World) -> None:
    """Statistics of -1e18 rows and -5 files are not recorded: the server computes the deltas from the
    delta manifests (here: one file of one row added)."""
    base = _rest_base(world)
    entry = _poisoned_entry(world)
    delta = write_delta(world.catalog, "db1.t1", [entry])
    bogus = [
        {
            "spec": {},
            "recordCount": -(10**18),
            "fileSizeInBytes": -1,
            "fileCount": -5,
            "lastFileCreationTime": 0,
        }
    ]
    body = commit_body(
        base,
        deltaManifestList=delta,
        commitKind="APPEND",
        _statistics=bogus,
        totalRecordCount=2,
        deltaRecordCount=1,
    )
    r = world.client.post(f"{URL}/commit", content=json.dumps(body), headers=world.mallory)
    assert r.json() == {"success": True}, r.text
    parts = world.client.get(f"{URL}/partitions", headers=world.mallory).json()["partitions"]
    assert [(p["recordCount"], p["fileCount"]) for p in parts] == [(1 + entry.file.row_count, 2)]


# ---- the in-process library ----------------------------------------------------------------------


def test_library_commit_refuses_files_outside_the_table(world: World) -> None:
    table = world.catalog.get_table("db1.t1")
    msg = _with_file(_own_message(table, [100]), file_name=world.victim_relative)
    commit = table.new_batch_write_builder().new_commit()
    with pytest.raises(ValidationError, match="not a plain file name") as refused:
        commit.commit([msg])
    assert refused.value.fields["message_index"] == 0 and refused.value.fields["field"] == "file_name"
    assert _snapshots(world.catalog, "db1.t1") == []
    manifest_dir = Path(table.path) / "manifest"
    assert not manifest_dir.exists() or not list(manifest_dir.iterdir())


def test_library_commit_refuses_re_adding_a_live_file(world: World) -> None:
    table = world.catalog.get_table("db1.t1")
    msg = _own_message(table, [100])
    table.new_stream_write_builder().with_commit_user("u").new_commit().commit([msg], 1)
    again = world.catalog.get_table("db1.t1").new_stream_write_builder().with_commit_user("u2").new_commit()
    with pytest.raises(CommitConflictError, match="already added"):
        again.commit([msg], 1)
    assert _snapshots(world.catalog, "db1.t1") == [1]


def test_another_tables_bare_file_name_stays_inside_this_table(world: World) -> None:
    """A bare name resolves inside the committing table's own bucket directory: it names no file of
    db2.t2 there, so nothing of db2.t2 is read or deleted through db1.t1 (the writer only breaks its
    own table, as it could by writing a bad file). Its existence is not checked per file."""
    table = world.catalog.get_table("db1.t1")
    msg = _with_file(_own_message(table, [100]), file_name=Path(world.victim_file).name)
    r = world.client.post(f"{URL}/commit-messages", json=_body([msg], 1), headers=world.mallory)
    assert r.is_success, r.text
    paths = world.catalog.get_table("db1.t1").new_read_builder().new_scan().plan().splits()[0].file_paths
    assert all(p.startswith(table.path + "/") for p in paths)
    assert read_keys(world.catalog, identifier="db2.t2") == [1, 2, 3]


def test_unique_names_of_this_commit(world: World) -> None:
    """Messages a real writer produced pass every check (the probes above are the only difference)."""
    table = world.catalog.get_table("db1.t1")
    messages = prepare(table, range(50), user=f"w-{uuid.uuid4().hex[:6]}")
    r = world.client.post(f"{URL}/commit-messages", json=_body(messages, 1), headers=world.mallory)
    assert r.is_success, r.text
    assert read_keys(world.catalog, identifier="db1.t1") == list(range(50))


def test_recovery_aborts_stored_messages_that_name_files_outside_the_table(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit prepared before the checks existed (its messages stored in the ``prepared`` event) whose
    writer died: recovery finishes pending commits through the commit path, which now refuses it. It is
    aborted (a definite outcome), not left pending for every later run, and the victim is untouched."""
    table = world.catalog.get_table("db1.t1")
    msg = _with_file(_own_message(table, [100]), file_name=world.victim_relative)
    with monkeypatch.context() as before_the_checks:
        before_the_checks.setattr(MessageValidator, "validate", lambda self, messages: None)
        with crash_at("after_lock"), pytest.raises(Crash):
            assert table.committer_factory is not None
            table.committer_factory(table, "dead-writer").commit([msg], 1)
    report = recover_table(world.catalog, "db1.t1", older_than_seconds=0)
    [resolution] = report.commits
    assert resolution.action == "aborted" and "refused" in (resolution.reason or "")
    assert "not a plain file name" in (resolution.reason or "")
    assert _snapshots(world.catalog, "db1.t1") == []
    assert read_keys(world.catalog, identifier="db2.t2") == [1, 2, 3]
    assert Path(world.victim_file).exists()
    assert recover_table(world.catalog, "db1.t1", older_than_seconds=0).commits == []


@pytest.mark.parametrize(
    ("options", "highest"),
    [({}, 5), ({"num-levels": "3"}, 2), ({"num-sorted-run.compaction-trigger": "8"}, 8)],
)
def test_levels_follow_javas_num_levels(tmp_path: Path, options: dict[str, str], highest: int) -> None:
    """Java's compaction writes up to level ``numLevels() - 1`` (``num-levels``, else the compaction
    trigger + 1: 6 levels by default): its messages pass, one level more is refused."""
    _, path, schema = make_table(tmp_path, primary_key=True, options=options)
    validator = MessageValidator(schema, TableRoots.of(path, schema.options))
    validator.validate([append_msg(0, 0, data_file(level=highest))])
    with pytest.raises(ValidationError, match="level"):
        validator.validate([append_msg(0, 0, data_file(level=highest + 1))])


@pytest.mark.parametrize("which", ["deltaManifestList", "a manifest it lists", "baseManifestList"])
def test_rest_commit_answers_a_corrupt_manifest_the_client_wrote_with_400(world: World, which: str) -> None:
    """The server now reads the manifests a REST client wrote: one that does not decode is the client's
    fault (400 naming it, nothing recorded), not an internal error."""
    base = _rest_base(world)
    table = world.catalog.get_table("db1.t1")
    delta = write_delta(world.catalog, "db1.t1", [_poisoned_entry(world)])
    if which == "deltaManifestList":
        target = delta
    elif which == "a manifest it lists":
        target = table.manifest_reader.manifest_list(delta)[0].file_name
    else:
        target = write_delta(world.catalog, "db1.t1", [])
    Path(table.paths.manifest_path(target)).write_bytes(b"Obj\x01 not avro at all")
    changes: dict[str, Any] = {"deltaManifestList": delta, "commitKind": "APPEND"}
    if which == "baseManifestList":
        changes["baseManifestList"] = target
    r = world.client.post(
        f"{URL}/commit", content=json.dumps(commit_body(base, **changes)), headers=world.mallory
    )
    _assert_refused(r, target)
    assert _snapshots(world.catalog, "db1.t1") == [1]
