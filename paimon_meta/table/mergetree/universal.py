"""Paimon's universal compaction pick for primary-key buckets (Java ``UniversalCompaction``, the
``CompactStrategy`` of ``MergeTreeCompactManager``; after RocksDB's universal compaction).

A bucket's files form *sorted runs* (Java ``Levels.levelSortedRuns``): every level-0 file is a run of its
own, newest first (highest ``max_sequence_number``, then lowest ``min_sequence_number``, then creation time
and file name), followed by one run per non-empty level 1 .. max level, lowest level first. So the first
run is the newest data and the last the oldest.

:meth:`UniversalCompaction.pick` chooses a prefix of the runs to merge and the level to write it at, or
nothing, in this order:

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

``MergeTreeCompactManager`` drops a pick without files, or of one file already at the output level; it
drops retractions when the output level is not 0 and no level above the output holds data
(:func:`drops_deletes`).

**Off-peak hours** (Java ``OffPeakHours``): between ``compaction.offpeak.start.hour`` (inclusive) and
``compaction.offpeak.end.hour`` (exclusive; the window may wrap past midnight), in the local time of the
process that picks (Java: the JVM's default zone), ``compaction.offpeak-ratio`` is added to the size
ratio, so the pick takes larger runs: more is compacted when the machines are quiet. Both hours -1 (the
default) or equal: no off-peak; any other hour outside 0-23 is refused. The maintenance scheduler
measures a table's debt with this pick and its workers compact with it, so both honour the window.

Not implemented: early full compaction (``compaction.optimization-interval``,
``compaction.total-size-threshold``, ``compaction.incremental-size-threshold``): these options are
accepted and not acted on.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import DataFileMeta

SORTED_RUN_TRIGGER = "num-sorted-run.compaction-trigger"
SORTED_RUN_STOP_TRIGGER = "num-sorted-run.stop-trigger"
MAX_SIZE_AMPLIFICATION = "compaction.max-size-amplification-percent"
SIZE_RATIO = "compaction.size-ratio"
OFFPEAK_START_HOUR = "compaction.offpeak.start.hour"
OFFPEAK_END_HOUR = "compaction.offpeak.end.hour"
OFFPEAK_RATIO = "compaction.offpeak-ratio"

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


@dataclass(frozen=True, slots=True)
class UniversalCompaction:
    """The pick of one table's options (see the module docstring)."""

    max_size_amp: int = DEFAULT_MAX_SIZE_AMPLIFICATION
    size_ratio: int = DEFAULT_SIZE_RATIO
    num_run_compaction_trigger: int = DEFAULT_SORTED_RUN_TRIGGER
    off_peak: OffPeakHours | None = None

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
        )

    def pick(
        self, num_levels: int, runs: Sequence[LevelSortedRun], *, hour: int | None = None
    ) -> CompactUnit | None:
        """The runs to merge and their output level, or None (Java ``UniversalCompaction.pick``);
        ``hour``: the local hour that decides off-peak (default: now)."""
        max_level = num_levels - 1
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


def pick_bucket(
    strategy: UniversalCompaction,
    num_levels: int,
    files: Iterable[DataFileMeta],
    *,
    hour: int | None = None,
) -> CompactUnit | None:
    """The pick for one bucket's files as ``MergeTreeCompactManager.triggerCompaction`` submits it: None
    when nothing is picked, or only one file already at the output level (``hour``: as for
    :meth:`UniversalCompaction.pick`)."""
    unit = strategy.pick(num_levels, level_sorted_runs(files), hour=hour)
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
