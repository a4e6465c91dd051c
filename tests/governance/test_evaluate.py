"""The one evaluation (``governance.evaluate.decide``), table-driven: every scope x every access it takes
x every object x every access the object takes, against a reach table written out by hand; then expiry,
groups, column ranges, scopes reaching objects created later, and delegation."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.governance.evaluate import Subject, decide, may_grant, may_revoke, sees
from paimon_meta.governance.permissions import (
    APPLICABLE,
    Access,
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
)

R, A = ResourceType, Access
NOW = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
ME = Subject("alice")

CATALOG = Resource.catalog()
D1, D2 = Resource.of_database("d1"), Resource.of_database("d2")
T11, T12, T21 = Resource.table("d1", "t1"), Resource.table("d1", "t2"), Resource.table("d2", "t1")
V11, F11 = Resource.view("d1", "v1"), Resource.function("d1", "f1")
V21, F21 = Resource.view("d2", "v1"), Resource.function("d2", "f1")
OBJECTS = [CATALOG, D1, D2, T11, T12, T21, V11, F11, V21, F21]
#: Scopes checked as a whole ("all of d1's tables, those created later too").
SCOPES = [Resource.catalog_all(), Resource.database_all("d1"), Resource.database_all("d2")]

#: What an assignment on each scope reaches, written out object by object (the rules of
#: governance/evaluate.py's docstring, restated as data).
REACH: dict[Resource, set[Resource]] = {
    CATALOG: {CATALOG},
    Resource.catalog_all(): {D1, D2, T11, T12, T21, V11, F11, V21, F21, *SCOPES},
    D1: {D1},
    D2: {D2},
    Resource.database_all("d1"): {T11, T12, V11, F11, SCOPES[1]},
    Resource.database_all("d2"): {T21, V21, F21, SCOPES[2]},
    T11: {T11},
    T12: {T12},
    T21: {T21},
    Resource.column("d1", "t1"): {T11},  # SELECT only
    V11: {V11},
    F11: {F11},
    V21: {V21},
    F21: {F21},
}


def _expected(scope: Resource, granted: Access, target: Resource, checked: Access) -> bool:
    if target not in REACH[scope]:
        return False
    if scope.type is R.COLUMN:
        return checked is A.SELECT
    return granted is checked or granted is A.ALL


def _assignment(scope: Resource, access: Access, principal: str = "alice", **kw: object) -> Assignment:
    columns = ColumnRange.allowlist(["a"]) if scope.type is R.COLUMN else None
    return Assignment(principal, scope, access, columns, **kw)  # type: ignore[arg-type]


CASES = [
    (scope, granted, target, checked)
    for scope in REACH
    for granted in sorted(APPLICABLE[scope.type])
    for target in [*OBJECTS, *SCOPES]
    for checked in sorted(APPLICABLE[target.type])
]


def test_the_table_covers_every_type_and_access() -> None:
    assert {s.type for s in REACH} == set(R)
    assert len(CASES) > 3000


def test_every_scope_access_object_and_access() -> None:
    wrong = []
    for scope, granted, target, checked in CASES:
        d = decide([_assignment(scope, granted)], ME, target, checked, at=NOW)
        if d.allowed != _expected(scope, granted, target, checked):
            wrong.append((str(scope), granted.value, str(target), checked.value, d.reason))
        if d.allowed:
            assert d.because and str(d.because[0]) in d.reason
        else:
            assert not d.because and f"no {checked.value} on {target}" in d.reason
    assert not wrong, wrong[:20]


def test_nothing_is_allowed_without_an_assignment_and_others_assignments_do_not_count() -> None:
    everything = [_assignment(scope, a, principal="bob") for scope in REACH for a in APPLICABLE[scope.type]]
    for target in OBJECTS:
        for access in APPLICABLE[target.type]:
            assert not decide([], ME, target, access, at=NOW).allowed
            assert not decide(everything, ME, target, access, at=NOW).allowed
            assert decide(everything, Subject("bob"), target, access, at=NOW).allowed


def test_a_check_names_one_access_on_one_object_or_scope() -> None:
    with pytest.raises(ValidationError, match="ask SELECT on the table"):
        decide([], ME, Resource.column("d1", "t1"), A.SELECT, at=NOW)
    with pytest.raises(ValidationError, match="does not apply"):
        decide([], ME, T11, A.CREATETABLE, at=NOW)


def test_scopes_reach_objects_created_later() -> None:
    later_table, later_view = Resource.table("d1", "created_later"), Resource.view("d1", "later_view")
    later_db = Resource.of_database("created_later")
    db_all = [_assignment(Resource.database_all("d1"), A.SELECT)]
    assert decide(db_all, ME, later_table, A.SELECT, at=NOW).allowed
    assert decide(db_all, ME, later_view, A.SELECT, at=NOW).allowed
    assert not decide(db_all, ME, Resource.table("created_later", "t"), A.SELECT, at=NOW).allowed
    cat_all = [_assignment(Resource.catalog_all(), A.DESCRIBE), _assignment(Resource.catalog_all(), A.UPDATE)]
    assert decide(cat_all, ME, later_db, A.DESCRIBE, at=NOW).allowed
    assert decide(cat_all, ME, Resource.table("created_later", "t"), A.UPDATE, at=NOW).allowed
    # an exact assignment does not: a table named like a dropped one is another table (the store binds
    # assignments to the object's identity; here only its name is seen)
    assert not decide([_assignment(T11, A.SELECT)], ME, later_table, A.SELECT, at=NOW).allowed


def test_expiry_is_an_exclusive_bound() -> None:
    until = NOW + timedelta(seconds=1)
    grant = [_assignment(T11, A.SELECT, expire_time=until)]
    assert decide(grant, ME, T11, A.SELECT, at=NOW).allowed
    assert decide(grant, ME, T11, A.SELECT, at=until - timedelta(milliseconds=1)).allowed
    refused = decide(grant, ME, T11, A.SELECT, at=until)
    assert not refused.allowed and "expired" in refused.reason and "2026-09-01T12:00:01Z" in refused.reason
    assert not decide(grant, ME, T11, A.SELECT, at=until + timedelta(days=1)).allowed
    # another, unexpired assignment still gives it
    both = [*grant, _assignment(Resource.database_all("d1"), A.ALL)]
    assert decide(both, ME, T11, A.SELECT, at=until).allowed


def test_groups_and_roles_apply_their_assignments() -> None:
    grants = [
        _assignment(T11, A.UPDATE, principal="group:eng"),
        _assignment(D1, A.LIST, principal="role:ops"),
    ]
    member = Subject("user:alice", ("group:eng", "role:ops"))
    assert decide(grants, member, T11, A.UPDATE, at=NOW).allowed
    assert decide(grants, member, D1, A.LIST, at=NOW).allowed
    assert "group:eng" in decide(grants, member, T11, A.UPDATE, at=NOW).reason
    assert not decide(grants, Subject("user:alice"), T11, A.UPDATE, at=NOW).allowed
    assert not decide(grants, Subject("user:alice", ("group:other",)), D1, A.LIST, at=NOW).allowed
    assert not decide(grants, Subject("group:engineering"), T11, A.UPDATE, at=NOW).allowed


def _columns(range_: ColumnRange, principal: str = "alice", **kw: object) -> Assignment:
    return Assignment(principal, Resource.column("d1", "t1"), A.SELECT, range_, **kw)  # type: ignore[arg-type]


def test_column_ranges_intersect_across_the_subjects_assignments() -> None:
    cols = ["a", "b", "c", "d"]
    select = _assignment(T11, A.SELECT)
    cases = [
        ([select], ["a", "b", "c", "d"]),  # no range: every column, those added later too
        ([select, _columns(ColumnRange.allowlist(["a", "b", "c"]))], ["a", "b", "c"]),
        ([_columns(ColumnRange.allowlist(["a", "b", "c"]))], ["a", "b", "c"]),  # a range alone gives SELECT
        (
            [
                _columns(ColumnRange.allowlist(["a", "b", "c"])),
                _columns(ColumnRange.allowlist(["b", "c", "d"]), principal="group:g"),
            ],
            ["b", "c"],
        ),
        (
            [_columns(ColumnRange.allowlist(["a", "b"])), _columns(ColumnRange.denylist(["b"]), "group:g")],
            ["a"],
        ),
        (
            [select, _columns(ColumnRange.denylist(["a"])), _columns(ColumnRange.denylist(["d"]), "group:g")],
            ["b", "c"],
        ),
        # an expired range no longer applies (it neither gives SELECT nor narrows it)
        (
            [select, _columns(ColumnRange.allowlist(["a"]), expire_time=NOW)],
            ["a", "b", "c", "d"],
        ),
    ]
    subject = Subject("alice", ("group:g",))
    for assignments, allowed in cases:
        d = decide(assignments, subject, T11, A.SELECT, at=NOW)
        assert d.allowed
        assert [c for c in cols if d.columns.permits(c)] == allowed, assignments
        assert d.columns.refused(cols) == [c for c in cols if c not in allowed]
    # allowlists deny columns added later, denylists allow them
    assert not decide(cases[1][0], subject, T11, A.SELECT, at=NOW).columns.permits("added_later")
    assert decide(cases[5][0], subject, T11, A.SELECT, at=NOW).columns.permits("added_later")
    # a range on one table says nothing about another, nor gives anything but SELECT
    assert (
        decide([select, _columns(ColumnRange.allowlist(["a"]))], ME, T12, A.SELECT, at=NOW).allowed is False
    )
    assert decide([_columns(ColumnRange.allowlist(["a"]))], ME, T11, A.UPDATE, at=NOW).allowed is False
    ranged = [_assignment(Resource.catalog_all(), A.SELECT), _columns(ColumnRange.allowlist(["a"]))]
    assert decide(ranged, ME, T12, A.SELECT, at=NOW).columns.is_full
    assert decide(ranged, ME, T11, A.SELECT, at=NOW).columns.refused(cols) == ["b", "c", "d"]


def test_listings_see_databases_the_subject_holds_anything_in() -> None:
    assert sees([_assignment(T11, A.SELECT)], ME, "d1", NOW)
    assert not sees([_assignment(T11, A.SELECT)], ME, "d2", NOW)
    assert sees([_assignment(Resource.catalog_all(), A.LIST)], ME, "any", NOW)
    assert not sees([_assignment(CATALOG, A.CREATEDATABASE)], ME, "d1", NOW)
    assert not sees([_assignment(D1, A.DESCRIBE, expire_time=NOW)], ME, "d1", NOW)


def test_delegation_needs_grant_and_holding_what_is_given() -> None:
    give = Assignment("bob", T11, A.SELECT)
    holder = [_assignment(T11, A.SELECT)]
    assert not may_grant(holder, ME, give, at=NOW).allowed  # no GRANT
    assert "no GRANT" in may_grant(holder, ME, give, at=NOW).reason
    granter = [_assignment(T11, A.GRANT)]
    assert not may_grant(granter, ME, give, at=NOW).allowed  # does not hold SELECT
    assert may_grant([*holder, *granter], ME, give, at=NOW).allowed
    assert may_grant(granter, ME, Assignment("bob", T11, A.GRANT), at=NOW).allowed
    # ALL needs every access of the object
    every = [_assignment(T11, a) for a in (A.SELECT, A.UPDATE, A.ALTER, A.GRANT)]
    assert not may_grant(every, ME, Assignment("bob", T11, A.ALL), at=NOW).allowed
    assert may_grant([*every, _assignment(T11, A.DROP)], ME, Assignment("bob", T11, A.ALL), at=NOW).allowed
    # a wider scope's GRANT reaches narrower resources, not wider ones
    db_all = [_assignment(Resource.database_all("d1"), A.ALL)]
    assert may_grant(db_all, ME, give, at=NOW).allowed
    assert may_grant(db_all, ME, Assignment("bob", Resource.database_all("d1"), A.SELECT), at=NOW).allowed
    assert not may_grant(db_all, ME, Assignment("bob", Resource.catalog_all(), A.SELECT), at=NOW).allowed
    assert not may_grant(db_all, ME, Assignment("bob", T21, A.SELECT), at=NOW).allowed
    # revoking needs GRANT only
    assert may_revoke(granter, ME, T11, at=NOW).allowed
    assert not may_revoke(holder, ME, T11, at=NOW).allowed
    assert may_revoke(granter, ME, Resource.column("d1", "t1"), at=NOW).allowed


def test_column_ranges_are_delegated_only_within_the_delegators_own() -> None:
    table_cols = ["a", "b", "c"]
    mine = [_assignment(T11, A.GRANT), _columns(ColumnRange.allowlist(["a", "b"]))]

    def grant(r: ColumnRange) -> bool:
        g = Assignment("bob", Resource.column("d1", "t1"), A.SELECT, r)
        return may_grant(mine, ME, g, at=NOW, table_columns=table_cols).allowed

    assert grant(ColumnRange.allowlist(["a"]))
    assert grant(ColumnRange.allowlist(["a", "b"]))
    assert not grant(ColumnRange.allowlist(["a", "c"]))
    assert not grant(ColumnRange.denylist(["c"]))  # would reach columns added later
    full = [
        _assignment(T11, A.GRANT),
        _assignment(T11, A.SELECT),
        _columns(ColumnRange.denylist(["c", "later"])),
    ]
    ok = Assignment("bob", Resource.column("d1", "t1"), A.SELECT, ColumnRange.denylist(["c", "later"]))
    leaky = Assignment("bob", Resource.column("d1", "t1"), A.SELECT, ColumnRange.denylist(["c"]))
    assert may_grant(full, ME, ok, at=NOW, table_columns=table_cols).allowed
    assert not may_grant(full, ME, leaky, at=NOW, table_columns=table_cols).allowed


@pytest.mark.parametrize(
    ("a", "b"), list(itertools.combinations(["allow:a,b", "allow:b,c", "deny:a", "deny:c", "full"], 2))
)
def test_range_intersection_is_commutative_and_narrows(a: str, b: str) -> None:
    def parse(spec: str) -> ColumnRange:
        if spec == "full":
            return ColumnRange()
        kind, names = spec.split(":")
        return (ColumnRange.allowlist if kind == "allow" else ColumnRange.denylist)(names.split(","))

    ra, rb = parse(a), parse(b)
    both = ra.intersect(rb)
    assert both == rb.intersect(ra)
    for c in ["a", "b", "c", "later"]:
        assert both.permits(c) == (ra.permits(c) and rb.permits(c))
