"""Python-side peers (paimon-rust, pypaimon 2.1.0) as read oracles, each in its own venv.

A peer's snippet reads many tables in one process (starting one costs a second or so) and hands every
table back as an Arrow IPC file, so that its rows go through the same canonical values as ours
(``tests/interop/canonical.py``). The snippet gets ``{"tables": [...], "out": dir}`` on stdin and prints
one JSON entry per table, in order: ``{"table", "arrow"}`` (``arrow`` None: no rows at all) or
``{"table", "error"}`` (a table the peer fails on; the others are still read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tests.fixtures.interop import run_pypaimon
from tests.interop.canonical import assert_same_rows, canonical_arrow, our_read


@dataclass(frozen=True)
class ArrowRead:
    """What a peer read of one table: its rows (None: no rows at all), or its error."""

    table: str
    data: pa.Table | None = None
    error: str | None = None


def read_tables_with(script: str, python: Path, tables: Sequence[str], work: Path) -> list[ArrowRead]:
    """Run a peer's read ``script`` once over every table, in order (Arrow files go to ``work``)."""
    work.mkdir(parents=True, exist_ok=True)
    out = run_pypaimon(script, input_json={"tables": list(tables), "out": str(work)}, python=python)
    reads = []
    for entry in out:
        if "error" in entry:
            reads.append(ArrowRead(entry["table"], error=entry["error"]))
        elif entry["arrow"] is None:
            reads.append(ArrowRead(entry["table"]))
        else:
            source = pa.BufferReader(Path(entry["arrow"]).read_bytes())
            reads.append(ArrowRead(entry["table"], data=pa.ipc.open_file(source).read_all()))
    assert [r.table for r in reads] == list(tables)
    return reads


def assert_reads_as_we_do(read: ArrowRead, path: str, who: str) -> None:
    """``who`` read the table without error, with our column names and exactly our rows."""
    assert read.error is None, f"{who} cannot read {path}:\n{read.error}"
    _, fields, ours = our_read(path)
    theirs = [] if read.data is None else canonical_arrow(read.data)
    if read.data is not None:
        assert read.data.column_names == fields
    assert_same_rows(theirs, ours, f"{who} reading {path}", who=who)
