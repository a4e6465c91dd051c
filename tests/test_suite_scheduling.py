"""The suite's start order (tests/fixtures/scheduling.py) names modules that exist: a renamed or moved heavy
module would otherwise silently fall back to starting late, and the suite's wall time grow."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.scheduling import HEAVIEST, HEAVY_FOR_ITERATION

REPO = Path(__file__).resolve().parents[1]


def test_every_heavy_module_exists_once() -> None:
    assert len(set(HEAVIEST)) == len(HEAVIEST)
    missing = [path for path in HEAVIEST if not (REPO / path).is_file()]
    assert not missing, f"tests/fixtures/scheduling.py names modules that do not exist: {missing}"


def test_every_module_left_out_of_the_fast_tier_exists_once() -> None:
    assert len(set(HEAVY_FOR_ITERATION)) == len(HEAVY_FOR_ITERATION)
    missing = [path for path in HEAVY_FOR_ITERATION if not (REPO / path).is_file()]
    assert not missing, f"tests/fixtures/scheduling.py names modules that do not exist: {missing}"
