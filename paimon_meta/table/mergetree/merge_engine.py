"""Merge engines of primary-key tables (``merge-engine``) as Java Paimon 1.0's ``MergeFunction``s define them.

Merge-on-read, compaction and the writer's in-buffer merge all hand :meth:`MergeEngine.merge` the rows of
some keys in merge order (key, then ``sequence.field``, then ``_SEQUENCE_NUMBER``), cut into one group per
key, and get one row per key back: its values, ``_VALUE_KIND`` and ``_SEQUENCE_NUMBER``. As Java's
``ReducerMergeFunctionWrapper``, a key with a single row keeps that row unchanged (a lone -D stays a -D, to
be dropped by the reader); the engine sees only keys with two rows or more:

* ``deduplicate``: the last row (readers keep their own faster path for it).
* ``partial-update`` (``PartialUpdateMergeFunction``): each field takes the last non-null value; the
  result is +I with the last addition's sequence number. A -U/-D is refused unless ``ignore-delete``
  (skipped) or ``partial-update.remove-record-on-delete`` (a -D forgets the row so far, a -U is skipped;
  a key whose last row is a -D becomes a -D). With sequence groups (``fields.<seq>.sequence-group``), each
  group's fields follow its sequence fields and retractions retract groups, see
  :mod:`paimon_meta.table.mergetree.sequence_group`.
* ``aggregation`` (``AggregateMergeFunction``): every field folds its rows with its
  ``fields.<f>.aggregate-function`` (else ``fields.default-aggregate-function``, else
  ``last_non_null_value``; primary-key fields keep the input), see
  :mod:`paimon_meta.table.mergetree.aggregate`. The
  result is +I with the last row's sequence number; retractions go through each function's ``retract``.
* ``first-row`` (``FirstRowMergeFunction``): the first addition, unchanged. A -U/-D is refused unless
  ``ignore-delete``.

Where Java 1.0 would emit a row of nulls (every row of a key skipped: only retractions under
``ignore-delete``, nothing but -U after the last -D under ``remove-record-on-delete``, or only
retractions whose sequence groups are all null), the key is dropped instead (a -D result). Where only
retractions reached a key but one set a sequence group, Java emits +I with null primary-key fields; ours
has the key's (the retraction must survive a compaction that does not see the key's older rows).

Refused with ``UnsupportedError`` naming the option or function: what
:mod:`~paimon_meta.table.mergetree.sequence_group` refuses
(order-dependent aggregate functions in partial-update,
``partial-update.remove-record-on-sequence-group``, ...), sequence groups under ``aggregation``,
``aggregation.remove-record-on-delete``,
``fields.<f>.distinct``, other ``partial-update.*``/``aggregation.*`` keys, and the aggregate functions of
:data:`aggregate.NOT_IMPLEMENTED` (``count`` is no Java function: refused with Java's message for unknown
ones). The field options only those functions read (``nested-key``, ``count-limit``, ...) need no check
of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.options import (
    AGGREGATION_REMOVE_RECORD_ON_DELETE,
    FIELD_AGG_FUNCTION,
    FIELD_DISTINCT,
    FIELD_IGNORE_RETRACT,
    FIELD_LIST_AGG_DELIMITER,
    FIELDS_DEFAULT_AGG_FUNC,
    FIELDS_PREFIX,
    MERGE_ENGINE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
    SEQUENCE_FIELD,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField
from paimon_meta.table.file_layout import FileLayout
from paimon_meta.table.mergetree import aggregate as agg
from paimon_meta.table.mergetree.aggregate import FieldFunction, Groups
from paimon_meta.table.mergetree.sequence_group import (
    COMMUTATIVE,
    SequenceGroup,
    is_sequence_group_key,
    merge_with_groups,
    read_fields,
    sequence_groups,
)

DEDUPLICATE = "deduplicate"
PARTIAL_UPDATE = "partial-update"
AGGREGATION = "aggregation"
FIRST_ROW = "first-row"
ENGINES = (DEDUPLICATE, PARTIAL_UPDATE, AGGREGATION, FIRST_ROW)
IGNORE_DELETE_KEYS = (  # CoreOptions.IGNORE_DELETE and its fallback keys, in Java's lookup order
    "ignore-delete",
    "first-row.ignore-delete",
    "deduplicate.ignore-delete",
    "partial-update.ignore-delete",
)
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
# Java's partial-update.* / aggregation.* options (any other key under those prefixes is refused: it may
# be a newer Java's, changing the merge)
_KNOWN_ENGINE_KEYS = frozenset(
    {
        "partial-update.ignore-delete",
        PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
        PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
        AGGREGATION_REMOVE_RECORD_ON_DELETE,
    }
)

PARTIAL_UPDATE_DELETE_MESSAGE = "\n".join(
    (
        "By default, Partial update can not accept delete records, you can choose one of the following "
        "solutions:",
        "1. Configure 'ignore-delete' to ignore delete records.",
        "2. Configure 'partial-update.remove-record-on-delete' to remove the whole row when receiving "
        "delete records.",
        "3. Configure 'sequence-group's to retract partial columns.",
    )
)
FIRST_ROW_DELETE_MESSAGE = (
    "By default, First row merge engine can not accept DELETE/UPDATE_BEFORE records.\n"
    "You can config 'first-row.ignore-delete' to ignore the DELETE/UPDATE_BEFORE records."
)


def _flag(options: Mapping[str, str], key: str) -> bool:
    value = options.get(key)
    if value is None:
        return False
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ValidationError(f"option {key}={value!r} is not a boolean", option=key)
    return text == "true"


def ignore_delete(options: Mapping[str, str]) -> bool:
    """``ignore-delete`` (or its first fallback key present): retractions are dropped."""
    for key in IGNORE_DELETE_KEYS:
        if key in options:
            return _flag(options, key)
    return False


def _field_key(field: str, suffix: str) -> str:
    return f"{FIELDS_PREFIX}{field}.{suffix}"


@dataclass(frozen=True, slots=True)
class MergeResult:
    """One row per key group: the value columns, ``_VALUE_KIND`` and ``_SEQUENCE_NUMBER``."""

    columns: list[pa.Array]
    kinds: npt.NDArray[np.int8]
    sequences: npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class MergeEngine:
    """A table's merge engine with the options it reads (see the module docstring)."""

    name: str
    ignore_delete: bool
    remove_record_on_delete: bool
    options: Mapping[str, str]
    primary_keys: tuple[str, ...]
    sequence_groups: tuple[SequenceGroup, ...] = ()

    @staticmethod
    def for_schema(schema: TableSchema) -> MergeEngine:
        """The engine of ``schema``; ValidationError for what Java refuses, UnsupportedError for what
        Java has and paimon_meta does not."""
        options = schema.options
        name = (options.get(MERGE_ENGINE) or DEDUPLICATE).strip().lower()
        if name not in ENGINES:
            raise ValidationError(
                f"merge-engine={name!r} is not a merge engine ({', '.join(ENGINES)})", option=MERGE_ENGINE
            )
        engine = MergeEngine(
            name=name,
            ignore_delete=ignore_delete(options),
            remove_record_on_delete=name == PARTIAL_UPDATE
            and _flag(options, PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE),
            options=options,
            primary_keys=tuple(schema.primary_keys),
            sequence_groups=sequence_groups(schema) if name == PARTIAL_UPDATE else (),
        )
        engine._check(schema)
        return engine

    def _check(self, schema: TableSchema) -> None:
        options = self.options
        if self.name == FIRST_ROW and options.get(SEQUENCE_FIELD):
            raise ValidationError(
                "Do not support use sequence field on FIRST_ROW merge engine.", option=SEQUENCE_FIELD
            )
        for key in options if self.name in (PARTIAL_UPDATE, AGGREGATION) else ():
            if self.name == AGGREGATION and is_sequence_group_key(key):
                raise UnsupportedError(
                    f"sequence groups ({key}) under aggregation are not supported", option=key
                )
            if key.startswith(f"{self.name}.") and key not in _KNOWN_ENGINE_KEYS:
                raise UnsupportedError(f"unknown {self.name} option {key}", option=key)
        if self.name == PARTIAL_UPDATE and not self.sequence_groups:
            if PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP in options:
                key = PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP
                raise UnsupportedError(f"{key} is not supported (no sequence groups)", option=key)
            agg_keys = [FIELDS_DEFAULT_AGG_FUNC] + [
                _field_key(n, FIELD_AGG_FUNCTION) for n in schema.field_names
            ]
            if any(k in options for k in agg_keys):
                # PartialUpdateMergeFunction.Factory: aggregators need a sequence group
                raise ValidationError(
                    "Must use sequence group for aggregation functions.", option=FIELDS_DEFAULT_AGG_FUNC
                )
            if self.remove_record_on_delete and self.ignore_delete:
                raise ValidationError(
                    f"ignore-delete and {PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE} have conflicting behavior "
                    "so should not be enabled at the same time.",
                    option=PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
                )
        if self.name == AGGREGATION:
            if _flag(options, AGGREGATION_REMOVE_RECORD_ON_DELETE):
                key = AGGREGATION_REMOVE_RECORD_ON_DELETE
                raise UnsupportedError(f"{key} is not supported", option=key)
            for field in schema.field_names:
                key = _field_key(field, FIELD_DISTINCT)
                if _flag(options, key):
                    raise UnsupportedError(f"{key}=true is not supported", option=key, field=field)

    # -- aggregation functions --
    def functions(self, fields: Sequence[DataField]) -> list[FieldFunction]:
        """The aggregate function of each of ``fields`` (aggregation engine), type-checked as Java's
        factories check them."""
        default = self.options.get(FIELDS_DEFAULT_AGG_FUNC)
        out = []
        for f in fields:
            key = _field_key(f.name, FIELD_AGG_FUNCTION)
            if f.name in self.primary_keys:
                name = agg.PRIMARY_KEY  # keys are never aggregated, whatever the options say
            else:
                name = (self.options.get(key) or default or agg.LAST_NON_NULL_VALUE).strip()
                if name == agg.FIRST_NOT_NULL_VALUE:
                    name = agg.FIRST_NON_NULL_VALUE
            if name in agg.NOT_IMPLEMENTED:
                raise UnsupportedError(
                    f"aggregate function {name!r} of field {f.name!r} is not supported",
                    option=key if key in self.options else FIELDS_DEFAULT_AGG_FUNC,
                    field=f.name,
                    function=name,
                )
            if name not in agg.IMPLEMENTED:
                raise UnsupportedError(
                    f"Use unsupported aggregation: {name} or spell aggregate function incorrectly!",
                    option=key if key in self.options else FIELDS_DEFAULT_AGG_FUNC,
                    field=f.name,
                    function=name,
                )
            fn = FieldFunction(
                field=f.name,
                data_type=f.type,
                name=name,
                ignore_retract=_flag(self.options, _field_key(f.name, FIELD_IGNORE_RETRACT)),
                delimiter=self.options.get(_field_key(f.name, FIELD_LIST_AGG_DELIMITER), ","),
            )
            fn.check_type()
            out.append(fn)
        return out

    def group_functions(self, fields: Sequence[DataField]) -> dict[str, FieldFunction]:
        """Partial-update with sequence groups: the fields of ``fields`` with an aggregate function
        (``fields.<f>.aggregate-function``; primary keys are never aggregated), by name; only the
        functions of :data:`sequence_group.COMMUTATIVE` are supported."""
        out = {}
        for f in fields:
            key = _field_key(f.name, FIELD_AGG_FUNCTION)
            if key not in self.options or f.name in self.primary_keys:
                continue
            fn = self.functions([f])[0]
            if fn.name not in COMMUTATIVE:
                raise UnsupportedError(
                    f"aggregate function {fn.name!r} of field {f.name!r} is not supported in partial-update",
                    option=key,
                    field=f.name,
                    function=fn.name,
                )
            out[f.name] = fn
        return out

    def check_fields(self, fields: Sequence[DataField]) -> None:
        """Refuse, before anything is read or written, what merging ``fields`` would refuse."""
        if self.name == AGGREGATION:
            self.functions(fields)
        if self.sequence_groups:
            self.group_functions(fields)

    def check_retractions(self, fields: Sequence[DataField]) -> None:
        """Refuse -U/-D input that merging would refuse (the writer checks before writing any)."""
        if self.name == PARTIAL_UPDATE and not (
            self.ignore_delete or self.remove_record_on_delete or self.sequence_groups
        ):
            raise ValidationError(PARTIAL_UPDATE_DELETE_MESSAGE, option=MERGE_ENGINE)
        if self.name == FIRST_ROW and not self.ignore_delete:
            raise ValidationError(FIRST_ROW_DELETE_MESSAGE, option=MERGE_ENGINE)
        if self.sequence_groups:
            grouped = {n for group in self.sequence_groups for n in group.members}
            for name, fn in self.group_functions(fields).items():
                if name in grouped and not fn.retracts:
                    raise UnsupportedError(agg.retraction_message(fn.name), field=fn.field, function=fn.name)
        if self.name == AGGREGATION:
            for fn in self.functions(fields):
                if not fn.retracts:
                    raise UnsupportedError(agg.retraction_message(fn.name), field=fn.field, function=fn.name)

    # -- merging --
    def merge(
        self,
        columns: Sequence[pa.Array],
        fields: Sequence[DataField],
        kinds: npt.NDArray[np.int8],
        sequences: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
    ) -> MergeResult:
        """Merge rows in merge order, one group per key starting at ``starts`` (see the module
        docstring). ``columns`` are the value columns ``fields`` (all of the table's, or a projection)."""
        n = len(kinds)
        if n == 0:
            return MergeResult([c.slice(0, 0) for c in columns], kinds, sequences)
        g = Groups(starts, n, kinds)
        if self.name == AGGREGATION:
            return self._aggregate(columns, fields, kinds, sequences, g)
        if self.name == PARTIAL_UPDATE and self.sequence_groups:
            return self._partial_update_groups(columns, fields, kinds, sequences, g)
        if self.name == PARTIAL_UPDATE:
            return self._partial_update(columns, kinds, sequences, g)
        if self.name == FIRST_ROW:
            if not self.ignore_delete and np.any(~g.is_add & g.in_multi):
                raise ValidationError(FIRST_ROW_DELETE_MESSAGE, option=MERGE_ENGINE)
            first = g.first_where(g.is_add)
            return self._pick(columns, kinds, sequences, g, np.where(g.single, g.starts, first))
        return self._pick(columns, kinds, sequences, g, g.last)

    def _pick(
        self,
        columns: Sequence[pa.Array],
        kinds: npt.NDArray[np.int8],
        sequences: npt.NDArray[np.int64],
        g: Groups,
        rows: npt.NDArray[np.int64],
    ) -> MergeResult:
        """Whole rows (-1: the key has no row left and becomes a -D, values of its last row)."""
        dropped = rows < 0
        rows = np.where(dropped, g.last, rows)
        taken = pa.array(rows)
        out_kinds = np.where(dropped, DELETE, kinds[rows]).astype(np.int8)
        return MergeResult([c.take(taken) for c in columns], out_kinds, sequences[rows])

    def _partial_update(
        self,
        columns: Sequence[pa.Array],
        kinds: npt.NDArray[np.int8],
        sequences: npt.NDArray[np.int64],
        g: Groups,
    ) -> MergeResult:
        if not (self.ignore_delete or self.remove_record_on_delete) and np.any(~g.is_add & g.in_multi):
            raise ValidationError(PARTIAL_UPDATE_DELETE_MESSAGE, option=MERGE_ENGINE)
        counted = g.is_add
        deleted = np.zeros(g.count, dtype=bool)
        if self.remove_record_on_delete:
            # A -D forgets everything before it; the key is a -D when its last row is one.
            last_delete = g.last_where(kinds == DELETE)
            counted = g.is_add & (g.index > last_delete[g.row_group])
            deleted = kinds[g.last] == DELETE
        last_add = g.last_where(counted)
        deleted |= last_add < 0
        merged_rows = ~g.single & ~deleted
        out = []
        for column in columns:
            # Each field: the last non-null value of the counted rows; nulls never overwrite.
            last = g.last_where(counted & agg.valid_mask(column))
            rows = np.where(merged_rows, last, np.where(g.single, g.starts, g.last))
            out.append(agg.take(column, rows))
        out_kinds = np.where(deleted & ~g.single, DELETE, INSERT).astype(np.int8)
        out_kinds = np.where(g.single, kinds[g.starts], out_kinds).astype(np.int8)
        # latestSequenceNumber: the last addition's (any addition of the key), else its last row's
        any_add = g.last_where(g.is_add)
        out_sequences = sequences[np.where(g.single | (any_add < 0), g.last, any_add)]
        return MergeResult(out, out_kinds, out_sequences)

    def _partial_update_groups(
        self,
        columns: Sequence[pa.Array],
        fields: Sequence[DataField],
        kinds: npt.NDArray[np.int8],
        sequences: npt.NDArray[np.int64],
        g: Groups,
    ) -> MergeResult:
        merged, nulls, merged_sequences = merge_with_groups(
            self.sequence_groups,
            primary_keys=self.primary_keys,
            ignore_delete=self.ignore_delete,
            columns=columns,
            fields=fields,
            g=g,
            sequences=sequences,
            functions=self.group_functions(fields),
        )
        out = [pc.if_else(pa.array(g.single), c.take(pa.array(g.starts)), m) for c, m in zip(columns, merged)]
        out_kinds = np.where(g.single, kinds[g.starts], np.where(nulls, DELETE, INSERT)).astype(np.int8)
        out_sequences = np.where(g.single, sequences[g.starts], merged_sequences)
        return MergeResult(out, out_kinds, out_sequences)

    def read_fields(self, schema: TableSchema, fields: Sequence[DataField]) -> list[DataField]:
        """The fields a read of ``fields`` must merge: they, then the sequence fields of their sequence
        groups (Java's ``adjustProjection``); the extra ones are dropped after the merge."""
        return read_fields(self.sequence_groups, schema, fields) if self.sequence_groups else list(fields)

    def _aggregate(
        self,
        columns: Sequence[pa.Array],
        fields: Sequence[DataField],
        kinds: npt.NDArray[np.int8],
        sequences: npt.NDArray[np.int64],
        g: Groups,
    ) -> MergeResult:
        single = pa.array(g.single)
        any_single = bool(g.single.any())
        starts = pa.array(g.starts)
        out = []
        for fn, column in zip(self.functions(fields), columns):
            folded = agg.aggregate(fn, column, g)
            out.append(pc.if_else(single, column.take(starts), folded) if any_single else folded)
        out_kinds = np.where(g.single, kinds[g.starts], INSERT).astype(np.int8)
        return MergeResult(out, out_kinds, sequences[g.last])


def key_group_starts(columns: Sequence[pa.Array | pa.ChunkedArray], num_rows: int) -> npt.NDArray[np.int64]:
    """Where each run of equal keys starts in ``num_rows`` rows sorted by key (``columns``: the key
    columns; none when the whole primary key is partition columns: one key per bucket)."""
    n = num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for column in columns:
        differs = pc.not_equal(column.slice(0, n - 1), column.slice(1))
        if isinstance(differs, pa.ChunkedArray):
            differs = differs.combine_chunks()
        change[1:] |= np.asarray(differs.fill_null(True), dtype=bool)
    return np.flatnonzero(change).astype(np.int64)


def merge_key_value_rows(engine: MergeEngine, layout: FileLayout, data: pa.Table) -> pa.Table:
    """Rows of a primary-key ``layout`` (``_KEY_*``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``, values),
    sorted by key and then in merge order, merged to one row per key in the same layout."""
    n = data.num_rows
    key_names = [f.name for f in layout.key_fields]
    starts = key_group_starts([data.column(k) for k in key_names], n)
    offset = layout.value_offset
    result = engine.merge(
        [data.column(offset + i).combine_chunks() for i in range(len(layout.value_fields))],
        layout.value_fields,
        data.column(layout.key_arity + 1).to_numpy(),
        data.column(layout.key_arity).to_numpy(),
        starts,
    )
    first_rows = pa.array(starts)
    columns = [data.column(k).take(first_rows) for k in key_names]
    columns += [pa.array(result.sequences, pa.int64()), pa.array(result.kinds, pa.int8()), *result.columns]
    return pa.Table.from_arrays(columns, schema=layout.arrow_schema())
