"""``paimon-meta --metastore http://... read`` of a ``query-auth.enabled`` table: the same read as
``connect_service`` (the service's ``/auth`` answer applied: filtered rows, masked column, projection);
a malformed answer or a 403 is one line and a non-zero exit, never rows. The answers are scripted
(tests.fixtures.query_auth) against the real service app."""

from __future__ import annotations

import pytest

import paimon_meta
from tests.catalog.test_query_auth_reads import EU, MASK_EMAIL, NOT_5, read, served
from tests.cli.helpers import Cli
from tests.fixtures.query_auth import AuthAnswers

pytestmark = pytest.mark.postgres
__all__ = ["served"]  # the fixture


def _cli(base: str, token: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    cli = Cli(base, "", capsys)
    cli.base = ["--metastore", base, "--token", token]
    return cli


def test_read_applies_the_filters_and_masks(
    served: tuple[AuthAnswers, str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answers, base, reader = served
    monkeypatch.delenv("PAIMON_META_TOKEN", raising=False)
    answers.rules("db.t", [EU, NOT_5], {"email": MASK_EMAIL})
    cli = _cli(base, reader, capsys)
    rows = sorted(cli.json("read", "db.t", "--limit", "100"), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "region": "eu", "name": "alice", "email": "***@eu"},
        {"id": 3, "region": "eu", "name": "carol", "email": "***@eu"},
    ]
    with paimon_meta.connect_service(base, token=reader) as catalog:
        assert rows == read(catalog, "db.t")
    projected = cli.json("read", "db.t", "--columns", "email", "--limit", "100")
    assert projected == [{"email": "***@eu"}, {"email": "***@eu"}]
    assert [a.body for a in answers.asked][-1] == {"select": ["email"]}


def test_a_refused_or_malformed_answer_prints_no_row(
    served: tuple[AuthAnswers, str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answers, base, reader = served
    monkeypatch.delenv("PAIMON_META_TOKEN", raising=False)
    cli = _cli(base, reader, capsys)
    answers.answer("db.t", 200, {"filter": ["{"], "columnMasking": {}})
    code, out, err = cli.run("read", "db.t")
    assert code != 0 and out == "" and "malformed" in err.lower()
    answers.answer("db.t", 403, {"message": "no SELECT on db.t", "code": 403})
    code, out, err = cli.run("read", "db.t")
    assert code != 0 and out == "" and "no SELECT on db.t" in err
