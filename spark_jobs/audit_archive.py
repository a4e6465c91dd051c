"""The audit views' archive twins in Spark SQL: ``paimon_commit_history_archive``,
``paimon_commit_conflicts_archive`` and ``paimon_commit_retries_archive`` over a catalog's
``system.commit_log`` (``paimon_meta.archive``), with the columns and values of ``paimon_commit_history``,
``paimon_commit_conflicts`` and ``paimon_commit_retries`` over the live log (docs/AUDIT.md).

:func:`register_archive_views` reads the archive through this project's reader (``spark_jobs.read``) into
the temp view ``paimon_commit_events_archive`` and defines the twins over it. With Paimon's own Spark
catalog the same SQL runs over ``<catalog>.system.commit_log``: pass that name as ``events``
(:data:`TWIN_SQL` is a template of it). Times are UTC (the archive's ``created_at`` is a ``TIMESTAMP``
holding UTC wall-clock time; set ``spark.sql.session.timeZone`` to UTC when comparing with ``now()``).

Run by hand::

    python -m spark_jobs.audit_archive --metastore URL --catalog NAME \\
        --query "SELECT outcome, count(*) FROM paimon_commit_history_archive GROUP BY outcome"
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from paimon_meta.table.table import FileStoreTable
from spark_jobs.common import IoOptions, connect_catalog, parse_options
from spark_jobs.read import to_dataframe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The temp view of the archived events the twins read.
EVENTS_VIEW = "paimon_commit_events_archive"
#: The archive table in every catalog (``paimon_meta.archive.table.IDENTIFIER``).
ARCHIVE_TABLE = "system.commit_log"


#: Each twin's SELECT over ``{events}`` (the archived events): migration 0018's ``paimon_commit_history``
#: and 0001's ``paimon_commit_conflicts``/``paimon_commit_retries`` in Spark SQL (``payload`` is JSON text:
#: ``->>`` is ``get_json_object``; ``array_agg(... ORDER BY event_id DESC)[1]`` is ``max_by``).
TWIN_SQL: dict[str, str] = {
    "paimon_commit_history_archive": """
        SELECT
            e.commit_id,
            min(e.table_id) AS table_id,
            min(e.table_identifier) AS table_identifier,
            min(e.commit_user) AS commit_user,
            min(e.commit_identifier) AS commit_identifier,
            min(e.commit_kind) AS commit_kind,
            CASE
                WHEN bool_or(e.event_type = 'snapshot_published') THEN 'published'
                WHEN bool_or(e.event_type = 'external') THEN 'external'
                WHEN bool_or(e.event_type = 'recovered') THEN 'recovered'
                WHEN bool_or(e.event_type = 'failed') THEN 'failed'
                WHEN bool_or(e.event_type = 'aborted') THEN 'aborted'
                ELSE 'pending'
            END AS outcome,
            max(e.snapshot_id) FILTER (
                WHERE e.event_type IN ('snapshot_published', 'external', 'recovered')
            ) AS snapshot_id,
            max(e.attempt) AS attempts,
            count(*) FILTER (WHERE e.event_type = 'retried') AS retries,
            count(*) FILTER (
                WHERE e.event_type = 'conflict_checked' AND get_json_object(e.payload, '$.conflict') = 'true'
            ) AS conflicts,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'prepared') AS prepare_ms,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'conflict_checked') AS conflict_check_ms,
            sum(e.duration_ms) FILTER (WHERE e.event_type = 'snapshot_published') AS publish_ms,
            sum(CAST(get_json_object(e.payload, '$.wait_ms') AS DOUBLE)) FILTER (
                WHERE e.event_type = 'retried'
            ) AS retry_wait_ms,
            max_by(get_json_object(e.payload, '$.reason'), e.event_id) FILTER (
                WHERE e.event_type IN ('failed', 'aborted', 'recovered')
            ) AS final_reason,
            min(e.created_at) AS first_event_at,
            max(e.created_at) AS last_event_at,
            CAST(
                unix_micros(CAST(max(e.created_at) AS TIMESTAMP))
                - unix_micros(CAST(min(e.created_at) AS TIMESTAMP)) AS DOUBLE
            ) / 1000 AS elapsed_ms,
            count(*) AS event_count,
            min_by(e.principal, e.event_id) FILTER (
                WHERE e.event_type = 'prepared' AND e.principal IS NOT NULL
            ) AS principal
        FROM {events} e
        GROUP BY e.commit_id
    """,
    "paimon_commit_conflicts_archive": """
        SELECT
            e.event_id, e.commit_id, e.table_id, e.table_identifier, e.commit_user, e.commit_identifier,
            e.commit_kind, e.attempt,
            CAST(get_json_object(e.payload, '$.base_snapshot_id') AS BIGINT) AS base_snapshot_id,
            get_json_object(e.payload, '$.reason') AS reason,
            e.payload AS details,
            e.created_at
        FROM {events} e
        WHERE e.event_type = 'conflict_checked' AND get_json_object(e.payload, '$.conflict') = 'true'
    """,
    "paimon_commit_retries_archive": """
        SELECT
            e.event_id, e.commit_id, e.table_id, e.table_identifier, e.commit_user, e.commit_identifier,
            e.commit_kind, e.attempt,
            get_json_object(e.payload, '$.reason') AS reason,
            CAST(get_json_object(e.payload, '$.wait_ms') AS DOUBLE) AS wait_ms,
            e.created_at
        FROM {events} e
        WHERE e.event_type = 'retried'
    """,
}


def register_twins(spark: SparkSession, events: str = EVENTS_VIEW) -> list[str]:
    """Define the twins as temp views over ``events`` (a view or table of archived events); their names."""
    for name, sql in TWIN_SQL.items():
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql.format(events=events)}")
    return list(TWIN_SQL)


def register_archive_views(
    spark: SparkSession, archive: FileStoreTable, *, io_options: IoOptions | None = None
) -> list[str]:
    """Read ``archive`` (a catalog's ``system.commit_log``) into :data:`EVENTS_VIEW` and define the twins
    over it; the names of the views defined."""
    to_dataframe(spark, archive, io_options=io_options).createOrReplaceTempView(EVENTS_VIEW)
    return [EVENTS_VIEW, *register_twins(spark)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_jobs.audit_archive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--metastore", help="the metastore URL (default $PAIMON_META_URL)")
    parser.add_argument("--catalog", required=True, help="the catalog whose archive is read")
    parser.add_argument("--option", action="append", help="catalog option key=value (repeatable)")
    parser.add_argument("--query", required=True, help="Spark SQL over the twins, printed with show()")
    args = parser.parse_args(argv)
    from spark_jobs.session import build_session

    catalog = connect_catalog(args.metastore, None, parse_options(args.option), catalog=args.catalog)
    try:
        spark = build_session("paimon_meta audit archive")
        register_archive_views(spark, catalog.get_table(ARCHIVE_TABLE), io_options=catalog.file_io_options)
        spark.sql(args.query).show(truncate=False)
    finally:
        catalog.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
