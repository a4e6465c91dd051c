"""The universal compaction pick against cases worked out by hand from Java's ``UniversalCompaction`` rules
(size amplification, then size ratio, then the number of runs; the output level; never level 0), the
manager's filter and the drop-delete rule, and the bucket's sorted runs in Java's order."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import DataFileMeta, SimpleStats
from paimon_meta.table.mergetree.universal import (
    CompactUnit,
    LevelSortedRun,
    UniversalCompaction,
    drops_deletes,
    level_sorted_runs,
    pick_bucket,
    stop_trigger,
)

_counter = iter(range(1_000_000))


def _file(size: int, level: int = 0, *, min_seq: int = 0, max_seq: int = 0, name: str = "") -> DataFileMeta:
    return DataFileMeta(
        file_name=name or f"f{next(_counter)}",
        file_size=size,
        row_count=1,
        min_key=b"",
        max_key=b"",
        key_stats=SimpleStats.empty(),
        value_stats=SimpleStats.empty(),
        min_sequence_number=min_seq,
        max_sequence_number=max_seq,
        schema_id=0,
        level=level,
    )


def run(level: int, size: int) -> LevelSortedRun:
    return LevelSortedRun(level, (_file(size, level),))


def level0(*sizes: int) -> list[LevelSortedRun]:
    return [run(0, s) for s in sizes]


def sizes_of(unit: CompactUnit | None) -> list[int] | None:
    return None if unit is None else [f.file_size for f in unit.files]


def test_the_output_level_is_below_the_first_run_left_out_and_never_level_0() -> None:
    strategy = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=3)
    runs = [run(level, 1) for level in (0, 0, 1, 3, 4)]
    # 1 run: level 0 would follow; the next level-0 run joins, then the level-1 run, whose level is output
    assert [strategy.create_unit(runs, 5, n).output_level for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 3, 5]
    assert len(strategy.create_unit(runs, 5, 1).runs) == 3
    assert len(strategy.create_unit(runs, 5, 3).runs) == 3


def test_pick_by_size_amplification_then_size_ratio_then_run_count() -> None:
    strategy = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=3)
    # size amplification: 1+2+3 = 6 is more than 25 % of the oldest run (3): everything, to the max level
    unit = strategy.pick(3, level0(1, 2, 3, 3))
    assert sizes_of(unit) == [1, 2, 3, 3] and unit is not None and unit.output_level == 2
    # size ratio: 1, 1, 1 join one by one; 50 is more than 3 x 1.01 and on level 3: left out
    unit = strategy.pick(4, [run(0, 1), run(1, 1), run(2, 1), run(3, 50)])
    assert sizes_of(unit) == [1, 1, 1] and unit is not None and unit.output_level == 2
    # size ratio picks nothing (2 > 1 x 1.01 on the second run); 4 runs > trigger 3: the first 2 are
    # candidates, then 3 joins by size ratio (3 x 1.01 >= 3), 50 does not
    unit = strategy.pick(4, [run(0, 1), run(1, 2), run(2, 3), run(3, 50)])
    assert sizes_of(unit) == [1, 2, 3] and unit is not None and unit.output_level == 2
    # fewer runs than the trigger: nothing, whatever the sizes
    assert strategy.pick(4, [run(0, 1), run(3, 100)]) is None


def test_no_output_to_level_0() -> None:
    strategy = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=3)
    unit = strategy.pick(3, [run(0, 1), run(0, 1), run(1, 1), run(2, 50)])
    assert sizes_of(unit) == [1, 1, 1] and unit is not None and unit.output_level == 1
    unit = strategy.pick(3, [run(0, 1), run(0, 2), run(1, 3), run(2, 50)])
    assert sizes_of(unit) == [1, 2, 3] and unit is not None and unit.output_level == 1
    # only level-0 runs after the picked ones: they all join, and the output is the max level
    strategy = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_compaction_trigger=5)
    unit = strategy.pick(6, level0(1, 1, 1, 1024, 1024 * 1024))
    assert sizes_of(unit) == [1, 1, 1, 1024, 1024 * 1024] and unit is not None and unit.output_level == 5


def test_once_triggered_runs_of_level_0_and_1_join_whatever_their_size() -> None:
    strategy = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_compaction_trigger=4)
    # 1 and 1 trigger; 100 at level 1 joins although it is larger than 2 x 1.01; 1000 at level 3 does not
    unit = strategy.pick(5, [run(0, 1), run(0, 1), run(1, 100), run(3, 1000)])
    assert sizes_of(unit) == [1, 1, 100] and unit is not None and unit.output_level == 2
    # before the trigger a larger level-1 run ends the pick
    assert strategy.pick(5, [run(0, 1), run(1, 100), run(2, 100), run(3, 1000)]) is None


def _append_and_pick_for_size_amp(strategy: UniversalCompaction, sizes: list[int]) -> list[int]:
    sizes = [1, *sizes]
    unit = strategy.pick_for_size_amp(3, level0(*sizes))
    return sizes if unit is None else [sum(f.file_size for f in unit.files)]


def test_size_amplification_sequence() -> None:
    # one new run of 1 per step; everything merges once the newer runs exceed 25 % of the oldest
    strategy = UniversalCompaction(max_size_amp=25, size_ratio=0, num_run_compaction_trigger=1)
    sizes = [1]
    seen = []
    for _ in range(17):
        sizes = _append_and_pick_for_size_amp(strategy, sizes)
        seen.append(sizes)
    assert seen == [
        [2], [3], [4], [1, 4], [6], [1, 6], [8], [1, 8], [1, 1, 8], [11], [1, 11], [1, 1, 11], [14],
        [1, 14], [1, 1, 14], [1, 1, 1, 14], [18],
    ]  # fmt: skip


def _pick_for_size_ratio(strategy: UniversalCompaction, sizes: Sequence[int]) -> list[int]:
    # run i on level i; the picked runs are replaced by one run of their total, first
    runs = [run(i, s) for i, s in enumerate(sizes)]
    unit = strategy.pick_for_size_ratio(len(sizes), runs)
    if unit is None:
        return list(sizes)
    picked = [f.file_size for f in unit.files]
    rest = list(sizes)
    for s in picked:
        rest.remove(s)
    return [sum(picked), *rest]


def test_size_ratio_sequence() -> None:
    strategy = UniversalCompaction(max_size_amp=25, size_ratio=1, num_run_compaction_trigger=5)
    sizes = [1, 1, 1, 1]
    seen = []
    for _ in range(23):
        sizes = _pick_for_size_ratio(strategy, [1, *sizes])
        seen.append(sizes)
    assert seen == [
        [5], [1, 5], [1, 1, 5], [1, 1, 1, 5], [4, 5], [1, 4, 5], [1, 1, 4, 5], [3, 4, 5], [1, 3, 4, 5],
        [2, 3, 4, 5], [1, 2, 3, 4, 5], [16], [1, 16], [1, 1, 16], [1, 1, 1, 16], [4, 16], [1, 4, 16],
        [1, 1, 4, 16], [3, 4, 16], [1, 3, 4, 16], [2, 3, 4, 16], [1, 2, 3, 4, 16], [11, 16],
    ]  # fmt: skip


def test_size_ratio_threshold() -> None:
    # 8 x 1.10 < 9: nothing; 8 x 1.20 >= 9, then 17 x 1.20 >= 10: all three
    assert _pick_for_size_ratio(UniversalCompaction(25, 10, 2), [8, 9, 10]) == [8, 9, 10]
    assert _pick_for_size_ratio(UniversalCompaction(25, 20, 2), [8, 9, 10]) == [27]


def test_sorted_runs_of_a_bucket_in_javas_order() -> None:
    old = _file(10, 0, min_seq=0, max_seq=4, name="old")
    new = _file(10, 0, min_seq=5, max_seq=9, name="new")
    twin_a = _file(10, 0, min_seq=3, max_seq=9, name="twin-a")
    l2a, l2b = _file(50, 2, name="l2a"), _file(60, 2, name="l2b")
    l1 = _file(30, 1, name="l1")
    runs = level_sorted_runs([l2a, old, l1, new, l2b, twin_a])
    # level 0 newest first (max sequence descending, then min sequence ascending), then levels 1, 2
    assert [(r.level, [f.file_name for f in r.files]) for r in runs] == [
        (0, ["twin-a"]),
        (0, ["new"]),
        (0, ["old"]),
        (1, ["l1"]),
        (2, ["l2a", "l2b"]),
    ]
    assert runs[-1].total_size == 110


def test_the_managers_filter_and_drop_delete() -> None:
    strategy = UniversalCompaction(max_size_amp=200, size_ratio=1, num_run_compaction_trigger=2)
    # one sorted run: nothing to merge
    assert pick_bucket(strategy, 5, [_file(10, 4)]) is None
    small = [_file(1, 0, max_seq=i) for i in range(3)]
    big = _file(1000, 4)
    unit = pick_bucket(strategy, 5, [*small, big])
    assert unit is not None and unit.output_level == 3 and len(unit.files) == 3
    # level 4 holds older data: retractions must survive the merge into level 3
    assert not drops_deletes(unit, [*small, big])
    full = pick_bucket(strategy, 5, small)
    assert full is not None and full.output_level == 4 and drops_deletes(full, small)


def test_options() -> None:
    strategy = UniversalCompaction.of(
        {
            "num-sorted-run.compaction-trigger": "7",
            "compaction.size-ratio": "3",
            "compaction.max-size-amplification-percent": "150",
        }
    )
    assert strategy == UniversalCompaction(max_size_amp=150, size_ratio=3, num_run_compaction_trigger=7)
    assert UniversalCompaction.of({}) == UniversalCompaction(200, 1, 5)
    assert stop_trigger({}) == 8 and stop_trigger({"num-sorted-run.compaction-trigger": "7"}) == 10
    assert stop_trigger({"num-sorted-run.stop-trigger": "20"}) == 20
    with pytest.raises(ValidationError, match=r"compaction\.size-ratio"):
        UniversalCompaction.of({"compaction.size-ratio": "x"})
