"""A commit service that vends storage credentials, for the clients' tests (Spark jobs, the data source,
the CLI): a real ``paimon-meta serve --sts-role-arn`` on a fresh database, with its warehouse in a fresh
moto S3 bucket. Only the service holds storage keys; the clients get none. Principals: ``etl`` (admin
on database ``shop``) and ``analyst`` (read on ``shop``).

moto does not enforce session policies (what the vended credentials can reach is proven in
tests/io/test_policies.py); what these tests show is that the clients use the credentials at all,
holding no keys of their own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.metastore.access_events import StoredAccessEvent, access_events
from tests.fixtures.s3 import MotoS3
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

ROLE = "arn:aws:iam::123456789012:role/paimon-vending"
#: The AWS SDK's environment variables that would hand a client keys of its own.
AWS_KEY_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")


@dataclass
class VendingRig:
    db: str
    bucket: str
    moto: MotoS3
    server: ServiceProcess
    writer: str  # etl's token
    reader: str  # analyst's token

    @property
    def warehouse(self) -> str:
        return f"s3://{self.bucket}/warehouse"

    def events(self, principal: str | None = None) -> list[StoredAccessEvent]:
        """The access log (newest first), read from the metastore with the test's own keys."""
        catalog = paimon_meta.connect(self.db, self.warehouse, **self.moto.options())
        try:
            return access_events(catalog.engine, principal=principal, limit=1000)
        finally:
            catalog.close()

    def keys(self, prefix: str) -> list[str]:
        client = self.moto.client()
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]


@contextlib.contextmanager
def vending_rig(
    service_processes: list[ServiceProcess],
    clean_db: str,
    moto_server: MotoS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[VendingRig]:
    """The rig, for a test module's fixture (``with vending_rig(...) as rig: yield rig``): the service
    and its bucket, gone afterwards; the AWS SDK's key variables unset meanwhile."""
    for name in AWS_KEY_VARIABLES:  # the clients must hold no keys, from options or the environment
        monkeypatch.delenv(name, raising=False)
    bucket = moto_server.create_bucket()
    warehouse = f"s3://{bucket}/warehouse"
    catalog = paimon_meta.connect(clean_db, warehouse, **moto_server.options(), **FAST_LOCK)
    try:
        writer = make_principal(catalog, "etl", [("admin", "shop", None)])
        catalog.create_database("shop")
        reader = make_principal(catalog, "analyst", [("read", "shop", None)])
    finally:
        catalog.close()
    options = [arg for k, v in moto_server.options().items() for arg in ("-o", f"{k}={v}")]
    server = spawn_service(
        service_processes, clean_db, warehouse, tmp_path, args=["--sts-role-arn", ROLE, *options]
    )
    try:
        yield VendingRig(clean_db, bucket, moto_server, server, writer, reader)
    finally:
        moto_server.drop_bucket(bucket)
