"""Column statistics of data files, as Java Paimon records them in ``DataFileMeta``.

Java computes a Parquet/ORC file's stats from the file footer (``ParquetSimpleStatsExtractor``,
``OrcSimpleStatsExtractor``), passes each column's raw stats through its collector's ``convert``
(``SimpleColStatsCollector``: none / counts / full / ``truncate(n)``, chosen per column by
``StatsCollectorFactories``) and stores them as ``SimpleStats`` BinaryRows (``SimpleStatsConverter``,
dense or all-columns). We compute the same raw stats from the Arrow data being written, mirroring
what each footer holds:

* Parquet: no stats for nested columns (their footer paths are ``f.list.element``, not ``f``), so
  they are "none" (dropped from dense stats); TIMESTAMP(p > 6) is INT96 in Java's files: null min/max.
* ORC: nested and BINARY columns have a null count but no min/max; timestamps at any precision.
* FLOAT/DOUBLE columns holding NaN get null min/max (Parquet and ORC disagree on NaN ordering; null
  means "unknown" to every reader, so it is always safe).

Raw min/max are kept in comparable internal forms (timestamps as integers of the column's unit) so
stats of several chunks of one file merge exactly; :meth:`ColumnStatsAccumulator.result` converts
them to the BinaryRow value conventions of :mod:`paimon_meta.model.binary_row`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import ValidationError
from paimon_meta.model.binary_row import Timestamp, serialize_row
from paimon_meta.model.manifest import SimpleStats
from paimon_meta.model.types import AtomicType, DataField, DataType, TypeRoot

METADATA_STATS_MODE = "metadata.stats-mode"
METADATA_STATS_MODE_PER_LEVEL = "metadata.stats-mode.per.level"
METADATA_STATS_DENSE_STORE = "metadata.stats-dense-store"
METADATA_STATS_KEEP_FIRST_N_COLUMNS = "metadata.stats-keep-first-n-columns"
DEFAULT_STATS_MODE = "truncate(16)"
FIELD_STATS_MODE = "fields.{}.stats-mode"
# SpecialFields: columns Java treats as system fields get truncate(128) unless configured per field.
KEY_FIELD_PREFIX = "_KEY_"
SYSTEM_FIELD_NAMES = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind", "_ROW_ID"})
SYSTEM_FIELD_TRUNCATE_LENGTH = 128

_TRUNCATE = re.compile(r"^TRUNCATE\((\d+)\)$")
_NESTED_ROOTS = frozenset(
    {TypeRoot.ARRAY, TypeRoot.MAP, TypeRoot.MULTISET, TypeRoot.ROW, TypeRoot.VARIANT, TypeRoot.BLOB}
)
_STRING_ROOTS = frozenset({TypeRoot.CHAR, TypeRoot.VARCHAR})
_BINARY_ROOTS = frozenset({TypeRoot.BINARY, TypeRoot.VARBINARY})
_TIMESTAMP_ROOTS = frozenset({TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ})
_FLOAT_ROOTS = frozenset({TypeRoot.FLOAT, TypeRoot.DOUBLE})
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


# ---- stats modes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatsMode:
    """One column's collector (``SimpleColStatsCollector.from``): ``none``, ``counts``, ``full`` or
    ``truncate`` with ``length``."""

    kind: str
    length: int = 0

    @staticmethod
    def parse(text: str, *, option: str = METADATA_STATS_MODE) -> StatsMode:
        """Parse a stats-mode option value; ValidationError naming ``option`` if it is not one."""
        upper = text.strip().upper()
        if upper in ("NONE", "COUNTS", "FULL"):
            return StatsMode(upper.lower())
        m = _TRUNCATE.match(upper)
        if m and int(m.group(1)) > 0:
            return StatsMode("truncate", int(m.group(1)))
        raise ValidationError(
            f"option {option}={text!r} is not a stats mode (none, counts, full, truncate(n))", option=option
        )

    def convert(self, raw: ColStats) -> ColStats:
        """The collector's ``convert`` of the raw footer stats of one column."""
        if self.kind == "none":
            return NONE_STATS
        if self.kind == "counts":
            return ColStats(None, None, raw.null_count)
        if self.kind == "full":
            return raw
        high = truncate_max(raw.max, self.length)
        if high is None:
            # TruncateSimpleColStatsCollector: no valid upper bound -> no min/max at all.
            return ColStats(None, None, raw.null_count)
        return ColStats(truncate_min(raw.min, self.length), high, raw.null_count)


def _per_level_mode(options: Mapping[str, str], level: int) -> str | None:
    raw = options.get(METADATA_STATS_MODE_PER_LEVEL)
    if not raw:
        return None
    for item in raw.split(","):
        key, sep, value = item.partition(":")
        if not sep:
            raise ValidationError(
                f"option {METADATA_STATS_MODE_PER_LEVEL}={raw!r} is not a map 'level:mode,...'",
                option=METADATA_STATS_MODE_PER_LEVEL,
            )
        if key.strip() == str(level):
            return value.strip()
    return None


def is_system_field(name: str) -> bool:
    """``SpecialFields.isSystemField(String)``."""
    return name.startswith(KEY_FIELD_PREFIX) or name in SYSTEM_FIELD_NAMES


def stats_modes(
    options: Mapping[str, str],
    field_names: Sequence[str],
    *,
    level: int = 0,
    key_names: Collection[str] = (),
) -> list[StatsMode]:
    """Each column's stats mode, as ``StatsCollectorFactories.createStatsFactories``: a
    ``fields.<name>.stats-mode`` option wins; system columns (``_KEY_*``, ``_SEQUENCE_NUMBER``, ...)
    and, in a thin-mode file, the value columns of the keys (``key_names`` are the ``_KEY_*`` names)
    get ``truncate(128)``; other columns past ``metadata.stats-keep-first-n-columns`` get none; the
    rest use the level's ``metadata.stats-mode.per.level`` entry or ``metadata.stats-mode``."""
    default_text = _per_level_mode(options, level) or options.get(METADATA_STATS_MODE, DEFAULT_STATS_MODE)
    default = StatsMode.parse(default_text)
    keep_text = options.get(METADATA_STATS_KEEP_FIRST_N_COLUMNS, "-1")
    try:
        keep_first = int(keep_text)
    except ValueError as e:
        raise ValidationError(
            f"option {METADATA_STATS_KEEP_FIRST_N_COLUMNS}={keep_text!r} is not an integer",
            option=METADATA_STATS_KEEP_FIRST_N_COLUMNS,
        ) from e
    modes: list[StatsMode] = []
    counted = 0
    for name in field_names:
        key = FIELD_STATS_MODE.format(name)
        field_mode = options.get(key)
        if field_mode is not None:
            modes.append(StatsMode.parse(field_mode, option=key))
            counted += 1
        elif is_system_field(name) or KEY_FIELD_PREFIX + name in key_names:
            modes.append(StatsMode("truncate", SYSTEM_FIELD_TRUNCATE_LENGTH))
        else:
            modes.append(StatsMode("none") if 0 <= keep_first <= counted else default)
            counted += 1
    return modes


def stats_dense_store(options: Mapping[str, str]) -> bool:
    """``metadata.stats-dense-store`` (Java default true)."""
    return (options.get(METADATA_STATS_DENSE_STORE, "true") or "true").strip().lower() == "true"


# ---- truncation (TruncateSimpleColStatsCollector) ------------------------------------------------------


def truncate_min(value: Any, length: int) -> Any:
    """A value <= ``value``: strings cut to ``length`` code points, bytes to ``length`` bytes."""
    if isinstance(value, str):
        return value[:length]
    if isinstance(value, bytes):
        return value[:length]
    return value


def truncate_max(value: Any, length: int) -> Any:
    """A value >= ``value``, or None when none exists (the collector then drops min and max).

    Strings longer than ``length`` code points are cut and their last code point incremented (the
    earlier ones when that overflows past U+10FFFF), as Java's ``truncateMax``. Where Java would step
    onto a lone surrogate (U+D7FF + 1), which UTF-8 cannot hold, we step past the surrogate block to
    U+E000 so the bound stays correct. Bytes longer than ``length`` are cut and their last byte
    below 0xFF incremented.
    """
    if isinstance(value, str):
        if len(value) <= length:
            return value
        cut = value[:length]
        for i in range(length - 1, -1, -1):
            nxt = ord(cut[i]) + 1
            if nxt in _SURROGATES:
                nxt = _SURROGATES.stop
            if nxt <= _MAX_CODE_POINT:
                return cut[:i] + chr(nxt)
        return None
    if isinstance(value, bytes):
        if len(value) <= length:
            return value
        raw = bytearray(value[:length])
        for i in range(length - 1, -1, -1):
            if raw[i] != 0xFF:
                raw[i] += 1
                return bytes(raw[: i + 1])
        return None
    return value


# ---- raw stats from Arrow ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ColStats:
    """Java's ``SimpleColStats``: min, max (BinaryRow value conventions) and null count, each may be
    None. All three None is "none": the column has no stats (dense stores drop it)."""

    min: Any
    max: Any
    null_count: int | None

    def is_none(self) -> bool:
        return self.min is None and self.max is None and self.null_count is None


NONE_STATS = ColStats(None, None, None)


def _precision(data_type: DataType) -> int:
    p = data_type.precision if isinstance(data_type, AtomicType) else None
    return 6 if p is None else p


def _timestamp_unit(array_type: pa.DataType) -> str:
    return str(array_type.unit)


def _min_max(column: pa.Array | pa.ChunkedArray) -> tuple[Any, Any]:
    mm = pc.min_max(column)
    return mm["min"].as_py(), mm["max"].as_py()


class ColumnStatsAccumulator:
    """Raw (footer-equivalent) stats of one column over the chunks written to one file.

    ``file_format`` decides what the footer would hold (see the module docstring).
    """

    __slots__ = ("_data_type", "_format", "_has_stats", "_known", "_max", "_min", "_nulls", "_root", "_unit")

    def __init__(self, data_type: DataType, file_format: str) -> None:
        self._data_type = data_type
        self._root = data_type.root
        self._format = file_format
        self._nulls = 0
        self._min: Any = None
        self._max: Any = None
        self._unit = ""
        # Parquet footers have no stats at all for nested columns.
        self._has_stats = not (self._root in _NESTED_ROOTS and file_format == "parquet")
        # min/max are derivable for this column type in this format (until a chunk says otherwise).
        self._known = self._min_max_supported()

    def _min_max_supported(self) -> bool:
        root = self._root
        if root in _NESTED_ROOTS:
            return False
        if root in _BINARY_ROOTS and self._format == "orc":
            return False
        return not (
            root in _TIMESTAMP_ROOTS and self._format == "parquet" and _precision(self._data_type) > 6
        )

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        """Fold one chunk of the column (already of the column's Arrow type) into the stats."""
        nulls = column.null_count
        self._nulls += nulls
        if not self._known or nulls == len(column):
            return
        root = self._root
        if root in _FLOAT_ROOTS and pc.any(pc.is_nan(column)).as_py():
            self._known = False
            return
        if root in _TIMESTAMP_ROOTS:
            self._unit = _timestamp_unit(column.type)
            column = column.cast(pa.int64())
        elif root is TypeRoot.TIME:
            column = column.cast(pa.int32())
        low, high = _min_max(column)
        if self._min is None or low < self._min:
            self._min = low
        if self._max is None or high > self._max:
            self._max = high

    def _internal(self, value: Any) -> Any:
        if value is None:
            return None
        if self._root in _TIMESTAMP_ROOTS:
            if self._unit == "s":
                return Timestamp.from_epoch_millis(value * 1000)
            if self._unit == "ms":
                return Timestamp.from_epoch_millis(value)
            if self._unit == "us":
                return Timestamp.from_epoch_micros(value)
            return Timestamp.from_epoch_nanos(value)
        if self._root is TypeRoot.DECIMAL:
            return Decimal(value)
        return value

    def result(self) -> ColStats:
        """The raw stats (before the column's stats mode is applied)."""
        if not self._has_stats:
            return NONE_STATS
        if not self._known:
            return ColStats(None, None, self._nulls)
        return ColStats(self._internal(self._min), self._internal(self._max), self._nulls)


def column_stats(column: pa.Array | pa.ChunkedArray, data_type: DataType, file_format: str) -> ColStats:
    """Raw stats of one whole column as the ``file_format`` footer would give them."""
    acc = ColumnStatsAccumulator(data_type, file_format)
    acc.update(column)
    return acc.result()


# ---- SimpleStats BinaryRows (SimpleStatsConverter) -------------------------------------------------


def _nullable(data_type: DataType) -> DataType:
    return data_type if data_type.nullable else data_type.with_nullable(True)


def to_simple_stats(stats: Sequence[ColStats], fields: Sequence[DataField]) -> SimpleStats:
    """``SimpleStatsConverter.toBinaryAllMode``: one entry per field (``none`` columns as nulls)."""
    if len(stats) != len(fields):
        raise ValidationError(f"{len(stats)} column stats for {len(fields)} fields")
    types = [_nullable(f.type) for f in fields]
    return SimpleStats(
        serialize_row([s.min for s in stats], types),
        serialize_row([s.max for s in stats], types),
        tuple(s.null_count for s in stats),
    )


def to_dense_simple_stats(
    stats: Sequence[ColStats], fields: Sequence[DataField]
) -> tuple[tuple[str, ...] | None, SimpleStats]:
    """``SimpleStatsConverter.toBinaryDenseMode``: columns whose stats are "none" are dropped; the
    kept column names are returned, or None when every column was kept (``_VALUE_STATS_COLS`` null)."""
    if len(stats) != len(fields):
        raise ValidationError(f"{len(stats)} column stats for {len(fields)} fields")
    kept = [(s, f) for s, f in zip(stats, fields) if not s.is_none()]
    simple = to_simple_stats([s for s, _ in kept], [f for _, f in kept])
    if len(kept) == len(fields):
        return None, simple
    return tuple(f.name for _, f in kept), simple


def value_stats(
    stats: Sequence[ColStats], fields: Sequence[DataField], options: Mapping[str, str]
) -> tuple[tuple[str, ...] | None, SimpleStats]:
    """Value stats and ``value_stats_cols`` per ``metadata.stats-dense-store``."""
    if stats_dense_store(options):
        return to_dense_simple_stats(stats, fields)
    return None, to_simple_stats(stats, fields)
