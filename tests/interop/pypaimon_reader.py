"""pypaimon 2.1.0 (its own venv: ``tests/interop/pypaimon_env.py``) as a read oracle.

:func:`pypaimon_read_tables` reads many tables in one process: each table directory is opened as pypaimon
opens a table without a catalog (``FileStoreTable.from_path``: the newest schema file), fully read from its
latest snapshot with ``new_read_builder()``, and handed back as an Arrow IPC file, so the rows go through
the same canonical values as ours (``tests/interop/arrow_reader.py``, ``tests/interop/canonical.py``). A
table pypaimon fails on gets its error message instead; the others are still read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.interop.arrow_reader import ArrowRead, assert_reads_as_we_do, read_tables_with

PYPAIMON_READ = r"""
import json, os, sys
import pyarrow.ipc as ipc
from pypaimon.table.file_store_table import FileStoreTable

spec = json.load(sys.stdin)
out = []
for i, location in enumerate(spec["tables"]):
    try:
        rb = FileStoreTable.from_path(location).new_read_builder()
        data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        arrow = None
        if data is not None:
            arrow = os.path.join(spec["out"], f"{i}.arrow")
            with ipc.new_file(arrow, data.schema) as writer:
                writer.write_table(data)
        out.append({"table": location, "arrow": arrow})
    except Exception as e:
        out.append({"table": location, "error": f"{type(e).__name__}: {e}"})
print(json.dumps(out))
"""


def pypaimon_read_tables(python: Path, tables: Sequence[str], work: Path) -> list[ArrowRead]:
    """Read every table in one pypaimon process, in order (Arrow files go to ``work``)."""
    return read_tables_with(PYPAIMON_READ, python, tables, work)


def assert_pypaimon_reads_as_we_do(read: ArrowRead, path: str) -> None:
    """pypaimon read the table without error, with our column names and exactly our rows."""
    assert_reads_as_we_do(read, path, "pypaimon 2.1.0")
