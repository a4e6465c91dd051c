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

Not implemented: off-peak hours (``compaction.offpeak.*``: their extra ratio is 0 here) and early full
compaction (``compaction.optimization-interval``, ``compaction.total-size-threshold``,
``compaction.incremental-size-threshold``): these options are accepted and not acted on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import DataFileMeta

SORTED_RUN_TRIGGER = "num-sorted-run.compaction-trigger"
SORTED_RUN_STOP_TRIGGER = "num-sorted-run.stop-trigger"
MAX_SIZE_AMPLIFICATION = "compaction.max-size-amplification-percent"
SIZE_RATIO = "compaction.size-ratio"

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
class UniversalCompaction:
    """The pick of one table's options (see the module docstring)."""

    max_size_amp: int = DEFAULT_MAX_SIZE_AMPLIFICATION
    size_ratio: int = DEFAULT_SIZE_RATIO
    num_run_compaction_trigger: int = DEFAULT_SORTED_RUN_TRIGGER

    @classmethod
    def of(cls, options: Mapping[str, str]) -> UniversalCompaction:
        """The strategy a table's options ask for (``ValidationError`` naming a bad option)."""
        return cls(
            max_size_amp=_option_int(options, MAX_SIZE_AMPLIFICATION, DEFAULT_MAX_SIZE_AMPLIFICATION, 0),
            size_ratio=_option_int(options, SIZE_RATIO, DEFAULT_SIZE_RATIO, 0),
            num_run_compaction_trigger=_option_int(
                options, SORTED_RUN_TRIGGER, DEFAULT_SORTED_RUN_TRIGGER, 1
            ),
        )

    def pick(self, num_levels: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        """The runs to merge and their output level, or None (Java ``UniversalCompaction.pick``)."""
        max_level = num_levels - 1
        unit = self.pick_for_size_amp(max_level, runs)
        if unit is None:
            unit = self.pick_for_size_ratio(max_level, runs)
        if unit is None and len(runs) > self.num_run_compaction_trigger:
            unit = self._grow(max_level, runs, len(runs) - self.num_run_compaction_trigger + 1)
        return unit

    def pick_for_size_amp(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        newer = sum(r.total_size for r in runs[:-1])
        # size amplification: the newer runs' size as a percentage of the oldest run's
        if newer * 100 > self.max_size_amp * runs[-1].total_size:
            return CompactUnit(max_level, tuple(runs))
        return None

    def pick_for_size_ratio(self, max_level: int, runs: Sequence[LevelSortedRun]) -> CompactUnit | None:
        if len(runs) < self.num_run_compaction_trigger:
            return None
        return self._grow(max_level, runs, 1)

    def _grow(self, max_level: int, runs: Sequence[LevelSortedRun], count: int) -> CompactUnit | None:
        """Java's ``pickForSizeRatio(maxLevel, runs, candidateCount, forcePick = false)``."""
        size = sum(r.total_size for r in runs[:count])
        triggered = count > 1
        for run in runs[count:]:
            too_large = size * (100.0 + self.size_ratio) / 100.0 < run.total_size
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
    strategy: UniversalCompaction, num_levels: int, files: Iterable[DataFileMeta]
) -> CompactUnit | None:
    """The pick for one bucket's files as ``MergeTreeCompactManager.triggerCompaction`` submits it: None
    when nothing is picked, or only one file already at the output level."""
    unit = strategy.pick(num_levels, level_sorted_runs(files))
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
