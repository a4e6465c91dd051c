"""The io_options the Spark jobs hand executors when the commit service vends storage credentials: taken
from the service (the job's own options hold no keys), fetched again once stale, taken anew for each
micro-batch; the job's own options (never the vended ones) for storage outside the table, with an error
that says so. Without vending, the job's own options, as before. No Spark here (see test_vended_jobs.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.catalog.vended import DataToken, VendedFileIO
from paimon_meta.errors import FileIOError, StorageOptionsMissingError
from spark_jobs import streaming_write
from spark_jobs.cli_args import open_service_table, open_target, outside_table_storage
from spark_jobs.common import TableHandle
from spark_jobs.datasource.target import SourceOptions, current_handle
from spark_jobs.datasource.target import open_target as open_source_target
from tests.fixtures.s3 import MotoS3
from tests.fixtures.vending import VendingRig
from tests.spark.helpers import SCHEMA, append_table

VENDED_KEYS = {"s3.access-key", "s3.secret-key", "s3.session-token"}


@pytest.mark.postgres
@pytest.mark.s3
def test_io_options_are_the_vended_ones_and_fetched_again_when_stale(vending: VendingRig) -> None:
    with paimon_meta.connect_service(vending.server.base, vending.writer) as remote:
        remote.create_table("shop.t", SCHEMA, partition_keys=["p"], options={"bucket": "1"})

    opened = open_service_table(vending.server.base, vending.writer, "shop.t", {})
    try:
        assert opened.vends and opened.options == {}  # the job's own options: no keys
        io = opened.table.file_io
        assert isinstance(io, VendedFileIO)
        first = opened.io_options
        assert set(first) >= VENDED_KEYS and first["s3.endpoint"] == vending.moto.endpoint
        assert TableHandle.of(opened.table, opened.fresh_io_options).io_options == first
        fetches = io.fetches
        assert opened.io_options == first and io.fetches == fetches  # fresh enough: no new fetch

        # Ten minutes left of a six-hour lifetime: the next set of tasks must not get these.
        token = io.token()
        now = time.time()
        io._token = DataToken(token.options, int((now + 600) * 1000), now - 6 * 3600 + 600)
        vends = len(vending.events("etl"))
        again = opened.io_options
        assert io.fetches == fetches + 1
        assert len(vending.events("etl")) == vends + 1  # one more GET .../token, in the access log
        assert set(again) >= VENDED_KEYS
        assert not io.token().stale()
    finally:
        opened.close()


@pytest.mark.postgres
@pytest.mark.s3
def test_a_data_source_task_on_stale_credentials_fetches_fresh_ones(vending: VendingRig) -> None:
    with paimon_meta.connect_service(vending.server.base, vending.writer) as remote:
        remote.create_table("shop.t", SCHEMA, partition_keys=["p"], options={"bucket": "1"})
    opts = SourceOptions.parse({"path": "shop.t", "service": vending.server.base, "token": vending.writer})
    opened = open_source_target(opts)
    try:
        handle = TableHandle.of(opened.table, opened.fresh_io_options)
    finally:
        opened.close()
    assert handle.expires_at_millis is not None and not handle.stale()
    vends = len(vending.events("etl"))
    assert current_handle(handle, opts) is handle  # fresh enough: the task asks nothing
    assert len(vending.events("etl")) == vends

    # A task starting with ten minutes left (a streaming query's writer, built at its start, hours ago).
    now = time.time()
    old = dataclasses.replace(handle, expires_at_millis=int((now + 600) * 1000), fetched_at=now - 6 * 3600)
    assert old.stale()
    fresh = current_handle(old, opts)
    assert not fresh.stale() and fresh.expires_at_millis is not None
    assert fresh.expires_at_millis > int((now + 600) * 1000)
    assert set(fresh.io_options) >= VENDED_KEYS and fresh.path == handle.path
    assert len(vending.events("etl")) == vends + 1
    # Not through a service: nothing to fetch from, the handle as it is.
    assert current_handle(old, SourceOptions.parse({"path": "s3://b/wh/shop.db/t"})) is old


def test_without_vending_io_options_are_the_jobs_own(tmp_path: Path) -> None:
    append_table(str(tmp_path / "wh"))
    location = str(tmp_path / "wh" / "db.db" / "t")
    args = argparse.Namespace(table_path=location, option=["s3.region=eu-west-1"])
    opened = open_target(args)
    assert not opened.vends
    assert opened.io_options == opened.options == {"s3.region": "eu-west-1"}
    source = open_source_target(SourceOptions.parse({"path": location, "s3.region": "eu-west-1"}))
    assert not source.vends and source.io_options == {"s3.region": "eu-west-1"}
    handle = TableHandle.of(opened.table, opened.fresh_io_options)
    assert handle.expires_at_millis is None and not handle.stale()


def test_each_micro_batch_takes_the_options_of_its_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = append_table(str(tmp_path / "wh"))
    handed: list[dict[str, str]] = []

    def write_messages(df: Any, handle: TableHandle, *args: Any, **kwargs: Any) -> list[Any]:
        handed.append(dict(handle.io_options))
        return []

    monkeypatch.setattr(streaming_write, "write_messages", write_messages)
    monkeypatch.setattr(
        streaming_write, "commit_batch", lambda *args: argparse.Namespace(snapshot_ids=(), deduplicated=False)
    )
    calls = iter(range(100))
    sink = streaming_write.PaimonBatchSink(
        table, "user", io_options=lambda: {"s3.session-token": f"token-{next(calls)}"}
    )
    sink._recovered = True  # no filter_committed round (nothing was committed)
    df: Any = None
    for batch_id in range(3):
        sink(df, batch_id)
    assert handed == [{"s3.session-token": f"token-{i}"} for i in range(3)]


def test_a_checkpoint_the_jobs_own_options_cannot_reach_is_named_as_such(
    moto_server: MotoS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No credentials anywhere the AWS SDK looks (and no instance-metadata lookup).
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    own = {k: v for k, v in moto_server.options().items() if k not in ("s3.access-key", "s3.secret-key")}
    checkpoint = "s3://pm-checkpoints/stream-1"

    with pytest.raises(StorageOptionsMissingError, match="checkpoint location s3://pm-checkpoints") as e:
        streaming_write.checkpoint_commit_user(checkpoint, own, table_vends=True)
    assert "vends for the table" in str(e.value) and e.value.fields["uri"] == checkpoint
    # Without vending the store's own error is the clearer one: unchanged.
    with pytest.raises(StorageOptionsMissingError) as plain:
        streaming_write.checkpoint_commit_user(checkpoint, own, table_vends=False)
    assert "vends" not in str(plain.value)

    # Credentials of its own that storage refuses: named too; other storage errors pass unchanged.
    where = ("s3://b/ckpt/a", "commit attempts directory")
    with (
        pytest.raises(StorageOptionsMissingError, match="commit attempts directory"),
        outside_table_storage(*where, table_vends=True),
    ):
        raise FileIOError("S3 put failed (AccessDenied, HTTP 403)", code="AccessDenied")
    with pytest.raises(FileIOError, match="SlowDown"), outside_table_storage(*where, table_vends=True):
        raise FileIOError("S3 put failed (SlowDown, HTTP 503)", code="SlowDown")
