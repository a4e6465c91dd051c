"""Query authorization on read: the row filters and column masks a catalog makes a read apply.

A table with ``query-auth.enabled=true`` opened through a catalog that decides who sees what (the commit
service: :func:`paimon_meta.connect_service`) carries a :data:`QueryAuth` (``FileStoreTable.query_auth``):
the scan asks it, once per plan, for the rules of the columns read (``POST .../auth`` with the projected
columns) and attaches them to every split it plans. A read applies a split's rules (Java's
``TableQueryAuthResult.doAuth``, pypaimon's ``QueryAuthSplit``): it reads the columns the rules need
besides the selected ones (:meth:`RowRules.needed_columns`), filters the raw rows, computes each mask from
the raw row, and returns the selected columns only. The rules travel with the split, so an executor that
opens the table by path (Spark) applies the rules its driver was given: one implementation,
``paimon_meta.governance.policies.QueryRules``, which this protocol describes (the table layer does not
import governance: it sits above).

A table opened without such a catalog (by path, or through the metastore: an operator's read, with the
storage rights to read every file anyway) carries no ``QueryAuth`` and reads every row unmasked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import pyarrow as pa

from paimon_meta.model.schema import TableSchema

#: The table option that makes readers ask the catalog for row filters and column masks.
QUERY_AUTH_ENABLED = "query-auth.enabled"


class RowRules(Protocol):
    """The rules of one read (``QueryRules``): picklable, carried by each split of a plan."""

    @property
    def restricted(self) -> bool:
        """Whether any filter or mask applies (False: the rows are read as they are)."""
        ...

    def needed_columns(self, selected: Sequence[str]) -> list[str]:
        """The columns a read of ``selected`` must read to apply the rules (``selected`` first)."""
        ...

    def apply_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` filtered, then masked (its columns kept)."""
        ...


#: Asked by a scan of a ``query-auth.enabled`` table: the rules of a read of ``select`` (the projected
#: columns; None: no projection, every column) of a table whose read schema is the given one. Raises
#: ``AccessDeniedError`` (the read is not allowed) or ``PolicyRuleError`` (rules that cannot be applied
#: exactly): never returns "no rules" for rules it could not understand.
QueryAuth = Callable[[TableSchema, Sequence[str] | None], RowRules]


def query_auth_enabled(*schemas: TableSchema) -> bool:
    """Whether any of ``schemas`` (the table's latest, the one read) sets ``query-auth.enabled=true``."""
    return any((s.options.get(QUERY_AUTH_ENABLED) or "").strip().lower() == "true" for s in schemas)


def apply_rules(rules: RowRules, data: pa.Table, selected: Sequence[str]) -> pa.Table:
    """``data`` (holding ``rules.needed_columns(selected)``) filtered and masked, projected to
    ``selected``. The masked columns come back nullable (a mask may produce nulls)."""
    batches = data.to_batches() or [pa.RecordBatch.from_pylist([], schema=data.schema)]
    return pa.Table.from_batches([rules.apply_batch(b).select(list(selected)) for b in batches])
