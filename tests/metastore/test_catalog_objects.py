"""Views and functions in the metastore: concurrent alters lose nothing, a database's objects drop with
it (recorded), name patterns match as ``convert.like_match`` reads them, a view cannot take a table's name
even when both are created at once."""

from __future__ import annotations

import threading
import uuid

import pytest
from sqlalchemy import Engine, insert, text

from paimon_meta.db.models import PaimonTable
from paimon_meta.errors import TableAlreadyExistsError, ViewAlreadyExistsError
from paimon_meta.metastore.catalog_objects import (
    CatalogObjects,
    drop_database_objects,
    lock_object_name,
    name_range,
    view_exists,
)
from paimon_meta.metastore.registry import Registry
from paimon_meta.model.catalog_objects import FunctionSpec, ViewSchema
from paimon_meta.service.convert import like_match

pytestmark = pytest.mark.postgres

SCHEMA = ViewSchema(fields=(), query="SELECT 1")


@pytest.fixture
def objects(clean_engine: Engine) -> CatalogObjects:
    registry = Registry(clean_engine)
    for name in ("db", "db2"):
        registry.create_database(name)
    return CatalogObjects(registry)


def test_concurrent_alters_lose_nothing(objects: CatalogObjects) -> None:
    objects.create_view("db", "v", SCHEMA, principal="p")
    objects.create_function("db", "f", FunctionSpec(), principal="p")
    errors: list[BaseException] = []

    def alter(worker: int) -> None:
        try:
            for i in range(15):
                change = [{"action": "setOption", "key": f"{worker}-{i}", "value": "x"}]
                objects.alter_view("db", "v", change, principal=f"w{worker}")
                objects.alter_function("db", "f", change, principal=f"w{worker}")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=alter, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    view, function = objects.get_view("db", "v"), objects.get_function("db", "f")
    assert len(view.schema.options) == len(function.spec.options) == 60
    assert view.audit.version == function.audit.version == 61


def test_database_objects_drop_with_it(objects: CatalogObjects) -> None:
    for database in ("db", "db2"):
        objects.create_view(database, "v", SCHEMA, principal="p")
        objects.create_function(database, "f", FunctionSpec(), principal="p")
        objects.create_function(database, "g", FunctionSpec(), principal="p")
    with objects.engine.begin() as conn:
        dropped = drop_database_objects(conn, objects.catalog_key, "db", principal="dropper")
    assert dropped == {"view": ["v"], "function": ["f", "g"], "semantic-view": []}
    assert [r.identifier for r in objects.list_views(limit=10)] == ["db2.v"]
    assert [r.identifier for r in objects.list_functions(limit=10)] == ["db2.f", "db2.g"]
    with objects.engine.connect() as conn:
        events = conn.execute(
            text(
                "SELECT object_type, identifier, principal, payload FROM paimon_catalog_object_events "
                "WHERE event_type = 'dropped' ORDER BY event_id"
            )
        ).all()
    assert [(e[0], e[1], e[2]) for e in events] == [
        ("view", "db.v", "dropper"),
        ("function", "db.f", "dropper"),
        ("function", "db.g", "dropper"),
    ]
    assert all(e[3] == {"database_drop": True} for e in events)


@pytest.mark.parametrize(
    "pattern",
    ["v%", "v_", "%1", "a\\%", "a\\_b", "a%b", "", "%", "_", "\u00e9%", "v1"],
)
def test_patterns_match_as_like_match(objects: CatalogObjects, pattern: str) -> None:
    names = ["v1", "v2", "v10", "a%", "a\\x", "a\\_b", "ab", "axxb", "\u00e9t\u00e9", "B", "v"]
    for name in names:
        with objects.engine.begin() as conn:
            # Names outside the identifier pattern, as Java's JdbcCatalog may write them.
            conn.execute(
                text(
                    "INSERT INTO paimon_views (catalog_key, database_name, view_name, view_schema) "
                    "VALUES ('jdbc', 'db', :n, :s)"
                ),
                {"n": name, "s": SCHEMA.to_text()},
            )
    listed = [r.name for r in objects.list_views(database="db", name_pattern=pattern or None, limit=100)]
    expected = sorted(n for n in names if not pattern or like_match(pattern, n))
    assert listed == expected


def test_name_range() -> None:
    assert name_range("ab%c") == ("ab", "ac")
    assert name_range("a_") == ("a", "b")
    assert name_range("%a") is None and name_range(None) is None
    assert name_range("\U0010ffff%") == ("\U0010ffff", None)


def test_a_view_and_a_table_created_at_once(objects: CatalogObjects) -> None:
    # A table create holding the name's lock (as a table create should) is waited for: the view then
    # finds the table and is refused, never both.
    engine = objects.engine
    started = threading.Event()
    outcome: list[BaseException | None] = []
    with engine.begin() as conn:
        lock_object_name(conn, objects.catalog_key, "db", "x")

        def create_view() -> None:
            started.set()
            try:
                objects.create_view("db", "x", SCHEMA, principal="p")
                outcome.append(None)
            except BaseException as e:
                outcome.append(e)

        thread = threading.Thread(target=create_view)
        thread.start()
        started.wait(5)
        thread.join(0.5)
        assert thread.is_alive()  # waiting for the name
        conn.execute(
            insert(PaimonTable).values(
                catalog_key="jdbc",
                database_name="db",
                table_name="x",
                location="/w/db.db/x",
                table_uuid=uuid.uuid4(),
            )
        )
    thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], ViewAlreadyExistsError)
    assert not isinstance(outcome[0], TableAlreadyExistsError)


def test_view_exists(objects: CatalogObjects) -> None:
    objects.create_view("db", "v", SCHEMA, principal="p")
    objects.create_function("db", "f", FunctionSpec(), principal="p")
    with objects.engine.connect() as conn:
        assert view_exists(conn, objects.catalog_key, "db", "v")
        assert not view_exists(conn, objects.catalog_key, "db2", "v")
        assert not view_exists(conn, objects.catalog_key, "db", "f")
        assert not view_exists(conn, "other-key", "db", "v")
