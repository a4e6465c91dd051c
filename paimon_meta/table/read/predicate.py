"""Row predicates for pruning a scan: partitions exactly, data files by their column statistics.

A predicate is a conjunction (a sequence) of :class:`Leaf` and :class:`Not` terms on single columns,
with SQL's three-valued logic: a comparison with null is unknown, and only rows whose predicate is
true are kept. Two uses, both on the driver, before any data file is opened:

* :func:`partition_predicate` turns the terms on partition columns into a predicate over a split's
  decoded partition tuple (``ReadBuilder.with_partition_filter`` / ``FileStoreScan``): exact, since
  every row of a split has its partition values.
* :class:`FileStatsFilter` decides from a ``DataFileMeta``'s min/max/null-count statistics whether a
  file *may* hold a matching row, as Java's ``AppendOnlyFileStoreScan`` (value stats) and
  ``KeyValueFileStoreScan`` (key stats only: skipping a primary-key file by a value column could
  resurrect an older version of a key). Statistics never prove a row matches, so the caller still
  filters the rows it reads; unknown or unreadable statistics keep the file.

Only types whose Python values compare exactly as SQL compares them take part (:func:`comparable`):
integers, booleans, strings, dates and decimals. Floating point (NaN orders differently), timestamps
and binary columns are left to the engine.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.manifest import DataFileMeta, SimpleStats
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField, DataType, TypeRoot
from paimon_meta.table.read.scan import Split

#: Operators of a :class:`Leaf`. Comparisons and ``starts_with`` take one value, ``in`` any number,
#: the null tests none.
COMPARISONS = ("=", "<", "<=", ">", ">=")
OPERATORS = (*COMPARISONS, "in", "starts_with", "is_null", "is_not_null")

_INTEGERS = frozenset({TypeRoot.TINYINT, TypeRoot.SMALLINT, TypeRoot.INT, TypeRoot.BIGINT})
_ROOTS = frozenset({*_INTEGERS, TypeRoot.BOOLEAN, TypeRoot.VARCHAR, TypeRoot.DATE, TypeRoot.DECIMAL})
# (field id -> position in the stats row, the stats row's types, field id -> the file's type)
_StatsLayout = tuple[dict[int, int], list[DataType], dict[int, DataType]]


@dataclass(frozen=True, slots=True)
class Leaf:
    """``column <op> values``, e.g. ``Leaf("=", "p", ("a",))``, ``Leaf("in", "p", ("a", "b"))``,
    ``Leaf("is_null", "p")``."""

    op: str
    column: str
    values: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Not:
    """The negation of a term (SQL ``NOT``: unknown stays unknown)."""

    child: Term


Term = Leaf | Not


def column_of(term: Term) -> str:
    return term.column if isinstance(term, Leaf) else column_of(term.child)


def comparable(data_type: DataType, value: Any) -> bool:
    """Whether ``value`` (a literal from an engine) compares with the column's decoded values exactly as
    SQL compares them: the types whose BinaryRow values decode to the same Python type."""
    root = data_type.root
    if root in _INTEGERS:
        return isinstance(value, int) and not isinstance(value, bool)
    if root is TypeRoot.BOOLEAN:
        return isinstance(value, bool)
    if root is TypeRoot.VARCHAR:
        return isinstance(value, str)
    if root is TypeRoot.DATE:
        return isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    if root is TypeRoot.DECIMAL:
        return isinstance(value, Decimal) and value.is_finite()
    return False


def supported(term: Term, field: DataField) -> bool:
    """Whether ``term`` can be evaluated on ``field``'s values (operator known, literals comparable)."""
    if isinstance(term, Not):
        return supported(term.child, field)
    if term.op not in OPERATORS:
        return False
    if field.type.root not in _ROOTS:
        return False
    if term.op in ("is_null", "is_not_null"):
        return not term.values
    if term.op == "starts_with":
        return (
            field.type.root is TypeRoot.VARCHAR and len(term.values) == 1 and isinstance(term.values[0], str)
        )
    if term.op in COMPARISONS and len(term.values) != 1:
        return False
    return bool(term.values) and all(comparable(field.type, v) for v in term.values)


# ---- on values ---------------------------------------------------------------------------------------


def evaluate(term: Term, value: Any) -> bool | None:
    """``term`` on one column value: True, False or None (unknown, SQL's null)."""
    if isinstance(term, Not):
        inner = evaluate(term.child, value)
        return None if inner is None else not inner
    op = term.op
    if op == "is_null":
        return value is None
    if op == "is_not_null":
        return value is not None
    if value is None:
        return None
    if op == "in":
        present = [v for v in term.values if v is not None]
        if value in present:
            return True
        return None if len(present) < len(term.values) else False
    (literal,) = term.values
    if op == "starts_with":
        return bool(value.startswith(literal))
    if op == "=":
        return bool(value == literal)
    if op == "<":
        return bool(value < literal)
    if op == "<=":
        return bool(value <= literal)
    if op == ">":
        return bool(value > literal)
    return bool(value >= literal)


def partition_predicate(schema: TableSchema, terms: Sequence[Term]) -> Callable[[tuple[Any, ...]], bool]:
    """A predicate on the decoded partition tuple (ordered as ``schema.partition_keys``) that holds when
    every term (each on a partition column) is true for that partition."""
    index = {k: i for i, k in enumerate(schema.partition_keys)}
    bound = [(index[column_of(t)], t) for t in terms]

    def matches(values: tuple[Any, ...]) -> bool:
        return all(evaluate(t, values[i]) is True for i, t in bound)

    return matches


# ---- on file statistics ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ColumnStats:
    lo: Any
    hi: Any
    nulls: int | None
    rows: int


def _may_match(term: Term, s: _ColumnStats) -> bool:
    """False only when no value within the stats can make ``term`` true."""
    if isinstance(term, Not):
        return True  # bounds rarely prove a negation false; keep the file
    op = term.op
    all_null = s.nulls is not None and s.nulls >= s.rows
    if op == "is_null":
        return s.nulls != 0
    if op == "is_not_null":
        return not all_null
    if all_null:
        return False  # a comparison with null is never true
    lo, hi = s.lo, s.hi
    if lo is None or hi is None:
        return True
    values = [v for v in term.values if v is not None]
    try:
        if op == "in":
            return any(lo <= v <= hi for v in values)
        if not values:
            return False
        (v,) = values
        if op == "=":
            return bool(lo <= v <= hi)
        if op == "<":
            return bool(lo < v)
        if op == "<=":
            return bool(lo <= v)
        if op == ">":
            return bool(hi > v)
        if op == ">=":
            return bool(hi >= v)
        if op == "starts_with":
            # Every string with prefix v is >= v, and its first len(v) characters are >= lo's.
            return bool(hi >= v and lo[: len(v)] <= v)
    except TypeError:
        return True
    return True


class FileStatsFilter:
    """Whether a data file may hold rows matching a conjunction of terms, from its statistics.

    ``schema`` is the read schema (terms name its columns); ``schema_of`` returns the schema a file was
    written with (by ``DataFileMeta.schema_id``): columns are matched by field id, so renamed columns
    keep their statistics, and a column the file does not have (added later) or whose type changed
    keeps the file. Append tables use value statistics of any column; primary-key tables only key
    statistics of the trimmed primary key (``KeyValueFileStoreScan``)."""

    def __init__(
        self, schema: TableSchema, terms: Sequence[Term], schema_of: Callable[[int], TableSchema]
    ) -> None:
        self.schema = schema
        self.schema_of = schema_of
        self.primary_key = bool(schema.primary_keys)
        usable = set(schema.trimmed_primary_keys) if self.primary_key else set(schema.field_names)
        by_name = {f.name: f for f in schema.fields}
        self.terms = [(by_name[column_of(t)], t) for t in terms if column_of(t) in usable]
        self._layouts: dict[tuple[int, tuple[str, ...] | None], _StatsLayout] = {}

    @property
    def active(self) -> bool:
        return bool(self.terms)

    def _layout(self, file: DataFileMeta) -> _StatsLayout:
        """(field id -> stats position, stats row types, field id -> file type) of a file's stats."""
        key = (file.schema_id, None if self.primary_key else file.value_stats_cols)
        cached = self._layouts.get(key)
        if cached is not None:
            return cached
        file_schema = self.schema_of(file.schema_id)
        if self.primary_key:
            fields = [file_schema.field(k) for k in file_schema.trimmed_primary_keys]
        elif file.value_stats_cols is not None:
            by_name = {f.name: f for f in file_schema.fields}
            fields = [by_name[n] for n in file.value_stats_cols if n in by_name]
        else:
            fields = list(file_schema.fields)
        types = [f.type if f.type.nullable else f.type.with_nullable(True) for f in fields]
        layout = ({f.id: i for i, f in enumerate(fields)}, types, {f.id: f.type for f in fields})
        self._layouts[key] = layout
        return layout

    def may_match(self, file: DataFileMeta) -> bool:
        """False only when the file's statistics prove that no row satisfies every term."""
        if not self.terms:
            return True
        try:
            positions, types, file_types = self._layout(file)
            stats: SimpleStats = file.key_stats if self.primary_key else file.value_stats
            if len(types) == 0:
                return True
            mins = deserialize_row(stats.min_values, types)
            maxs = deserialize_row(stats.max_values, types)
        except (CorruptMetadataError, KeyError, ValueError):
            return True  # statistics are an optimisation only: unreadable ones never prune
        nulls = stats.null_counts
        for field, term in self.terms:
            i = positions.get(field.id)
            if i is None or file_types[field.id].root is not field.type.root:
                continue
            null_count = nulls[i] if nulls is not None and i < len(nulls) else None
            if not _may_match(term, _ColumnStats(mins[i], maxs[i], null_count, file.row_count)):
                return False
        return True

    def prune(self, splits: Iterable[Split]) -> list[Split]:
        """``splits`` without the files that cannot match (and without splits left empty)."""
        out = []
        for split in splits:
            keep = [i for i, f in enumerate(split.files) if self.may_match(f)]
            if not keep:
                continue
            if len(keep) == len(split.files):
                out.append(split)
                continue
            deletion_files = (
                tuple(split.deletion_files[i] for i in keep) if split.deletion_files is not None else None
            )
            out.append(
                replace(split, files=tuple(split.files[i] for i in keep), deletion_files=deletion_files)
            )
        return out
