"""S3FileIO's decisions on error responses (botocore Stubber: no server) and on a dead endpoint."""

from __future__ import annotations

import io
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from paimon_meta.errors import (
    FileAlreadyExistsError,
    FileIOError,
    FileNotFound,
    StorageOptionsMissingError,
    ValidationError,
)
from paimon_meta.io import S3FileIO, get_file_io
from paimon_meta.io import s3 as s3_module

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

PATH = "s3://bkt/w/snapshot/snapshot-1"


@pytest.fixture(scope="module")
def session() -> boto3.session.Session:
    """Shared so each stubbed client reuses the parsed service model."""
    return boto3.session.Session()


def _offline_client(session: boto3.session.Session) -> S3Client:
    return session.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="x",
        aws_secret_access_key="x",
        region_name="us-east-1",
    )


@pytest.fixture
def stubbed(
    session: boto3.session.Session, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[S3FileIO, Stubber]]:
    monkeypatch.setattr(s3_module, "_CONFLICT_BACKOFF_S", 0.0)
    client = _offline_client(session)
    fio = S3FileIO("s3://bkt/w", {"s3.conditional-writes": "true"}, client=client)
    with Stubber(client) as stub:
        yield fio, stub
        stub.assert_no_pending_responses()


def _body(data: bytes) -> dict[str, object]:
    return {"Body": StreamingBody(io.BytesIO(data), len(data))}


def test_412_is_already_exists_without_reading(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
    with pytest.raises(FileAlreadyExistsError) as e:
        fio.create_if_absent(PATH, b"mine")
    assert e.value.path == PATH


def test_412_after_a_retry_with_our_bytes_is_success(stubbed: tuple[S3FileIO, Stubber]) -> None:
    # botocore re-sent the PUT after a lost response; the first attempt had landed
    fio, stub = stubbed
    stub.add_client_error(
        "put_object", "PreconditionFailed", http_status_code=412, response_meta={"RetryAttempts": 1}
    )
    stub.add_response("get_object", _body(b"mine"))
    fio.create_if_absent(PATH, b"mine")


def test_412_after_a_retry_with_other_bytes_is_already_exists(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    stub.add_client_error(
        "put_object", "PreconditionFailed", http_status_code=412, response_meta={"RetryAttempts": 2}
    )
    stub.add_response("get_object", _body(b"theirs"))
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(PATH, b"mine")


def test_409_conflict_is_retried(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
    stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
    stub.add_response("put_object", {})
    fio.create_if_absent(PATH, b"mine")


def test_persistent_409_then_head_finds_an_object(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    for _ in range(s3_module._CONFLICT_ATTEMPTS):
        stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
    stub.add_response(
        "head_object", {"ContentLength": 6, "LastModified": datetime(2025, 1, 1, tzinfo=UTC), "ETag": '"e"'}
    )
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(PATH, b"mine")


def test_persistent_409_then_head_finds_nothing(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    for _ in range(s3_module._CONFLICT_ATTEMPTS):
        stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
    stub.add_client_error("head_object", "404", http_status_code=404)
    with pytest.raises(FileIOError) as e:
        fio.create_if_absent(PATH, b"mine")
    assert not isinstance(e.value, FileAlreadyExistsError)
    assert e.value.fields["code"] == "ConditionalRequestConflict"
    assert e.value.fields["outcome_unknown"] is False


def test_5xx_on_create_is_outcome_unknown(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    stub.add_client_error(
        "put_object", "InternalError", http_status_code=500, response_meta={"RetryAttempts": 4}
    )
    with pytest.raises(FileIOError) as e:
        fio.create_if_absent(PATH, b"mine")
    assert type(e.value) is FileIOError
    assert e.value.fields["outcome_unknown"] is True
    assert e.value.fields["status"] == 500


def test_access_denied_and_missing_bucket_are_not_not_found(stubbed: tuple[S3FileIO, Stubber]) -> None:
    fio, stub = stubbed
    stub.add_client_error("get_object", "AccessDenied", http_status_code=403)
    stub.add_client_error("head_object", "403", http_status_code=403)
    stub.add_client_error("get_object", "NoSuchBucket", http_status_code=404)
    stub.add_client_error("get_object", "NoSuchKey", http_status_code=404)
    for call in (fio.read, fio.exists, fio.read):
        with pytest.raises(FileIOError) as e:
            call(PATH)
        assert not isinstance(e.value, FileNotFound)
        assert e.value.path == PATH
    with pytest.raises(FileNotFound):
        fio.read(PATH)


@pytest.mark.parametrize(("status", "code"), [(501, "NotImplemented"), (400, "InvalidArgument")])
def test_probe_treats_a_rejected_header_as_unsupported(
    status: int, code: str, session: boto3.session.Session
) -> None:
    client = _offline_client(session)
    fio = S3FileIO("s3://bkt/w", {}, client=client)
    with Stubber(client) as stub:
        stub.add_client_error("put_object", code, http_status_code=status)
        stub.add_response("delete_object", {})
        assert fio.capabilities.atomic_create is False
        assert fio.capabilities.atomic_create is False  # cached: no further requests
        stub.assert_no_pending_responses()


def _dead_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_network_errors_become_file_io_errors() -> None:
    options = {
        "s3.endpoint": _dead_endpoint(),
        "s3.access-key": "x",
        "s3.secret-key": "x",
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
        "s3.conditional-writes": "true",
        "s3.max-attempts": "1",
        "s3.connect-timeout": "500 ms",
    }
    fio = get_file_io("s3://bkt/w", options)
    calls: list[Callable[[], object]] = [
        lambda: fio.read(PATH),
        lambda: fio.write(PATH, b"x"),
        lambda: fio.exists(PATH),
        lambda: fio.list("s3://bkt/w"),
        lambda: fio.delete(PATH),
    ]
    for call in calls:
        with pytest.raises(FileIOError) as e:
            call()
        assert type(e.value) is FileIOError
        assert isinstance(e.value.__cause__, Exception)
    with pytest.raises(FileIOError) as e:
        fio.create_if_absent(PATH, b"x")
    assert e.value.fields["outcome_unknown"] is True
    probing = get_file_io("s3://bkt/w", {**options, "s3.conditional-writes": "auto"})
    with pytest.raises(FileIOError):
        _ = probing.capabilities


@pytest.mark.parametrize(
    ("options", "unset"),
    [
        ({}, ["s3.endpoint", "s3.region"]),
        ({"s3.endpoint": "http://127.0.0.1:9", "s3.region": "us-east-1"}, []),
    ],
)
def test_missing_credentials_name_the_options(
    options: dict[str, str], unset: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No credentials in the options nor the environment: a typed error naming the option keys, not an
    'outcome unknown' FileIOError (nothing was sent)."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    fio = S3FileIO("s3://bkt/w", {**options, "s3.conditional-writes": "true"})
    calls: list[Callable[[], object]] = [
        lambda: fio.read(PATH),
        lambda: fio.create_if_absent(PATH, b"x"),
        lambda: fio.list("s3://bkt/w"),
    ]
    for call in calls:
        with pytest.raises(StorageOptionsMissingError) as e:
            call()
        assert e.value.fields == {"options": ["s3.access-key", "s3.secret-key"], "uri": e.value.fields["uri"]}
        assert e.value.fields["uri"].startswith("s3://bkt/w")
        _, _, also = str(e.value).partition("not set either: ")
        assert [key for key in ("s3.endpoint", "s3.region") if key in also] == unset


@pytest.mark.parametrize(
    ("options", "bad_key"),
    [
        ({"s3.access-key": "a"}, "s3.access-key"),
        ({"s3.conditional-writes": "maybe"}, "s3.conditional-writes"),
        ({"s3.path-style-access": "yes"}, "s3.path-style-access"),
        ({"s3.path.style.access": "1"}, "s3.path.style.access"),
        ({"s3.max-attempts": "0"}, "s3.max-attempts"),
        ({"s3.read-timeout": "soon"}, "s3.read-timeout"),
        ({"s3.endpoint": "ftp://host"}, "s3.endpoint"),
        ({"s3.endpoint": "https://"}, "s3.endpoint"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], bad_key: str) -> None:
    with pytest.raises(ValidationError) as e:
        S3FileIO("s3://bkt/w", options)
    assert e.value.fields["option"] == bad_key


def test_settings_parse() -> None:
    s = s3_module.S3Settings.from_options(
        {
            "s3.endpoint": "minio:9000",
            "s3.path.style.access": "TRUE",
            "s3.connect-timeout": "2 s",
            "other": "x",
        }
    )
    assert s.endpoint == "https://minio:9000"
    assert s.path_style is True
    assert s.connect_timeout_s == 2.0
    assert s.conditional_writes == "auto"


def test_paths_that_name_no_object_are_rejected() -> None:
    fio = S3FileIO("s3://bkt/w", {"s3.conditional-writes": "false", "s3.region": "us-east-1"})
    for path in ["s3://bkt", "s3://bkt/", "s3://bkt/dir/", "gs://bkt/k", "s3:///k"]:
        for op in (fio.read, fio.delete, lambda p: fio.write(p, b"")):
            with pytest.raises(ValidationError):
                op(path)
