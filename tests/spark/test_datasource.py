"""The ``paimon_meta`` Spark data source: ``spark.read.format`` / ``df.write.format`` through a metastore
catalog, rows exact, buckets as Java, overwrite, pruning by partitions and file statistics, time travel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, LessThan

import paimon_meta
import spark_jobs
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import CommitOutcomeUnknownError
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.model.types import BIGINT
from paimon_meta.ops.audit import commit_history
from paimon_meta.ops.tags import create_tag
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.bucket import bucket_array
from spark_jobs.batch_write import commit_messages
from spark_jobs.datasource import PaimonDataSource, by_bucket
from spark_jobs.datasource.target import ReadAt
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal, spawn_service
from tests.spark.helpers import SCHEMA, read_rows, sort_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    with paimon_meta.connect(clean_db, str(tmp_path / "wh"), **FAST_LOCK) as cat:
        cat.create_database("db")
        yield cat


@pytest.fixture
def options(catalog: MetastoreCatalog, clean_db: str) -> dict[str, str]:
    """The data source options naming ``catalog``."""
    return {"metastore": clean_db, "warehouse": catalog.warehouse, **FAST_LOCK}


@pytest.fixture(scope="module")
def registered(spark: SparkSession) -> SparkSession:
    spark_jobs.register(spark)
    return spark


def frame(spark: SparkSession, start: int, n: int, partitions: int = 3) -> DataFrame:
    return spark.range(start, start + n, numPartitions=3).selectExpr(
        "id", f"concat('p', cast(id % {partitions} as string)) as p", "id * 0.5 as v"
    )


def expected(start: int, n: int, partitions: int = 3) -> list[dict[str, Any]]:
    return sort_rows([{"id": i, "p": f"p{i % partitions}", "v": i * 0.5} for i in range(start, start + n)])


def load(spark: SparkSession, options: dict[str, str], table: str = "db.t", **extra: str) -> DataFrame:
    return spark.read.format("paimon_meta").options(**options, **extra).load(table)


def save(
    df: DataFrame, options: dict[str, str], table: str = "db.t", mode: str = "append", **extra: str
) -> None:
    df.write.format("paimon_meta").options(**options, **extra).mode(mode).save(table)


def rows_of(df: DataFrame) -> list[dict[str, Any]]:
    return sort_rows([r.asDict() for r in df.collect()])


def scanned(df: DataFrame) -> tuple[int, list[dict[str, Any]]]:
    """The Spark partitions of ``df``'s scan (one per split read) and its rows, from one planning."""
    rdd = df.rdd
    return rdd.getNumPartitions(), sort_rows([r.asDict() for r in rdd.collect()])


def assert_java_buckets(table: FileStoreTable, buckets: int) -> None:
    """Every data file's rows sit in the bucket Java's bucket function gives their ``id``."""
    splits = table.new_read_builder().new_scan().plan().splits()
    assert splits
    for split in splits:
        ids = table.new_read_builder().new_read().to_arrow([split]).column("id")
        assert set(bucket_array([ids], [BIGINT(False)], buckets).tolist()) == {split.bucket}


def append_table(catalog: MetastoreCatalog, name: str = "db.t") -> FileStoreTable:
    return catalog.create_table(
        name, SCHEMA, partition_keys=["p"], options={"bucket": "3", "bucket-key": "id"}
    )


def test_append_round_trip_with_java_buckets(
    registered: SparkSession, catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    table = append_table(catalog)
    save(frame(registered, 0, 600), options)
    # by_bucket: the batch job's shuffle, one file per (partition, bucket)
    save(by_bucket(frame(registered, 600, 600), "db.t", options), options)
    df = load(registered, options)
    assert df.schema.simpleString() == "struct<id:bigint,p:string,v:double>"
    assert not df.schema["id"].nullable and df.schema["v"].nullable
    # one Spark partition per split: 3 partitions x 3 buckets
    assert scanned(df) == (9, expected(0, 1200))
    table = catalog.get_table("db.t")
    assert read_rows(table) == expected(0, 1200)
    assert_java_buckets(table, 3)
    snapshot = table.latest_snapshot()
    assert snapshot is not None and (snapshot.id, snapshot.commit_kind) == (2, CommitKind.APPEND)
    assert snapshot.commit_identifier == 2**63 - 1  # Java's batch identifier, one commit per write
    second = {
        f.file_name for f in table.new_read_builder().with_snapshot(2).new_scan().plan().splits()[0].files
    }
    first = {
        f.file_name for f in table.new_read_builder().with_snapshot(1).new_scan().plan().splits()[0].files
    }
    assert len(second - first) == 1  # the by_bucket write added one file to the bucket
    # both went through the metastore's commit path: recorded in the event log
    history = commit_history(catalog.engine, catalog.table_row("db.t").table_id)
    assert sorted((h["snapshot_id"], h["commit_kind"]) for h in history) == [(1, "APPEND"), (2, "APPEND")]


def test_primary_key_round_trip_upserts_and_deletes(
    registered: SparkSession, catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    catalog.create_table(
        "db.pk", SCHEMA, partition_keys=["p"], primary_keys=["id", "p"], options={"bucket": "2"}
    )
    with pytest.raises(Exception, match="needs every row of a bucket in one Spark task"):
        save(frame(registered, 0, 10), options, "db.pk")
    save(by_bucket(frame(registered, 0, 500), "db.pk", options), options, "db.pk")
    changes = registered.createDataFrame(
        [(1, "p1", 100.0, "+U"), (2, "p2", None, "-D"), (5000, "p0", 1.0, "+I")],
        "id long, p string, v double, _row_kind string",
    )
    save(by_bucket(changes, "db.pk", options), options, "db.pk")
    want = {(r["id"], r["p"]): r["v"] for r in expected(0, 500)}
    want[(1, "p1")] = 100.0
    del want[(2, "p2")]
    want[(5000, "p0")] = 1.0
    got = rows_of(load(registered, options, "db.pk"))
    assert {(r["id"], r["p"]): r["v"] for r in got} == want and len(got) == len(want)
    table = catalog.get_table("db.pk")
    assert read_rows(table) == got
    assert_java_buckets(table, 2)
    # two by_bucket outputs side by side: two tasks write each bucket; refused, nothing committed
    twice = by_bucket(frame(registered, 0, 90), "db.pk", options).union(
        by_bucket(frame(registered, 90, 90), "db.pk", options)
    )
    with pytest.raises(Exception, match="was written by 2 Spark tasks"):
        save(twice, options, "db.pk")
    latest = catalog.get_table("db.pk").latest_snapshot()
    assert latest is not None and latest.id == 2


def test_append_then_overwrite_dynamic_and_static(
    registered: SparkSession, catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    append_table(catalog)
    save(frame(registered, 0, 300), options)
    fresh = registered.createDataFrame([(10_001, "p1", 1.0), (10_002, "p1", 2.0)], SCHEMA.names)
    save(fresh, options, mode="overwrite")  # dynamic: only p1, present in the data, is replaced
    rows = rows_of(load(registered, options))
    assert Counter(r["p"] for r in rows) == {"p0": 100, "p1": 2, "p2": 100}
    assert sorted(r["id"] for r in rows if r["p"] == "p1") == [10_001, 10_002]
    table = catalog.get_table("db.t")
    snapshot = table.latest_snapshot()
    assert snapshot is not None and (snapshot.id, snapshot.commit_kind) == (2, CommitKind.OVERWRITE)
    # static: the named partition is replaced even by no rows
    save(fresh.limit(0), options, mode="overwrite", **{"overwrite-partition": "p=p0"})
    assert Counter(r["p"] for r in read_rows(catalog.get_table("db.t"))) == {"p1": 2, "p2": 100}
    with pytest.raises(Exception, match="overwrite names non-partition columns"):
        save(fresh, options, mode="overwrite", **{"overwrite-partition": "v=1"})


def test_filters_prune_partitions_and_files(
    registered: SparkSession, catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    append_table(catalog)
    # p follows the id range, so a filter on id excludes whole files by their statistics
    df = registered.range(0, 900, numPartitions=3).selectExpr(
        "id", "concat('p', cast(id div 300 as string)) as p", "id * 0.5 as v"
    )
    save(df, options)
    table = load(registered, options)
    splits, every = scanned(table)
    assert splits == 9 and len(every) == 900

    assert scanned(table.where("p = 'p1'")) == (3, [r for r in every if r["p"] == "p1"])
    in_list = table.where("p in ('p0', 'p2') and not (p = 'p2')")
    assert scanned(in_list) == (3, [r for r in every if r["p"] == "p0"])
    # p2's files hold ids 600..899 only: their statistics exclude them
    assert scanned(table.where("id >= 250 and id < 320")) == (6, [r for r in every if 250 <= r["id"] < 320])
    # a filter on a column without usable stats (double) reads everything; Spark filters the rows
    assert scanned(table.where("v < 10")) == (9, [r for r in every if r["v"] < 10])


def test_file_statistics_skip_files_within_a_split(
    catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    """The reader's planning without a Spark job: three appends, each a file per bucket; a filter on
    ``id`` keeps one file per split (files are counted, not only splits)."""
    table = catalog.create_table("db.u", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    for start in (0, 1000, 2000):
        wb = table.new_batch_write_builder()
        write = wb.new_write()
        write.write_arrow(pa.Table.from_pylist(expected(start, 100, 1), schema=SCHEMA))
        wb.new_commit().commit(write.prepare_commit())
        write.close()

    def planned(filters: list[Any]) -> tuple[int, int, list[Any]]:
        source = PaimonDataSource({**options, "path": "db.u"})
        reader = source.reader(source.schema())
        remaining = reader.pushFilters(filters)
        parts = reader.partitions()
        return len(parts), sum(len(p.split.files) for p in parts), remaining

    assert planned([])[:2] == (2, 6)
    id_filters = [GreaterThanOrEqual(("id",), 1000), LessThan(("id",), 1100)]
    splits, files, remaining = planned(id_filters)
    assert (splits, files) == (2, 2) and remaining == id_filters  # Spark still checks each row
    assert planned([EqualTo(("id",), 2050)])[:2] == (2, 2)
    assert planned([EqualTo(("id",), 99_999)])[:2] == (0, 0)  # no file may hold it: no split at all


def test_time_travel_projection_and_sql(
    registered: SparkSession, catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    append_table(catalog)
    assert scanned(load(registered, options)) == (1, [])  # no split: Spark's minimum, one empty partition
    save(frame(registered, 0, 30), options)
    create_tag(catalog, "db.t", "first")
    save(frame(registered, 30, 30), options)
    assert rows_of(load(registered, options, **{"snapshot-id": "1"})) == expected(0, 30)
    assert rows_of(load(registered, options, tag="first")) == expected(0, 30)

    projected = load(registered, options, columns="v,id")
    assert projected.columns == ["v", "id"]
    assert rows_of(projected) == sort_rows([{"v": r["v"], "id": r["id"]} for r in expected(0, 60)])
    subset = registered.read.format("paimon_meta").options(**options).schema("p string").load("db.t")
    assert sorted({r["p"] for r in subset.collect()}) == ["p0", "p1", "p2"]
    with pytest.raises(Exception, match="is bigint in the table, not string"):
        registered.read.format("paimon_meta").options(**options).schema("id string").load("db.t").collect()

    load(registered, options).createOrReplaceTempView("paimon_t")
    counts = registered.sql("select p, count(*) as n from paimon_t where id >= 15 group by p order by p")
    assert [(r["p"], r["n"]) for r in counts.collect()] == [("p0", 15), ("p1", 15), ("p2", 15)]


def test_through_the_commit_service(
    registered: SparkSession,
    clean_db: str,
    tmp_path: Path,
    *,
    service_processes: list[ServiceProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``service`` + ``token``: no database URL anywhere in the job; the commit goes to the control plane
    and is recorded under the token's principal."""
    warehouse = str(tmp_path / "swh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as cat:
        cat.create_database("db")
        token = make_principal(cat, "spark-source", [("admin", "db", None)])
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    remote = paimon_meta.connect_service(server.base, token=token)
    remote.create_table("db.s", SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "id"})
    monkeypatch.delenv("PAIMON_META_URL", raising=False)
    opts = {"service": server.base, "token": token}
    save(frame(registered, 0, 90), opts, "db.s")
    assert rows_of(load(registered, opts, "db.s").where("p = 'p2'")) == [
        r for r in expected(0, 90) if r["p"] == "p2"
    ]
    history = remote.commits("db.s")
    assert [(c["commitKind"], c["principal"]) for c in history] == [("APPEND", "spark-source")]
    remote.close()


def test_abort_keeps_a_landed_commit_and_unknown_outcomes_resolve(
    catalog: MetastoreCatalog, options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's driver-side steps without a Spark job. Spark calls ``abort`` after any failed
    ``commit``: files of a commit that landed stay; an unknown outcome is resolved by committing again."""
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from spark_jobs.datasource import writer as writer_module

    append_table(catalog)
    struct = StructType(
        [
            StructField("id", LongType(), False),
            StructField("p", StringType(), False),
            StructField("v", DoubleType()),
        ]
    )
    batch = pa.RecordBatch.from_pylist(expected(0, 30), schema=SCHEMA)
    real_commit = commit_messages
    calls: list[int] = []

    def lost_answer(*args: Any, **kwargs: Any) -> Any:  # the first commit lands, its answer is lost
        calls.append(1)
        outcome = real_commit(*args, **kwargs)
        if len(calls) == 1:
            raise CommitOutcomeUnknownError("injected: the answer was lost")
        return outcome

    monkeypatch.setattr(writer_module, "commit_messages", lost_answer)
    writer = PaimonDataSource({**options, "path": "db.t"}).writer(struct, False)
    message = writer.write(iter([batch]))
    writer.commit([message])
    assert len(calls) == 2  # committed again: deduplicated, one snapshot
    table = catalog.get_table("db.t")
    latest = table.latest_snapshot()
    assert latest is not None and latest.id == 1 and read_rows(table) == expected(0, 30)
    writer.abort([message])  # as Spark would after a failed commit: the landed files stay
    assert read_rows(catalog.get_table("db.t")) == expected(0, 30)

    other = PaimonDataSource({**options, "path": "db.t"}).writer(struct, False)
    uncommitted = other.write(iter([batch]))
    paths = _data_files(table)
    other.abort([uncommitted, None])  # a job whose other task failed: the written files go
    assert _data_files(table) < paths and read_rows(catalog.get_table("db.t")) == expected(0, 30)


def _data_files(table: FileStoreTable) -> set[str]:
    return {str(p) for p in Path(table.path).rglob("data-*")}


def test_a_tag_whose_snapshot_expired_still_reads(
    registered: SparkSession, catalog: MetastoreCatalog, options: dict[str, str]
) -> None:
    table = append_table(catalog)
    for start in (0, 10):
        wb = table.new_batch_write_builder()
        write = wb.new_write()
        write.write_arrow(pa.Table.from_pylist(expected(start, 10), schema=SCHEMA))
        wb.new_commit().commit(write.prepare_commit())
        write.close()
    create_tag(catalog, "db.t", "first", 1)
    tagged = PaimonDataSource({**options, "path": "db.t", "tag": "first"})
    reader = tagged.reader(tagged.schema())
    assert sum(p.split.row_count for p in reader.partitions()) == 10
    assert {p.at for p in reader.partitions()} == {ReadAt(snapshot_id=1)}
    table.file_io.delete(table.snapshot_manager.snapshot_path(1))  # expired; the tag keeps its files
    reader = tagged.reader(tagged.schema())
    assert {p.at for p in reader.partitions()} == {ReadAt(tag="first")}  # executors read the tag file
    assert rows_of(load(registered, options, tag="first")) == expected(0, 10)
