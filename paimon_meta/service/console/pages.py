"""What each console page shows, read through the ops and metastore functions (no SQL here): plain
dicts for the templates. Every listing is one bounded page; Paimon's permission model (the principal's
assignments, ``Access.decide``) filters what a principal sees."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import PaimonMetaError
from paimon_meta.governance.permissions import APPLICABLE, Resource, ResourceType
from paimon_meta.governance.permissions import Access as A
from paimon_meta.maintenance.queue import MaintenanceQueue
from paimon_meta.maintenance.scheduler import most_in_debt
from paimon_meta.metastore.assignments import Assignments, Policies, StoredAssignment, StoredPolicy
from paimon_meta.metastore.catalogs import Catalogs
from paimon_meta.metastore.feed import Reach
from paimon_meta.metastore.principals import Access, utc_now
from paimon_meta.metastore.registry import TableRow
from paimon_meta.metastore.statistics import table_statistics
from paimon_meta.ops import activity, audit, locks, tags
from paimon_meta.service.data_policies import ReadRules
from paimon_meta.service.deps import table_of_object
from paimon_meta.table.table import FileStoreTable

#: Rows per page of each listing.
TABLES_PAGE = 50
#: The tables most in debt the maintenance page shows (the rest: `paimon-meta maintenance debts`).
DEBTS_SHOWN = 50
COMMITS_PAGE = 50
SNAPSHOTS_PAGE = 60
EVENTS_PAGE = 25
#: Dropped tables and databases per page of the recycle bin.
BIN_PAGE = 50
#: Rows the table page previews.
PREVIEW_ROWS = 20
#: Registry rows read per query while filling a page of tables a principal may read.
_SCAN = 200


def overview(
    catalog: MetastoreCatalog, access: Access, *, database: str | None, after: str | None
) -> dict[str, Any]:
    """Databases the principal sees; one page of the tables it may read (keyset after ``db.table``),
    each with its newest commit event and commits per minute."""
    now = utc_now()
    databases = [d for d in catalog.registry.list_databases() if access.sees(d, at=now)]
    cursor = _split(after)
    rows: list[TableRow] = []
    more = False
    within = Reach.of(access, now).within()  # the rows its grants reach, never the whole registry
    while len(rows) <= TABLES_PAGE:
        page = catalog.registry.table_rows_page(database=database, after=cursor, limit=_SCAN, within=within)
        rows.extend(r for r in page if access.may(A.SELECT, Resource.table(r.database, r.name), at=now))
        if len(page) < _SCAN:
            break
        cursor = (page[-1].database, page[-1].name)
    if len(rows) > TABLES_PAGE:
        rows, more = rows[:TABLES_PAGE], True
    activity_of = activity.last_activity(catalog.engine, [r.table_id for r in rows])
    tables = [
        {
            "database": r.database,
            "name": r.name,
            "latest_snapshot_id": r.latest_snapshot_id,
            "updated_at": r.updated_at,
            **activity_of.get(r.table_id, {}),
        }
        for r in rows
    ]
    # The catalog's totals name no table, but count every table's commits: for catalog readers only.
    whole = (
        activity.catalog_activity(catalog.engine, catalog.registry.catalog_key)
        if catalog_reader(access)
        else None
    )
    return {
        "catalog_activity": whole,
        "databases": databases,
        "database": database,
        "tables": tables,
        "next": f"{rows[-1].database}.{rows[-1].name}" if more and rows else None,
        "commits_per_minute": sum(t.get("commits_per_minute") or 0 for t in tables),
        "rate_window": activity.RATE_WINDOW_MINUTES,
    }


def _split(after: str | None) -> tuple[str, str] | None:
    if not after or "." not in after:
        return None
    database, _, name = after.partition(".")
    return database, name


def table_preview(table: FileStoreTable, identifier: str, rules: ReadRules) -> dict[str, Any]:
    """The first :data:`PREVIEW_ROWS` rows of ``table`` as the principal whose ``rules`` they are reads
    them: the read path of every reader (``FileStoreTable.query_auth``: on a ``query-auth.enabled``
    table its row filters and column masks apply, ``QueryRules``), only the columns its range admits.
    ``refused``: why no row is shown (a policy that cannot be applied, a refused read)."""
    table.query_auth = rules.query_auth(identifier)
    builder = table.new_read_builder()
    columns = rules.readable(table.schema)
    if columns is not None:
        builder = builder.with_projection(columns)
    rows: list[dict[str, Any]] = []
    try:
        names = builder.new_read().schema.names
        for batch in builder.new_read().to_arrow_batches(builder.new_scan().plan().splits()):
            rows.extend(batch.to_pylist()[: PREVIEW_ROWS - len(rows)])
            if len(rows) >= PREVIEW_ROWS:
                break
    except PaimonMetaError as e:
        return {"columns": [], "rows": [], "refused": e.message}
    return {"columns": names, "rows": [[r[n] for n in names] for r in rows], "refused": None}


def table_page(
    catalog: MetastoreCatalog,
    access: Access,
    row: TableRow,
    *,
    commits_before: int | None,
    snapshots_before: int | None,
    partitions_after: str | None,
    rules: ReadRules | None = None,
) -> dict[str, Any]:
    """Everything the table page shows, each listing one page; with ``rules`` (the principal's on the
    table), a preview of its rows as the principal reads them."""
    engine = catalog.engine
    identifier = row.identifier
    # A table kept as metadata only (format, object, Iceberg) has no snapshots, tags or schema files.
    table = catalog.get_table(identifier) if row.table_schema is None else None
    timeline = (
        []
        if table is None
        else activity.snapshot_timeline(table, before=snapshots_before, limit=SNAPSHOTS_PAGE)
    )
    commits = activity.commits_page(engine, row.table_id, before=commits_before, limit=COMMITS_PAGE)
    partitions = activity.partitions_page(engine, row.table_id, after=partitions_after)
    lock_id = catalog.registry.lock_id(row.database, row.name)
    schemas = (
        []
        if table is None
        else [table.schema_manager.schema(i) for i in table.schema_manager.list_ids()[-20:]]
    )
    tag_list = []
    if table is not None:
        tag_manager = tags.tags_of(catalog, identifier)
        tag_list = [
            {"name": n, "snapshot_id": t.snapshot.id, "created_ms": t.created_ms}
            for n in tag_manager.names()[:200]
            for t in [tag_manager.get(n)]
        ]
    stats = table_statistics(engine, row.table_id)
    return {
        "row": row,
        "statistics": stats,
        "timeline": timeline,
        "timeline_json": json.dumps(
            {
                "t": [p.committed_at.timestamp() for p in timeline],
                "records": [p.records for p in timeline],
                "files": [p.files for p in timeline],
                "size": [p.size_bytes for p in timeline],
                "ids": [p.snapshot_id for p in timeline],
            }
        ).replace("<", "\\u003c"),
        "snapshots_next": timeline[0].snapshot_id if len(timeline) == SNAPSHOTS_PAGE else None,
        "commits": commits,
        "commits_next": commits[-1]["position"] if len(commits) == COMMITS_PAGE else None,
        "attempts": activity.troubled_attempts(engine, row.table_id, limit=EVENTS_PAGE),
        "partitions": partitions,
        "partitions_next": partitions[-1]["partition_key"] if len(partitions) == 100 else None,
        "tags": tag_list,
        "schemas": list(reversed(schemas)),
        "maintenance": activity.maintenance_page(engine, [row.table_id], limit=EVENTS_PAGE),
        "lock": catalog.lock.get_lock(lock_id),
        "lock_id": lock_id,
        "lock_events": list(reversed(audit.lock_events(engine, lock_id=lock_id, limit=EVENTS_PAGE))),
        "may_write": table is not None and access.may(A.UPDATE, Resource.table(row.database, row.name)),
        "may_admin": access.may(A.ALTER, Resource.table(row.database, row.name)),
        "preview": None if table is None or rules is None else table_preview(table, identifier, rules),
    }


def lock_table(catalog: MetastoreCatalog, lock_id: str) -> tuple[str, str] | None:
    """``(database, table)`` a lock id of this catalog names, else None (another catalog's lock)."""
    prefix = f"{catalog.registry.catalog_key}."
    if not lock_id.startswith(prefix):
        return None
    database, sep, name = lock_id[len(prefix) :].partition(".")
    if not sep:
        return None
    return database, table_of_object(name)


def foreign_locks(catalog: MetastoreCatalog, *, default: bool) -> Callable[[str], bool]:
    """Whether a lock id is another catalog's of the service (issue 35). Invariant: a catalog's lock rows
    are shown to, and released by, its own principals only. A lock id names its catalog by its key
    (``<key>.db.t``, ``...:<key>``); the default catalog also keeps the rows of no catalog (Java's of
    other catalog keys, as before catalogs existed), a non-default catalog only its own."""
    own = catalog.registry.catalog_key
    others = (
        frozenset(i.catalog_key for i in Catalogs(catalog.engine).list_all()) - {own} if default else None
    )

    def of_catalog(lock_id: str, key: str) -> bool:
        return lock_id.startswith(f"{key}.") or lock_id.endswith(f":{key}")

    def foreign(lock_id: str) -> bool:
        if of_catalog(lock_id, own):
            return False
        if others is None:
            return True
        return any(of_catalog(lock_id, key) for key in others)

    return foreign


def may_release(
    catalog: MetastoreCatalog, access: Access, lock_id: str, *, foreign: Callable[[str], bool] | None = None
) -> bool:
    """Releasing a lock needs ``ALTER`` on its table (a lock of no table of this catalog: on the
    catalog); never another catalog's lock (``foreign``)."""
    if foreign is not None and foreign(lock_id):
        return False
    names = lock_table(catalog, lock_id)
    return access.may(A.ALTER, Resource.catalog() if names is None else Resource.table(*names))


def catalog_reader(access: Access) -> bool:
    """Whether ``access`` may read every table of the catalog, later ones included (``SELECT`` on the
    ``CATALOG_ALL`` scope): what names no table (the catalog's totals, locks of no table, the queue's
    pauses) is shown to such readers only."""
    return access.may(A.SELECT, Resource.catalog_all())


def locks_page(catalog: MetastoreCatalog, access: Access, *, default: bool = True) -> dict[str, Any]:
    """The lock rows of tables the principal may read (holders, age, lease left, fencing token, state:
    a ``heartbeat_overdue`` row is one whose holder lost its connection), and recent waits for them."""
    rows = []
    foreign = foreign_locks(catalog, default=default)  # never another catalog's locks
    for lock in locks.list_locks(catalog.lock):
        if foreign(lock.lock_id):
            continue
        names = lock_table(catalog, lock.lock_id)
        visible = (
            access.may(A.SELECT, Resource.table(*names)) if names is not None else catalog_reader(access)
        )
        if visible:
            rows.append(
                {
                    **asdict(lock),
                    "table": names,
                    "may_release": may_release(catalog, access, lock.lock_id, foreign=foreign),
                }
            )
    waits = activity.recent_waits(catalog.engine, [r["lock_id"] for r in rows])
    ids = {}
    for r in rows:
        if r["table"] is not None:
            try:
                ids[catalog.registry.get_table_row(*r["table"]).table_id] = r
            except PaimonMetaError:  # the lock of a table dropped meanwhile
                continue
    waiting = activity.waiting_writers(catalog.engine, list(ids))
    for w in waiting:
        ids[w["table_id"]].setdefault("waiting", []).append(w)
    return {"locks": rows, "waits": waits}


def maintenance_runs(catalog: MetastoreCatalog, access: Access, *, before: int | None) -> dict[str, Any]:
    """A page of maintenance runs of the tables the principal may read (every table's for a catalog
    reader; else those of its tables, by id), with the maintenance queue and the :data:`DEBTS_SHOWN`
    tables most in debt (the same tables)."""
    ids: list[int] | None = None
    if catalog_reader(access):
        runs = activity.maintenance_page(catalog.engine, None, before=before)
    else:
        ids = _readable_table_ids(catalog, access)
        runs = activity.maintenance_page(catalog.engine, ids, before=before)
    queue = MaintenanceQueue(catalog.engine, catalog.registry.catalog_key)
    readable = None if ids is None else set(ids)
    jobs = [j.to_dict() for j in queue.jobs() if readable is None or j.table_id in readable]
    owed = [
        {**d, **(d.get("debt") or {})}
        for d in (most_in_debt(catalog, limit=DEBTS_SHOWN, table_ids=ids) if before is None else [])
    ]
    return {
        "runs": runs,
        "next": runs[-1]["position"] if len(runs) == 50 else None,
        "jobs": jobs if before is None else [],
        "debts": owed,
        "paused": [p["scope"] for p in queue.pauses()] if catalog_reader(access) else [],
    }


def _readable_table_ids(catalog: MetastoreCatalog, access: Access) -> list[int]:
    ids: list[int] = []
    cursor: tuple[str, str] | None = None
    now = utc_now()
    within = Reach.of(access, now).within()
    while True:
        page = catalog.registry.table_rows_page(after=cursor, limit=_SCAN * 5, within=within)
        ids.extend(
            r.table_id for r in page if access.may(A.SELECT, Resource.table(r.database, r.name), at=now)
        )
        if len(page) < _SCAN * 5:
            return ids
        cursor = (page[-1].database, page[-1].name)


def recycle_bin(
    catalog: MetastoreCatalog,
    access: Access,
    *,
    tables_before: int | None = None,
    databases_before: int | None = None,
) -> dict[str, Any]:
    """The catalog's recycle bin, newest drop first: the dropped tables of the databases the principal
    administers (an undrop needs admin on the database, as creating a table there does) and, for catalog
    administrators, the dropped databases (``CREATETABLE`` on the database, ``CREATEDATABASE`` on the
    catalog: what an undrop needs). One bounded page of each (keyset on the drop id); a page of
    tables is filled from as many bin rows as it takes (``_SCAN`` at a time)."""
    bin_ = catalog.recycle_bin
    tables: list[dict[str, Any]] = []
    more_tables = False
    cursor = tables_before
    while len(tables) <= BIN_PAGE:
        page = bin_.tables_page(before=cursor, limit=_SCAN)
        tables.extend(
            {**t.to_dict(), "identifier": t.identifier, "database": t.database, "name": t.name}
            for t in page
            if access.may(A.CREATETABLE, Resource.of_database(t.database))
        )
        if len(page) < _SCAN:
            break
        cursor = page[-1].drop_id
    if len(tables) > BIN_PAGE:
        tables, more_tables = tables[:BIN_PAGE], True
    databases: list[dict[str, Any]] = []
    more_databases = False
    may_undrop_databases = access.may(A.CREATEDATABASE, Resource.catalog())
    if may_undrop_databases:
        rows = bin_.databases_page(before=databases_before, limit=BIN_PAGE + 1)
        more_databases = len(rows) > BIN_PAGE
        databases = [
            {
                "drop_id": d.drop_id,
                "name": d.name,
                "location": d.location,
                "tables": len(d.table_drop_ids),
                "dropped_by": d.dropped_by,
                "dropped_at": d.dropped_at,
                "purge_after": d.purge_after,
            }
            for d in rows[:BIN_PAGE]
        ]
    return {
        "dropped_tables": tables,
        "tables_next": tables[-1]["drop_id"] if more_tables else None,
        "dropped_databases": databases,
        "databases_next": databases[-1]["drop_id"] if more_databases else None,
        "may_undrop_databases": may_undrop_databases,
    }


# ---- governance: a table's and a principal's assignments and policies ---------------------------------

#: Assignments or policies per page of the governance pages.
GOVERNANCE_PAGE = 100


def _assignment_row(s: StoredAssignment, *, now: datetime) -> dict[str, Any]:
    a = s.assignment
    columns = a.columns
    return {
        "principal": a.principal,
        "resource_type": a.resource.type.value,
        "resource": str(a.resource),
        "access": a.access.value,
        "allowed": None if columns is None or columns.allowed is None else sorted(columns.allowed),
        "denied": None if columns is None or not columns.denied else sorted(columns.denied),
        "expire_time": a.expire_time,
        "active": a.active(now),
        "granted_by": s.granted_by,
        "granted_at": s.granted_at,
        "reason": s.reason,
    }


def _policy_row(p: StoredPolicy) -> dict[str, Any]:
    return {
        "principal": p.principal,
        "type": p.policy_type,
        "column": p.on_column,
        "rule": p.body,
        "created_by": p.created_by,
        "created_at": p.created_at,
        "reason": p.reason,
    }


def table_governance(
    store: Assignments,
    policies: Policies,
    row: TableRow,
    *,
    names: list[str] | None,
    policy_names: list[str] | None,
    table_after: str | None,
    columns_after: str | None,
    policies_after: str | None,
) -> dict[str, Any]:
    """The table's direct assignments (``TABLE`` and ``COLUMN``) and its policies, each one page: only
    ``names``' (``policy_names``') when the caller may not list everyone's (None: everyone's, and the
    actions are offered)."""
    now = utc_now()
    table_page_, table_next = store.list_page(
        Resource.table(row.database, row.name),
        principals=names,
        page_token=table_after,
        max_results=GOVERNANCE_PAGE,
    )
    column_page, column_next = store.list_page(
        Resource.column(row.database, row.name),
        principals=names,
        page_token=columns_after,
        max_results=GOVERNANCE_PAGE,
    )
    policy_page, policy_next = policies.list_page(
        row.table_id, principals=policy_names, page_token=policies_after, max_results=GOVERNANCE_PAGE
    )
    return {
        "row": row,
        "table_assignments": [_assignment_row(s, now=now) for s in table_page_],
        "table_next": table_next,
        "column_assignments": [_assignment_row(s, now=now) for s in column_page],
        "columns_next": column_next,
        "policies": [_policy_row(p) for p in policy_page],
        "policies_next": policy_next,
        "may_grant": names is None,
        "may_govern": policy_names is None,
        "own_only": names is not None or policy_names is not None,
        "accesses": sorted(a.value for a in APPLICABLE[ResourceType.TABLE]),
        "column_accesses": sorted(a.value for a in APPLICABLE[ResourceType.COLUMN]),
    }


def principal_governance(store: Assignments, policies: Policies, name: str) -> dict[str, Any]:
    """The principal ``name``'s active assignments in the catalog (its own, its groups' and roles') and
    the policies of the catalog's tables that apply to it (PrincipalNotFoundError: no such principal)."""
    store.require_principal(name)
    subject = store.of_subject(name)
    now = utc_now()
    return {
        "name": name,
        "members_of": list(subject.subject.memberships),
        "assignments": [
            {
                "principal": a.principal,
                "resource": str(a.resource),
                "database": a.resource.database,
                "object": a.resource.object,
                "resource_type": a.resource.type.value,
                "access": a.access.value,
                "allowed": None
                if a.columns is None or a.columns.allowed is None
                else sorted(a.columns.allowed),
                "denied": None if a.columns is None or not a.columns.denied else sorted(a.columns.denied),
                "expire_time": a.expire_time,
                "active": a.active(now),
            }
            for a in subject.assignments
        ],
        "policies": [
            {**_policy_row(p), "database": db, "table": t}
            for p, db, t in policies.of_names(sorted(subject.subject.names))
        ],
    }
