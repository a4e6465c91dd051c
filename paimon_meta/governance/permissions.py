"""Paimon's permission model (apache/paimon ``org.apache.paimon.management``, as pypaimon 2.1.0 and
paimon-rust 0.4.0 send it): resources, accesses, column ranges and assignments, validated as Java's
constructors validate them.

* A :class:`Resource` is a catalog object (``CATALOG``, ``DATABASE``, ``TABLE``, ``VIEW``, ``FUNCTION``)
  or a scope: ``CATALOG_ALL`` (every database, table, view and function of the catalog, those created
  later included), ``DATABASE_ALL`` (every table, view and function of one database, likewise) and
  ``COLUMN`` (the columns of one table; the range travels in the assignment).
* An :class:`Access` applies to the resource types of :data:`APPLICABLE` (Java's ``PermissionAccess``
  built-ins); ``ALL`` is every access applicable to the resource it reaches.
* An :class:`Assignment` gives one access on one resource to one principal, until ``expire_time``
  (exclusive). Its identity is ``(resource, access, principal)``; ``columns`` is required exactly for
  ``COLUMN`` assignments.

The evaluation (who may do what) is :mod:`paimon_meta.governance.evaluate`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from paimon_meta.errors import ValidationError


class ResourceType(enum.StrEnum):
    CATALOG = "CATALOG"
    CATALOG_ALL = "CATALOG_ALL"
    DATABASE = "DATABASE"
    DATABASE_ALL = "DATABASE_ALL"
    TABLE = "TABLE"
    COLUMN = "COLUMN"
    VIEW = "VIEW"
    FUNCTION = "FUNCTION"


class Access(enum.StrEnum):
    ALL = "ALL"
    CREATEDATABASE = "CREATEDATABASE"
    DESCRIBE = "DESCRIBE"
    ALTER = "ALTER"
    DROP = "DROP"
    CREATETABLE = "CREATETABLE"
    CREATEFUNCTION = "CREATEFUNCTION"
    CREATEVIEW = "CREATEVIEW"
    LIST = "LIST"
    SELECT = "SELECT"
    UPDATE = "UPDATE"
    GRANT = "GRANT"


R, A = ResourceType, Access
#: The accesses each resource type takes (Java ``PermissionAccess.BUILT_INS``; pypaimon 2.1.0's and
#: paimon-rust 0.4.0's tables are the same). A scope's accesses are those of the objects it reaches.
APPLICABLE: dict[ResourceType, frozenset[Access]] = {
    R.CATALOG: frozenset({A.ALL, A.ALTER, A.DROP, A.GRANT, A.CREATEDATABASE}),
    R.CATALOG_ALL: frozenset(
        {A.ALL, A.DESCRIBE, A.ALTER, A.DROP, A.GRANT, A.CREATETABLE, A.CREATEVIEW, A.CREATEFUNCTION}
        | {A.LIST, A.SELECT, A.UPDATE}
    ),
    R.DATABASE: frozenset(
        {A.ALL, A.DESCRIBE, A.ALTER, A.DROP, A.GRANT, A.CREATETABLE, A.CREATEVIEW, A.CREATEFUNCTION, A.LIST}
    ),
    R.DATABASE_ALL: frozenset({A.ALL, A.SELECT, A.UPDATE, A.ALTER, A.DROP, A.GRANT}),
    R.TABLE: frozenset({A.ALL, A.SELECT, A.UPDATE, A.ALTER, A.DROP, A.GRANT}),
    R.COLUMN: frozenset({A.SELECT}),
    R.VIEW: frozenset({A.ALL, A.SELECT, A.ALTER, A.DROP, A.GRANT}),
    R.FUNCTION: frozenset({A.ALL, A.SELECT, A.ALTER, A.DROP, A.GRANT}),
}
#: The objects a check names; the other types are scopes that reach them.
OBJECT_TYPES = frozenset({R.CATALOG, R.DATABASE, R.TABLE, R.VIEW, R.FUNCTION})
#: The wire field naming the object of each type that has one (``{"type": "TABLE", "table": "t"}``).
OBJECT_FIELD = {R.TABLE: "table", R.COLUMN: "table", R.VIEW: "view", R.FUNCTION: "function"}
#: Longest access and principal, in UTF-16 code units (Java's ``String.length()``).
MAX_ACCESS_LENGTH = 32
MAX_PRINCIPAL_LENGTH = 128


def java_blank(value: str | None) -> bool:
    """Java's ``trim().isEmpty()``: only characters up to U+0020 count as blank."""
    return value is None or all(ch <= " " for ch in value)


def java_length(value: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def parse_resource_type(value: str) -> ResourceType:
    """A resource type by name, case-insensitively (Java ``ResourceType.fromString``)."""
    try:
        return ResourceType(value.upper())
    except ValueError:
        raise ValidationError(f"unknown resource type {value!r}", field="resourceType") from None


def parse_access(value: str, resource_type: ResourceType) -> Access:
    """``value`` canonicalized (upper-cased, as Java ``PermissionAccess.canonicalizeFor``) and checked to
    apply to ``resource_type``; ``ValidationError`` naming the rule it breaks."""
    if java_blank(value):
        raise ValidationError("access cannot be empty", field="access")
    if java_length(value) > MAX_ACCESS_LENGTH or java_length(value.upper()) > MAX_ACCESS_LENGTH:
        raise ValidationError(f"access must contain at most {MAX_ACCESS_LENGTH} characters", field="access")
    try:
        access = Access(value.upper())
    except ValueError:
        raise ValidationError(f"unknown access {value.upper()!r}", field="access") from None
    if access not in APPLICABLE[resource_type]:
        raise ValidationError(
            f"access {access.value} is not valid for {resource_type.value}",
            field="access",
            resource_type=resource_type.value,
        )
    return access


def validate_principal(principal: str) -> str:
    """A principal as the protocol allows it: not blank, at most 128 UTF-16 code units (opaque
    otherwise: ``alice``, ``user:<sub>``, ``group:NAME``, ``role:NAME``)."""
    if not isinstance(principal, str) or java_blank(principal):
        raise ValidationError("principal cannot be empty", field="principal")
    if java_length(principal) > MAX_PRINCIPAL_LENGTH:
        raise ValidationError(
            f"principal must contain at most {MAX_PRINCIPAL_LENGTH} characters", field="principal"
        )
    return principal


@dataclass(frozen=True, slots=True)
class Resource:
    """A permission target: its type and the locators that type requires (``database``; ``object``: the
    table, view or function name), no others."""

    type: ResourceType
    database: str | None = None
    object: str | None = None

    def __post_init__(self) -> None:
        needs_database = self.type not in (R.CATALOG, R.CATALOG_ALL)
        needs_object = self.type in OBJECT_FIELD
        what = self.type.value
        if needs_database and java_blank(self.database):
            raise ValidationError(f"database is required for a {what} resource", resource_type=what)
        if not needs_database and self.database is not None:
            raise ValidationError(f"a {what} resource names no database", resource_type=what)
        if needs_object and java_blank(self.object):
            field = OBJECT_FIELD[self.type]
            raise ValidationError(f"{field} is required for a {what} resource", resource_type=what)
        if not needs_object and self.object is not None:
            raise ValidationError(f"a {what} resource names no table, view or function", resource_type=what)

    @staticmethod
    def catalog() -> Resource:
        return Resource(R.CATALOG)

    @staticmethod
    def catalog_all() -> Resource:
        return Resource(R.CATALOG_ALL)

    @staticmethod
    def of_database(database: str) -> Resource:
        return Resource(R.DATABASE, database)

    @staticmethod
    def database_all(database: str) -> Resource:
        return Resource(R.DATABASE_ALL, database)

    @staticmethod
    def table(database: str, table: str) -> Resource:
        return Resource(R.TABLE, database, table)

    @staticmethod
    def column(database: str, table: str) -> Resource:
        return Resource(R.COLUMN, database, table)

    @staticmethod
    def view(database: str, view: str) -> Resource:
        return Resource(R.VIEW, database, view)

    @staticmethod
    def function(database: str, function: str) -> Resource:
        return Resource(R.FUNCTION, database, function)

    @property
    def is_object(self) -> bool:
        return self.type in OBJECT_TYPES

    def __str__(self) -> str:
        name = ".".join(x for x in (self.database, self.object) if x is not None)
        return f"{self.type.value} {name}" if name else self.type.value


@dataclass(frozen=True, slots=True)
class ColumnRange:
    """The columns a principal may select: an allowlist (``allowed``; None: no allowlist, every column)
    minus a denylist (``denied``). An allowlist denies columns added later, a denylist allows them.
    Ranges of several assignments intersect: allowlists intersect, denylists add up."""

    allowed: frozenset[str] | None = None
    denied: frozenset[str] = frozenset()

    @staticmethod
    def allowlist(names: Iterable[str]) -> ColumnRange:
        """Only ``names`` (``columnNames``: non-empty, no blank or repeated name, as Java checks)."""
        return ColumnRange(allowed=_column_names(names, "columnNames"))

    @staticmethod
    def denylist(names: Iterable[str]) -> ColumnRange:
        """Every column but ``names`` (``excludedColumnNames``)."""
        return ColumnRange(denied=_column_names(names, "excludedColumnNames"))

    @property
    def is_full(self) -> bool:
        return self.allowed is None and not self.denied

    def permits(self, column: str) -> bool:
        return (self.allowed is None or column in self.allowed) and column not in self.denied

    def refused(self, columns: Iterable[str]) -> list[str]:
        """The columns of ``columns`` outside the range, in their order."""
        return [c for c in columns if not self.permits(c)]

    def intersect(self, other: ColumnRange) -> ColumnRange:
        if self.allowed is None:
            allowed = other.allowed
        elif other.allowed is None:
            allowed = self.allowed
        else:
            allowed = self.allowed & other.allowed
        return ColumnRange(allowed, self.denied | other.denied)

    def within(self, other: ColumnRange, current: Iterable[str]) -> bool:
        """Whether ``other`` permits every column this range permits: among ``current`` (the table's
        columns now) and any column added later (a principal may delegate only a range it holds)."""
        now = set(current)
        if any(self.permits(c) and not other.permits(c) for c in now):
            return False
        if self.allowed is not None:  # names listed that do not exist (yet) must be permitted too
            return all(other.permits(c) for c in self.allowed - now)
        # This range reaches columns added later: other must too, denying none this range permits.
        return other.allowed is None and all(c in self.denied for c in other.denied - now)


def _column_names(names: Iterable[str], field: str) -> frozenset[str]:
    if isinstance(names, str):
        raise ValidationError(f"{field} must be a list of column names, not a string", field=field)
    listed = list(names)
    if not listed:
        raise ValidationError(f"{field} cannot be empty", field=field)
    if any(not isinstance(n, str) or java_blank(n) for n in listed):
        raise ValidationError(f"{field} cannot contain an empty column name", field=field)
    if len(set(listed)) != len(listed):
        raise ValidationError(f"{field} cannot contain duplicate column names", field=field)
    return frozenset(listed)


@dataclass(frozen=True, slots=True)
class Assignment:
    """``access`` on ``resource`` for ``principal`` until ``expire_time`` (aware, exclusive; None:
    until revoked). ``columns``: the range of a ``COLUMN`` assignment, None for every other type."""

    principal: str
    resource: Resource
    access: Access
    columns: ColumnRange | None = None
    expire_time: datetime | None = None

    def __post_init__(self) -> None:
        validate_principal(self.principal)
        if self.access not in APPLICABLE[self.resource.type]:
            raise ValidationError(
                f"access {self.access.value} is not valid for {self.resource.type.value}",
                field="access",
                resource_type=self.resource.type.value,
            )
        if (self.resource.type is R.COLUMN) != (self.columns is not None):
            raise ValidationError(
                "columns is required for a COLUMN resource"
                if self.columns is None
                else "columns is only valid for a COLUMN resource",
                field="columns",
            )
        if self.expire_time is not None:
            check_expire_time(self.expire_time)

    @property
    def identity(self) -> tuple[Resource, Access, str]:
        """What a grant of the same assignment replaces and a revoke removes."""
        return (self.resource, self.access, self.principal)

    def active(self, at: datetime) -> bool:
        """Whether the assignment authorizes at ``at`` (``at < expire_time``: the spec's exclusive bound)."""
        return self.expire_time is None or at < self.expire_time

    def __str__(self) -> str:
        until = "" if self.expire_time is None else f" until {format_instant(self.expire_time)}"
        return f"{self.access.value} on {self.resource} to {self.principal}{until}"


# ---- expireTime: an ISO-8601 UTC instant of at most millisecond precision ---------------------------

_INSTANT = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?[Zz]")


def check_expire_time(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(
            "expireTime must be an instant (a time zone aware datetime)", field="expireTime"
        )
    if value.microsecond % 1000:
        raise ValidationError("expireTime must have at most millisecond precision", field="expireTime")
    return value


def parse_instant(text: str) -> datetime:
    """``expireTime`` as the protocol writes it (``2027-01-01T00:00:00Z``, ``...00.123Z``: Java's
    ``Instant.parse`` of a UTC instant, years 0000-9999), checked to be at most millisecond precise."""
    m = _INSTANT.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValidationError("expireTime must be an ISO-8601 UTC instant", field="expireTime")
    fraction = m.group(7) or ""
    if fraction.rstrip("0") and len(fraction.rstrip("0")) > 3:
        raise ValidationError("expireTime must have at most millisecond precision", field="expireTime")
    year, month, day, hour, minute, second = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    try:
        parsed = datetime(year, month, day, hour, minute, second, int(fraction.ljust(6, "0")[:6]), tzinfo=UTC)
    except ValueError as e:
        raise ValidationError(f"expireTime is not a valid instant: {e}", field="expireTime") from None
    return parsed


def format_instant(value: datetime) -> str:
    """``value`` as Java's ``Instant.toString`` prints it (seconds always; milliseconds when not zero)."""
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + "Z"
