"""Branches Java made, read as Java reads them (Java 0.9 and 1.0).

Java (``PaimonHarness script``) writes partitions A and B to main, creates branch ``b1``
(``Table.createBranch``: the latest schema copied into ``branch/branch-b1/schema``), writes partition C
and a changed row of A to the branch, and reads main, the branch, and main with
``scan.fallback-branch=b1``. We read the same three and must return the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING, DataField
from paimon_meta.table.option_policy import SCAN_FALLBACK_BRANCH
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.table import FileStoreTable
from tests.interop.canonical import assert_same_rows, canonical_arrow, canonical_java
from tests.interop.java_env import VERSIONS, JavaHarness

pytestmark = pytest.mark.interop

FALLBACK = {SCAN_FALLBACK_BRANCH: "b1"}


def _ours(table: FileStoreTable, columns: list[str] | None = None) -> list[dict[str, Any]]:
    builder = table.new_read_builder()
    if columns is not None:
        builder = builder.with_projection(columns)
    return canonical_arrow(builder.new_read().to_arrow(builder.new_scan().plan().splits()))


@pytest.mark.parametrize("version", VERSIONS)
def test_java_branch_and_fallback_read_as_java(
    tmp_path: Path, java_harnesses: dict[str, JavaHarness], version: str
) -> None:
    path = str(tmp_path / "db.db" / "t")
    fields = (
        DataField(0, "id", BIGINT(False)),
        DataField(1, "dt", STRING(False)),
        DataField(2, "v", STRING()),
    )
    schema = TableSchema(0, fields, 2, ("dt",), ("id", "dt"), {"bucket": "2"})
    assert SchemaManager(get_file_io(path), path).commit_new_schema(schema)

    def rows(*values: tuple[int, str, str]) -> list[dict[str, Any]]:
        return [{"id": i, "dt": dt, "v": v} for i, dt, v in values]

    b1 = {"branch": "b1"}
    ops: list[dict[str, Any]] = [
        {"op": "write", "table": path, "rows": rows((1, "A", "main"), (2, "A", "main"))},
        {"op": "write", "table": path, "rows": rows((3, "B", "main"))},
        {"op": "create_branch", "table": path, "branch": "b1"},
        {"op": "write", "table": path, "options": b1, "rows": rows((5, "C", "b1"), (6, "C", "b1"))},
        {"op": "write", "table": path, "options": b1, "rows": rows((1, "A", "b1"))},
        {"op": "read", "table": path},
        {"op": "read", "table": path, "options": b1},
        {"op": "read", "table": path, "options": FALLBACK},
        {"op": "read", "table": path, "options": FALLBACK, "columns": ["v", "id"]},
    ]
    script = tmp_path / "ops.jsonl"
    script.write_text("".join(json.dumps(op) + "\n" for op in ops), encoding="utf-8")
    out = java_harnesses[version].run(["script", str(script)])
    answers = [json.loads(line) for line in out.rstrip("\n").split("\n")]
    assert len(answers) == len(ops) and not [a for a in answers if "error" in a], out[-3000:]
    java_main, java_b1, java_fallback, java_projected = (canonical_java(a["rows"]) for a in answers[-4:])

    main = FileStoreTable.open(path)
    branch = main.branch("b1")
    fallback = FileStoreTable(main.file_io, path, main.schema, FALLBACK)
    expected_main = rows((1, "A", "main"), (2, "A", "main"), (3, "B", "main"))
    assert_same_rows(expected_main, _ours(main), "main")
    assert_same_rows(java_main, _ours(main), "main")
    assert_same_rows(rows((1, "A", "b1"), (5, "C", "b1"), (6, "C", "b1")), _ours(branch), "branch b1")
    assert_same_rows(java_b1, _ours(branch), "branch b1")
    assert_same_rows([*expected_main, *rows((5, "C", "b1"), (6, "C", "b1"))], _ours(fallback), "fallback")
    assert_same_rows(java_fallback, _ours(fallback), "fallback")
    assert_same_rows(java_projected, _ours(fallback, ["v", "id"]), "fallback projected")
