"""paimon-rust (``pypaimon-rust`` 0.4.0, its own venv: ``tests/interop/rust_env.py``) as a read oracle.

:func:`rust_read_tables` reads many tables in one process (starting one costs about half a second): each
table directory is opened as paimon-rust opens a table without a catalog (``Table.from_resolved_schema``
with the newest ``schema/schema-<N>``), fully read from its latest snapshot, and handed back as an Arrow
IPC file, so the rows go through the same canonical values as ours (``tests/interop/canonical.py``). A
table paimon-rust fails on gets its error message instead; the others are still read
(``tests/interop/arrow_reader.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.interop.arrow_reader import ArrowRead, assert_reads_as_we_do, read_tables_with

RustRead = ArrowRead

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


def rust_read_tables(python: Path, tables: Sequence[str], work: Path) -> list[RustRead]:
    """Read every table in one paimon-rust process, in order (Arrow files go to ``work``)."""
    return read_tables_with(RUST_READ, python, tables, work)


def assert_rust_reads_as_we_do(read: RustRead, path: str) -> None:
    """paimon-rust read the table without error, with our column names and exactly our rows."""
    assert_reads_as_we_do(read, path, "paimon-rust")
