"""Paimon's permission model stored (migration 0022): assignments, data policies, roles' memberships and
the governance event log.

* :class:`Assignments` (one catalog): grant (an upsert by identity: resource, access, principal), revoke
  (idempotent), the direct assignments on one exact resource paged by ``assignment_id`` (a stable key),
  and a subject's active assignments (its own, its groups' and its roles') in one query.
* :class:`Policies` (one catalog): row filters and column masks of a table by ``table_id``: create (a
  duplicate identity is refused), list (paged by ``policy_id``), drop (an absent one is refused), a
  subject's policies on a table in one query.
* Roles are principals named ``role:NAME``; ``paimon_principal_members`` says who belongs to a group or
  role (OIDC users get their ``group:`` memberships from their token as well).

Invariant: every change writes one row of ``paimon_governance_events`` (who, what, when, why) in the
transaction that makes it, so the log is the complete history of who could do what.

Catalogs: ``catalog_key`` None on a row is the service's default catalog (as ``paimon_grants``, migration
0020). A store of the default catalog (``default=True``) reads both spellings and writes its key; a store
whose key is unknown (``catalog_key=None``: the CLI without ``--catalog``) reads and writes NULL rows and
binds nothing by id.

Identity of objects: a resource is stored with its locators and, where the registry has a stable id, the
object's id (``object_id``). :func:`on_table_renamed` moves a table's bound rows to the new name;
:func:`on_table_dropped` and :func:`on_database_dropped` remove what was bound to (or named) the object.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import IntegrityError

from paimon_meta.db.models import GovernanceEventType, Privilege
from paimon_meta.errors import (
    DatabaseNotFoundError,
    FunctionNotFoundError,
    GovernanceConflictError,
    PolicyAlreadyExistsError,
    PolicyNotFoundError,
    PrincipalAlreadyExistsError,
    PrincipalNotFoundError,
    TableNotFoundError,
    ValidationError,
    ViewNotFoundError,
)
from paimon_meta.governance.bundles import Bundle, bundle_assignments
from paimon_meta.governance.evaluate import Subject
from paimon_meta.governance.permissions import (
    Access,
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
    format_instant,
)
from paimon_meta.governance.rules import parse_column_mask, parse_row_filter
from paimon_meta.metastore.principal_names import external_name
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField
from paimon_meta.table.schema_change import (
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnType,
)

R = ResourceType
ROLE_PREFIX = "role:"
#: Most assignments or policies one page lists.
MAX_PAGE = 1000
DEFAULT_PAGE = 100
ROW_FILTER = "ROW_FILTER"
COLUMN_MASKING = "COLUMN_MASKING"
POLICY_TYPES = (ROW_FILTER, COLUMN_MASKING)

E = GovernanceEventType


# ---- the event log ---------------------------------------------------------------------------------------


def record_event(
    conn: Connection,
    event_type: GovernanceEventType,
    *,
    catalog_key: str | None,
    principal: str | None,
    subject: str,
    target: str | None = None,
    reason: str | None = None,
    payload: dict[str, Any] | None = None,
) -> int:
    """Append one governance event (in ``conn``'s transaction); returns its id."""
    return int(
        conn.execute(
            text(
                "INSERT INTO paimon_governance_events (catalog_key, event_type, principal, subject, target,"
                " reason, payload) VALUES (:c, :t, :p, :s, :g, :r, :d) RETURNING event_id"
            ),
            {
                "c": catalog_key,
                "t": event_type.value,
                "p": principal,
                "s": subject,
                "g": target,
                "r": reason,
                "d": Jsonb(payload or {}),
            },
        ).scalar_one()
    )


@dataclass(frozen=True, slots=True)
class GovernanceEvent:
    event_id: int
    catalog_key: str | None
    event_type: str
    principal: str | None
    subject: str
    target: str | None
    reason: str | None
    payload: dict[str, Any]
    created_at: datetime


def governance_events(
    engine: Engine, *, subject: str | None = None, target: str | None = None, limit: int = 1000
) -> list[GovernanceEvent]:
    """The log's events (oldest first), of one ``subject`` (resource) or ``target`` (principal)."""
    where = ["true"]
    if subject is not None:
        where.append("subject = :s")
    if target is not None:
        where.append("target = :g")
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_id, catalog_key, event_type, principal, subject, target, reason, payload,"  # noqa: S608 - constants
                f" created_at FROM paimon_governance_events WHERE {' AND '.join(where)}"
                " ORDER BY event_id LIMIT :n"
            ),
            {"s": subject, "g": target, "n": limit},
        ).all()
    return [GovernanceEvent(*r) for r in rows]


# ---- stored rows --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredAssignment:
    assignment_id: int
    catalog_key: str | None
    assignment: Assignment
    object_id: int | None
    granted_by: str | None
    granted_at: datetime
    reason: str | None


@dataclass(frozen=True, slots=True)
class SubjectAssignments:
    """A subject (its principal, and the groups and roles whose assignments apply) and its assignments."""

    subject: Subject
    assignments: tuple[Assignment, ...]

    def earliest_expiry(self) -> datetime | None:
        """When the first of the assignments stops applying (a cache of them must not outlive it)."""
        times = [a.expire_time for a in self.assignments if a.expire_time is not None]
        return min(times) if times else None


_ASSIGNMENT_COLUMNS = (
    "a.assignment_id, a.catalog_key, p.name AS principal, a.resource_type, a.database_name, a.object_name,"
    " a.object_id, a.access, a.column_names, a.excluded_column_names, a.expire_time, a.granted_by,"
    " a.granted_at, a.reason"
)


def assignment_of_row(r: Any) -> Assignment:
    """The assignment of a stored row (``principal``, ``resource_type``, ``database_name``,
    ``object_name``, ``access``, ``column_names``, ``excluded_column_names``, ``expire_time``)."""
    return _assignment(r)


def _assignment(r: Any) -> Assignment:
    columns: ColumnRange | None = None
    if r.column_names is not None:
        columns = ColumnRange.allowlist(r.column_names)
    elif r.excluded_column_names is not None:
        columns = ColumnRange.denylist(r.excluded_column_names)
    return Assignment(
        r.principal,
        Resource(ResourceType(r.resource_type), r.database_name, r.object_name),
        Access(r.access),
        columns,
        r.expire_time,
    )


def _stored(r: Any) -> StoredAssignment:
    return StoredAssignment(
        r.assignment_id, r.catalog_key, _assignment(r), r.object_id, r.granted_by, r.granted_at, r.reason
    )


def _page_size(max_results: int | None) -> int:
    if max_results is None:
        return DEFAULT_PAGE
    if not 1 <= max_results <= MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {MAX_PAGE}", field="maxResults")
    return max_results


def _page_token(token: str | None) -> int:
    if token is None or token == "":
        return 0
    if not token.isdigit() or len(token) > 18:
        raise ValidationError(f"pageToken {token!r} is not a token this service issued", field="pageToken")
    return int(token)


def _principal_id(conn: Connection, name: str) -> int:
    pid = conn.execute(
        text("SELECT principal_id FROM paimon_principals WHERE name = :n"), {"n": name}
    ).scalar_one_or_none()
    if pid is None:
        raise PrincipalNotFoundError(f"principal {name!r} does not exist", principal=name)
    return int(pid)


def _columns_params(columns: ColumnRange | None) -> dict[str, list[str] | None]:
    if columns is None:
        return {"cn": None, "xn": None}
    if columns.allowed is not None:
        return {"cn": sorted(columns.allowed), "xn": None}
    return {"cn": None, "xn": sorted(columns.denied)}


def _describe(a: Assignment) -> dict[str, Any]:
    out: dict[str, Any] = {"resourceType": a.resource.type.value, "access": a.access.value}
    if a.resource.database is not None:
        out["database"] = a.resource.database
    if a.resource.object is not None:
        out["object"] = a.resource.object
    if a.columns is not None:
        out["columns"] = _columns_params(a.columns)
    if a.expire_time is not None:
        out["expireTime"] = format_instant(a.expire_time)
    return out


class Assignments:
    """The assignments of one catalog (``catalog_key``; ``default``: it is the service's default catalog,
    whose rows also include those naming no catalog; ``catalog_key=None``: the default catalog whose key
    is unknown here)."""

    def __init__(self, engine: Engine, *, catalog_key: str | None, default: bool = True) -> None:
        self.engine = engine
        self.catalog_key = catalog_key
        self.default = default or catalog_key is None

    # -- the catalog condition, and binding to objects

    def _in_catalog(self, alias: str = "a") -> str:
        if self.catalog_key is None:
            return f"{alias}.catalog_key IS NULL"
        if self.default:
            return f"({alias}.catalog_key = :ck OR {alias}.catalog_key IS NULL)"
        return f"{alias}.catalog_key = :ck"

    @contextmanager
    def _tx(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
            return
        with self.engine.begin() as own:
            yield own

    def resolve(self, conn: Connection, resource: Resource, *, must_exist: bool) -> int | None:
        """The stable id of the object ``resource`` names (None: a catalog or catalog scope, the key
        unknown, or an object the registry keeps no id of). ``must_exist``: a missing database, table,
        view or function raises its NotFoundError (else None: bound by name)."""
        key = self.catalog_key
        if key is None or resource.type in (R.CATALOG, R.CATALOG_ALL):
            return None
        db = resource.database
        params = {"k": key, "d": db, "o": resource.object}
        if resource.type in (R.DATABASE, R.DATABASE_ALL):
            found = conn.execute(
                text(
                    "SELECT (SELECT database_id FROM paimon_databases WHERE catalog_key = :k"
                    " AND database_name = :d) AS id, EXISTS (SELECT 1 FROM paimon_database_properties"
                    " WHERE catalog_key = :k AND database_name = :d) AS java"
                ),
                params,
            ).one()
            if found.id is None and not found.java and must_exist:
                raise DatabaseNotFoundError(f"database {db!r} does not exist", database=db)
            return None if found.id is None else int(found.id)
        sql, error = {
            R.TABLE: (
                "SELECT table_id FROM paimon_tables WHERE catalog_key = :k AND database_name = :d"
                " AND table_name = :o",
                TableNotFoundError,
            ),
            R.COLUMN: (
                "SELECT table_id FROM paimon_tables WHERE catalog_key = :k AND database_name = :d"
                " AND table_name = :o",
                TableNotFoundError,
            ),
            R.VIEW: (
                "SELECT view_id FROM paimon_views WHERE catalog_key = :k AND database_name = :d"
                " AND view_name = :o",
                ViewNotFoundError,
            ),
            R.FUNCTION: (
                "SELECT function_id FROM paimon_functions WHERE catalog_key = :k AND database_name = :d"
                " AND function_name = :o",
                FunctionNotFoundError,
            ),
        }[resource.type]
        oid = conn.execute(text(sql), params).scalar_one_or_none()
        if oid is None and must_exist:
            name = f"{db}.{resource.object}"
            raise error(f"{resource.type.value.lower()} {name} does not exist", identifier=name)
        return None if oid is None else int(oid)

    # -- changes

    def grant(
        self,
        assignment: Assignment,
        *,
        granted_by: str | None,
        reason: str | None = None,
        must_exist: bool = True,
        conn: Connection | None = None,
    ) -> bool:
        """Create ``assignment``, or replace the one of the same identity (its columns and expiry; who
        granted it, when and why): True if created. Raises PrincipalNotFoundError, and the resource's
        NotFoundError when ``must_exist``."""
        with self._tx(conn) as c:
            pid = _principal_id(c, assignment.principal)
            object_id = self.resolve(c, assignment.resource, must_exist=must_exist)
            r = assignment.resource
            params: dict[str, Any] = {
                "ck": self.catalog_key,
                "pid": pid,
                "rt": r.type.value,
                "db": r.database,
                "ob": r.object,
                "oid": object_id,
                "ac": assignment.access.value,
                "exp": assignment.expire_time,
                "by": granted_by,
                "why": reason,
                **_columns_params(assignment.columns),
            }
            replaced = c.execute(
                text(
                    "UPDATE paimon_assignments a SET column_names = :cn, excluded_column_names = :xn,"  # noqa: S608 - constants
                    " expire_time = :exp, granted_by = :by, granted_at = now(), reason = :why,"
                    " object_id = coalesce(:oid, a.object_id)"
                    f" WHERE {self._in_catalog()} AND a.principal_id = :pid AND a.resource_type = :rt"
                    " AND a.database_name IS NOT DISTINCT FROM :db AND a.object_name IS NOT DISTINCT FROM :ob"
                    " AND a.access = :ac RETURNING a.assignment_id"
                ),
                params,
            ).first()
            if replaced is None:
                c.execute(
                    text(
                        "INSERT INTO paimon_assignments (catalog_key, principal_id, resource_type,"
                        " database_name, object_name, object_id, access, column_names, excluded_column_names,"
                        " expire_time,"
                        " granted_by, reason) VALUES (:ck, :pid, :rt, :db, :ob, :oid, :ac, :cn, :xn, :exp,"
                        " :by, :why) ON CONFLICT (catalog_key, resource_type, database_name, object_name,"
                        " access, principal_id) DO UPDATE SET column_names = EXCLUDED.column_names,"
                        " excluded_column_names = EXCLUDED.excluded_column_names,"
                        " expire_time = EXCLUDED.expire_time, granted_by = EXCLUDED.granted_by,"
                        " granted_at = now(), reason = EXCLUDED.reason"
                    ),
                    params,
                )
            record_event(
                c,
                E.PERMISSION_GRANTED,
                catalog_key=self.catalog_key,
                principal=granted_by,
                subject=str(r),
                target=assignment.principal,
                reason=reason,
                payload={**_describe(assignment), "replaced": replaced is not None},
            )
        return replaced is None

    def revoke(
        self,
        resource: Resource,
        access: Access,
        principal: str,
        *,
        revoked_by: str | None,
        reason: str | None = None,
        must_exist: bool = True,
        conn: Connection | None = None,
    ) -> bool:
        """Make the assignment (resource, access, principal) absent: True if there was one (idempotent;
        an event only for a removal). Raises PrincipalNotFoundError, and the resource's NotFoundError when
        ``must_exist``."""
        with self._tx(conn) as c:
            pid = _principal_id(c, principal)
            self.resolve(c, resource, must_exist=must_exist)
            gone = c.execute(
                text(
                    f"DELETE FROM paimon_assignments a WHERE {self._in_catalog()} AND a.principal_id = :pid"  # noqa: S608 - constants
                    " AND a.resource_type = :rt AND a.database_name IS NOT DISTINCT FROM :db"
                    " AND a.object_name IS NOT DISTINCT FROM :ob AND a.access = :ac RETURNING a.assignment_id"
                ),
                {
                    "ck": self.catalog_key,
                    "pid": pid,
                    "rt": resource.type.value,
                    "db": resource.database,
                    "ob": resource.object,
                    "ac": access.value,
                },
            ).all()
            if gone:
                record_event(
                    c,
                    E.PERMISSION_REVOKED,
                    catalog_key=self.catalog_key,
                    principal=revoked_by,
                    subject=str(resource),
                    target=principal,
                    reason=reason,
                    payload={
                        "resourceType": resource.type.value,
                        "access": access.value,
                        **{
                            k: v
                            for k, v in (("database", resource.database), ("object", resource.object))
                            if v
                        },
                    },
                )
        return bool(gone)

    # -- the bundles of the service's read/write/admin grants

    def grant_bundle(
        self,
        conn: Connection,
        principal: str,
        privilege: Privilege,
        *,
        database: str | None,
        table: str | None,
        granted_by: str | None,
        reason: str | None = None,
    ) -> int:
        """Write the assignments of ``privilege``'s bundle (those not yet held); returns how many were
        new. The legacy grant row is the caller's (``Principals.grant(conn=...)``)."""
        new = 0
        why = reason or f"grant {privilege.value} on {_scope_text(database, table)}"
        for a in bundle_assignments(principal, Bundle(privilege.value), database, table):
            if self._holds(conn, a):
                continue
            self.grant(a, granted_by=granted_by, reason=why, must_exist=False, conn=conn)
            new += 1
        return new

    def revoke_bundle(
        self,
        conn: Connection,
        principal: str,
        privilege: Privilege,
        *,
        database: str | None,
        table: str | None,
        revoked_by: str | None,
        remaining: Sequence[tuple[Privilege, str | None, str | None]],
        reason: str | None = None,
    ) -> int:
        """Remove the assignments of ``privilege``'s bundle that no ``remaining`` grant of the principal
        (privilege, database, table) also gives; returns how many were removed."""
        keep = {
            a.identity for p, d, t in remaining for a in bundle_assignments(principal, Bundle(p.value), d, t)
        }
        why = reason or f"revoke {privilege.value} on {_scope_text(database, table)}"
        removed = 0
        for a in bundle_assignments(principal, Bundle(privilege.value), database, table):
            if a.identity in keep:
                continue
            if self.revoke(
                a.resource,
                a.access,
                principal,
                revoked_by=revoked_by,
                reason=why,
                must_exist=False,
                conn=conn,
            ):
                removed += 1
        return removed

    def _holds(self, conn: Connection, a: Assignment) -> bool:
        """Whether exactly ``a`` (identity, no expiry, no columns) is stored already."""
        r = a.resource
        found = conn.execute(
            text(
                "SELECT a.expire_time, a.column_names, a.excluded_column_names FROM paimon_assignments a"  # noqa: S608 - constants
                " JOIN paimon_principals p ON p.principal_id = a.principal_id"
                f" WHERE {self._in_catalog()} AND p.name = :pn AND a.resource_type = :rt"
                " AND a.database_name IS NOT DISTINCT FROM :db AND a.object_name IS NOT DISTINCT FROM :ob"
                " AND a.access = :ac"
            ),
            {
                "ck": self.catalog_key,
                "pn": a.principal,
                "rt": r.type.value,
                "db": r.database,
                "ob": r.object,
                "ac": a.access.value,
            },
        ).first()
        return found is not None and found.expire_time is None

    # -- reads

    def list_page(
        self,
        resource: Resource,
        *,
        principal: str | None = None,
        principals: Sequence[str] | None = None,
        access: Access | None = None,
        page_token: str | None = None,
        max_results: int | None = None,
    ) -> tuple[list[StoredAssignment], str | None]:
        """The direct assignments on exactly ``resource`` (expired ones included), in ``assignment_id``
        order, one page; the token of the next page, or None after the last."""
        size = _page_size(max_results)
        after = _page_token(page_token)
        where = [
            self._in_catalog(),
            "a.resource_type = :rt",
            "a.database_name IS NOT DISTINCT FROM :db",
            "a.object_name IS NOT DISTINCT FROM :ob",
            "a.assignment_id > :after",
        ]
        if principal is not None:
            where.append("p.name = :pn")
        if principals is not None:  # only these principals' (a caller who may not see the others')
            where.append("p.name = ANY(:pns)")
        if access is not None:
            where.append("a.access = :ac")
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_ASSIGNMENT_COLUMNS} FROM paimon_assignments a"  # noqa: S608 - constants
                    " JOIN paimon_principals p ON p.principal_id = a.principal_id"
                    f" WHERE {' AND '.join(where)} ORDER BY a.assignment_id LIMIT :n"
                ),
                {
                    "ck": self.catalog_key,
                    "rt": resource.type.value,
                    "db": resource.database,
                    "ob": resource.object,
                    "after": after,
                    "pn": principal,
                    "pns": list(principals or ()),
                    "ac": None if access is None else access.value,
                    "n": size + 1,
                },
            ).all()
        page = [_stored(r) for r in rows[:size]]
        token = str(page[-1].assignment_id) if len(rows) > size else None
        return page, token

    def of_principal(self, principal: str) -> list[StoredAssignment]:
        """Every assignment of ``principal`` itself in this catalog (expired ones included)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_ASSIGNMENT_COLUMNS} FROM paimon_assignments a"  # noqa: S608 - constants
                    " JOIN paimon_principals p ON p.principal_id = a.principal_id"
                    f" WHERE {self._in_catalog()} AND p.name = :pn ORDER BY a.assignment_id"
                ),
                {"ck": self.catalog_key, "pn": principal},
            ).all()
        return [_stored(r) for r in rows]

    def subject_query(
        self, principal: str, groups: Sequence[str] = (), *, include_expired: bool = False
    ) -> tuple[str, dict[str, Any]]:
        """The statement :meth:`of_subject` runs, and its parameters (``bench/bench_governance.py`` prints
        its plan)."""
        key = self.catalog_key or ""  # "" is no catalog key (keys are identifiers): NULL rows only
        params = {
            "names": [principal, *groups],
            "ckx": key,
            "dk": key if self.default else "",
        }
        active = "" if include_expired else " AND (a.expire_time IS NULL OR a.expire_time > now())"
        sql = (
            "WITH direct AS (SELECT principal_id, name FROM paimon_principals WHERE name = ANY(:names)),"  # noqa: S608 - constants
            " who AS (SELECT principal_id, name FROM direct UNION SELECT g.principal_id, g.name"
            " FROM paimon_principal_members m JOIN direct d ON d.principal_id = m.member_id"
            " JOIN paimon_principals g ON g.principal_id = m.group_id)"
            " SELECT w.name AS member, a.assignment_id, a.catalog_key, w.name AS principal, a.resource_type,"
            " a.database_name, a.object_name, a.object_id, a.access, a.column_names,"
            " a.excluded_column_names, a.expire_time, a.granted_by, a.granted_at, a.reason"
            # LATERAL: one range of ix_paimon_assignments_principal per principal, whatever the
            # planner's estimates (a hash join would read every assignment of the catalog)
            " FROM who w LEFT JOIN LATERAL (SELECT * FROM paimon_assignments a"
            # the catalog as one expression no index serves: only the principal's range is read
            " WHERE a.principal_id = w.principal_id AND coalesce(a.catalog_key, :dk) = :ckx"
            f"{active}) a ON true"
        )
        return sql, params

    def of_subject(
        self,
        principal: str,
        groups: Sequence[str] = (),
        *,
        include_expired: bool = False,
        conn: Connection | None = None,
    ) -> SubjectAssignments:
        """The subject ``principal`` with ``groups`` (names from its sign-in) and its memberships (groups
        and roles of ``paimon_principal_members``), and the active assignments of all of them in this
        catalog: one statement, one index range per principal."""
        sql, params = self.subject_query(principal, groups, include_expired=include_expired)
        with self._tx(conn) if conn is not None else self.engine.connect() as c:
            rows = c.execute(text(sql), params).all()
        members = sorted({r.member for r in rows if r.member != principal})
        assignments = tuple(_assignment(r) for r in rows if r.assignment_id is not None)
        return SubjectAssignments(Subject(principal, tuple(members)), assignments)

    def require_principal(self, name: str) -> None:
        """PrincipalNotFoundError when there is no principal ``name``."""
        with self.engine.connect() as conn:
            _principal_id(conn, name)

    # -- roles and memberships

    def create_role(self, name: str, *, created_by: str | None, reason: str | None = None) -> str:
        """Create the role principal ``role:<name>`` (no token; its assignments and policies apply to its
        members); returns its principal name."""
        role = ROLE_PREFIX + external_name("role", name)
        with self.engine.begin() as conn:
            try:
                with conn.begin_nested():
                    conn.execute(
                        text("INSERT INTO paimon_principals (name, created_by) VALUES (:n, :b)"),
                        {"n": role, "b": created_by},
                    )
            except IntegrityError:
                raise PrincipalAlreadyExistsError(
                    f"principal {role!r} already exists", principal=role
                ) from None
            record_event(
                conn,
                E.MEMBER_ADDED,
                catalog_key=None,
                principal=created_by,
                subject=role,
                target=None,
                reason=reason,
                payload={"created": role},
            )
        return role

    def add_member(self, group: str, member: str, *, added_by: str | None, reason: str | None = None) -> bool:
        """``member`` joins the group or role ``group``: True if it was not a member."""
        if not group.startswith((ROLE_PREFIX, "group:")):
            raise ValidationError(f"{group!r} is not a group or role", principal=group)
        with self.engine.begin() as conn:
            gid, mid = _principal_id(conn, group), _principal_id(conn, member)
            done = conn.execute(
                text(
                    "INSERT INTO paimon_principal_members (member_id, group_id, added_by) VALUES (:m, :g, :b)"
                    " ON CONFLICT DO NOTHING RETURNING member_id"
                ),
                {"m": mid, "g": gid, "b": added_by},
            ).first()
            if done is not None:
                record_event(
                    conn,
                    E.MEMBER_ADDED,
                    catalog_key=None,
                    principal=added_by,
                    subject=group,
                    target=member,
                    reason=reason,
                )
        return done is not None

    def remove_member(
        self, group: str, member: str, *, removed_by: str | None, reason: str | None = None
    ) -> bool:
        with self.engine.begin() as conn:
            gid, mid = _principal_id(conn, group), _principal_id(conn, member)
            done = conn.execute(
                text("DELETE FROM paimon_principal_members WHERE member_id = :m AND group_id = :g"),
                {"m": mid, "g": gid},
            ).rowcount
            if done:
                record_event(
                    conn,
                    E.MEMBER_REMOVED,
                    catalog_key=None,
                    principal=removed_by,
                    subject=group,
                    target=member,
                    reason=reason,
                )
        return bool(done)


def _scope_text(database: str | None, table: str | None) -> str:
    if database is None:
        return "the catalog"
    return database if table is None else f"{database}.{table}"


# ---- data policies -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredPolicy:
    policy_id: int
    table_id: int
    principal: str
    policy_type: str
    on_column: str | None
    body: str
    created_by: str | None
    created_at: datetime
    reason: str | None


_POLICY_COLUMNS = (
    "x.policy_id, x.table_id, p.name AS principal, x.policy_type, x.on_column, x.body, x.created_by,"
    " x.created_at, x.reason"
)


def _policy(r: Any) -> StoredPolicy:
    return StoredPolicy(
        r.policy_id,
        r.table_id,
        r.principal,
        r.policy_type,
        r.on_column,
        r.body,
        r.created_by,
        r.created_at,
        r.reason,
    )


def _check_policy_type(policy_type: str, column: str | None) -> None:
    if policy_type not in POLICY_TYPES:
        raise ValidationError(f"unknown policy type {policy_type!r}", field="type")
    if (policy_type == COLUMN_MASKING) != (column is not None):
        raise ValidationError(
            "a COLUMN_MASKING policy names its column" if column is None else "a ROW_FILTER names no column",
            field="column",
        )


class Policies:
    """The row filters and column masks of one catalog's tables (by ``table_id``)."""

    def __init__(self, engine: Engine, *, catalog_key: str) -> None:
        self.engine = engine
        self.catalog_key = catalog_key

    def create(
        self,
        table_id: int,
        identifier: str,
        principal: str,
        *,
        policy_type: str,
        on_column: str | None,
        body: str,
        created_by: str | None,
        reason: str | None = None,
        conn: Connection | None = None,
    ) -> StoredPolicy:
        """Store a policy (``body``: the rule's canonical JSON, validated by the caller). Raises
        PrincipalNotFoundError, PolicyAlreadyExistsError (same table, principal, type and column)."""
        _check_policy_type(policy_type, on_column)
        with self.engine.begin() if conn is None else _same(conn) as c:
            pid = _principal_id(c, principal)
            try:
                with c.begin_nested():
                    row = c.execute(
                        text(
                            "INSERT INTO paimon_policies (catalog_key, table_id, principal_id, policy_type,"
                            " on_column, body, created_by, reason)"
                            " VALUES (:ck, :t, :p, :ty, :col, :b, :by, :why)"
                            " RETURNING policy_id, created_at"
                        ),
                        {
                            "ck": self.catalog_key,
                            "t": table_id,
                            "p": pid,
                            "ty": policy_type,
                            "col": on_column,
                            "b": body,
                            "by": created_by,
                            "why": reason,
                        },
                    ).one()
            except IntegrityError:
                what = "a row filter" if on_column is None else f"a mask on column {on_column!r}"
                raise PolicyAlreadyExistsError(
                    f"principal {principal!r} already has {what} on table {identifier}",
                    table=identifier,
                    principal=principal,
                ) from None
            record_event(
                c,
                E.POLICY_CREATED,
                catalog_key=self.catalog_key,
                principal=created_by,
                subject=f"TABLE {identifier}",
                target=principal,
                reason=reason,
                payload={"tableId": table_id, "type": policy_type, "column": on_column, "body": body},
            )
        return StoredPolicy(
            row.policy_id,
            table_id,
            principal,
            policy_type,
            on_column,
            body,
            created_by,
            row.created_at,
            reason,
        )

    def drop(
        self,
        table_id: int,
        identifier: str,
        policy_type: str,
        principal: str,
        column: str | None,
        *,
        dropped_by: str | None,
        reason: str | None = None,
    ) -> StoredPolicy:
        """Remove the policy of that identity; PolicyNotFoundError when there is none."""
        _check_policy_type(policy_type, column)
        with self.engine.begin() as c:
            pid = _principal_id(c, principal)
            row = c.execute(
                text(
                    "DELETE FROM paimon_policies x WHERE x.table_id = :t AND x.principal_id = :p"
                    " AND x.policy_type = :ty AND x.on_column IS NOT DISTINCT FROM :col"
                    " RETURNING x.policy_id, x.table_id, :pn AS principal, x.policy_type, x.on_column,"
                    " x.body, x.created_by, x.created_at, x.reason"
                ),
                {"t": table_id, "p": pid, "ty": policy_type, "col": column, "pn": principal},
            ).first()
            if row is None:
                what = "row filter" if column is None else f"mask on column {column!r}"
                raise PolicyNotFoundError(
                    f"principal {principal!r} has no {what} on table {identifier}", table=identifier
                )
            record_event(
                c,
                E.POLICY_DROPPED,
                catalog_key=self.catalog_key,
                principal=dropped_by,
                subject=f"TABLE {identifier}",
                target=principal,
                reason=reason,
                payload={"tableId": table_id, "type": policy_type, "column": column, "body": row.body},
            )
        return _policy(row)

    def list_page(
        self,
        table_id: int,
        *,
        policy_type: str | None = None,
        principal: str | None = None,
        principals: Sequence[str] | None = None,
        column: str | None = None,
        page_token: str | None = None,
        max_results: int | None = None,
    ) -> tuple[list[StoredPolicy], str | None]:
        """A table's policies in ``policy_id`` order, one page; the next page's token or None."""
        if policy_type is not None and policy_type not in POLICY_TYPES:
            raise ValidationError(f"unknown policy type {policy_type!r}", field="type")
        if column is not None and policy_type != COLUMN_MASKING:
            raise ValidationError("column is only valid with type=COLUMN_MASKING", field="column")
        size = _page_size(max_results)
        where = ["x.table_id = :t", "x.policy_id > :after"]
        if policy_type is not None:
            where.append("x.policy_type = :ty")
        if principal is not None:
            where.append("p.name = :pn")
        if principals is not None:
            where.append("p.name = ANY(:pns)")
        if column is not None:
            where.append("x.on_column = :col")
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_POLICY_COLUMNS} FROM paimon_policies x"  # noqa: S608 - constants
                    " JOIN paimon_principals p ON p.principal_id = x.principal_id"
                    f" WHERE {' AND '.join(where)} ORDER BY x.policy_id LIMIT :n"
                ),
                {
                    "t": table_id,
                    "after": _page_token(page_token),
                    "ty": policy_type,
                    "pn": principal,
                    "pns": list(principals or ()),
                    "col": column,
                    "n": size + 1,
                },
            ).all()
        page = [_policy(r) for r in rows[:size]]
        return page, (str(page[-1].policy_id) if len(rows) > size else None)

    def of_table(self, table_id: int, *, conn: Connection | None = None) -> list[StoredPolicy]:
        """Every policy of the table (any principal)."""
        sql = text(
            f"SELECT {_POLICY_COLUMNS} FROM paimon_policies x"  # noqa: S608 - constants
            " JOIN paimon_principals p ON p.principal_id = x.principal_id WHERE x.table_id = :t"
            " ORDER BY x.policy_id"
        )
        if conn is not None:
            return [_policy(r) for r in conn.execute(sql, {"t": table_id}).all()]
        with self.engine.connect() as c:
            return [_policy(r) for r in c.execute(sql, {"t": table_id}).all()]

    def of_subject(self, table_id: int, subject: Subject) -> list[StoredPolicy]:
        """The policies of the table that apply to ``subject`` (its principal, groups and roles)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_POLICY_COLUMNS} FROM paimon_policies x"  # noqa: S608 - constants
                    " JOIN paimon_principals p ON p.principal_id = x.principal_id"
                    " WHERE x.table_id = :t AND p.name = ANY(:names) ORDER BY x.policy_id"
                ),
                {"t": table_id, "names": sorted(subject.names)},
            ).all()
        return [_policy(r) for r in rows]

    def of_names(self, names: Sequence[str]) -> list[tuple[StoredPolicy, str, str]]:
        """The policies of this catalog's tables naming one of ``names`` (a principal, its groups and
        roles), each with its table's database and name, in ``policy_id`` order."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT {_POLICY_COLUMNS}, t.database_name, t.table_name FROM paimon_policies x"  # noqa: S608 - constants
                    " JOIN paimon_principals p ON p.principal_id = x.principal_id"
                    " JOIN paimon_tables t ON t.table_id = x.table_id"
                    " WHERE t.catalog_key = :ck AND p.name = ANY(:names) ORDER BY x.policy_id"
                ),
                {"ck": self.catalog_key, "names": sorted(names)},
            ).all()
        return [(_policy(r), r.database_name, r.table_name) for r in rows]


@contextmanager
def _same(conn: Connection) -> Iterator[Connection]:
    yield conn


# ---- lifecycle: a rename keeps, a drop removes ---------------------------------------------------------


def on_table_renamed(
    conn: Connection,
    *,
    catalog_key: str,
    table_id: int,
    old: tuple[str, str],
    new: tuple[str, str],
    principal: str | None,
) -> int:
    """Move the table's bound assignments (``TABLE``, ``COLUMN``) to its new name (its policies are by id
    already); returns how many moved (an event when any did)."""
    moved = conn.execute(
        text(
            "UPDATE paimon_assignments SET database_name = :d, object_name = :o"
            " WHERE resource_type IN ('TABLE', 'COLUMN') AND object_id = :id"
        ),
        {"d": new[0], "o": new[1], "id": table_id},
    ).rowcount
    if moved:
        record_event(
            conn,
            E.OBJECT_RENAMED,
            catalog_key=catalog_key,
            principal=principal,
            subject=f"TABLE {new[0]}.{new[1]}",
            payload={"tableId": table_id, "from": f"{old[0]}.{old[1]}", "assignments": moved},
        )
    return int(moved)


def on_table_dropped(
    conn: Connection,
    *,
    catalog_key: str,
    default: bool,
    table_id: int,
    database: str,
    table: str,
    principal: str | None,
) -> tuple[int, int]:
    """Remove the table's assignments (bound to its id, or naming it unbound in this catalog) and its
    policies; returns (assignments, policies) removed (an event when any were)."""
    catalog = "(catalog_key = :k OR (CAST(:dflt AS boolean) AND catalog_key IS NULL))"
    params = {"k": catalog_key, "dflt": default, "id": table_id, "d": database, "o": table}
    assignments = conn.execute(
        text(
            "DELETE FROM paimon_assignments WHERE resource_type IN ('TABLE', 'COLUMN') AND (object_id = :id"  # noqa: S608 - constants
            f" OR (object_id IS NULL AND {catalog} AND database_name = :d AND object_name = :o))"
        ),
        params,
    ).rowcount
    policies = conn.execute(text("DELETE FROM paimon_policies WHERE table_id = :id"), params).rowcount
    if assignments or policies:
        record_event(
            conn,
            E.OBJECT_DROPPED,
            catalog_key=catalog_key,
            principal=principal,
            subject=f"TABLE {database}.{table}",
            payload={"tableId": table_id, "assignments": assignments, "policies": policies},
        )
    return int(assignments), int(policies)


def on_database_dropped(
    conn: Connection, *, catalog_key: str, default: bool, database: str, principal: str | None
) -> int:
    """Remove every assignment inside the database (its own, its scope's, its views' and functions':
    its tables were dropped before it); returns how many (an event when any)."""
    removed = conn.execute(
        text(
            "DELETE FROM paimon_assignments WHERE database_name = :d"
            " AND (catalog_key = :k OR (CAST(:dflt AS boolean) AND catalog_key IS NULL))"
            " AND resource_type NOT IN ('TABLE', 'COLUMN')"
        ),
        {"k": catalog_key, "dflt": default, "d": database},
    ).rowcount
    if removed:
        record_event(
            conn,
            E.OBJECT_DROPPED,
            catalog_key=catalog_key,
            principal=principal,
            subject=f"DATABASE {database}",
            payload={"assignments": removed},
        )
    return int(removed)


# ---- the service's read/write/admin grants, written with their bundles -------------------------------


def protected_columns(policies: Sequence[StoredPolicy], fields: Sequence[DataField]) -> dict[str, str]:
    """The columns the policies protect (a mask's column) or read (a filter's, a mask's inputs): column ->
    the policy that does (for the refusal's message). A stored rule that no longer parses protects at
    least its masked column."""
    out: dict[str, str] = {}
    for p in policies:
        what = f"the {p.policy_type} policy of {p.principal!r}"
        if p.on_column is not None:
            out.setdefault(p.on_column, what)
        try:
            rule = (
                parse_row_filter(p.body, fields)
                if p.policy_type == ROW_FILTER
                else parse_column_mask(p.body, fields, p.on_column or "")
            )
        except ValidationError:
            continue
        for column in rule.columns():
            out.setdefault(column, what)
    return out


# ---- schema changes a table's policies refuse ----------------------------------------------------------

#: The table option readers of a governed table honour (they call ``/auth``).
QUERY_AUTH = "query-auth.enabled"


def refuse_ungoverned_changes(
    identifier: str, schema: TableSchema, policies: Sequence[StoredPolicy], changes: Sequence[SchemaChange]
) -> None:
    """Refuse (``GovernanceConflictError``, 409) a change that would break the table's policies:
    renaming or retyping a column one protects or reads, turning ``query-auth.enabled`` off (or removing
    it) while policies exist. Drop the policies first."""
    protected = protected_columns(policies, schema.fields)
    for change in changes:
        column = None
        if isinstance(change, RenameColumn):
            column, verb = change.old, "rename"
        elif isinstance(change, UpdateColumnType):
            column, verb = change.name, "change the type of"
        if column is not None and column in protected:
            raise GovernanceConflictError(
                f"cannot {verb} column {column!r} of table {identifier}: {protected[column]} protects or "
                "reads it (drop the policy first)",
                table=identifier,
                column=column,
                reason="protected-column",
            )
        turned_off = (
            isinstance(change, SetOption)
            and change.key == QUERY_AUTH
            and change.value.strip().lower() != "true"
        ) or (isinstance(change, RemoveOption) and change.key == QUERY_AUTH)
        if turned_off:
            raise GovernanceConflictError(
                f"cannot turn {QUERY_AUTH} off on table {identifier}: {len(policies)} policies exist (its "
                "readers would stop applying them; drop the policies first)",
                table=identifier,
                reason="query-auth",
            )


def checked_policy(
    schema: TableSchema,
    identifier: str,
    existing: Sequence[StoredPolicy],
    *,
    principal: str,
    policy_type: str,
    column: str | None,
    rule: str,
) -> str:
    """The canonical JSON of a new policy of ``principal`` on the table whose latest schema is ``schema``,
    checked as the management API checks it: the rule against the columns (``PolicyRuleError``, 400), the
    masked column exists (``ColumnNotFoundError``, 404), the table has ``query-auth.enabled=true`` and the
    principal no policy of that identity (``GovernanceConflictError``, ``PolicyAlreadyExistsError``: 409),
    and its rules together still apply (``PolicyConflictError``)."""
    from paimon_meta.errors import ColumnNotFoundError
    from paimon_meta.governance.policies import QueryRules
    from paimon_meta.governance.rules import to_json

    _check_policy_type(policy_type, column)
    if policy_type == ROW_FILTER:
        canonical = to_json(parse_row_filter(rule, schema.fields))
    else:
        if column not in {f.name for f in schema.fields}:
            raise ColumnNotFoundError(
                f"table {identifier} has no column {column!r}", identifier=identifier, column=column
            )
        canonical = to_json(parse_column_mask(rule, schema.fields, column or ""))
    if str(schema.options.get(QUERY_AUTH, "false")).strip().lower() != "true":
        raise GovernanceConflictError(
            f"table {identifier} does not have {QUERY_AUTH}=true: its readers would not apply the policy "
            "(set the option first)",
            table=identifier,
            reason="query-auth",
        )
    theirs = [p for p in existing if p.principal == principal]
    if any(p.policy_type == policy_type and p.on_column == column for p in theirs):
        what = "a row filter" if column is None else f"a mask on column {column!r}"
        raise PolicyAlreadyExistsError(
            f"principal {principal!r} already has {what} on table {identifier}", table=identifier
        )
    QueryRules.combine(
        [p.body for p in theirs if p.policy_type == ROW_FILTER]
        + ([canonical] if policy_type == ROW_FILTER else []),
        [(p.on_column or "", p.body) for p in theirs if p.policy_type == COLUMN_MASKING]
        + ([(column or "", canonical)] if policy_type == COLUMN_MASKING else []),
        schema.fields,
    )
    return canonical
