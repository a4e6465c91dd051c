"""The session-policy documents of table-scoped vended credentials (``paimon_meta.io.policies``), proven
against a moto server that enforces IAM (``tests/io/iam_moto.py``: its own process, AWS's evaluation).

The documents are attached as a test-only role's permission policy (moto ignores session policies; the
test server models them too, used once below for the production shape) and the role's credentials are
used: every call a reader or writer of the table makes must be allowed there, and the same calls on a
sibling table, on a table whose name merely starts with this one's (``t1``/``t10``), in another bucket,
on the database and on the warehouse must be refused. First the server must prove it refuses at all.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.errors import FileAlreadyExistsError, FileIOError, ValidationError
from paimon_meta.io import S3FileIO, get_file_io
from paimon_meta.io.policies import (
    MAX_SESSION_POLICY_CHARS,
    READ_ACTIONS,
    WRITE_ACTIONS,
    actions_for,
    ancestor_markers,
    policy_json,
    split_location,
    table_policy,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING, DataField
from paimon_meta.table.snapshots import SchemaManager
from tests.fixtures.interop import run_pypaimon
from tests.io.iam_moto import (
    Credentials,
    Decision,
    IamMoto,
    IamMotoUnavailable,
    condition_holds,
    iam_glob,
    policy_decision,
    s3_authorizations,
    start_iam_moto,
)
from tests.io.policy_probes import (
    DATABASE,
    SEEDED,
    TABLE,
    TargetName,
    World,
    probe_all,
    seed,
    violations,
)
from tests.io.pypaimon_probes import FILE_IO_OPERATIONS, FILE_IO_PROBE, FILE_IO_READS, TABLE_ROUND_TRIP

LOCATION = "s3://pm-warehouse/warehouse/db.db/t1"


# ---------------------------------------------------------------------------------------------------
# The documents


def test_read_document() -> None:
    assert table_policy(LOCATION, "read") == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TableObjects",
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": [
                    "arn:aws:s3:::pm-warehouse/warehouse/db.db/t1",
                    "arn:aws:s3:::pm-warehouse/warehouse/db.db/t1/*",
                ],
            },
            {
                "Sid": "ListTable",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": ["arn:aws:s3:::pm-warehouse"],
                "Condition": {"StringLike": {"s3:prefix": ["warehouse/db.db/t1/", "warehouse/db.db/t1/*"]}},
            },
        ],
    }
    assert table_policy(LOCATION, "read", pyarrow_create_dir=True) == table_policy(LOCATION, "read")


def test_write_document_adds_only_object_actions_on_the_same_resources() -> None:
    read, write = table_policy(LOCATION, "read"), table_policy(LOCATION, "write")
    assert write["Statement"][0]["Action"] == [
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts",
    ]
    assert write["Statement"][0]["Resource"] == read["Statement"][0]["Resource"]
    assert write["Statement"][1] == read["Statement"][1]
    assert set(actions_for("read")) == set(READ_ACTIONS) == {"s3:GetObject", "s3:ListBucket"}
    granted = {a for st in write["Statement"] for a in st["Action"]}
    assert granted == set(WRITE_ACTIONS) == set(actions_for("write"))


def test_pyarrow_create_dir_grants_head_bucket_and_the_ancestor_markers() -> None:
    document = table_policy("s3a://pm-warehouse/a/b/t1/", "write", pyarrow_create_dir=True)
    assert document["Statement"][:2] == table_policy("s3://pm-warehouse/a/b/t1", "write")["Statement"]
    assert document["Statement"][2:] == [
        {
            "Sid": "PyarrowHeadBucket",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": ["arn:aws:s3:::pm-warehouse"],
        },
        {
            "Sid": "PyarrowParentMarkers",
            "Effect": "Allow",
            "Action": ["s3:PutObject"],
            "Resource": ["arn:aws:s3:::pm-warehouse/a/", "arn:aws:s3:::pm-warehouse/a/b/"],
        },
    ]
    assert ancestor_markers("t1") == []
    assert len(table_policy("s3://b/t1", "write", pyarrow_create_dir=True)["Statement"]) == 3


@pytest.mark.parametrize(
    ("location", "bucket", "prefix"),
    [
        ("s3://b/w/db.db/t1", "b", "w/db.db/t1"),
        ("s3a://b/w/db.db/t1/", "b", "w/db.db/t1"),
        ("s3://b/t1//", "b", "t1"),
    ],
)
def test_locations(location: str, bucket: str, prefix: str) -> None:
    assert split_location(location) == (bucket, prefix)


@pytest.mark.parametrize(
    "location",
    [
        "/tmp/warehouse/db.db/t1",
        "file:///tmp/w/t1",
        "gs://b/w/t1",
        "s3://b",
        "s3://b/",
        "s3:///w/t1",
        "s3://b/w//t1",
        "s3://b/w/../t1",
        "s3://b/w/./t1",
        "s3://b/w/t*",
        "s3://b/w/t?",
        "s3://b/w/${aws:username}",
        "",
    ],
)
def test_bad_locations_are_refused_by_name(location: str) -> None:
    with pytest.raises(ValidationError) as e:
        table_policy(location, "read")
    assert e.value.fields["location"] == location
    assert repr(location) in str(e.value)


def test_unknown_level_is_refused() -> None:
    with pytest.raises(ValidationError, match="'admin'"):
        table_policy(LOCATION, "admin")  # type: ignore[arg-type]


def test_policy_json_is_compact_and_bounded() -> None:
    document = table_policy(LOCATION, "write", pyarrow_create_dir=True)
    text = policy_json(document)
    assert json.loads(text) == document
    assert " " not in text and text.isascii()
    long_location = "s3://pm-warehouse/" + "/".join(["d" * 60] * 12) + "/t1"
    with pytest.raises(ValidationError) as e:
        policy_json(table_policy(long_location, "write", pyarrow_create_dir=True))
    assert e.value.fields["location"] == long_location
    assert e.value.fields["length"] > MAX_SESSION_POLICY_CHARS
    assert long_location in str(e.value)


# ---------------------------------------------------------------------------------------------------
# The test server's AWS semantics (what the proof rests on)


def test_iam_globs_and_conditions() -> None:
    assert iam_glob("w/db.db/t1/*", "w/db.db/t1/") and iam_glob("w/db.db/t1/*", "w/db.db/t1/a/b")
    assert not iam_glob("w/db.db/t1/*", "w/db.db/t10/a") and not iam_glob("w/db.db/t1", "w/dbXdb/t1")
    assert iam_glob("s3:get*", "s3:GetObject", ignore_case=True) and not iam_glob("s3:get*", "s3:GetObject")
    like = ["w/t1/", "w/t1/*"]
    assert condition_holds("StringLike", "s3:prefix", like, {"s3:prefix": "w/t1/x"})
    assert not condition_holds("StringLike", "s3:prefix", like, {"s3:prefix": "w/t10/"})
    assert not condition_holds("StringLike", "s3:prefix", like, {})  # absent key: a positive operator fails
    assert condition_holds("StringNotLike", "s3:prefix", like, {})
    assert condition_holds("StringLikeIfExists", "s3:prefix", like, {})
    assert condition_holds("StringEquals", "S3:Prefix", "w/t1/", {"s3:prefix": "w/t1/"})  # keys: any case
    with pytest.raises(ValueError, match="NumericLessThan"):
        condition_holds("NumericLessThan", "s3:max-keys", "10", {"s3:max-keys": "5"})


def test_policy_evaluation_deny_wins_and_conditions_scope_statements() -> None:
    allow = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    deny = {"Statement": {"Effect": "Deny", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/x/*"}}
    assert policy_decision([allow], "s3:PutObject", "arn:aws:s3:::b/x/1", {})
    assert not policy_decision([allow, deny], "s3:PutObject", "arn:aws:s3:::b/x/1", {})
    assert not policy_decision([], "s3:GetObject", "arn:aws:s3:::b/x/1", {})
    document = table_policy("s3://b/w/t1", "read")
    assert policy_decision([document], "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "w/t1/"})
    assert not policy_decision([document], "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "w/t1"})
    assert not policy_decision([document], "s3:ListBucket", "arn:aws:s3:::b", {})


def test_s3_requests_are_authorized_as_aws_does() -> None:
    bucket = "arn:aws:s3:::b"
    assert s3_authorizations("s3:HeadBucket", bucket, "/b", {}, b"") == [("s3:ListBucket", bucket, {})]
    listing = s3_authorizations(
        "s3:ListBucket", bucket, "/b?list-type=2&prefix=w%2Ft1%2F&delimiter=%2F", {}, b""
    )
    assert listing == [("s3:ListBucket", bucket, {"s3:prefix": "w/t1/", "s3:delimiter": "/"})]
    body = b'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>w/a</Key></Object><Object><Key>w/b</Key></Object></Delete>'
    assert s3_authorizations("s3:DeleteObject", bucket, "/b?delete", {}, body) == [
        ("s3:DeleteObject", f"{bucket}/w/a", {}),
        ("s3:DeleteObject", f"{bucket}/w/b", {}),
    ]
    copy = s3_authorizations(
        "s3:PutObject", f"{bucket}/w/t1/c", "/b/w/t1/c", {"X-Amz-Copy-Source": "b/w/t2/x"}, b""
    )
    assert copy == [("s3:PutObject", f"{bucket}/w/t1/c", {}), ("s3:GetObject", f"{bucket}/w/t2/x", {})]


# ---------------------------------------------------------------------------------------------------
# The proof against the IAM-enforcing server


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"IAM moto server unavailable under CI: {reason}")
    pytest.skip(f"IAM moto server unavailable: {reason}")


@pytest.fixture(scope="module")
def iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IamMoto]:
    """The IAM-enforcing moto server (its own process), for this module."""
    try:
        server = start_iam_moto(tmp_path_factory.mktemp("iam-moto") / "decisions.jsonl")
    except IamMotoUnavailable as e:
        _unavailable(str(e))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def world(iam: IamMoto) -> World:
    """Two buckets with tables t1, t2, t10 (the credentials under test are for t1)."""
    w = World("pm-warehouse", "pm-other")
    seed(iam, w)
    return w


def _credentials(iam: IamMoto, location: str, level: str, *, pyarrow_create_dir: bool = False) -> Credentials:
    """A fresh role whose permission policy is the generated document; its session's credentials."""
    document = table_policy(location, level, pyarrow_create_dir=pyarrow_create_dir)  # type: ignore[arg-type]
    return iam.assume(iam.role_with_policy(document), policy_json(document))


def _denials(iam: IamMoto, since: int, credentials: Credentials) -> list[Decision]:
    return [d for d in iam.decisions(since, credentials.principal) if not d.allowed]


def test_enforcement_is_on(iam: IamMoto, world: World) -> None:
    import requests
    from botocore.exceptions import ClientError

    key = f"{TABLE}/{SEEDED}"
    assert iam.s3().get_object(Bucket=world.bucket, Key=key)["Body"].read()  # the admin may

    def code(credentials: Credentials) -> str:
        with pytest.raises(ClientError) as e:
            iam.s3(credentials).get_object(Bucket=world.bucket, Key=key)
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        return str(e.value.response["Error"]["Code"])

    unsigned = f"{iam.endpoint}/{world.bucket}/{key}"
    assert requests.get(unsigned, timeout=10).status_code == 403
    assert requests.put(f"{unsigned}-unsigned", data=b"x", timeout=10).status_code == 403
    assert code(Credentials(iam.admin.access_key, "wrong-secret")) == "SignatureDoesNotMatch"
    assert code(Credentials("AKIAUNKNOWNUNKNOWN00", "x")) == "InvalidAccessKeyId"
    # A valid session of a role allowed only the other bucket: refused here, allowed there.
    elsewhere = _credentials(iam, f"s3://{world.other_bucket}/{TABLE}", "read")
    assert code(elsewhere) == "AccessDenied"
    assert iam.s3(elsewhere).get_object(Bucket=world.other_bucket, Key=key)["Body"].read()
    tampered = Credentials(elsewhere.access_key, elsewhere.secret_key, f"{elsewhere.session_token}x")
    with pytest.raises(ClientError) as e:
        iam.s3(tampered).get_object(Bucket=world.other_bucket, Key=key)
    assert e.value.response["Error"]["Code"] == "InvalidToken"  # HTTP 400, as on AWS
    with pytest.raises(ClientError):
        iam.s3().head_object(Bucket=world.bucket, Key=f"{key}-unsigned")  # the unsigned PUT wrote nothing


@pytest.mark.parametrize(
    ("level", "pyarrow_create_dir"), [("read", False), ("write", False), ("write", True)]
)
def test_each_call_allowed_in_the_table_and_refused_elsewhere(
    iam: IamMoto, world: World, level: str, pyarrow_create_dir: bool
) -> None:
    credentials = _credentials(iam, world.table.uri, level, pyarrow_create_dir=pyarrow_create_dir)
    results = probe_all(iam, iam.s3(credentials), world)
    assert violations(results, level, pyarrow_create_dir=pyarrow_create_dir) == []


def test_the_table_root_itself(iam: IamMoto, world: World) -> None:
    """Why the listing condition has no bare ``prefix``: with it, t1 lists t10's keys."""
    from botocore.exceptions import ClientError

    s3 = iam.s3(_credentials(iam, world.table.uri, "write"))
    with pytest.raises(ClientError, match="AccessDenied"):
        s3.list_objects_v2(Bucket=world.bucket, Prefix=TABLE)
    bare = table_policy(world.table.uri, "write")
    bare["Statement"][1]["Condition"]["StringLike"]["s3:prefix"].insert(0, TABLE)
    leaky = iam.s3(iam.assume(iam.role_with_policy(bare)))
    listed = [o["Key"] for o in leaky.list_objects_v2(Bucket=world.bucket, Prefix=TABLE)["Contents"]]
    assert f"{DATABASE}/t10/{SEEDED}" in listed
    # The cost, measured under AWS's rule (403 for a missing key unless ListBucket covers it): a HEAD of
    # the table's own key (no object has that name) is refused; under "prefix/" it is a 404.
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=world.bucket, Key=TABLE)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=world.bucket, Key=f"{TABLE}/snapshot/LATEST")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=world.bucket)  # pyarrow's create_dir needs this (see pyarrow_create_dir)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_pyarrow_create_dir_puts_only_the_ancestor_markers(iam: IamMoto, world: World) -> None:
    s3 = iam.s3(_credentials(iam, world.table.uri, "write", pyarrow_create_dir=True))
    s3.head_bucket(Bucket=world.bucket)
    for key in ("warehouse/", "warehouse/db.db/", f"{TABLE}/"):
        s3.put_object(Bucket=world.bucket, Key=key, Body=b"")
    from botocore.exceptions import ClientError

    for key in ("warehouse/x", "warehouse/db.db/x", "warehouse", f"{DATABASE}/t2/", f"{DATABASE}/t10/"):
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.put_object(Bucket=world.bucket, Key=key, Body=b"")
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=world.other_bucket)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


# The loosenings below all show on these (the database and warehouse targets are probed by the main test).
NEIGHBOURS: tuple[TargetName, ...] = ("own", "sibling", "name-prefix", "other-bucket")
LOOSENED = {
    "prefix* in the listing condition": lambda d: d["Statement"][1]["Condition"]["StringLike"].update(
        {"s3:prefix": [TABLE + "*"]}
    ),
    "objects under prefix* (no slash)": lambda d: d["Statement"][0].update(
        {"Resource": [f"arn:aws:s3:::pm-warehouse/{TABLE}*"]}
    ),
    "bucket-wide objects": lambda d: d["Statement"][0].update({"Resource": ["arn:aws:s3:::pm-warehouse/*"]}),
    "ListBucket without its condition": lambda d: d["Statement"][1].pop("Condition"),
    "the same table in any bucket": lambda d: d["Statement"][0].update(
        {"Resource": [f"arn:aws:s3:::*/{TABLE}/*"]}
    ),
}


@pytest.mark.parametrize("loosening", list(LOOSENED))
def test_the_probes_catch_a_loosened_document(iam: IamMoto, world: World, loosening: str) -> None:
    """The proof is only as good as its probes: each way of loosening the document must show."""
    document = table_policy(world.table.uri, "write")
    LOOSENED[loosening](document)
    results = probe_all(iam, iam.s3(iam.assume(iam.role_with_policy(document))), world, NEIGHBOURS)
    assert violations(results, "write") != []


def test_read_credentials_that_can_put_are_caught(iam: IamMoto, world: World) -> None:
    document = table_policy(world.table.uri, "read")
    document["Statement"][0]["Action"].append("s3:PutObject")
    results = probe_all(iam, iam.s3(iam.assume(iam.role_with_policy(document))), world, ("own",))
    assert "own: put allowed, expected the opposite" in violations(results, "read")


def test_production_shape_a_warehouse_role_narrowed_by_the_session_policy(iam: IamMoto, world: World) -> None:
    """As deployed: the role may do everything in the warehouse, the session policy narrows it to the
    table (the test server intersects them as AWS does; moto alone would not)."""
    warehouse_role = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": [f"arn:aws:s3:::{world.bucket}/warehouse/*"]},
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{world.bucket}",
                "Condition": {"StringLike": {"s3:prefix": ["warehouse/", "warehouse/*"]}},
            },
        ],
    }
    role = iam.role_with_policy(warehouse_role)
    session = iam.assume(role, policy_json(table_policy(world.table.uri, "write")))
    assert violations(probe_all(iam, iam.s3(session), world), "write") == []
    sibling = f"{DATABASE}/t2/by-the-role-alone"
    iam.s3(iam.assume(role)).put_object(Bucket=world.bucket, Key=sibling, Body=b"x")  # the role alone may


# --- real clients ------------------------------------------------------------------------------------


def test_s3fileio_writer_and_reader(iam: IamMoto, world: World) -> None:
    table = world.table.uri
    writer = S3FileIO(table, _credentials(iam, table, "write").s3_options(iam.endpoint))
    assert writer.capabilities.atomic_create  # the conditional-write probe runs inside the table
    path = writer.join(table, "snapshot", f"snapshot-{uuid.uuid4().hex[:6]}")
    writer.create_if_absent(path, b"one")
    with pytest.raises(FileAlreadyExistsError):
        writer.create_if_absent(path, b"two")
    assert writer.read(path) == b"one" and writer.exists(path) and writer.status(path).size == 3
    assert not writer.exists(writer.join(table, "snapshot", "LATEST"))  # a 404, not a refusal
    assert path in [s.path for s in writer.list(writer.join(table, "snapshot"))]
    assert path in [s.path for s in writer.list_recursive(table)]
    reader = S3FileIO(table, _credentials(iam, table, "read").s3_options(iam.endpoint))
    assert reader.read(path) == b"one" and reader.exists(path)
    assert [s.path for s in reader.list(writer.join(table, "snapshot"))] == [
        s.path for s in writer.list(writer.join(table, "snapshot"))
    ]
    refused: list[Callable[[], object]] = [
        partial(reader.write, writer.join(table, "x"), b"x"),
        partial(reader.delete, path),
        lambda: reader.capabilities,  # its probe PUTs
    ]
    for call in refused:
        with pytest.raises(FileIOError) as e:
            call()
        assert e.value.fields["code"] == "AccessDenied"
    writer.delete(path)
    assert not writer.exists(path)
    others: tuple[TargetName, ...] = ("sibling", "name-prefix", "other-bucket", "database", "warehouse")
    for other in others:
        root = world.targets()[other].uri
        calls: list[Callable[[], object]] = [
            partial(writer.read, f"{root}/{SEEDED}"),
            partial(writer.exists, f"{root}/{SEEDED}"),
            partial(writer.list, f"{root}/schema"),
            partial(writer.create_if_absent, f"{root}/x-{uuid.uuid4().hex[:6]}", b"x"),
            partial(writer.delete, f"{root}/{SEEDED}"),
        ]
        for call in calls:
            with pytest.raises(FileIOError) as e:
                call()
            assert e.value.fields["code"] in ("AccessDenied", "403"), other


def test_s3fileio_rooted_at_the_warehouse_cannot_probe(iam: IamMoto, world: World) -> None:
    """A client must root its S3FileIO at the table (or set s3.conditional-writes): the ``auto`` probe
    writes below the root."""
    options = _credentials(iam, world.table.uri, "write").s3_options(iam.endpoint)
    with pytest.raises(FileIOError) as e:
        _ = S3FileIO(f"s3://{world.bucket}/warehouse", options).capabilities
    assert e.value.fields["code"] == "AccessDenied"
    pinned = S3FileIO(f"s3://{world.bucket}/warehouse", {**options, "s3.conditional-writes": "true"})
    pinned.create_if_absent(f"{world.table.uri}/pinned-{uuid.uuid4().hex[:6]}", b"x")


def _new_table(iam: IamMoto, name: str) -> str:
    """An empty primary-key table ``(id BIGINT, v STRING)``, one bucket, created with the admin's keys."""
    location = f"s3://pm-tables/warehouse/{name}.db/t1"
    admin = iam.s3()
    if "pm-tables" not in [b["Name"] for b in admin.list_buckets().get("Buckets", [])]:
        admin.create_bucket(Bucket="pm-tables")
    fields = (DataField(0, "id", BIGINT(False)), DataField(1, "v", STRING()))
    schema = TableSchema(0, fields, 1, (), ("id",), {"bucket": "1"}, time_millis=int(time.time() * 1000))
    assert SchemaManager(
        get_file_io(location, iam.admin.s3_options(iam.endpoint)), location
    ).commit_new_schema(schema)
    return location


def _assert_stayed_inside(decisions: list[Decision], location: str) -> None:
    bucket, prefix = split_location(location)
    for d in decisions:
        if d.action == "s3:ListBucket":
            assert d.resource == f"arn:aws:s3:::{bucket}" and d.context["s3:prefix"].startswith(
                prefix + "/"
            ), d
        else:
            assert d.resource.startswith(f"arn:aws:s3:::{bucket}/{prefix}/"), d


def test_paimon_meta_writes_commits_and_reads_with_table_credentials(iam: IamMoto) -> None:
    location = _new_table(iam, "ours")
    writer = _credentials(iam, location, "write")
    mark = iam.mark()
    table = paimon_meta.open_table(location, writer.s3_options(iam.endpoint))
    for round in range(2):
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.table({"id": pa.array([round, 10 + round], pa.int64()), "v": ["a", "b"]}))
        builder.new_commit().commit(write.prepare_commit())
        write.close()
    made = iam.decisions(mark, writer.principal)
    assert [d for d in made if not d.allowed] == []
    assert {d.action for d in made} >= {"s3:PutObject", "s3:GetObject", "s3:ListBucket", "s3:DeleteObject"}
    _assert_stayed_inside(made, location)

    reader = _credentials(iam, location, "read")
    table = paimon_meta.open_table(location, reader.s3_options(iam.endpoint))
    read = table.new_read_builder()
    assert sorted(read.new_read().to_arrow(read.new_scan().plan().splits()).column("id").to_pylist()) == [
        0,
        1,
        10,
        11,
    ]
    before = sorted(o["Key"] for o in iam.s3().list_objects_v2(Bucket="pm-tables")["Contents"])
    write = table.new_batch_write_builder().new_write()
    write.write_arrow(pa.table({"id": pa.array([99], pa.int64()), "v": ["z"]}))
    with pytest.raises(FileIOError) as e:
        write.prepare_commit()
    assert e.value.fields["code"] == "AccessDenied"
    assert sorted(o["Key"] for o in iam.s3().list_objects_v2(Bucket="pm-tables")["Contents"]) == before


@pytest.mark.interop
def test_pypaimon_file_io_calls(iam: IamMoto, world: World, pypaimon_python: Path) -> None:
    """Every storage call pypaimon makes through pyarrow, inside the table and outside it."""
    table = world.table.uri
    runs: dict[str, Credentials] = {
        "read": _credentials(iam, table, "read"),
        "write": _credentials(iam, table, "write"),
        "write+pyarrow_create_dir": _credentials(iam, table, "write", pyarrow_create_dir=True),
    }
    admin = iam.s3()
    spec: dict[str, Any] = {"runs": {}}
    for run, credentials in runs.items():
        victims = {}
        for name, target in world.targets().items():
            key = target.key(f"victim-{uuid.uuid4().hex[:8]}")
            admin.put_object(Bucket=target.bucket, Key=key, Body=b"v")
            victims[name] = f"s3://{target.bucket}/{key}"
        spec["runs"][run] = {
            "root": table,
            "options": credentials.s3_options(iam.endpoint),
            "targets": {name: t.uri for name, t in world.targets().items()},
            "victims": victims,
        }
    mark = iam.mark()
    out = run_pypaimon(FILE_IO_PROBE, input_json=spec, python=pypaimon_python, timeout=120)

    wrong = []
    for run, targets in out.items():
        level, create_dir = run.split("+")[0], run.endswith("pyarrow_create_dir")
        for target, outcomes in targets.items():
            assert set(outcomes) == set(FILE_IO_OPERATIONS)
            for op, got in outcomes.items():
                if target != "own":
                    # the documented cost of pyarrow_create_dir: listing anything in the bucket
                    lists = create_dir and op == "list" and target != "other-bucket"
                    want = "ok" if lists else "denied"
                elif op in FILE_IO_READS or (level == "write" and (create_dir or op != "write-new-dir")):
                    want = "ok"
                else:
                    want = "denied"
                if got != want:
                    wrong.append(f"{run} {target} {op}: {got} (expected {want})")
    assert wrong == []

    # Inside its table, the plain write credential met exactly one refusal: pyarrow's HeadBucket
    # before creating the new directory (then it would PUT warehouse/ and warehouse/db.db/).
    bucket_arn = f"arn:aws:s3:::{world.bucket}"
    own_denials = {
        (d.action, d.resource, json.dumps(d.context))
        for d in _denials(iam, mark, runs["write"])
        if (
            d.resource == bucket_arn
            and (not d.context or d.context.get("s3:prefix", "").startswith(TABLE + "/"))
        )
        or d.resource.startswith(f"{bucket_arn}/{TABLE}/")
    }
    assert own_denials == {("s3:ListBucket", bucket_arn, "{}")}


@pytest.mark.interop
def test_pypaimon_table_round_trip(iam: IamMoto, pypaimon_python: Path) -> None:
    """A whole table written, committed and read by pypaimon 2.1.0 with vended credentials only."""
    location = _new_table(iam, "pypaimon")
    strict = _credentials(iam, location, "write")
    writer = _credentials(iam, location, "write", pyarrow_create_dir=True)
    reader = _credentials(iam, location, "read")

    def step(name: str, credentials: Credentials, rounds: int, read: bool) -> dict[str, Any]:
        options = credentials.s3_options(iam.endpoint)
        return {"name": name, "table": location, "options": options, "write_rounds": rounds, "read": read}

    steps = [
        step("strict", strict, 1, False),
        step("writer", writer, 2, True),
        step("reader", reader, 0, True),
    ]
    steps.append(step("reader-writes", reader, 1, False))
    mark = iam.mark()
    out = run_pypaimon(TABLE_ROUND_TRIP, input_json={"steps": steps}, python=pypaimon_python, timeout=120)

    assert out["strict"]["error"] is not None and out["strict"]["error"].startswith("denied: ")
    assert "HeadBucket" in out["strict"]["error"]
    assert out["writer"] == {"rows": [0, 1, 2, 10, 11, 12], "error": None}
    assert out["reader"] == {"rows": [0, 1, 2, 10, 11, 12], "error": None}
    assert out["reader-writes"]["error"] is not None and out["reader-writes"]["error"].startswith("denied: ")

    written = iam.decisions(mark, writer.principal)
    assert [d for d in written if not d.allowed] == []
    bucket, prefix = split_location(location)
    markers = {f"arn:aws:s3:::{bucket}/{m}" for m in ancestor_markers(prefix)}
    head_bucket = [d for d in written if d.action == "s3:ListBucket" and not d.context]
    puts_outside = {d.resource for d in written if d.resource in markers}
    assert head_bucket and puts_outside == markers  # what pyarrow_create_dir is for, and all it is used for
    _assert_stayed_inside(
        [d for d in written if d not in head_bucket and d.resource not in markers], location
    )
    read = iam.decisions(mark, reader.principal)
    _assert_stayed_inside([d for d in read if d.allowed], location)
    assert {d.action for d in read if not d.allowed} <= {"s3:PutObject"}
