"""A table's maintenance debt, measured from its latest snapshot, and the jobs it calls for.

* **Compaction**: a primary-key table owes it when Paimon's universal pick chooses runs to merge in some
  bucket (``table.mergetree.universal``: a full compaction by the early full compaction options or
  ``full-compaction.delta-commits``, below the trigger too; else with at least
  ``num-sorted-run.compaction-trigger`` sorted runs, by size amplification, size ratio or run count;
  each level-0 file is one run, each non-empty higher level one more: Java's ``LevelSortedRun``s);
  buckets beyond ``num-sorted-run.stop-trigger`` (where Java writers would wait; ours never do) are
  counted too. An append table owes it when a bucket has
  ``compaction.min.file-num`` small files (below 70 % of ``target-file-size``: ``compactionFileSize``).
* **Snapshots beyond retention**: more than ``snapshot.num-retained.max``, or more than ``.min`` with the
  second-oldest older than ``snapshot.time-retained`` (so the oldest would expire: Java's rule); or
  consumers not updated within ``consumer.expiration-time`` (the same job deletes them first).
* **Partitions past expiration**: partitions whose time (from their values: ``values-time``) is older
  than now minus ``partition.expiration-time``, looked for every ``partition.expiration-check-interval``.
* **A tag due**: ``tag.automatic-creation = process-time``: the last period that ended (plus
  ``tag.creation-delay``) has no tag yet; or more automatic tags than ``tag.num-retained-max``.
* **Orphan scan**: the last one is older than ``paimon-meta.maintenance.orphan-cleanup.interval``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from paimon_meta.db.models import MaintenanceKind
from paimon_meta.maintenance.options import MaintenanceOptions
from paimon_meta.table.compact import compaction_file_size
from paimon_meta.table.consumers import ConsumerManager
from paimon_meta.table.mergetree.universal import UniversalCompaction, pick_bucket, stop_trigger
from paimon_meta.table.read.scan import FileStoreScan
from paimon_meta.table.tags import TagManager
from paimon_meta.table.write.arrow_input import UNAWARE_BUCKET, num_levels

if TYPE_CHECKING:
    from paimon_meta.table.table import FileStoreTable


@dataclass(slots=True)
class Debt:
    """What a table owes, as measured; :meth:`due` says which jobs that calls for."""

    snapshot_id: int | None = None
    primary_key: bool = False
    buckets: int = 0
    files: int = 0
    bytes: int = 0
    #: the most sorted runs (primary key) or small files (append) of any bucket
    max_sorted_runs: int = 0
    max_small_files: int = 0
    compaction_trigger: int = 0
    #: primary key: the buckets the universal pick would compact now, and those past the stop trigger
    buckets_picked: int = 0
    stop_trigger: int = 0
    buckets_over_stop_trigger: int = 0
    snapshots: int = 0
    snapshots_expirable: bool = False
    #: consumers past ``consumer.expiration-time``
    consumers_expired: int = 0
    expired_partitions: list[dict[str, str]] = field(default_factory=list)
    tag_due: str | None = None
    tags_over_retention: int = 0
    orphan_scan_due: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def due(self) -> list[MaintenanceKind]:
        kinds: list[MaintenanceKind] = []
        if self.primary_key:
            compaction_due = self.buckets_picked > 0
        else:
            compaction_due = bool(self.compaction_trigger) and self.max_small_files >= self.compaction_trigger
        if compaction_due:
            kinds.append(MaintenanceKind.COMPACT)
        if self.snapshots_expirable or self.consumers_expired:
            kinds.append(MaintenanceKind.EXPIRE_SNAPSHOTS)
        if self.expired_partitions:
            kinds.append(MaintenanceKind.EXPIRE_PARTITIONS)
        if self.tag_due is not None or self.tags_over_retention:
            kinds.append(MaintenanceKind.CREATE_TAG)
        if self.orphan_scan_due:
            kinds.append(MaintenanceKind.REMOVE_ORPHANS)
        return kinds


@dataclass(frozen=True, slots=True)
class BucketFiles:
    """The live files of one bucket, as compaction counts them."""

    files: int
    bytes: int
    sorted_runs: int
    small_files: int
    #: primary key: the universal pick chooses runs of this bucket to merge now
    picked: bool = False


def bucket_files(table: FileStoreTable) -> list[BucketFiles]:
    """Per (partition, bucket) of the latest snapshot: its files, bytes, sorted runs and small files
    (level 0 included: compaction must see it), and whether the universal pick would compact it."""
    snapshot = table.latest_snapshot()
    if snapshot is None:
        return []
    schema = table.schema
    plan = FileStoreScan(table.manifest_reader, schema, snapshot, all_levels=True).plan()
    small = compaction_file_size(schema)
    strategy = (
        UniversalCompaction.of(schema.options).bind(table.snapshot_manager) if schema.primary_keys else None
    )
    out = []
    for split in plan.splits():
        levels = {f.level for f in split.files if f.level > 0}
        level0 = sum(1 for f in split.files if f.level == 0)
        out.append(
            BucketFiles(
                files=len(split.files),
                bytes=sum(f.file_size for f in split.files),
                sorted_runs=level0 + len(levels),
                small_files=sum(1 for f in split.files if f.file_size < small),
                picked=strategy is not None
                and pick_bucket(strategy, num_levels(schema), split.files) is not None,
            )
        )
    return out


def measure(
    table: FileStoreTable,
    options: MaintenanceOptions,
    *,
    last_runs: Mapping[str, str],
    partitions: Sequence[Mapping[str, str]] | None = None,
    now_ms: int | None = None,
) -> Debt:
    """The table's debt now (``partitions``: its partition specs, needed only when partitions expire;
    ``last_runs``: kind -> ISO time of its last success)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    schema = table.schema
    debt = Debt(primary_key=bool(schema.primary_keys))
    snapshots = table.snapshot_manager
    latest = snapshots.latest_snapshot_id()
    debt.snapshot_id = latest
    buckets = bucket_files(table)
    debt.buckets = len(buckets)
    debt.files = sum(b.files for b in buckets)
    debt.bytes = sum(b.bytes for b in buckets)
    debt.max_sorted_runs = max((b.sorted_runs for b in buckets), default=0)
    debt.max_small_files = max((b.small_files for b in buckets), default=0)
    debt.compaction_trigger = options.sorted_run_trigger if debt.primary_key else options.min_file_num
    if debt.primary_key:
        debt.buckets_picked = sum(1 for b in buckets if b.picked)
        debt.stop_trigger = stop_trigger(schema.options)
        debt.buckets_over_stop_trigger = sum(1 for b in buckets if b.sorted_runs > debt.stop_trigger)
    if schema.num_buckets == UNAWARE_BUCKET and not debt.primary_key:
        debt.compaction_trigger = options.min_file_num
    earliest = snapshots.earliest_snapshot_id()
    if latest is not None and earliest is not None:
        debt.snapshots = latest - earliest + 1
        debt.snapshots_expirable = _snapshots_expirable(table, earliest, debt.snapshots, now)
    if options.consumer_expiration_ms is not None:
        consumers = ConsumerManager(table.file_io, table.path)
        debt.consumers_expired = len(consumers.expired(now - options.consumer_expiration_ms))
    last_partition_check = last_runs.get(MaintenanceKind.EXPIRE_PARTITIONS.value)
    if (
        options.partition_expiration_ms is not None
        and partitions
        and schema.partition_keys
        and _older_than(last_partition_check, options.partition_check_interval_ms, now)
    ):
        debt.expired_partitions = expired_partitions(partitions, options, schema.partition_keys, now_ms=now)
    if options.tag_creation == "process-time" and latest is not None:
        debt.tag_due, debt.tags_over_retention = _tags_due(table, options, now)
    # Never scanned: counted from the table's first snapshot (a new table has no orphans yet).
    last_scan = last_runs.get(MaintenanceKind.REMOVE_ORPHANS.value)
    first = snapshots.earliest_snapshot() if last_scan is None else None
    if last_scan is None and first is not None:
        last_scan = datetime.fromtimestamp(first.time_millis / 1000).astimezone().isoformat()
    debt.orphan_scan_due = last_scan is not None and _older_than(last_scan, options.orphan_interval_ms, now)
    return debt


def _older_than(iso: str | None, interval_ms: int, now_ms: int) -> bool:
    if iso is None:
        return True
    return now_ms - datetime.fromisoformat(iso).timestamp() * 1000 >= interval_ms


def _snapshots_expirable(table: FileStoreTable, earliest: int, count: int, now_ms: int) -> bool:
    """Java's rule for the oldest snapshot: it expires when more than ``retain_max`` are kept, or more
    than ``retain_min`` and the snapshot after it is older than ``time-retained``."""
    opts = table.options
    retain_min = opts.snapshot_num_retained_min
    retain_max = opts.snapshot_num_retained_max
    if count <= retain_min:
        return False
    if retain_max is not None and count > retain_max:
        return True
    following = table.snapshot_manager.find(earliest + 1)
    return following is not None and following.time_millis < now_ms - opts.snapshot_time_retained_ms


# ---- partition TTL ---------------------------------------------------------------------------------------

# Java DateTimeFormatter letters -> strptime directives (the ones partition formatters use).
_JAVA_PATTERN = [
    ("yyyy", "%Y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
]
_DEFAULT_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d", "%Y%m%d")


def _strptime_format(java: str) -> str:
    out = java
    for letters, directive in _JAVA_PATTERN:
        out = out.replace(letters, directive)
    return out


def partition_time_ms(
    spec: Mapping[str, str], keys: Sequence[str], options: MaintenanceOptions
) -> int | None:
    """The time a partition stands for (Java's ``PartitionTimeExtractor``): ``partition.timestamp-pattern``
    with ``$key`` replaced by values (default: the first partition key's value), parsed with
    ``partition.timestamp-formatter`` (default: ``yyyy-MM-dd HH:mm:ss`` or a date); None if it does not
    parse (such a partition never expires)."""
    if options.partition_pattern:
        text = re.sub(r"\$(\w+)", lambda m: str(spec.get(m.group(1), m.group(0))), options.partition_pattern)
    else:
        text = str(spec.get(keys[0], ""))
    formats = (
        (_strptime_format(options.partition_formatter),) if options.partition_formatter else _DEFAULT_FORMATS
    )
    for fmt in formats:
        try:
            return int(datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    return None


def expired_partitions(
    partitions: Sequence[Mapping[str, str]],
    options: MaintenanceOptions,
    keys: Sequence[str],
    *,
    now_ms: int,
) -> list[dict[str, str]]:
    """The partitions whose time is before now minus ``partition.expiration-time`` (Java's
    ``PartitionValuesTimeExpireStrategy``)."""
    assert options.partition_expiration_ms is not None
    cutoff = now_ms - options.partition_expiration_ms
    out = []
    for spec in partitions:
        moment = partition_time_ms(spec, keys, options)
        if moment is not None and moment < cutoff:
            out.append(dict(spec))
    return out


# ---- automatic tags --------------------------------------------------------------------------------------


_PERIOD_FORMATS = {
    "with_dashes": ("%Y-%m-%d", "%Y-%m-%d %H"),
    "without_dashes": ("%Y%m%d", "%Y%m%d %H"),
    "without_dashes_and_spaces": ("%Y%m%d", "%Y%m%d%H"),
}


def period_tag_name(period_start_ms: int, period_ms: int, formatter: str = "with_dashes") -> str:
    """Java's tag names by ``tag.period-formatter``: ``with_dashes`` (``2024-01-31`` for a day,
    ``2024-01-31 10`` for an hour), ``without_dashes`` (``20240131``, ``20240131 10``),
    ``without_dashes_and_spaces`` (``20240131``, ``2024013110``)."""
    daily, hourly = _PERIOD_FORMATS[formatter]
    moment = time.localtime(period_start_ms / 1000)
    return time.strftime(daily if period_ms >= 86_400_000 else hourly, moment)


_AUTO_TAG = re.compile(r"^(\d{4}-\d{2}-\d{2}( \d{2})?|\d{8}( ?\d{2})?)$")


def automatic_tags(table: FileStoreTable) -> list[str]:
    """The table's tags named as automatic creation names them, oldest first."""
    return sorted(n for n in TagManager(table.file_io, table.path).names() if _AUTO_TAG.match(n))


def last_period_start(options: MaintenanceOptions, now_ms: int) -> int:
    """The start of the last period that ended (``tag.creation-delay`` ago), in local time."""
    assert options.tag_period_ms is not None
    offset_ms = -time.localtime(now_ms / 1000).tm_gmtoff * 1000
    moment = now_ms - options.tag_delay_ms
    end = ((moment - offset_ms) // options.tag_period_ms) * options.tag_period_ms + offset_ms
    return end - options.tag_period_ms


def _tags_due(table: FileStoreTable, options: MaintenanceOptions, now_ms: int) -> tuple[str | None, int]:
    start = last_period_start(options, now_ms)
    assert options.tag_period_ms is not None
    name = period_tag_name(start, options.tag_period_ms, options.tag_formatter)
    tags = automatic_tags(table)
    earliest = table.snapshot_manager.earliest_snapshot()
    # Only a period the table lived through (tags are not made for history before it).
    due = (
        name
        if name not in tags and earliest is not None and earliest.time_millis < start + options.tag_period_ms
        else None
    )
    over = 0
    if options.tag_num_retained_max is not None:
        over = max(0, len(tags) + (1 if due else 0) - options.tag_num_retained_max)
    return due, over
