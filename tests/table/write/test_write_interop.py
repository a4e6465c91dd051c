"""pypaimon 2.1.0 reads tables whose data files our TableWrite wrote (Parquet and ORC, append and
primary-key with deletes). The snapshot is published by the test stand-in (no commit coordinator)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from paimon_meta.model.types import DOUBLE, INT, STRING
from tests.fixtures.interop import run_pypaimon
from tests.table.write.test_write import make_table, publish_snapshot, write_all

pytestmark = pytest.mark.interop

READ_SCRIPT = r"""
import json, sys
from pypaimon import CatalogFactory

warehouse, identifier = sys.argv[1], sys.argv[2]
table = CatalogFactory.create({"warehouse": warehouse}).get_table(identifier)
builder = table.new_read_builder()
splits = builder.new_scan().plan().splits()
rows = builder.new_read().to_arrow(splits).to_pylist()
print(json.dumps(sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))))
"""


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_pypaimon_reads_append_table(tmp_path: Path, fmt: str) -> None:
    table = make_table(
        tmp_path,
        [("name", STRING()), ("p", INT()), ("k", INT()), ("v", DOUBLE())],
        partition_keys=["p"],
        options={"bucket": "2", "bucket-key": "k", "file.format": fmt},
    )
    data = pa.table(
        {
            "name": [f"n{i}" for i in range(40)],
            "p": pa.array([i % 3 for i in range(40)], pa.int32()),
            "k": pa.array(range(40), pa.int32()),
            "v": [i / 2 for i in range(40)],
        }
    )
    publish_snapshot(table, write_all(table, data))
    rows = run_pypaimon(READ_SCRIPT, str(tmp_path), "db.t")
    assert rows == _sorted(data.to_pylist())


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_pypaimon_reads_primary_key_table_with_deletes(tmp_path: Path, fmt: str) -> None:
    table = make_table(
        tmp_path,
        [("id", INT(False)), ("p", STRING(False)), ("name", STRING())],
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options={"bucket": "2", "file.format": fmt},
    )
    first = pa.table({"id": pa.array(range(10), pa.int32()), "p": ["a", "b"] * 5, "name": ["x"] * 10})
    first_files = write_all(table, first)
    publish_snapshot(table, first_files)
    changes = pa.table(
        {
            "id": pa.array([0, 1, 2], pa.int32()),
            "p": ["a", "b", "a"],
            "name": ["updated", None, None],
            "_row_kind": ["+U", "-D", "-D"],
        }
    )
    # The second write continues the sequence numbers of snapshot 1, so its rows win the merge.
    publish_snapshot(table, write_all(table, changes))
    rows = run_pypaimon(READ_SCRIPT, str(tmp_path), "db.t")
    expected = [
        {"id": i, "p": "ab"[i % 2], "name": "updated" if i == 0 else "x"}
        for i in range(10)
        if i not in (1, 2)
    ]
    assert rows == _sorted(expected)
