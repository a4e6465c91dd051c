"""Principals, bearer tokens and grants of the commit service (migration 0003).

Auth is data: a principal has tokens (only their SHA-256 is stored; a token is 256 random bits, shown
once when issued) and grants. A grant gives ``read``, ``write`` or ``admin`` on the catalog (no
database), a database (no table) or one table; each privilege implies the weaker ones
(admin > write > read), and a wider scope covers the narrower ones inside it. :func:`Access.allows`
is the one check every service route goes through.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from paimon_meta.db.models import Grant, Principal, Privilege, Token
from paimon_meta.errors import PrincipalAlreadyExistsError, PrincipalNotFoundError, ValidationError
from paimon_meta.model.identifier import validate_identifier

TOKEN_PREFIX = "pmt_"
_RANK = {Privilege.READ: 1, Privilege.WRITE: 2, Privilege.ADMIN: 3}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


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


@dataclass(frozen=True, slots=True)
class Access:
    """An authenticated principal and what it may do."""

    principal: str
    grants: tuple[GrantRow, ...]

    def allows(self, privilege: Privilege, database: str | None = None, table: str | None = None) -> bool:
        """Whether some grant gives ``privilege`` (or a stronger one) over the catalog object named by
        ``database``/``table`` (both None: the catalog itself)."""
        need = _RANK[privilege]
        return any(_RANK[g.privilege] >= need and g.scope.covers(database, table) for g in self.grants)

    def sees_database(self, database: str) -> bool:
        """Whether any grant reaches into ``database`` (for listings: a table grant shows its database)."""
        return any(g.scope.database in (None, database) for g in self.grants)


@dataclass(frozen=True, slots=True)
class PrincipalInfo:
    name: str
    created_at: datetime
    created_by: str | None
    grants: tuple[GrantRow, ...]
    tokens: tuple[tuple[str, datetime, datetime | None], ...]  # (prefix, created, revoked)


class Principals:
    """Create principals, issue and revoke tokens, grant and revoke; authenticate tokens."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(self, name: str, *, created_by: str | None = None) -> str:
        """Create principal ``name`` and return its first token (shown once: only a hash is kept)."""
        validate_identifier("principal", name)
        try:
            with self.engine.begin() as conn:
                pid = conn.execute(
                    insert(Principal)
                    .values(name=name, created_by=created_by)
                    .returning(Principal.principal_id)
                ).scalar_one()
                return self._issue(conn, pid)
        except IntegrityError:
            raise PrincipalAlreadyExistsError(f"principal {name!r} already exists", principal=name) from None

    def issue_token(self, name: str) -> str:
        """A new token for ``name`` (its other tokens stay valid)."""
        with self.engine.begin() as conn:
            return self._issue(conn, self._id(conn, name))

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
    ) -> bool:
        """Grant; False if the principal already had exactly this grant."""
        scope = _scope(database, table)
        with self.engine.begin() as conn:
            pid = self._id(conn, name)
            exists = conn.execute(
                select(Grant.grant_id).where(
                    Grant.principal_id == pid,
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
                )
            )
            return True

    def revoke(
        self, name: str, privilege: Privilege, *, database: str | None = None, table: str | None = None
    ) -> bool:
        """Revoke exactly this grant; False if there was none."""
        scope = _scope(database, table)
        with self.engine.begin() as conn:
            pid = self._id(conn, name)
            done = conn.execute(
                delete(Grant).where(
                    Grant.principal_id == pid,
                    Grant.privilege == privilege.value,
                    Grant.database_name.is_not_distinct_from(scope.database),
                    Grant.table_name.is_not_distinct_from(scope.table),
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
                    (t.token_prefix, t.created_at, t.revoked_at)
                    for t in tokens
                    if t.principal_id == p.principal_id
                ),
            )
            for p in principals
        ]

    def authenticate(self, token: str) -> Access | None:
        """The principal a live token belongs to, with its grants; None for an unknown, revoked or
        expired token. One query."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 256:
            return None
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT p.name, g.privilege, g.database_name, g.table_name"
                    " FROM paimon_tokens t JOIN paimon_principals p ON p.principal_id = t.principal_id"
                    " LEFT JOIN paimon_grants g ON g.principal_id = p.principal_id"
                    " WHERE t.token_hash = :h AND t.revoked_at IS NULL"
                    " AND (t.expires_at IS NULL OR t.expires_at > now())"
                ),
                {"h": hash_token(token)},
            ).all()
        if not rows:
            return None
        grants = tuple(
            GrantRow(Privilege(r.privilege), Scope(r.database_name, r.table_name))
            for r in rows
            if r.privilege is not None
        )
        return Access(rows[0].name, grants)

    @staticmethod
    def _issue(conn: Connection, principal_id: int) -> str:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        conn.execute(
            insert(Token).values(
                principal_id=principal_id,
                token_hash=hash_token(token),
                token_prefix=token[: len(TOKEN_PREFIX) + 8],
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
    return GrantRow(Privilege(g.privilege), Scope(g.database_name, g.table_name))
