"""``paimon_meta.connect_service``: the library's table API with commits sent to a served catalog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.rest import RestCatalog
from paimon_meta.errors import AccessDeniedError, TableNotFoundError, ValidationError
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("p", pa.string(), nullable=False),
        ("v", pa.string()),
    ]
)


def _rows(keys: list[int], p: str) -> pa.Table:
    return pa.table({"k": pa.array(keys, pa.int64()), "p": [p] * len(keys), "v": [f"v{k}" for k in keys]})


def _keys(catalog: RestCatalog, identifier: str = "db.t") -> list[int]:
    rb = catalog.get_table(identifier).new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())


@pytest.fixture
def served(
    clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]
) -> Iterator[tuple[str, str, str]]:
    """(service URL, writer token, reader token)."""
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        writer = make_principal(catalog, "job", [("admin", None, None)])
        reader = make_principal(catalog, "viewer", [("read", None, None)])
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    yield server.base, writer, reader


def test_write_commit_read_through_the_service(served: tuple[str, str, str]) -> None:
    url, writer, _ = served
    with paimon_meta.connect_service(url, token=writer) as catalog:
        table = catalog.create_table(
            "db.t", SCHEMA, partition_keys=["p"], primary_keys=["k", "p"], options={"bucket": "2"}
        )
        assert catalog.list_databases() == ["db"] and catalog.list_tables("db") == ["t"]
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(_rows([1, 2, 3], "a"))
        assert wb.new_commit().commit(w.prepare_commit()).snapshot_ids == (1,)
        # streaming: exactly once per (user, identifier), and filter_committed for a restart
        sb = catalog.get_table("db.t").new_stream_write_builder().with_commit_user("stream-1")
        sw, sc = sb.new_write(), sb.new_commit()
        sw.write_arrow(_rows([4], "b"))
        messages = sw.prepare_commit()
        assert sc.commit(messages, 7).snapshot_ids == (2,)
        again = sc.commit(messages, 7)
        assert again.deduplicated and again.snapshot_ids == (2,)
        assert sc.filter_committed([6, 7, 8]) == [8]
        # dynamic overwrite of partition a only
        ob = catalog.get_table("db.t").new_batch_write_builder().overwrite()
        ow = ob.new_write()
        ow.write_arrow(_rows([9], "a"))
        ob.new_commit().commit(ow.prepare_commit())
        assert _keys(catalog) == [4, 9]
        history = catalog.commits("db.t")
        assert [c["outcome"] for c in history][:1] == ["published"] and all(
            c["principal"] == "job" for c in history
        )


def test_errors_come_back_typed(served: tuple[str, str, str]) -> None:
    url, writer, reader = served
    with paimon_meta.connect_service(url, token=writer) as catalog:
        catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        with pytest.raises(TableNotFoundError):
            catalog.get_table("db.nope")
    with paimon_meta.connect_service(url, token=reader) as viewer:
        table = viewer.get_table("db.t")
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(_rows([1], "a"))
        with pytest.raises(AccessDeniedError):
            wb.new_commit().commit(w.prepare_commit())
    with pytest.raises(AccessDeniedError):
        paimon_meta.connect_service(url, token="pmt_wrong")
    with pytest.raises(ValidationError):
        paimon_meta.connect(url)  # a service URL is not a database URL
