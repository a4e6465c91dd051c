"""paimon-rust (``pypaimon-rust`` 0.4.0, its own venv: ``tests/interop/rust_env.py``) as a read oracle.

:func:`rust_read_tables` reads many tables in one process (starting one costs about half a second): each
table directory is opened as paimon-rust opens a table without a catalog (``Table.from_resolved_schema``
with the newest ``schema/schema-<N>``), fully read from its latest snapshot, and handed back as an Arrow
IPC file, so the rows go through the same canonical values as ours (``tests/interop/canonical.py``). A
table paimon-rust fails on gets its error message instead; the others are still read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tests.fixtures.interop import run_pypaimon
from tests.interop.canonical import assert_same_rows, canonical_arrow, our_read

RUST_READ = r"""
import json, os, sys
import pyarrow as pa
import pyarrow.ipc as ipc
from pypaimon_rust.datafusion import Table

spec = json.load(sys.stdin)
out = []
for i, location in enumerate(spec["tables"]):
    try:
        schema_dir = os.path.join(location, "schema")
        latest = max(int(n.split("-", 1)[1]) for n in os.listdir(schema_dir) if n.startswith("schema-"))
        with open(os.path.join(schema_dir, f"schema-{latest}")) as f:
            table = Table.from_resolved_schema(
                location, f.read(), database="db", table=os.path.basename(location)
            )
        rb = table.new_read_builder()
        batches = rb.new_read().read(rb.new_scan().plan().splits())
        arrow = None
        if batches:
            data = pa.Table.from_batches(batches)
            arrow = os.path.join(spec["out"], f"{i}.arrow")
            with ipc.new_file(arrow, data.schema) as writer:
                writer.write_table(data)
        out.append({"table": location, "arrow": arrow})
    except Exception as e:
        out.append({"table": location, "error": f"{type(e).__name__}: {e}"})
print(json.dumps(out))
"""


@dataclass(frozen=True)
class RustRead:
    """What paimon-rust read of one table: its rows (None: no rows at all), or its error."""

    table: str
    data: pa.Table | None = None
    error: str | None = None


def rust_read_tables(python: Path, tables: Sequence[str], work: Path) -> list[RustRead]:
    """Read every table in one paimon-rust process, in order (Arrow files go to ``work``)."""
    work.mkdir(parents=True, exist_ok=True)
    out = run_pypaimon(RUST_READ, input_json={"tables": list(tables), "out": str(work)}, python=python)
    reads = []
    for entry in out:
        if "error" in entry:
            reads.append(RustRead(entry["table"], error=entry["error"]))
        elif entry["arrow"] is None:
            reads.append(RustRead(entry["table"]))
        else:
            source = pa.BufferReader(Path(entry["arrow"]).read_bytes())
            reads.append(RustRead(entry["table"], data=pa.ipc.open_file(source).read_all()))
    assert [r.table for r in reads] == list(tables)
    return reads


def assert_rust_reads_as_we_do(read: RustRead, path: str) -> None:
    """paimon-rust read the table without error, with our column names and exactly our rows."""
    assert read.error is None, f"paimon-rust cannot read {path}:\n{read.error}"
    _, fields, ours = our_read(path)
    theirs = [] if read.data is None else canonical_arrow(read.data)
    if read.data is not None:
        assert read.data.column_names == fields
    assert_same_rows(theirs, ours, f"paimon-rust reading {path}", who="paimon-rust")
