"""Which table options change what a read returns, and which of those paimon_meta refuses.

Every key of Java's ``CoreOptions`` (0.8 to 2.x, removed keys included) and the engine options that share
its read-affecting prefixes are classified here, once:

* ``IMPLEMENTED``: a read (or write) honours it as Java does, or maintenance acts on it as Java's
  compaction does (the compaction triggers: they change when files are merged, never what a read returns).
* ``NO_READ_EFFECT``: a batch read of a snapshot returns the same rows whatever its value (write buffers,
  compaction triggers, retention, streaming, engine parallelism, indexes used only to skip files, ...).
* ``REFUSED``: it changes what a read returns and is not implemented: opening the table for a scan, a
  read or a write raises :class:`~paimon_meta.errors.UnsupportedError` naming the key, unless its value
  is one that reads as Java's default (``harmless``, e.g. ``false``).
* ``WRITE_REFUSED``: it does not change reads but changes what Java writes (bucket function, row kind
  column, record expiry in compaction, ...), which our writer does not do: refused for writes only.
* ``MERGE_ENGINE``: ``merge-engine``, ``ignore-delete``, ``partial-update.*``, ``aggregation.*`` and the
  per-field options of partial-update and of the aggregate functions (``fields.<f>.aggregate-function``,
  ``sequence-group``, ``ignore-retract``, ...): they matter only under those merge engines, whose read
  path accepts or refuses them (``paimon_meta.table.mergetree.merge_engine``), not here.

Unknown keys: Java tolerates keys it does not know, and so do we, except under the prefixes whose
options select rows or merge them (``scan.``, ``fields.``, ``sequence.``, ``merge-engine``): an unknown
key there is most likely an option of a newer Java that changes reads, so it is refused rather than
ignored. ``fields.<name>.<suffix>`` keys are classified by their suffix.

A table that cannot be read correctly is not written either: compaction and our writers read and merge
the same way, and a writer that cannot read back what it wrote is of no use.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from paimon_meta.errors import UnsupportedError


class Kind(enum.Enum):
    IMPLEMENTED = "implemented"
    NO_READ_EFFECT = "no effect on reads"
    REFUSED = "refused"
    WRITE_REFUSED = "refused for writes"
    MERGE_ENGINE = "handled by the merge engines"


@dataclass(frozen=True, slots=True)
class Rule:
    """How one option key is treated. ``harmless``: values (trimmed, lower-case) that read as Java's
    default, accepted even for a refused key; empty = any value is refused."""

    kind: Kind
    reason: str
    harmless: frozenset[str] = frozenset()

    def refuses(self, value: str, *, for_write: bool) -> bool:
        if self.kind is Kind.REFUSED or (for_write and self.kind is Kind.WRITE_REFUSED):
            return value.strip().lower() not in self.harmless
        return False


_FALSE = frozenset({"false"})

BRANCH = "branch"  # CoreOptions.BRANCH
TABLE_TYPE = "type"  # CoreOptions.TYPE: which kind of table (TableType), "table" when unset
TABLE_TYPE_DEFAULT = "table"
MAIN_BRANCH = "main"  # BranchManager.DEFAULT_MAIN_BRANCH
SCAN_FALLBACK_BRANCH = "scan.fallback-branch"
# Time travel of a batch read by option (Java's TimeTravelUtil; paimon_meta.table.time_travel)
SCAN_SNAPSHOT_ID = "scan.snapshot-id"
SCAN_TAG_NAME = "scan.tag-name"
SCAN_TIMESTAMP_MILLIS = "scan.timestamp-millis"
SCAN_MODE = "scan.mode"

#: Prefixes under which an unknown key is refused (see the module docstring).
READ_AFFECTING_PREFIXES = ("scan.", "fields.", "sequence.", "merge-engine")


def _rules(
    kind: Kind, reason: str, keys: Iterable[str], harmless: frozenset[str] = frozenset()
) -> dict[str, Rule]:
    rule = Rule(kind, reason, harmless)
    return {key: rule for key in keys}


def _refused(reason: str, keys: Iterable[str], harmless: frozenset[str] = frozenset()) -> dict[str, Rule]:
    return _rules(Kind.REFUSED, reason, keys, harmless)


def _inert(reason: str, keys: Iterable[str]) -> dict[str, Rule]:
    return _rules(Kind.NO_READ_EFFECT, reason, keys)


OPTION_RULES: dict[str, Rule] = {
    # ---- implemented ------------------------------------------------------------------------------
    **_rules(
        Kind.IMPLEMENTED,
        "the read honours it",
        (
            "bucket",  # -2: only real buckets are read (postpone files are invisible), as Java's batch scan
            "file.format",  # each file is read by its extension
            "manifest.format",
            "partition.default-name",
            "partition.legacy-name",
            "data-file.path-directory",
            "data-file.thin-mode",  # keys are read from the value columns either way
            # ORC TIMESTAMP_LTZ of the Java writer in a non-UTC zone read as the writer's instants when true
            # (paimon_meta.serde.orc_timestamps); our files hold the instants, as Java writes them when false
            "orc.timestamp-ltz.legacy.type",
            "file.suffix.include.compression",
            "deletion-vectors.enabled",  # vectors applied; level-0 files skipped
            "deletion-vectors.merge-on-read",
            "deletion-vectors.bitmap64",  # both vector formats are read
            "sequence.field",
            "sequence.field.sort-order",
            "scan.manifest.parallelism",
            "dynamic-partition-overwrite",
            "add-column-before-partition",
            "path",
            SCAN_FALLBACK_BRANCH,  # partitions missing from the branch read come from this branch
            # reads through connect_service apply the catalog's row filters and column masks (its
            # /auth answer); a table opened by path or through the metastore is an operator's read
            # (paimon_meta.table.read.query_auth)
            "query-auth.enabled",
            # a batch read reads the snapshot they select (paimon_meta.table.time_travel)
            SCAN_SNAPSHOT_ID,
            SCAN_TAG_NAME,
            SCAN_TIMESTAMP_MILLIS,
            # a table opened on a branch carries branch=<name>, as Java's branch tables: a read checks
            # that it names the branch read (FileStoreTable), writes refuse any but main (check_main_branch)
            BRANCH,
        ),
    ),
    # ---- acted on by maintenance's compaction (the merged rows are the same whatever their values) --
    **_rules(
        Kind.IMPLEMENTED,
        "maintenance compacts by it as Java's compaction does (paimon_meta.table.mergetree.universal: the "
        "universal pick with its early full compaction, off-peak hours and full-compaction.delta-commits; "
        "append tables by compaction.min.file-num)",
        (
            "num-sorted-run.compaction-trigger",
            "compaction.max-size-amplification-percent",
            "compaction.size-ratio",
            "compaction.offpeak.start.hour",
            "compaction.offpeak.end.hour",
            "compaction.offpeak-ratio",
            "compaction.optimization-interval",
            "compaction.total-size-threshold",
            "compaction.incremental-size-threshold",
            "full-compaction.delta-commits",
            "compaction.min.file-num",
        ),
    ),
    # ---- refused: they select other rows, other snapshots or another table ------------------------
    **_refused(
        "selects the snapshot or rows a batch read returns (time travel by this option and incremental "
        f"reads are not implemented; use {SCAN_SNAPSHOT_ID}, {SCAN_TAG_NAME}, {SCAN_TIMESTAMP_MILLIS} or "
        "ReadBuilder.with_snapshot/with_tag)",
        (
            "scan.timestamp",
            "scan.watermark",
            "scan.file-creation-time-millis",
            "scan.creation-time-millis",
            "scan.version",
            "scan.bucket",
            "incremental-between",
            "incremental-between-timestamp",
            "incremental-to-auto-tag",
            "incremental-between-tag-to-snapshot",
        ),
    ),
    **_refused(
        "a batch read in this scan mode returns other rows than the latest snapshot",
        ("scan.mode",),
        frozenset({"default", "latest", "latest-full", "full"}),
    ),
    **_refused(
        "internal scan mode that changes what a batch scan plans", ("batch-scan-mode",), frozenset({"none"})
    ),
    **_refused(
        "chain tables read snapshot and delta branches together",
        ("scan.fallback-snapshot-branch", "scan.fallback-delta-branch", "scan.primary-branch"),
    ),
    **_refused(
        "only Paimon tables are read (format, object, lance and iceberg tables are not)",
        ("type",),
        frozenset({"table", "materialized-table"}),
    ),
    **_refused("chain tables merge snapshot and delta branches on read", ("chain-table.enabled",), _FALSE),
    **_refused(
        "tables with data-evolution.enabled stitch column subsets of files by row id",
        ("data-evolution.enabled",),
        _FALSE,
    ),
    **_refused("index files are looked up in the data directories", ("index-file-in-data-file-dir",), _FALSE),
    **_refused(
        "merge order by snapshot id instead of sequence numbers", ("sequence.snapshot-ordering",), _FALSE
    ),
    **_refused("postpone-bucket rows are merged into batch reads", ("postpone.merge-on-read",), _FALSE),
    **_refused(
        "key-value reads return the _SEQUENCE_NUMBER column", ("key-value.sequence_number.enabled",), _FALSE
    ),
    **_refused("primary keys with nulls merge with null-safe equality", ("primary-key.nullable",), _FALSE),
    **_refused(
        "primary-key files sorted by clustering columns instead of the key",
        ("pk-clustering-override",),
        _FALSE,
    ),
    # ---- refused for writes: the read is right, but Java writes differently ---------------------------
    **_rules(
        Kind.WRITE_REFUSED,
        "rows are assigned to buckets by another function",
        ("bucket-function.type",),
        frozenset({"default"}),
    ),
    **_rules(Kind.WRITE_REFUSED, "the row kind of written rows comes from a column", ("rowkind.field",)),
    **_rules(
        Kind.WRITE_REFUSED, "update-before rows are dropped on write", ("ignore-update-before",), _FALSE
    ),
    **_rules(
        Kind.WRITE_REFUSED,
        "compaction drops expired records",
        ("record-level.expire-time", "record-level.time-field"),
    ),
    **_rules(Kind.WRITE_REFUSED, "inserts into an append table upsert by this key", ("upsert-key",)),
    **_rules(
        Kind.WRITE_REFUSED,
        "the committer aborts on other users' compactions after this snapshot",
        ("commit.strict-mode.last-safe-snapshot",),
    ),
    **_rules(
        Kind.WRITE_REFUSED,
        "Java writes Iceberg metadata after every commit",
        ("metadata.iceberg-compatible",),
        _FALSE,
    ),
    # ---- handled by the merge engines -------------------------------------------------------------------
    **_rules(
        Kind.MERGE_ENGINE,
        "handled by the merge engines",
        (
            "merge-engine",
            "ignore-delete",
            "first-row.ignore-delete",
            "deduplicate.ignore-delete",
            "partial-update.ignore-delete",
            "fields.default-aggregate-function",
            "aggregation.remove-record-on-delete",
        ),
    ),
    # ---- no effect on what a batch read returns -------------------------------------------------------
    **_inert(
        "write layout, file sizes, formats and compression: files record what they are",
        (
            "bucket-key",
            "bucket-append-ordered",
            "data-file.prefix",
            "data-file.external-paths",
            "data-file.external-paths.strategy",
            "data-file.external-paths.specific-fs",
            "data-file.external-paths.weights",
            "changelog-file.prefix",
            "changelog-file.format",
            "changelog-file.compression",
            "changelog-file.stats-mode",
            "file.compression",
            "file.compression.per.level",
            "file.compression.zstd-level",
            "file.format.per.level",
            "file.block-size",
            "manifest.compression",
            "manifest.target-file-size",
            "manifest.full-compaction-threshold-size",
            "manifest.merge-min-count",
            "manifest.merge-optimize.enabled",
            "manifest.delete-file-drop-stats",
            "manifest-sort.enabled",
            "manifest-sort.partition-field",
            "manifest-sort.max-rewrite-size",
            "target-file-size",
            "target-file-row-num",
            "metadata.stats-mode",
            "metadata.stats-mode.per.level",
            "metadata.stats-dense-store",
            "metadata.stats-keep-first-n-columns",
            "parquet.enable.dictionary",
            "page-size",
            "cache-page-size",
            "async-file-write",
            "deletion-vector.index-file.target-size",
            "deletion-vectors.modifiable",
            "format-table.implementation",
            "format-table.file.compression",
            "format-table.partition-path-only-value",
            "format-table.commit-hive-sync-url",
            "format-table.scan.list-parallelism",
            "object-location",
            "clustering.columns",
            "clustering.strategy",
            "clustering.incremental",
            "clustering.incremental.mode",
            "clustering.incremental.optimize-write",
            "clustering.history-partition.limit",
            "clustering.history-partition.idle-to-full-sort",
            "zorder.var-length-contribution",
            "sort-compaction.range-strategy",
            "sort-compaction.local-sample.magnification",
            "variant.shreddingSchema",
            "variant.inferShreddingSchema",
            "variant.shredding.inferenceMode",
            "variant.shredding.maxSchemaWidth",
            "variant.shredding.maxSchemaDepth",
            "variant.shredding.minFieldCardinalityRatio",
            "variant.shredding.maxInferBufferRow",
            "variant.shredding.adaptive.maxInferBufferRow",
            "variant.shredding.adaptive.retentionRatio",
            "vector.file.format",
            "vector.target-file-size",
            "vector-field",
            "blob.target-file-size",
            "blob.split-by-file-size",
            "blob.copy-buffer-size",
            "blob-field",
            "blob-descriptor-field",
            "blob-view-field",
            "blob-view.resolve.enabled",
            "blob-as-descriptor",
            "blob-external-storage-field",
            "blob-external-storage-path",
            "blob-write-null-on-missing-file",
            "blob-write-null-on-fetch-failure",
            "blob-compaction.enabled",
            "lookup.blob-as-descriptor",
        ),
    ),
    **_inert(
        "writers, merge buffers, spilling, sequence numbers and dynamic buckets (writes)",
        (
            "write-only",
            "write-buffer-size",
            "write-buffer-spillable",
            "write-buffer-spill.max-disk-size",
            "write-buffer-for-append",
            "write-max-writers-to-spill",
            "write-manifest-cache",
            "write.batch-size",
            "write.batch-memory",
            "write.sequence-number-init-mode",
            "local-sort.max-num-file-handles",
            "local-merge-buffer-size",
            "sort-engine",
            "sort-spill-threshold",
            "sort-spill-buffer-size",
            "spill-compression",
            "spill-compression.zstd-level",
            "dynamic-bucket.target-row-num",
            "dynamic-bucket.initial-buckets",
            "dynamic-bucket.max-buckets",
            "dynamic-bucket.assigner-parallelism",
            "cross-partition-upsert.index-ttl",
            "cross-partition-upsert.bootstrap-parallelism",
            "postpone.batch-write-fixed-bucket",
            "postpone.batch-write-fixed-bucket.max-parallelism",
            "postpone.batch-write-fixed-bucket.rescale-load-factor",
            "postpone.default-bucket-num",
            "postpone.target-row-num-per-bucket",
            "postpone.target-size-per-bucket",
            "overwrite-upgrade",
            "row-tracking.enabled",
            "row-tracking.partition-group-on-commit",
            "record-level.time-field-type",
            "sink.watermark-time-zone",
            "sink.process-time-zone",
            "end-input.check-partition-expire",
            "partition.end-input-to-done",
            "partition.sink-strategy",
            "primary-key",
            "partition",
            "auto-create",
            "alter-column-null-to-not-null.disabled",
            "disable-explicit-type-casting",
        ),
    ),
    **_inert(
        "compaction triggers and lookup changelog production (the merged result is the same)",
        (
            "num-sorted-run.stop-trigger",
            "num-levels",
            "commit.force-compact",
            "compaction.force-up-level-0",
            "compaction.max.file-num",
            "compaction.file-num-limit",
            "compaction.delete-ratio-threshold",
            "compaction.small-file-ratio",
            "compaction.force-rewrite-all-files",
            "compaction.skip-expired-partitions",
            "changelog-producer",
            "changelog-producer.row-deduplicate",
            "changelog-producer.row-deduplicate-ignore-fields",
            "delete.force-produce-changelog",
            "force-lookup",
            "lookup-wait",
            "lookup-compact",
            "lookup-compact.max-interval",
            "lookup.merge-buffer-size",
            "lookup.merge-records-threshold",
            "lookup.local-file-type",
            "lookup.remote-file.enabled",
            "lookup.remote-file.level-threshold",
            "data-evolution.compaction.rewrite-row-ids",
            "data-evolution.merge-into.file-pruning",
            "data-evolution.merge-into.source-persist",
            "data-evolution.reassign.skip-contiguous-row-count",
            "data-evolution.row-id-conflict-rewrite.max-size",
            "data-evolution.row-sidecar.enabled",
            "data-evolution.row-sidecar.max-selected-rows",
            "data-evolution.row-sidecar.max-selection-ratio",
        ),
    ),
    **_inert(
        "commits, snapshot/changelog/tag/partition retention, callbacks and the metastore",
        (
            "commit.timeout",
            "commit.max-retries",
            "commit.min-retry-wait",
            "commit.max-retry-wait",
            "commit.user-prefix",
            "commit.force-create-snapshot",
            "commit.discard-duplicate-files",
            "commit.callbacks",
            "commit.callback.#.param",
            "snapshot.num-retained.min",
            "snapshot.num-retained.max",
            "snapshot.time-retained",
            "snapshot.expire.limit",
            "snapshot.expire.execution-mode",
            "snapshot.clean-empty-directories",
            "snapshot.expire.clean-empty-directories",
            "snapshot.ignore-empty-commit",
            "snapshot.watermark-idle-timeout",
            "changelog.num-retained.min",
            "changelog.num-retained.max",
            "changelog.time-retained",
            "partition.expiration-strategy",
            "partition.expiration-time",
            "partition.expiration-check-interval",
            "partition.expiration-max-num",
            "partition.expiration-batch-size",
            "partition.timestamp-formatter",
            "partition.timestamp-pattern",
            "partition.timestamp-format.strict",
            "partition.mark-done-action",
            "partition.mark-done-action.custom.class",
            "partition.mark-done-action.http.url",
            "partition.mark-done-action.http.params",
            "partition.mark-done-action.http.timeout",
            "partition.idle-time-to-report-statistic",
            "tag.automatic-creation",
            "tag.create-success-file",
            "tag.creation-period",
            "tag.creation-delay",
            "tag.period-formatter",
            "tag.creation-period-duration",
            "tag.num-retained-max",
            "tag.default-time-retained",
            "tag.time-expire-enabled",
            "tag.automatic-completion",
            "tag.batch.customized-name",
            "tag.callbacks",
            "tag.callback.#.param",
            "metastore.partitioned-table",
            "metastore.tag-to-partition",
            "metastore.tag-to-partition.preview",
            "visibility-callback.enabled",
            "visibility-callback.timeout",
            "visibility-callback.check-interval",
            "delete-file.thread-num",
            "file-operation.thread-num",
            "materialized-table.definition-query",
            "materialized-table.interval-freshness",
            "materialized-table.interval-freshness.time-unit",
            "materialized-table.logical-refresh-mode",
            "materialized-table.refresh-mode",
            "materialized-table.refresh-status",
            "materialized-table.refresh-handler-description",
            "materialized-table.refresh-handler-bytes",
        ),
    ),
    **_inert(
        "streaming reads, consumers, lookup joins and the log system (not a batch read)",
        (
            "continuous.discovery-interval",
            "streaming.read.snapshot.delay",
            "streaming-read-overwrite",
            "streaming-read-append-overwrite",
            "streaming-read-mode",
            "stream-scan-mode",
            "consumer-id",
            "consumer.expiration-time",
            "consumer.mode",
            "consumer.ignore-progress",
            "consumer.changelog-only",
            "lookup.hash-load-factor",
            "lookup.cache-rows",
            "lookup.continuous.discovery-interval",
            "lookup.cache-file-retention",
            "lookup.cache-max-disk-size",
            "lookup.cache-spill-compression",
            "lookup.cache-max-memory-size",
            "lookup.cache.high-priority-pool-ratio",
            "lookup.cache.bloom.filter.enabled",
            "lookup.cache.bloom.filter.fpp",
            "local-kv-db.block-size",
            "log.changelog-mode",
            "log.consistency",
            "log.format",
            "log.key.format",
            "log.ignore-delete",
            "table-read.sequence-number.enabled",  # only the audit_log and binlog system tables
            "incremental-between-scan-mode",  # only with incremental-between (refused)
        ),
    ),
    **_inert(
        "split planning, parallelism, file skipping by indexes and statistics (same rows)",
        (
            "source.split.target-size",
            "source.split.open-file-cost",
            "read.batch-size",
            "file-reader-async-threshold",
            "file-index.in-manifest-threshold",
            "file-index.read.enabled",
            "global-index.enabled",
            "global-index.external-path",
            "global-index.column-update-action",
            "global-index.row-count-per-shard",
            "global-index.build.max-shard",
            "global-index.build.max-parallelism",
            "global-index.search-mode",
            "global-index.thread-num",
            "scalar-index.search-mode",
            "vector-index.search-mode",
            "full-text-index.search-mode",
            "vector-search.distribute.enabled",
            "vector-search.lateral-join.batch-size",
            "pk-vector.index.columns",
            "pk-btree.index.columns",
            "pk-bitmap.index.columns",
            "pk-multivalue.index.columns",
            "pk-full-text.index.columns",
        ),
    ),
    **_inert(
        "scan options of the engines and of streaming reads: a batch read returns the same rows",
        (
            "scan.max-splits-per-task",
            "scan.plan-sort-partition",
            "scan.plan-auto-tag-for-read.time-retained",
            "scan.bounded",
            "scan.bounded.watermark",
            "scan.dedicated-split-generation",
            "scan.infer-parallelism",
            "scan.infer-parallelism.max",
            "scan.max-snapshot.count",
            "scan.newly-added-table.enabled",
            "scan.parallelism",
            "scan.partitions",  # Flink lookup joins only
            "scan.push-down",
            "scan.remove-normalize",
            "scan.split-enumerator.batch-size",
            "scan.split-enumerator.mode",
            "scan.watermark.alignment.group",
            "scan.watermark.alignment.max-drift",
            "scan.watermark.alignment.update-interval",
            "scan.watermark.emit.strategy",
            "scan.watermark.idle-timeout",
            # Java may fall back to the main read when reading the fallback branch fails; ours fails
            "scan.fallback-branch.read-fail-fast",
            "chain-table.chain-partition-keys",  # only with chain-table.enabled (refused)
            "chain-table.streaming.merge-snapshot",
            "chain-table.split.key-range-enabled",
        ),
    ),
    **_inert(
        "Java skips missing or corrupt files instead of failing; our read fails loudly on them instead",
        ("scan.ignore-corrupt-files", "scan.ignore-lost-files"),
    ),
}

#: ``fields.<name>.<suffix>`` options, by suffix. The options of partial-update and of the aggregate
#: functions matter only under those merge engines, which check them.
_ENGINE_FIELD_SUFFIXES = (
    "aggregate-function",
    "list-agg-delimiter",
    "sequence-group",
    "ignore-retract",
    "distinct",
    "nested-key",
    "nested-key-null-strategy",
    "nested-sequence-field",
    "count-limit",
    "ts-field",
)
FIELD_OPTION_RULES: dict[str, Rule] = {
    **_rules(Kind.MERGE_ENGINE, "handled by the merge engines", _ENGINE_FIELD_SUFFIXES),
    "stats-mode": Rule(Kind.NO_READ_EFFECT, "which statistics are written"),
    # Java 0.9..1.x fill nulls of the field with this value when reading (DefaultValueAssigner).
    "default-value": Rule(Kind.REFUSED, "nulls of the field are read as this default (Java before 2.0)"),
    "map.storage-layout": Rule(Kind.REFUSED, "MAP columns stored in another layout", frozenset({"default"})),
    "map.shared-shredding.max-columns": Rule(Kind.NO_READ_EFFECT, "only with a map storage layout"),
    "map.shared-shredding.column-placement-policy": Rule(
        Kind.NO_READ_EFFECT, "only with a map storage layout"
    ),
}

_UNKNOWN = Rule(Kind.REFUSED, "unknown option under a prefix whose options change reads")
_UNKNOWN_HARMLESS = Rule(Kind.NO_READ_EFFECT, "unknown option (Java ignores keys it does not know)")


def classify(key: str) -> Rule:
    """The rule for one option key (see the module docstring)."""
    rule = OPTION_RULES.get(key)
    if rule is not None:
        return rule
    if key.startswith(("partial-update.", "aggregation.")):
        return OPTION_RULES["merge-engine"]
    if key.startswith("fields."):
        # the longest known suffix wins: "map.shared-shredding.max-columns" before "max-columns"
        for suffix in sorted(FIELD_OPTION_RULES, key=len, reverse=True):
            if key.endswith("." + suffix) and len(key) > len("fields.") + len(suffix) + 1:
                return FIELD_OPTION_RULES[suffix]
        return _UNKNOWN
    if key.startswith(READ_AFFECTING_PREFIXES):
        return _UNKNOWN
    return _UNKNOWN_HARMLESS


def check_options(options: Mapping[str, str], *, for_write: bool) -> None:
    """Raise ``UnsupportedError`` naming the first option (in key order) that a read (``for_write``:
    or a write) of a table with these options would get wrong."""
    for key in sorted(options):
        value = options[key]
        rule = classify(key)
        if rule.refuses(value, for_write=for_write):
            what = "writing" if rule.kind is Kind.WRITE_REFUSED else "reading"
            raise UnsupportedError(
                f"table option {key}={value!r} is not supported for {what}: {rule.reason}",
                option=key,
                value=value,
            )


def check_main_branch(options: Mapping[str, str]) -> None:
    """``UnsupportedError`` naming the branch when ``options`` (a table's) say it is a branch other than
    main: only the main branch is committed to, and a commit must not land on main instead."""
    branch = (options.get(BRANCH) or MAIN_BRANCH).strip()
    if branch != MAIN_BRANCH:
        raise UnsupportedError(
            f"writing to branch {branch!r} is not supported: commits publish only to the main branch",
            option=BRANCH,
            value=branch,
            branch=branch,
        )


FILE_FORMAT = "file.format"
CHANGELOG_FILE_FORMAT = "changelog-file.format"
#: The data file formats of Paimon tables (Java's FileFormat factories for tables in Paimon's layout;
#: csv, json and text are formats of format tables). Which of them this library reads is its reader's
#: business (``table.read``): a format it cannot decode is refused when a read opens such a file.
DATA_FILE_FORMATS = frozenset({"orc", "parquet", "avro", "lance"})

#: The ``type`` values that are Paimon tables (snapshots, manifests, data files in Paimon's layout).
PAIMON_TABLE_TYPES = frozenset({"table", "materialized-table"})


#: The ``type`` values of tables a catalog keeps as metadata only: their files are their clients'
#: (plain Parquet/CSV/JSON/ORC/text directories, objects, Iceberg metadata), never a Paimon layout.
CATALOG_ONLY_TABLE_TYPES = frozenset({"format-table", "object-table", "iceberg-table"})
#: The file formats of format tables (Java's and pypaimon's ``FormatTable.Format``).
FORMAT_TABLE_FORMATS = frozenset({"orc", "parquet", "csv", "json", "text"})


def table_type(options: Mapping[str, str]) -> str:
    """The table's ``type`` (lower case, ``table`` when unset)."""
    return (options.get(TABLE_TYPE) or TABLE_TYPE_DEFAULT).strip().lower()


def check_table_type(options: Mapping[str, str]) -> None:
    """``UnsupportedError`` naming the type when ``options`` describe a table that is not a Paimon table
    (``format-table``, ``object-table``, ``iceberg-table``, ``lance-table``, ...)."""
    kind = table_type(options)
    if kind not in PAIMON_TABLE_TYPES:
        raise UnsupportedError(
            f"table option {TABLE_TYPE}={kind!r}: only Paimon tables "
            f"({', '.join(sorted(PAIMON_TABLE_TYPES))}) are kept by this catalog",
            option=TABLE_TYPE,
            value=kind,
        )


def check_read_options(options: Mapping[str, str]) -> None:
    """``UnsupportedError`` naming an option that changes what a read returns and is not implemented."""
    check_options(options, for_write=False)


def check_write_options(options: Mapping[str, str]) -> None:
    """As :func:`check_read_options`, plus the options that change what Java writes."""
    check_options(options, for_write=True)
