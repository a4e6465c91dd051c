"""S3FileIO against the moto server: credentials from the environment, pagination, a golden table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paimon_meta.errors import FileIOError
from paimon_meta.io import LocalFileIO, S3FileIO, get_file_io
from paimon_meta.io import s3 as s3_module
from tests.fixtures.golden import GOLDEN_TABLES, golden_table_path
from tests.fixtures.s3 import MotoS3

pytestmark = pytest.mark.s3


def test_standard_env_vars_are_honoured(
    moto_server: MotoS3,
    s3_warehouse: tuple[str, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri, _ = s3_warehouse
    # isolate from any config on the machine, then provide everything through the environment
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "absent-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.endpoint)
    fio = get_file_io(uri, {"s3.path-style-access": "true"})
    fio.write(fio.join(uri, "f"), b"via env")
    assert fio.read(fio.join(uri, "f")) == b"via env"


def test_missing_bucket_is_an_io_error(moto_server: MotoS3) -> None:
    fio = get_file_io("s3://pm-no-such-bucket/w", {**moto_server.options(), "s3.conditional-writes": "true"})
    for call in (
        lambda: fio.read("s3://pm-no-such-bucket/w/f"),
        lambda: fio.list("s3://pm-no-such-bucket/w"),
        lambda: fio.create_if_absent("s3://pm-no-such-bucket/w/f", b"x"),
    ):
        with pytest.raises(FileIOError) as e:
            call()
        assert e.value.fields["code"] == "NoSuchBucket"


def test_listing_paginates(s3_warehouse: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(s3_module, "_LIST_PAGE_SIZE", 7)
    uri, options = s3_warehouse
    fio = get_file_io(uri, options)
    names = [f"manifest-{i:02d}" for i in range(30)]
    for name in names:
        fio.write(fio.join(uri, "m", name), name.encode())
    fio.write(fio.join(uri, "m", "sub", "x"), b"x")
    assert [s.path for s in fio.list(fio.join(uri, "m"))] == [fio.join(uri, "m", n) for n in names]
    assert len(fio.list_recursive(fio.join(uri, "m"))) == len(names) + 1


def test_directory_markers_are_not_files(s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    fio = get_file_io(uri, options)
    assert isinstance(fio, S3FileIO)
    bucket = uri.split("/")[2]
    fio.client.put_object(Bucket=bucket, Key="warehouse/db.db/", Body=b"")
    fio.write(fio.join(uri, "db.db", "t", "schema", "schema-0"), b"{}")
    assert fio.list(fio.join(uri, "db.db")) == []
    assert [s.path for s in fio.list_recursive(uri)] == [fio.join(uri, "db.db", "t", "schema", "schema-0")]


# Two tables by default (partition directories; ORC manifests with index files); all with PAIMON_META_SLOW=1.
_DEFAULT_GOLDEN = {("parquet", "append_10"), ("orc", "pk_dv_index_with_commit_message_version10")}
_SLOW = pytest.mark.skipif(os.environ.get("PAIMON_META_SLOW") != "1", reason="set PAIMON_META_SLOW=1")


@pytest.mark.parametrize(
    ("fmt", "name"),
    [t if t in _DEFAULT_GOLDEN else pytest.param(*t, marks=[pytest.mark.slow, _SLOW]) for t in GOLDEN_TABLES],
)
def test_golden_table_round_trips_through_s3(
    fmt: str, name: str, s3_warehouse: tuple[str, dict[str, str]]
) -> None:
    src = str(golden_table_path(fmt, name))
    local = LocalFileIO()
    uri, options = s3_warehouse
    s3 = get_file_io(uri, options)
    dst = s3.join(uri, f"{name}.db", name)
    files = local.list_recursive(src)
    assert files
    for st in files:
        s3.write(s3.join(dst, st.path[len(src) :]), local.read(st.path))
    listed = s3.list_recursive(dst)
    assert [(s.path[len(dst) :], s.size) for s in listed] == [(s.path[len(src) :], s.size) for s in files]
    for st in listed:
        assert s3.read(st.path) == local.read(src + st.path[len(dst) :])
    snapshot_dir = s3.join(dst, "snapshot")
    local_snapshots = [s.path[len(src) :] for s in local.list(local.join(src, "snapshot"))]
    assert [s.path[len(dst) :] for s in s3.list(snapshot_dir)] == local_snapshots


def test_puts_go_without_expect_continue(
    moto_server: MotoS3, s3_warehouse: tuple[str, dict[str, str]]
) -> None:
    """botocore would send ``Expect: 100-continue`` and wait for the interim answer (a round trip per
    PUT); FileIO's PUTs, plain and conditional, carry no such header, and the store accepts them."""
    uri, options = s3_warehouse
    fio = S3FileIO(uri, {**options, "s3.conditional-writes": "true"})
    with moto_server.trace() as trace:
        fio.write(f"{uri}/plain", b"x" * 10_000)
        fio.create_if_absent(f"{uri}/created", b"y" * 10_000)
    puts = [r for r in trace if r.method == "PUT"]
    assert [r.key for r in puts] == ["warehouse/plain", "warehouse/created"]
    assert [r.expect for r in puts] == [None, None]
    assert puts[1].if_none_match == "*"
    assert fio.read(f"{uri}/plain") == b"x" * 10_000
    assert fio.read(f"{uri}/created") == b"y" * 10_000
    # botocore's own client (the handler removed) does send it: the trace would see a regression
    raw = moto_server.client()
    bucket = uri.split("/")[2]
    with moto_server.trace() as trace:
        raw.put_object(Bucket=bucket, Key="warehouse/raw", Body=b"z" * 10)
    assert [r.expect for r in trace if r.method == "PUT"] == ["100-continue"]
