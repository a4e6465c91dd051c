"""paimon-rust (``pypaimon-rust`` 0.4.0) as a read oracle, on the same tables Java reads.

One paimon-rust process (``tests/interop/rust_reader.py``) reads, in canonical form
(``tests/interop/canonical.py``):

* (a) the Java-written golden tables (``tests/fixtures/golden.py``): as we read them;
* (b) every table of ``interop_tables`` (``tests/fixtures/interop_tables.py``: the kinds and types of
  ``tests/interop/written.py``, the operations of ``tests/interop/changed.py``): as we read them, and
  as we wrote them.

Known differences are strict xfails naming the reason (``rust_differs`` on the case, RUST_* below). No
paimon-rust venv: skipped with the reason, except under ``CI=true`` where that fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.golden import GOLDEN_TABLES, golden_root, golden_table_path
from tests.fixtures.interop_tables import CASES, InteropTables, case_marks
from tests.interop.canonical import assert_same_rows, canonical_arrow
from tests.interop.rust_reader import RustRead, assert_rust_reads_as_we_do, rust_read_tables

pytestmark = pytest.mark.interop

# paimon-rust 0.4.0 reads manifests and manifest lists as Avro only; these golden tables were written
# by Java with manifest.format=orc.
RUST_ORC_MANIFESTS = (
    "paimon-rust 0.4.0 reads manifest files and lists only as Avro ('avro ocf: invalid magic bytes'); "
    "this table has manifest.format=orc"
)
GOLDEN_RUST_CANNOT_READ = {
    ("orc", "append_10_stats_dense_store"): RUST_ORC_MANIFESTS,
    ("orc", "pk_dv_index_with_commit_message_version10"): RUST_ORC_MANIFESTS,
    ("orc", "pk_table_with_total_buckets"): RUST_ORC_MANIFESTS,
    ("parquet", "append_09"): RUST_ORC_MANIFESTS,
    ("parquet", "append_10"): RUST_ORC_MANIFESTS,
    ("parquet", "append_with_empty_partition"): RUST_ORC_MANIFESTS,
}


@dataclass(frozen=True)
class RustReads:
    golden: dict[str, RustRead]  # by table path
    written: dict[str, RustRead]  # by case name


@pytest.fixture(scope="session")
def rust_reads(
    rust_python: Path, interop_tables: InteropTables, tmp_path_factory: pytest.TempPathFactory
) -> RustReads:
    """The golden tables and every built table, read in one paimon-rust process."""
    root = golden_root() / "java-paimon"
    golden = [str(root / fmt / f"{name}.db" / name) for fmt, name in GOLDEN_TABLES] if root.is_dir() else []
    names = list(interop_tables.built)
    reads = rust_read_tables(
        rust_python, [*golden, *interop_tables.paths()], tmp_path_factory.mktemp("rust-reads")
    )
    return RustReads(
        golden=dict(zip(golden, reads[: len(golden)])), written=dict(zip(names, reads[len(golden) :]))
    )


# ---- (a) the Java-written golden tables ------------------------------------------------------------


def _golden_params() -> Iterator[Any]:
    for fmt, name in GOLDEN_TABLES:
        reason = GOLDEN_RUST_CANNOT_READ.get((fmt, name))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(fmt, name, id=f"{fmt}-{name}", marks=marks)


@pytest.mark.parametrize(("fmt", "name"), list(_golden_params()))
def test_rust_reads_golden_as_we_do(rust_reads: RustReads, fmt: str, name: str) -> None:
    path = str(golden_table_path(fmt, name))
    assert_rust_reads_as_we_do(rust_reads.golden[path], path)


# ---- (b) tables we write and change ----------------------------------------------------------------


def _written_params(kind: str) -> Iterator[Any]:
    for w in CASES:
        reason = w.rust_differs or (w.we_differ if kind == "ours" else None)
        marks = [*case_marks(w), *([pytest.mark.xfail(strict=True, reason=reason)] if reason else [])]
        yield pytest.param(w.name, id=w.name, marks=marks)


@pytest.mark.parametrize("name", list(_written_params("ours")))
def test_rust_reads_our_tables_as_we_do(
    rust_reads: RustReads, interop_tables: InteropTables, name: str
) -> None:
    table = interop_tables.get(name)
    assert_rust_reads_as_we_do(rust_reads.written[name], table.path)


@pytest.mark.parametrize("name", list(_written_params("inputs")))
def test_rust_reads_what_we_wrote(rust_reads: RustReads, interop_tables: InteropTables, name: str) -> None:
    """paimon-rust's rows equal the rows the table holds by construction (independent of our reader)."""
    table = interop_tables.get(name)
    read = rust_reads.written[name]
    assert read.error is None, f"paimon-rust cannot read {table.path}:\n{read.error}"
    theirs = [] if read.data is None else canonical_arrow(read.data)
    expected = [row for data in table.inputs for row in canonical_arrow(data)]
    assert_same_rows(theirs, expected, f"paimon-rust reading {table.path}", who="paimon-rust")
