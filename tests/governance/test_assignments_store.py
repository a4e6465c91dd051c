"""The stored permission model (metastore/assignments.py): grant is an upsert by identity, revoke is
idempotent, listings page by a stable key, a subject's assignments include its groups' and roles', every
change is in the governance log, a rename keeps what is bound to the object and a drop removes it, and
``principals grant/revoke`` write the legacy row with its bundle."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from paimon_meta.db.models import Privilege
from paimon_meta.errors import (
    PolicyAlreadyExistsError,
    PolicyNotFoundError,
    PrincipalNotFoundError,
    TableNotFoundError,
    ValidationError,
)
from paimon_meta.governance.bundles import Bundle, bundle_assignments
from paimon_meta.governance.evaluate import decide
from paimon_meta.governance.permissions import Access, Assignment, ColumnRange, Resource
from paimon_meta.metastore.assignments import (
    Assignments,
    Policies,
    governance_events,
)
from paimon_meta.metastore.principals import Principals, revoke_privilege
from paimon_meta.metastore.registry import Registry

pytestmark = pytest.mark.postgres
KEY = "jdbc"


@pytest.fixture
def world(clean_engine: Engine) -> tuple[Engine, Registry, Assignments]:
    registry = Registry(clean_engine, catalog_key=KEY)
    registry.create_database("sales")
    registry.create_table_row("sales", "orders", "file:///w/sales.db/orders", uuid.uuid4(), 0)
    people = Principals(clean_engine)
    for name in ("alice", "bob", "ops"):
        people.create(name)
    return clean_engine, registry, Assignments(clean_engine, catalog_key=KEY, default=True)


def test_grant_upserts_by_identity_and_revoke_is_idempotent(
    world: tuple[Engine, Registry, Assignments],
) -> None:
    engine, _, store = world
    orders = Resource.table("sales", "orders")
    later = datetime(2030, 1, 1, tzinfo=UTC)
    assert store.grant(Assignment("alice", orders, Access.SELECT), granted_by="ops", reason="onboarding")
    # the same identity again: replaced (its expiry), not a second row
    assert not store.grant(
        Assignment("alice", orders, Access.SELECT, expire_time=later), granted_by="ops", reason="until 2030"
    )
    page, token = store.list_page(orders)
    assert token is None and [s.assignment.expire_time for s in page] == [later]
    assert page[0].reason == "until 2030" and page[0].object_id is not None
    # a missing table, principal: not found
    with pytest.raises(TableNotFoundError):
        store.grant(Assignment("alice", Resource.table("sales", "nope"), Access.SELECT), granted_by="ops")
    with pytest.raises(PrincipalNotFoundError):
        store.grant(Assignment("carol", orders, Access.SELECT), granted_by="ops")
    assert store.revoke(orders, Access.SELECT, "alice", revoked_by="ops", reason="left")
    assert not store.revoke(orders, Access.SELECT, "alice", revoked_by="ops")  # idempotent
    assert store.list_page(orders) == ([], None)
    kinds = [
        (e.event_type, e.principal, e.target, e.reason)
        for e in governance_events(engine, subject=str(orders))
    ]
    assert kinds == [
        ("permission_granted", "ops", "alice", "onboarding"),
        ("permission_granted", "ops", "alice", "until 2030"),
        ("permission_revoked", "ops", "alice", "left"),
    ]


def test_list_pages_by_a_stable_key(world: tuple[Engine, Registry, Assignments]) -> None:
    _, _, store = world
    scope = Resource.catalog_all()
    for access in (Access.SELECT, Access.UPDATE, Access.DESCRIBE, Access.LIST, Access.ALTER):
        store.grant(Assignment("bob", scope, access), granted_by="ops")
    seen, token, pages = [], None, 0
    while True:
        page, token = store.list_page(scope, page_token=token, max_results=2)
        seen += [s.assignment.access for s in page]
        pages += 1
        if token is None:
            break
    assert pages == 3 and len(seen) == 5 and len(set(seen)) == 5
    assert [s.assignment.access for s in store.list_page(scope, access=Access.UPDATE)[0]] == [Access.UPDATE]
    assert store.list_page(scope, principal="alice")[0] == []
    with pytest.raises(ValidationError):
        store.list_page(scope, max_results=0)
    with pytest.raises(ValidationError):
        store.list_page(scope, page_token="x")


def test_a_subject_has_its_own_its_groups_and_its_roles(world: tuple[Engine, Registry, Assignments]) -> None:
    engine, _, store = world
    Principals(engine).create_group("analysts")
    role = store.create_role("auditor", created_by="ops")
    assert store.add_member(role, "alice", added_by="ops", reason="audit 2026")
    orders = Resource.table("sales", "orders")
    store.grant(Assignment(role, orders, Access.SELECT), granted_by="ops")
    store.grant(
        Assignment(
            "group:analysts",
            Resource.column("sales", "orders"),
            Access.SELECT,
            ColumnRange.denylist(["email"]),
        ),
        granted_by="ops",
    )
    expired = datetime.now(UTC) - timedelta(seconds=1)
    store.grant(
        Assignment("alice", orders, Access.UPDATE, expire_time=expired.replace(microsecond=0)),
        granted_by="ops",
    )
    loaded = store.of_subject("alice", ["group:analysts"])
    assert set(loaded.subject.memberships) == {"group:analysts", "role:auditor"}
    assert {a.principal for a in loaded.assignments} == {"role:auditor", "group:analysts"}  # expired: gone
    d = decide(loaded.assignments, loaded.subject, orders, Access.SELECT, at=datetime.now(UTC))
    assert d.allowed and d.columns.refused(["id", "email"]) == ["email"]
    assert not decide(loaded.assignments, loaded.subject, orders, Access.UPDATE, at=datetime.now(UTC)).allowed
    # bob is in no role: nothing
    assert store.of_subject("bob").assignments == ()
    assert next(e.event_type for e in governance_events(engine, target="alice")) == "member_added"


def test_rename_keeps_and_drop_removes(world: tuple[Engine, Registry, Assignments]) -> None:
    engine, registry, store = world
    orders = Resource.table("sales", "orders")
    store.grant(Assignment("alice", orders, Access.SELECT), granted_by="ops")
    row = registry.get_table_row("sales", "orders")
    policies = Policies(engine, catalog_key=KEY)
    policies.create(
        row.table_id,
        "sales.orders",
        "alice",
        policy_type="ROW_FILTER",
        on_column=None,
        body="{}",
        created_by="ops",
    )
    registry.rename_table_row("sales", "orders", "sales", "orders2")
    assert store.list_page(orders)[0] == []
    moved = store.list_page(Resource.table("sales", "orders2"))[0]
    assert [s.assignment.principal for s in moved] == ["alice"]
    assert len(policies.of_table(row.table_id)) == 1
    registry.drop_table_row("sales", "orders2")
    assert store.list_page(Resource.table("sales", "orders2"))[0] == []
    assert policies.of_table(row.table_id) == []
    # a new table of the old name gets nothing back
    registry.create_table_row("sales", "orders2", "file:///w/sales.db/orders2b", uuid.uuid4(), 0)
    assert store.list_page(Resource.table("sales", "orders2"))[0] == []
    kinds = [e.event_type for e in governance_events(engine)]
    assert "object_renamed" in kinds and "object_dropped" in kinds


def test_policies_refuse_duplicates_and_absent_drops(world: tuple[Engine, Registry, Assignments]) -> None:
    engine, registry, _ = world
    tid = registry.get_table_row("sales", "orders").table_id
    policies = Policies(engine, catalog_key=KEY)
    make: dict[str, Any] = {"created_by": "ops", "reason": "pii"}
    policies.create(
        tid, "sales.orders", "alice", policy_type="COLUMN_MASKING", on_column="email", body="{}", **make
    )
    policies.create(
        tid, "sales.orders", "alice", policy_type="COLUMN_MASKING", on_column="name", body="{}", **make
    )
    with pytest.raises(PolicyAlreadyExistsError):
        policies.create(
            tid, "sales.orders", "alice", policy_type="COLUMN_MASKING", on_column="email", body="{}", **make
        )
    page, token = policies.list_page(tid, max_results=1)
    assert len(page) == 1 and token is not None
    assert len(policies.list_page(tid, page_token=token)[0]) == 1
    assert [p.on_column for p in policies.list_page(tid, policy_type="COLUMN_MASKING", column="name")[0]] == [
        "name"
    ]
    policies.drop(tid, "sales.orders", "COLUMN_MASKING", "alice", "email", dropped_by="ops", reason="done")
    with pytest.raises(PolicyNotFoundError):
        policies.drop(tid, "sales.orders", "COLUMN_MASKING", "alice", "email", dropped_by="ops")
    kinds = [(e.event_type, e.reason) for e in governance_events(engine, subject="TABLE sales.orders")]
    assert kinds == [("policy_created", "pii"), ("policy_created", "pii"), ("policy_dropped", "done")]


def test_principals_grant_writes_the_row_and_its_bundle(world: tuple[Engine, Registry, Assignments]) -> None:
    engine, _, _ = world
    legacy = Assignments(engine, catalog_key=None)  # the CLI without --catalog: the default catalog
    assert Principals(engine).grant("bob", Privilege.ADMIN, database="sales", granted_by="ops")
    assert Principals(engine).grant("bob", Privilege.READ, database="sales", granted_by="ops")
    held = {a.identity for a in legacy.of_subject("bob").assignments}
    assert held == {a.identity for a in bundle_assignments("bob", Bundle.ADMIN, "sales")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM paimon_grants")).scalar_one() == 2
    # revoking read keeps what admin still gives; revoking admin then removes everything
    assert revoke_privilege(engine, "bob", Privilege.READ, database="sales", revoked_by="ops")
    assert {a.identity for a in legacy.of_subject("bob").assignments} == held
    assert revoke_privilege(engine, "bob", Privilege.ADMIN, database="sales", revoked_by="ops")
    assert legacy.of_subject("bob").assignments == ()
    assert not revoke_privilege(engine, "bob", Privilege.ADMIN, database="sales", revoked_by="ops")
    # the default catalog's store (its key known) reads the rows naming no catalog too
    Principals(engine).grant("bob", Privilege.READ, granted_by="ops")
    assert len(Assignments(engine, catalog_key=KEY, default=True).of_subject("bob").assignments) == 3
    assert Assignments(engine, catalog_key="other", default=False).of_subject("bob").assignments == ()


def test_the_recycle_bin_takes_and_gives_back_a_grants_bundle(
    world: tuple[Engine, Registry, Assignments],
) -> None:
    from paimon_meta.metastore.recycle_bin import RecycleBin

    engine, registry, store = world
    Principals(engine).grant("alice", Privilege.WRITE, database="sales", table="orders", catalog_key=KEY)
    orders = Resource.table("sales", "orders")
    held = {a.identity for a in store.of_subject("alice").assignments}
    assert held == {a.identity for a in bundle_assignments("alice", Bundle.WRITE, "sales", "orders")}
    bin_ = RecycleBin(engine, KEY, default_catalog=True)
    bin_.put("sales", "orders", retention_seconds=3600, dropped_by="ops")
    assert store.list_page(orders)[0] == []  # the drop removed them
    bin_.restore("sales", "orders")
    assert {a.identity for a in store.of_subject("alice").assignments} == held  # the undrop gave them back
    assert all(
        s.object_id == registry.get_table_row("sales", "orders").table_id for s in store.list_page(orders)[0]
    )
