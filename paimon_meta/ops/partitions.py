"""The partition lifecycle of Paimon's REST catalog: create, drop, mark done, list.

* **create** registers partitions before any data lands (``paimon_partitions``): they are listed with
  zero totals until a commit writes into them. Idempotent: a partition already registered or holding
  data is reported as existing (refused with 409 ``PARTITION`` when the caller does not ignore that).
* **drop** is Java's ``truncatePartitions``: one OVERWRITE snapshot, committed through the metastore
  guard (the table's lock, the commit's events, exactly as any commit), that deletes every live file of
  the named partitions (a spec may name a prefix of the partition keys); then their registrations go.
  No data file is deleted from storage (snapshot expiration does that once no snapshot needs it).
* **mark done** records who marked each partition done and when (listed as ``done``), and performs the
  table's ``partition.mark-done-action`` (Java's values, comma-separated, default ``success-file``):
  ``success-file`` writes Java's ``_SUCCESS`` JSON in the partition's directory, ``done-partition``
  registers the ``<last value>.done`` partition, ``mark-event`` is the recorded mark itself (it is what
  Java's ``MarkPartitionDoneEventAction`` asks a REST catalog for); ``http-report`` and ``custom`` run
  code or calls this server does not make: refused by name (501) before anything is recorded.
* **list** (all, by names, by a serialized predicate) joins the totals the commit path keeps
  (``paimon_partition_statistics``) with the registrations, named ``k=v/k2=v2`` in the table's
  partition-key order, the order listings page by.

Each change is one maintenance run in the event log (``started``/``finished`` with what it did).

A **format table with catalog-managed partitions** (``type=format-table`` and
``metastore.partitioned-table=true``, Paimon's ``FormatTablePartitionManager``) has its partitions here
and nowhere else: they are its registrations (its files are its clients', no commit is ours). Listed with
the statistics its directory shows (files, bytes, the newest file's time; the record count is Paimon's
``UNKNOWN``, -1: nobody reported it), dropped by unregistering (its files are left to its writers, as
its data always is), marked done as any table. Another metadata-only table has no partitions here: 501
naming its type.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from paimon_meta.catalog import metadata_tables
from paimon_meta.db.models import MaintenanceEventType, MaintenanceOperation
from paimon_meta.errors import (
    FileNotFound,
    PartitionAlreadyExistsError,
    PartitionNotFoundError,
    UnsupportedError,
    ValidationError,
)
from paimon_meta.io.base import FileIO
from paimon_meta.metastore import partitions as registry
from paimon_meta.metastore.statistics import list_partitions as partition_statistics
from paimon_meta.metastore.statistics import table_statistics
from paimon_meta.model.options import CoreOptions
from paimon_meta.model.partition_statistics import partition_key
from paimon_meta.model.schema import TableSchema
from paimon_meta.ops.common import maintenance_run, resolve_table
from paimon_meta.table.option_policy import table_type
from paimon_meta.table.partition_filter import parse_partition_filter
from paimon_meta.table.paths import escape_path_name, join_path
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.metastore.registry import TableRow

Spec = dict[str, str]

#: Java's ``partition.mark-done-action`` (``CoreOptions.PARTITION_MARK_DONE_ACTION``) and its default.
MARK_DONE_ACTION = "partition.mark-done-action"
DEFAULT_MARK_DONE_ACTION = "success-file"
SUCCESS_FILE = "_SUCCESS"
#: Actions this server performs; the others are refused by name.
_PERFORMED = ("success-file", "done-partition", "mark-event")
_REFUSED = {
    "http-report": "reports to an HTTP endpoint the table names (partition.mark-done-action.http.url)",
    "custom": "runs a Java class (partition.mark-done-action.custom.class)",
}


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as listings show it: totals (zero for a registered partition without data) and
    its registration (who created it, the done mark) when it has one."""

    name: str
    spec: Spec
    record_count: int = 0
    file_size_in_bytes: int = 0
    file_count: int = 0
    last_file_creation_time: int = 0
    total_buckets: int | None = None
    done: bool = False
    created_at: int | None = None
    created_by: str | None = None
    updated_at: int | None = None
    updated_by: str | None = None


#: Paimon's ``PartitionStatistics.UNKNOWN``: a statistic nobody reported (0 would claim an exact zero).
UNKNOWN = -1
#: Paimon's ``CoreOptions.METASTORE_PARTITIONED_TABLE``: a format table's partitions kept by the catalog.
METASTORE_PARTITIONED = "metastore.partitioned-table"


@dataclass(frozen=True, slots=True)
class FormatTable:
    """A format table with catalog-managed partitions, as this module needs it (what it shares with
    :class:`FileStoreTable`: the path, the FileIO, the schema, the partition keys, the options)."""

    path: str
    file_io: FileIO
    schema: TableSchema

    @property
    def partition_keys(self) -> list[str]:
        return list(self.schema.partition_keys)

    @property
    def options(self) -> CoreOptions:
        return self.schema.core_options


Table = FileStoreTable | FormatTable


def _resolve(catalog: MetastoreCatalog, identifier: str) -> tuple[TableRow, Table]:
    """The row and the table whose partitions the catalog keeps: a Paimon table, or a format table
    with catalog-managed partitions; ``UnsupportedError`` naming the type or the option otherwise."""
    row = catalog.table_row(identifier)
    if row.table_schema is None:
        return resolve_table(catalog, identifier)
    schema = metadata_tables.schema_of(row)
    if table_type(schema.options) != "format-table":
        raise metadata_tables.refuse(row)
    if schema.options.get(METASTORE_PARTITIONED, "false").strip().lower() != "true":
        raise UnsupportedError(
            f"table {row.identifier} is a format-table keeping its partitions in its directories, not in "
            f"the catalog ({METASTORE_PARTITIONED} is not true): its clients list them from storage",
            table=row.identifier,
            option=METASTORE_PARTITIONED,
        )
    location = catalog.location_of(row)
    return row, FormatTable(location, catalog.table_file_io(location), schema)


def _directory_statistics(table: FormatTable, info: PartitionInfo) -> PartitionInfo:
    """``info`` with the files of its directory counted (names starting with ``.`` or ``_`` are not
    data, as Paimon's format-table scan skips them); the record count stays unknown."""
    directory = join_path(table.path, _directory(info.spec))
    files, size, newest = 0, 0, UNKNOWN
    try:
        statuses = table.file_io.list_recursive(directory)
    except FileNotFound:
        statuses = []
    for status in statuses:
        relative = status.path[len(directory) :].strip("/")
        if any(part.startswith((".", "_")) for part in relative.split("/")):
            continue
        files += 1
        size += status.size
        newest = max(newest, int(status.mtime_ms))
    return replace(
        info,
        record_count=UNKNOWN,
        file_size_in_bytes=size,
        file_count=files,
        last_file_creation_time=newest if files else UNKNOWN,
    )


def with_statistics(
    catalog: MetastoreCatalog, identifier: str, infos: list[PartitionInfo]
) -> list[PartitionInfo]:
    """``infos`` (a page of a listing) with a format table's statistics read from its directories;
    a Paimon table's are the kept ones, returned as they are."""
    row = catalog.table_row(identifier)
    if row.table_schema is None:
        return infos
    _, table = _resolve(catalog, identifier)
    assert isinstance(table, FormatTable)
    return [_directory_statistics(table, i) for i in infos]


@dataclass(frozen=True, slots=True)
class DropResult:
    """What a drop did: the specs that named something, those that named nothing, and the OVERWRITE
    snapshot it committed (None when no named partition held data)."""

    dropped: list[Spec]
    missing: list[Spec]
    snapshot_id: int | None


def partition_name(spec: Mapping[str, str]) -> str:
    """``k=v/k2=v2`` in the spec's order (a listing's name, what ``partitionNamePattern`` matches)."""
    return "/".join(f"{k}={v}" for k, v in spec.items())


def _millis(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp() * 1000)


# ---- listing -------------------------------------------------------------------------------------------


def list_partitions(catalog: MetastoreCatalog, identifier: str) -> list[PartitionInfo]:
    """The table's partitions holding data or registered, sorted by name.

    Raises:
        UnsupportedError: the kept totals miss a snapshot published outside the catalog (a client then
            lists the partitions from the manifests itself).
    """
    return _listing(catalog, _resolve(catalog, identifier)[0])


def _listing(catalog: MetastoreCatalog, row: TableRow) -> list[PartitionInfo]:
    if row.table_schema is not None:  # a format table's partitions: its registrations
        return _registered(catalog, row, {})
    if not table_statistics(catalog.engine, row.table_id).complete:
        raise UnsupportedError(
            "partition statistics of this table miss a snapshot published outside the catalog; "
            "list its partitions from the manifests"
        )
    found: dict[str, PartitionInfo] = {}
    for p in partition_statistics(catalog.engine, row.table_id):
        found[partition_key(p.spec)] = PartitionInfo(
            partition_name(p.spec),
            dict(p.spec),
            p.record_count,
            p.file_size_in_bytes,
            p.file_count,
            p.last_file_creation_time,
            p.total_buckets,
        )
    return _registered(catalog, row, found)


def _registered(
    catalog: MetastoreCatalog, row: TableRow, found: dict[str, PartitionInfo]
) -> list[PartitionInfo]:
    """``found`` (the partitions holding data, by key) with the registrations joined in, by name."""
    for key, reg in registry.registrations(catalog.engine, row.table_id).items():
        base = found.get(key) or PartitionInfo(partition_name(reg.spec), dict(reg.spec))
        found[key] = PartitionInfo(
            base.name,
            base.spec,
            base.record_count,
            base.file_size_in_bytes,
            base.file_count,
            base.last_file_creation_time,
            base.total_buckets,
            done=reg.done,
            created_at=_millis(reg.created_at),
            created_by=reg.created_by,
            updated_at=_millis(reg.done_at or reg.created_at),
            updated_by=reg.done_by if reg.done else reg.created_by,
        )
    return sorted(found.values(), key=lambda p: p.name)


def partitions_by_names(
    catalog: MetastoreCatalog, identifier: str, specs: Sequence[Mapping[str, str]]
) -> list[PartitionInfo]:
    """The partitions ``specs`` name (full specs) that exist, in the order asked; unknown ones are left
    out, as Java's ``listPartitionsByNames`` does."""
    row, table = _resolve(catalog, identifier)
    wanted = [_full_spec(table, s, "specs") for s in specs]
    by_key = {partition_key(p.spec): p for p in _listing(catalog, row)}
    out: list[PartitionInfo] = []
    seen: set[str] = set()
    for spec in wanted:
        key = partition_key(spec)
        if key in by_key and key not in seen:
            seen.add(key)
            out.append(by_key[key])
    return out


def partitions_by_filter(catalog: MetastoreCatalog, identifier: str, filter_text: str) -> list[PartitionInfo]:
    """The partitions Java's serialized predicate ``filter_text`` may match, sorted by name: a superset
    where :mod:`paimon_meta.table.partition_filter` cannot decide (the protocol allows it; clients
    evaluate the predicate again). ``ValidationError`` naming ``filter`` for one it cannot read."""
    row, table = _resolve(catalog, identifier)
    test = parse_partition_filter(filter_text, table.schema, table.options.partition_default_name)
    return [p for p in _listing(catalog, row) if test(p.spec)]


# ---- create --------------------------------------------------------------------------------------------


def create_partitions(
    catalog: MetastoreCatalog,
    identifier: str,
    specs: Sequence[Mapping[str, str]],
    *,
    ignore_if_exists: bool = True,
    principal: str | None = None,
) -> tuple[list[Spec], list[Spec]]:
    """Register ``specs`` (full specs of the table's partition keys); returns (created, existed).

    Raises:
        ValidationError: a spec that does not name exactly the table's partition keys, or a table
            without partition keys.
        PartitionAlreadyExistsError: ``ignore_if_exists`` is false and one of them exists (nothing is
            registered then).
    """
    row, table = _resolve(catalog, identifier)
    wanted = _unique([_full_spec(table, s, "partitionSpecs") for s in specs])
    existing = {partition_key(p.spec) for p in _listing(catalog, row)}
    already = [s for s in wanted if partition_key(s) in existing]
    if already and not ignore_if_exists:
        raise PartitionAlreadyExistsError(
            f"partition {partition_name(already[0])} of table {row.identifier} already exists",
            resource_name=partition_name(already[0]),
        )
    new = [s for s in wanted if partition_key(s) not in existing]
    with maintenance_run(
        catalog,
        row,
        MaintenanceOperation.CREATE_PARTITIONS,
        dry_run=False,
        settings={"partitions": [partition_name(s) for s in wanted], "ignore_if_exists": ignore_if_exists},
        principal=principal,
    ) as run:
        registered = registry.register(catalog.engine, row.table_id, new, principal=principal)
        created = [s for s in new if partition_key(s) in registered]
        existed = [s for s in wanted if partition_key(s) not in registered]
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "created": [partition_name(s) for s in created],
                "existed": [partition_name(s) for s in existed],
            },
        )
    return created, existed


# ---- drop ----------------------------------------------------------------------------------------------


def drop_partitions(
    catalog: MetastoreCatalog,
    identifier: str,
    specs: Sequence[Mapping[str, str]],
    *,
    ignore_if_not_exists: bool = True,
    principal: str | None = None,
) -> DropResult:
    """Drop the partitions ``specs`` name (each a non-empty spec over the partition keys, a prefix
    naming every partition under it): one OVERWRITE snapshot deleting their live files (when any holds
    data), then their registrations removed.

    Raises:
        ValidationError: a spec naming a column that is not a partition key, or no column.
        PartitionNotFoundError: ``ignore_if_not_exists`` is false and a spec names nothing (nothing is
            dropped then).
        CommitConflictError, CommitOutcomeUnknownError: as any commit.
    """
    row, table = _resolve(catalog, identifier)
    wanted = _unique([_partial_spec(table, s) for s in specs])
    listed = _listing(catalog, row)
    dropped = [s for s in wanted if any(_covers(s, p.spec) for p in listed)]
    missing = [s for s in wanted if s not in dropped]
    if missing and not ignore_if_not_exists:
        raise PartitionNotFoundError(
            f"partition {partition_name(missing[0])} of table {row.identifier} does not exist",
            resource_name=partition_name(missing[0]),
        )
    with_data = [s for s in dropped if any(_covers(s, p.spec) and p.file_count > 0 for p in listed)]
    names = [partition_name(s) for s in wanted]
    snapshot_id: int | None = None
    with maintenance_run(
        catalog,
        row,
        MaintenanceOperation.DROP_PARTITIONS,
        dry_run=False,
        settings={"partitions": names, "ignore_if_not_exists": ignore_if_not_exists},
        principal=principal,
    ) as run:
        if with_data and isinstance(table, FileStoreTable):
            # Java's truncatePartitions: a static OVERWRITE of no files over the named partitions, its
            # own commit user; under the table's lock like every commit, its events in the commit log.
            committer = catalog.message_committer(
                identifier, f"drop-partitions-{uuid.uuid4()}", principal=principal, row=row, table=table
            )
            result = committer.commit([], overwrite=OverwriteSpec.partitions(with_data))
            snapshot_id = max(result.snapshot_ids, default=None)
        # After the commit: a failed commit leaves the registrations (the partitions are still there).
        keys = [partition_key(p.spec) for p in listed if any(_covers(s, p.spec) for s in dropped)]
        registry.unregister(catalog.engine, row.table_id, keys)
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "dropped": [partition_name(s) for s in dropped],
                "missing": [partition_name(s) for s in missing],
                "snapshot_id": snapshot_id,
            },
        )
    return DropResult(dropped, missing, snapshot_id)


# ---- mark done -----------------------------------------------------------------------------------------


def mark_done_actions(table: Table) -> list[str]:
    """The table's ``partition.mark-done-action`` values, checked: ``UnsupportedError`` naming an
    action this server does not perform, ``ValidationError`` naming one Paimon does not know."""
    raw = table.schema.options.get(MARK_DONE_ACTION, DEFAULT_MARK_DONE_ACTION)
    actions = [a.strip() for a in raw.split(",") if a.strip()]
    for action in actions:
        if action in _REFUSED:
            raise UnsupportedError(
                f"{MARK_DONE_ACTION} '{action}' is not supported by this catalog: it {_REFUSED[action]}",
                option=MARK_DONE_ACTION,
            )
        if action not in _PERFORMED:
            raise ValidationError(
                f"{MARK_DONE_ACTION} '{action}' is not one of Paimon's actions "
                f"({', '.join((*_PERFORMED, *_REFUSED))})",
                field=MARK_DONE_ACTION,
            )
    return actions


def mark_done_partitions(
    catalog: MetastoreCatalog,
    identifier: str,
    specs: Sequence[Mapping[str, str]],
    *,
    principal: str | None = None,
) -> list[str]:
    """Mark ``specs`` (full specs) done and perform the table's mark-done actions; returns the actions
    performed. A partition not registered yet is registered by its mark."""
    row, table = _resolve(catalog, identifier)
    wanted = _unique([_full_spec(table, s, "specs") for s in specs])
    actions = mark_done_actions(table)
    names = [partition_name(s) for s in wanted]
    with maintenance_run(
        catalog,
        row,
        MaintenanceOperation.MARK_DONE_PARTITIONS,
        dry_run=False,
        settings={"partitions": names, "actions": actions},
        principal=principal,
    ) as run:
        registry.mark_done(catalog.engine, row.table_id, wanted, principal=principal)
        written: list[str] = []
        if "success-file" in actions:
            written = [_write_success_file(table, s) for s in wanted]
        done_partitions: list[Spec] = []
        if "done-partition" in actions:
            done_partitions = [_done_partition(s) for s in wanted]
            registry.register(catalog.engine, row.table_id, done_partitions, principal=principal)
        run.record(
            MaintenanceEventType.FINISHED,
            {
                "partitions": names,
                "actions": actions,
                "success_files": written,
                "done_partitions": [partition_name(s) for s in done_partitions],
            },
        )
    return actions


def _directory(spec: Mapping[str, str]) -> str:
    """``k=v/k2=v2`` with Java's path escaping: a partition's directory under its table."""
    return "/".join(f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in spec.items())


def success_file_path(table: Table, spec: Mapping[str, str]) -> str:
    """``<table>/<k=v/...>/_SUCCESS`` with Java's path escaping (``SuccessFileMarkDoneAction``)."""
    return join_path(table.path, _directory(spec), SUCCESS_FILE)


def _write_success_file(table: Table, spec: Mapping[str, str]) -> str:
    """Java's ``SuccessFile`` JSON: the creation time kept when the file exists, the modification time
    now."""
    path = success_file_path(table, spec)
    now = int(time.time() * 1000)
    created = now
    try:
        created = int(json.loads(table.file_io.read(path))["creationTime"])
    except FileNotFound:
        pass
    except (ValueError, KeyError, TypeError):
        pass  # an unreadable file is replaced, as Java overwrites what it cannot parse on the next mark
    body = json.dumps({"creationTime": created, "modificationTime": now})
    table.file_io.write(path, body.encode("utf-8"))
    return path


def _done_partition(spec: Mapping[str, str]) -> Spec:
    """Java's ``AddDonePartitionAction``: the spec with ``.done`` appended to its last value."""
    out = dict(spec)
    last = list(out)[-1]
    out[last] = f"{out[last]}.done"
    return out


# ---- specs ---------------------------------------------------------------------------------------------


def _keys_of(table: Table, field: str) -> list[str]:
    keys = table.partition_keys
    if not keys:
        raise ValidationError(f"table {table.path} has no partition keys", field=field)
    return keys


def _check_values(spec: Mapping[str, object], field: str) -> None:
    if not isinstance(spec, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in spec.items()
    ):
        raise ValidationError(f"{field}: a partition spec maps names to strings, got {spec!r}", field=field)


def _full_spec(table: Table, spec: Mapping[str, str], field: str) -> Spec:
    """``spec`` in the table's partition-key order; ``ValidationError`` unless it names exactly them."""
    keys = _keys_of(table, field)
    _check_values(spec, field)
    if set(spec) != set(keys):
        raise ValidationError(
            f"{field}: partition spec {dict(spec)} must name exactly the partition keys {keys}", field=field
        )
    return {k: spec[k] for k in keys}


def _partial_spec(table: Table, spec: Mapping[str, str]) -> Spec:
    """A drop's spec: a non-empty subset of the partition keys, in their order."""
    keys = _keys_of(table, "partitionSpecs")
    _check_values(spec, "partitionSpecs")
    unknown = sorted(set(spec) - set(keys))
    if not spec or unknown:
        raise ValidationError(
            f"partitionSpecs: partition spec {dict(spec)} must name some of the partition keys {keys}",
            field="partitionSpecs",
        )
    return {k: spec[k] for k in keys if k in spec}


def _covers(spec: Mapping[str, str], partition: Mapping[str, str]) -> bool:
    return all(partition.get(k) == v for k, v in spec.items())


def _unique(specs: list[Spec]) -> list[Spec]:
    seen: set[str] = set()
    out = []
    for s in specs:
        key = partition_key(s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out
