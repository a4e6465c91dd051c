"""paimon-rust (``pypaimon-rust`` 0.4.0) reading merge-engine tables: every case of
``tests/interop/test_java_merge_engines.py`` (partial-update, aggregation, first-row) in four copies:

* ``ours``: our writer's commits; ``ours-compacted``: the same, then our full compaction;
* ``java``: Java 1.0's writer and its own ``BatchTableCommit``; ``java-compacted``: the same, then Java's
  full compaction.

One JVM writes every Java copy, one paimon-rust process reads all of them (``tests/interop/rust_reader.py``)
and each read is compared with ours, value by value (we read the Java copies as Java does: that module's
tests). paimon-rust merges these engines on read itself, and reads a fully compacted table as its files
(one row per key). Where it differs, a strict xfail names the difference (RUST_* below). No paimon-rust
venv or no Java: skipped with the reason, except under ``CI=true`` where that fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import paimon_meta
from paimon_meta.table.compact import compact
from tests.interop.java_env import JavaHarness
from tests.interop.rust_reader import RustRead, assert_rust_reads_as_we_do, rust_read_tables
from tests.interop.test_java_merge_engines import CASES, create_table, java_value, our_commit

pytestmark = pytest.mark.interop

JAVA_VERSION = "1.0"  # 0.9 writes the same files for these tables (test_java_merge_engines reads both)
COPIES = ("ours", "ours-compacted", "java", "java-compacted")
UNCOMPACTED = ("ours", "java")

RUST_AGGREGATION = (
    "paimon-rust 0.4.0 merges aggregation on read unlike Java: a DECIMAL(10,2) sum beyond its precision is "
    "null (Java and we keep 100000000.02), and listagg skips an empty string (' | c | d' in Java and ours, "
    "'c | d' in paimon-rust)"
)
RUST_AGGREGATION_RETRACT = (
    "paimon-rust 0.4.0 retracts a product unlike Java: key 3, whose first row is a -D with factor 3.00 "
    "(DECIMAL(8,2), product), reads factor null in paimon-rust, 3.00 in Java and ours"
)
RUST_SEQUENCE_GROUP_AGGREGATE = (
    "paimon-rust 0.4.0 refuses the table: 'ValueError: Paimon hitting invalid config: Must use sequence "
    "group for aggregate function 'min' on field 'm'' (Java accepts it: an aggregate function outside every "
    "sequence group)"
)
# (case, copies) -> reason; the fully compacted copies hold one row per key, which paimon-rust reads as is.
RUST_DIFFERS: dict[tuple[str, tuple[str, ...]], str] = {
    ("aggregation", UNCOMPACTED): RUST_AGGREGATION,
    ("aggregation-retract", UNCOMPACTED): RUST_AGGREGATION_RETRACT,
    ("partial-update-sequence-group-aggregate", COPIES): RUST_SEQUENCE_GROUP_AGGREGATE,
}


def _differs(name: str, copy: str) -> str | None:
    for (case, copies), reason in RUST_DIFFERS.items():
        if case == name and copy in copies:
            return reason
    return None


@pytest.fixture(scope="module")
def rust_merge_reads(
    rust_python: Path,
    java_harnesses: dict[str, JavaHarness],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], RustRead]:
    """Every copy of every case, built (one JVM for the Java copies) and read by one paimon-rust process."""
    root = tmp_path_factory.mktemp("rust-merge-engines")
    paths: dict[tuple[str, str], str] = {}
    ops: list[dict[str, Any]] = []
    for name, case in CASES.items():
        copies = {copy: create_table(root / "db.db" / f"{name}-{copy}", case) for copy in COPIES}
        paths.update({(name, copy): path for copy, path in copies.items()})
        for rows in case.commits:
            for copy in ("ours", "ours-compacted"):
                our_commit(copies[copy], case.schema, rows)
            java_rows = [{k: java_value(v) for k, v in r.items()} for r in rows]
            ops += [
                {"op": "write", "table": copies[c], "rows": java_rows} for c in ("java", "java-compacted")
            ]
        assert compact(paimon_meta.open_table(copies["ours-compacted"])).snapshot_ids
        ops.append({"op": "compact", "table": copies["java-compacted"], "buckets": [0, 1]})
    script = root / "ops.jsonl"
    script.write_text("".join(json.dumps(op, ensure_ascii=False) + "\n" for op in ops), encoding="utf-8")
    out = java_harnesses[JAVA_VERSION].run(["script", str(script)], ok_exit=(0, 1))
    answers = [json.loads(line) for line in out.rstrip("\n").split("\n")]
    assert len(answers) == len(ops), out[-2000:]
    errors = [f"{a['op']} {a['table']}:\n{a['error']}" for a in answers if "error" in a]
    assert not errors, "\n\n".join(errors)
    reads = rust_read_tables(rust_python, list(paths.values()), root / "rust-reads")
    return dict(zip(paths, reads))


def _params() -> Iterator[Any]:
    for name in CASES:
        for copy in COPIES:
            reason = _differs(name, copy)
            marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
            yield pytest.param(name, copy, marks=marks, id=f"{name}-{copy}")


@pytest.mark.parametrize(("name", "copy"), list(_params()))
def test_rust_reads_merge_engine_tables_as_we_do(
    rust_merge_reads: dict[tuple[str, str], RustRead], name: str, copy: str
) -> None:
    read = rust_merge_reads[(name, copy)]
    assert_rust_reads_as_we_do(read, read.table)
