"""Early full compaction (Java ``EarlyFullCompaction``: ``compaction.optimization-interval``,
``compaction.total-size-threshold``, ``compaction.incremental-size-threshold``) and
``full-compaction.delta-commits``, against the cases of Java's ``EarlyFullCompactionTest`` and
``UniversalCompactionTest`` (their in-memory "last full compaction" replayed as the creation time of the
max-level files a full compaction writes, which is where ours comes from), the options parsed by Java's
grammar (as Java writes them: ``100 mb``, ``1000 bytes``, ``1 h``) and refused by name otherwise, and the
delta-commit schedule on a real table."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import cast

import pyarrow as pa
import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.maintenance.debt import bucket_files
from paimon_meta.model.options import CoreOptions, parse_duration_ms, parse_memory_size
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.table.compact import compact
from paimon_meta.table.mergetree.universal import (
    CompactUnit,
    EarlyFullCompaction,
    LevelSortedRun,
    UniversalCompaction,
    creation_epoch_millis,
    delta_commits,
    delta_commits_mark,
    last_full_compaction_ms,
    level_sorted_runs,
    pick_bucket,
)
from paimon_meta.table.read.scan import FileStoreScan
from paimon_meta.table.snapshots import SnapshotManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.arrow_input import num_levels
from tests.fixtures.golden import golden_table_path
from tests.spark.helpers import create_table, live_files
from tests.table.mergetree.test_universal_compaction import _file, run

#: Java's tests count time from 0; ours from an instant whose creation times are easy to write.
T0 = 1_700_000_000_000


def _created_at(epoch_ms: int) -> int:
    """The ``_CREATION_TIME`` a writer in this process's zone stores for a file written at ``epoch_ms``."""
    local = dt.datetime.fromtimestamp(epoch_ms / 1000)
    return (local - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)


def runs(*sizes: int) -> list[LevelSortedRun]:
    return [run(0, s) for s in sizes]


def at_max_level(level: int, size: int, full_compacted_at: int | None) -> LevelSortedRun:
    """A max-level run written by a full compaction at ``full_compacted_at`` (None: no creation time)."""
    file = _file(size, level)
    if full_compacted_at is not None:
        file = dataclasses.replace(file, creation_time=_created_at(full_compacted_at))
    return LevelSortedRun(level, (file,))


def sizes(unit: CompactUnit | None) -> list[int] | None:
    return None if unit is None else [f.file_size for f in unit.files]


def test_the_creation_time_is_read_in_this_zone_as_java_does() -> None:
    assert creation_epoch_millis(_created_at(T0 + 123)) == T0 + 123
    newest = at_max_level(4, 1, T0 + 5)
    older = LevelSortedRun(4, (dataclasses.replace(_file(1, 4), creation_time=_created_at(T0)),))
    assert last_full_compaction_ms([run(0, 1), older, newest], 4) == T0 + 5
    # level-0 files are no full compaction's; a max-level file without a creation time tells nothing
    assert last_full_compaction_ms([run(0, 1), at_max_level(4, 1, None)], 4) is None


# ---- Java EarlyFullCompactionTest ------------------------------------------------------------------------


def test_created_only_when_an_option_is_set() -> None:
    assert EarlyFullCompaction.of({}) is None
    assert EarlyFullCompaction.of({"compaction.optimization-interval": "1 h"}) == EarlyFullCompaction(
        interval_ms=3_600_000
    )
    assert EarlyFullCompaction.of({"compaction.total-size-threshold": "100 mb"}) == EarlyFullCompaction(
        total_size_threshold=100 << 20
    )
    both = {"compaction.optimization-interval": "1 h", "compaction.total-size-threshold": "100 mb"}
    assert EarlyFullCompaction.of(both) == EarlyFullCompaction(3_600_000, 100 << 20)


def test_a_single_run_and_no_options_pick_nothing() -> None:
    assert (
        EarlyFullCompaction(1000, 1000).try_full_compact(5, runs(100), last_full_ms=None, now_ms=T0) is None
    )
    assert EarlyFullCompaction().try_full_compact(5, runs(100, 200), last_full_ms=None, now_ms=T0) is None


def test_interval() -> None:
    early = EarlyFullCompaction(interval_ms=1000)
    # never fully compacted: at once, everything into the max level
    unit = early.try_full_compact(5, runs(100, 200), last_full_ms=None, now_ms=T0)
    assert unit is not None and unit.output_level == 4 and sizes(unit) == [100, 200]
    # that compaction at T0 is the last one: 500 ms later nothing, 1001 ms later again
    assert early.try_full_compact(5, runs(100, 200), last_full_ms=T0, now_ms=T0 + 500) is None
    unit = early.try_full_compact(5, runs(100, 200), last_full_ms=T0, now_ms=T0 + 1001)
    assert unit is not None and unit.output_level == 4 and sizes(unit) == [100, 200]
    # exactly the interval is not more than it
    assert early.try_full_compact(5, runs(100, 200), last_full_ms=T0, now_ms=T0 + 1000) is None


def test_interval_seeded_by_a_recent_or_an_old_full_compaction() -> None:
    early = EarlyFullCompaction(interval_ms=1000)
    # Java's testIntervalDoesNotRetriggerWhenSeededRecent / testIntervalTriggersWhenSeededOld
    assert early.try_full_compact(5, runs(100, 200), last_full_ms=T0 + 9_500, now_ms=T0 + 10_000) is None
    unit = early.try_full_compact(5, runs(100, 200), last_full_ms=T0 + 9_500, now_ms=T0 + 10_501)
    assert unit is not None and unit.output_level == 4
    unit = early.try_full_compact(5, runs(100, 200), last_full_ms=T0 + 5_000, now_ms=T0 + 10_000)
    assert unit is not None and unit.output_level == 4


def test_total_size_threshold() -> None:
    early = EarlyFullCompaction(total_size_threshold=1000)
    unit = early.try_full_compact(5, runs(100, 200), last_full_ms=None, now_ms=T0)  # 300 < 1000
    assert unit is not None and unit.output_level == 4 and sizes(unit) == [100, 200]
    assert early.try_full_compact(5, runs(500, 500), last_full_ms=None, now_ms=T0) is None  # not below
    assert early.try_full_compact(5, runs(500, 1000), last_full_ms=None, now_ms=T0) is None


def test_incremental_size_threshold() -> None:
    early = EarlyFullCompaction(incremental_size_threshold=500)
    unit = early.try_full_compact(5, runs(400, 200), last_full_ms=None, now_ms=T0)  # 600 > 500
    assert unit is not None and unit.output_level == 4 and sizes(unit) == [400, 200]
    assert early.try_full_compact(5, runs(100, 200), last_full_ms=None, now_ms=T0) is None
    # the max level's run is not incremental: 400 is not more than 500
    three = [run(0, 100), run(0, 300), run(4, 500)]
    assert early.try_full_compact(5, three, last_full_ms=None, now_ms=T0) is None
    four = [run(0, 100), run(0, 300), run(0, 300), run(4, 500)]
    unit = early.try_full_compact(5, four, last_full_ms=None, now_ms=T0)
    assert unit is not None and unit.output_level == 4 and len(unit.files) == 4


def test_the_interval_comes_first_then_the_thresholds() -> None:
    early = EarlyFullCompaction(interval_ms=1000, total_size_threshold=500)
    # testIntervalTriggersFirst: 600 is not below 500, the interval picks
    assert early.try_full_compact(5, runs(300, 300), last_full_ms=None, now_ms=T0) is not None
    # testThresholdTriggersWhenIntervalFails: fully compacted at T0, 500 ms later: 60 < 500 picks, 600 not
    assert early.try_full_compact(5, runs(30, 30), last_full_ms=T0, now_ms=T0 + 500) is not None
    assert early.try_full_compact(5, runs(300, 300), last_full_ms=T0, now_ms=T0 + 500) is None


@pytest.mark.parametrize(
    ("threshold", "second", "third"),
    [
        # testUpdateLastWhenFullCompactIsTriggeredByTotalSize: 400 < 500 picks the second time
        (EarlyFullCompaction(interval_ms=1000, total_size_threshold=500), (300, 100), (300, 300)),
        # testUpdateLastWhenFullCompactIsTriggeredByIncSize: 600 > 500 picks the second time
        (EarlyFullCompaction(interval_ms=1000, incremental_size_threshold=500), (300, 300), (300, 100)),
    ],
)
def test_a_full_compaction_by_size_moves_the_interval(
    threshold: EarlyFullCompaction, second: tuple[int, int], third: tuple[int, int]
) -> None:
    first = threshold.try_full_compact(5, runs(300, 300), last_full_ms=None, now_ms=T0)
    assert first is not None and first.output_level == 4  # by the interval
    by_size = threshold.try_full_compact(5, runs(*second), last_full_ms=T0, now_ms=T0 + 100)
    assert by_size is not None and by_size.output_level == 4
    # the full compaction at T0 + 100 wrote the max level: 901 ms later the interval has not passed
    assert threshold.try_full_compact(5, runs(*third), last_full_ms=T0 + 100, now_ms=T0 + 1001) is None


# ---- Java UniversalCompactionTest --------------------------------------------------------------------


def test_optimized_compaction_interval_in_the_pick() -> None:
    """Java's ``testOptimizedCompactionInterval``: UniversalCompaction(100, 1, 3) with an interval of
    1000 ms, 3 levels; each full compaction's time is the creation time of the max-level file it wrote."""
    strategy = UniversalCompaction(
        max_size_amp=100,
        size_ratio=1,
        num_run_compaction_trigger=3,
        early_full=EarlyFullCompaction(interval_ms=1000),
    )

    def pick(first: int, last_full: int | None, now: int) -> list[int] | None:
        bucket = [run(0, first), run(1, 3), at_max_level(2, 5, last_full)]
        return sizes(strategy.pick(3, bucket, now_ms=now))

    assert pick(1, None, T0) == [1, 3, 5]  # first time: no full compaction yet
    assert pick(1, T0, T0 + 1001) == [1, 3, 5]  # the interval passed
    assert pick(1, T0 + 1001, T0 + 1001) is None  # just compacted
    # not by the interval (499 ms), by size amplification (3 + 3 > 100 % of 5): a full compaction too
    assert pick(3, T0 + 1001, T0 + 1500) == [3, 3, 5]
    # which moved the last full compaction: 501 ms later nothing (and no other rule picks 1, 3, 5)
    assert pick(1, T0 + 1500, T0 + 2001) is None


def test_total_size_threshold_in_the_pick() -> None:
    strategy = UniversalCompaction(
        max_size_amp=100,
        size_ratio=1,
        num_run_compaction_trigger=3,
        early_full=EarlyFullCompaction(total_size_threshold=10),
    )
    unit = strategy.pick(3, [run(0, 1), run(1, 3), run(2, 5)])
    assert sizes(unit) == [1, 3, 5] and unit is not None and unit.output_level == 2
    assert strategy.pick(3, [run(0, 2), run(1, 6), run(2, 10)]) is None  # 18 is not below 10
    assert strategy.pick(3, [run(3, 5)]) is None  # one run


def test_early_full_compaction_comes_before_the_trigger() -> None:
    """Java consults it before every other rule: two runs are fully compacted although the trigger is 5."""
    options = {"compaction.total-size-threshold": "1 kb"}
    two = [_file(100, 0, max_seq=2), _file(300, 4)]
    unit = pick_bucket(UniversalCompaction.of(options), 5, two)
    assert unit is not None and unit.output_level == 4 and len(unit.files) == 2
    assert pick_bucket(UniversalCompaction.of({}), 5, two) is None


# ---- options: Java's grammar, refused by name ---------------------------------------------------------


def test_the_options_as_java_writes_them() -> None:
    """Java stores a MemorySize as ``MemorySize.toString`` (``100 mb``, ``1000 bytes``) and a Duration
    as ``TimeUtils.formatWithHighestUnit`` (``1 h``, ``90 min``, ``7 µs``); users write ``128MB``,
    ``2 days`` too."""
    strategy = UniversalCompaction.of(
        {
            "compaction.optimization-interval": "1 h",
            "compaction.total-size-threshold": "100 mb",
            "compaction.incremental-size-threshold": "1000 bytes",
            "full-compaction.delta-commits": "3",
        }
    )
    assert strategy.early_full == EarlyFullCompaction(3_600_000, 100 << 20, 1000)
    assert strategy.full_compaction_delta_commits == 3
    assert [parse_memory_size(t) for t in ("128MB", "1 kibibytes", "2 g", "1 t", "1024", " 7 KB ")] == [
        128 << 20,
        1024,
        2 << 30,
        1 << 40,
        1024,
        7 << 10,
    ]
    assert [
        parse_duration_ms(t) for t in ("90 min", "2 days", "30s", "1 m", "500", "7 \u00b5s", "3 secs")
    ] == [
        5_400_000,
        172_800_000,
        30_000,
        60_000,
        500,
        0,
        3_000,
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("compaction.optimization-interval", "an hour"),
        ("compaction.optimization-interval", "-1 h"),
        ("compaction.optimization-interval", "5 fortnights"),
        ("compaction.optimization-interval", "1.5 h"),
        ("compaction.total-size-threshold", "1.5 gb"),
        ("compaction.total-size-threshold", "100 megabytes"),
        ("compaction.total-size-threshold", ""),
        ("compaction.incremental-size-threshold", "-1"),
        ("compaction.incremental-size-threshold", "99999999999 tb"),  # beyond a Java long
        ("full-compaction.delta-commits", "three"),
        ("full-compaction.delta-commits", "3000000000"),  # beyond a Java int
    ],
)
def test_a_bad_value_is_refused_naming_the_option(key: str, value: str) -> None:
    with pytest.raises(ValidationError) as err:
        UniversalCompaction.of({key: value})
    assert err.value.fields["option"] == key and key in str(err.value)
    # and when a table is created or altered with it (Java's SchemaValidation parses them too)
    with pytest.raises(ValidationError) as err:
        CoreOptions({key: value}).check_numbers()
    assert err.value.fields["option"] == key


def test_delta_commits_as_javas_flink_writer_reads_them() -> None:
    assert delta_commits({}) is None
    assert delta_commits({"full-compaction.delta-commits": "-1"}) is None  # off
    assert delta_commits({"full-compaction.delta-commits": "0"}) == 1  # max(N, 1)
    assert delta_commits({"full-compaction.delta-commits": " 4 "}) == 4
    lookup = {"full-compaction.delta-commits": "2", "changelog-producer": "lookup"}
    with pytest.raises(ValidationError) as err:
        delta_commits(lookup)
    assert err.value.fields["option"] == "full-compaction.delta-commits"
    with pytest.raises(ValidationError) as err:
        CoreOptions(lookup).check_numbers()  # Java's SchemaValidation refuses such a table
    assert err.value.fields["option"] == "full-compaction.delta-commits"
    assert delta_commits({**lookup, "changelog-producer": "full-compaction"}) == 2


# ---- full-compaction.delta-commits on a table -----------------------------------------------------------

SCHEMA = pa.schema([("id", pa.int64(), False), ("v", pa.string())])


def _commit(table: FileStoreTable, ids: range) -> None:
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}))
    builder.new_commit().commit(w.prepare_commit())
    w.close()


def test_a_bucket_is_fully_compacted_every_n_delta_commits(tmp_path: Path) -> None:
    table = create_table(
        str(tmp_path),
        "db.pk",
        SCHEMA,
        primary_keys=["id"],
        options={"bucket": "1", "full-compaction.delta-commits": "3"},
    )

    def picked() -> bool:
        (bucket,) = bucket_files(table)
        return bucket.picked

    _commit(table, range(0, 100))
    _commit(table, range(100, 200))
    assert not picked()  # 2 delta commits, 2 runs: below the trigger (5) and the schedule (3)
    _commit(table, range(200, 300))
    assert picked()  # the third delta commit, never fully compacted
    strategy = UniversalCompaction.of(table.schema.options)
    assert compact(table, strategy=strategy).snapshot_ids  # the worker's compaction: into the max level
    assert {f.level for f in live_files(table)} == {num_levels(table.schema) - 1}
    _commit(table, range(300, 310))
    _commit(table, range(310, 320))
    assert not picked()  # 2 delta commits since the full compaction (the compaction is none)
    _commit(table, range(320, 330))
    assert picked()
    # the same table without the schedule: 4 runs, below the trigger, newer runs small: nothing
    files = live_files(table)
    assert len(level_sorted_runs(files)) == 4
    assert pick_bucket(UniversalCompaction.of({}), num_levels(table.schema), files) is None
    # an unbound strategy leaves the schedule out (a compaction binds it to the table's snapshots)
    assert pick_bucket(strategy, num_levels(table.schema), files) is None
    assert pick_bucket(strategy.bind(table.snapshot_manager), num_levels(table.schema), files) is not None


# ---- a table Java wrote ------------------------------------------------------------------------------


def test_a_java_written_bucket_means_the_same() -> None:
    """The golden ``pk_table_with_alter_table``, written by Java with its default 6 levels: its partition
    (1, 1) is a level-5 run of 2710 bytes (written first) under a level-4 run of 2228 bytes. Java's pick
    has 6 levels there (``Levels`` restores them from the files), so only the level-4 run is incremental,
    the max level is 5 and the last full compaction is the level-5 file's creation time."""
    path = golden_table_path("parquet", "pk_table_with_alter_table")
    table = FileStoreTable.open(str(path))
    plan = FileStoreScan(table.manifest_reader, table.schema, table.latest_snapshot(), all_levels=True).plan()
    (files,) = [s.files for s in plan.splits() if len(s.files) == 2]
    assert sorted((f.level, f.file_size) for f in files) == [(4, 2228), (5, 2710)]
    levels = num_levels(table.schema)

    def pick(options: dict[str, str], now_ms: int | None = None) -> CompactUnit | None:
        return pick_bucket(UniversalCompaction.of(options), levels, files, now_ms=now_ms)

    # incremental: 2228 bytes above the max level (not 4938: the level-5 run is Java's max level)
    unit = pick({"compaction.incremental-size-threshold": "2 kb"})
    assert unit is not None and unit.output_level == 5 and len(unit.files) == 2
    assert pick({"compaction.incremental-size-threshold": "2500 bytes"}) is None
    # total: 4938 bytes
    assert pick({"compaction.total-size-threshold": "5 kb"}) is not None
    assert pick({"compaction.total-size-threshold": "4938 bytes"}) is None
    # interval: from the level-5 file's creation time (Java's local wall clock, read in our zone)
    (base,) = [f for f in files if f.level == 5]
    assert base.creation_time is not None
    last_full = creation_epoch_millis(base.creation_time)
    interval = {"compaction.optimization-interval": "1 d"}
    assert pick(interval, now_ms=last_full + 86_400_000) is None
    unit = pick(interval, now_ms=last_full + 86_400_001)
    assert unit is not None and unit.output_level == 5


class _History:
    """The snapshots of a table (ids ``first``.. with these kinds, one second apart) as the mark reads
    them: the earliest retained is ``first`` (the ones before it expired)."""

    def __init__(self, first: int, kinds: str) -> None:
        kind = {"A": CommitKind.APPEND, "O": CommitKind.OVERWRITE, "C": CommitKind.COMPACT}
        self.snapshots = {
            first + i: dataclasses.replace(
                _SNAPSHOT, id=first + i, commit_kind=kind[k], time_millis=T0 + i * 1000
            )
            for i, k in enumerate(kinds)
        }

    def latest_snapshot_id(self) -> int | None:
        return max(self.snapshots, default=None)

    def earliest_snapshot_id(self) -> int | None:
        return min(self.snapshots, default=None)

    def find(self, snapshot_id: int) -> Snapshot | None:
        return self.snapshots.get(snapshot_id)


_SNAPSHOT = Snapshot(
    id=1,
    schema_id=0,
    base_manifest_list="b",
    delta_manifest_list="d",
    commit_user="u",
    commit_identifier=1,
    commit_kind=CommitKind.APPEND,
    time_millis=T0,
)


def _mark(history: _History, count: int) -> int | None:
    return delta_commits_mark(cast(SnapshotManager, history), count)


def test_the_delta_commit_mark() -> None:
    # ids 1..6: A C A O C A; the 3rd newest delta commit is the APPEND of id 3 (T0 + 2 s)
    history = _History(1, "ACAOCA")
    assert _mark(history, 1) == T0 + 5000
    assert _mark(history, 3) == T0 + 2000
    assert _mark(history, 4) == T0  # the first snapshot
    assert _mark(history, 5) is None  # the table never had 5 delta commits
    assert _mark(_History(1, ""), 1) is None
    # snapshots 1..9 expired: 3 delta commits retained; 5 cannot be counted any more, so a bucket fully
    # compacted before the earliest retained snapshot (id 10, T0) is due
    expired = _History(10, "ACAOC")
    assert _mark(expired, 3) == T0
    assert _mark(expired, 5) == T0
