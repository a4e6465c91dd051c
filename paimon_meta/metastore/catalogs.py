"""Catalogs as objects of the metastore (``paimon_catalogs``, migration 0019; issue 35).

A catalog is a name (what a REST client passes as ``warehouse``), the catalog key its databases, tables
and lock ids are stored under (Java's ``catalog-key``: what :class:`~paimon_meta.metastore.registry.
Registry` scopes by), a warehouse root, a storage profile (S3 endpoint, region, path style; an STS role
ARN and external id for vending) and its tables' default options.

Invariant: no two catalogs' warehouses are equal or nest, whatever their spellings. Every change that
sets a warehouse takes :data:`_WAREHOUSES_LOCK` in its transaction and checks the stored
``location_key`` of the others in SQL (equality on the new key's ancestors, a bytewise range on its
descendants), as the registry does for table locations.

Secrets (an option whose key names a secret, the STS external id) are stored for the server's own use
and never returned by :meth:`CatalogInfo.public`: it says which are set.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Row, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from paimon_meta.db.models import (
    AssignmentRecord,
    Grant,
    PaimonCatalog,
    PaimonDatabase,
    PaimonDatabaseProperty,
    PaimonFunction,
    PaimonSemanticView,
    PaimonTable,
    PaimonView,
    PolicyRecord,
)
from paimon_meta.errors import (
    CatalogAlreadyExistsError,
    CatalogNotEmptyError,
    CatalogNotFoundError,
    ValidationError,
    WarehouseOverlapError,
)
from paimon_meta.io.base import key_ancestors, location_key, normalise_uri, resolve_location
from paimon_meta.metastore.registry import Registry
from paimon_meta.model.identifier import validate_identifier
from paimon_meta.model.options import parse_duration_ms

#: The advisory lock of every change that sets a catalog's warehouse (create, alter, adopt).
_WAREHOUSES_LOCK = "paimon-meta catalog warehouses"
#: Option keys whose values are secrets: stored, never echoed (``public`` names them).
SECRET_OPTION = re.compile(r"secret|password|token|access-key|session", re.IGNORECASE)
# The storage profile as the FileIO's options (paimon_meta.io.s3).
_ENDPOINT, _REGION, _PATH_STYLE = "s3.endpoint", "s3.region", "s3.path-style-access"
_MAX_OPTIONS = 256
#: The mark of the service's default catalog (the one ``serve --catalog-name`` serves, in which the grants
#: naming no catalog apply), kept in its row's ``options`` so no migration is needed; never an option of
#: the catalog (:meth:`CatalogInfo.from_row` takes it out; users cannot set it). At most one row has it.
DEFAULT_MARK = "paimon-meta.default-catalog"
_MAX_VALUE = 4096
#: How long the commit log keeps a catalog's events before they are archived into its
#: ``system.commit_log`` and may be dropped (a Paimon duration, ``365 d``); absent: never archived
#: (``paimon_meta.archive``; docs/OPERATIONS.md, "The commit log's archive").
EVENTS_RETENTION = "paimon-meta.events.retention"


def events_retention(options: Mapping[str, str]) -> timedelta | None:
    """The catalog's :data:`EVENTS_RETENTION` (None: absent, never archive).

    Raises:
        ValidationError: not a duration, or not positive.
    """
    raw = options.get(EVENTS_RETENTION)
    if raw is None:
        return None
    ms = parse_duration_ms(raw, key=EVENTS_RETENTION)
    if ms <= 0:
        raise ValidationError(
            f"{EVENTS_RETENTION}={raw!r}: the retention must be positive (remove the option to keep events "
            "forever)",
            option=EVENTS_RETENTION,
        )
    return timedelta(milliseconds=ms)


@dataclass(frozen=True, slots=True)
class StorageProfile:
    """Where a catalog's S3-compatible store is and how it is addressed (None: the SDK's default)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = None


@dataclass(frozen=True, slots=True)
class CatalogInfo:
    """A catalog row. ``options`` holds secrets too: show :meth:`public`, never this."""

    catalog_id: int
    name: str
    catalog_key: str
    warehouse: str
    storage: StorageProfile
    sts_role_arn: str | None
    sts_external_id: str | None
    options: dict[str, str] = field(default_factory=dict)
    created_by: str | None = None
    created_at: datetime | None = None
    #: Whether it is the service's default catalog (recorded by ``serve``: ``Catalogs.ensure_default``).
    default: bool = False

    @classmethod
    def from_row(cls, row: Row[Any]) -> CatalogInfo:
        m = row._mapping
        options = dict(m["options"])
        default = options.pop(DEFAULT_MARK, None) == "true"
        return cls(
            catalog_id=m["catalog_id"],
            name=m["name"],
            catalog_key=m["catalog_key"],
            warehouse=m["warehouse"],
            storage=StorageProfile(m["storage_endpoint"], m["storage_region"], m["storage_path_style"]),
            sts_role_arn=m["sts_role_arn"],
            sts_external_id=m["sts_external_id"],
            options=options,
            created_by=m["created_by"],
            created_at=m["created_at"],
            default=default,
        )

    def storage_options(self) -> dict[str, str]:
        """The FileIO options of the catalog's warehouse: its options with the storage profile's."""
        out = dict(self.options)
        if self.storage.endpoint is not None:
            out[_ENDPOINT] = self.storage.endpoint
        if self.storage.region is not None:
            out[_REGION] = self.storage.region
        if self.storage.path_style is not None:
            out[_PATH_STYLE] = "true" if self.storage.path_style else "false"
        return out

    def public(self) -> dict[str, Any]:
        """What may be shown: every field but the secrets' values (``secrets_set`` names those set)."""
        secrets = sorted(k for k in self.options if SECRET_OPTION.search(k))
        if self.sts_external_id is not None:
            secrets.append("sts-external-id")
        return {
            "name": self.name,
            "catalog_key": self.catalog_key,
            "warehouse": self.warehouse,
            "storage": {
                "endpoint": self.storage.endpoint,
                "region": self.storage.region,
                "path_style": self.storage.path_style,
            },
            "sts_role_arn": self.sts_role_arn,
            "options": {k: v for k, v in sorted(self.options.items()) if not SECRET_OPTION.search(k)},
            "secrets_set": secrets,
            "created_by": self.created_by,
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
        }


def split_profile(options: Mapping[str, str]) -> tuple[StorageProfile, dict[str, str]]:
    """The storage profile ``options`` give as FileIO options (``s3.endpoint``, ``s3.region``,
    ``s3.path-style-access`` or its alias), and the other options.

    Raises:
        ValidationError: a path style that is neither ``true`` nor ``false``.
    """
    rest = dict(options)
    alias = rest.pop("s3.path.style.access", None)
    style = rest.pop(_PATH_STYLE, alias)
    if style is not None and style.strip().lower() not in ("true", "false"):
        raise ValidationError(f"{_PATH_STYLE} must be true or false, got {style!r}", key=_PATH_STYLE)
    path_style = None if style is None else style.strip().lower() == "true"
    return StorageProfile(rest.pop(_ENDPOINT, None), rest.pop(_REGION, None), path_style), rest


def _check_options(options: Mapping[str, str]) -> dict[str, str]:
    if len(options) > _MAX_OPTIONS:
        raise ValidationError(f"a catalog keeps at most {_MAX_OPTIONS} options", options=len(options))
    for key, value in options.items():
        if not key or len(key) > 255 or len(value) > _MAX_VALUE:
            raise ValidationError(f"catalog option {key!r}: empty or too long key or value", key=key)
        if key == "catalog-key":
            raise ValidationError("a catalog's key is not an option: it is set at create", key=key)
        if key == DEFAULT_MARK:
            raise ValidationError(
                f"{key!r} is not an option: the default catalog is the one `paimon-meta serve` serves",
                key=key,
            )
        if key in (_ENDPOINT, _REGION, _PATH_STYLE):
            raise ValidationError(
                f"catalog option {key!r} is part of the storage profile: set it with the profile's field",
                key=key,
            )
    events_retention(options)  # refused when set, not when the archiver first reads it
    return dict(options)


def _warehouse(uri: str) -> tuple[str, str]:
    """The normal form and key of a warehouse as a user types it (``LocationError`` if it has none)."""
    if not uri or not uri.strip():
        raise ValidationError("a catalog's warehouse must not be empty", field="warehouse")
    resolved = resolve_location(uri)
    return normalise_uri(resolved), location_key(resolved)


class Catalogs:
    """The catalogs of one metastore. Methods take an optional ``conn`` to run in the caller's
    transaction; errors inside it are raised after a savepoint rollback."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextmanager
    def _tx(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is None:
            with self._engine.begin() as own:
                yield own
        else:
            yield conn

    # -- reads ---------------------------------------------------------------------------------

    def get(self, name: str, *, conn: Connection | None = None) -> CatalogInfo:
        """The catalog named ``name``.

        Raises:
            CatalogNotFoundError: no such catalog.
        """
        with self._tx(conn) as c:
            row = c.execute(select(*PaimonCatalog.__table__.c).where(PaimonCatalog.name == name)).first()
        if row is None:
            raise CatalogNotFoundError(f"catalog {name!r} does not exist", catalog=name)
        return CatalogInfo.from_row(row)

    def list_all(self, *, conn: Connection | None = None) -> list[CatalogInfo]:
        """Every catalog, by name."""
        with self._tx(conn) as c:
            rows = c.execute(select(*PaimonCatalog.__table__.c).order_by(PaimonCatalog.name)).all()
        return [CatalogInfo.from_row(r) for r in rows]

    def databases(self, name: str, *, conn: Connection | None = None) -> list[str]:
        """The databases the catalog holds (ours and Java's rows under its key).

        Raises:
            CatalogNotFoundError: no such catalog.
        """
        with self._tx(conn) as c:
            info = self.get(name, conn=c)
            return Registry(self._engine, catalog_key=info.catalog_key).list_databases(conn=c)

    def overlapping(
        self, warehouse: str, *, exclude: str | None = None, conn: Connection | None = None
    ) -> list[CatalogInfo]:
        """Catalogs (but ``exclude``) whose warehouse equals, contains or lies inside ``warehouse``."""
        key = _warehouse(warehouse)[1]
        prefix = key if key.endswith("/") else key + "/"
        keyed = PaimonCatalog.warehouse_key.in_([key, *key_ancestors(key)]) | (
            (PaimonCatalog.warehouse_key >= prefix) & (PaimonCatalog.warehouse_key < prefix[:-1] + "0")
        )
        query = select(*PaimonCatalog.__table__.c).where(keyed).order_by(PaimonCatalog.name)
        if exclude is not None:
            query = query.where(PaimonCatalog.name != exclude)
        with self._tx(conn) as c:
            return [CatalogInfo.from_row(r) for r in c.execute(query)]

    # -- changes -------------------------------------------------------------------------------

    def _refuse_overlap(self, c: Connection, name: str, warehouse: str, *, exclude: str | None) -> None:
        c.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": _WAREHOUSES_LOCK})
        holders = self.overlapping(warehouse, exclude=exclude, conn=c)
        if holders:
            raise WarehouseOverlapError(
                f"the warehouse {warehouse} of catalog {name!r} overlaps catalog {holders[0].name!r}'s "
                f"({holders[0].warehouse}): two catalogs must not share files",
                catalog=name,
                holder=holders[0].name,
                warehouse=warehouse,
            )

    def create(
        self,
        name: str,
        warehouse: str,
        *,
        catalog_key: str | None = None,
        storage: StorageProfile | None = None,
        sts_role_arn: str | None = None,
        sts_external_id: str | None = None,
        options: Mapping[str, str] | None = None,
        created_by: str | None = None,
        conn: Connection | None = None,
    ) -> CatalogInfo:
        """Create a catalog. ``catalog_key`` (default: ``name``) may be one rows already use: the
        catalog then holds them (how a single-catalog metastore is adopted).

        Raises:
            ValidationError: a bad name, key, warehouse (``LocationError``) or option; an external id
                without a role.
            CatalogAlreadyExistsError: the name or the catalog key is another catalog's.
            WarehouseOverlapError: the warehouse equals, contains or lies inside another catalog's.
        """
        validate_identifier("catalog", name)
        key = validate_identifier("catalog key", catalog_key or name)
        normal, wkey = _warehouse(warehouse)
        opts = _check_options(options or {})
        if sts_external_id is not None and sts_role_arn is None:
            raise ValidationError("an STS external id needs a role ARN", field="sts_external_id")
        profile = storage or StorageProfile()
        with self._tx(conn) as c:
            try:
                with c.begin_nested():
                    self._refuse_overlap(c, name, normal, exclude=None)
                    row = c.execute(
                        insert(PaimonCatalog)
                        .values(
                            name=name,
                            catalog_key=key,
                            warehouse=normal,
                            warehouse_key=wkey,
                            storage_endpoint=profile.endpoint,
                            storage_region=profile.region,
                            storage_path_style=profile.path_style,
                            sts_role_arn=sts_role_arn,
                            sts_external_id=sts_external_id,
                            options=opts,
                            created_by=created_by,
                        )
                        .returning(*PaimonCatalog.__table__.c)
                    ).one()
            except IntegrityError as exc:
                raise CatalogAlreadyExistsError(
                    f"a catalog named {name!r} or with catalog key {key!r} already exists",
                    catalog=name,
                    catalog_key=key,
                ) from exc
        return CatalogInfo.from_row(row)

    def ensure_default(
        self,
        name: str,
        warehouse: str,
        *,
        catalog_key: str,
        options: Mapping[str, str] | None = None,
        sts_role_arn: str | None = None,
        sts_external_id: str | None = None,
        skip_options: Collection[str] = (),
        created_by: str | None = None,
        conn: Connection | None = None,
    ) -> tuple[CatalogInfo, bool]:
        """The catalog a single-catalog deployment names (``serve --catalog-name --warehouse``, the
        ``catalog-key`` option), created if missing (``True``): how an existing metastore becomes one
        catalog with its rows. A created row takes the storage profile from ``options``
        (``s3.endpoint``, ``s3.region``, ``s3.path-style-access``) and keeps the rest as its options but
        the secrets (the server's keys stay in its own configuration) and ``skip_options``. An existing
        one must agree on the key and the warehouse's place.

        Raises:
            ValidationError: the catalog exists with another catalog key or warehouse (names both).
            CatalogAlreadyExistsError: another catalog has the key.
            WarehouseOverlapError: the warehouse overlaps another catalog's.
        """
        with self._tx(conn) as c:
            try:
                found = self.get(name, conn=c)
            except CatalogNotFoundError:
                profile, given = split_profile(options or {})
                kept = {
                    k: v for k, v in given.items() if not SECRET_OPTION.search(k) and k not in skip_options
                }
                try:
                    created = self.create(
                        name,
                        warehouse,
                        catalog_key=catalog_key,
                        storage=profile,
                        sts_role_arn=sts_role_arn,
                        sts_external_id=sts_external_id,
                        options=kept,
                        created_by=created_by,
                        conn=c,
                    )
                    return self._mark_default(c, created), True
                except CatalogAlreadyExistsError as refused:
                    # another replica starting at once may have recorded it first (its insert committed
                    # before this one's check under the lock): then compare with what it recorded
                    try:
                        found = self.get(name, conn=c)
                    except CatalogNotFoundError:
                        raise refused from None
        if found.catalog_key != catalog_key:
            raise ValidationError(
                f"catalog {name!r} has catalog key {found.catalog_key!r}, not {catalog_key!r}: start with "
                f"-o catalog-key={found.catalog_key}",
                catalog=name,
            )
        if location_key(found.warehouse) != _warehouse(warehouse)[1]:
            raise ValidationError(
                f"catalog {name!r} has the warehouse {found.warehouse}, not {normalise_uri(warehouse)}: "
                f"start with --warehouse {found.warehouse}, or move it with `paimon-meta catalogs alter`",
                catalog=name,
            )
        if not found.default:
            with self._tx(conn) as c:
                found = self._mark_default(c, found)
        return found, False

    def _mark_default(self, c: Connection, info: CatalogInfo) -> CatalogInfo:
        """Record ``info`` as the service's default catalog unless another catalog is (a metastore
        served by two deployments with different ``--catalog-name`` keeps the first one's)."""
        marked = c.execute(
            text(
                "UPDATE paimon_catalogs"
                " SET options = options || jsonb_build_object(CAST(:mark AS text), 'true')"
                " WHERE catalog_id = :id AND NOT EXISTS (SELECT 1 FROM paimon_catalogs o"
                " WHERE o.catalog_id <> :id AND o.options ? CAST(:mark AS text))"
                " RETURNING *"
            ),
            {"mark": DEFAULT_MARK, "id": info.catalog_id},
        ).one_or_none()
        return info if marked is None else CatalogInfo.from_row(marked)

    def alter(
        self,
        name: str,
        *,
        warehouse: str | None = None,
        storage: StorageProfile | None = None,
        sts_role_arn: str | None = None,
        sts_external_id: str | None = None,
        clear_sts: bool = False,
        set_options: Mapping[str, str] | None = None,
        remove_options: Sequence[str] = (),
        conn: Connection | None = None,
    ) -> CatalogInfo:
        """Change a catalog: its warehouse (refused while it holds databases: their tables live under
        the old one), storage profile (the given fields), STS role (``clear_sts``: none) and options.

        Raises:
            CatalogNotFoundError: no such catalog.
            CatalogNotEmptyError: a new warehouse while it holds databases.
            WarehouseOverlapError: the new warehouse overlaps another catalog's.
            ValidationError: a bad warehouse or option; an external id without a role.
        """
        with self._tx(conn) as c:
            current = self.get(name, conn=c)
            values: dict[str, Any] = {}
            if warehouse is not None:
                normal, wkey = _warehouse(warehouse)
                if wkey != location_key(current.warehouse):
                    held = self.databases(name, conn=c)
                    if held:
                        raise CatalogNotEmptyError(
                            f"catalog {name!r} holds databases {held}: their tables live under "
                            f"{current.warehouse}, so its warehouse cannot move",
                            catalog=name,
                        )
                    self._refuse_overlap(c, name, normal, exclude=name)
                values |= {"warehouse": normal, "warehouse_key": wkey}
            if storage is not None:
                if storage.endpoint is not None:
                    values["storage_endpoint"] = storage.endpoint
                if storage.region is not None:
                    values["storage_region"] = storage.region
                if storage.path_style is not None:
                    values["storage_path_style"] = storage.path_style
            role = None if clear_sts else (sts_role_arn or current.sts_role_arn)
            external = None if clear_sts else (sts_external_id or current.sts_external_id)
            if external is not None and role is None:
                raise ValidationError("an STS external id needs a role ARN", field="sts_external_id")
            values |= {"sts_role_arn": role, "sts_external_id": external}
            removals = set(remove_options)
            opts = {k: v for k, v in current.options.items() if k not in removals}
            values["options"] = _check_options(opts | dict(set_options or {}))
            if current.default:
                values["options"][DEFAULT_MARK] = "true"
            row = c.execute(
                update(PaimonCatalog)
                .where(PaimonCatalog.catalog_id == current.catalog_id)
                .values(**values)
                .returning(*PaimonCatalog.__table__.c)
            ).one()
        return CatalogInfo.from_row(row)

    def drop(self, name: str, *, cascade: bool = False, conn: Connection | None = None) -> list[str]:
        """Remove a catalog and its grants; returns the databases it held. Refused while it holds
        databases, unless ``cascade``: then their rows (databases, tables, views, functions, semantic
        views) go with it in the same transaction. Storage is never touched: the warehouse's files
        stay where they are.

        Raises:
            CatalogNotFoundError: no such catalog.
            CatalogNotEmptyError: it holds databases and ``cascade`` is False.
        """
        with self._tx(conn) as c:
            info = self.get(name, conn=c)
            held = self.databases(name, conn=c)
            if held and not cascade:
                raise CatalogNotEmptyError(
                    f"catalog {name!r} holds databases {held}: drop them first, or drop with cascade",
                    catalog=name,
                    databases=held,
                )
            key = info.catalog_key
            for model in (
                PaimonTable,
                PaimonView,
                PaimonFunction,
                PaimonSemanticView,
                PaimonDatabaseProperty,
                PaimonDatabase,
            ):
                c.execute(delete(model).where(model.catalog_key == key))
            # its grants go with it: a catalog created again under the key starts with none (migration 0020)
            c.execute(delete(Grant).where(Grant.catalog_key == key))
            # and its assignments and policies (migration 0022)
            c.execute(delete(AssignmentRecord).where(AssignmentRecord.catalog_key == key))
            c.execute(delete(PolicyRecord).where(PolicyRecord.catalog_key == key))
            c.execute(delete(PaimonCatalog).where(PaimonCatalog.catalog_id == info.catalog_id))
        return held
