"""The table options maintenance reads: Paimon's own (so a Java-written option means the same here) and
the switches of our own prefix, ``paimon-meta.maintenance.``.

Paimon's options, with Java's defaults:

* ``num-sorted-run.compaction-trigger`` (5): a primary-key bucket with this many sorted runs (each
  level-0 file is one, each non-empty higher level one more) is compacted;
* ``compaction.min.file-num`` (5): an append bucket with this many small files (below 70 % of
  ``target-file-size``) is compacted;
* ``compaction.offpeak.start.hour``/``.end.hour`` (-1: off), ``compaction.offpeak-ratio`` (0): during
  those local hours the universal pick's size ratio grows by the ratio, so the debt the scheduler
  measures, and the compactions the workers run, take larger runs (``table.mergetree.universal``);
* ``compaction.optimization-interval``, ``compaction.total-size-threshold``,
  ``compaction.incremental-size-threshold`` (all off), ``full-compaction.delta-commits`` (off): a
  primary-key bucket is fully compacted, before (and whatever) the rules above, when its last full
  compaction is older than the interval, its runs weigh less than the total threshold, its runs above the
  max level more than the incremental one, or that many delta commits were made to the table since its
  last full compaction (``table.mergetree.universal``: Java's early full compaction, and the schedule
  Java's writers keep for ``full-compaction.delta-commits``);
* ``snapshot.num-retained.min``/``.max``, ``snapshot.time-retained``, ``snapshot.expire.limit``:
  snapshot expiration (``ops.expire``);
* ``consumer.expiration-time`` (off): consumers not updated for that long are deleted by the job that
  expires snapshots, before it does (Java's commit does the same), so they hold back expiration no more;
* ``partition.expiration-time`` (off), ``partition.expiration-check-interval`` (1 h),
  ``partition.timestamp-formatter``, ``partition.timestamp-pattern``: partition TTL by the partition's
  values (Java's ``values-time`` strategy);
* ``tag.automatic-creation`` (``none``; ``process-time`` is run here), ``tag.creation-period``
  (``daily``, ``hourly``, ``two-hours``), ``tag.creation-delay`` (0), ``tag.period-formatter``
  (``with_dashes``, ``without_dashes``, ``without_dashes_and_spaces``), ``tag.num-retained-max`` (off).

Ours:

* ``paimon-meta.maintenance.enabled`` (true): a table option turns maintenance off for one table; as a
  catalog option (``-o``) for every table of the catalog (a table option still wins);
* ``paimon-meta.maintenance.compaction.linger`` (``2 s``; ``0 s``: off): a primary-key compaction job
  that compacted something does not end when the pick finds nothing more: it waits up to this long for
  the next snapshot and picks again, so a table under steady writers is compacted as its runs reach the
  trigger instead of after the scheduler's next tick and the queue's next poll (which let runs pile up
  well past the trigger); it ends after this long without a commit, or after
  ``compaction.max-rounds``/``-seconds`` (bounded so other tables get the worker);
* ``paimon-meta.maintenance.compaction.max-rounds`` (64) and ``.max-seconds`` (``60 s``): the most
  compaction commits and the longest time of one job;
* ``paimon-meta.maintenance.orphan-cleanup.interval`` (``1 d``): how often orphan files are looked for;
* ``paimon-meta.maintenance.orphan-cleanup.older-than`` (``1 d``): only files older than this are
  orphans (a commit in flight writes its files well within it);

(``deletion-protection``, which refuses drops, is read by ``ops.tables``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from paimon_meta.errors import ValidationError
from paimon_meta.model.options import parse_duration_ms, parse_memory_size

PREFIX = "paimon-meta.maintenance."
ENABLED = PREFIX + "enabled"
ORPHAN_INTERVAL = PREFIX + "orphan-cleanup.interval"
ORPHAN_OLDER_THAN = PREFIX + "orphan-cleanup.older-than"
COMPACTION_LINGER = PREFIX + "compaction.linger"
COMPACTION_MAX_ROUNDS = PREFIX + "compaction.max-rounds"
COMPACTION_MAX_SECONDS = PREFIX + "compaction.max-seconds"
#: A compaction of a table holding at least this many bytes runs as the Spark compaction job, when the
#: worker has a Spark master (``--maintenance-spark-master``); below it, or without one, in the worker.
COMPACTION_SPARK_MIN_BYTES = PREFIX + "compaction.spark-min-bytes"

SORTED_RUN_TRIGGER = "num-sorted-run.compaction-trigger"
COMPACTION_MIN_FILE_NUM = "compaction.min.file-num"
CONSUMER_EXPIRATION_TIME = "consumer.expiration-time"
PARTITION_EXPIRATION_TIME = "partition.expiration-time"
PARTITION_EXPIRATION_CHECK_INTERVAL = "partition.expiration-check-interval"
PARTITION_TIMESTAMP_FORMATTER = "partition.timestamp-formatter"
PARTITION_TIMESTAMP_PATTERN = "partition.timestamp-pattern"
TAG_AUTOMATIC_CREATION = "tag.automatic-creation"
TAG_CREATION_PERIOD = "tag.creation-period"
TAG_CREATION_DELAY = "tag.creation-delay"
TAG_NUM_RETAINED_MAX = "tag.num-retained-max"
TAG_PERIOD_FORMATTER = "tag.period-formatter"
_FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")

_TRUE = frozenset({"true"})
_FALSE = frozenset({"false"})
_PERIODS_MS = {"daily": 86_400_000, "hourly": 3_600_000, "two-hours": 7_200_000}


def _bool(options: Mapping[str, str], key: str) -> bool | None:
    value = options.get(key)
    if value is None:
        return None
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValidationError(f"option {key}={value!r} is not true or false", option=key)


def _bytes(
    table_options: Mapping[str, str], catalog_options: Mapping[str, str], key: str, default: str
) -> int:
    """A memory size (Paimon's ``1 gb``, ``512mb``, ``1024``) of the table's options, else the catalog's."""
    return parse_memory_size(table_options.get(key, catalog_options.get(key, default)), key=key)


def _int(options: Mapping[str, str], key: str, default: int, minimum: int = 1) -> int:
    value = options.get(key)
    if value is None:
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ValidationError(f"option {key}={value!r} is not an integer", option=key) from None
    if number < minimum:
        raise ValidationError(f"option {key}={value!r} must be at least {minimum}", option=key)
    return number


def _duration(options: Mapping[str, str], key: str, default: str | None) -> int | None:
    value = options.get(key, default)
    return None if value is None else parse_duration_ms(value, key=key)


@dataclass(frozen=True, slots=True)
class MaintenanceOptions:
    """What maintenance does for one table: its options over the catalog's."""

    enabled: bool
    sorted_run_trigger: int
    min_file_num: int
    consumer_expiration_ms: int | None
    partition_expiration_ms: int | None
    partition_check_interval_ms: int
    partition_formatter: str | None
    partition_pattern: str | None
    tag_creation: str
    tag_period_ms: int | None
    tag_formatter: str
    tag_delay_ms: int
    tag_num_retained_max: int | None
    orphan_interval_ms: int
    orphan_older_than_ms: int
    compaction_linger_ms: int = 2_000
    compaction_max_rounds: int = 64
    compaction_max_ms: int = 60_000
    compaction_spark_min_bytes: int = 1 << 30

    @classmethod
    def of(
        cls, table_options: Mapping[str, str], catalog_options: Mapping[str, str] | None = None
    ) -> MaintenanceOptions:
        """Read (and check: ``ValidationError`` naming the option) the options of a table."""
        table_switch = _bool(table_options, ENABLED)
        catalog_switch = _bool(catalog_options or {}, ENABLED)
        enabled = table_switch if table_switch is not None else catalog_switch is not False
        creation = table_options.get(TAG_AUTOMATIC_CREATION, "none").strip().lower()
        period = table_options.get(TAG_CREATION_PERIOD, "daily").strip().lower()
        if creation == "process-time" and period not in _PERIODS_MS:
            raise ValidationError(
                f"option {TAG_CREATION_PERIOD}={period!r} is not one of {sorted(_PERIODS_MS)}",
                option=TAG_CREATION_PERIOD,
            )
        formatter = table_options.get(TAG_PERIOD_FORMATTER, "with_dashes").strip().lower()
        if formatter not in _FORMATTERS:
            raise ValidationError(
                f"option {TAG_PERIOD_FORMATTER}={formatter!r} is not one of {list(_FORMATTERS)}",
                option=TAG_PERIOD_FORMATTER,
            )
        retained = table_options.get(TAG_NUM_RETAINED_MAX)
        return cls(
            enabled=enabled,
            sorted_run_trigger=_int(table_options, SORTED_RUN_TRIGGER, 5),
            min_file_num=_int(table_options, COMPACTION_MIN_FILE_NUM, 5),
            consumer_expiration_ms=_duration(table_options, CONSUMER_EXPIRATION_TIME, None),
            partition_expiration_ms=_duration(table_options, PARTITION_EXPIRATION_TIME, None),
            partition_check_interval_ms=_duration(table_options, PARTITION_EXPIRATION_CHECK_INTERVAL, "1 h")
            or 0,
            partition_formatter=table_options.get(PARTITION_TIMESTAMP_FORMATTER),
            partition_pattern=table_options.get(PARTITION_TIMESTAMP_PATTERN),
            tag_creation=creation,
            tag_period_ms=_PERIODS_MS.get(period),
            tag_formatter=formatter,
            tag_delay_ms=_duration(table_options, TAG_CREATION_DELAY, "0 ms") or 0,
            tag_num_retained_max=None if retained is None else _int(table_options, TAG_NUM_RETAINED_MAX, 1),
            orphan_interval_ms=_duration(table_options, ORPHAN_INTERVAL, "1 d") or 0,
            orphan_older_than_ms=_duration(table_options, ORPHAN_OLDER_THAN, "1 d") or 0,
            compaction_linger_ms=_duration(table_options, COMPACTION_LINGER, "2 s") or 0,
            compaction_max_rounds=_int(table_options, COMPACTION_MAX_ROUNDS, 64),
            compaction_max_ms=_duration(table_options, COMPACTION_MAX_SECONDS, "60 s") or 0,
            compaction_spark_min_bytes=_bytes(
                table_options, catalog_options or {}, COMPACTION_SPARK_MIN_BYTES, "1 gb"
            ),
        )
