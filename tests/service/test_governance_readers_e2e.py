"""Issue 36 end to end, through a real ``paimon-meta serve``: on a ``query-auth.enabled`` table, a row
filter and a column mask for principal ``analyst`` created through the management routes
(``POST .../policies``) and a column allowlist for ``narrow`` (``POST .../permissions/grant``).

* unmodified pypaimon 2.1.0 reading as ``analyst`` gets only the filtered rows with the column masked,
  and ``boss`` (no policy) every row; paimon-rust 0.4.0 reads every row as ``boss`` and, as ``analyst``,
  refuses to read (it asks ``/auth`` but cannot apply rules, and fails closed: no unfiltered row);
* our ``connect_service`` reader and the Spark data source read exactly the rows pypaimon reads;
* a column outside ``narrow``'s allowlist is refused (pypaimon, paimon-rust, ours), its columns read;
* ``analyst`` gets no data token (403 naming the policy); ``engine``, restricted the same way but named
  by ``serve --trusted-engines``, passes the policy check (this warehouse is local, so the service has
  no credentials to vend and answers 501; tests/service/test_vending.py::
  test_stored_policies_and_column_ranges_refuse_the_data_token vends them on S3).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

import paimon_meta
from paimon_meta import errors
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Assignment, Resource
from paimon_meta.metastore.assignments import Assignments
from paimon_meta.metastore.principals import Principals
from tests.catalog.test_query_auth_reads import EU, MASK_EMAIL, ROWS, SCHEMA
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.postgres, pytest.mark.interop]

#: argv: uri token columns ("" for every one). Prints {"rows": [...]} or {"error": class, "message"}.
PYPAIMON_READ = r"""
import json, sys
from pypaimon import CatalogFactory

uri, token, columns = sys.argv[1:4]
cat = CatalogFactory.create({"metastore": "rest", "uri": uri, "warehouse": "paimon",
                             "token.provider": "bear", "token": token})
try:
    table = cat.get_table("db.t")
    rb = table.new_read_builder()
    if columns:
        rb = rb.with_projection(columns.split(","))
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
else:
    print(json.dumps({"rows": rows}))
"""

#: argv: uri token query. paimon-rust's DataFusion SQL; prints {"rows": [...]} or {"error": message}.
RUST_READ = r"""
import json, sys
import pyarrow as pa
from pypaimon_rust.datafusion import SQLContext

uri, token, query = sys.argv[1:4]
ctx = SQLContext()
ctx.register_catalog("pm", {"metastore": "rest", "uri": uri, "warehouse": "paimon",
                            "token.provider": "bear", "token": token}, default_database="db")
try:
    batches = ctx.sql(query)
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
else:
    print(json.dumps({"rows": pa.Table.from_batches(batches).to_pylist() if batches else []}))
"""

#: What a reader restricted by the filter (region = 'eu') and the mask (email -> '***@' || region) reads.
FILTERED = [
    {"id": 1, "region": "eu", "name": "alice", "email": "***@eu"},
    {"id": 3, "region": "eu", "name": "carol", "email": "***@eu"},
    {"id": 5, "region": "eu", "name": "erin", "email": "***@eu"},
]
EVERYTHING = ROWS.to_pylist()


@dataclass
class Governed:
    url: str
    tokens: dict[str, str]


def principal(catalog: MetastoreCatalog, name: str, privilege: Privilege | None) -> str:
    """A principal with ``privilege`` on the catalog, as ``paimon-meta principals grant`` gives it (the
    grant row and its bundle's assignments); its token."""
    token = make_principal(catalog, name)
    if privilege is not None:
        Principals(catalog.engine).grant(name, privilege, granted_by="tests")
    return token


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


@pytest.fixture
def governed(clean_db: str, tmp_path: Path, service_processes: list[ServiceProcess]) -> Iterator[Governed]:
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        tokens = {
            "admin": principal(catalog, "admin", Privilege.ADMIN),
            **{n: principal(catalog, n, Privilege.READ) for n in ("analyst", "boss", "engine")},
            "narrow": principal(catalog, "narrow", Privilege.READ),
        }
        # delegation is given explicitly (no bundle holds GRANT): the admin may grant column ranges
        grant = Assignment("admin", Resource.catalog_all(), PermissionAccess.GRANT)
        Assignments(catalog.engine, catalog_key=catalog.registry.catalog_key).grant(grant, granted_by="tests")
    server = spawn_service(
        service_processes, clean_db, warehouse, tmp_path, args=["--trusted-engines", "engine"]
    )
    with paimon_meta.connect_service(server.base, token=tokens["admin"]) as ours:
        table = ours.create_table(
            "db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2", "query-auth.enabled": "true"}
        )
        wb = table.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(ROWS)
        wb.new_commit().commit(w.prepare_commit())
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    prefix = httpx.get(f"{server.base}/v1/config", headers=admin).json()["defaults"]["prefix"]
    policies = f"{server.base}/v1/{prefix}/databases/db/tables/t/policies"
    for who in ("analyst", "engine"):
        for body in (
            {"principal": who, "rowFilter": {"predicate": EU}},
            {"principal": who, "columnMask": {"onColumn": "email", "transform": MASK_EMAIL}},
        ):
            created = httpx.post(policies, json=body, headers=admin)
            assert created.status_code == 200, created.text
    column_grant = {
        "resource": {"type": "COLUMN", "database": "db", "table": "t"},
        "access": "SELECT",
        "principal": "narrow",
        "columns": {"columnNames": ["id", "name"]},
    }
    granted = httpx.post(f"{server.base}/v1/{prefix}/permissions/grant", json=column_grant, headers=admin)
    assert granted.status_code == 200, granted.text
    yield Governed(server.base, tokens)


def pypaimon_read(g: Governed, who: str, python: Path, columns: str = "") -> dict[str, Any]:
    result: dict[str, Any] = run_pypaimon(PYPAIMON_READ, g.url, g.tokens[who], columns, python=python)
    return result


def rust_read(g: Governed, who: str, python: Path, query: str = "SELECT * FROM pm.db.t") -> dict[str, Any]:
    result: dict[str, Any] = run_pypaimon(RUST_READ, g.url, g.tokens[who], query, python=python)
    return result


def ours_read(g: Governed, who: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    with paimon_meta.connect_service(g.url, token=g.tokens[who]) as catalog:
        builder = catalog.get_table("db.t").new_read_builder()
        if columns is not None:
            builder = builder.with_projection(columns)
        rows: list[dict[str, Any]] = (
            builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
        )
        return rows


def test_pypaimon_and_our_reader_read_the_filtered_rows_masked(
    governed: Governed, pypaimon_python: Path
) -> None:
    restricted = pypaimon_read(governed, "analyst", pypaimon_python)
    assert by_id(restricted["rows"]) == FILTERED
    assert by_id(ours_read(governed, "analyst")) == by_id(restricted["rows"])
    # a projection without the filter's column: still filtered, the mask still computed from region
    projected = pypaimon_read(governed, "analyst", pypaimon_python, "id,email")
    assert by_id(projected["rows"]) == [{"id": r["id"], "email": r["email"]} for r in FILTERED]
    assert by_id(ours_read(governed, "analyst", ["id", "email"])) == by_id(projected["rows"])
    # no policy: everything
    assert by_id(pypaimon_read(governed, "boss", pypaimon_python)["rows"]) == EVERYTHING
    assert by_id(ours_read(governed, "boss")) == EVERYTHING


def test_paimon_rust_reads_everything_unrestricted_and_refuses_rather_than_leak(
    governed: Governed, rust_python: Path
) -> None:
    """paimon-rust 0.4.0 asks ``/auth`` but cannot apply a filter or a mask: given any, it refuses to
    read (its own fail-closed refusal) rather than return unfiltered rows; given none, it reads."""
    restricted = rust_read(governed, "analyst", rust_python)
    assert "rows" not in restricted, restricted
    assert (
        "query-auth.enabled" in restricted["error"] and "row filter or column masking" in restricted["error"]
    )
    assert by_id(rust_read(governed, "boss", rust_python)["rows"]) == EVERYTHING


def test_a_column_outside_the_allowlist_is_refused(
    governed: Governed, pypaimon_python: Path, rust_python: Path
) -> None:
    allowed = [{"id": r["id"], "name": r["name"]} for r in EVERYTHING]
    assert by_id(pypaimon_read(governed, "narrow", pypaimon_python, "id,name")["rows"]) == allowed
    assert by_id(ours_read(governed, "narrow", ["id", "name"])) == allowed
    refused = pypaimon_read(governed, "narrow", pypaimon_python, "id,email")
    assert refused.get("error") == "TableNoPermissionException", refused
    with pytest.raises(errors.QueryNotAllowedError, match="email"):
        ours_read(governed, "narrow", ["id", "email"])
    # paimon-rust asks /auth for every column (it sends no select): refused whatever it projects
    assert "rows" not in rust_read(governed, "narrow", rust_python, "SELECT id, name FROM pm.db.t")


@pytest.mark.spark
def test_the_spark_data_source_reads_what_pypaimon_reads(
    governed: Governed, pypaimon_python: Path, spark: SparkSession
) -> None:
    import spark_jobs

    spark_jobs.register(spark)
    restricted = pypaimon_read(governed, "analyst", pypaimon_python)
    df = spark.read.format("paimon_meta").options(service=governed.url, token=governed.tokens["analyst"])
    assert by_id([r.asDict() for r in df.load("db.t").collect()]) == by_id(restricted["rows"]) == FILTERED


def test_a_restricted_principal_gets_no_data_token(governed: Governed) -> None:
    def token_of(who: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {governed.tokens[who]}"}
        return httpx.get(f"{governed.url}/v1/paimon/databases/db/tables/t/token", headers=headers)

    refused = token_of("analyst")
    assert refused.status_code == 403, refused.text
    assert "a row filter (of analyst)" in refused.json()["message"]
    assert "a column mask on 'email' (of analyst)" in refused.json()["message"]
    assert "a column range (of narrow)" in token_of("narrow").json()["message"]
    # the trusted engine passes the policy check: only the local warehouse stops it (no credentials)
    trusted = token_of("engine")
    assert trusted.status_code == 501 and "vends no storage credentials" in trusted.json()["message"]
    assert token_of("boss").status_code == 501
