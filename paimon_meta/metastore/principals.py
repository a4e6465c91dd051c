"""Principals, bearer tokens and grants of the commit service (migration 0003).

Auth is data: a principal has tokens (only their SHA-256 is stored; a token is 256 random bits, shown
once when issued, optionally with an expiry) and grants. A grant gives ``read``, ``write`` or ``admin``
on the catalog (no database), a database (no table) or one table. What a principal may do is decided in
Paimon's permission model (``governance.evaluate.decide``, docs/GOVERNANCE.md): an :class:`Access`
carries the caller's ``Subject`` (the principal and its groups) and its assignments, and every check of
the service is one (resource, access) decided on them. Those are the stored assignments
(``paimon_assignments``, metastore/assignments.py) of the principal, its groups and the groups and roles
it is a member of, read with the token's lookup (``_HELD_SQL``). A grant writes its row and its bundle's
assignments (``governance.bundles``) in one transaction (:meth:`Principals.grant`), so grants keep
meaning what they did; :func:`assignments_from_grants` (the bundles of given grants) serves only an
``Access`` built by hand (tests, tools) without stored assignments.

A principal is a service-wide identity; its grants are per catalog (migration 0020): each grant names the
catalog key of the catalog it applies in, or none: "the default catalog" (the one ``paimon-meta serve
--catalog-name`` names; every grant made before catalogs existed). Invariant: a request of catalog C is
checked against ``Access.in_catalog(C)`` only, which keeps the grants and assignments of C (and the
unnamed ones only when C is the default): a grant never reaches into another catalog. Service-level privileges
(``create_catalog``) are outside every catalog (``Access.service``).

Principal names live in three namespaces that cannot meet (invariant: a name says how it signs in):

* ``alice``: an identifier (``IDENTIFIER_PATTERN``, never a ``:``), created by an operator; signs in
  with static tokens (``pmt_...``).
* ``user:<claim>``: a person or job signed in by the identity provider (OIDC, ``service.oidc``): the
  configured claim's value after ``user:``, created on its first sign-in with no grants, recorded as
  created by ``oidc:<issuer>``; it has no static tokens, and a token of another issuer never signs in
  as it.
* ``group:<name>``: a group an operator created (``principals create-group``) to hold grants; a
  signed-in user whose groups claim lists ``<name>`` gets its grants too. It has no tokens and never
  signs in itself.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Row, delete, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from paimon_meta.db import budget
from paimon_meta.db.models import Grant, Principal, Privilege, ServiceGrant, ServicePrivilege, Token
from paimon_meta.db.pool import SessionPool, Statement, run_batch
from paimon_meta.errors import PrincipalAlreadyExistsError, PrincipalNotFoundError, ValidationError
from paimon_meta.governance.bundles import Bundle, bundle_assignments
from paimon_meta.governance.evaluate import Decision, Subject, decide, sees
from paimon_meta.governance.permissions import Access as PermissionAccess
from paimon_meta.governance.permissions import Assignment, Resource, ResourceType
from paimon_meta.metastore.assignments import Assignments, _principal_id, assignment_of_row
from paimon_meta.metastore.principal_names import external_name
from paimon_meta.model.identifier import validate_identifier

log = logging.getLogger(__name__)

TOKEN_PREFIX = "pmt_"
#: Name prefixes of the principals the identity provider signs in, and of groups (the module docstring).
USER_PREFIX = "user:"
GROUP_PREFIX = "group:"
#: Most groups of one sign-in looked up (the rest are ignored: fewer grants, never more).
MAX_GROUPS = 256


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def user_principal(value: object) -> str:
    """The principal a signed-in user is: ``user:<value>`` (``ValidationError`` as :func:`external_name`)."""
    return USER_PREFIX + external_name("user", value)


def group_principal(value: object) -> str:
    """The principal of group ``value``: ``group:<value>`` (``ValidationError`` as :func:`external_name`)."""
    return GROUP_PREFIX + external_name("group", value)


def signs_in_with_tokens(name: str) -> bool:
    """Whether principal ``name`` may hold static tokens (only operator-created ones: no ``:``)."""
    return ":" not in name


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a grant applies: the catalog (both None), a database, or one table of it."""

    database: str | None = None
    table: str | None = None

    def covers(self, database: str | None, table: str | None) -> bool:
        if self.database is None:
            return True
        if self.database != database:
            return False
        return self.table is None or self.table == table

    def __str__(self) -> str:
        if self.database is None:
            return "catalog"
        return self.database if self.table is None else f"{self.database}.{self.table}"


@dataclass(frozen=True, slots=True)
class GrantRow:
    privilege: Privilege
    scope: Scope
    #: The catalog key of the catalog the grant applies in; None: the service's default catalog.
    catalog: str | None = None


@dataclass(frozen=True, slots=True)
class Held:
    """An assignment of a principal or one of its groups, and the catalog key of the catalog it applies
    in (None: the service's default catalog)."""

    catalog: str | None
    assignment: Assignment


def assignments_from_grants(grants: Iterable[tuple[str, GrantRow]]) -> tuple[Held, ...]:
    """The assignments of ``(holder, grant)`` pairs (a principal's own grants and its groups'): each
    grant's bundle (``governance.bundles.bundle_assignments``), in the grant's catalog.

    The one source of every :class:`Access`'s assignments until the stored assignments
    (``paimon_assignments``, whose migration makes them equal to these bundles) replace it. A holder
    whose name Paimon's model cannot carry (longer than 128 characters) holds nothing through it (fail
    closed, logged)."""
    out: list[Held] = []
    for holder, grant in grants:
        try:
            bundle = _bundle(holder, grant.privilege, grant.scope.database, grant.scope.table)
        except ValidationError as e:
            log.warning("grant %s on %s of %r gives nothing: %s", grant.privilege, grant.scope, holder, e)
            continue
        out.extend(Held(grant.catalog, a) for a in bundle)
    return tuple(out)


_BUNDLES: dict[tuple[str, Privilege, str | None, str | None], tuple[Assignment, ...]] = {}


def _bundle(
    holder: str, privilege: Privilege, database: str | None, table: str | None
) -> tuple[Assignment, ...]:
    """``bundle_assignments`` memoized (a bounded cache: a token's re-authentication rebuilds the same
    assignments)."""
    key = (holder, privilege, database, table)
    found = _BUNDLES.get(key)
    if found is None:
        found = bundle_assignments(holder, Bundle(privilege.value), database, table)
        if len(_BUNDLES) > 100_000:
            _BUNDLES.clear()
        _BUNDLES[key] = found
    return found


_Key = tuple[ResourceType, str | None, str | None]
_IN_DATABASE = frozenset({ResourceType.TABLE, ResourceType.VIEW, ResourceType.FUNCTION, ResourceType.COLUMN})


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Access:
    """An authenticated principal and what it may do: its ``subject`` (the principal and its ``groups``,
    principal names) and the assignments of them all (``held``, with the catalog each applies in;
    ``assignments``: those alone, what :meth:`decide` reads). ``grants``: the grants they were made
    from (listings and the change feed's lanes). ``valid_until``: when the credential it was proven by
    expires (epoch seconds; None: only when revoked); no cache keeps it past that, nor past the
    ``expireTime`` of one of its assignments (:meth:`expires_next`). ``held`` None: the bundles of
    ``grants`` (:func:`assignments_from_grants`, all as the principal's)."""

    principal: str
    grants: tuple[GrantRow, ...]
    groups: tuple[str, ...] = ()
    valid_until: float | None = None
    #: Service-level privileges (outside every catalog), of the principal or its groups.
    service: frozenset[ServicePrivilege] = frozenset()
    #: The catalog key this access was narrowed to by :meth:`in_catalog` (None: not narrowed).
    catalog: str | None = None
    held: tuple[Held, ...] | None = None
    assignments: tuple[Assignment, ...] = field(init=False, compare=False)
    subject: Subject = field(init=False, compare=False)
    #: The assignments by the resource they name (positions kept: decisions list them in order), by
    #: database, and the accesses narrowed by :meth:`in_catalog` (built once per cached access).
    _by_resource: dict[_Key, tuple[tuple[int, Assignment], ...]] = field(
        init=False, compare=False, repr=False
    )
    _by_database: dict[str, tuple[Assignment, ...]] = field(init=False, compare=False, repr=False)
    _narrowed: dict[tuple[str, bool], Access] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        held = self.held
        if held is None:
            held = assignments_from_grants((self.principal, g) for g in self.grants)
            object.__setattr__(self, "held", held)
        assignments = tuple(h.assignment for h in held)
        object.__setattr__(self, "assignments", assignments)
        object.__setattr__(self, "subject", Subject(self.principal, self.groups))
        by_resource: dict[_Key, list[tuple[int, Assignment]]] = {}
        by_database: dict[str, list[Assignment]] = {}
        for i, a in enumerate(assignments):
            r = a.resource
            by_resource.setdefault((r.type, r.database, r.object), []).append((i, a))
            if r.database is not None:
                by_database.setdefault(r.database, []).append(a)
        object.__setattr__(self, "_by_resource", {k: tuple(v) for k, v in by_resource.items()})
        object.__setattr__(self, "_by_database", {k: tuple(v) for k, v in by_database.items()})
        object.__setattr__(self, "_narrowed", {})

    def reaching(self, resource: Resource) -> tuple[Assignment, ...]:
        """The assignments that may reach ``resource`` (``governance.evaluate.covers``: the resource
        itself, the ``CATALOG_ALL`` scope for what the catalog holds, its database's ``DATABASE_ALL``
        scope for a table, view or function, a table's ``COLUMN`` ranges and the reverse), in their
        order: what :meth:`decide` reads instead of every assignment (a per-request cost independent of
        how many the subject holds elsewhere; docs/BENCHMARKS.md)."""
        t, db, name = resource.type, resource.database, resource.object
        keys: list[_Key] = [(t, db, name)]
        if t not in (ResourceType.CATALOG, ResourceType.CATALOG_ALL):
            keys.append((ResourceType.CATALOG_ALL, None, None))
        if t in _IN_DATABASE:
            keys.append((ResourceType.DATABASE_ALL, db, None))
        if t is ResourceType.TABLE:
            keys.append((ResourceType.COLUMN, db, name))
        elif t is ResourceType.COLUMN:
            keys.append((ResourceType.TABLE, db, name))
        found = [x for k in keys for x in self._by_resource.get(k, ())]
        if len(keys) > 1:
            found.sort(key=lambda x: x[0])
        return tuple(a for _, a in found)

    def in_catalog(self, catalog_key: str, *, default: bool) -> Access:
        """The access within the catalog ``catalog_key``: only its grants and assignments, and those
        naming no catalog when it is the service's ``default`` catalog (the module docstring's
        invariant)."""

        found = self._narrowed.get((catalog_key, default))
        if found is not None:
            return found

        def here(catalog: str | None) -> bool:
            return catalog == catalog_key or (default and catalog is None)

        found = Access(
            self.principal,
            tuple(g for g in self.grants if here(g.catalog)),
            groups=self.groups,
            valid_until=self.valid_until,
            service=self.service,
            catalog=catalog_key,
            held=tuple(h for h in self.held or () if here(h.catalog)),
        )
        if len(self._narrowed) < 64:  # a cached access serves a few catalogs; never unbounded
            self._narrowed[(catalog_key, default)] = found
        return found

    def has_service(self, privilege: ServicePrivilege) -> bool:
        return privilege in self.service

    def decide(self, resource: Resource, access: PermissionAccess, *, at: datetime | None = None) -> Decision:
        """Whether the subject may perform ``access`` on ``resource`` at ``at`` (now), and why
        (``governance.evaluate.decide`` on its assignments that may reach it)."""
        return decide(self.reaching(resource), self.subject, resource, access, at=at or utc_now())

    def may(self, access: PermissionAccess, resource: Resource, *, at: datetime | None = None) -> bool:
        return self.decide(resource, access, at=at).allowed

    def sees(self, database: str, *, at: datetime | None = None) -> bool:
        """Whether an active assignment reaches into ``database`` (listings: a table's shows its
        database)."""
        reaching = self._by_database.get(database, ()) + tuple(
            a for _, a in self._by_resource.get((ResourceType.CATALOG_ALL, None, None), ())
        )
        return sees(reaching, self.subject, database, at or utc_now())

    def holds_any(self, *, at: datetime | None = None) -> bool:
        """Whether any assignment is active at ``at`` (now): "any assignment in" the catalog this access
        was narrowed to."""
        when = at or utc_now()
        return any(a.active(when) for a in self.assignments)

    def expires_next(self, after: float) -> float | None:
        """The first moment after ``after`` (epoch seconds) at which this access changes by itself:
        its credential's expiry or an assignment's ``expireTime``, whichever comes first (None:
        neither). A cached access is not used past it."""
        moments = [a.expire_time.timestamp() for a in self.assignments if a.expire_time is not None]
        moments = [m for m in moments if m > after]
        if self.valid_until is not None:
            moments.append(self.valid_until)
        return min(moments, default=None)


@dataclass(frozen=True, slots=True)
class Standing:
    """What :meth:`Principals.standing` found: ``tokens`` maps the hash of each static token still
    valid to its access (a revoked, expired or unknown one is absent); ``grants`` maps each principal
    name that still exists to its own grants (a deleted one is absent), ``held`` to its own
    assignments (absent: the bundles of its grants)."""

    tokens: Mapping[str, Access]
    grants: Mapping[str, tuple[GrantRow, ...]]
    held: Mapping[str, tuple[Held, ...]] = field(default_factory=dict)

    def held_by(self, name: str) -> tuple[Held, ...]:
        """``name``'s own assignments (it exists: it is in ``grants``)."""
        found = self.held.get(name)
        if found is None:
            found = assignments_from_grants((name, g) for g in self.grants[name])
        return found


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A static token as listings show it: its first characters, never the token."""

    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class PrincipalInfo:
    name: str
    created_at: datetime
    created_by: str | None
    grants: tuple[GrantRow, ...]
    tokens: tuple[TokenInfo, ...]


class Principals:
    """Create principals, issue and revoke tokens, grant and revoke; authenticate tokens."""

    def __init__(self, engine: Engine, *, sessions: SessionPool | None = None) -> None:
        self.engine = engine
        #: Plain autocommit connections for :meth:`authenticate` (one round trip; see there). None: the
        #: engine's pooled connections (a CLI, tests).
        self.sessions = sessions

    def create(self, name: str, *, created_by: str | None = None, expires_in: timedelta | None = None) -> str:
        """Create principal ``name`` and return its first token (shown once: only a hash is kept),
        valid for ``expires_in`` (None: until revoked)."""
        validate_identifier("principal", name)
        try:
            with self.engine.begin() as conn:
                pid = conn.execute(
                    insert(Principal)
                    .values(name=name, created_by=created_by)
                    .returning(Principal.principal_id)
                ).scalar_one()
                return self._issue(conn, pid, expires_in)
        except IntegrityError:
            raise PrincipalAlreadyExistsError(f"principal {name!r} already exists", principal=name) from None

    def create_group(self, name: str, *, created_by: str | None = None) -> str:
        """Create the group principal ``group:<name>`` (no token: it only holds grants, which users
        whose groups claim lists ``name`` get) and return its principal name."""
        principal = group_principal(name)
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(Principal).values(name=principal, created_by=created_by))
        except IntegrityError:
            raise PrincipalAlreadyExistsError(
                f"principal {principal!r} already exists", principal=principal
            ) from None
        return principal

    def issue_token(self, name: str, *, expires_in: timedelta | None = None) -> str:
        """A new token for ``name``, valid for ``expires_in`` (None: until revoked); its other tokens
        stay valid. Users and groups (``user:``, ``group:``) hold no static tokens: ``ValidationError``."""
        if not signs_in_with_tokens(name):
            raise ValidationError(
                f"principal {name!r} signs in through the identity provider (or is a group): it holds "
                "no static tokens",
                principal=name,
            )
        with self.engine.begin() as conn:
            return self._issue(conn, self._id(conn, name), expires_in)

    def revoke_tokens(self, name: str, *, prefix: str | None = None) -> int:
        """Revoke ``name``'s tokens (only the one starting with ``prefix``, if given); returns how many."""
        with self.engine.begin() as conn:
            pid = self._id(conn, name)
            statement = (
                update(Token)
                .where(Token.principal_id == pid, Token.revoked_at.is_(None))
                .values(revoked_at=text("now()"))
            )
            if prefix is not None:
                statement = statement.where(Token.token_prefix == prefix[: len(TOKEN_PREFIX) + 8])
            return int(conn.execute(statement).rowcount)

    def grant(
        self,
        name: str,
        privilege: Privilege,
        *,
        database: str | None = None,
        table: str | None = None,
        granted_by: str | None = None,
        catalog_key: str | None = None,
        conn: Connection | None = None,
    ) -> bool:
        """Grant in the catalog ``catalog_key`` (None: the default catalog); False if the principal
        already had exactly this grant. ``conn``: in the caller's transaction.

        Invariant: the legacy grant row (which replicas of the previous release read) and its bundle's
        assignments (``paimon_assignments``, what every check of this release decides on) are written in
        one transaction, so the two never disagree about what a grant gives."""
        scope = _scope(database, table)
        if catalog_key is not None:
            validate_identifier("catalog key", catalog_key)
        if conn is not None:
            return self._grant_with_bundle(
                conn, name, privilege, scope, granted_by=granted_by, catalog_key=catalog_key
            )
        with self.engine.begin() as own:
            return self._grant_with_bundle(
                own, name, privilege, scope, granted_by=granted_by, catalog_key=catalog_key
            )

    def _grant_with_bundle(
        self,
        conn: Connection,
        name: str,
        privilege: Privilege,
        scope: Scope,
        *,
        granted_by: str | None,
        catalog_key: str | None,
    ) -> bool:
        new = self._grant(conn, name, privilege, scope, granted_by=granted_by, catalog_key=catalog_key)
        Assignments(self.engine, catalog_key=catalog_key, default=catalog_key is None).grant_bundle(
            conn, name, privilege, database=scope.database, table=scope.table, granted_by=granted_by
        )
        return new

    def _grant(
        self,
        conn: Connection,
        name: str,
        privilege: Privilege,
        scope: Scope,
        *,
        granted_by: str | None,
        catalog_key: str | None,
    ) -> bool:
        pid = self._id(conn, name)
        exists = conn.execute(
            select(Grant.grant_id).where(
                Grant.principal_id == pid,
                Grant.catalog_key.is_not_distinct_from(catalog_key),
                Grant.privilege == privilege.value,
                Grant.database_name.is_not_distinct_from(scope.database),
                Grant.table_name.is_not_distinct_from(scope.table),
            )
        ).first()
        if exists is not None:
            return False
        conn.execute(
            insert(Grant).values(
                principal_id=pid,
                privilege=privilege.value,
                database_name=scope.database,
                table_name=scope.table,
                granted_by=granted_by,
                catalog_key=catalog_key,
            )
        )
        return True

    def revoke(
        self,
        name: str,
        privilege: Privilege,
        *,
        database: str | None = None,
        table: str | None = None,
        catalog_key: str | None = None,
    ) -> bool:
        """Revoke exactly this grant (of the catalog ``catalog_key``; None: the default catalog) and the
        assignments of its bundle no remaining grant gives (one transaction, as :meth:`grant`); False if
        there was none."""
        return revoke_privilege(
            self.engine, name, privilege, database=database, table=table, catalog_key=catalog_key
        )

    def grant_service(self, name: str, privilege: ServicePrivilege, *, granted_by: str | None = None) -> bool:
        """Grant a service-level privilege; False if the principal already had it."""
        with self.engine.begin() as conn:
            pid = self._id(conn, name)
            done = conn.execute(
                pg_insert(ServiceGrant)
                .values(principal_id=pid, privilege=privilege.value, granted_by=granted_by)
                .on_conflict_do_nothing(index_elements=[ServiceGrant.principal_id, ServiceGrant.privilege])
                .returning(ServiceGrant.grant_id)
            )
            return done.first() is not None

    def revoke_service(self, name: str, privilege: ServicePrivilege) -> bool:
        """Revoke a service-level privilege; False if there was none."""
        with self.engine.begin() as conn:
            pid = self._id(conn, name)
            done = conn.execute(
                delete(ServiceGrant).where(
                    ServiceGrant.principal_id == pid, ServiceGrant.privilege == privilege.value
                )
            )
            return bool(done.rowcount)

    def list(self) -> list[PrincipalInfo]:
        with Session(self.engine) as session:
            principals = session.scalars(select(Principal).order_by(Principal.name)).all()
            grants = session.scalars(select(Grant).order_by(Grant.grant_id)).all()
            tokens = session.scalars(select(Token).order_by(Token.token_id)).all()
        return [
            PrincipalInfo(
                name=p.name,
                created_at=p.created_at,
                created_by=p.created_by,
                grants=tuple(_grant_row(g) for g in grants if g.principal_id == p.principal_id),
                tokens=tuple(
                    TokenInfo(t.token_prefix, t.created_at, t.revoked_at, t.expires_at)
                    for t in tokens
                    if t.principal_id == p.principal_id
                ),
            )
            for p in principals
        ]

    def authenticate(self, token: str) -> Access | None:
        """The principal a live token belongs to, with its grants; None for an unknown, revoked or
        expired token. One statement (token -> principal -> grants and service grants, joined).

        With ``sessions`` it is also one Postgres round trip (issue 39): an autocommit connection needs
        no BEGIN and no ROLLBACK around the statement, and the pool checks an idle connection without a
        ping (``SessionPool``); the engine's pooled connection costs four (ping, BEGIN, the statement,
        the ROLLBACK of its return). The request's deadline (``db.budget``) bounds the statement in the
        same round trip (a local ``statement_timeout`` ahead of it). Either way the answer is read now,
        at the statement: a revoked token or grant is refused by the next call (the service's cache,
        ``auth_cache_seconds``, bounds how long an answer is reused)."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 256:
            return None
        if self.sessions is not None:
            statements = _bounded()
            statements.append((_AUTHENTICATE_SQL.replace(":h", "%(h)s"), {"h": hash_token(token)}))
            statements.append((_HELD_OF_TOKEN_SQL, {"h": hash_token(token)}))
            with self.sessions.connection() as raw:
                *_, found, stored = run_batch(raw, statements)
            rows: Sequence[Any] = [_Fields(r) for r in found]
            held_rows: Sequence[Any] = [_Fields(r) for r in stored]
        else:
            with self.engine.connect() as conn:
                rows = conn.execute(text(_AUTHENTICATE_SQL), {"h": hash_token(token)}).all()
                held_rows = conn.execute(
                    text(_HELD_OF_TOKEN_SQL.replace("%(h)s", ":h")), {"h": hash_token(token)}
                ).all()
        if not rows:
            return None
        until = rows[0].valid_until
        return _access(
            rows[0].name, rows, valid_until=None if until is None else float(until), stored=held_rows
        )

    def standing(self, token_hashes: Collection[str], names: Collection[str]) -> Standing:
        """Where many credentials stand now, in few queries (the open streams of a replica re-check
        their principals with it): each static token of ``token_hashes`` still valid (not revoked, not
        expired) with its principal and grants, and the grants of each principal of ``names`` that
        still exists (the users the identity provider signed in and their groups)."""
        if not token_hashes and not names:
            return Standing({}, {})
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT t.token_hash, p.name, extract(epoch FROM t.expires_at) AS valid_until,"
                    " g.privilege, g.database_name, g.table_name, g.catalog_key,"
                    " ARRAY(SELECT s.privilege FROM paimon_service_grants s"
                    " WHERE s.principal_id = p.principal_id) AS service"
                    " FROM paimon_tokens t JOIN paimon_principals p ON p.principal_id = t.principal_id"
                    " LEFT JOIN paimon_grants g ON g.principal_id = p.principal_id"
                    " WHERE t.token_hash = ANY(:hashes) AND t.revoked_at IS NULL"
                    " AND (t.expires_at IS NULL OR t.expires_at > now())"
                    " UNION ALL"
                    " SELECT NULL, p.name, NULL, g.privilege, g.database_name, g.table_name, g.catalog_key,"
                    " ARRAY(SELECT s.privilege FROM paimon_service_grants s"
                    " WHERE s.principal_id = p.principal_id) AS service"
                    " FROM paimon_principals p LEFT JOIN paimon_grants g ON g.principal_id = p.principal_id"
                    " WHERE p.name = ANY(:names)"
                ),
                {"hashes": sorted(token_hashes), "names": sorted(names)},
            ).all()
            by_token: dict[str, list[Row[Any]]] = {}
            by_name: dict[str, list[Row[Any]]] = {}
            for r in rows:
                if r.token_hash is not None:
                    by_token.setdefault(r.token_hash, []).append(r)
                else:
                    by_name.setdefault(r.name, []).append(r)
            # the stored assignments: of each token's principal with its groups and roles (one query per
            # principal: a replica's open streams name few), and of each named principal alone
            stored = {
                name: conn.execute(text(_HELD_OF_NAMES_SQL), {"names": [name]}).all()
                for name in sorted({rs[0].name for rs in by_token.values()})
            }
            own = conn.execute(
                text(
                    "SELECT p.name AS principal, a.assignment_id, a.catalog_key, a.resource_type,"
                    " a.database_name, a.object_name, a.access, a.column_names, a.excluded_column_names,"
                    " a.expire_time FROM paimon_principals p JOIN paimon_assignments a"
                    " ON a.principal_id = p.principal_id WHERE p.name = ANY(:names)"
                    " AND (a.expire_time IS NULL OR a.expire_time > now())"
                ),
                {"names": sorted(by_name)},
            ).all()
        tokens = {
            h: _access(
                rs[0].name,
                rs,
                valid_until=None if rs[0].valid_until is None else float(rs[0].valid_until),
                stored=stored[rs[0].name],
            )
            for h, rs in by_token.items()
        }
        grants = {name: _grants(rs) for name, rs in by_name.items()}
        held: dict[str, tuple[Held, ...]] = {name: () for name in grants}
        for name in grants:
            held[name] = stored_held(r for r in own if r.principal == name)[0]
        return Standing(tokens, grants, held)

    def sign_in(
        self, user: str, *, groups: Sequence[str] = (), created_by: str, valid_until: float | None = None
    ) -> Access:
        """The access of ``user`` (a ``user:`` principal, see :func:`user_principal`) signed in by the
        identity provider ``created_by`` names (``oidc:<issuer>``): its grants and those of the existing
        principals among ``groups`` (``group:`` names; at most ``MAX_GROUPS``). ``user`` is created
        with no grants on its first sign-in; replicas signing in the same new user at once create it
        once (``ON CONFLICT DO NOTHING``, then everyone reads the one row). When the user exists, with
        ``sessions``: one Postgres round trip (its two reads in one simple query, bounded by the
        request's deadline like :meth:`authenticate`); the engine's transaction otherwise, and for
        the first sign-in.

        Raises:
            ValidationError: ``user`` is not a ``user:`` name or a group not a ``group:`` name.
            PrincipalAlreadyExistsError: ``user`` exists but was created by another identity provider
                (an issuer's subjects are unique only within it: another issuer's token never signs in
                as it).
        """
        if not user.startswith(USER_PREFIX):
            raise ValidationError(f"{user!r} is not a signed-in user's principal name", principal=user)
        groups = tuple(dict.fromkeys(groups))[:MAX_GROUPS]
        for group in groups:
            if not group.startswith(GROUP_PREFIX):
                raise ValidationError(f"{group!r} is not a group's principal name", principal=group)
        names = [user, *groups]
        if self.sessions is not None:
            # One round trip when the user exists (issue 39): both reads in one simple query on an
            # autocommit connection (no ping, BEGIN or COMMIT), each statement READ COMMITTED as in the
            # transaction below. A first sign-in (no row yet) takes the transaction below: once per user.
            statements = _bounded()
            statements.append((_NAMED_BATCH_SQL, {"names": names}))
            statements.append((_HELD_OF_NAMES_BATCH_SQL, {"names": names}))
            with self.sessions.connection() as raw:
                *_, found, stored = run_batch(raw, statements)
            if any(r["name"] == user for r in found):
                return self._signed_in(
                    user,
                    [_Fields(r) for r in found],
                    created_by=created_by,
                    valid_until=valid_until,
                    held_rows=[_Fields(r) for r in stored],
                )
        with self.engine.begin() as conn:
            rows = self._named(conn, names)
            if not any(r.name == user for r in rows):
                conn.execute(
                    pg_insert(Principal)
                    .values(name=user, created_by=created_by)
                    .on_conflict_do_nothing(index_elements=[Principal.name])
                )
                # READ COMMITTED: this statement sees the row whichever transaction inserted it (a
                # concurrent insert of the same name made ours wait for it and do nothing).
                rows = self._named(conn, names)
            held_rows = conn.execute(text(_HELD_OF_NAMES_SQL), {"names": names}).all()
        return self._signed_in(
            user, rows, created_by=created_by, valid_until=valid_until, held_rows=held_rows
        )

    @staticmethod
    def _signed_in(
        user: str,
        rows: Sequence[Any],
        *,
        created_by: str,
        valid_until: float | None,
        held_rows: Sequence[Any],
    ) -> Access:
        """The access of :meth:`sign_in` from its two reads (``_named``'s rows and ``_HELD_SQL``'s)."""
        mine = [r for r in rows if r.name == user]
        if not mine:  # dropped by an operator between our insert and our read
            raise PrincipalNotFoundError(f"principal {user!r} was deleted while signing in", principal=user)
        if mine[0].created_by != created_by:
            raise PrincipalAlreadyExistsError(
                f"principal {user!r} was created by {mine[0].created_by!r}, not {created_by!r}",
                principal=user,
            )
        return _access(
            user,
            rows,
            groups=tuple(sorted({r.name for r in rows if r.name != user})),
            valid_until=valid_until,
            stored=held_rows,
        )

    @staticmethod
    def _named(conn: Connection, names: Sequence[str]) -> Sequence[Row[Any]]:
        """Principals among ``names`` with their grants (one row per grant; grant fields None without)."""
        return conn.execute(text(_NAMED_SQL), {"names": list(names)}).all()

    @staticmethod
    def _issue(conn: Connection, principal_id: int, expires_in: timedelta | None = None) -> str:
        if expires_in is not None and expires_in <= timedelta(0):
            raise ValidationError(f"a token's lifetime must be positive, got {expires_in}")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        conn.execute(
            insert(Token).values(
                principal_id=principal_id,
                token_hash=hash_token(token),
                token_prefix=token[: len(TOKEN_PREFIX) + 8],
                # The metastore's clock, as ``authenticate`` compares with it.
                expires_at=None if expires_in is None else func.now() + expires_in,
            )
        )
        return token

    @staticmethod
    def _id(conn: Connection, name: str) -> int:
        pid = conn.execute(select(Principal.principal_id).where(Principal.name == name)).scalar_one_or_none()
        if pid is None:
            raise PrincipalNotFoundError(f"principal {name!r} does not exist", principal=name)
        return int(pid)


def _scope(database: str | None, table: str | None) -> Scope:
    if table is not None and database is None:
        raise ValidationError("a table grant needs its database", table=table)
    if database is not None:
        validate_identifier("database", database)
    if table is not None:
        validate_identifier("table", table)
    return Scope(database, table)


def _grant_row(g: Grant) -> GrantRow:
    return GrantRow(Privilege(g.privilege), Scope(g.database_name, g.table_name), g.catalog_key)


def _bounded() -> list[Statement]:
    """The statements that bound a one-query batch by the request's deadline (``db.budget``): a local
    ``statement_timeout`` first (local to the implicit transaction of the one simple query: it ends
    with it), none without a deadline.

    Raises:
        RequestBoundError: the request's budget is already spent or cancelled.
    """
    current = budget.current()
    if current is None:
        return []
    current.check()
    left = current.remaining()
    if left is None:
        return []
    return [("SELECT set_config('statement_timeout', %(t)s, true)", {"t": f"{max(1, int(left * 1000))}ms"})]


#: Principals among ``:names`` with their grants and service grants (``Principals._named``).
_NAMED_SQL = (
    "SELECT p.name, p.created_by, g.privilege, g.database_name, g.table_name, g.catalog_key,"
    " ARRAY(SELECT s.privilege::text FROM paimon_service_grants s"
    " WHERE s.principal_id = p.principal_id) AS service"
    " FROM paimon_principals p LEFT JOIN paimon_grants g ON g.principal_id = p.principal_id"
    " WHERE p.name = ANY(:names)"
)
#: ``_NAMED_SQL`` in psycopg's parameter style (``run_batch``).
_NAMED_BATCH_SQL = _NAMED_SQL.replace(":names", "%(names)s")


#: The principal, grants and service grants of a live static token, in one statement (``:h``: its hash).
_AUTHENTICATE_SQL = (
    "SELECT p.name, extract(epoch FROM t.expires_at) AS valid_until,"
    " g.privilege, g.database_name, g.table_name, g.catalog_key,"
    " ARRAY(SELECT s.privilege::text FROM paimon_service_grants s"
    " WHERE s.principal_id = p.principal_id) AS service"
    " FROM paimon_tokens t JOIN paimon_principals p ON p.principal_id = t.principal_id"
    " LEFT JOIN paimon_grants g ON g.principal_id = p.principal_id"
    " WHERE t.token_hash = :h AND t.revoked_at IS NULL"
    " AND (t.expires_at IS NULL OR t.expires_at > now())"
)


#: The active stored assignments (``paimon_assignments``, every catalog) of the principals ``direct`` names
#: and of the groups and roles they are members of (``paimon_principal_members``): one index range of
#: ``ix_paimon_assignments_principal`` per principal (LATERAL). ``%s``: the ``direct`` CTE's body.
_HELD_SQL = (
    "WITH direct AS (%s),"
    " who AS (SELECT principal_id, name FROM direct UNION SELECT g.principal_id, g.name"
    " FROM paimon_principal_members m JOIN direct d ON d.principal_id = m.member_id"
    " JOIN paimon_principals g ON g.principal_id = m.group_id)"
    " SELECT w.name AS principal, a.assignment_id, a.catalog_key, a.resource_type, a.database_name,"
    " a.object_name, a.access, a.column_names, a.excluded_column_names, a.expire_time"
    " FROM who w LEFT JOIN LATERAL (SELECT * FROM paimon_assignments a"
    " WHERE a.principal_id = w.principal_id AND (a.expire_time IS NULL OR a.expire_time > now())) a ON true"
)
#: ``_HELD_SQL`` for the principal of a live token (``%(h)s``: its hash), psycopg's parameter style.
_HELD_OF_TOKEN_SQL = _HELD_SQL % (
    "SELECT p.principal_id, p.name FROM paimon_tokens t JOIN paimon_principals p"
    " ON p.principal_id = t.principal_id WHERE t.token_hash = %(h)s AND t.revoked_at IS NULL"
    " AND (t.expires_at IS NULL OR t.expires_at > now())"
)
#: ``_HELD_SQL`` for the principals named ``:names`` (SQLAlchemy's parameter style).
_HELD_OF_NAMES_SQL = _HELD_SQL % "SELECT principal_id, name FROM paimon_principals WHERE name = ANY(:names)"
#: ``_HELD_OF_NAMES_SQL`` in psycopg's parameter style (``run_batch``).
_HELD_OF_NAMES_BATCH_SQL = _HELD_OF_NAMES_SQL.replace(":names", "%(names)s")


def stored_held(rows: Iterable[Any]) -> tuple[tuple[Held, ...], tuple[str, ...]]:
    """The assignments of ``_HELD_SQL``'s rows, each in its catalog, and every holder named (the
    principals asked for and the groups and roles they are members of)."""
    rows = list(rows)
    held = tuple(Held(r.catalog_key, assignment_of_row(r)) for r in rows if r.assignment_id is not None)
    return held, tuple(sorted({r.principal for r in rows}))


class _Fields:
    """A row of ``run_batch`` (a dict) read by attribute, as SQLAlchemy's rows are."""

    __slots__ = ("_row",)

    def __init__(self, row: dict[str, Any]) -> None:
        self._row = row

    def __getattr__(self, name: str) -> Any:
        try:
            return self._row[name]
        except KeyError:
            raise AttributeError(name) from None


def _grants(rows: Sequence[Row[Any]]) -> tuple[GrantRow, ...]:
    """The grants of query rows joined LEFT with ``paimon_grants`` (a principal without grants: one
    row whose grant fields are None)."""
    return tuple(
        GrantRow(Privilege(r.privilege), Scope(r.database_name, r.table_name), r.catalog_key)
        for r in rows
        if r.privilege is not None
    )


def _access(
    principal: str,
    rows: Sequence[Row[Any]],
    *,
    groups: tuple[str, ...] = (),
    valid_until: float | None,
    stored: Sequence[Any],
) -> Access:
    """The access of ``principal`` (and ``groups``) from query rows of them joined LEFT with their
    grants (each row names its holder: ``name``) and ``stored``, ``_HELD_SQL``'s rows: its assignments
    are the stored ones (every grant's bundle among them, written with the grant), and the groups and
    roles it is a member of join its subject."""
    held, holders = stored_held(stored)
    members = tuple(sorted({*groups, *(h for h in holders if h != principal)}))
    return Access(
        principal,
        _grants(rows),
        groups=members,
        valid_until=valid_until,
        service=_service(rows),
        held=held,
    )


def _service(rows: Sequence[Row[Any]]) -> frozenset[ServicePrivilege]:
    """The service-level privileges of query rows carrying a ``service`` array (unknown values of a
    newer release are ignored: fewer privileges, never more)."""
    known = {p.value for p in ServicePrivilege}
    return frozenset(ServicePrivilege(v) for r in rows for v in (r.service or ()) if v in known)


def revoke_privilege(
    engine: Engine,
    name: str,
    privilege: Privilege,
    *,
    database: str | None = None,
    table: str | None = None,
    revoked_by: str | None = None,
    catalog_key: str | None = None,
) -> bool:
    """``paimon-meta principals revoke``: the legacy grant row and the assignments of its bundle that no
    remaining grant of the principal (in that catalog) gives too; False if there was no such grant."""
    scope = _scope(database, table)
    store = Assignments(engine, catalog_key=catalog_key, default=catalog_key is None)
    with engine.begin() as conn:
        pid = _principal_id(conn, name)
        gone = conn.execute(
            text(
                "DELETE FROM paimon_grants WHERE principal_id = :p AND catalog_key IS NOT DISTINCT FROM :k"
                " AND privilege = :v AND database_name IS NOT DISTINCT FROM :d"
                " AND table_name IS NOT DISTINCT FROM :t"
            ),
            {"p": pid, "k": catalog_key, "v": privilege.value, "d": scope.database, "t": scope.table},
        ).rowcount
        remaining = [
            (Privilege(r.privilege), r.database_name, r.table_name)
            for r in conn.execute(
                text(
                    "SELECT privilege, database_name, table_name FROM paimon_grants"
                    " WHERE principal_id = :p AND catalog_key IS NOT DISTINCT FROM :k"
                ),
                {"p": pid, "k": catalog_key},
            )
        ]
        store.revoke_bundle(
            conn,
            name,
            privilege,
            database=scope.database,
            table=scope.table,
            revoked_by=revoked_by,
            remaining=remaining,
        )
    return bool(gone)
