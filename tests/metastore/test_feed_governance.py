"""Governance events (grants, revocations, policies, memberships; issue 36 item 2) are the change feed's
fourth log: in (txid, log, event id) order with the commits of their catalog, resumable, scoped to their
catalog (a row naming none: the default catalog's), kept by ``kind=governance``, and visible by the rule
of ``metastore.feed.may_see_governance`` (GRANT reaching the resource; a membership: GRANT on the
catalog; never because the caller is the target)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Assignment, Resource
from paimon_meta.metastore.assignments import Assignments, Policies
from paimon_meta.metastore.feed import (
    EVERY,
    GOVERNANCE,
    START,
    FeedFilter,
    Lanes,
    Position,
    Reach,
    cloud_event,
    governed_resource,
    lanes_for,
    may_see_governance,
    read_feed,
)
from paimon_meta.metastore.principals import Access, Principals
from tests.fixtures.postgres import isolated_metastore
from tests.fixtures.service import FAST_LOCK

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])
KEY = "jdbc"
ROW_FILTER = '{"predicate": {"type": "leaf", "function": "EQUAL", "field": "k", "literals": [1]}}'


def _write(catalog: MetastoreCatalog, identifier: str, keys: list[int]) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(pa.table({"k": pa.array(keys, pa.int64())}))
    commit.commit(write.prepare_commit())
    write.close()


def _access(people: Principals, token: str) -> Access:
    found = people.authenticate(token)
    assert found is not None
    return found.in_catalog(KEY, default=True)


def _table_id(catalog: MetastoreCatalog, identifier: str) -> int:
    database, table = identifier.split(".")
    row = catalog.registry.get_table_row(database, table)
    return int(row.table_id)


def test_governance_events_are_ordered_with_commits_scoped_and_resumable(
    clean_db: str, tmp_path: Path
) -> None:
    catalog = paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK)
    try:
        engine = catalog.engine
        catalog.create_table("db.t", SCHEMA)
        catalog.create_table("db.u", SCHEMA)
        people = Principals(engine)
        for name in ("alice", "ops"):
            people.create(name, created_by="tests")
        store = Assignments(engine, catalog_key=KEY, default=True)
        elsewhere = Assignments(engine, catalog_key="other", default=False)
        _write(catalog, "db.t", [1])
        t = Resource.table("db", "t")
        assert store.grant(Assignment("alice", t, A.SELECT), granted_by="ops", reason="onboarding")
        _write(catalog, "db.t", [2])
        Policies(engine, catalog_key=KEY).create(
            _table_id(catalog, "db.t"),
            "db.t",
            "alice",
            policy_type="ROW_FILTER",
            on_column=None,
            body=ROW_FILTER,
            created_by="ops",
        )
        assert store.revoke(t, A.SELECT, "alice", revoked_by="ops", reason="offboarding")
        _write(catalog, "db.u", [3])
        # another catalog's grant (its key names it, must_exist off: it has no such table)
        elsewhere.grant(
            Assignment("alice", Resource.table("x", "y"), A.SELECT), granted_by="ops", must_exist=False
        )
        # a role's membership names no catalog: the default catalog's
        roles = Assignments(engine, catalog_key=None)
        role = roles.create_role("auditors", created_by="ops")
        roles.add_member(role, "alice", added_by="ops", reason="audit")

        everything, end = read_feed(engine, catalog_key=KEY, limit=1000)
        positions = [e.position for e in everything]
        assert positions == sorted(set(positions)) and end == positions[-1]
        story = [
            (e.log, e.kind, e.subject)
            for e in everything
            if e.kind in ("snapshot_published",) or e.log == "governance"
        ]
        assert story == [
            ("commit", "snapshot_published", "db.t"),
            ("governance", "permission_granted", "TABLE db.t"),
            ("commit", "snapshot_published", "db.t"),
            ("governance", "policy_created", "TABLE db.t"),
            ("governance", "permission_revoked", "TABLE db.t"),
            ("commit", "snapshot_published", "db.u"),
        ]
        granted = next(e for e in everything if e.kind == "permission_granted")
        assert granted.position.rank == GOVERNANCE and granted.principal == "ops"
        assert granted.data["target"] == "alice" and granted.data["reason"] == "onboarding"
        assert granted.data["payload"]["access"] == "SELECT"
        ce = cloud_event(granted, "paimon")
        assert ce["type"] == "org.paimon.governance.permission_granted" and ce["subject"] == "TABLE db.t"
        assert ce["data"]["principal"] == "ops" and ce["data"]["target"] == "alice"
        assert ce["data"]["reason"] == "onboarding" and ce["data"]["log"] == "governance"
        # the membership (no catalog) is the default catalog's only
        assert not any(e.kind == "member_added" for e in everything)
        as_default, _ = read_feed(engine, catalog_key=KEY, default=True, limit=1000)
        added = [e for e in as_default if e.kind == "member_added"]
        # the role's creation (no target), then alice's membership
        assert [(e.subject, e.data.get("target"), e.data.get("reason")) for e in added] == [
            ("role:auditors", None, None),
            ("role:auditors", "alice", "audit"),
        ]
        # the other catalog's feed has its grant and none of ours
        other, _ = read_feed(engine, catalog_key="other", limit=1000)
        assert [(e.kind, e.subject) for e in other] == [("permission_granted", "TABLE x.y")]

        # kind=governance keeps the governance log; an event type keeps that type
        governance, _ = read_feed(engine, catalog_key=KEY, keep=FeedFilter(kinds=("governance",)))
        assert [e.kind for e in governance] == ["permission_granted", "policy_created", "permission_revoked"]
        revoked, _ = read_feed(engine, catalog_key=KEY, keep=FeedFilter(kinds=("permission_revoked",)))
        assert [e.subject for e in revoked] == ["TABLE db.t"]
        # a table filter keeps table events only
        only_t, _ = read_feed(engine, catalog_key=KEY, keep=FeedFilter(subject="db.t"))
        assert only_t and {e.log for e in only_t} <= {"commit", "lock"}

        # pages of 2 resumed from each last position: the same events once each, across all four logs
        paged, cursor = [], START
        while True:
            page, cursor = read_feed(engine, catalog_key=KEY, after=cursor, limit=2)
            if not page:
                break
            paged += page
        assert paged == everything
        # resuming right after a governance event gives what follows it
        after, _ = read_feed(engine, catalog_key=KEY, after=granted.position, limit=1000)
        assert after == everything[everything.index(granted) + 1 :]
        assert Position.parse(granted.position.token()) == granted.position
    finally:
        catalog.close()


def test_who_may_see_a_governance_event(clean_db: str, tmp_path: Path) -> None:
    catalog = paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK)
    try:
        engine = catalog.engine
        catalog.create_table("db.t", SCHEMA)
        catalog.create_table("db.u", SCHEMA)
        people = Principals(engine)
        tokens = {
            n: people.create(n, created_by="tests") for n in ("root", "owner", "alter", "reader", "alice")
        }
        store = Assignments(engine, catalog_key=KEY, default=True)
        t, u = Resource.table("db", "t"), Resource.table("db", "u")
        for assignment in (
            Assignment("root", Resource.catalog_all(), A.GRANT),
            Assignment("owner", t, A.GRANT),
            Assignment("alter", t, A.ALTER),
            Assignment("reader", Resource.catalog_all(), A.SELECT),
        ):
            store.grant(assignment, granted_by="tests")
        store.grant(Assignment("alice", t, A.SELECT), granted_by="ops", reason="onboarding")
        store.grant(Assignment("alice", u, A.SELECT), granted_by="ops")
        Policies(engine, catalog_key=KEY).create(
            _table_id(catalog, "db.t"),
            "db.t",
            "alice",
            policy_type="ROW_FILTER",
            on_column=None,
            body=ROW_FILTER,
            created_by="ops",
        )
        roles = Assignments(engine, catalog_key=None)
        roles.add_member(roles.create_role("auditors", created_by="ops"), "alice", added_by="ops")
        events, _ = read_feed(engine, catalog_key=KEY, default=True, keep=FeedFilter(kinds=("governance",)))
        about = {(e.kind, e.subject, e.data.get("target")): e for e in events}
        grant_t = about[("permission_granted", "TABLE db.t", "alice")]
        grant_u = about[("permission_granted", "TABLE db.u", "alice")]
        policy_t = about[("policy_created", "TABLE db.t", "alice")]
        member = about[("member_added", "role:auditors", "alice")]
        assert governed_resource(grant_t) == t and governed_resource(member) is None

        def sees(name: str) -> set[str]:
            access = _access(people, tokens[name])
            return {
                label
                for label, e in (("t", grant_t), ("u", grant_u), ("policy", policy_t), ("member", member))
                if may_see_governance(access, e)
            }

        assert sees("root") == {"t", "u", "policy", "member"}  # GRANT on the whole catalog
        assert sees("owner") == {"t", "policy"}  # GRANT reaching db.t only
        assert sees("alter") == {"policy"}  # ALTER on db.t: its policies, not its grants
        assert sees("reader") == set()  # SELECT everywhere is not governance
        assert sees("alice") == set()  # the target of every one of them sees none
    finally:
        catalog.close()


def test_the_governance_lane_is_read_only_when_it_can_return_something() -> None:
    reader = Reach(catalog=True)  # SELECT everywhere, no GRANT/ALTER/ALL anywhere
    granter = Reach(catalog=False, tables=frozenset({("db", "t")}), governs=True)
    assert lanes_for(FeedFilter(), reader) == Lanes(every=True)
    assert lanes_for(FeedFilter(), granter) == Lanes(subjects=("db.t",), governance=True)
    assert lanes_for(FeedFilter(), None) == EVERY and EVERY.governance
    # kind=governance (or a governance event type) reads the governance log alone
    for kind in ("governance", "permission_granted"):
        assert lanes_for(FeedFilter(kinds=(kind,)), granter) == Lanes(governance=True)
        assert lanes_for(FeedFilter(kinds=(kind,)), reader).empty
    # a table's kinds, or a table or database filter, read no governance event
    assert lanes_for(FeedFilter(kinds=("snapshot_published",)), granter) == Lanes(subjects=("db.t",))
    assert lanes_for(FeedFilter(subject="db.t"), granter) == Lanes(subjects=("db.t",))
    assert not lanes_for(FeedFilter(database="db"), granter).governance
