"""Paimon option keys and defaults (``org.apache.paimon.CoreOptions``): the contract, kept verbatim here.

Only options paimon_meta reads are listed; unknown options are kept in schemas untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from paimon_meta.errors import ValidationError

#: The range of Java's ``int``: most numeric table options are Java ``Integer``s.
JAVA_INT_MIN, JAVA_INT_MAX = -(2**31), 2**31 - 1

BUCKET = "bucket"
BUCKET_KEY = "bucket-key"
FILE_FORMAT = "file.format"
FILE_COMPRESSION = "file.compression"
MANIFEST_FORMAT = "manifest.format"
MANIFEST_COMPRESSION = "manifest.compression"
MANIFEST_TARGET_FILE_SIZE = "manifest.target-file-size"
MANIFEST_FULL_COMPACTION_THRESHOLD = "manifest.full-compaction-threshold-size"
MANIFEST_MERGE_MIN_COUNT = "manifest.merge-min-count"
TARGET_FILE_SIZE = "target-file-size"
MERGE_ENGINE = "merge-engine"
# merge engines other than deduplicate (paimon_meta.table.mergetree.merge_engine)
PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE = "partial-update.remove-record-on-delete"
PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP = "partial-update.remove-record-on-sequence-group"
AGGREGATION_REMOVE_RECORD_ON_DELETE = "aggregation.remove-record-on-delete"
FIELDS_PREFIX = "fields."  # fields.<name>.<suffix>: per-field options
FIELDS_DEFAULT_AGG_FUNC = "fields.default-aggregate-function"
FIELD_AGG_FUNCTION = "aggregate-function"
FIELD_IGNORE_RETRACT = "ignore-retract"
FIELD_LIST_AGG_DELIMITER = "list-agg-delimiter"
FIELD_SEQUENCE_GROUP = "sequence-group"
FIELD_DISTINCT = "distinct"
PARTITION_DEFAULT_NAME = "partition.default-name"
DATA_FILE_PREFIX = "data-file.prefix"
CHANGELOG_FILE_PREFIX = "changelog-file.prefix"
METADATA_STATS_MODE = "metadata.stats-mode"
COMMIT_MAX_RETRIES = "commit.max-retries"
COMMIT_TIMEOUT = "commit.timeout"
COMMIT_MIN_RETRY_WAIT = "commit.min-retry-wait"
COMMIT_MAX_RETRY_WAIT = "commit.max-retry-wait"
SNAPSHOT_NUM_RETAINED_MIN = "snapshot.num-retained.min"
SNAPSHOT_NUM_RETAINED_MAX = "snapshot.num-retained.max"
SNAPSHOT_TIME_RETAINED = "snapshot.time-retained"
SNAPSHOT_EXPIRE_LIMIT = "snapshot.expire.limit"
DELETION_VECTORS_ENABLED = "deletion-vectors.enabled"
SEQUENCE_FIELD = "sequence.field"
DYNAMIC_PARTITION_OVERWRITE = "dynamic-partition-overwrite"
DATA_FILE_THIN_MODE = "data-file.thin-mode"
# early full compaction and its schedule (paimon_meta.table.mergetree.universal)
COMPACTION_OPTIMIZATION_INTERVAL = "compaction.optimization-interval"
COMPACTION_TOTAL_SIZE_THRESHOLD = "compaction.total-size-threshold"
COMPACTION_INCREMENTAL_SIZE_THRESHOLD = "compaction.incremental-size-threshold"
FULL_COMPACTION_DELTA_COMMITS = "full-compaction.delta-commits"
CHANGELOG_PRODUCER = "changelog-producer"

DEFAULT_PARTITION_NAME = "__DEFAULT_PARTITION__"
DEFAULT_DATA_FILE_PREFIX = "data-"
DEFAULT_CHANGELOG_FILE_PREFIX = "changelog-"

#: Java ``MemorySize.MemoryUnit``'s labels and multipliers.
_UNITS = {
    **dict.fromkeys(("b", "bytes"), 1),
    **dict.fromkeys(("k", "kb", "kibibytes"), 1024),
    **dict.fromkeys(("m", "mb", "mebibytes"), 1024**2),
    **dict.fromkeys(("g", "gb", "gibibytes"), 1024**3),
    **dict.fromkeys(("t", "tb", "tebibytes"), 1024**4),
}
_NANOS_PER_MS = 1_000_000
#: Java ``TimeUtils.TimeUnit``'s labels (its plural labels also with an ``s``), in nanoseconds.
_DURATION_NANOS = {
    **dict.fromkeys(("d", "day", "days"), 86_400 * 10**9),
    **dict.fromkeys(("h", "hour", "hours"), 3_600 * 10**9),
    **dict.fromkeys(("min", "m", "minute", "minutes"), 60 * 10**9),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 10**9),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), _NANOS_PER_MS),
    **dict.fromkeys(("\u00b5s", "micro", "micros", "microsecond", "microseconds"), 1_000),
    **dict.fromkeys(("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
}
_JAVA_LONG_MAX = 2**63 - 1
# Java's grammar of both: the trimmed text's leading digits, then (after optional spaces) a unit label
_NUMBER_AND_UNIT = re.compile(r"([0-9]+)(.*)", re.DOTALL)


def _number_and_unit(text: str, key: str, what: str) -> tuple[int, str]:
    match = _NUMBER_AND_UNIT.fullmatch(text.strip())
    if match is None:
        raise ValidationError(
            f"option {key or what}={text!r} is not a {what}: it does not start with a number", option=key
        )
    number = int(match.group(1))
    if number > _JAVA_LONG_MAX:
        raise ValidationError(f"option {key or what}={text!r} is not a {what}: it overflows", option=key)
    return number, match.group(2).strip().lower()


def parse_memory_size(text: str, *, key: str = "") -> int:
    """Bytes of a Paimon ``MemorySize`` (Java ``MemorySize.parseBytes``): a number and an optional unit
    label, ``8 mb``, ``128MB``, ``100 mebibytes``, ``1024`` (bytes); what Java refuses raises
    ``ValidationError`` naming ``key``."""
    number, unit = _number_and_unit(text, key, "memory size")
    multiplier = _UNITS.get(unit or "b")
    if multiplier is None:
        raise ValidationError(
            f"option {key or 'memory size'}={text!r} is not a memory size: unknown unit {unit!r}",
            option=key,
        )
    if number * multiplier > _JAVA_LONG_MAX:
        raise ValidationError(
            f"option {key or 'memory size'}={text!r} is not a memory size: it overflows", option=key
        )
    return number * multiplier


def parse_duration_ms(text: str, *, key: str = "") -> int:
    """Milliseconds of a Paimon ``Duration`` (Java ``TimeUtils.parseDuration``, then ``toMillis``): a
    number and an optional unit label, ``10 ms``, ``1 h``, ``30 s``, ``2 days``, ``500`` (milliseconds);
    below a millisecond is truncated; what Java refuses raises ``ValidationError`` naming ``key``."""
    number, unit = _number_and_unit(text, key, "duration")
    nanos = _DURATION_NANOS.get(unit or "ms")
    if nanos is None:
        raise ValidationError(
            f"option {key or 'duration'}={text!r} is not a duration: unknown unit {unit!r}", option=key
        )
    return number * nanos // _NANOS_PER_MS


@dataclass(frozen=True, slots=True)
class CoreOptions:
    """Typed view over a table's option map, with Paimon's defaults."""

    raw: Mapping[str, str]

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw.get(key, default)

    def _int(self, key: str, default: int, *, minimum: int = JAVA_INT_MIN) -> int:
        """A Java ``Integer`` option: refused (naming it) unless it parses as one, at least ``minimum``."""
        v = self.raw.get(key)
        if v is None:
            return default
        try:
            value = int(v)
        except ValueError as e:
            raise ValidationError(f"option {key}={v!r} is not an integer", option=key) from e
        if not minimum <= value <= JAVA_INT_MAX:
            raise ValidationError(
                f"option {key}={v!r} is out of range ({minimum}..{JAVA_INT_MAX})", option=key
            )
        return value

    def check_numbers(self) -> None:
        """Refuse (``ValidationError`` naming the option) numeric options Java would refuse when it
        validates a table's schema: each must parse and fit, and the snapshot retention bounds must be
        consistent (Java's ``SchemaValidation``). Called when a table is created or altered."""
        self.bucket  # noqa: B018 - each parses its option or refuses it
        self.manifest_merge_min_count  # noqa: B018
        self.commit_max_retries  # noqa: B018
        self._int(SNAPSHOT_EXPIRE_LIMIT, 50, minimum=1)
        low = self._int(SNAPSHOT_NUM_RETAINED_MIN, 10, minimum=1)
        high = self.snapshot_num_retained_max
        if high is not None and high < low:
            raise ValidationError(
                f"option {SNAPSHOT_NUM_RETAINED_MAX}={high} is below {SNAPSHOT_NUM_RETAINED_MIN}={low}",
                option=SNAPSHOT_NUM_RETAINED_MAX,
            )
        self.snapshot_time_retained_ms  # noqa: B018 - parses the duration or refuses it
        self.commit_max_retry_wait_ms  # noqa: B018
        for key in (COMPACTION_TOTAL_SIZE_THRESHOLD, COMPACTION_INCREMENTAL_SIZE_THRESHOLD):
            if key in self.raw:
                self._size(key, "0")
        if COMPACTION_OPTIMIZATION_INTERVAL in self.raw:
            self._duration(COMPACTION_OPTIMIZATION_INTERVAL, "0")
        if FULL_COMPACTION_DELTA_COMMITS in self.raw:
            self._int(FULL_COMPACTION_DELTA_COMMITS, 0)
            if (self.raw.get(CHANGELOG_PRODUCER) or "").strip().lower() == "lookup":
                raise ValidationError(
                    f"option {FULL_COMPACTION_DELTA_COMMITS} is incompatible with {CHANGELOG_PRODUCER}=lookup"
                    f" (use {CHANGELOG_PRODUCER}=full-compaction, or remove {FULL_COMPACTION_DELTA_COMMITS})",
                    option=FULL_COMPACTION_DELTA_COMMITS,
                )

    def _size(self, key: str, default: str) -> int:
        return parse_memory_size(self.raw.get(key, default), key=key)

    def _duration(self, key: str, default: str) -> int:
        return parse_duration_ms(self.raw.get(key, default), key=key)

    @property
    def bucket(self) -> int:
        return self._int(BUCKET, -1)

    @property
    def bucket_key(self) -> list[str]:
        v = self.raw.get(BUCKET_KEY)
        return [k.strip() for k in v.split(",") if k.strip()] if v else []

    @property
    def file_format(self) -> str:
        return self.raw.get(FILE_FORMAT, "parquet").lower()

    @property
    def file_compression(self) -> str:
        return self.raw.get(FILE_COMPRESSION, "zstd").lower()

    @property
    def manifest_format(self) -> str:
        return self.raw.get(MANIFEST_FORMAT, "avro").lower()

    @property
    def manifest_compression(self) -> str:
        return self.raw.get(MANIFEST_COMPRESSION, "zstd").lower()

    @property
    def manifest_target_file_size(self) -> int:
        return self._size(MANIFEST_TARGET_FILE_SIZE, "8 mb")

    @property
    def manifest_full_compaction_threshold(self) -> int:
        return self._size(MANIFEST_FULL_COMPACTION_THRESHOLD, "16 mb")

    @property
    def manifest_merge_min_count(self) -> int:
        return self._int(MANIFEST_MERGE_MIN_COUNT, 30)

    @property
    def target_file_size(self) -> int:
        # Java: 128 mb for primary-key tables and 256 mb for append tables; callers pick via has_pk.
        v = self.raw.get(TARGET_FILE_SIZE)
        return parse_memory_size(v, key=TARGET_FILE_SIZE) if v else 0

    @property
    def merge_engine(self) -> str:
        return self.raw.get(MERGE_ENGINE, "deduplicate")

    @property
    def partition_default_name(self) -> str:
        return self.raw.get(PARTITION_DEFAULT_NAME, DEFAULT_PARTITION_NAME)

    @property
    def data_file_prefix(self) -> str:
        return self.raw.get(DATA_FILE_PREFIX, DEFAULT_DATA_FILE_PREFIX)

    @property
    def commit_max_retries(self) -> int:
        return self._int(COMMIT_MAX_RETRIES, 10)

    @property
    def commit_timeout_ms(self) -> int | None:
        v = self.raw.get(COMMIT_TIMEOUT)
        return parse_duration_ms(v, key=COMMIT_TIMEOUT) if v else None

    @property
    def commit_min_retry_wait_ms(self) -> int:
        return self._duration(COMMIT_MIN_RETRY_WAIT, "10 ms")

    @property
    def commit_max_retry_wait_ms(self) -> int:
        return self._duration(COMMIT_MAX_RETRY_WAIT, "10 s")

    @property
    def snapshot_num_retained_min(self) -> int:
        return self._int(SNAPSHOT_NUM_RETAINED_MIN, 10)

    @property
    def snapshot_num_retained_max(self) -> int | None:
        if not self.raw.get(SNAPSHOT_NUM_RETAINED_MAX):
            return None
        return self._int(SNAPSHOT_NUM_RETAINED_MAX, 0, minimum=1)

    @property
    def snapshot_time_retained_ms(self) -> int:
        return self._duration(SNAPSHOT_TIME_RETAINED, "1 h")

    @property
    def snapshot_expire_limit(self) -> int:
        return self._int(SNAPSHOT_EXPIRE_LIMIT, 50)

    @property
    def deletion_vectors_enabled(self) -> bool:
        return self.raw.get(DELETION_VECTORS_ENABLED, "false").lower() == "true"

    @property
    def data_file_thin_mode(self) -> bool:
        """Primary-key data files are written without the ``_KEY_*`` copies of the key columns."""
        return self.raw.get(DATA_FILE_THIN_MODE, "false").strip().lower() == "true"

    @property
    def dynamic_partition_overwrite(self) -> bool:
        """Java's default: an OVERWRITE of a partitioned table replaces only the partitions its new
        files are in (``FileStoreCommitImpl.overwrite``)."""
        return self.raw.get(DYNAMIC_PARTITION_OVERWRITE, "true").lower() == "true"
