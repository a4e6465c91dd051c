"""ORC timestamps Java Paimon (0.9.0 and 1.0-SNAPSHOT, both with ORC Java 1.9.2) wrote, read by us as Java
reads them: TIMESTAMP(0..9) and TIMESTAMP_LTZ(0..9), before 1970, between 1970 and 2015, after 2015 and
after 2038, with and without fractional seconds.

One JVM per Java version, its default time zone ``Asia/Shanghai`` (UTC+8): Java writes one ORC table and
reads it back; we read the same files. A JVM in UTC writes files pyarrow alone reads exactly as Java does;
a writer in another zone exposed two misreads:

* TIMESTAMP: pyarrow reads values whose UTC and writer-zone seconds differ in sign (nanos >= 1 ms) one
  second off Java (:func:`pyarrow_misread` is the rule, written from the files and checked value by value
  east and west of UTC; paimon_meta/serde/orc_timestamps.py explains it and corrects it on read).
* TIMESTAMP_LTZ: Paimon's legacy layout (``orc.timestamp-ltz.legacy.type``, true by default; 0.9.0 and
  this 1.0-SNAPSHOT know no other) stores each instant minus the writer JVM's offset, as an ORC
  TIMESTAMP_INSTANT, and Java adds the *reader* JVM's offset back: only Java in the writer's zone reads
  the instants written (Java in UTC reads what pyarrow alone does). We read those instants: the footer
  says the ORC Java writer and the writer's zone (paimon_meta/serde/orc_timestamps.py). With the option
  false (Paimon >= 1.1, not in these jars) the file holds the instants and we read them as stored.

A third JVM (1.0, ``Asia/Kolkata``) writes values before 1900: our LTZ reads as Java's (its raw offset
there), our TIMESTAMP does not yet (strict xfail: pyarrow takes tzdata's offsets of the time).

No Java or jars: skipped with the reason, except under ``CI=true`` where that fails.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow.orc as pa_orc
import pytest

import paimon_meta
from paimon_meta.io import get_file_io
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import INT, TIMESTAMP, TIMESTAMP_LTZ, DataField
from paimon_meta.serde.orc_timestamps import writer_timezone
from paimon_meta.table.snapshots import SchemaManager
from tests.interop.canonical import assert_same_rows, canonical_arrow, canonical_java
from tests.interop.java_env import VERSIONS, JavaHarness

pytestmark = pytest.mark.interop

Row = dict[str, Any]
WRITER_ZONE = "Asia/Shanghai"
PRECISIONS = range(10)
# Wall clocks (TIMESTAMP) and UTC instants (TIMESTAMP_LTZ), nanosecond precision; column p holds each
# truncated to p fraction digits.
VALUES = (
    "1900-01-01T00:00:00.123456789",
    "1950-06-15T07:08:09.1",
    "1969-12-31T23:59:58.999",
    "1969-12-31T23:59:59",
    "1969-12-31T23:59:59.000001",
    "1969-12-31T23:59:59.999",
    "1970-01-01T00:00:00",
    "1970-01-01T00:00:00.001",
    "1970-01-01T00:00:01.5",
    "1970-01-01T07:59:58.25",
    "1970-01-01T07:59:59.999",
    "1970-01-01T08:00:00.001",
    "2014-06-01T12:00:00.5",
    "2014-12-31T23:59:59.999999999",
    "2015-01-01T00:00:00",
    "2015-01-01T00:00:00.000000001",
    "2020-02-29T12:34:56.789123",
    "2040-01-01T00:00:00.25",
    "2100-01-01T00:00:00.75",
)


def truncated(value: str, precision: int) -> str:
    whole, _, fraction = value.partition(".")
    return f"{whole}.{fraction[:precision]}" if fraction[:precision] else whole


def wall_seconds_and_nanos(value: str) -> tuple[int, int]:
    whole, _, fraction = value.partition(".")
    seconds = (dt.datetime.fromisoformat(whole) - dt.datetime(1970, 1, 1)) // dt.timedelta(seconds=1)
    return seconds, int(fraction.ljust(9, "0"))


def _stored_seconds(value: str, zone: str) -> tuple[int, int, int]:
    """(seconds as the Java ORC writer stores them, the writer zone's offset, nanos) of a wall clock."""
    wall, nanos = wall_seconds_and_nanos(value)
    offset = ZoneInfo(zone).utcoffset(dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall))
    assert offset is not None
    instant = wall - int(offset.total_seconds())
    if nanos >= 1_000_000 and instant < 0:
        instant += 1  # truncated toward zero, not floored: only nanos of a millisecond or more count
    return instant, int(offset.total_seconds()), nanos


def pyarrow_misread(value: str, zone: str) -> int:
    """Seconds pyarrow's TIMESTAMP read of an ORC value Java wrote in ``zone`` is off from Java's read of it
    (the rule in the module docstring)."""
    stored, offset, nanos = _stored_seconds(value, zone)
    if nanos < 1_000_000:
        return 0
    return int(stored < 0) - int(stored + offset < 0)


def java_misread(value: str, zone: str) -> int:
    """Seconds Java's own read of a wall clock it wrote in ``zone`` is off: +1 for an instant in [-1 s, 0)
    with nanos of a millisecond or more (stored as second 0, so no reader takes the second off again)."""
    stored, offset, nanos = _stored_seconds(value, zone)
    wall, _ = wall_seconds_and_nanos(value)
    return int(nanos >= 1_000_000 and stored == 0 and wall - offset < 0)


FIELDS = (
    DataField(0, "id", INT(nullable=False)),
    *(DataField(1 + p, f"t{p}", TIMESTAMP(p)) for p in PRECISIONS),
    *(DataField(11 + p, f"l{p}", TIMESTAMP_LTZ(p)) for p in PRECISIONS),
)
TIMESTAMP_COLUMNS = [f"t{p}" for p in PRECISIONS]
LTZ_COLUMNS = [f"l{p}" for p in PRECISIONS]


def java_rows(values: Sequence[str] = VALUES) -> list[Row]:
    rows: list[Row] = []
    for i, value in enumerate(values):
        row: Row = {"id": i}
        for p in PRECISIONS:
            row[f"t{p}"] = row[f"l{p}"] = truncated(value, p)
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Run:
    version: str
    path: str
    java: list[Row]  # Java's read, in the writer's zone, canonical
    ours: list[Row]  # our read, canonical


def java_write_and_read(harness: JavaHarness, zone: str, values: Sequence[str], root: Path) -> Run:
    """Java (its JVM in ``zone``) writes ``values`` into a new ORC table under ``root`` and reads it back;
    we read the same table."""
    path = str(root / "db.db" / "ts")
    schema = TableSchema(0, FIELDS, len(FIELDS) - 1, (), (), {"file.format": "orc", "bucket": "-1"})
    assert SchemaManager(get_file_io(path), path).commit_new_schema(schema)
    ops = [{"op": "write", "table": path, "rows": java_rows(values)}, {"op": "read", "table": path}]
    script = root / "ops.jsonl"
    script.write_text("".join(json.dumps(op) + "\n" for op in ops), encoding="utf-8")
    out = harness.with_timezone(zone).run(["script", str(script)], ok_exit=(0, 1))
    answers = [json.loads(line) for line in out.rstrip("\n").split("\n")]
    assert len(answers) == len(ops), out[-2000:]
    for answer in answers:
        assert "error" not in answer, answer["error"]
    builder = paimon_meta.open_table(path).new_read_builder()
    ours = canonical_arrow(builder.new_read().to_arrow(builder.new_scan().plan().splits()))
    return Run(harness.version, path, canonical_java(answers[1]["rows"]), ours)


@pytest.fixture(scope="module", params=VERSIONS)
def run(
    request: pytest.FixtureRequest,
    java_harnesses: dict[str, JavaHarness],
    tmp_path_factory: pytest.TempPathFactory,
) -> Run:
    version: str = request.param
    root = tmp_path_factory.mktemp(f"orc-timestamps-{version}")
    return java_write_and_read(java_harnesses[version], WRITER_ZONE, VALUES, root)


def project(rows: Sequence[Row], columns: Sequence[str], ids: set[int] | None = None) -> list[Row]:
    return [{c: r[c] for c in ("id", *columns)} for r in rows if ids is None or r["id"] in ids]


def test_misread_rule() -> None:
    """The rule on the values the issue names, in the writer zones east and west of UTC."""
    assert pyarrow_misread("1970-01-01T00:00:00.001", "Asia/Shanghai") == 1
    assert pyarrow_misread("1969-12-31T23:59:59.999", "Asia/Shanghai") == 1
    assert pyarrow_misread("1969-12-31T23:59:58.999", "Asia/Shanghai") == 0  # both take the second off
    assert pyarrow_misread("1970-01-01T07:59:59.999", "Asia/Shanghai") == 0  # Java's own -1 s < t < 0 bug
    assert java_misread("1970-01-01T07:59:59.999", "Asia/Shanghai") == 1
    assert java_misread("1969-12-31T23:59:59.999", "UTC") == 1
    assert java_misread("1969-12-31T23:59:59.999", "Asia/Shanghai") == 0
    assert pyarrow_misread("1970-01-01T00:00:00.000999", "Asia/Shanghai") == 0  # under a millisecond
    assert pyarrow_misread("1969-12-31T23:59:59.999", "America/Los_Angeles") == -1
    assert pyarrow_misread("1969-12-31T16:00:00.5", "America/Los_Angeles") == -1
    assert pyarrow_misread("1969-12-31T15:59:58.5", "America/Los_Angeles") == 0
    assert all(pyarrow_misread(v, "UTC") == 0 for v in VALUES)


def test_timestamps_read_as_java(run: Run) -> None:
    """Every TIMESTAMP value, at every precision, as Java reads it: also those pyarrow alone reads a second
    off (the rule finds some at every precision >= 1, so the case covers the correction)."""
    for p in PRECISIONS:
        misread = [v for v in VALUES if pyarrow_misread(truncated(v, p), WRITER_ZONE)]
        assert bool(misread) == (p >= 1), (p, misread)
    assert_same_rows(
        project(run.java, TIMESTAMP_COLUMNS),
        project(run.ours, TIMESTAMP_COLUMNS),
        f"TIMESTAMP columns written by Java {run.version} in {WRITER_ZONE}",
    )


def test_ltz_read_as_java_in_the_writers_zone(run: Run) -> None:
    """Every TIMESTAMP_LTZ value as Java reads it in the writer's zone, the instants written (the file's
    footer: writer ORC_JAVA, zone Asia/Shanghai), also before 1900 where Java's zone offset is not the
    local mean time of the host's tzdata."""
    files = sorted(Path(run.path).glob("bucket-0/*.orc"))
    assert files
    for file in files:
        assert pa_orc.ORCFile(str(file)).writer == "ORC_JAVA"
        assert writer_timezone(file.read_bytes()) == WRITER_ZONE
    assert_same_rows(
        project(run.java, LTZ_COLUMNS),
        project(run.ours, LTZ_COLUMNS),
        f"TIMESTAMP_LTZ columns written by Java {run.version} in {WRITER_ZONE}",
    )


def test_ltz_without_the_legacy_option_reads_as_stored(run: Run, tmp_path: Path) -> None:
    """The same files in a table with ``orc.timestamp-ltz.legacy.type=false``: the values as stored (as
    Java reading in UTC), here the instants minus Shanghai's +08:00 (no DST among these values)."""
    path = tmp_path / "ts"
    shutil.copytree(run.path, path)
    schema_file = path / "schema" / "schema-0"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    schema["options"]["orc.timestamp-ltz.legacy.type"] = "false"
    schema_file.write_text(json.dumps(schema), encoding="utf-8")
    builder = paimon_meta.open_table(str(path)).new_read_builder()
    ours = canonical_arrow(builder.new_read().to_arrow(builder.new_scan().plan().splits()))
    eight_hours = dt.timedelta(hours=8)
    expected = [
        {c: r[c] if c == "id" else _minus(r[c], eight_hours) for c in ("id", *LTZ_COLUMNS)} for r in run.java
    ]
    assert_same_rows(expected, project(ours, LTZ_COLUMNS), "TIMESTAMP_LTZ as stored")


def _minus(canonical: str | None, delta: dt.timedelta) -> str | None:
    if canonical is None:
        return None
    whole, _, fraction = canonical.removesuffix("Z").partition(".")
    moved = dt.datetime.fromisoformat(whole) - delta
    return f"{moved.isoformat()}.{fraction}Z"


def test_java_in_the_writers_zone_reads_the_values_written(run: Run) -> None:
    """The oracle itself: Java in the writer's zone reads back every value it was given (TIMESTAMP wall
    clocks, LTZ instants, the latter held as UTC wall clocks), but for its own -1 s < t < 0 misread."""
    for row in run.java:
        for p in PRECISIONS:
            value = truncated(VALUES[row["id"]], p)
            wall, nanos = wall_seconds_and_nanos(value)
            read = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall + java_misread(value, WRITER_ZONE))
            expected = f"{read.isoformat()}.{nanos:09d}"
            assert (row[f"t{p}"], row[f"l{p}"]) == (expected, expected + "Z"), (p, VALUES[row["id"]])


# Asia/Kolkata before 1900: tzdata has HMT (+05:53:20) and MMT (+05:21:10), java.util.TimeZone its raw
# offset +05:30 (no history before 1900), pyarrow's ORC reader the tzdata offsets.
KOLKATA = "Asia/Kolkata"
KOLKATA_VALUES = ("1850-03-01T12:00:00.5", "1899-12-31T20:00:00.25", "1900-01-01T00:00:00.123456789")


@pytest.fixture(scope="module")
def kolkata_run(java_harnesses: dict[str, JavaHarness], tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("orc-timestamps-kolkata")
    return java_write_and_read(java_harnesses["1.0"], KOLKATA, KOLKATA_VALUES, root)


def test_ltz_before_1900_in_kolkata_read_as_java(kolkata_run: Run) -> None:
    """Our LTZ shift takes Java's raw offset before 1900, not the tzdata offsets of the time."""
    assert_same_rows(
        project(kolkata_run.java, LTZ_COLUMNS), project(kolkata_run.ours, LTZ_COLUMNS), "LTZ in Kolkata"
    )


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="Java-written ORC TIMESTAMP before 1900 in Asia/Kolkata: pyarrow's ORC reader converts from the "
    "writer zone with tzdata's offsets of the time (HMT +05:53:20, MMT +05:21:10), Java with its raw offset "
    "+05:30; we read those wall clocks 23 min 20 s or 8 min 50 s off Java, uncorrected",
)
def test_timestamps_before_1900_in_kolkata_read_as_java(kolkata_run: Run) -> None:
    assert_same_rows(
        project(kolkata_run.java, TIMESTAMP_COLUMNS),
        project(kolkata_run.ours, TIMESTAMP_COLUMNS),
        "TIMESTAMP in Kolkata",
    )
