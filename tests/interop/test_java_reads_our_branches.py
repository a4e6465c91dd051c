"""Branches paimon-meta makes, used by Java as its own (Java 0.9 and 1.0).

We create branch ``b1`` from a tag and an empty branch ``empty`` (``ops.branches``); Java lists each
branch's tags, writes to both branches and reads main and the branches; we read the same. We then
drop ``empty`` and rename a branch, then fast-forward main to ``b1``; Java reads main as the branch,
commits on top of it (we read that too), and creates branches with the names we dropped and renamed away.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.ops import branches as branch_ops
from paimon_meta.ops import tags as tag_ops
from paimon_meta.table.table import FileStoreTable
from tests.interop.canonical import assert_same_rows, canonical_arrow, canonical_java
from tests.interop.java_env import VERSIONS, JavaHarness
from tests.ops.helpers import FAST_LOCK, TABLE, create, write

pytestmark = [pytest.mark.interop, pytest.mark.postgres]


def _rows(*keys: int) -> list[dict[str, Any]]:
    return [{"k": k, "v": f"v{k}"} for k in keys]


def _ours(table: FileStoreTable) -> list[dict[str, Any]]:
    builder = table.new_read_builder()
    return canonical_arrow(builder.new_read().to_arrow(builder.new_scan().plan().splits()))


def _java(harness: JavaHarness, tmp: Path, name: str, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    script = tmp / name
    script.write_text("".join(json.dumps(op) + "\n" for op in ops), encoding="utf-8")
    out = harness.run(["script", str(script)])
    answers = [json.loads(line) for line in out.rstrip("\n").split("\n")]
    assert len(answers) == len(ops) and not [a for a in answers if "error" in a], out[-3000:]
    return answers


@pytest.mark.parametrize("version", VERSIONS)
def test_java_uses_our_branches(
    clean_db: str, tmp_path: Path, java_harnesses: dict[str, JavaHarness], version: str
) -> None:
    catalog: MetastoreCatalog = paimon_meta.connect(clean_db, str(tmp_path / "warehouse"), **FAST_LOCK)
    try:
        table = create(catalog)
        write(catalog, [1])
        write(catalog, [11])
        tag_ops.create_tag(catalog, TABLE, "t1", 1)
        branch_ops.create_branch(catalog, TABLE, "b1", "t1")
        branch_ops.create_branch(catalog, TABLE, "empty")
        path = table.path
        b1, empty = {"branch": "b1"}, {"branch": "empty"}
        answers = _java(
            java_harnesses[version],
            tmp_path,
            "branches.jsonl",
            [
                {"op": "tags", "table": path, "options": b1},
                {"op": "write", "table": path, "options": b1, "rows": _rows(7)},
                {"op": "write", "table": path, "options": empty, "rows": _rows(5)},
                {"op": "read", "table": path},
                {"op": "read", "table": path, "options": b1},
                {"op": "read", "table": path, "options": empty},
            ],
        )
        assert list(answers[0]["tags"]) == ["t1"] and answers[0]["tags"]["t1"]["snapshot"] == 1
        main = FileStoreTable.open(path)
        for answer, ours, expected in (
            (answers[3], main, _rows(1, 11)),
            (answers[4], main.branch("b1"), _rows(1, 7)),
            (answers[5], main.branch("empty"), _rows(5)),
        ):
            assert_same_rows(expected, _ours(ours), ours.branch_name)
            assert_same_rows(canonical_java(answer["rows"]), _ours(ours), ours.branch_name)

        # dropped and renamed here, gone for Java too (it lists branches by directory): it makes them anew
        branch_ops.drop_branch(catalog, TABLE, "empty")
        branch_ops.create_branch(catalog, TABLE, "old")
        branch_ops.rename_branch(catalog, TABLE, "old", "new")
        report = branch_ops.fast_forward(catalog, TABLE, "b1")
        assert (report.removed_snapshots, report.added_snapshots) == ([2], [2])
        answers = _java(
            java_harnesses[version],
            tmp_path,
            "after.jsonl",
            [
                {"op": "read", "table": path},
                {"op": "write", "table": path, "rows": _rows(8)},
                {"op": "read", "table": path},
                {"op": "create_branch", "table": path, "branch": "empty"},
                {"op": "create_branch", "table": path, "branch": "old"},
            ],
        )
        assert_same_rows(canonical_java(answers[0]["rows"]), _rows(1, 7), "main fast-forwarded")
        assert_same_rows(canonical_java(answers[2]["rows"]), _rows(1, 7, 8), "main after Java's commit")
        assert_same_rows(_rows(1, 7, 8), _ours(FileStoreTable.open(path)), "main after Java's commit")
    finally:
        catalog.close()
