"""What every torture writer commits, as a pure function of (writer, identifier), so a restarted writer
re-commits byte-identical messages and the checker can compute the expected table without the writers.

Writer ``w`` commits identifiers ``0..K-1`` in order with commit user ``torture-w<w>``. Identifier ``i``
appends one data file named after ``(w, i)``; every identifier ``i`` with ``i % COMPACT_EVERY ==
COMPACT_EVERY - 1`` also compacts the writer's file of ``i - 1`` into a level-1 file, so such a commit
produces two snapshots (APPEND, then COMPACT) and a crash between them is part of the history. A writer
only ever compacts its own files, so no commit of the workload can conflict with another.
"""

from __future__ import annotations

import pyarrow as pa

from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import DataFileMeta
from paimon_meta.model.snapshot import CommitKind
from tests.commit.helpers import append_msg, compact_msg, data_file

TABLE = "torture.t"
BUCKETS = 2
PARTITIONS = 2
COMPACT_EVERY = 4

SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)
TABLE_OPTIONS = {
    "bucket": str(BUCKETS),
    # Takeovers make LockLostError retries common; the writer loop retries on top of these anyway.
    "commit.max-retries": "20",
    "commit.max-retry-wait": "500",
}


def commit_user(writer: int) -> str:
    return f"torture-w{writer}"


def file_name(writer: int, identifier: int, *, compacted: bool = False) -> str:
    suffix = "-c" if compacted else ""
    return f"data-torture-w{writer}-i{identifier}{suffix}.parquet"


def _place(writer: int, identifier: int) -> tuple[int, int]:
    """(partition, bucket) of a writer's file: fixed per identifier so the compaction finds it."""
    return (writer + identifier) % PARTITIONS, identifier % BUCKETS


def compacts(identifier: int) -> bool:
    return identifier % COMPACT_EVERY == COMPACT_EVERY - 1


def messages(writer: int, identifier: int) -> list[CommitMessage]:
    """The CommitMessages of one (writer, identifier): always the same bytes for the same arguments."""
    p, b = _place(writer, identifier)
    out = [append_msg(p, b, _file(writer, identifier), total_buckets=BUCKETS)]
    if compacts(identifier):
        prev = identifier - 1
        pp, pb = _place(writer, prev)
        before = _file(writer, prev)
        after = _file(writer, prev, compacted=True, level=1)
        out.append(compact_msg(pp, pb, [before], [after], total_buckets=BUCKETS))
    return out


def _file(writer: int, identifier: int, *, compacted: bool = False, level: int = 0) -> DataFileMeta:
    return data_file(
        rows=1 + identifier % 7,
        level=level,
        min_key=identifier,
        max_key=identifier,
        name=file_name(writer, identifier, compacted=compacted),
    )


def kinds(identifier: int) -> tuple[CommitKind, ...]:
    """The snapshot kinds one commit of ``identifier`` produces, in order."""
    return (CommitKind.APPEND, CommitKind.COMPACT) if compacts(identifier) else (CommitKind.APPEND,)


def expected_live_files(writer: int, committed: int) -> set[str]:
    """File names live once identifiers ``0..committed-1`` of ``writer`` are all committed."""
    live: set[str] = set()
    for i in range(committed):
        live.add(file_name(writer, i))
        if compacts(i):
            live.discard(file_name(writer, i - 1))
            live.add(file_name(writer, i - 1, compacted=True))
    return live
