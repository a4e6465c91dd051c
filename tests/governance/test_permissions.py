"""The permission model's values are validated as Java's constructors validate them (pypaimon 2.1.0 and
paimon-rust 0.4.0 copy those rules): locators per resource type, accesses per type, principals, column
lists, expireTime."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import (
    APPLICABLE,
    Access,
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
    format_instant,
    parse_access,
    parse_instant,
    parse_resource_type,
    validate_principal,
)

R, A = ResourceType, Access

# The built-ins per type, as paimon-rust 0.4.0's test_access_built_ins_match_java lists them (sorted).
JAVA_BUILT_INS = {
    "CATALOG": ["ALL", "ALTER", "CREATEDATABASE", "DROP", "GRANT"],
    "CATALOG_ALL": [
        "ALL", "ALTER", "CREATEFUNCTION", "CREATETABLE", "CREATEVIEW", "DESCRIBE", "DROP", "GRANT", "LIST",
        "SELECT", "UPDATE",
    ],
    "DATABASE": [
        "ALL", "ALTER", "CREATEFUNCTION", "CREATETABLE", "CREATEVIEW", "DESCRIBE", "DROP", "GRANT", "LIST",
    ],
    "DATABASE_ALL": ["ALL", "ALTER", "DROP", "GRANT", "SELECT", "UPDATE"],
    "TABLE": ["ALL", "ALTER", "DROP", "GRANT", "SELECT", "UPDATE"],
    "VIEW": ["ALL", "ALTER", "DROP", "GRANT", "SELECT"],
    "FUNCTION": ["ALL", "ALTER", "DROP", "GRANT", "SELECT"],
    "COLUMN": ["SELECT"],
}  # fmt: skip


def test_accesses_per_type_are_javas() -> None:
    assert {
        t.value: sorted(a.value for a in accesses) for t, accesses in APPLICABLE.items()
    } == JAVA_BUILT_INS


@pytest.mark.parametrize(
    ("resource_type", "database", "obj", "error"),
    [
        (R.CATALOG, "d", None, "names no database"),
        (R.CATALOG_ALL, None, "t", "names no table"),
        (R.DATABASE, None, None, "database is required"),
        (R.DATABASE, " ", None, "database is required"),  # Java's blank: up to U+0020
        (R.DATABASE_ALL, "d", "t", "names no table"),
        (R.TABLE, "d", None, "table is required"),
        (R.COLUMN, "d", "", "table is required"),
        (R.VIEW, None, "v", "database is required"),
        (R.FUNCTION, "d", None, "function is required"),
    ],
)
def test_resource_locators_are_those_of_the_type(
    resource_type: ResourceType, database: str | None, obj: str | None, error: str
) -> None:
    with pytest.raises(ValidationError, match=error):
        Resource(resource_type, database, obj)


def test_access_is_canonicalized_and_checked_per_type() -> None:
    assert parse_access("createview", R.DATABASE) is A.CREATEVIEW
    assert parse_access("Select", R.COLUMN) is A.SELECT
    for text, resource_type, error in [
        (" ", R.TABLE, "cannot be empty"),
        ("A" * 33, R.TABLE, "at most 32"),
        ("a/" + "ß" * 16, R.TABLE, "at most 32"),  # 18 code units, 34 once upper-cased
        ("CREATE_TABLE", R.DATABASE, "unknown access"),
        ("SELECT", R.CATALOG, "not valid for CATALOG"),
        ("CREATEDATABASE", R.CATALOG_ALL, "not valid for CATALOG_ALL"),
        ("LIST", R.DATABASE_ALL, "not valid for DATABASE_ALL"),
        ("UPDATE", R.COLUMN, "not valid for COLUMN"),
    ]:
        with pytest.raises(ValidationError, match=error):
            parse_access(text, resource_type)
    assert parse_resource_type("database_all") is R.DATABASE_ALL
    with pytest.raises(ValidationError, match="unknown resource type"):
        parse_resource_type("SCHEMA")


def test_principals_are_opaque_but_bounded() -> None:
    assert validate_principal("role:analyst") == "role:analyst"
    assert validate_principal("x" * 128)
    for bad in ("", " \t", "x" * 129, "😀" * 65):  # 65 emoji are 130 UTF-16 code units
        with pytest.raises(ValidationError, match="principal"):
            validate_principal(bad)


def test_an_assignment_carries_columns_exactly_for_column_resources() -> None:
    table = Resource.table("d", "t")
    with pytest.raises(ValidationError, match="columns is only valid"):
        Assignment("p", table, A.SELECT, columns=ColumnRange.allowlist(["a"]))
    with pytest.raises(ValidationError, match="columns is required"):
        Assignment("p", Resource.column("d", "t"), A.SELECT)
    with pytest.raises(ValidationError, match="not valid for TABLE"):
        Assignment("p", table, A.CREATETABLE)
    a = Assignment("p", Resource.column("d", "t"), A.SELECT, ColumnRange.denylist(["secret"]))
    assert a.identity == (Resource.column("d", "t"), A.SELECT, "p")


@pytest.mark.parametrize(
    ("names", "error"),
    [
        ([], "cannot be empty"),
        (["a", " "], "empty column name"),
        (["a", "a"], "duplicate"),
        ("ab", "not a string"),
    ],
)
def test_column_lists_are_checked(names: object, error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        ColumnRange.allowlist(names)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=error):
        ColumnRange.denylist(names)  # type: ignore[arg-type]


def test_expire_time_is_a_utc_instant_of_at_most_millisecond_precision() -> None:
    assert parse_instant("2027-01-01T00:00:00Z") == datetime(2027, 1, 1, tzinfo=UTC)
    assert parse_instant("2026-09-01T00:00:00.123Z") == datetime(2026, 9, 1, 0, 0, 0, 123000, tzinfo=UTC)
    assert parse_instant("2026-09-01T00:00:00.120000000z").microsecond == 120000
    for bad in (
        "2027-01-01T00:00:00",  # no zone
        "2027-01-01T00:00:00+01:00",  # Java's Instant.parse takes Z only
        "2027-01-01T00:00:00.1234Z",  # below a millisecond
        "2027-02-30T00:00:00Z",
        "tomorrow",
    ):
        with pytest.raises(ValidationError, match="expireTime"):
            parse_instant(bad)
    assert format_instant(datetime(2027, 1, 1, tzinfo=UTC)) == "2027-01-01T00:00:00Z"
    assert format_instant(datetime(2026, 9, 1, 0, 0, 0, 120000, tzinfo=UTC)) == "2026-09-01T00:00:00.120Z"
    with pytest.raises(ValidationError, match="millisecond"):
        Assignment("p", Resource.catalog(), A.ALTER, expire_time=datetime(2027, 1, 1, 0, 0, 0, 1, tzinfo=UTC))
    with pytest.raises(ValidationError, match="instant"):
        Assignment("p", Resource.catalog(), A.ALTER, expire_time=datetime(2027, 1, 1))
