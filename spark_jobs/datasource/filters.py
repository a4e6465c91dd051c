"""Spark's pushed filters -> :mod:`paimon_meta.table.read.predicate` terms.

Spark hands ``pushFilters`` the conjuncts of a query's WHERE clause that name one column each
(``EqualTo``, comparisons, ``In``, ``IsNull``/``IsNotNull``, ``StringStartsWith``, ``Not`` of those).
Each one lands in one of three places:

* on a **partition column**, of a type :func:`~paimon_meta.table.read.predicate.supported` evaluates
  exactly: a partition term. Splits of other partitions are never planned, and Spark does not
  evaluate the filter again (it is *handled*).
* on a column whose **file statistics** can prune (any column of an append table, the trimmed primary
  key of a primary-key table): a file term. Files whose min/max/null counts exclude every match are
  skipped; the filter goes back to Spark, which still checks each row.
* anything else goes back to Spark untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from paimon_meta.model.schema import TableSchema
from paimon_meta.table.read import predicate
from paimon_meta.table.read.predicate import Leaf, Term

_COMPARISONS: dict[type[Filter], str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


def to_term(f: Filter) -> Term | None:
    """The predicate term of one Spark filter on a top-level column, or None if it has none."""
    if isinstance(f, Not):
        child = to_term(f.child)
        return predicate.Not(child) if child is not None else None
    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return None  # a nested field (a.b.c)
    column = attribute[0]
    op = _COMPARISONS.get(type(f))
    if op is not None:
        return Leaf(op, column, (getattr(f, "value"),))  # noqa: B009 - typed per subclass
    if isinstance(f, In):
        return Leaf("in", column, tuple(f.value))
    if isinstance(f, IsNull):
        return Leaf("is_null", column)
    if isinstance(f, IsNotNull):
        return Leaf("is_not_null", column)
    if isinstance(f, StringStartsWith):
        return Leaf("starts_with", column, (f.value,))
    return None


@dataclass(slots=True)
class PushedFilters:
    """Where each pushed filter went (see the module docstring)."""

    partition_terms: list[Term] = field(default_factory=list)
    file_terms: list[Term] = field(default_factory=list)
    remaining: list[Filter] = field(default_factory=list)


def push(filters: Sequence[Filter], schema: TableSchema) -> PushedFilters:
    """Split ``filters`` (a conjunction) for a read of ``schema``. Deterministic: Spark may replay it."""
    fields = {f.name: f for f in schema.fields}
    partition_keys = set(schema.partition_keys)
    stats_columns = set(schema.trimmed_primary_keys) if schema.primary_keys else set(fields)
    out = PushedFilters()
    for f in filters:
        term = to_term(f)
        column = predicate.column_of(term) if term is not None else None
        if term is None or column not in fields or not predicate.supported(term, fields[column]):
            out.remaining.append(f)
        elif column in partition_keys:
            out.partition_terms.append(term)
        else:
            if column in stats_columns:
                out.file_terms.append(term)
            out.remaining.append(f)
    return out
