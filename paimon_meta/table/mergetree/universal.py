"""Paimon's universal compaction pick for primary-key buckets (Java ``UniversalCompaction``, the
``CompactStrategy`` of ``MergeTreeCompactManager``; after RocksDB's universal compaction).

A bucket's files form *sorted runs* (Java ``Levels.levelSortedRuns``): every level-0 file is a run of its
own, newest first (highest ``max_sequence_number``, then lowest ``min_sequence_number``, then creation time
and file name), followed by one run per non-empty level 1 .. max level, lowest level first. So the first
run is the newest data and the last the oldest.

:meth:`UniversalCompaction.pick` chooses a prefix of the runs to merge and the level to write it at, or
nothing, in this order:

0. **early full compaction** (Java ``EarlyFullCompaction``, only when one of its options is set; never
   for a bucket of one run): every run is merged into the max level (a full compaction) when

   * ``compaction.optimization-interval`` (a Duration, e.g. ``1 h``) has passed since the bucket's last
     full compaction (strictly more than it; never compacted: at once);
   * or all runs together weigh less than ``compaction.total-size-threshold`` (a MemorySize, e.g.
     ``128 mb``);
   * or the runs not at the max level weigh more than ``compaction.incremental-size-threshold`` (a
     MemorySize);

   (the interval since Java 0.7, the total threshold since 1.3, the incremental one since 1.4; a full
   compaction by size moves the interval's start since 1.4.1, as here); and ``full-compaction.delta-commits``
   (see below);
1. **size amplification**: with at least ``num-sorted-run.compaction-trigger`` runs, when the runs before
   the last weigh more than ``compaction.max-size-amplification-percent`` (200) % of the last one, every
   run is merged into the max level (a full compaction);
2. **size ratio**: with at least the trigger's number of runs, starting from the first run, the next run
   joins the candidates while the candidates' total size times (100 + ``compaction.size-ratio`` (1)) / 100
   is not smaller than it; once more than one run is a candidate, runs of level 0 or 1 join regardless of
   size (only a level above 1 ends the prefix on size); two runs or more are merged;
3. **file number**: with more runs than the trigger, the first ``runs - trigger + 1`` runs are candidates
   from the start, and grow by size ratio as in 2.

The output level of a prefix (``createUnit``) is the max level when every run is in it, else the level of
the first run left out minus one; never level 0: if that would be 0, the following level-0 runs join the
prefix up to the first run of a higher level, whose level becomes the output (the max level if none).

The levels of a bucket are the table's ``num-levels`` (ours: 5 unless set), or more when its files lie
higher (Java ``Levels.numberOfLevels``: Java's own default is ``num-sorted-run.compaction-trigger`` + 1,
so a table Java wrote has its full compactions on level 5): the max level of the pick is the bucket's
(:func:`restored_num_levels`).

``MergeTreeCompactManager`` drops a pick without files, or of one file already at the output level; it
drops retractions when the output level is not 0 and no level above the output holds data
(:func:`drops_deletes`).

**The last full compaction** of a bucket, which the interval counts from, is the newest creation time of
the bucket's files at the max level (``_CREATION_TIME``, the writer's local wall-clock time, read in this
process's zone as Java's ``creationTimeEpochMillis`` does), derived from the files at every pick, never
kept in memory or in Postgres. That is what Java itself does when it (re)creates a bucket's writer
(``MergeTreeCompactManagerFactory.estimateLastFullCompactionTime``, since Paimon 2.0); a long-lived Java
writer then remembers the time of each full pick in memory. Only full compactions write the max level
(whichever rule picked them, Java's writers' and ours alike), so the derived time moves exactly when Java's
in-memory one would, across processes, restarts and workers, with one difference: a full compaction that
rewrote nothing (every file only moved up a level: it keeps its creation time) does not move it, so the
interval may come round earlier than in a Java writer that stayed up (as in a Java writer re-created).

**full-compaction.delta-commits** (N): Java's Flink writer fully compacts, every N commits (at commit
identifiers that are multiples of N), the buckets it wrote since its last such compaction (Spark's batch
writer: at every commit, for N > 0); it needs no ``changelog-producer`` (with ``full-compaction`` the same
schedule also produces the changelog, with N = 1 when unset; with ``lookup`` Java refuses the table).
Ours is a writer-less maintenance service, so the schedule is kept by the table's history: a bucket that
is not one run at the max level is fully compacted once N delta commits (``APPEND`` or ``OVERWRITE``
snapshots) have been made to the table since the bucket's last full compaction (as above; never
compacted: once the table had N). When snapshot expiration keeps fewer than N delta commits, a bucket
whose last full compaction is older than the earliest retained snapshot is due (its count is lost).
The count is bound to a table's snapshots by :meth:`UniversalCompaction.bind`
(:func:`delta_commits_mark`); an unbound strategy leaves the rule out.
N < 0: off (Flink); N = 0: every commit (Flink's ``max(N, 1)``). Only primary-key tables: append tables are
compacted by their small files. The changelog a ``full-compaction`` producer adds is not written by our
compaction (as before this rule), so that producer without this option (Java's N = 1) adds no schedule.

**Off-peak hours** (Java ``OffPeakHours``): between ``compaction.offpeak.start.hour`` (inclusive) and
``compaction.offpeak.end.hour`` (exclusive; the window may wrap past midnight), in the local time of the
process that picks (Java: the JVM's default zone), ``compaction.offpeak-ratio`` is added to the size
ratio, so the pick takes larger runs: more is compacted when the machines are quiet. Both hours -1 (the
default) or equal: no off-peak; any other hour outside 0-23 is refused. The maintenance scheduler
measures a table's debt with this pick and its workers compact with it, so both honour the window and the
early full compaction.

Bad values of these options are refused with a ``ValidationError`` naming the option: Durations and
MemorySizes are parsed by Java's grammar (``model.options``), integers must be integers.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import DataFileMeta
from paimon_meta.model.options import (
    CHANGELOG_PRODUCER,
    COMPACTION_INCREMENTAL_SIZE_THRESHOLD,
    COMPACTION_OPTIMIZATION_INTERVAL,
    COMPACTION_TOTAL_SIZE_THRESHOLD,
    FULL_COMPACTION_DELTA_COMMITS,
    JAVA_INT_MAX,
    JAVA_INT_MIN,
    parse_duration_ms,
    parse_memory_size,
)
from paimon_meta.model.snapshot import CommitKind

if TYPE_CHECKING:
    from paimon_meta.table.snapshots import SnapshotManager

SORTED_RUN_TRIGGER = "num-sorted-run.compaction-trigger"
SORTED_RUN_STOP_TRIGGER = "num-sorted-run.stop-trigger"
MAX_SIZE_AMPLIFICATION = "compaction.max-size-amplification-percent"
SIZE_RATIO = "compaction.size-ratio"
OFFPEAK_START_HOUR = "compaction.offpeak.start.hour"
OFFPEAK_END_HOUR = "compaction.offpeak.end.hour"
OFFPEAK_RATIO = "compaction.offpeak-ratio"
OPTIMIZATION_INTERVAL = COMPACTION_OPTIMIZATION_INTERVAL
TOTAL_SIZE_THRESHOLD = COMPACTION_TOTAL_SIZE_THRESHOLD
INCREMENTAL_SIZE_THRESHOLD = COMPACTION_INCREMENTAL_SIZE_THRESHOLD

DEFAULT_SORTED_RUN_TRIGGER = 5
DEFAULT_MAX_SIZE_AMPLIFICATION = 200
DEFAULT_SIZE_RATIO = 1
#: Java's ``num-sorted-run.stop-trigger`` default: the compaction trigger plus this
STOP_TRIGGER_MARGIN = 3


@dataclass(frozen=True, slots=True)
class LevelSortedRun:
    """One sorted run of a bucket: a level-0 file, or all files of one level above 0."""

    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True, slots=True)
class CompactUnit:
    """What a pick chose: the runs to merge (a prefix of the bucket's runs) and the level to write at."""

    output_level: int
    runs: tuple[LevelSortedRun, ...]

    @property
    def files(self) -> tuple[DataFileMeta, ...]:
        return tuple(f for run in self.runs for f in run.files)


def _level0_order(f: DataFileMeta) -> tuple[int, int, int, str]:
    # Java's level-0 TreeSet: larger max sequence number first, then smaller min sequence number, then
    # creation time, then file name.
    return (-f.max_sequence_number, f.min_sequence_number, f.creation_time or 0, f.file_name)


def level_sorted_runs(files: Iterable[DataFileMeta]) -> list[LevelSortedRun]:
    """The bucket's sorted runs, newest first (see the module docstring)."""
    level0: list[DataFileMeta] = []
    levels: dict[int, list[DataFileMeta]] = {}
    for f in files:
        if f.level == 0:
            level0.append(f)
        else:
            levels.setdefault(f.level, []).append(f)
    runs = [LevelSortedRun(0, (f,)) for f in sorted(level0, key=_level0_order)]
    runs += [LevelSortedRun(level, tuple(levels[level])) for level in sorted(levels)]
    return runs


def _option_int(options: Mapping[str, str], key: str, default: int, minimum: int) -> int:
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


@dataclass(frozen=True, slots=True)
class OffPeakHours:
    """Java ``OffPeakHours``: the hours ``[start_hour, end_hour)`` (wrapping past midnight when
    ``start_hour > end_hour``) during which ``ratio`` is added to the size ratio."""

    start_hour: int
    end_hour: int
    ratio: int

    @classmethod
    def of(cls, options: Mapping[str, str]) -> OffPeakHours | None:
        """The window a table's options ask for; None when off (both hours -1, or equal)."""
        start = _option_int(options, OFFPEAK_START_HOUR, -1, -1)
        end = _option_int(options, OFFPEAK_END_HOUR, -1, -1)
        if start == -1 and end == -1:
            return None
        for key, hour in ((OFFPEAK_START_HOUR, start), (OFFPEAK_END_HOUR, end)):
            if not 0 <= hour <= 23:
                raise ValidationError(f"option {key}={hour} is not an hour from 0 to 23", option=key)
        if start == end:
            return None
        return cls(start, end, _option_int(options, OFFPEAK_RATIO, 0, 0))

    def is_off_peak(self, hour: int) -> bool:
        if self.start_hour <= self.end_hour:
            return self.start_hour <= hour < self.end_hour
        return hour < self.end_hour or self.start_hour <= hour

    def current_ratio(self, hour: int) -> int:
        return self.ratio if self.is_off_peak(hour) else 0


def local_hour() -> int:
    """The hour of the day now, in local time (Java: ``LocalDateTime.now().getHour()``)."""
    return time.localtime().tm_hour


_UTC_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_LOCAL_EPOCH = dt.datetime(1970, 1, 1)


def creation_epoch_millis(creation_time: int) -> int:
    """Java ``DataFileMeta.creationTimeEpochMillis``: a file's ``_CREATION_TIME`` (the writer's local
    wall-clock time, stored as epoch millis as if it were UTC) as an instant, read in this process's zone."""
    local = _LOCAL_EPOCH + dt.timedelta(milliseconds=creation_time)
    return (local.astimezone() - _UTC_EPOCH) // dt.timedelta(milliseconds=1)


def last_full_compaction_ms(runs: Sequence[LevelSortedRun], max_level: int) -> int | None:
    """When the bucket of ``runs`` was last fully compacted: the newest creation time (epoch millis) of
    its files at the max level, None without any (Java ``estimateLastFullCompactionTime``; see the module
    docstring)."""
    times = [
        creation_epoch_millis(f.creation_time)
        for r in runs
        if r.level == max_level
        for f in r.files
        if f.creation_time is not None
    ]
    return max(times, default=None)


def now_millis() -> int:
    """The time now, epoch milliseconds (Java ``System.currentTimeMillis``)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class EarlyFullCompaction:
    """Java ``EarlyFullCompaction``: a full compaction before the universal rules, by time since the last
    one (``interval_ms``), by the bucket's size (``total_size_threshold``) or by its size above the max
    level (``incremental_size_threshold``); None of them: no such class (``of`` returns None)."""

    interval_ms: int | None = None
    total_size_threshold: int | None = None
    incremental_size_threshold: int | None = None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> EarlyFullCompaction | None:
        """The early full compaction a table's options ask for, None when none of its options is set
        (``ValidationError`` naming a value that is not a Duration or a MemorySize)."""
        interval = options.get(OPTIMIZATION_INTERVAL)
        total = options.get(TOTAL_SIZE_THRESHOLD)
        incremental = options.get(INCREMENTAL_SIZE_THRESHOLD)
        if interval is None and total is None and incremental is None:
            return None
        return cls(
            interval_ms=None if interval is None else parse_duration_ms(interval, key=OPTIMIZATION_INTERVAL),
            total_size_threshold=None
            if total is None
            else parse_memory_size(total, key=TOTAL_SIZE_THRESHOLD),
            incremental_size_threshold=None
            if incremental is None
            else parse_memory_size(incremental, key=INCREMENTAL_SIZE_THRESHOLD),
        )

    def try_full_compact(
        self, num_levels: int, runs: Sequence[LevelSortedRun], *, last_full_ms: int | None, now_ms: int
    ) -> CompactUnit | None:
        """Every run into the max level, or None (Java ``tryFullCompact``); ``last_full_ms``: the bucket's
        last full compaction (None: never), ``now_ms``: the time now."""
        # Java: one run is left alone (an empty bucket's unit would have no files: dropped all the same)
        if len(runs) <= 1:
            return None
        max_level = num_levels - 1
        if self.interval_ms is not None and (
            last_full_ms is None or now_ms - last_full_ms > self.interval_ms
        ):
            return CompactUnit(max_level, tuple(runs))
        total = self.total_size_threshold
        if total is not None and sum(r.total_size for r in runs) < total:
            return CompactUnit(max_level, tuple(runs))
        if self.incremental_size_threshold is not None:
            incremental = sum(r.total_size for r in runs if r.level != max_level)
            if incremental > self.incremental_size_threshold:
                return CompactUnit(max_level, tuple(runs))
        return None


def delta_commits(options: Mapping[str, str]) -> int | None:
    """``full-compaction.delta-commits`` as Java's Flink writer reads it: None when unset or negative
    (off), 0 counts as 1; ``ValidationError`` naming it when it is not a Java int, or when
    ``changelog-producer`` is ``lookup`` (Java's ``SchemaValidation`` refuses that table)."""
    value = options.get(FULL_COMPACTION_DELTA_COMMITS)
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise ValidationError(
            f"option {FULL_COMPACTION_DELTA_COMMITS}={value!r} is not an integer",
            option=FULL_COMPACTION_DELTA_COMMITS,
        ) from None
    if not JAVA_INT_MIN <= number <= JAVA_INT_MAX:
        raise ValidationError(
            f"option {FULL_COMPACTION_DELTA_COMMITS}={value!r} is not a Java int "
            f"({JAVA_INT_MIN}..{JAVA_INT_MAX})",
            option=FULL_COMPACTION_DELTA_COMMITS,
        )
    if (options.get(CHANGELOG_PRODUCER) or "").strip().lower() == "lookup":
        raise ValidationError(
            f"option {FULL_COMPACTION_DELTA_COMMITS} is incompatible with {CHANGELOG_PRODUCER}=lookup "
            f"(use {CHANGELOG_PRODUCER}=full-compaction, or remove {FULL_COMPACTION_DELTA_COMMITS})",
            option=FULL_COMPACTION_DELTA_COMMITS,
        )
    return None if number < 0 else max(number, 1)


#: The commit kinds that count as delta commits: they add or replace data (not COMPACT, not ANALYZE).
DELTA_COMMIT_KINDS = frozenset({CommitKind.APPEND, CommitKind.OVERWRITE})


def delta_commits_mark(snapshots: SnapshotManager, count: int) -> int | None:
    """The time (epoch millis) of the ``count``-th newest delta commit among the table's snapshots: a
    bucket whose last full compaction is older has had at least ``count`` delta commits since. None when
    the table never had that many. When expiration left fewer than ``count`` delta commits (snapshots
    before the earliest retained one are gone), the earliest retained snapshot's time: a bucket fully
    compacted before all the retained history has had every retained delta commit since, and the expired
    ones may have been more; its count can no longer be known, and it is not left uncompacted for ever.
    Reads snapshots from the latest back, at most to the ``count``-th delta commit."""
    latest = snapshots.latest_snapshot_id()
    if latest is None:
        return None
    earliest = snapshots.earliest_snapshot_id() or 1
    seen = 0
    oldest = None
    for snapshot_id in range(latest, earliest - 1, -1):
        snapshot = snapshots.find(snapshot_id)
        if snapshot is None:  # expired meanwhile: the older ones are gone too
            break
        oldest = snapshot
        if snapshot.commit_kind in DELTA_COMMIT_KINDS:
            seen += 1
            if seen >= count:
                return snapshot.time_millis
    if oldest is None or oldest.id <= 1:
        return None  # the whole history read: fewer than count delta commits ever
    return oldest.time_millis


@dataclass(frozen=True, slots=True)
class UniversalCompaction:
    """The pick of one table's options (see the module docstring). ``delta_commits_mark_ms``: set by
    :meth:`bind` for ``full-compaction.delta-commits``."""

    max_size_amp: int = DEFAULT_MAX_SIZE_AMPLIFICATION
    size_ratio: int = DEFAULT_SIZE_RATIO
    num_run_compaction_trigger: int = DEFAULT_SORTED_RUN_TRIGGER
    off_peak: OffPeakHours | None = None
    early_full: EarlyFullCompaction | None = None
    full_compaction_delta_commits: int | None = None
    delta_commits_mark_ms: int | None = None

    @classmethod
    def of(cls, options: Mapping[str, str]) -> UniversalCompaction:
        """The strategy a table's options ask for (``ValidationError`` naming a bad option)."""
        return cls(
            max_size_amp=_option_int(options, MAX_SIZE_AMPLIFICATION, DEFAULT_MAX_SIZE_AMPLIFICATION, 0),
            size_ratio=_option_int(options, SIZE_RATIO, DEFAULT_SIZE_RATIO, 0),
            num_run_compaction_trigger=_option_int(
                options, SORTED_RUN_TRIGGER, DEFAULT_SORTED_RUN_TRIGGER, 1
            ),
            off_peak=OffPeakHours.of(options),
            early_full=EarlyFullCompaction.of(options),
            full_compaction_delta_commits=delta_commits(options),
        )

    def bind(self, snapshots: SnapshotManager) -> UniversalCompaction:
        """This strategy with the table's delta commits counted (``full-compaction.delta-commits``; a
        strategy without that option is returned as it is, no snapshot read). Bind again to see later
        commits."""
        if self.full_compaction_delta_commits is None:
            return self
        mark = delta_commits_mark(snapshots, self.full_compaction_delta_commits)
        return dataclasses.replace(self, delta_commits_mark_ms=mark)

    def pick(
        self,
        num_levels: int,
        runs: Sequence[LevelSortedRun],
        *,
        hour: int | None = None,
        now_ms: int | None = None,
    ) -> CompactUnit | None:
        """The runs to merge and their output level, or None (Java ``UniversalCompaction.pick``);
        ``hour``: the local hour that decides off-peak, ``now_ms``: the time the optimization interval
        is measured to (default: now)."""
        max_level = num_levels - 1
        if self.early_full is not None or self.delta_commits_mark_ms is not None:
            last_full = last_full_compaction_ms(runs, max_level)
            if self.early_full is not None:
                now = now_millis() if now_ms is None else now_ms
                unit = self.early_full.try_full_compact(num_levels, runs, last_full_ms=last_full, now_ms=now)
                if unit is not None:
                    return unit
            if self._delta_commits_due(runs, max_level, last_full):
                return CompactUnit(max_level, tuple(runs))
        extra = 0
        if self.off_peak is not None:
            extra = self.off_peak.current_ratio(local_hour() if hour is None else hour)
        unit = self.pick_for_size_amp(max_level, runs)
        if unit is None:
            unit = self.pick_for_size_ratio(max_level, runs, extra_ratio=extra)
        if unit is None and len(runs) > self.num_run_compaction_trigger:
            unit = self._grow(
                max_level, runs, len(runs) - self.num_run_compaction_trigger + 1, extra_ratio=extra
            )
        return unit

    def _delta_commits_due(
        self, runs: Sequence[LevelSortedRun], max_level: int, last_full: int | None
    ) -> bool:
        """``full-compaction.delta-commits``: the bound count of delta commits since the bucket's last
        full compaction is reached, and the bucket is not one run at the max level already (Java's
        ``pickFullCompaction`` leaves that alone)."""
        mark = self.delta_commits_mark_ms
        if mark is None or not runs or (len(runs) == 1 and runs[0].level == max_level):
            return False
        return last_full is None or mark > last_full

    def pick_for_size_amp(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        newer = sum(r.total_size for r in runs[:-1])
        # size amplification: the newer runs' size as a percentage of the oldest run's
        if newer * 100 > self.max_size_amp * runs[-1].total_size:
            return CompactUnit(max_level, tuple(runs))
        return None

    def pick_for_size_ratio(
        self, max_level: int, runs: Sequence[LevelSortedRun], *, extra_ratio: int = 0
    ) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        return self._grow(max_level, runs, 1, extra_ratio=extra_ratio)

    def _grow(
        self, max_level: int, runs: Sequence[LevelSortedRun], count: int, *, extra_ratio: int = 0
    ) -> CompactUnit | None:
        """Java's ``pickForSizeRatio(maxLevel, runs, candidateCount, forcePick = false)``
        (``extra_ratio``: the off-peak ratio now, Java's ``ratioForOffPeak``)."""
        size = sum(r.total_size for r in runs[:count])
        triggered = count > 1
        ratio = 100.0 + self.size_ratio + extra_ratio
        for run in runs[count:]:
            too_large = size * ratio / 100.0 < run.total_size
            if too_large and (not triggered or run.level > 1):
                break
            size += run.total_size
            count += 1
            triggered = True
        return self.create_unit(runs, max_level, count) if triggered else None

    @staticmethod
    def create_unit(runs: Sequence[LevelSortedRun], max_level: int, count: int) -> CompactUnit:
        """The first ``count`` runs with their output level (Java ``createUnit``)."""
        # the level below the first run left out
        output = max_level if count == len(runs) else max(0, runs[count].level - 1)
        if output == 0:
            # never output to level 0: take the level-0 runs that follow, up to a run of a higher level
            for run in runs[count:]:
                count += 1
                if run.level != 0:
                    output = run.level
                    break
        if count == len(runs):
            output = max_level
        return CompactUnit(output, tuple(runs[:count]))


def restored_num_levels(num_levels: int, files: Iterable[DataFileMeta]) -> int:
    """Java ``Levels.numberOfLevels``: the table's ``num-levels``, or more when its files lie higher (a
    table Java wrote with its default of ``num-sorted-run.compaction-trigger`` + 1 levels, 6, has files on
    level 5): the pick's max level is the highest level the bucket has."""
    return max(num_levels, max((f.level for f in files), default=-1) + 1)


def pick_bucket(
    strategy: UniversalCompaction,
    num_levels: int,
    files: Iterable[DataFileMeta],
    *,
    hour: int | None = None,
    now_ms: int | None = None,
) -> CompactUnit | None:
    """The pick for one bucket's files as ``MergeTreeCompactManager.triggerCompaction`` submits it (with
    the bucket's :func:`restored_num_levels`): None when nothing is picked, or only one file already at
    the output level (``hour``, ``now_ms``: as for :meth:`UniversalCompaction.pick`)."""
    files = list(files)
    levels = restored_num_levels(num_levels, files)
    unit = strategy.pick(levels, level_sorted_runs(files), hour=hour, now_ms=now_ms)
    if unit is None or not unit.files:
        return None
    if len(unit.files) == 1 and unit.files[0].level == unit.output_level:
        return None
    return unit


def drops_deletes(unit: CompactUnit, files: Iterable[DataFileMeta]) -> bool:
    """Whether the unit's merge may drop retractions: its output is above level 0 and no level above the
    output holds data (nothing older lies below what it writes)."""
    highest = max((f.level for f in files), default=-1)
    return unit.output_level != 0 and unit.output_level >= highest


def stop_trigger(options: Mapping[str, str]) -> int:
    """``num-sorted-run.stop-trigger`` (default: the compaction trigger + 3): the runs at which Java
    writers wait for compaction (here: reported in the debt, writers never wait)."""
    trigger = _option_int(options, SORTED_RUN_TRIGGER, DEFAULT_SORTED_RUN_TRIGGER, 1)
    return _option_int(options, SORTED_RUN_STOP_TRIGGER, trigger + STOP_TRIGGER_MARGIN, 1)
