"""Functions: unmodified pypaimon 2.1.0 against a real ``paimon-meta serve`` (create, get, list paged,
globally and with details, alter, drop, and the exceptions it raises from our 404/409 bodies), and the
function-specific refusals over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.fixtures.interop import run_pypaimon
from tests.fixtures.service import FAST_LOCK, ServiceProcess, in_process_client, make_principal, spawn_service
from tests.service.helpers import P, auth

pytestmark = pytest.mark.postgres

#: argv: uri token. Every function call of pypaimon 2.1.0's RESTCatalog, printed as JSON.
FUNCTIONS_SNIPPET = r"""
import json, sys
from pypaimon import CatalogFactory
from pypaimon.catalog.catalog_exception import (
    DatabaseNotExistException, DefinitionAlreadyExistException, DefinitionNotExistException,
    FunctionAlreadyExistException, FunctionNotExistException)
from pypaimon.common.identifier import Identifier
from pypaimon.function.function import FunctionImpl
from pypaimon.function.function_change import FunctionChange
from pypaimon.function.function_definition import FunctionDefinition, FunctionFileResource
from pypaimon.schema.data_types import AtomicType, DataField

cat = CatalogFactory.create({"metastore": "rest", "uri": sys.argv[1], "warehouse": "paimon",
                             "token.provider": "bear", "token": sys.argv[2]})
out = {}

def raises(kind, call):
    try:
        call()
    except kind:
        return kind.__name__
    except Exception as e:
        return "unexpected " + type(e).__name__ + ": " + str(e)
    return "nothing raised"

def walk(page):
    names, token, pages = [], None, 0
    while True:
        result = page(token)
        names += [e if isinstance(e, str) else e.name() if hasattr(e, "name") else e.get_full_name()
                  for e in result.elements]
        pages += 1
        token = result.next_page_token
        if not token:
            return names, pages

cat.create_database("fdb", False)
cat.create_database("gdb", False)
ident = lambda db, name: Identifier.create(db, name)
square = FunctionImpl(
    ident("fdb", "square"),
    input_params=[DataField(0, "x", AtomicType("INT"))],
    return_params=[DataField(0, "y", AtomicType("BIGINT"))],
    deterministic=True,
    definitions={"spark": FunctionDefinition.sql("x * x"),
                 "flink": FunctionDefinition.file([FunctionFileResource("jar", "s3://b/f.jar")], "java",
                                                   "com.example.Square", "eval")},
    comment="squares", options={"k": "v"})
cat.create_function(ident("fdb", "square"), square)
for i in range(5):
    name = "f%d" % i
    cat.create_function(ident("fdb", name), FunctionImpl(ident("fdb", name),
        definitions={"py": FunctionDefinition.lambda_def("lambda x: x", "python")}))
cat.create_function(ident("gdb", "f0"), FunctionImpl(ident("gdb", "f0")))

got = cat.get_function(ident("fdb", "square"))
out["got"] = {"inputs": [(p.id, p.name, str(p.type)) for p in got.input_params()],
              "returns": [(p.id, p.name, str(p.type)) for p in got.return_params()],
              "deterministic": got.is_deterministic(), "comment": got.comment(), "options": got.options(),
              "definitions": {k: v.to_dict() for k, v in got.definitions().items()}}
out["create_twice"] = raises(FunctionAlreadyExistException,
                             lambda: cat.create_function(ident("fdb", "f0"), square))
out["create_twice_ignored"] = cat.create_function(ident("fdb", "f0"), square, True) is None
out["create_no_db"] = raises(DatabaseNotExistException,
                             lambda: cat.create_function(ident("nodb", "f"), square))
out["get_missing"] = raises(FunctionNotExistException, lambda: cat.get_function(ident("fdb", "nope")))
out["list_no_db"] = raises(DatabaseNotExistException, lambda: cat.list_functions("nodb"))

out["list"] = cat.list_functions("fdb")
out["paged"] = walk(lambda t: cat.list_functions_paged("fdb", 2, t))
out["pattern"] = walk(lambda t: cat.list_functions_paged("fdb", 2, t, "f%"))
out["details"] = walk(lambda t: cat.list_function_details_paged("fdb", 4, t, "f%"))
out["global"] = walk(lambda t: cat.list_functions_paged_globally(None, "f%", 3, t))
out["global_db"] = walk(lambda t: cat.list_functions_paged_globally("gdb", None, 3, t))

cat.alter_function(ident("fdb", "square"), [
    FunctionChange.set_option("k2", "v2"), FunctionChange.remove_option("k"),
    FunctionChange.update_comment("squares ints"),
    FunctionChange.add_definition("trino", FunctionDefinition.sql("x * x")),
    FunctionChange.update_definition("spark", FunctionDefinition.sql("pow(x, 2)")),
    FunctionChange.drop_definition("flink")])
altered = cat.get_function(ident("fdb", "square"))
out["altered"] = {"comment": altered.comment(), "options": altered.options(),
                  "definitions": {k: v.to_dict() for k, v in altered.definitions().items()}}
out["add_existing"] = raises(DefinitionAlreadyExistException, lambda: cat.alter_function(
    ident("fdb", "square"), [FunctionChange.add_definition("trino", FunctionDefinition.sql("x"))]))
out["update_missing"] = raises(DefinitionNotExistException, lambda: cat.alter_function(
    ident("fdb", "square"), [FunctionChange.update_definition("hive", FunctionDefinition.sql("x"))]))
out["alter_missing"] = raises(FunctionNotExistException, lambda: cat.alter_function(
    ident("fdb", "nope"), [FunctionChange.set_option("a", "b")]))

cat.drop_function(ident("fdb", "f4"))
out["dropped_get"] = raises(FunctionNotExistException, lambda: cat.get_function(ident("fdb", "f4")))
out["drop_missing"] = raises(FunctionNotExistException, lambda: cat.drop_function(ident("fdb", "f4")))
out["drop_missing_ignored"] = cat.drop_function(ident("fdb", "f4"), True) is None
out["after_drop"] = cat.list_functions("fdb")
print(json.dumps(out))
"""


@pytest.mark.interop
def test_pypaimon_functions_against_serve(
    service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path, pypaimon_python: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        token = make_principal(catalog, "fn-admin", [("admin", None, None)])
        server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
        out = run_pypaimon(FUNCTIONS_SNIPPET, server.base, token, python=pypaimon_python)

        assert out["got"] == {
            "inputs": [[0, "x", "INT"]],
            "returns": [[0, "y", "BIGINT"]],
            "deterministic": True,
            "comment": "squares",
            "options": {"k": "v"},
            "definitions": {
                "spark": {"type": "sql", "definition": "x * x"},
                "flink": {
                    "type": "file",
                    "fileResources": [{"resourceType": "jar", "uri": "s3://b/f.jar"}],
                    "language": "java",
                    "className": "com.example.Square",
                    "functionName": "eval",
                },
            },
        }
        for key, exception in (
            ("create_twice", "FunctionAlreadyExistException"),
            ("create_no_db", "DatabaseNotExistException"),
            ("get_missing", "FunctionNotExistException"),
            ("list_no_db", "DatabaseNotExistException"),
            ("add_existing", "DefinitionAlreadyExistException"),
            ("update_missing", "DefinitionNotExistException"),
            ("alter_missing", "FunctionNotExistException"),
            ("dropped_get", "FunctionNotExistException"),
            ("drop_missing", "FunctionNotExistException"),
        ):
            assert out[key] == exception, (key, out[key])
        assert out["create_twice_ignored"] and out["drop_missing_ignored"]
        fs = ["f0", "f1", "f2", "f3", "f4"]
        assert out["list"] == [*fs, "square"]
        assert out["paged"] == [[*fs, "square"], 3]
        assert out["pattern"] == [fs, 3]
        assert out["details"] == [fs, 2]
        assert out["global"] == [[f"fdb.{f}" for f in fs] + ["gdb.f0"], 2]
        assert out["global_db"] == [["gdb.f0"], 1]
        assert out["altered"] == {
            "comment": "squares ints",
            "options": {"k2": "v2"},
            "definitions": {
                "spark": {"type": "sql", "definition": "pow(x, 2)"},
                "trino": {"type": "sql", "definition": "x * x"},
            },
        }
        assert out["after_drop"] == [*fs[:4], "square"]

        with catalog.engine.connect() as conn:
            version = conn.execute(
                text("SELECT version FROM paimon_functions WHERE function_name = 'square'")
            ).scalar_one()
            events = conn.execute(
                text(
                    "SELECT event_type, identifier, version, principal FROM paimon_catalog_object_events "
                    "WHERE object_type = 'function' AND identifier IN ('fdb.square', 'fdb.f4') "
                    "ORDER BY event_id"
                )
            ).all()
        assert version == 2
        assert [tuple(e) for e in events] == [
            ("created", "fdb.square", 1, "fn-admin"),
            ("created", "fdb.f4", 1, "fn-admin"),
            ("altered", "fdb.square", 2, "fn-admin"),
            ("dropped", "fdb.f4", 1, "fn-admin"),
        ]
    finally:
        catalog.close()


# ---- over HTTP: what pypaimon cannot send ---------------------------------------------------------------


@pytest.fixture
def client(service_catalog: MetastoreCatalog) -> Iterator[TestClient]:
    service_catalog.create_database("db")
    service_catalog.create_database("db2")
    with in_process_client(service_catalog) as c:
        yield c


def _error(response: Any, status: int, resource_type: str | None = None, name: str | None = None) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == status and body["resourceType"] == resource_type, body
    if name is not None:
        assert body["resourceName"] == name, body
    return str(body["message"])


def test_function_refusals_and_grants(client: TestClient, service_catalog: MetastoreCatalog) -> None:
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    reader = auth(make_principal(service_catalog, "reader", [("read", "db", None)]))
    functions = f"{P}/databases/db/functions"
    sql = {"type": "sql", "definition": "x + 1"}
    assert (
        client.post(functions, json={"name": "inc", "definitions": {"spark": sql}}, headers=admin).status_code
        == 200
    )
    assert client.post(f"{P}/databases/db2/functions", json={"name": "g"}, headers=admin).status_code == 200
    _error(client.post(functions, json={"name": "inc"}, headers=admin), 409, "FUNCTION", "inc")
    # Definitions are one of the spec's three kinds; names are identifiers.
    bad: dict[str, Any] = {"name": "f", "definitions": {"spark": {"type": "python", "definition": "x"}}}
    assert "definitions.spark.type" in _error(client.post(functions, json=bad, headers=admin), 400)
    bad = {"name": "f", "inputParams": [{"id": 0, "name": "x", "type": "NOPE"}]}
    assert "inputParams[0]" in _error(client.post(functions, json=bad, headers=admin), 400)
    assert "function" in _error(client.post(functions, json={"name": "a/b"}, headers=admin), 400)
    unknown = [{"action": "renameFunction", "newName": "x"}]
    assert "renameFunction" in _error(
        client.post(f"{functions}/inc", json={"changes": unknown}, headers=admin), 400
    )
    drop = [{"action": "dropDefinition", "name": "hive"}]
    _error(client.post(f"{functions}/inc", json={"changes": drop}, headers=admin), 404, "DEFINITION", "hive")
    _error(client.delete(f"{functions}/nope", headers=admin), 404, "FUNCTION", "nope")
    _error(client.get(f"{P}/databases/nope/function-details", headers=admin), 404, "DATABASE")
    got = client.get(f"{functions}/inc", headers=admin).json()
    assert (
        got["definitions"] == {"spark": sql} and got["inputParams"] is None and got["deterministic"] is False
    )
    assert got["owner"] == got["createdBy"] == "admin" and len(got["uuid"]) == 36

    # Grants: read on db lists and reads its functions only; changes need admin.
    assert client.get(functions, headers=reader).json() == {"functions": ["inc"], "nextPageToken": None}
    assert client.get(f"{P}/functions", headers=reader).json()["functions"] == [
        {"database": "db", "object": "inc"}
    ]
    _error(client.get(f"{P}/databases/db2/functions/g", headers=reader), 403, "FUNCTION")
    _error(client.post(functions, json={"name": "mine"}, headers=reader), 403, "DATABASE")
    _error(client.post(f"{functions}/inc", json={"changes": []}, headers=reader), 403, "FUNCTION")
    _error(client.delete(f"{functions}/inc", headers=reader), 403, "FUNCTION")


def test_function_names_may_hold_dots(client: TestClient, service_catalog: MetastoreCatalog) -> None:
    """Paimon's ``RESTFunctionValidator`` (and pypaimon's pattern): letters, digits, ``.``, ``_``, ``-``
    with a letter; a dotted name is one path segment, pages resume after it."""
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    functions = f"{P}/databases/db/functions"
    for name in ("ns.fn", "ns.fn2", "v1.2-x"):
        assert client.post(functions, json={"name": name}, headers=admin).status_code == 200, name
    assert client.get(f"{functions}/ns.fn", headers=admin).json()["name"] == "ns.fn"
    first = client.get(functions, params={"maxResults": 1}, headers=admin).json()
    assert first == {"functions": ["ns.fn"], "nextPageToken": "ns.fn"}
    rest = client.get(functions, params={"maxResults": 5, "pageToken": "ns.fn"}, headers=admin).json()
    assert rest == {"functions": ["ns.fn2", "v1.2-x"], "nextPageToken": None}
    everywhere = client.get(f"{P}/functions", params={"maxResults": 1}, headers=admin).json()
    assert everywhere["nextPageToken"] == "db.ns.fn"
    more = client.get(f"{P}/functions", params={"pageToken": "db.ns.fn"}, headers=admin).json()
    assert [f["object"] for f in more["functions"]] == ["ns.fn2", "v1.2-x"]
    for bad in ("1.2", "a b", ".."):
        assert "function" in _error(client.post(functions, json={"name": bad}, headers=admin), 400)
    assert client.delete(f"{functions}/ns.fn", headers=admin).status_code == 200
