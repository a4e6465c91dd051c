"""The row filters and column masks one reader must apply to one table, combined and applied.

The rules of combining (apache/paimon's management API; pypaimon 2.1.0 applies the same):

1. Every applicable row filter applies: they are ANDed. A blank or malformed rule refuses the read
   (reading every row would be the failure); so does a rule naming a column the table no longer has.
2. At most one mask per column: two masks on one column are refused (:class:`PolicyConflictError`),
   never resolved by picking one. A mask computed from another masked column is refused too: it would
   publish that column's raw value.
3. Filters see the raw values; masks apply after filtering, each computed from the raw row, and replace
   their column. A mask on a column the read does not select changes nothing and reads nothing.

:class:`QueryRules` is what ``POST .../auth`` answers (``filter``, ``columnMasking``), parsed and checked
against the table's columns, ready to apply to Arrow data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import PolicyConflictError, PolicyRuleError
from paimon_meta.governance.arrow_rules import predicate_mask, transform_values
from paimon_meta.governance.rules import (
    COLUMN_MASK,
    ROW_FILTER,
    Predicate,
    Transform,
    parse_column_mask,
    parse_row_filter,
    to_json,
)
from paimon_meta.model.types import DataField


@dataclass(frozen=True, slots=True)
class QueryRules:
    """The filters (ANDed) and the masks (column -> transform) of one read, bound to the table's columns."""

    filters: tuple[Predicate, ...] = ()
    masks: tuple[tuple[str, Transform], ...] = ()

    @staticmethod
    def parse(
        filters: Sequence[str] | None, masks: Mapping[str, str] | None, fields: Sequence[DataField]
    ) -> QueryRules:
        """An ``/auth`` answer's ``filter`` and ``columnMasking`` checked against ``fields``; raises
        PolicyRuleError (or PolicyConflictError) naming the rule that cannot be applied."""
        if filters is not None and not isinstance(filters, list | tuple):
            raise PolicyRuleError("row filters must be a list", rule=ROW_FILTER, reason="json")
        if masks is not None and not isinstance(masks, Mapping):
            raise PolicyRuleError("column masks must be a map", rule=COLUMN_MASK, reason="json")
        return QueryRules.combine(list(filters or ()), list((masks or {}).items()), fields)

    @staticmethod
    def combine(
        filters: Iterable[str], masks: Iterable[tuple[str, str]], fields: Sequence[DataField]
    ) -> QueryRules:
        """The rules of several policies (a principal's and its groups') as one read applies them."""
        parsed_filters = tuple(parse_row_filter(text, fields) for text in filters)
        by_column: dict[str, Transform] = {}
        for column, text in masks:
            if not isinstance(column, str) or not column:
                raise PolicyRuleError("a column mask needs its column", rule=COLUMN_MASK, reason="json")
            if column in by_column:
                raise PolicyConflictError(
                    f"two column masks on {column!r}: refusing rather than choosing one",
                    rule=COLUMN_MASK,
                    reason="conflict",
                    column=column,
                )
            by_column[column] = parse_column_mask(text, fields, column)
        for column, transform in by_column.items():
            for source in transform.columns():
                if source != column and source in by_column:
                    raise PolicyConflictError(
                        f"the mask on {column!r} reads {source!r}, which is masked too: it would publish "
                        f"{source!r} unmasked",
                        rule=COLUMN_MASK,
                        reason="conflict",
                        column=column,
                    )
        return QueryRules(parsed_filters, tuple(sorted(by_column.items())))

    @property
    def restricted(self) -> bool:
        return bool(self.filters or self.masks)

    def filter_columns(self) -> list[str]:
        return _unique(c for f in self.filters for c in f.columns())

    def needed_columns(self, selected: Sequence[str]) -> list[str]:
        """The columns a read selecting ``selected`` must read: those, every filter's, and the inputs of
        the masks on selected columns (in this order, each once)."""
        masks = dict(self.masks)
        mask_inputs = (c for name in selected if name in masks for c in masks[name].columns())
        return _unique([*selected, *self.filter_columns(), *mask_inputs])

    def apply(self, data: pa.Table | pa.RecordBatch) -> pa.Table:
        """``data`` with the filters applied, then the masks of the columns it holds; its columns are
        kept (project afterwards). ``data`` must hold every column the filters read and each held mask's
        inputs (:meth:`needed_columns`)."""
        table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
        batches = [self.apply_batch(b) for b in table.combine_chunks().to_batches()]
        if not batches:  # no rows: nothing to filter or mask
            return table
        return pa.Table.from_batches(batches)

    def apply_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One batch filtered and masked (see :meth:`apply`)."""
        if self.filters:
            keep = predicate_mask(self.filters[0], batch)
            for f in self.filters[1:]:
                keep = pc.and_(keep, predicate_mask(f, batch))
            batch = batch.filter(keep)
        if not self.masks:
            return batch
        raw = batch
        for column, transform in self.masks:
            index = raw.schema.get_field_index(column)
            if index < 0:
                continue  # not read: the mask changes nothing
            field = raw.schema.field(index)
            values = transform_values(transform, raw, null_type=field.type)
            if values.type != field.type:
                values = values.cast(field.type)
            batch = batch.set_column(index, pa.field(field.name, field.type, nullable=True), values)
        return batch

    def auth_response(self) -> tuple[list[str], dict[str, str]]:
        """The rules as ``/auth`` answers them: each filter's and mask's canonical JSON."""
        return [to_json(f) for f in self.filters], {c: to_json(t) for c, t in self.masks}


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))
