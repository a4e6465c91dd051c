"""``serve`` says where it keeps things before it starts (issue 40: a replica against a real Postgres
without ``--warehouse`` put tables under ``~/.paimon-meta/warehouse`` and never said so)."""

from __future__ import annotations

import logging

import pytest

from paimon_meta.cli.serve import announce_start


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "paimon_meta.service"]


def test_a_defaulted_warehouse_on_a_real_metastore_is_a_warning_naming_it(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("PAIMON_META_HOME", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="paimon_meta.service"):
        announce_start("postgresql+psycopg://meta:s3cret@db.example:5432/meta", None, "sales")
    records = _records(caplog)
    assert (
        logging.INFO,
        f"catalog 'sales': warehouse {tmp_path}/warehouse, metastore "
        "postgresql+psycopg://meta:***@db.example:5432/meta",
    ) in records
    warnings = [m for level, m in records if level == logging.WARNING]
    assert len(warnings) == 1 and f"{tmp_path}/warehouse" in warnings[0] and "--warehouse" in warnings[0]
    assert all("s3cret" not in m for _, m in records)


def test_a_chosen_warehouse_or_the_embedded_metastore_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="paimon_meta.service"):
        announce_start("postgresql+psycopg://meta@db:5432/meta", "s3://bucket/wh", "paimon")
        announce_start(None, None, "paimon")  # make run: the embedded Postgres and its home's warehouse
    records = _records(caplog)
    assert [level for level, _ in records] == [logging.INFO, logging.INFO]
    assert "warehouse s3://bucket/wh" in records[0][1] and "the embedded Postgres" in records[1][1]
