"""The archive table of a catalog: ``system.commit_log`` in the catalog's own warehouse.

One row per archived event, with every column of ``paimon_commit_events`` (migrations 0001, 0003, 0009)
in Paimon types, and ``archive_partition`` (the event log partition it came from) as the table's
partition key. Choices, made for the readers that must read it (pypaimon 2.1.0, paimon-rust 0.4.0, Java
0.9/1.0 and Spark):

* an append table (no primary key) with ``bucket = -1`` (unaware: every reader above reads it; there is
  no key to hash, and ``bucket-key`` would make Java 0.9's writers, not readers, matter) in Parquet;
* ``created_at`` as ``TIMESTAMP(6)`` holding **UTC** wall-clock time (Postgres' ``timestamptz`` converted
  to UTC, the zone dropped): ``TIMESTAMP_LTZ`` is read by each engine in its session's zone (Spark's
  ``spark.sql.session.timeZone``, Java's ``table.local-time-zone``), a zone-less UTC value reads the same
  everywhere; compare it with ``now() AT TIME ZONE 'UTC'``, not ``now()``;
* ``payload`` as the JSON text of the JSONB column (keys sorted), ``commit_id`` as the UUID's text,
  ``messages`` as the serialized CommitMessages' bytes, untouched (``messages_version`` says how to read
  them, ``payload.messages_codec`` whether they are zstd-compressed).

Invariant: the columns are those of ``paimon_commit_events`` (:data:`EVENT_COLUMNS`); a row the event log
hands over with a column this table does not have is refused (:func:`to_arrow`), never silently cut.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paimon_meta.errors import ValidationError

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.table.table import FileStoreTable

#: The archive's database and table in every catalog (``system`` is not reserved by Paimon, whose system
#: database is ``sys``, nor by our identifier rules).
DATABASE = "system"
TABLE = "commit_log"
IDENTIFIER = f"{DATABASE}.{TABLE}"
#: The archive table's partition key: the name of the event log partition a row came from.
PARTITION_KEY = "archive_partition"

#: Every column of ``paimon_commit_events``, in the log's order, as Arrow (nullability as in Postgres).
EVENT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("event_id", pa.int64(), nullable=False),
    pa.field("txid", pa.int64(), nullable=False),
    pa.field("commit_id", pa.string(), nullable=False),
    pa.field("table_id", pa.int64(), nullable=False),
    pa.field("table_identifier", pa.string(), nullable=False),
    pa.field("event_type", pa.string(), nullable=False),
    pa.field("attempt", pa.int32(), nullable=False),
    pa.field("commit_user", pa.string(), nullable=False),
    pa.field("commit_identifier", pa.int64(), nullable=False),
    pa.field("commit_kind", pa.string(), nullable=False),
    pa.field("snapshot_id", pa.int64()),
    pa.field("payload", pa.string(), nullable=False),
    pa.field("messages", pa.binary()),
    pa.field("messages_version", pa.int32()),
    pa.field("created_at", pa.timestamp("us"), nullable=False),
    pa.field("duration_ms", pa.float64()),
    pa.field("principal", pa.string()),
    pa.field("timeline", pa.int32(), nullable=False),
    pa.field("branch", pa.string(), nullable=False),
)
EVENT_COLUMN_NAMES = tuple(f.name for f in EVENT_COLUMNS)
SCHEMA = pa.schema([*EVENT_COLUMNS, pa.field(PARTITION_KEY, pa.string(), nullable=False)])

OPTIONS: Mapping[str, str] = {
    "bucket": "-1",
    "file.format": "parquet",
}


def ensure_archive_table(catalog: MetastoreCatalog) -> FileStoreTable:
    """The catalog's ``system.commit_log``, created (with its database) if missing.

    Raises:
        ValidationError: a ``system.commit_log`` exists that is not this archive (other columns, a primary
            key or another partition key): nothing is written into it.
    """
    catalog.create_database(DATABASE, ignore_if_exists=True)
    table = catalog.create_table(
        IDENTIFIER, SCHEMA, partition_keys=[PARTITION_KEY], options=OPTIONS, ignore_if_exists=True
    )
    names = [f.name for f in table.fields]
    if (
        names[: len(SCHEMA.names)] != SCHEMA.names
        or table.primary_keys
        or table.partition_keys != [PARTITION_KEY]
    ):
        raise ValidationError(
            f"{IDENTIFIER} exists but is not the commit log's archive (columns {names}, primary keys "
            f"{table.primary_keys}, partition keys {table.partition_keys}): rename or drop it",
            identifier=IDENTIFIER,
        )
    return table


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValidationError(f"created_at {value!r} has no time zone: the event log stores timestamptz")
    return value.astimezone(UTC).replace(tzinfo=None)


def _payload(value: Any) -> str:
    if isinstance(value, str):
        return value  # already JSON text
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _commit_id(value: Any) -> str:
    return str(value) if isinstance(value, uuid.UUID) else str(uuid.UUID(str(value)))


def to_arrow(rows: Sequence[Mapping[str, Any]], partition: str) -> pa.Table:
    """Event rows (every column of ``paimon_commit_events``) as archive rows of ``partition``.

    Raises:
        ValidationError: a row lacks a column of the log or has one the archive does not keep.
    """
    columns: dict[str, list[Any]] = {name: [] for name in EVENT_COLUMN_NAMES}
    expected = set(EVENT_COLUMN_NAMES)
    for row in rows:
        keys = set(row.keys())
        if keys != expected:
            raise ValidationError(
                f"an event row of partition {partition} has columns {sorted(keys ^ expected)} the archive "
                f"does not match (missing or extra): archiving it would lose data",
                partition=partition,
                event_id=row.get("event_id"),
            )
        for name in EVENT_COLUMN_NAMES:
            value = row[name]
            if name == "created_at":
                value = _utc(value)
            elif name == "payload":
                value = _payload(value)
            elif name == "commit_id":
                value = _commit_id(value)
            elif name == "messages" and value is not None:
                value = bytes(value)
            columns[name].append(value)
    arrays = [pa.array(columns[f.name], type=f.type) for f in EVENT_COLUMNS]
    arrays.append(pa.array([partition] * len(rows), type=pa.string()))
    return pa.Table.from_arrays(arrays, schema=SCHEMA)
