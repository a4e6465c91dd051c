"""What each kind of maintenance job does, with the tools that exist for it: compaction
(``table.compact``: for primary-key tables the runs Paimon's universal pick chooses, for append tables
their small files), snapshot expiration (``ops.expire``), partition drops (``ops.partitions``), tags
(``ops.tags``), orphan cleanup (``ops.orphans``) and the recycle bin's purge (``ops.tables``).

Every action re-measures what it acts on when it runs (the debt that queued it may be stale) and does
nothing when nothing is due. Files and bytes before and after are the table's live data files, except a
compaction's file counts: the files it replaced and the files it wrote (writers add files meanwhile).

Commits go through the catalog like any writer's: the table's lock, the conflict checks, the event log;
compaction retries on a conflict (it re-plans on the new snapshot), so a user commit never has to.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_meta.db.models import MaintenanceKind
from paimon_meta.maintenance.debt import (
    automatic_tags,
    bucket_files,
    expired_partitions,
    last_period_start,
    period_tag_name,
)
from paimon_meta.maintenance.options import MaintenanceOptions
from paimon_meta.maintenance.spark import SparkCompaction, compact_on_spark
from paimon_meta.ops import tables as table_ops
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.orphans import remove_orphan_files
from paimon_meta.ops.partitions import drop_partitions, list_partitions
from paimon_meta.ops.tags import create_tag, delete_tag
from paimon_meta.table.compact import compact
from paimon_meta.table.consumers import ConsumerManager
from paimon_meta.table.mergetree.universal import UniversalCompaction

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable

log = logging.getLogger(__name__)

#: Commits of maintenance are made as ``paimon-meta-maintenance-<uuid>`` (the event log tells them apart).
COMMIT_USER_PREFIX = "paimon-meta-maintenance-"
#: Who maintenance runs are recorded as (the maintenance log's ``principal``).
PRINCIPAL = "paimon-meta-maintenance"


@dataclass(slots=True)
class Outcome:
    """What one run did."""

    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    #: False: nothing was due when the job ran
    acted: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files_before": self.files_before,
            "files_after": self.files_after,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "acted": self.acted,
            **self.details,
        }


def _measure(table: FileStoreTable) -> tuple[int, int]:
    buckets = bucket_files(table)
    return sum(b.files for b in buckets), sum(b.bytes for b in buckets)


def _with_sizes(
    catalog: MetastoreCatalog, identifier: str, outcome: Outcome, before: tuple[int, int]
) -> Outcome:
    outcome.files_before, outcome.bytes_before = before
    outcome.files_after, outcome.bytes_after = _measure(catalog.get_table(identifier))
    return outcome


def run_action(
    catalog: MetastoreCatalog,
    kind: MaintenanceKind,
    identifier: str,
    *,
    table_id: int,
    spark: SparkCompaction | None = None,
) -> Outcome:
    """Run one job of ``kind`` on ``identifier`` (for ``purge_dropped``: the dropped table ``table_id``);
    with ``spark``, a compaction of a table of ``compaction.spark-min-bytes`` or more runs as the Spark
    compaction job (maintenance/spark.py)."""
    if kind is MaintenanceKind.PURGE_DROPPED:
        return _purge(catalog, table_id)
    table = catalog.get_table(identifier)
    options = MaintenanceOptions.of(table.options.raw, catalog.options)
    before = _measure(table)
    if kind is MaintenanceKind.COMPACT:
        large = spark is not None and before[1] >= options.compaction_spark_min_bytes
        work = (
            _compact_on_spark(catalog, identifier, table, options, spark)
            if large and spark is not None
            else _compact(table, options)
        )
        outcome = _with_sizes(catalog, identifier, work, before)
        if outcome.acted:
            # The files compaction replaced and wrote (writers may have added others meanwhile).
            outcome.files_before = outcome.details["compacted_files"]
            outcome.files_after = outcome.details["written_files"]
        return outcome
    if kind is MaintenanceKind.EXPIRE_SNAPSHOTS:
        # Consumers past consumer.expiration-time first, as Java's commit does: the snapshots only they
        # held back may then expire in this run.
        consumers: list[str] = []
        if options.consumer_expiration_ms is not None:
            cutoff = int(time.time() * 1000) - options.consumer_expiration_ms
            consumers = ConsumerManager(table.file_io, table.path).expire(cutoff)
        report = expire_snapshots(catalog, identifier)
        outcome = Outcome(
            acted=bool(report.expired or consumers),
            details={
                "expired_consumers": consumers,
                "expired": len(report.expired),
                "earliest_after": report.earliest_after,
                "deleted_data_files": len(report.deleted_data_files),
                "deleted_metadata_files": len(report.deleted_metadata_files),
            },
        )
        return _with_sizes(catalog, identifier, outcome, before)
    if kind is MaintenanceKind.EXPIRE_PARTITIONS:
        return _with_sizes(
            catalog, identifier, _expire_partitions(catalog, identifier, table, options), before
        )
    if kind is MaintenanceKind.CREATE_TAG:
        return _with_sizes(catalog, identifier, _tags(catalog, identifier, table, options), before)
    if kind is MaintenanceKind.REMOVE_ORPHANS:
        orphans = remove_orphan_files(
            catalog, identifier, older_than_seconds=options.orphan_older_than_ms / 1000
        )
        outcome = Outcome(
            acted=bool(orphans.deleted),
            details={
                "scanned": orphans.scanned,
                "deleted": len(orphans.deleted),
                "orphan_bytes": orphans.orphan_bytes,
                "too_young": orphans.too_young,
                "failed": len(orphans.failed),
            },
        )
        return _with_sizes(catalog, identifier, outcome, before)
    raise AssertionError(f"unknown maintenance kind {kind}")


def _compact(table: FileStoreTable, options: MaintenanceOptions) -> Outcome:
    if table.schema.primary_keys:
        return _compact_runs(table, options)
    buckets = bucket_files(table)
    worst = max((b.small_files for b in buckets), default=0)
    trigger = options.min_file_num
    if worst < trigger:
        return Outcome(details={"worst_bucket": worst, "trigger": trigger})
    result = compact(table, commit_user=f"{COMMIT_USER_PREFIX}{uuid.uuid4()}")
    return Outcome(
        acted=bool(result.snapshot_ids),
        details={
            "snapshot_ids": list(result.snapshot_ids),
            "buckets": result.buckets,
            "conflicts": result.conflicts,
            "rows_rewritten": result.rows_rewritten,
            "compacted_files": result.files_before,
            "written_files": result.files_after,
            "worst_bucket": worst,
            "trigger": trigger,
        },
    )


def _compact_on_spark(
    catalog: MetastoreCatalog,
    identifier: str,
    table: FileStoreTable,
    options: MaintenanceOptions,
    spark: SparkCompaction,
) -> Outcome:
    """A large table's compaction as the Spark job (a full compaction: every bucket's files merged), when
    the in-process trigger says it is due (append: small files per bucket; primary key: the universal
    pick); else nothing, as in-process."""
    buckets = bucket_files(table)
    if table.schema.primary_keys:
        strategy = UniversalCompaction.of(table.schema.options)
        worst = max((b.sorted_runs for b in buckets), default=0)
        trigger = strategy.num_run_compaction_trigger
        due = any(b.picked for b in buckets)
    else:
        worst = max((b.small_files for b in buckets), default=0)
        trigger = options.min_file_num
        due = worst >= trigger
    details: dict[str, Any] = {"worst_bucket": worst, "trigger": trigger}
    if not due:
        return Outcome(details=details)
    result = compact_on_spark(catalog, identifier, spark)
    return Outcome(acted=bool(result["snapshot_ids"]), details={**details, **result})


def _compact_runs(table: FileStoreTable, options: MaintenanceOptions) -> Outcome:
    """Primary key: the runs the universal pick chooses, committed; again on the new snapshot while the
    pick still chooses something (writers add runs meanwhile). Once it chose nothing, a job that compacted
    waits up to ``compaction.linger`` for the next snapshot and picks again (a table under steady writers
    stays near its trigger; without it, runs piled up during the scheduler's tick and the queue's poll
    before the next job). At most ``compaction.max-rounds`` commits and ``compaction.max-seconds``."""
    strategy = UniversalCompaction.of(table.schema.options)
    worst = max((b.sorted_runs for b in bucket_files(table)), default=0)
    details: dict[str, Any] = {
        "strategy": "universal",
        # the options that make a full compaction due early (None: none set)
        "early_full": None if strategy.early_full is None else dataclasses.asdict(strategy.early_full),
        "full_compaction_delta_commits": strategy.full_compaction_delta_commits,
        "worst_bucket": worst,
        "trigger": strategy.num_run_compaction_trigger,
        "snapshot_ids": [],
        "buckets": 0,
        "conflicts": 0,
        "rows_rewritten": 0,
        "compacted_files": 0,
        "written_files": 0,
        "rounds": 0,
        # how often the job waited for a next snapshot after the pick chose nothing
        "lingers": 0,
    }
    deadline = time.monotonic() + options.compaction_max_ms / 1000
    while details["rounds"] < options.compaction_max_rounds and time.monotonic() < deadline:
        # A user of its own per commit: batch commits of one user share one identifier, so a second commit
        # of the same user would be taken for a retry of the first and skipped (Java's dedupe).
        user = f"{COMMIT_USER_PREFIX}{uuid.uuid4()}"
        result = compact(table, commit_user=user, strategy=strategy)
        if not result.snapshot_ids:
            if not details["rounds"] or not _next_snapshot(table, options.compaction_linger_ms, deadline):
                break
            details["lingers"] += 1
            continue
        details["rounds"] += 1
        details["snapshot_ids"] += list(result.snapshot_ids)
        details["buckets"] += result.buckets
        details["conflicts"] += result.conflicts
        details["rows_rewritten"] += result.rows_rewritten
        details["compacted_files"] += result.files_before
        details["written_files"] += result.files_after
    return Outcome(acted=bool(details["snapshot_ids"]), details=details)


#: How often a lingering compaction job looks for the table's next snapshot (its LATEST hint).
LINGER_POLL_SECONDS = 0.05


def _next_snapshot(table: FileStoreTable, linger_ms: int, deadline: float) -> bool:
    """Wait up to ``linger_ms`` (and never past ``deadline``) for a snapshot after the latest; whether
    one came."""
    snapshots = table.snapshot_manager
    latest = snapshots.latest_snapshot_id()
    until = min(deadline, time.monotonic() + linger_ms / 1000)
    while time.monotonic() < until:
        time.sleep(LINGER_POLL_SECONDS)
        if snapshots.latest_snapshot_id() != latest:
            return True
    return False


def _expire_partitions(
    catalog: MetastoreCatalog, identifier: str, table: FileStoreTable, options: MaintenanceOptions
) -> Outcome:
    if options.partition_expiration_ms is None or not table.schema.partition_keys:
        return Outcome(details={"expired_partitions": []})
    specs = [p.spec for p in list_partitions(catalog, identifier) if p.file_count > 0]
    expired = expired_partitions(specs, options, table.schema.partition_keys, now_ms=int(time.time() * 1000))
    if not expired:
        return Outcome(details={"expired_partitions": []})
    result = drop_partitions(catalog, identifier, expired, principal=PRINCIPAL)
    return Outcome(
        acted=True, details={"expired_partitions": result.dropped, "snapshot_id": result.snapshot_id}
    )


def _tags(
    catalog: MetastoreCatalog, identifier: str, table: FileStoreTable, options: MaintenanceOptions
) -> Outcome:
    created: str | None = None
    if options.tag_creation == "process-time" and options.tag_period_ms is not None:
        now = int(time.time() * 1000)
        start = last_period_start(options, now)
        name = period_tag_name(start, options.tag_period_ms, options.tag_formatter)
        earliest = table.snapshot_manager.earliest_snapshot()
        if (
            name not in automatic_tags(table)
            and earliest is not None
            and earliest.time_millis < start + options.tag_period_ms
        ):
            create_tag(catalog, identifier, name, principal=PRINCIPAL, reason="tag.automatic-creation")
            created = name
    deleted: list[str] = []
    if options.tag_num_retained_max is not None:
        tags = automatic_tags(catalog.get_table(identifier))
        for name in tags[: max(0, len(tags) - options.tag_num_retained_max)]:
            delete_tag(catalog, identifier, name, principal=PRINCIPAL, reason="tag.num-retained-max")
            deleted.append(name)
    return Outcome(acted=bool(created or deleted), details={"created": created, "deleted": deleted})


def _purge(catalog: MetastoreCatalog, table_id: int) -> Outcome:
    due = [d for d in catalog.recycle_bin.expired() if d.table_id == table_id]
    if not due:
        return Outcome(details={"purged": False})
    deleted = table_ops.purge_dropped(catalog, due[0], principal=PRINCIPAL, reason="expired")
    return Outcome(acted=True, files_before=deleted, details={"purged": True, "drop_id": due[0].drop_id})
