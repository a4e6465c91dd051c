"""Vended credentials enforced end to end: a real ``serve --sts-role-arn`` on the IAM-enforcing moto of
tests/io/iam_moto.py (in its own process; it intersects a session policy with the role's as AWS does,
which stock moto does not), with the role shaped as in production (everything in the warehouse; the
session policy narrows each vend to one table).

* Unmodified pypaimon 2.1.0 holding no storage keys creates, writes, commits and reads a table through
  the credentials the service vends, when the service grants pyarrow's ``create_dir`` its extra actions
  (``--sts-pyarrow-create-dir``); without them its first write is refused by storage (measured here,
  documented in docs/CREDENTIALS.md) while its reads work.
* A reader's vended credentials read the table and are refused a PUT in it and any read of a sibling
  table; a writer's are refused outside its table.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import paimon_meta
from tests.fixtures.interop import PypaimonScriptError, run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.io.iam_moto import IamMoto, IamMotoUnavailable, start_iam_moto
from tests.io.test_policies import _unavailable
from tests.service.test_vended_clients import PYPAIMON_WRITE

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.interop]

BUCKET = "pm-enforced"


@pytest.fixture(scope="module")
def iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IamMoto]:
    try:
        server = start_iam_moto(tmp_path_factory.mktemp("iam-moto") / "decisions.jsonl")
    except IamMotoUnavailable as e:
        _unavailable(str(e))
    try:
        server.s3().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.stop()


def _warehouse_role(iam: IamMoto, prefix: str) -> str:
    """What an operator grants the vending role: everything under the warehouse, listing the bucket
    (pyarrow's HeadBucket needs it unconditioned; the session policy narrows each vend)."""
    return iam.role_with_policy(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3:*", "Resource": [f"arn:aws:s3:::{BUCKET}/{prefix}/*"]},
                {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{BUCKET}"},
            ],
        }
    )


@dataclass
class Rig:
    server: ServiceProcess
    writer: str
    reader: str
    iam: IamMoto

    def token(self, token: str, table: str) -> dict[str, str]:
        answer = httpx.get(
            f"{self.server.base}/v1/paimon/databases/shop/tables/{table}/token",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        answer.raise_for_status()
        vended: dict[str, str] = answer.json()["token"]
        return vended


def _rig(iam: IamMoto, started: list[ServiceProcess], db: str, tmp: Path, *extra: str) -> Rig:
    prefix = f"warehouse-{tmp.name[-12:]}"
    warehouse = f"s3://{BUCKET}/{prefix}"
    options = iam.admin.s3_options(iam.endpoint)
    catalog = paimon_meta.connect(db, warehouse, **options, **FAST_LOCK)
    try:
        writer = make_principal(catalog, "etl", [("admin", "shop", None)])
        reader = make_principal(catalog, "analyst", [("read", "shop", None)])
        catalog.create_database("shop")
    finally:
        catalog.close()
    args = ["--sts-role-arn", _warehouse_role(iam, prefix), *extra]
    args += [a for k, v in options.items() for a in ("-o", f"{k}={v}")]
    return Rig(spawn_service(started, db, warehouse, tmp, args=args), writer, reader, iam)


@pytest.fixture
def rig(iam: IamMoto, service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path) -> Rig:
    return _rig(iam, service_processes, clean_db, tmp_path, "--sts-pyarrow-create-dir")


def test_pypaimon_round_trip_under_enforced_table_credentials(rig: Rig, pypaimon_python: Path) -> None:
    since = rig.iam.mark()
    out: dict[str, Any] = run_pypaimon(
        PYPAIMON_WRITE, rig.server.base, rig.writer, python=pypaimon_python, timeout=300
    )
    assert sorted(r["id"] for r in out["rows"]) == [b * 10 + i for b in range(3) for i in range(4)]
    # The requests were made with a vended session (the trace names it) and none was refused.
    sessions = {d.principal for d in rig.iam.decisions(since) if "assumed-role" in d.principal}
    assert any("pm-write-etl" in s for s in sessions), sessions
    denied = [d for d in rig.iam.decisions(since) if "pm-write-etl" in d.principal and not d.allowed]
    assert denied == []


def test_a_readers_credentials_read_and_are_refused_writes(rig: Rig, pypaimon_python: Path) -> None:
    run_pypaimon(PYPAIMON_WRITE, rig.server.base, rig.writer, python=pypaimon_python, timeout=300)
    vended = rig.token(rig.reader, "t")
    from paimon_meta.errors import FileIOError
    from paimon_meta.io import get_file_io

    location = httpx.get(
        f"{rig.server.base}/v1/paimon/databases/shop/tables/t",
        headers={"Authorization": f"Bearer {rig.reader}"},
        timeout=30,
    ).json()["path"]
    io = get_file_io(location, vended)
    assert io.exists(f"{location}/snapshot/snapshot-1")
    assert io.list(f"{location}/snapshot")
    with pytest.raises(FileIOError) as refused:
        io.write(f"{location}/bucket-0/forged.parquet", b"x")
    assert "403" in str(refused.value) or "AccessDenied" in str(refused.value)
    with pytest.raises(FileIOError):
        io.delete(f"{location}/snapshot/snapshot-1")
    # The writer's credentials do not reach a sibling table's prefix.
    writer = get_file_io(location, rig.token(rig.writer, "t"))
    sibling = location.rsplit("/", 1)[0] + "/t2/snapshot/snapshot-1"
    with pytest.raises(FileIOError):
        writer.write(sibling, b"x")


def test_without_the_create_dir_grant_pypaimon_writes_are_refused(
    iam: IamMoto,
    service_processes: list[ServiceProcess],
    clean_db: str,
    tmp_path: Path,
    pypaimon_python: Path,
) -> None:
    """The cost of the strict default, measured: pyarrow's HeadBucket is refused and the write fails."""
    rig = _rig(iam, service_processes, clean_db, tmp_path)
    since = iam.mark()
    with pytest.raises(PypaimonScriptError) as failed:
        run_pypaimon(PYPAIMON_WRITE, rig.server.base, rig.writer, python=pypaimon_python, timeout=300)
    assert "ACCESS_DENIED" in str(failed.value) or "AccessDenied" in str(failed.value)
    denied = [d for d in iam.decisions(since) if "pm-write-etl" in d.principal and not d.allowed]
    assert denied and all(d.action in ("s3:ListBucket", "s3:PutObject") for d in denied), denied
