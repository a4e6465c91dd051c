"""Views, functions and semantic views in the metastore: ``paimon_views`` (Java ``JdbcCatalog``'s table,
extended), ``paimon_functions`` and ``paimon_semantic_views`` (migration 0016), each create, alter,
upsert, rename and drop recorded in the append-only ``paimon_catalog_object_events`` in the same
transaction (migration 0005).

Invariants, each kept by one statement or one transaction:

- An object's ``version`` is 1 when created and grows by one per alter that changes it; an alter reads
  the row ``FOR UPDATE``, applies the protocol's changes to what it read and writes it back, so two
  concurrent alters apply one after the other and neither is lost.
- Every change of a row and its event commit together (or neither does).
- A view never shares its name with a table of its database (Java's ``JdbcCatalog`` refuses both ways):
  creating or renaming a view takes :func:`lock_object_name` for the target name and then checks
  ``paimon_tables``; a table create that takes the same lock cannot slip in between.
- A semantic view never shares its name with a SQL view of its database (409 either way), checked under
  the same name lock.
- Listings page by key on the unique index (names ``COLLATE "C"``: byte order, the order of the page
  token); a name prefix is an index range, so a page costs the same wherever it starts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Text,
    cast,
    delete,
    exists,
    func,
    insert,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.exc import IntegrityError

from paimon_meta.db.models import (
    CatalogObjectEventRecord,
    CatalogObjectEventType,
    CatalogObjectType,
    PaimonDatabase,
    PaimonFunction,
    PaimonSemanticView,
    PaimonTable,
    PaimonView,
)
from paimon_meta.errors import (
    AlreadyExistsError,
    DatabaseNotFoundError,
    FunctionAlreadyExistsError,
    FunctionNotFoundError,
    NotFoundError,
    SemanticViewAlreadyExistsError,
    SemanticViewNotFoundError,
    ViewAlreadyExistsError,
    ViewNotFoundError,
)
from paimon_meta.model import limits
from paimon_meta.model.catalog_objects import (
    FunctionSpec,
    SemanticViewDefinition,
    ViewSchema,
    apply_function_changes,
    apply_view_changes,
    params_json,
)
from paimon_meta.model.identifier import validate_function_name, validate_identifier
from paimon_meta.model.types import DataField


class Registry(Protocol):
    """What this module needs of :class:`paimon_meta.metastore.registry.Registry`, which imports this
    module (its name lock, view check and database drop): no import back, not even for types."""

    catalog_key: str

    @property
    def engine(self) -> Engine: ...

    def database_exists(self, name: str, *, conn: Connection | None = None) -> bool: ...


@dataclass(frozen=True, slots=True)
class Audit:
    """An object's version and who created and last changed it, when."""

    version: int
    created_at: datetime
    created_by: str | None
    updated_at: datetime
    updated_by: str | None

    @staticmethod
    def of(m: Mapping[Any, Any]) -> Audit:
        return Audit(m["version"], m["created_at"], m["created_by"], m["updated_at"], m["updated_by"])


@dataclass(frozen=True, slots=True)
class ViewRow:
    """A view. ``view_uuid`` is None for a view Java's ``JdbcCatalog`` inserted."""

    view_id: int
    view_uuid: uuid.UUID | None
    database: str
    name: str
    schema: ViewSchema
    audit: Audit

    @property
    def identifier(self) -> str:
        return f"{self.database}.{self.name}"


@dataclass(frozen=True, slots=True)
class FunctionRow:
    """A function."""

    function_id: int
    function_uuid: uuid.UUID
    database: str
    name: str
    spec: FunctionSpec
    audit: Audit

    @property
    def identifier(self) -> str:
        return f"{self.database}.{self.name}"


@dataclass(frozen=True, slots=True)
class SemanticViewRow:
    """A semantic view."""

    semantic_view_id: int
    semantic_view_uuid: uuid.UUID
    database: str
    name: str
    definition: SemanticViewDefinition
    audit: Audit

    @property
    def identifier(self) -> str:
        return f"{self.database}.{self.name}"


Row = TypeVar("Row", ViewRow, FunctionRow, SemanticViewRow)
Definition = TypeVar("Definition", ViewSchema, FunctionSpec, SemanticViewDefinition)


@dataclass(frozen=True, slots=True)
class _Kind(Generic[Row, Definition]):
    """What differs between views and functions: the table, its columns and errors, and how a
    definition becomes column values and back."""

    object_type: CatalogObjectType
    model: Any
    id_column: str
    uuid_column: str
    name_column: str
    not_found: type[NotFoundError]
    already_exists: type[AlreadyExistsError]
    values: Callable[[Definition], dict[str, Any]]
    definition: Callable[[Mapping[Any, Any]], Definition]
    payload: Callable[[Definition], dict[str, Any]]
    row: Callable[[Mapping[Any, Any], Definition], Row]
    #: Refuses texts over ``model.limits`` (a definition about to be stored, and the one it replaces).
    check: Callable[[Definition, Definition | None], None]
    #: The stored definition's size in bytes, in SQL (what a listing page's byte budget counts).
    size: Callable[[], ColumnElement[int]]

    @property
    def kind(self) -> str:
        return self.object_type.value

    def column(self, name: str) -> Any:
        return getattr(self.model, name)


def _fields(raw: Any) -> tuple[DataField, ...] | None:
    return None if raw is None else tuple(DataField.from_json(f) for f in raw)


def _function_values(spec: FunctionSpec) -> dict[str, Any]:
    return {
        "input_params": params_json(spec.input_params),
        "return_params": params_json(spec.return_params),
        "deterministic": spec.deterministic,
        "definitions": spec.definitions,
        "comment": spec.comment,
        "options": spec.options,
    }


def _function_spec(m: Mapping[Any, Any]) -> FunctionSpec:
    return FunctionSpec(
        input_params=_fields(m["input_params"]),
        return_params=_fields(m["return_params"]),
        deterministic=m["deterministic"],
        definitions=dict(m["definitions"]),
        comment=m["comment"],
        options=dict(m["options"]),
    )


def _octets(column: Any) -> ColumnElement[int]:
    """A column's size as text, in bytes (0 when null)."""
    return func.coalesce(func.octet_length(cast(column, Text)), 0)


VIEWS: _Kind[ViewRow, ViewSchema] = _Kind(
    object_type=CatalogObjectType.VIEW,
    model=PaimonView,
    id_column="view_id",
    uuid_column="view_uuid",
    name_column="view_name",
    not_found=ViewNotFoundError,
    already_exists=ViewAlreadyExistsError,
    values=lambda schema: {"view_schema": schema.to_text()},
    definition=lambda m: ViewSchema.from_text(m["view_schema"]),
    payload=lambda schema: {"schema": schema.to_json()},
    row=lambda m, schema: ViewRow(
        m["view_id"], m["view_uuid"], m["database_name"], m["view_name"], schema, Audit.of(m)
    ),
    check=limits.check_view,
    size=lambda: func.octet_length(PaimonView.view_schema),
)
FUNCTIONS: _Kind[FunctionRow, FunctionSpec] = _Kind(
    object_type=CatalogObjectType.FUNCTION,
    model=PaimonFunction,
    id_column="function_id",
    uuid_column="function_uuid",
    name_column="function_name",
    not_found=FunctionNotFoundError,
    already_exists=FunctionAlreadyExistsError,
    values=_function_values,
    definition=_function_spec,
    payload=lambda spec: {"function": spec.to_json()},
    row=lambda m, spec: FunctionRow(
        m["function_id"], m["function_uuid"], m["database_name"], m["function_name"], spec, Audit.of(m)
    ),
    check=limits.check_function,
    size=lambda: (
        _octets(PaimonFunction.definitions)
        + _octets(PaimonFunction.comment)
        + _octets(PaimonFunction.options)
        + _octets(PaimonFunction.input_params)
        + _octets(PaimonFunction.return_params)
    ),
)

SEMANTIC_VIEWS: _Kind[SemanticViewRow, SemanticViewDefinition] = _Kind(
    object_type=CatalogObjectType.SEMANTIC_VIEW,
    model=PaimonSemanticView,
    id_column="semantic_view_id",
    uuid_column="semantic_view_uuid",
    name_column="name",
    not_found=SemanticViewNotFoundError,
    already_exists=SemanticViewAlreadyExistsError,
    values=lambda d: {"format": d.format, "content": d.content},
    definition=lambda m: SemanticViewDefinition(m["format"], m["content"]),
    payload=lambda d: {"definition": d.to_json()},
    row=lambda m, d: SemanticViewRow(
        m["semantic_view_id"],
        m["semantic_view_uuid"],
        m["database_name"],
        m["name"],
        d,
        Audit.of(m),
    ),
    check=limits.check_semantic_view,
    size=lambda: func.octet_length(PaimonSemanticView.content) + func.octet_length(PaimonSemanticView.format),
)


def lock_object_name(conn: Connection, catalog_key: str, database: str, name: str) -> None:
    """Serialise, until ``conn``'s transaction ends, everything that creates a table or view named
    ``database.name`` (a transaction-scoped advisory lock on the name)."""
    conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
        {"key": f"paimon-meta object name\x1f{catalog_key}\x1f{database}\x1f{name}"},
    )


def view_exists(conn: Connection, catalog_key: str, database: str, name: str) -> bool:
    """Whether ``database.name`` is a view: what a table create or rename must refuse (Java's
    ``JdbcCatalog`` does), after taking :func:`lock_object_name` for the name in the same transaction."""
    query = exists().where(
        PaimonView.catalog_key == catalog_key,
        PaimonView.database_name == database,
        PaimonView.view_name == name,
    )
    return bool(conn.execute(select(query)).scalar())


def name_range(pattern: str | None) -> tuple[str, str | None] | None:
    """The ``[low, high)`` range of names (byte order) a SQL LIKE ``pattern`` can match, from its
    literal prefix (the characters before the first ``%`` or ``_``); None when it has none."""
    if not pattern:
        return None
    cut = min((i for i in (pattern.find("%"), pattern.find("_")) if i >= 0), default=len(pattern))
    prefix = pattern[:cut]
    if not prefix:
        return None
    last = ord(prefix[-1])
    high = None if last >= 0x10FFFF else prefix[:-1] + chr(last + 1)
    return prefix, high


def _record(
    conn: Connection,
    kind: _Kind[Any, Any],
    m: Mapping[Any, Any],
    event: CatalogObjectEventType,
    *,
    catalog_key: str,
    principal: str | None,
    payload: dict[str, Any],
) -> None:
    conn.execute(
        insert(CatalogObjectEventRecord).values(
            object_type=kind.kind,
            object_id=m[kind.id_column],
            catalog_key=catalog_key,
            identifier=f"{m['database_name']}.{m[kind.name_column]}",
            event_type=event.value,
            version=m["version"],
            principal=principal,
            payload=payload,
        )
    )


def drop_database_objects(
    conn: Connection, catalog_key: str, database: str, *, principal: str | None = None
) -> dict[str, list[str]]:
    """Drop every view and function of ``database`` in ``conn``'s transaction, each recorded as a
    ``dropped`` event with what it was; returns the dropped names by kind (``view``, ``function``).

    Run it in the transaction that deletes the database's rows (after locking them): a view or function
    created concurrently then either lands before (and is dropped here) or finds no database."""
    dropped: dict[str, list[str]] = {}
    for kind in (VIEWS, FUNCTIONS, SEMANTIC_VIEWS):
        model = kind.model
        rows = conn.execute(
            delete(model)
            .where(model.catalog_key == catalog_key, model.database_name == database)
            .returning(*model.__table__.c)
        ).all()
        names = []
        for r in sorted(rows, key=lambda r: r._mapping[kind.name_column]):
            m = r._mapping
            _record(
                conn,
                kind,
                m,
                CatalogObjectEventType.DROPPED,
                catalog_key=catalog_key,
                principal=principal,
                payload={"database_drop": True},
            )
            names.append(m[kind.name_column])
        dropped[kind.kind] = names
    return dropped


def restore_database_objects(
    conn: Connection,
    catalog_key: str,
    rows_by_table: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    principal: str | None = None,
) -> dict[str, list[str]]:
    """Insert back, in ``conn``'s transaction, the views, functions and semantic views of a database
    that was dropped (their rows as ``to_jsonb`` kept them, by table name), each recorded as a
    ``created`` event marked ``undrop``; returns the restored names by kind. A name or id taken again
    fails with the database's transaction (``IntegrityError``)."""
    restored: dict[str, list[str]] = {}
    for kind in (VIEWS, FUNCTIONS, SEMANTIC_VIEWS):
        table = kind.model.__tablename__
        rows = list(rows_by_table.get(table, ()))
        if not rows:
            continue
        inserted = (
            conn.execute(
                text(
                    f"INSERT INTO {table} SELECT * FROM "  # noqa: S608 - a constant table name
                    f"jsonb_populate_recordset(NULL::{table}, CAST(:rows AS jsonb)) RETURNING *"
                ),
                {"rows": json.dumps(list(map(dict, rows)))},
            )
            .mappings()
            .all()
        )
        names = []
        for m in sorted(inserted, key=lambda r: r[kind.name_column]):
            _record(
                conn,
                kind,
                m,
                CatalogObjectEventType.CREATED,
                catalog_key=catalog_key,
                principal=principal,
                payload={"undrop": True},
            )
            names.append(m[kind.name_column])
        restored[kind.kind] = names
    return restored


class CatalogObjects:
    """Views and functions of one catalog key (the registry's)."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.catalog_key = registry.catalog_key

    @property
    def engine(self) -> Engine:
        return self.registry.engine

    # ---- views -----------------------------------------------------------------------------------------

    def create_view(self, database: str, name: str, schema: ViewSchema, *, principal: str | None) -> ViewRow:
        """Raises ``DatabaseNotFoundError``, ``ViewAlreadyExistsError`` (a view or a table has the name)."""
        return self._create(VIEWS, database, name, schema, principal=principal)

    def get_view(self, database: str, name: str) -> ViewRow:
        """Raises ``ViewNotFoundError``."""
        return self._get(VIEWS, database, name)

    def list_views(self, **query: Any) -> list[ViewRow]:
        """See :meth:`_page` (the rows only)."""
        return self._page(VIEWS, **query)[0]

    def page_views(self, **query: Any) -> tuple[list[ViewRow], bool]:
        """See :meth:`_page`."""
        return self._page(VIEWS, **query)

    def alter_view(
        self, database: str, name: str, changes: Sequence[Any], *, principal: str | None
    ) -> ViewRow:
        """Apply the protocol's ``ViewChange`` objects (all or nothing). Raises ``ViewNotFoundError``,
        ``DialectNotFoundError``, ``DialectAlreadyExistsError``, ``ValidationError``."""
        return self._alter(VIEWS, database, name, changes, apply_view_changes, principal=principal)

    def rename_view(
        self, database: str, name: str, new_database: str, new_name: str, *, principal: str | None
    ) -> ViewRow:
        """Raises ``ViewNotFoundError``, ``DatabaseNotFoundError`` (the target's),
        ``ViewAlreadyExistsError``."""
        return self._rename(VIEWS, database, name, new_database, new_name, principal=principal)

    def drop_view(self, database: str, name: str, *, principal: str | None) -> ViewRow:
        """Raises ``ViewNotFoundError``."""
        return self._drop(VIEWS, database, name, principal=principal)

    # ---- functions -------------------------------------------------------------------------------------

    def create_function(
        self, database: str, name: str, spec: FunctionSpec, *, principal: str | None
    ) -> FunctionRow:
        """Raises ``DatabaseNotFoundError``, ``FunctionAlreadyExistsError``."""
        return self._create(FUNCTIONS, database, name, spec, principal=principal)

    def get_function(self, database: str, name: str) -> FunctionRow:
        """Raises ``FunctionNotFoundError``."""
        return self._get(FUNCTIONS, database, name)

    def list_functions(self, **query: Any) -> list[FunctionRow]:
        """See :meth:`_page` (the rows only)."""
        return self._page(FUNCTIONS, **query)[0]

    def page_functions(self, **query: Any) -> tuple[list[FunctionRow], bool]:
        """See :meth:`_page`."""
        return self._page(FUNCTIONS, **query)

    def alter_function(
        self, database: str, name: str, changes: Sequence[Any], *, principal: str | None
    ) -> FunctionRow:
        """Apply the protocol's ``FunctionChange`` objects (all or nothing). Raises
        ``FunctionNotFoundError``, ``DefinitionNotFoundError``, ``DefinitionAlreadyExistsError``,
        ``ValidationError``."""
        return self._alter(FUNCTIONS, database, name, changes, apply_function_changes, principal=principal)

    def drop_function(self, database: str, name: str, *, principal: str | None) -> FunctionRow:
        """Raises ``FunctionNotFoundError``."""
        return self._drop(FUNCTIONS, database, name, principal=principal)

    # ---- semantic views --------------------------------------------------------------------------------

    def upsert_semantic_view(
        self, database: str, name: str, definition: SemanticViewDefinition, *, principal: str | None
    ) -> SemanticViewRow:
        """Create the semantic view, or replace its whole definition (its version grows by one; the
        same definition again changes nothing). Raises ``DatabaseNotFoundError``,
        ``SemanticViewAlreadyExistsError`` (a SQL view of the database has the name),
        ``FieldTooLargeError``."""
        kind = SEMANTIC_VIEWS
        validate_identifier("database", database)
        validate_identifier(kind.kind, name)
        kind.check(definition, None)
        model = kind.model
        with self.engine.begin() as conn:
            # The name lock (taken here) serialises upserts of one name and SQL views taking it.
            self._check_target(conn, kind, database, name)
            r = conn.execute(
                select(*model.__table__.c).where(*self._key(kind, database, name)).with_for_update()
            ).first()
            if r is None:
                m = (
                    conn.execute(
                        insert(model)
                        .values(
                            catalog_key=self.catalog_key,
                            database_name=database,
                            name=name,
                            semantic_view_uuid=uuid.uuid4(),
                            **kind.values(definition),
                            created_by=principal,
                            updated_by=principal,
                        )
                        .returning(*model.__table__.c)
                    )
                    .one()
                    ._mapping
                )
                event = CatalogObjectEventType.CREATED
            else:
                if kind.definition(r._mapping) == definition:
                    return kind.row(r._mapping, definition)
                m = (
                    conn.execute(
                        update(model)
                        .where(model.semantic_view_id == r._mapping["semantic_view_id"])
                        .values(
                            **kind.values(definition),
                            version=model.version + 1,
                            updated_at=func.now(),
                            updated_by=principal,
                        )
                        .returning(*model.__table__.c)
                    )
                    .one()
                    ._mapping
                )
                event = CatalogObjectEventType.ALTERED
            _record(
                conn,
                kind,
                m,
                event,
                catalog_key=self.catalog_key,
                principal=principal,
                payload=kind.payload(definition),
            )
        return kind.row(m, definition)

    def get_semantic_view(self, database: str, name: str) -> SemanticViewRow:
        """Raises ``SemanticViewNotFoundError``."""
        return self._get(SEMANTIC_VIEWS, database, name)

    def page_semantic_views(self, **query: Any) -> tuple[list[SemanticViewRow], bool]:
        """See :meth:`_page`."""
        return self._page(SEMANTIC_VIEWS, **query)

    def drop_semantic_view(self, database: str, name: str, *, principal: str | None) -> SemanticViewRow:
        """Raises ``SemanticViewNotFoundError``."""
        return self._drop(SEMANTIC_VIEWS, database, name, principal=principal)

    def drop_database_objects(self, database: str, *, principal: str | None = None) -> dict[str, list[str]]:
        """:func:`drop_database_objects` in a transaction of its own."""
        with self.engine.begin() as conn:
            return drop_database_objects(conn, self.catalog_key, database, principal=principal)

    # ---- the shared implementation ---------------------------------------------------------------------

    def _key(self, kind: _Kind[Any, Any], database: str, name: str) -> list[Any]:
        model = kind.model
        return [
            model.catalog_key == self.catalog_key,
            model.database_name == database,
            kind.column(kind.name_column) == name,
        ]

    def _not_found(self, kind: _Kind[Any, Any], database: str, name: str) -> NotFoundError:
        return kind.not_found(f"{kind.kind} {database}.{name} does not exist", resource_name=name)

    def _exists(self, kind: _Kind[Any, Any], database: str, name: str, why: str = "") -> AlreadyExistsError:
        return kind.already_exists(f"{kind.kind} {database}.{name} already exists{why}", resource_name=name)

    def _check_target(self, conn: Connection, kind: _Kind[Any, Any], database: str, name: str) -> None:
        """The target database exists (its row locked against a concurrent drop) and, for a view, no
        table has the name."""
        conn.execute(
            select(PaimonDatabase.database_id)
            .where(PaimonDatabase.catalog_key == self.catalog_key, PaimonDatabase.database_name == database)
            .with_for_update(read=True)
        )
        if not self.registry.database_exists(database, conn=conn):
            raise DatabaseNotFoundError(f"database {database!r} does not exist", database=database)
        if kind is VIEWS:
            lock_object_name(conn, self.catalog_key, database, name)
            table = exists().where(
                PaimonTable.catalog_key == self.catalog_key,
                PaimonTable.database_name == database,
                PaimonTable.table_name == name,
            )
            if conn.execute(select(table)).scalar():
                raise self._exists(kind, database, name, ": a table has that name")
            semantic = exists().where(*self._key(SEMANTIC_VIEWS, database, name))
            if conn.execute(select(semantic)).scalar():
                raise self._exists(kind, database, name, ": a semantic view has that name")
        elif kind is SEMANTIC_VIEWS:
            lock_object_name(conn, self.catalog_key, database, name)
            if view_exists(conn, self.catalog_key, database, name):
                raise self._exists(kind, database, name, ": a SQL view has that name")

    def _create(
        self,
        kind: _Kind[Row, Definition],
        database: str,
        name: str,
        definition: Definition,
        *,
        principal: str | None,
    ) -> Row:
        validate_identifier("database", database)
        if kind is FUNCTIONS:
            validate_function_name(name)
        else:
            validate_identifier(kind.kind, name)
        kind.check(definition, None)
        with self.engine.begin() as conn:
            self._check_target(conn, kind, database, name)
            try:
                with conn.begin_nested():
                    m = (
                        conn.execute(
                            insert(kind.model)
                            .values(
                                catalog_key=self.catalog_key,
                                database_name=database,
                                **{kind.name_column: name, kind.uuid_column: uuid.uuid4()},
                                **kind.values(definition),
                                created_by=principal,
                                updated_by=principal,
                            )
                            .returning(*kind.model.__table__.c)
                        )
                        .one()
                        ._mapping
                    )
            except IntegrityError as exc:
                raise self._exists(kind, database, name) from exc
            _record(
                conn,
                kind,
                m,
                CatalogObjectEventType.CREATED,
                catalog_key=self.catalog_key,
                principal=principal,
                payload=kind.payload(definition),
            )
        return kind.row(m, definition)

    def _get(self, kind: _Kind[Row, Any], database: str, name: str) -> Row:
        with self.engine.connect() as conn:
            r = conn.execute(select(*kind.model.__table__.c).where(*self._key(kind, database, name))).first()
        if r is None:
            raise self._not_found(kind, database, name)
        return kind.row(r._mapping, kind.definition(r._mapping))

    def _page(
        self,
        kind: _Kind[Row, Any],
        *,
        limit: int,
        budget: int | None = None,
        database: str | None = None,
        database_pattern: str | None = None,
        name_pattern: str | None = None,
        databases: Collection[str] | None = None,
        after: tuple[str, str] | None = None,
    ) -> tuple[list[Row], bool]:
        """At most ``limit`` objects ordered by (database, name) after ``after`` (keyset paging on the
        unique index), of ``database`` (``DatabaseNotFoundError`` if unknown) or of every database whose
        name matches ``database_pattern``, restricted to ``databases`` when given (the caller's grants);
        and whether more follow. Patterns are SQL LIKE with ``%`` and ``_`` and no escape character
        (``convert.like_match``).

        ``budget``: bytes of stored definitions the page may carry. The page stops at the object whose
        bytes reach it (at least one object, so a page always moves on): its sizes are read first, and
        only the objects that fit are read whole, so a page of large objects costs this process about
        ``budget`` plus one object, never ``limit`` of them."""
        model = kind.model
        name_col = kind.column(kind.name_column)
        conditions: list[Any] = [model.catalog_key == self.catalog_key]
        if database is not None:
            conditions.append(model.database_name == database)
        if databases is not None:
            if not databases:
                return [], False
            conditions.append(model.database_name.in_(sorted(databases)))
        for column, pattern in ((model.database_name, database_pattern), (name_col, name_pattern)):
            if not pattern:
                continue
            conditions.append(column.like(pattern, escape=""))
            bounds = name_range(pattern)
            if bounds is not None:
                # The LIKE's literal prefix as an index range (a LIKE with a bound parameter is not one).
                conditions.append(column >= bounds[0])
                if bounds[1] is not None:
                    conditions.append(column < bounds[1])
        if after is not None:
            conditions.append(tuple_(model.database_name, name_col) > tuple_(after[0], after[1]))
        order = (model.database_name, name_col)
        with self.engine.connect() as conn:
            if database is not None and not self.registry.database_exists(database, conn=conn):
                raise DatabaseNotFoundError(f"database {database!r} does not exist", database=database)
            take, more = limit, False
            if budget is not None:
                sizes = conn.execute(
                    select(kind.size()).where(*conditions).order_by(*order).limit(limit + 1)
                ).scalars()
                take, used = 0, 0
                for size in sizes:
                    if take == limit or (take and used >= budget):
                        more = True
                        break
                    take, used = take + 1, used + int(size or 0)
                if not take:
                    return [], False
            rows = conn.execute(
                select(*model.__table__.c)
                .where(*conditions)
                .order_by(*order)
                .limit(take if budget is not None else take + 1)
            ).all()
        if budget is None:
            more = len(rows) > take
        return [kind.row(r._mapping, kind.definition(r._mapping)) for r in rows[:take]], more

    def _alter(
        self,
        kind: _Kind[Row, Definition],
        database: str,
        name: str,
        changes: Sequence[Any],
        apply: Callable[[Definition, Sequence[Any]], Definition],
        *,
        principal: str | None,
    ) -> Row:
        model = kind.model
        with self.engine.begin() as conn:
            r = conn.execute(
                select(*model.__table__.c).where(*self._key(kind, database, name)).with_for_update()
            ).first()
            if r is None:
                raise self._not_found(kind, database, name)
            current = kind.definition(r._mapping)
            changed = apply(current, changes)
            if changed == current:
                return kind.row(r._mapping, current)
            kind.check(changed, current)
            m = (
                conn.execute(
                    update(model)
                    .where(kind.column(kind.id_column) == r._mapping[kind.id_column])
                    .values(
                        **kind.values(changed),
                        version=model.version + 1,
                        updated_at=func.now(),
                        updated_by=principal,
                    )
                    .returning(*model.__table__.c)
                )
                .one()
                ._mapping
            )
            _record(
                conn,
                kind,
                m,
                CatalogObjectEventType.ALTERED,
                catalog_key=self.catalog_key,
                principal=principal,
                payload={"changes": list(changes)},
            )
        return kind.row(m, changed)

    def _rename(
        self,
        kind: _Kind[Row, Any],
        database: str,
        name: str,
        new_database: str,
        new_name: str,
        *,
        principal: str | None,
    ) -> Row:
        validate_identifier("database", new_database)
        validate_identifier(kind.kind, new_name)
        model = kind.model
        with self.engine.begin() as conn:
            if (
                conn.execute(
                    select(kind.column(kind.id_column)).where(*self._key(kind, database, name))
                ).first()
                is None
            ):
                raise self._not_found(kind, database, name)
            self._check_target(conn, kind, new_database, new_name)
            try:
                with conn.begin_nested():
                    r = conn.execute(
                        update(model)
                        .where(*self._key(kind, database, name))
                        .values(
                            database_name=new_database,
                            **{kind.name_column: new_name},
                            updated_at=func.now(),
                            updated_by=principal,
                        )
                        .returning(*model.__table__.c)
                    ).first()
            except IntegrityError as exc:
                raise self._exists(kind, new_database, new_name) from exc
            if r is None:  # dropped since the check above
                raise self._not_found(kind, database, name)
            m = r._mapping
            _record(
                conn,
                kind,
                m,
                CatalogObjectEventType.RENAMED,
                catalog_key=self.catalog_key,
                principal=principal,
                payload={"from": f"{database}.{name}"},
            )
        return kind.row(m, kind.definition(m))

    def _drop(self, kind: _Kind[Row, Any], database: str, name: str, *, principal: str | None) -> Row:
        model = kind.model
        with self.engine.begin() as conn:
            r = conn.execute(
                delete(model).where(*self._key(kind, database, name)).returning(*model.__table__.c)
            ).first()
            if r is None:
                raise self._not_found(kind, database, name)
            definition = kind.definition(r._mapping)
            _record(
                conn,
                kind,
                r._mapping,
                CatalogObjectEventType.DROPPED,
                catalog_key=self.catalog_key,
                principal=principal,
                payload=kind.payload(definition),
            )
        return kind.row(r._mapping, definition)
