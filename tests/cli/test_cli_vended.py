"""``paimon-meta`` with vended storage credentials: over a service that vends them (a real ``serve
--sts-role-arn`` on moto S3), the commands that open a table's files (``snapshots``, ``read``, ``tags``)
work with no ``-o s3.*``; ``credentials`` shows what the service vends (secrets only on request); and
``events --access`` reads the data-access log from the metastore (refused over a service URL).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.cli import main
from paimon_meta.db.models import AccessLevel
from paimon_meta.metastore.access_events import CredentialsVended, append_vended
from paimon_meta.table.tags import TagManager
from tests.fixtures.vending import VendingRig

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.s3
def test_commands_over_a_vending_service_need_no_storage_options(
    vending: VendingRig, capsys: pytest.CaptureFixture[str]
) -> None:
    with paimon_meta.connect_service(vending.server.base, vending.writer) as remote:
        table = remote.create_table("shop.t", SCHEMA, options={"bucket": "1"})
        for n in range(2):
            wb = table.new_batch_write_builder()
            write = wb.new_write()
            write.write_arrow(pa.table({"k": [n, n + 10], "v": [f"r{n}", "x"]}, schema=SCHEMA))
            wb.new_commit().commit(write.prepare_commit())
            write.close()
        latest = table.snapshot_manager.latest_snapshot()
        assert latest is not None
        TagManager(table.file_io, table.path).create("v1", latest)
    before = len(vending.events("analyst"))

    service = ["--metastore", vending.server.base, "--token", vending.reader]  # and no -o at all
    code, out, err = _run(capsys, *service, "snapshots", "shop.t", "--json")
    assert code == 0, err
    assert [s["snapshot_id"] for s in json.loads(out)] == [1, 2]
    code, out, err = _run(capsys, *service, "read", "shop.t", "--json")
    assert code == 0, err
    assert sorted(r["k"] for r in json.loads(out)) == [0, 1, 10, 11]
    code, out, err = _run(capsys, *service, "tags", "shop.t", "--json")
    assert code == 0, err
    assert json.loads(out) == [{"tag": "v1", "snapshot_id": 2}]
    # Each command fetched the reader's credentials for the table (one process-local catalog each).
    fetched = vending.events("analyst")[: len(vending.events("analyst")) - before]
    assert len(fetched) == 3 and all(e.level == "read" and e.table_identifier == "shop.t" for e in fetched)


@pytest.mark.s3
def test_credentials_show_expiry_level_and_keys_and_secrets_only_on_request(
    vending: VendingRig, capsys: pytest.CaptureFixture[str]
) -> None:
    with paimon_meta.connect_service(vending.server.base, vending.writer) as remote:
        remote.create_table("shop.t", SCHEMA, options={"bucket": "1"})
        # The service hands the same principal the same credentials while half their life is left.
        secret = remote.data_token("shop.t").options["s3.secret-key"]
    writer = ["--metastore", vending.server.base, "--token", vending.writer]

    code, out, err = _run(capsys, *writer, "credentials", "shop.t")
    assert code == 0, err
    assert secret not in out and "s3.secret-key" in out and "(secret: --show-secrets)" in out
    assert vending.moto.endpoint in out  # not a secret: shown
    code, out, err = _run(capsys, *writer, "credentials", "shop.t", "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    assert secret not in out
    assert {"s3.access-key", "s3.secret-key", "s3.session-token", "s3.endpoint"} <= set(data["keys"])
    assert data["options"]["s3.secret-key"] is None and data["level"] == "grant"
    expires = datetime.fromisoformat(data["expires_at"])
    assert timedelta(hours=5) < expires - datetime.now(UTC) <= timedelta(hours=6)  # serve's default 6 h
    assert 5 * 3600 < data["expires_in_seconds"] <= 6 * 3600

    # For eval: the AWS SDK's variables, values quoted for the shell.
    code, out, err = _run(capsys, *writer, "credentials", "shop.t", "--show-secrets")
    assert code == 0, err
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if line.startswith("export ")
    )
    assert exports["AWS_SECRET_ACCESS_KEY"].strip("'") == secret
    assert {"AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"} <= set(exports)

    reader = ["--metastore", vending.server.base, "--token", vending.reader]
    code, out, err = _run(capsys, *reader, "credentials", "shop.t", "--access", "read", "--json")
    assert code == 0, err
    assert json.loads(out)["level"] == "read"
    code, out, err = _run(capsys, *reader, "credentials", "shop.t", "--access", "write")
    assert code == 4 and "no UPDATE on TABLE shop.t" in err
    assert [e.level for e in vending.events("analyst")] == ["read"]  # the refused one vended nothing
    # Over the database there is nothing to vend: said plainly.
    code, out, err = _run(capsys, "--metastore", vending.db, "credentials", "shop.t")
    assert code == 2 and "commit service" in err


def test_events_access_reads_the_access_log_from_the_metastore(
    clean_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with paimon_meta.connect(clean_db, str(tmp_path / "wh")) as catalog:
        ids = {}
        for name in ("shop.t", "shop.u"):
            catalog.create_table(name, SCHEMA)
            ids[name] = catalog.registry.get_table_row("shop", name.split(".")[1]).table_id
        expires = datetime.now(UTC) + timedelta(hours=6)
        for principal, table, level in [
            ("etl", "shop.t", AccessLevel.WRITE),
            ("analyst", "shop.t", AccessLevel.READ),
            ("etl", "shop.u", AccessLevel.WRITE),
        ]:
            append_vended(
                catalog.engine,
                CredentialsVended(
                    principal,
                    ids[table],
                    table,
                    level,
                    ["s3:GetObject"],
                    expires,
                    {"session_name": f"pm-{principal}", "cached": False},
                ),
            )
    db = ["--metastore", clean_db, "--warehouse", str(tmp_path / "wh")]

    def rows(*argv: str) -> list[dict[str, Any]]:
        code, out, err = _run(capsys, *db, "events", "--access", *argv, "--json")
        assert code == 0, err
        return list(json.loads(out))

    every = rows()
    assert [(r["principal"], r["table_identifier"], r["level"]) for r in every] == [
        ("etl", "shop.u", "write"),
        ("analyst", "shop.t", "read"),
        ("etl", "shop.t", "write"),
    ]
    assert every[0]["session_name"] == "pm-etl" and every[0]["cached"] is False
    assert [r["principal"] for r in rows("--table", "shop.t")] == ["analyst", "etl"]
    assert [r["table_identifier"] for r in rows("--principal", "etl")] == ["shop.u", "shop.t"]
    assert [r["table_identifier"] for r in rows("--principal", "etl", "--table", "shop.t")] == ["shop.t"]
    assert len(rows("--limit", "1")) == 1
    code, out, err = _run(capsys, *db, "events", "--access")
    assert code == 0 and "pm-analyst" in out and "principal" in out

    code, _, err = _run(capsys, *db, "events", "--principal", "etl")
    assert code == 2 and "--access" in err
    # By name: a table with no vends (or never registered) has an empty history, not an error, and a
    # dropped table's history stays readable under its name.
    assert rows("--table", "shop.nope") == []
    with paimon_meta.connect(clean_db, str(tmp_path / "wh")) as dropping:
        dropping.drop_table("shop.t")
    assert [r["principal"] for r in rows("--table", "shop.t")] == ["analyst", "etl"]
    # Only the metastore holds the log: refused over a service URL before anything is sent.
    code, _, err = _run(capsys, "--metastore", "http://127.0.0.1:9", "--token", "t", "events", "--access")
    assert code != 0 and "needs a database URL" in err and "events --access" in err
