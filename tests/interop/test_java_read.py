"""Real Java Paimon (0.9.0 and 1.0-SNAPSHOT) as a read oracle: it must read what we read, value by value.

Java runs ``tests/interop/java/PaimonHarness.java`` (prepared by ``tests/interop/java_env.py``: jars from
PyPI, compiled once into ``~/.cache/paimon-meta/java``). A JVM costs seconds, so the session's tables are
built first (``interop_tables``: ``tests/fixtures/interop_tables.py``) and then one JVM per version reads
all of them (plus one Java 1.0 JVM in a non-UTC zone), side by side. Rows are compared in canonical form
(``tests/interop/canonical.py``) as multisets.

* (a) The Java-written golden tables (``tests/fixtures/golden.py``): both versions read them as we do.
* (b) Tables we write (``tests/interop/written.py``: every table kind and simple type, Parquet and ORC)
  and tables changed by our operations (``tests/interop/changed.py``: compaction, dynamic and static
  overwrite, manifest full compaction, snapshot expiration, added and renamed columns). Java must read
  them as our reader does, and as we wrote them.

Known differences are strict xfails with the reason. No Java or jars: skipped with the reason, except
under ``CI=true`` where that fails.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import paimon_meta
from tests.fixtures.golden import GOLDEN_TABLES, golden_root, golden_table_path
from tests.fixtures.interop_tables import CASES, InteropTables, case_marks
from tests.interop.canonical import (
    assert_java_reads_as_we_do,
    assert_same_rows,
    canonical_arrow,
    canonical_java,
    our_read,
)
from tests.interop.java_env import VERSIONS, JavaHarness, TableRead

pytestmark = pytest.mark.interop

Request = str | tuple[str, Sequence[str]]  # a table path, or (path, projected columns)


# ---- (a) the Java-written golden tables ------------------------------------------------------------

# append_complex_data stores TIMESTAMP(9) as Parquet INT96, which Java writes for a pre-1970 value with a
# negative nanos-of-day (1899-01-01 00:59:20.001001001 here) and then cannot read back: Paimon's
# TimestampColumnReader.int96ToTimestamp builds a Timestamp with a negative nano-of-millisecond and
# Timestamp's precondition throws IllegalArgumentException, in both 0.9.0 and 1.0-SNAPSHOT. Every other
# column of the table is still compared (a projection without f4).
GOLDEN_JAVA_CANNOT_READ = {
    ("parquet", "append_complex_data"): ("f1", "f2", "f3", "f5", "f6"),
}


def _golden_params() -> Iterator[Any]:
    for version in VERSIONS:
        for fmt, name in GOLDEN_TABLES:
            marks = []
            if (fmt, name) in GOLDEN_JAVA_CANNOT_READ:
                marks.append(
                    pytest.mark.xfail(
                        strict=True,
                        reason="Java Paimon 0.9/1.0 cannot read the pre-1970 INT96 timestamps it writes",
                    )
                )
            yield pytest.param(version, fmt, name, id=f"java{version}-{fmt}-{name}", marks=marks)


@pytest.mark.parametrize(("version", "fmt", "name"), list(_golden_params()))
def test_java_reads_golden_as_we_do(java_reads: JavaReads, version: str, fmt: str, name: str) -> None:
    path = str(golden_table_path(fmt, name))
    assert_java_reads_as_we_do(java_reads.golden[version][path], path, version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("fmt", "name"), list(GOLDEN_JAVA_CANNOT_READ))
def test_java_reads_golden_projection_as_we_do(
    java_reads: JavaReads, version: str, fmt: str, name: str
) -> None:
    """The columns of the tables Java cannot read whole."""
    path = str(golden_table_path(fmt, name))
    columns = GOLDEN_JAVA_CANNOT_READ[(fmt, name)]
    assert_java_reads_as_we_do(java_reads.golden[version][(path, columns)], path, version, columns)


# ---- (b) tables we write (tests/interop/written.py, changed.py) ----------------------------------

# Java in a JVM whose zone is not UTC (+05:30: not a whole hour), on the main tables.
OTHER_ZONE = "Asia/Kolkata"
ZONE_TABLES = ("append_unaware_parquet", "append_unaware_orc")


@dataclass(frozen=True)
class WrittenRead:
    path: str
    inputs: list[pa.Table]
    read: TableRead


@dataclass(frozen=True)
class JavaReads:
    """What Java read: ``golden[version][request]`` and ``written[version or OTHER_ZONE][name]``."""

    golden: dict[str, dict[Request, TableRead]]
    written: dict[str, dict[str, WrittenRead]]


def golden_requests() -> list[Request]:
    """Every golden table, then the projections of GOLDEN_JAVA_CANNOT_READ; none if the data is absent
    (the golden tests then skip, or fail under CI, through ``golden_table_path``)."""
    root = golden_root() / "java-paimon"
    if not root.is_dir():
        return []
    requests: list[Request] = [str(root / fmt / f"{name}.db" / name) for fmt, name in GOLDEN_TABLES]
    for (fmt, name), columns in GOLDEN_JAVA_CANNOT_READ.items():
        requests.append((str(root / fmt / f"{name}.db" / name), columns))
    return requests


@pytest.fixture(scope="session")
def java_reads(java_harnesses: dict[str, JavaHarness], interop_tables: InteropTables) -> JavaReads:
    """Reads the golden tables and every built table with one JVM per version (a JVM costs seconds),
    plus Java 1.0 in OTHER_ZONE on ZONE_TABLES, the three JVMs side by side."""
    built = interop_tables.built
    golden = golden_requests()
    requests: list[Request] = [*golden, *interop_tables.paths()]
    zoned = java_harnesses["1.0"].with_timezone(OTHER_ZONE)
    with ThreadPoolExecutor(max_workers=len(java_harnesses) + 1) as pool:
        futures = {v: pool.submit(h.read_tables, requests) for v, h in java_harnesses.items()}
        zone_future = pool.submit(zoned.read_tables, [built[name].path for name in ZONE_TABLES])
        reads = {v: f.result() for v, f in futures.items()}
        zone_reads = zone_future.result()

    def by_name(names: Sequence[str], rs: Sequence[TableRead]) -> dict[str, WrittenRead]:
        return {n: WrittenRead(built[n].path, built[n].inputs, r) for n, r in zip(names, rs)}

    written = {v: by_name(list(built), rs[len(golden) :]) for v, rs in reads.items()}
    written[OTHER_ZONE] = by_name(ZONE_TABLES, zone_reads)
    return JavaReads(
        golden={v: dict(zip(golden, rs[: len(golden)])) for v, rs in reads.items()},
        written=written,
    )


def _read(java_reads: JavaReads, interop_tables: InteropTables, version: str, name: str) -> WrittenRead:
    interop_tables.get(name)  # skips when the case could not be built here
    return java_reads.written[version][name]


def _written_params(kind: str) -> Iterator[Any]:
    for version in VERSIONS:
        for w in CASES:
            reason = w.java_differs or (w.we_differ if kind == "ours" else None)
            marks = [*case_marks(w), *([pytest.mark.xfail(strict=True, reason=reason)] if reason else [])]
            yield pytest.param(version, w.name, id=f"java{version}-{w.name}", marks=marks)


@pytest.mark.parametrize(("version", "name"), list(_written_params("ours")))
def test_java_reads_our_tables_as_we_do(
    java_reads: JavaReads, interop_tables: InteropTables, version: str, name: str
) -> None:
    """Java's rows equal our reader's, value by value; Java parses the schema we wrote to the same types."""
    written = _read(java_reads, interop_tables, version, name)
    assert_java_reads_as_we_do(written.read, written.path, version)
    schema = paimon_meta.open_table(written.path).schema
    # Java quotes nested field names (ROW<`x` INT>); the types are the same.
    assert [t.replace("`", "") for t in written.read.types] == [str(f.type) for f in schema.fields]


@pytest.mark.parametrize(("version", "name"), list(_written_params("inputs")))
def test_java_reads_what_we_wrote(
    java_reads: JavaReads, interop_tables: InteropTables, version: str, name: str
) -> None:
    """Java's rows equal the rows the table holds by construction (independent of our reader)."""
    written = _read(java_reads, interop_tables, version, name)
    read = written.read
    assert read.error is None, f"Java Paimon {version} cannot read {written.path}:\n{read.error}"
    expected = [row for data in written.inputs for row in canonical_arrow(data)]
    if not written.inputs:
        assert read.snapshot is None
    assert_same_rows(canonical_java(read.rows), expected, f"Paimon {version} reading {written.path}")


@pytest.mark.parametrize("name", ZONE_TABLES)
def test_java_in_another_zone_reads_as_we_do(java_reads: JavaReads, name: str) -> None:
    """TIMESTAMP (without zone) and everything else read the same whatever the JVM's zone. Not
    TIMESTAMP_LTZ in ORC: Java Paimon 0.9/1.0 shift those by the JVM's offset (OrcTimestampColumnVector adds
    TimeZone.getDefault()'s offset), also in ORC files Java itself wrote in a UTC JVM; so that is left out."""
    written = java_reads.written[OTHER_ZONE][name]
    read = written.read
    assert read.error is None, f"Java Paimon 1.0 ({OTHER_ZONE}) cannot read {written.path}:\n{read.error}"
    skip = {"ltz3", "ltz6"} if name.endswith("_orc") else set()
    java = [{k: v for k, v in row.items() if k not in skip} for row in canonical_java(read.rows)]
    _, _, ours = our_read(written.path)
    assert_same_rows(java, [{k: v for k, v in row.items() if k not in skip} for row in ours], name)
