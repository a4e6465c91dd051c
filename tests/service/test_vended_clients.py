"""Clients holding no storage keys, on a warehouse in (moto) S3, through a real ``paimon-meta serve
--sts-role-arn``: unmodified pypaimon 2.1.0 and our own ``connect_service`` create, write, commit and
read tables with only the credentials the service vends, fetched once per table and lifetime rather
than per commit; a reader's credentials come with no write grant (its commit is refused, and asking for
write credentials is refused).

moto does not enforce session policies, so what the credentials can reach is proven separately, with
the same policy documents enforced through a role (tests/io/test_policies.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.catalog.rest import connect_service
from paimon_meta.catalog.vended import VendedFileIO
from paimon_meta.errors import AccessDeniedError
from paimon_meta.table.table import FileStoreTable
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.vending import VendingRig

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.interop]

ROLE = "arn:aws:iam::123456789012:role/paimon-vending"


def _read(table: FileStoreTable) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


#: argv: uri token. pypaimon with NO storage options: creates shop.t, commits 3 batches, reads them.
PYPAIMON_WRITE = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

cat = CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                             "token.provider": "bear", "token": sys.argv[2]})
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
cat.create_table("shop.t", Schema.from_pyarrow_schema(schema, options={"bucket": "2", "bucket-key": "id"}),
                 False)
table = cat.get_table("shop.t")
for b in range(3):
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    rows = [{"id": b * 10 + i, "v": f"{b}-{i}"} for i in range(4)]
    w.write_arrow(pa.Table.from_pylist(rows, schema=schema))
    c.commit(w.prepare_commit())
    w.close(); c.close()
rb = table.new_read_builder()
rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
print(json.dumps({"rows": rows, "options": sorted(k for k in cat.context.options.to_map())}))
"""

#: argv: uri token. A reader: reads shop.t; then tries to commit a batch (refused by the service).
PYPAIMON_READ_THEN_WRITE = r"""
import json, sys
import pyarrow as pa
from pypaimon import CatalogFactory

cat = CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                             "token.provider": "bear", "token": sys.argv[2]})
table = cat.get_table("shop.t")
rb = table.new_read_builder()
rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
refused = None
try:
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    w.write_arrow(pa.Table.from_pylist([{"id": 999, "v": "x"}], schema=schema))
    c.commit(w.prepare_commit())
except Exception as e:
    refused = f"{type(e).__name__}: {e}"
print(json.dumps({"rows": len(rows), "refused": refused}))
"""


def test_pypaimon_with_no_storage_keys_writes_and_reads_through_vended_credentials(
    vending: VendingRig, pypaimon_python: Path
) -> None:
    out: dict[str, Any] = run_pypaimon(
        PYPAIMON_WRITE, vending.server.base, vending.writer, python=pypaimon_python, timeout=300
    )
    assert sorted(r["id"] for r in out["rows"]) == [b * 10 + i for b in range(3) for i in range(4)]
    # The client was given no storage option; the server's config turned data tokens on.
    assert not [k for k in out["options"] if k.startswith(("s3.", "fs.s3."))]
    assert vending.keys("warehouse/shop.db/t/bucket-")  # its data files are in the bucket
    # Vended once for the table (pypaimon caches per identifier until an hour before expiry), not per
    # commit: 3 commits, a read, one STS session.
    events = vending.events("etl")
    assert events and all(e.table_identifier == "shop.t" and e.level == "write" for e in events)
    assert [e.payload["cached"] for e in events].count(False) == 1
    assert len(events) <= 2, [e.payload for e in events]

    read: dict[str, Any] = run_pypaimon(
        PYPAIMON_READ_THEN_WRITE, vending.server.base, vending.reader, python=pypaimon_python, timeout=300
    )
    assert read["rows"] == 12
    # pypaimon 2.1.0 retries a refused commit as if it conflicted, then raises ("Commit failed ...
    # commit conflicts"): the service answered each attempt 403 (logged with the principal).
    assert read["refused"] is not None
    refusals = [line for line in vending.server.log_tail(400).splitlines() if "/commit" in line]
    assert refusals and all("forbidden" in line and "analyst" in line for line in refusals), refusals
    # the analyst's access events: its vend, and its refused commits (commit_refused, AUDIT.md)
    [vend] = [e for e in vending.events("analyst") if e.event_type == "credentials_vended"]
    assert vend.level == "read" and "s3:PutObject" not in vend.actions
    # Still 12 rows: the reader's commit did not land.
    with connect_service(vending.server.base, vending.writer) as remote:
        assert _read(remote.get_table("shop.t")).num_rows == 12


def test_connect_service_with_no_storage_keys_uses_vended_credentials(vending: VendingRig) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
    with connect_service(vending.server.base, vending.writer) as remote:
        assert remote.client.data_token_enabled
        table = remote.create_table("shop.ours", schema, options={"bucket": "1"})
        assert isinstance(table.file_io, VendedFileIO)
        for n in range(4):
            wb = table.new_batch_write_builder()
            write, commit = wb.new_write(), wb.new_commit()
            write.write_arrow(pa.table({"k": [n], "v": [f"r{n}"]}, schema=schema))
            commit.commit(write.prepare_commit())
            write.close()
        assert sorted(_read(remote.get_table("shop.ours")).column("k").to_pylist()) == [0, 1, 2, 3]
        # What executors get: the vended map over the client's (empty) options.
        options = remote.table_io_options("shop.ours")
        assert {"s3.access-key", "s3.secret-key", "s3.session-token", "s3.endpoint"} <= set(options)
        assert table.file_io.fetches == 1
    events = vending.events("etl")
    assert [e.table_identifier for e in events] == ["shop.ours"]  # one fetch for 4 commits and reads

    with connect_service(vending.server.base, vending.reader) as remote:
        assert _read(remote.get_table("shop.ours")).num_rows == 4
        with pytest.raises(AccessDeniedError, match=r"no UPDATE on TABLE shop\.ours"):
            remote.data_token("shop.ours", access="write")
        # Read credentials, by the grant (the access log below says which level was vended).
        assert {"s3.access-key", "s3.secret-key", "s3.session-token"} <= set(
            remote.data_token("shop.ours").keys
        )
    assert [e.level for e in vending.events("analyst")] == ["read", "read"]
