"""``spark.readStream.format("paimon_meta")``: each appended snapshot's rows once, across a restart from
the checkpoint; compactions add nothing; ``scan.snapshot-id``; OVERWRITE as Java; expired snapshots and
primary-key tables are refused with typed errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import StructType

import spark_jobs
from paimon_meta.errors import UnsupportedError
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.compact import compact
from spark_jobs.datasource import PaimonDataSource
from spark_jobs.datasource.stream_reader import PaimonStreamReader, SnapshotsExpiredError
from spark_jobs.datasource.target import SourceOptions
from tests.spark.helpers import SCHEMA, append_table, pk_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from paimon_meta.table.table import FileStoreTable

pytestmark = pytest.mark.spark

Row = tuple[int, str, float]


@pytest.fixture(scope="module")
def registered(spark: SparkSession) -> SparkSession:
    spark_jobs.register(spark)
    return spark


def rows(start: int, n: int) -> list[Row]:
    return [(i, f"p{i % 2}", i * 0.5) for i in range(start, start + n)]


def append(table: FileStoreTable, batch: list[Row]) -> int:
    """Commit ``batch`` as one APPEND snapshot; its id."""
    builder = table.new_batch_write_builder()
    write = builder.new_write()
    write.write_arrow(pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in batch], schema=SCHEMA))
    outcome = builder.new_commit().commit(write.prepare_commit())
    write.close()
    return outcome.snapshot_ids[-1]


class Collected:
    """A ``foreachBatch`` sink keeping each micro-batch's rows (runs in this process)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[Row]]] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.batches.append((batch_id, [(r.id, r.p, r.v) for r in df.collect()]))

    @property
    def rows(self) -> Counter[Row]:
        return Counter(r for _, batch in self.batches for r in batch)


def start(
    spark: SparkSession,
    table: FileStoreTable,
    sink: Collected,
    checkpoint: Path,
    *,
    available_now: bool = False,
    **options: str,
) -> StreamingQuery:
    stream = spark.readStream.format("paimon_meta").options(**options).load(table.path)
    writer = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def test_each_append_is_read_once_across_a_restart(registered: SparkSession, tmp_path: Path) -> None:
    table = append_table(str(tmp_path / "wh"), "db.t", buckets=2)
    append(table, rows(0, 10))  # before the query starts: not read (the stream starts at the latest)
    sink, checkpoint = Collected(), tmp_path / "ckpt"

    query = start(registered, table, sink, checkpoint)
    try:
        query.processAllAvailable()  # the start offset (snapshot 1) is taken
        append(table, rows(10, 10))  # snapshot 2
        query.processAllAvailable()
    finally:
        query.stop()
    assert sink.rows == Counter(rows(10, 10))

    append(table, rows(20, 10))  # snapshot 3, while the query is down
    assert compact(table).snapshot_ids == (4,)  # rewrites every row: a stream must not see them again
    assert table.snapshot(4).commit_kind is CommitKind.COMPACT
    append(table, rows(30, 5))  # snapshot 5

    restarted = Collected()
    query = start(registered, table, restarted, checkpoint, available_now=True)
    query.awaitTermination(300)
    assert restarted.rows == Counter(rows(20, 10) + rows(30, 5))  # each once, nothing before the restart
    assert min(b for b, _ in restarted.batches) > max(b for b, _ in sink.batches)  # resumed, not restarted


def test_start_overwrites_expired_snapshots_and_primary_key_tables(tmp_path: Path) -> None:
    table = append_table(str(tmp_path / "wh"), "db.t", buckets=2)
    for i in range(3):
        append(table, rows(i * 10, 10))
    source = PaimonDataSource({"path": table.path})
    schema = source.schema()
    reader = source.streamReader(schema)
    assert isinstance(reader, PaimonStreamReader)
    assert reader.initialOffset() == {"snapshot": 3}
    # one per (snapshot, partition p0/p1, bucket 0/1)
    assert len(reader.partitions({"snapshot": 0}, {"snapshot": 3})) == 3 * 2 * 2
    Path(table.snapshot_manager.snapshot_path(2)).unlink()  # as expiration would
    with pytest.raises(SnapshotsExpiredError, match=r"but 2 no longer exist") as e:
        reader.partitions({"snapshot": 0}, {"snapshot": 3})
    assert e.value.fields["snapshot_ids"] == [2]

    # scan.snapshot-id=3: from snapshot 3 inclusive (Java's streaming from-snapshot), not its full state
    pinned = PaimonStreamReader(SourceOptions.parse({"path": table.path, "scan.snapshot-id": "3"}), schema)
    assert pinned.initialOffset() == {"snapshot": 2}
    end = pinned.latestOffset(pinned.initialOffset(), ReadAllAvailable())
    assert end == {"snapshot": 3}
    read = [
        tuple(r.values())
        for p in pinned.partitions({"snapshot": 2}, end)
        for b in pinned.read(p)
        for r in b.to_pylist()
    ]
    assert Counter(read) == Counter(rows(20, 10))

    # OVERWRITE snapshots: skipped unless streaming-read-overwrite (Java's option, default false)
    builder = table.new_batch_write_builder().overwrite()
    write = builder.new_write()
    write.write_arrow(pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows(40, 4)], schema=SCHEMA))
    assert builder.new_commit().commit(write.prepare_commit()).snapshot_ids == (4,)
    write.close()
    assert table.snapshot(4).commit_kind is CommitKind.OVERWRITE
    assert reader.partitions({"snapshot": 3}, {"snapshot": 4}) == []
    opts = SourceOptions.parse({"path": table.path, "streaming-read-overwrite": "true"})
    overwrites = PaimonStreamReader(opts, schema)
    read = [
        tuple(r.values())
        for p in overwrites.partitions({"snapshot": 3}, {"snapshot": 4})
        for b in overwrites.read(p)
        for r in b.to_pylist()
    ]
    assert Counter(read) == Counter(rows(40, 4))

    pk = pk_table(str(tmp_path / "wh"))
    with pytest.raises(UnsupportedError, match="primary-key table"):
        PaimonDataSource({"path": pk.path}).streamReader(StructType())


@pytest.mark.postgres
def test_through_a_metastore_catalog_the_reader_keeps_one_open(clean_db: str, tmp_path: Path) -> None:
    """Spark polls ``latestOffset`` while idle: the reader opens the catalog once (closed by ``stop``),
    and pickles without it (Spark ships the reader to the executors)."""
    import pickle

    import paimon_meta

    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse) as catalog:
        catalog.create_database("db")
        catalog.create_table(
            "db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "id"}
        )
        table = catalog.get_table("db.t")
        options = {"path": "db.t", "metastore": clean_db, "warehouse": warehouse}
        source = PaimonDataSource(dict(options))
        reader = source.streamReader(source.schema())
        assert isinstance(reader, PaimonStreamReader) and reader._opened is None
        start = reader.initialOffset()
        assert start == {"snapshot": 0}
        opened = reader._opened
        assert opened is not None
        append(table, rows(0, 10))
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"snapshot": 1} and reader._opened is opened  # the same catalog, no reopening
        shipped = pickle.loads(pickle.dumps(reader))
        assert shipped._opened is None
        read = [
            tuple(r.values())
            for p in reader.partitions(start, end)
            for b in shipped.read(p)
            for r in b.to_pylist()
        ]
        assert Counter(read) == Counter(rows(0, 10))
        reader.stop()
        assert reader._opened is None
