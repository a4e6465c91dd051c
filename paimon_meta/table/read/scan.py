"""Scan planning: snapshot -> manifest lists -> manifests -> live files -> splits.

Matches Java's ``AbstractFileStoreScan``/``ManifestsReader``: a snapshot's data files are its base
manifest list plus its delta manifest list (in that order); manifests whose partition stats or bucket
range cannot match the filters are skipped; the remaining manifests are read (in parallel, through a
cache: manifest files are immutable; :mod:`paimon_meta.table.manifests`), filtered entry by entry and
merged by file identity (:mod:`paimon_meta.table.read.manifest_merge`). Live files are grouped into one
:class:`Split` per (partition, bucket).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.manifest import DataFileMeta, ManifestEntry, ManifestFileMeta, SimpleStats
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.model.types import DataField, DataType, TypeRoot
from paimon_meta.table.manifests import ManifestReader
from paimon_meta.table.mergetree.merge_engine import FIRST_ROW
from paimon_meta.table.paths import POSTPONE_BUCKET
from paimon_meta.table.read.deletion_vectors import DeletionFile, deletion_files
from paimon_meta.table.read.manifest_merge import live_files, merge_entries
from paimon_meta.table.read.query_auth import RowRules

DELETION_VECTORS_MERGE_ON_READ = "deletion-vectors.merge-on-read"

PartitionSpec = Mapping[str, Any]
PartitionPredicate = Callable[[tuple[Any, ...]], bool]
PartitionFilterArg = PartitionSpec | Sequence[PartitionSpec] | PartitionPredicate


# ---- filters ---------------------------------------------------------------------------------------


def _parse_partition_text(text: str, data_type: DataType) -> Any:
    """Java's ``castFromString`` for the partition types people filter on."""
    root = data_type.root
    try:
        if root in (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT):
            return int(text)
        if root in (TypeRoot.FLOAT, TypeRoot.DOUBLE):
            return float(text)
        if root is TypeRoot.BOOLEAN:
            low = text.strip().lower()
            if low in ("true", "t", "yes", "y", "1"):
                return True
            if low in ("false", "f", "no", "n", "0"):
                return False
            raise ValueError(text)
        if root is TypeRoot.DECIMAL:
            return Decimal(text)
        if root is TypeRoot.DATE:
            return dt.date.fromisoformat(text)
        if root in (TypeRoot.BINARY, TypeRoot.VARBINARY):
            return text.encode()
    except (ValueError, InvalidOperation) as e:
        raise ValidationError(f"partition value {text!r} is not a valid {data_type}") from e
    return text


class PartitionFilter:
    """Selects partitions: equality specs (OR of ANDs over partition keys) or a predicate on the
    decoded partition tuple. Specs may use Java's string forms (``{"dt": "2024-01-01"}``) and the
    default partition name for null; specs also prune manifests by their partition stats."""

    def __init__(self, fields: Sequence[DataField], default_name: str, arg: PartitionFilterArg) -> None:
        self.fields = tuple(fields)
        self._index = {f.name: i for i, f in enumerate(self.fields)}
        self.predicate: PartitionPredicate | None = None
        self.specs: list[dict[int, Any]] = []
        if callable(arg):
            self.predicate = arg
            return
        specs: Iterable[PartitionSpec] = [arg] if isinstance(arg, Mapping) else arg
        for spec in specs:
            typed: dict[int, Any] = {}
            for name, value in spec.items():
                if name not in self._index:
                    raise ValidationError(
                        f"{name!r} is not a partition key of {self.field_names}", field=name
                    )
                i = self._index[name]
                if isinstance(value, str) and value == default_name:
                    value = None
                elif isinstance(value, str):
                    value = _parse_partition_text(value, self.fields[i].type)
                typed[i] = value
            self.specs.append(typed)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def matches(self, values: tuple[Any, ...]) -> bool:
        if self.predicate is not None:
            return bool(self.predicate(values))
        return any(all(values[i] == v for i, v in spec.items()) for spec in self.specs)

    def may_match(self, stats: SimpleStats, *, path: str | None = None) -> bool:
        """False only when no partition within the manifest's min/max/null-count stats can match."""
        if self.predicate is not None or not self.specs:
            return True
        types = [f.type for f in self.fields]
        try:
            mins = deserialize_row(stats.min_values, types, path=path)
            maxs = deserialize_row(stats.max_values, types, path=path)
        except CorruptMetadataError:
            return True  # stats we cannot read never prune (Java: stats are an optimisation only)
        nulls = stats.null_counts
        return any(self._spec_may_match(spec, mins, maxs, nulls) for spec in self.specs)

    @staticmethod
    def _spec_may_match(
        spec: dict[int, Any],
        mins: tuple[Any, ...],
        maxs: tuple[Any, ...],
        nulls: tuple[int | None, ...] | None,
    ) -> bool:
        for i, value in spec.items():
            null_count = nulls[i] if nulls is not None and i < len(nulls) else None
            if value is None:
                if null_count == 0:
                    return False
                continue
            lo, hi = mins[i], maxs[i]
            if lo is None or hi is None:
                if lo is None and hi is None:
                    return False  # every value in the manifest is null
                continue
            try:
                if value < lo or value > hi:
                    return False
            except TypeError:
                continue
        return True


def _bucket_set(buckets: int | Iterable[int] | None) -> frozenset[int] | None:
    if buckets is None:
        return None
    if isinstance(buckets, int):
        return frozenset((buckets,))
    return frozenset(buckets)


# ---- splits and plans -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Split:
    """The live files of one (partition, bucket) at one snapshot.

    ``raw_convertible``: the files can be read by concatenation, without merging by key (always for
    append tables; for primary-key tables when no key can appear twice and no row retracts one).
    ``deletion_files``: for deletion-vector tables, each file's deletion vector (None: none).
    ``fallback``: the split comes from the ``scan.fallback-branch`` of the table read (Java's
    ``FallbackDataSplit.isFallback``): it is read with that branch's schema.
    ``rules``: the row filters and column masks a read of it applies (planned on a ``query-auth.enabled``
    table through a catalog that gives them: :mod:`paimon_meta.table.read.query_auth`); None: none asked.
    """

    snapshot_id: int
    partition: bytes
    partition_values: tuple[Any, ...]
    bucket: int
    total_buckets: int | None
    files: tuple[DataFileMeta, ...]
    bucket_path: str
    raw_convertible: bool
    deletion_files: tuple[DeletionFile | None, ...] | None = None
    fallback: bool = False
    rules: RowRules | None = field(default=None, compare=False)

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.files)

    @property
    def file_paths(self) -> list[str]:
        return [f.external_path or f"{self.bucket_path}/{f.file_name}" for f in self.files]


@dataclass(frozen=True, slots=True)
class Plan:
    """The result of planning: splits and the snapshot they belong to (None for an empty table)."""

    snapshot_id: int | None
    split_list: tuple[Split, ...]

    def splits(self) -> list[Split]:
        return list(self.split_list)


def _pk_raw_convertible(
    files: Sequence[DataFileMeta], deletion_vectors: bool, first_row: bool = False
) -> bool:
    # With deletion vectors, files above level 0 hold each key at most once (older copies are
    # marked deleted). Without, a key may appear in several files unless they form one sorted run
    # (one level > 0) or there is a single file; a -U/-D row needs merging to remove its key.
    # first-row writers only let a key into levels > 0 when no level holds it yet (lookup), so Java
    # concatenates such files too (MergeTreeSplitGenerator: rawConvertible && FIRST_ROW).
    if deletion_vectors and all(f.level > 0 for f in files):
        return True
    if any(f.delete_row_count != 0 for f in files):
        return False
    if len(files) == 1:
        return True
    levels = {f.level for f in files}
    if first_row and 0 not in levels:
        return True
    return len(levels) == 1 and 0 not in levels


class FileStoreScan:
    """Plans one scan of a table at a snapshot with optional partition and bucket filters."""

    def __init__(
        self,
        reader: ManifestReader,
        schema: TableSchema,
        snapshot: Snapshot | None,
        *,
        partition_filter: PartitionFilterArg | None = None,
        bucket_filter: int | Iterable[int] | None = None,
        all_levels: bool = False,
    ) -> None:
        self.reader = reader
        self.schema = schema
        self.snapshot = snapshot
        self.partition_fields = tuple(schema.partition_type.fields)
        self._partition_types = [f.type for f in self.partition_fields]
        default_name = schema.core_options.partition_default_name
        self.partition_filter = (
            PartitionFilter(self.partition_fields, default_name, partition_filter)
            if partition_filter is not None
            else None
        )
        self.buckets = _bucket_set(bucket_filter)
        self._partition_values: dict[bytes, tuple[Any, ...]] = {}
        options = schema.core_options
        self.deletion_vectors = options.deletion_vectors_enabled
        # CoreOptions.batchScanSkipLevel0: with deletion vectors, uncompacted (level-0) files of a
        # primary-key table are invisible to batch reads unless deletion-vectors.merge-on-read.
        dv_mor = (options.get(DELETION_VECTORS_MERGE_ON_READ, "false") or "false").lower() == "true"
        # first-row: level-0 files are what the writer has not looked up against older levels yet
        # (DataTableBatchScan's level filter), invisible to batch reads as well. Writers and
        # compaction (``all_levels``) see every file.
        self.first_row = bool(schema.primary_keys) and options.merge_engine.strip().lower() == FIRST_ROW
        self.skip_level0 = not all_levels and (
            (bool(schema.primary_keys) and self.deletion_vectors and not dv_mor) or self.first_row
        )
        # Postpone-bucket tables (bucket = -2) keep unassigned rows in bucket-postpone until a
        # compaction moves them; batch reads see only the real buckets (``onlyReadRealBuckets``).
        self.only_real_buckets = options.bucket == POSTPONE_BUCKET

    def partition_values(self, partition: bytes, *, path: str | None = None) -> tuple[Any, ...]:
        values = self._partition_values.get(partition)
        if values is None:
            values = deserialize_row(partition, self._partition_types, path=path)
            self._partition_values[partition] = values
        return values

    def _keep_manifest(self, meta: ManifestFileMeta) -> bool:
        lo, hi = meta.min_bucket, meta.max_bucket
        if self.only_real_buckets and hi is not None and hi < 0:
            return False
        buckets = self.buckets
        if (
            buckets is not None
            and lo is not None
            and hi is not None
            and not any(lo <= b <= hi for b in buckets)
        ):
            return False
        if self.partition_filter is not None:
            path = self.reader.paths.manifest_path(meta.file_name)
            return self.partition_filter.may_match(meta.partition_stats, path=path)
        return True

    def _keep_entry(self, entry: ManifestEntry, path: str) -> bool:
        if self.skip_level0 and entry.file.level == 0:
            return False
        if self.only_real_buckets and entry.bucket < 0:
            return False
        if self.buckets is not None and entry.bucket not in self.buckets:
            return False
        if self.partition_filter is not None:
            return self.partition_filter.matches(self.partition_values(entry.partition, path=path))
        return True

    def plan_files(self) -> list[ManifestEntry]:
        """The live (ADD) entries that pass the filters, merged over base and delta manifests."""
        if self.snapshot is None:
            return []
        metas = [m for m in self.reader.data_manifests(self.snapshot) if self._keep_manifest(m)]
        per_manifest = self.reader.manifests(metas)
        merged: dict[Any, ManifestEntry] = {}
        for meta, entries in zip(metas, per_manifest):
            path = self.reader.paths.manifest_path(meta.file_name)
            try:
                merge_entries((e for e in entries if self._keep_entry(e, path)), merged)
            except ValidationError as e:
                raise CorruptMetadataError(
                    f"snapshot {self.snapshot.id}: {e.message}", path=path, snapshot_id=self.snapshot.id
                ) from e
        return live_files(merged)

    def plan(self) -> Plan:
        """Splits, one per (partition, bucket), ordered by partition bytes then bucket."""
        if self.snapshot is None:
            return Plan(None, ())
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for entry in self.plan_files():
            groups.setdefault((entry.partition, entry.bucket), []).append(entry)
        has_pk = bool(self.schema.primary_keys)
        dvs = deletion_files(self.reader, self.snapshot) if self.deletion_vectors else {}
        splits = []
        for (partition, bucket), entries in sorted(groups.items(), key=lambda kv: kv[0]):
            values = self.partition_values(partition)
            files = tuple(e.file for e in entries)
            splits.append(
                Split(
                    snapshot_id=self.snapshot.id,
                    partition=partition,
                    partition_values=values,
                    bucket=bucket,
                    total_buckets=entries[0].total_buckets,
                    files=files,
                    bucket_path=self.reader.paths.bucket_path(values, bucket),
                    raw_convertible=not has_pk
                    or _pk_raw_convertible(files, self.deletion_vectors, self.first_row),
                    deletion_files=tuple(dvs.get(f.file_name) for f in files)
                    if self.deletion_vectors
                    else None,
                )
            )
        return Plan(self.snapshot.id, tuple(splits))
