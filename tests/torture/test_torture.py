"""Writer processes commit to one table while a chaos driver SIGKILLs and SIGSTOPs them; the checker then
verifies the whole history (tests/torture/checker.py). Sizes: tests/torture/chaos.py, docs/TORTURE.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

import paimon_meta
from tests.torture import workload
from tests.torture.chaos import ChaosRun, SnapshotObserver, TortureSize
from tests.torture.checker import check_torture

pytestmark = [pytest.mark.postgres]

SIZE = TortureSize.from_env()


def run_torture(metastore_url: str, warehouse: str, options: Mapping[str, str], workdir: Path) -> None:
    size = SIZE
    with paimon_meta.connect(metastore_url, warehouse, **options) as catalog:
        table = catalog.create_table(
            workload.TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS
        )
        observer = SnapshotObserver(warehouse, options, table.path, interval=0.1)
        observer.start()
        try:
            report = ChaosRun(
                size, metastore_url=metastore_url, warehouse=warehouse, options=options, workdir=workdir
            ).run()
        finally:
            observer.stop()
        replaced = observer.final_check()
        result = check_torture(catalog, report.histories, commits=size.commits)
    counts = dict(result.state.event_counts())
    summary = (
        f"{report.summary()}; snapshots={result.state.latest} events={counts} "
        f"recovery={result.state.recovery} observer polls={observer.polls} seen={len(observer.seen)}"
    )
    print(summary)  # shown with -s, and in the report of a failure
    untyped = [e for h in report.histories for e in h.errors if not e["typed"]]
    problems = [*replaced, *result.violations]
    problems += [f"untyped error from commit(): {e['type']}: {e['message']}" for e in untyped[:5]]
    problems += [f"writer exited unexpectedly: {u}" for u in report.unexpected_exits]
    problems += [f"untyped error from recovery: {u}" for u in report.recovery_untyped[:5]]
    if report.timed_out:
        problems.append(f"run did not finish within {size.time_budget_seconds():.0f}s")
    assert not problems, summary + "\n" + "\n".join(problems) + "\n" + "\n".join(report.log[-40:])
    # The chaos really happened (events fire at progress thresholds while writers still run).
    assert report.kills + report.stops >= min(1, size.kills + size.stops), summary


@pytest.mark.s3
@pytest.mark.timeout(SIZE.time_budget_seconds() + 120)
def test_torture_s3(clean_db: str, s3_warehouse: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    uri, options = s3_warehouse
    run_torture(clean_db, uri, options, tmp_path)


@pytest.mark.timeout(SIZE.time_budget_seconds() + 120)
def test_torture_local(clean_db: str, tmp_path: Path) -> None:
    run_torture(clean_db, str(tmp_path / "warehouse"), {}, tmp_path)
