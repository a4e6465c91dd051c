"""Where every file of a table lives, and how new files are named.

Matches Java's ``FileStorePathFactory``, ``DataFilePathFactory``, ``PartitionPathUtils`` and
``InternalRowPartitionComputer``: partition directories are ``k=v`` components with Java's escaping,
values rendered the way Java renders them (``partition.legacy-name``, default true: the internal
value's ``toString()``, so a DATE partition is its day number; false: a cast to STRING, so
``2024-01-31``), and null or blank values replaced by ``partition.default-name``.

Paths are plain strings (a local path or a URI); nothing here touches storage.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid as uuid_mod
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import DataFileMeta, IndexFileMeta
from paimon_meta.model.options import DEFAULT_PARTITION_NAME, CoreOptions
from paimon_meta.model.types import DataField, DataType, TypeRoot
from paimon_meta.table.casting.java_text import (
    java_double_to_string,
    java_float_to_string,
    local_date_time_text,
    sql_time_text,
    sql_timestamp_text,
    timestamp_to_datetime,
)
from paimon_meta.table.option_policy import MAIN_BRANCH

SCHEMA_DIR = "schema"
SNAPSHOT_DIR = "snapshot"
MANIFEST_DIR = "manifest"
INDEX_DIR = "index"
STATISTICS_DIR = "statistics"
SCHEMA_PREFIX = "schema-"
SNAPSHOT_PREFIX = "snapshot-"
MANIFEST_PREFIX = "manifest-"
MANIFEST_LIST_PREFIX = "manifest-list-"
INDEX_MANIFEST_PREFIX = "index-manifest-"
INDEX_PREFIX = "index-"
BUCKET_PREFIX = "bucket-"
LATEST = "LATEST"
EARLIEST = "EARLIEST"
POSTPONE_BUCKET = -2  # BucketMode.POSTPONE_BUCKET: its directory is bucket-postpone
BRANCH_DIR = "branch"
BRANCH_PREFIX = "branch-"

PARTITION_LEGACY_NAME = "partition.legacy-name"
DATA_FILE_PATH_DIRECTORY = "data-file.path-directory"
FILE_SUFFIX_INCLUDE_COMPRESSION = "file.suffix.include.compression"

# PartitionPathUtils.CHAR_TO_ESCAPE: ASCII controls and these characters become %XX (upper-case hex);
# everything else, including non-ASCII, is kept as is.
_ESCAPED = frozenset(chr(c) for c in range(0x20)) | frozenset("\"#%'*/:=?\\\x7f{}[]^")

# HadoopCompressionType file extensions (``file.suffix.include.compression``).
_COMPRESSION_EXTENSIONS = {
    "none": None,
    "gzip": "gz",
    "bzip2": "bz2",
    "deflate": "deflate",
    "snappy": "snappy",
    "lz4": "lz4",
    "zstd": "zst",
}


def escape_path_name(name: str) -> str:
    """``PartitionPathUtils.escapePathName``: %XX-escape the characters Java escapes."""
    if not name:
        raise ValidationError(f"a partition path component must not be empty: {name!r}")
    if not any(c in _ESCAPED for c in name):
        return name
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in name)


def unescape_path_name(name: str) -> str:
    """``PartitionPathUtils.unescapePathName``: decode %XX sequences (others are kept)."""
    out: list[str] = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "%" and i + 2 < len(name) and _is_hex(name[i + 1 : i + 3]):
            out.append(chr(int(name[i + 1 : i + 3], 16)))
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def join_path(base: str, *parts: str) -> str:
    """Join path components with ``/`` (URIs and local paths alike)."""
    out = base.rstrip("/")
    for p in parts:
        if p:
            out = out + "/" + p.strip("/")
    return out


def validate_branch_name(name: str) -> str:
    """A branch name as Java's ``BranchManager`` accepts it: not blank, not only digits (a number
    means a snapshot id), and one path component."""
    if not isinstance(name, str) or not name.strip() or name.isdigit() or "/" in name or name in {".", ".."}:
        raise ValidationError(
            f"invalid branch name {name!r}: not blank, not only digits, no '/'", branch=name
        )
    return name


def branch_path(table_path: str, branch: str) -> str:
    """``BranchManager.branchPath``: the main branch is the table directory, branch ``b`` is
    ``<table>/branch/branch-b``. Only a branch's ``snapshot/``, ``schema/`` and ``tag/`` live there:
    manifests, index files and data files of every branch are in the table's own directories
    (``FileStorePathFactory`` is rooted at the table path whatever the branch)."""
    if branch == MAIN_BRANCH:
        return table_path.rstrip("/")
    return join_path(table_path, BRANCH_DIR, BRANCH_PREFIX + validate_branch_name(branch))


# ---- rendering partition values like Java --------------------------------------------------------


def _days(value: Any) -> int:
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return int(value)


def _millis_of_day(value: Any) -> int:
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return int(value)


def partition_value_text(value: Any, data_type: DataType, *, legacy: bool = True) -> str | None:
    """The string Java puts in a partition path for one value (None for null).

    ``legacy`` is ``partition.legacy-name``: True renders the internal value's ``toString()``
    (DATE as its day number, TIME as millis, TIMESTAMP as ``LocalDateTime``), False a CAST to STRING.
    BINARY values are decoded as UTF-8 in both modes (Java's legacy ``byte[].toString()`` is an
    identity hash, which no reader can reproduce).
    """
    if value is None:
        return None
    root = data_type.root
    if root is TypeRoot.BOOLEAN:
        return "true" if value else "false"
    if root in (TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT):
        return str(int(value))
    if root is TypeRoot.FLOAT:
        return java_float_to_string(float(value))
    if root is TypeRoot.DOUBLE:
        return java_double_to_string(float(value))
    if root is TypeRoot.DECIMAL:
        return format(Decimal(value), "f")
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR):
        return str(value)
    if root in (TypeRoot.BINARY, TypeRoot.VARBINARY):
        return bytes(value).decode("utf-8", errors="replace")
    if root is TypeRoot.DATE:
        days = _days(value)
        if legacy:
            return str(days)
        return (dt.date(1970, 1, 1) + dt.timedelta(days=days)).isoformat()
    if root is TypeRoot.TIME:
        millis = _millis_of_day(value)
        return str(millis) if legacy else sql_time_text(millis, getattr(data_type, "precision", 0) or 0)
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        moment, nanos = timestamp_to_datetime(value)
        if legacy:
            return local_date_time_text(moment, nanos)
        # LTZ casts in the JVM's default zone; we render UTC (a writer's zone is not recorded).
        return sql_timestamp_text(moment, nanos, getattr(data_type, "precision", 6) or 0)
    return str(value)


def _java_blank(text: str) -> bool:
    """``StringUtils.isNullOrWhitespaceOnly``: empty or only ``Character.isWhitespace`` chars (which,
    unlike ``str.isspace``, excludes the non-breaking spaces)."""
    return all(c.isspace() and c not in "\u00a0\u2007\u202f" for c in text)


class PartitionComputer:
    """Renders partition values (a tuple ordered as the partition keys) into ``k=v`` path parts."""

    def __init__(
        self,
        partition_fields: Sequence[DataField],
        default_name: str = DEFAULT_PARTITION_NAME,
        *,
        legacy: bool = True,
    ) -> None:
        self.fields = tuple(partition_fields)
        self.default_name = default_name
        self.legacy = legacy

    def spec(self, values: Sequence[Any]) -> list[tuple[str, str]]:
        """``generatePartValues``: (key, value-text) pairs, blank or null values as the default name."""
        if len(values) != len(self.fields):
            raise ValidationError(
                f"partition has {len(values)} values but the table has {len(self.fields)} partition keys"
            )
        out = []
        for f, v in zip(self.fields, values):
            text = partition_value_text(v, f.type, legacy=self.legacy)
            if text is None or _java_blank(text):
                text = self.default_name
            out.append((f.name, text))
        return out

    def path(self, values: Sequence[Any]) -> str:
        """``k1=v1/k2=v2`` with Java's escaping; the empty string for an unpartitioned table."""
        return "/".join(f"{escape_path_name(k)}={escape_path_name(v)}" for k, v in self.spec(values))


class _NameSequence:
    """``<prefix><uuid>-<n><suffix>`` names from one uuid and a thread-safe counter (Java's
    per-factory ``UUID.randomUUID()`` and ``AtomicInteger``)."""

    def __init__(self, prefix: str, uid: str, suffix: str = "") -> None:
        self.prefix = prefix
        self.uuid = uid
        self.suffix = suffix
        self._next = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            n = self._next
            self._next += 1
        return f"{self.prefix}{self.uuid}-{n}{self.suffix}"


def compression_extension(compression: str | None) -> str | None:
    """The file-name extension of a compression codec (``HadoopCompressionType``), None for none."""
    if not compression:
        return None
    key = compression.lower()
    return _COMPRESSION_EXTENSIONS.get(key, key)


class DataFilePathFactory:
    """New data/changelog file names for one bucket directory (``DataFilePathFactory``).

    Names are ``<prefix><uuid>-<n>.<format>``: one random uuid per factory (i.e. per writer) and a
    counter, so concurrent writers never collide. ``external_dir``, when set, is where new files go
    (their DataFileMeta then carries ``external_path``).
    """

    def __init__(
        self,
        bucket_dir: str,
        file_format: str,
        *,
        data_prefix: str = "data-",
        changelog_prefix: str = "changelog-",
        compression: str | None = None,
        suffix_include_compression: bool = False,
        external_dir: str | None = None,
        uid: str | None = None,
    ) -> None:
        self.bucket_dir = bucket_dir
        self.external_dir = external_dir
        self.uuid = uid or str(uuid_mod.uuid4())
        ext = compression_extension(compression)
        fmt = file_format.lower()
        if ext is not None and fmt in ("json", "csv"):
            suffix = f".{fmt}.{ext}"
        elif ext is not None and suffix_include_compression:
            suffix = f".{ext}.{fmt}"
        else:
            suffix = f".{fmt}"
        # Java shares one counter between data and changelog names of a factory.
        self._names = _NameSequence("", self.uuid, suffix)
        self.data_prefix = data_prefix
        self.changelog_prefix = changelog_prefix

    def new_data_file_name(self) -> str:
        return self.data_prefix + self._names.next()

    def new_changelog_file_name(self) -> str:
        return self.changelog_prefix + self._names.next()

    def new_path(self, file_name: str) -> tuple[str, str | None]:
        """(full path, external path or None) for a new file name."""
        if self.external_dir is not None:
            full = join_path(self.external_dir, file_name)
            return full, full
        return join_path(self.bucket_dir, file_name), None

    def to_path(self, file: DataFileMeta) -> str:
        """Where an existing file of this bucket lives (its external path wins)."""
        return file.external_path or join_path(self.bucket_dir, file.file_name)


class TablePaths:
    """Path factory of one table (``FileStorePathFactory``): metadata directories, hint files,
    new manifest/index names (one uuid per instance, i.e. per committer) and data directories."""

    def __init__(
        self,
        table_path: str,
        partition_fields: Sequence[DataField] = (),
        *,
        default_partition_name: str = DEFAULT_PARTITION_NAME,
        legacy_partition_name: bool = True,
        data_file_directory: str | None = None,
    ) -> None:
        self.root = table_path.rstrip("/")
        self.partition_computer = PartitionComputer(
            partition_fields, default_partition_name, legacy=legacy_partition_name
        )
        self.data_file_directory = data_file_directory
        self.uuid = str(uuid_mod.uuid4())
        self._manifests = _NameSequence(MANIFEST_PREFIX, self.uuid)
        self._manifest_lists = _NameSequence(MANIFEST_LIST_PREFIX, self.uuid)
        self._index_manifests = _NameSequence(INDEX_MANIFEST_PREFIX, self.uuid)
        self._index_files = _NameSequence(INDEX_PREFIX, self.uuid)

    @staticmethod
    def for_table(table_path: str, partition_fields: Sequence[DataField], options: CoreOptions) -> TablePaths:
        """A factory configured from the table's options."""
        legacy = (options.get(PARTITION_LEGACY_NAME, "true") or "true").lower() == "true"
        return TablePaths(
            table_path,
            partition_fields,
            default_partition_name=options.partition_default_name,
            legacy_partition_name=legacy,
            data_file_directory=options.get(DATA_FILE_PATH_DIRECTORY),
        )

    # -- metadata directories and files --
    @property
    def schema_dir(self) -> str:
        return join_path(self.root, SCHEMA_DIR)

    @property
    def snapshot_dir(self) -> str:
        return join_path(self.root, SNAPSHOT_DIR)

    @property
    def manifest_dir(self) -> str:
        return join_path(self.root, MANIFEST_DIR)

    @property
    def index_dir(self) -> str:
        return join_path(self.root, INDEX_DIR)

    @property
    def statistics_dir(self) -> str:
        return join_path(self.root, STATISTICS_DIR)

    def schema_path(self, schema_id: int) -> str:
        return join_path(self.schema_dir, f"{SCHEMA_PREFIX}{schema_id}")

    def snapshot_path(self, snapshot_id: int) -> str:
        return join_path(self.snapshot_dir, f"{SNAPSHOT_PREFIX}{snapshot_id}")

    @property
    def latest_hint_path(self) -> str:
        return join_path(self.snapshot_dir, LATEST)

    @property
    def earliest_hint_path(self) -> str:
        return join_path(self.snapshot_dir, EARLIEST)

    def manifest_path(self, file_name: str) -> str:
        """Manifests, manifest lists and index manifests all live in ``manifest/``."""
        return join_path(self.manifest_dir, file_name)

    def index_file_path(self, index_file: IndexFileMeta | str) -> str:
        if isinstance(index_file, IndexFileMeta):
            if index_file.external_path:
                return index_file.external_path
            index_file = index_file.file_name
        return join_path(self.index_dir, index_file)

    # -- new metadata names --
    def new_manifest_name(self) -> str:
        return self._manifests.next()

    def new_manifest_list_name(self) -> str:
        return self._manifest_lists.next()

    def new_index_manifest_name(self) -> str:
        return self._index_manifests.next()

    def new_index_file_name(self) -> str:
        return self._index_files.next()

    # -- data directories --
    def partition_path(self, partition_values: Sequence[Any]) -> str:
        """``k1=v1/k2=v2`` relative to the table; empty for an unpartitioned table."""
        return self.partition_computer.path(partition_values)

    def relative_bucket_path(self, partition_values: Sequence[Any], bucket: int) -> str:
        name = BUCKET_PREFIX + ("postpone" if bucket == POSTPONE_BUCKET else str(bucket))
        parts = [self.data_file_directory or "", self.partition_path(partition_values), name]
        return "/".join(p for p in parts if p)

    def bucket_path(self, partition_values: Sequence[Any], bucket: int) -> str:
        return join_path(self.root, self.relative_bucket_path(partition_values, bucket))

    def data_file_path(self, partition_values: Sequence[Any], bucket: int, file: DataFileMeta) -> str:
        """Where a data file lives: its ``external_path`` if set, else in its bucket directory."""
        if file.external_path:
            return file.external_path
        return join_path(self.bucket_path(partition_values, bucket), file.file_name)

    def data_file_factory(
        self,
        partition_values: Sequence[Any],
        bucket: int,
        options: CoreOptions,
        *,
        external_root: str | None = None,
    ) -> DataFilePathFactory:
        """A new writer's name factory for one bucket; ``external_root`` is the chosen external
        path (``data-file.external-paths``), under which the same relative bucket path is used."""
        relative = self.relative_bucket_path(partition_values, bucket)
        include = (options.get(FILE_SUFFIX_INCLUDE_COMPRESSION, "false") or "false").lower() == "true"
        return DataFilePathFactory(
            join_path(self.root, relative),
            options.file_format,
            data_prefix=options.data_file_prefix,
            changelog_prefix=options.get("changelog-file.prefix", "changelog-") or "changelog-",
            compression=options.file_compression,
            suffix_include_compression=include,
            external_dir=join_path(external_root, relative) if external_root else None,
        )
