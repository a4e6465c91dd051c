"""Off-peak hours (Java ``OffPeakHours``: ``compaction.offpeak.start.hour``, ``.end.hour``,
``compaction.offpeak-ratio``): inside the window the ratio is added to the size ratio, so the universal
pick takes larger runs; the maintenance scheduler's debt (and so its jobs) follows the window."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.maintenance.debt import bucket_files
from paimon_meta.table.compact import compact
from paimon_meta.table.mergetree.universal import (
    OffPeakHours,
    UniversalCompaction,
    local_hour,
    pick_bucket,
)
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.arrow_input import num_levels
from tests.spark.helpers import create_table, live_files
from tests.table.mergetree.test_universal_compaction import run

SCHEMA = pa.schema([("id", pa.int64(), False), ("v", pa.string())])


def _window(start: int, end: int, ratio: int = 100) -> dict[str, str]:
    return {
        "compaction.offpeak.start.hour": str(start),
        "compaction.offpeak.end.hour": str(end),
        "compaction.offpeak-ratio": str(ratio),
    }


def test_the_window_and_its_options() -> None:
    assert OffPeakHours.of({}) is None
    assert OffPeakHours.of(_window(3, 3)) is None  # equal hours: no window
    day = OffPeakHours.of(_window(1, 5, 30))
    assert day is not None and [h for h in range(24) if day.is_off_peak(h)] == [1, 2, 3, 4]
    assert (day.current_ratio(2), day.current_ratio(5)) == (30, 0)
    night = OffPeakHours.of(_window(22, 2))  # wraps past midnight; the end hour is excluded
    assert night is not None and [h for h in range(24) if night.is_off_peak(h)] == [0, 1, 22, 23]
    for bad in (_window(24, 2), _window(-1, 5), {"compaction.offpeak.start.hour": "7"}):
        with pytest.raises(ValidationError):
            OffPeakHours.of(bad)
    with pytest.raises(ValidationError):
        OffPeakHours.of(_window(1, 2, -5))


def test_inside_the_window_the_pick_takes_a_larger_run() -> None:
    # Java's test: two runs of 100 and 150 bytes, trigger 2, off-peak ratio 100
    strategy = UniversalCompaction.of({"num-sorted-run.compaction-trigger": "2", **_window(1, 4)})
    runs = [run(0, 100), run(1, 150)]
    assert strategy.pick(3, runs, hour=0) is None  # 100 * 1.01 < 150
    assert strategy.pick(3, runs, hour=4) is None  # the end hour is outside
    unit = strategy.pick(3, runs, hour=1)  # 100 * 2.01 >= 150
    assert unit is not None and unit.runs == tuple(runs) and unit.output_level == 2


def _write(table: FileStoreTable, ids: range) -> None:
    builder = table.new_batch_write_builder()
    w = builder.new_write()
    w.write_arrow(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"value-{i:08d}" for i in ids]}))
    builder.new_commit().commit(w.prepare_commit())
    w.close()


@pytest.mark.parametrize("now_off_peak", [True, False])
def test_the_debt_the_scheduler_measures_follows_the_window(tmp_path: Path, now_off_peak: bool) -> None:
    hour = local_hour()
    # a window around now (an hour before to two after: the hour may turn during the test), or one
    # that starts two hours from now
    window = (
        _window((hour + 23) % 24, (hour + 2) % 24)
        if now_off_peak
        else _window((hour + 2) % 24, (hour + 4) % 24)
    )
    table = create_table(
        str(tmp_path),
        "db.pk",
        SCHEMA,
        primary_keys=["id"],
        options={"bucket": "1", "num-sorted-run.compaction-trigger": "2", **window},
    )
    _write(table, range(20_000))
    compact(table)  # one run at the max level
    _write(table, range(20_000, 32_000))  # a level-0 run about 60 % of it
    base, new = sorted(live_files(table), key=lambda f: f.level, reverse=True)
    # the precondition of the size ratio: the new run is too small without the off-peak ratio, and
    # large enough with it
    assert new.file_size * 1.01 < base.file_size <= new.file_size * 2.01
    (bucket,) = bucket_files(table)
    assert bucket.picked is now_off_peak
    # what the worker then compacts: the same pick (at an hour in and outside the window)
    strategy = UniversalCompaction.of(table.schema.options)
    inside, outside = (hour, (hour + 12) % 24) if now_off_peak else ((hour + 2) % 24, hour)
    assert pick_bucket(strategy, num_levels(table.schema), [base, new], hour=inside) is not None
    assert pick_bucket(strategy, num_levels(table.schema), [base, new], hour=outside) is None
