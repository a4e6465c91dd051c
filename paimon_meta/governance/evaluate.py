"""Who may do what: the one evaluation of Paimon's permission model.

:func:`decide` answers whether a :class:`Subject` (a principal with the groups and roles whose
assignments apply to it) may perform an access on a catalog object at a given time, and why. The rules
(apache/paimon's management API; docs/GOVERNANCE.md):

1. Only active assignments count: at ``at >= expire_time`` an assignment authorizes nothing.
2. An assignment reaches the object it names exactly, and a scope reaches more: ``CATALOG_ALL`` every
   database, table, view and function of the catalog, ``DATABASE_ALL`` every table, view and function of
   its database, whenever they were created (the scope names no object, so objects created later are
   inside it); ``COLUMN`` reaches its table, for ``SELECT`` only. ``CATALOG`` is the catalog itself
   (creating databases, altering or dropping the catalog), not what it holds.
3. An access is given by an assignment of that access, or of ``ALL`` (every access the reached object
   takes). No other access implies another (``UPDATE`` does not imply ``SELECT``).
4. Selecting from a table: the column ranges of every active ``COLUMN`` assignment of the subject on
   the table intersect (allowlists intersect, denylists add up), whatever else gives the ``SELECT``.
5. Granting an assignment needs ``GRANT`` on its resource and holding what it gives (a principal
   delegates only what it holds; a column range only within its own); revoking needs ``GRANT`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import (
    APPLICABLE,
    Access,
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
    format_instant,
)

R = ResourceType
_IN_DATABASE = frozenset({R.TABLE, R.VIEW, R.FUNCTION})


@dataclass(frozen=True, slots=True)
class Subject:
    """Who asks: ``principal`` and the groups and roles (principal names) whose assignments apply."""

    principal: str
    memberships: tuple[str, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        return frozenset((self.principal, *self.memberships))


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer and why: ``because`` lists the assignments that give it (all of them: none when
    refused); ``reason`` is one sentence for logs and 403 bodies; ``columns``: for ``SELECT`` on a
    table, the range the subject may select (full when no ``COLUMN`` assignment applies)."""

    allowed: bool
    reason: str
    because: tuple[Assignment, ...] = ()
    columns: ColumnRange = field(default_factory=ColumnRange)


def covers(scope: Resource, resource: Resource) -> bool:
    """Whether an assignment on ``scope`` reaches ``resource`` (any type: a scope reaches itself and the
    narrower scopes inside it; a table reaches its ``COLUMN`` resource)."""
    if scope == resource:
        return True
    if scope.type is R.CATALOG_ALL:
        return resource.type not in (R.CATALOG, R.CATALOG_ALL)
    if scope.type is R.DATABASE_ALL:
        return resource.type in (*_IN_DATABASE, R.COLUMN) and resource.database == scope.database
    if scope.type is R.TABLE:
        return (
            resource.type is R.COLUMN
            and resource.database == scope.database
            and (resource.object == scope.object)
        )
    if scope.type is R.COLUMN:
        return resource.type is R.TABLE and (resource.database, resource.object) == (
            scope.database,
            scope.object,
        )
    return False


def gives(assignment: Assignment, resource: Resource, access: Access) -> bool:
    """Whether ``assignment`` (active or not) gives ``access`` on ``resource``."""
    if not covers(assignment.resource, resource):
        return False
    if access not in APPLICABLE[resource.type]:
        return False
    if assignment.resource.type is R.COLUMN or resource.type is R.COLUMN:
        # A column range gives SELECT on its table; only SELECT reaches a column range.
        return access is Access.SELECT and assignment.access in (Access.SELECT, Access.ALL)
    return assignment.access is access or assignment.access is Access.ALL


def column_range(
    assignments: Iterable[Assignment], subject: Subject, table: Resource, at: datetime
) -> ColumnRange:
    """The intersection of the ranges of the subject's active ``COLUMN`` assignments on ``table``."""
    out = ColumnRange()
    names = subject.names
    for a in assignments:
        if (
            a.columns is not None
            and a.principal in names
            and a.active(at)
            and (a.resource.database, a.resource.object) == (table.database, table.object)
        ):
            out = out.intersect(a.columns)
    return out


def holds(
    assignments: Iterable[Assignment], subject: Subject, resource: Resource, access: Access, at: datetime
) -> tuple[tuple[Assignment, ...], tuple[Assignment, ...]]:
    """The subject's active assignments giving ``access`` on ``resource``, and its expired ones that
    would have (for the reason of a refusal)."""
    names = subject.names
    active: list[Assignment] = []
    expired: list[Assignment] = []
    for a in assignments:
        if a.principal in names and gives(a, resource, access):
            (active if a.active(at) else expired).append(a)
    return tuple(active), tuple(expired)


def decide(
    assignments: Sequence[Assignment], subject: Subject, resource: Resource, access: Access, *, at: datetime
) -> Decision:
    """Whether ``subject`` may perform ``access`` on ``resource`` at ``at``, and why.

    ``resource`` is a catalog object, or a scope (``CATALOG_ALL``, ``DATABASE_ALL``) to ask whether
    the subject holds ``access`` on all of it, objects created later included (only an assignment on
    that scope or a wider one does). ``assignments`` are the subject's and its memberships' (others are
    ignored). Raises ``ValidationError`` for a ``COLUMN`` resource (columns are selected from a table:
    ask ``SELECT`` on the table and read :attr:`Decision.columns`) or an access the resource does not
    take.
    """
    if resource.type is R.COLUMN:
        raise ValidationError(
            f"ask SELECT on the table, not on {resource}: the decision carries the column range",
            resource=str(resource),
        )
    if access not in APPLICABLE[resource.type]:
        raise ValidationError(
            f"access {access.value} does not apply to a {resource.type.value}", resource=str(resource)
        )
    given, expired = holds(assignments, subject, resource, access, at)
    columns = (
        column_range(assignments, subject, resource, at)
        if resource.type is R.TABLE and access is Access.SELECT
        else ColumnRange()
    )
    who = _who(subject)
    if given:
        return Decision(True, f"{who} may {access.value} {resource}: {given[0]}", given, columns)
    reason = f"{who} has no {access.value} on {resource}"
    if expired:
        reason += f" (expired: {expired[0]}, at {format_instant(_expiry(expired[0]))})"
    return Decision(False, reason)


def may_grant(
    assignments: Sequence[Assignment],
    subject: Subject,
    grant: Assignment,
    *,
    at: datetime,
    table_columns: Iterable[str] = (),
) -> Decision:
    """Whether ``subject`` may grant ``grant``: ``GRANT`` reaching its resource, and holding what it gives
    (its access, or every access for ``ALL``; for a column range, ``SELECT`` on the table with a range
    containing it, ``table_columns`` being the table's columns now)."""
    target = grant.resource
    check = Resource.table(target.database or "", target.object or "") if target.type is R.COLUMN else target
    given, _ = holds(assignments, subject, check, Access.GRANT, at)
    who = _who(subject)
    if not given:
        return Decision(False, f"{who} has no GRANT on {check}")
    if grant.access is Access.GRANT:
        return Decision(True, f"{who} may grant on {check}: {given[0]}", given)
    needs = sorted(APPLICABLE[target.type] - {Access.ALL}) if grant.access is Access.ALL else [grant.access]
    held: list[Assignment] = list(given)
    for access in needs:
        have, _ = holds(assignments, subject, target, access, at)
        if not have:
            return Decision(False, f"{who} cannot delegate {access.value} on {target}: it does not hold it")
        held.extend(have)
    if grant.columns is not None:
        mine = column_range(assignments, subject, check, at)
        if not grant.columns.within(mine, table_columns):
            return Decision(False, f"{who} cannot delegate columns of {check} outside its own range")
    return Decision(True, f"{who} may grant {grant.access.value} on {target}", tuple(held))


def may_revoke(
    assignments: Sequence[Assignment], subject: Subject, resource: Resource, *, at: datetime
) -> Decision:
    """Whether ``subject`` may revoke assignments on ``resource`` (``GRANT`` reaching it)."""
    check = (
        Resource.table(resource.database or "", resource.object or "")
        if resource.type is R.COLUMN
        else resource
    )
    given, _ = holds(assignments, subject, check, Access.GRANT, at)
    if given:
        return Decision(True, f"{_who(subject)} may revoke on {resource}: {given[0]}", given)
    return Decision(False, f"{_who(subject)} has no GRANT on {check}")


def sees(assignments: Iterable[Assignment], subject: Subject, database: str, at: datetime) -> bool:
    """Whether any active assignment of the subject reaches into ``database`` (listings show a database
    the subject holds anything in: the database itself or an object of it)."""
    names = subject.names
    for a in assignments:
        if a.principal in names and a.active(at):
            r = a.resource
            if r.type is R.CATALOG_ALL or (r.database == database and r.type is not R.CATALOG):
                return True
    return False


def _who(subject: Subject) -> str:
    if not subject.memberships:
        return f"principal {subject.principal!r}"
    return f"principal {subject.principal!r} (with {', '.join(subject.memberships)})"


def _expiry(a: Assignment) -> datetime:
    assert a.expire_time is not None
    return a.expire_time
