"""Partial-update sequence groups (``fields.<s1>[,<s2>...].sequence-group = <f1>,<f2>,...``) as Java Paimon
0.9/1.0's ``PartialUpdateMergeFunction`` merges them.

A group is updated by a row only when the row's sequence fields are not all null and compare (as Java's
``UserDefinedSeqComparator``: field after field, nulls first) greater than or equal to the group's current
ones; then an addition sets every field of the group to the row's values, nulls included, and a retraction
(-U/-D, unless ``ignore-delete``) sets the sequence fields to the row's and the other fields to null. As the
stored sequence only grows, a group ends with the values of its *last row of greatest sequence* among the
rows that reach it, so each group is one sort instead of a row-by-row fold. Fields in no group take the
last non-null value of the additions, as without groups; retractions leave them alone.

A field with ``fields.<f>.aggregate-function`` folds every row that reaches it: in a group, each row whose
sequence fields are not all null (``agg`` from a row not older than the group, ``aggReversed`` from an
older one, ``retract`` from a retraction); in none, every addition. Only functions for which
``aggReversed`` (``agg`` with the operands swapped) is ``agg`` are taken (:data:`COMMUTATIVE`), so the fold
is :func:`paimon_meta.table.mergetree.aggregate.aggregate` over those rows.

Refused with ``UnsupportedError`` naming the option: other aggregate functions (``last_value``,
``first_value``, ``listagg``, ...), ``fields.default-aggregate-function`` (Java 1.0.0 also applies it to
the sequence fields, later versions do not), ``partial-update.remove-record-on-sequence-group``, a
sequence field of BOOLEAN, FLOAT/DOUBLE, binary or nested type (Java's ordering of those is not
reproduced), and a sequence field that is also in another group (Java's result then depends on hash-map
order).
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
    FIELD_AGG_FUNCTION,
    FIELD_SEQUENCE_GROUP,
    FIELDS_DEFAULT_AGG_FUNC,
    FIELDS_PREFIX,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import DataField, TypeRoot
from paimon_meta.table.mergetree import aggregate as agg
from paimon_meta.table.mergetree.aggregate import FieldFunction, Groups

_ORDERED_ROOTS = frozenset(
    {
        TypeRoot.TINYINT,
        TypeRoot.SMALLINT,
        TypeRoot.INT,
        TypeRoot.BIGINT,
        TypeRoot.DECIMAL,
        TypeRoot.CHAR,
        TypeRoot.VARCHAR,
        TypeRoot.DATE,
        TypeRoot.TIME,
        TypeRoot.TIMESTAMP,
        TypeRoot.TIMESTAMP_LTZ,
    }
)
_SUFFIX = "." + FIELD_SEQUENCE_GROUP
# pyarrow >= 25 takes null placement per sort key (the global option is deprecated).
_PER_KEY_NULL_PLACEMENT = int(pa.__version__.split(".")[0]) >= 25
SEPARATOR = ","  # CoreOptions.FIELDS_SEPARATOR; Java splits without trimming
#: The aggregate functions a sequence group takes: those whose aggReversed (Java's agg with the operands
#: swapped, applied to rows older than the group's sequence) equals agg.
COMMUTATIVE = frozenset({agg.SUM, agg.PRODUCT, agg.MIN, agg.MAX, agg.BOOL_AND, agg.BOOL_OR})


@dataclass(frozen=True, slots=True)
class SequenceGroup:
    """One ``fields.<seq>.sequence-group`` option: its sequence fields and the fields it updates."""

    option: str
    sequence_fields: tuple[str, ...]
    members: tuple[str, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        """Every field the group decides: its members, then its sequence fields."""
        return (*self.members, *self.sequence_fields)


def is_sequence_group_key(key: str) -> bool:
    return key.startswith(FIELDS_PREFIX) and key.endswith(_SUFFIX)


def sequence_groups(schema: TableSchema) -> tuple[SequenceGroup, ...]:
    """The partial-update sequence groups of ``schema``, checked as Java's ``SchemaValidation`` and
    ``PartialUpdateMergeFunction.Factory`` check them (ValidationError), plus what we refuse
    (UnsupportedError, see the module docstring)."""
    options = schema.options
    names = list(schema.field_names)
    groups: list[SequenceGroup] = []
    member_of: dict[str, str] = {}
    for key in sorted(k for k in options if is_sequence_group_key(k)):
        sequence_fields = tuple(key[len(FIELDS_PREFIX) : -len(_SUFFIX)].split(SEPARATOR))
        members = tuple(options[key].split(SEPARATOR))
        for name in members:
            if name not in names:
                raise ValidationError(
                    f"Field {name} can not be found in table schema.", option=key, field=name
                )
        for name in sequence_fields:
            if name not in names:
                raise ValidationError(
                    f"The sequence field group: {name} can not be found in table schema.",
                    option=key,
                    field=name,
                )
        for name in members:
            if name in member_of:
                raise ValidationError(
                    f"Field {name} is defined repeatedly by multiple groups: {member_of[name]}, {key}.",
                    option=key,
                    field=name,
                )
            member_of[name] = key
        groups.append(SequenceGroup(key, sequence_fields, members))
    if not groups:
        return ()
    _check_supported(schema, groups, member_of)
    return tuple(groups)


def _check_supported(schema: TableSchema, groups: list[SequenceGroup], member_of: dict[str, str]) -> None:
    options = schema.options
    if (options.get(PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE) or "").strip().lower() == "true":
        # PartialUpdateMergeFunction.Factory (1.0)
        raise ValidationError(
            f"sequence group and {PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE} have conflicting behavior so "
            "should not be enabled at the same time.",
            option=PARTIAL_UPDATE_REMOVE_RECORD_ON_DELETE,
        )
    if PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP in options:
        key = PARTIAL_UPDATE_REMOVE_RECORD_ON_SEQUENCE_GROUP
        # Java 1.0.0's (apache/paimon#4525): neither Java our interop runs has it, and a delete merged in
        # a writer's buffer then leaves a -D of nulls that later merges ignore
        raise UnsupportedError(f"{key} is not supported", option=key)
    if FIELDS_DEFAULT_AGG_FUNC in options:
        # Java 1.0.0 also aggregates the sequence fields with it (apache/paimon#4897 fixed that later)
        key = FIELDS_DEFAULT_AGG_FUNC
        raise UnsupportedError(f"{key} with sequence groups is not supported", option=key)
    sequence_fields = [n for group in groups for n in group.sequence_fields]
    illegal = sorted({n for n in sequence_fields if f"{FIELDS_PREFIX}{n}.{FIELD_AGG_FUNCTION}" in options})
    if illegal:
        raise ValidationError(
            f"Should not defined aggregation function on sequence group: {illegal}",
            option=f"{FIELDS_PREFIX}{illegal[0]}.{FIELD_AGG_FUNCTION}",
        )
    owner: dict[str, str] = {}
    for group in groups:
        for name in group.sequence_fields:
            other = owner.get(name) or member_of.get(name)
            if other is not None:
                raise UnsupportedError(
                    f"sequence field {name} of {group.option} is also in {other}",
                    option=group.option,
                    field=name,
                )
            owner[name] = group.option
            field = schema.field(name)
            if field.type.root not in _ORDERED_ROOTS:
                raise UnsupportedError(
                    f"sequence field {name} of type {field.type.root.value} in {group.option} is not "
                    "supported",
                    option=group.option,
                    field=name,
                )


def read_fields(
    groups: Sequence[SequenceGroup], schema: TableSchema, fields: Sequence[DataField]
) -> list[DataField]:
    """``fields`` and after them the sequence fields their groups need that are not among them (Java's
    ``adjustProjection``)."""
    wanted = {f.name for f in fields}
    extra: list[str] = []
    for f in fields:
        for group in groups:
            if f.name in group.fields:
                extra += [s for s in group.sequence_fields if s not in wanted and s not in extra]
    return [*fields, *(schema.field(n) for n in extra)]


def merge_with_groups(
    groups: Sequence[SequenceGroup],
    *,
    primary_keys: Sequence[str],
    ignore_delete: bool,
    columns: Sequence[pa.Array],
    fields: Sequence[DataField],
    g: Groups,
    sequences: npt.NDArray[np.int64],
    functions: Mapping[str, FieldFunction],
) -> tuple[list[pa.Array], npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Partial-update merge of key groups ``g`` with sequence groups: the value columns, whether Java's
    result is a row of nulls (nothing reached the key: the caller drops it) and the result's sequence
    numbers. ``fields`` must hold the sequence fields of every group one of them is in
    (:func:`read_fields`); ``functions``: the aggregate functions of fields, all in :data:`COMMUTATIVE`."""
    position = {f.name: i for i, f in enumerate(fields)}
    reached = g.is_add if ignore_delete else np.ones(g.n, dtype=bool)
    out: list[pa.Array | None] = [None] * len(columns)
    touched = np.zeros(g.count, dtype=bool)
    for group in groups:
        decided = [position[n] for n in group.fields if n in position]
        if not decided:
            continue
        seq_columns = [columns[position[n]] for n in group.sequence_fields]
        not_empty = np.zeros(g.n, dtype=bool)
        for column in seq_columns:
            not_empty |= agg.valid_mask(column)
        winner = _last_greatest(seq_columns, reached & not_empty, g)
        touched |= winner >= 0
        won_by_add = (winner >= 0) & g.is_add[np.maximum(winner, 0)]
        for i in decided:
            fn = functions.get(fields[i].name)
            if fn is not None:
                # agg() from rows of greater or equal sequence, aggReversed() (= agg() with the operands
                # swapped: the same for these functions) from older ones, retract() from both
                out[i] = _fold(fn, columns[i], reached & not_empty, g)
                continue
            rows = winner if fields[i].name in group.sequence_fields else np.where(won_by_add, winner, -1)
            out[i] = agg.take(columns[i], rows)
    last_add = g.last_where(g.is_add)
    touched |= last_add >= 0
    for i, (column, field) in enumerate(zip(columns, fields)):
        if out[i] is not None:
            continue
        fn = functions.get(field.name)
        if fn is not None:
            out[i] = _fold(fn, column, g.is_add, g)  # in no group: retractions never reach it
        elif field.name in primary_keys:
            # equal in every row of a key; Java leaves it null when no row was an addition
            out[i] = agg.take(column, g.last)
        else:
            out[i] = agg.take(column, g.last_where(g.is_add & agg.valid_mask(column)))
    # latestSequenceNumber: the last addition's; none: the key's last row's (Java keeps a stale value)
    result_sequences = sequences[np.where(last_add >= 0, last_add, g.last)]
    return [c for c in out if c is not None], ~touched, result_sequences


def _fold(fn: FieldFunction, column: pa.Array, reaching: npt.NDArray[np.bool_], g: Groups) -> pa.Array:
    """``fn`` folded, per key group, over the rows ``reaching`` its field (null where none does)."""
    if fn.name not in agg.RETRACTABLE and not fn.ignore_retract and np.any(reaching & ~g.is_add & g.in_multi):
        raise UnsupportedError(agg.retraction_message(fn.name), field=fn.field, function=fn.name)
    rows = np.flatnonzero(reaching).astype(np.int64)
    present = np.full(g.count, -1, dtype=np.int64)
    if len(rows) == 0:
        return agg.take(column, present)
    row_groups = g.row_group[rows]
    starts = np.flatnonzero(np.append(True, row_groups[1:] != row_groups[:-1])).astype(np.int64)
    kinds = np.where(g.is_add[rows], 0, 3).astype(np.int8)
    folded = agg.aggregate(fn, column.take(pa.array(rows)), Groups(starts, len(rows), kinds))
    present[row_groups[starts]] = np.arange(len(starts), dtype=np.int64)
    return agg.take(folded, present)


def _last_greatest(
    seq_columns: Sequence[pa.Array], eligible: npt.NDArray[np.bool_], g: Groups
) -> npt.NDArray[np.int64]:
    """Per key group, the last eligible row whose sequence fields are the greatest (nulls first); -1: none."""
    winner = np.full(g.count, -1, dtype=np.int64)
    rows = np.flatnonzero(eligible).astype(np.int64)
    if len(rows) == 0:
        return winner
    taken = pa.array(rows)
    table = pa.table(
        {
            "g": pa.array(g.row_group[rows]),
            **{f"s{j}": c.take(taken) for j, c in enumerate(seq_columns)},
            "i": taken,
        }
    )
    keys = ["g", *(f"s{j}" for j in range(len(seq_columns))), "i"]
    if _PER_KEY_NULL_PLACEMENT:
        order = pc.sort_indices(table, sort_keys=[(k, "ascending", "at_start") for k in keys])
    else:
        order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys], null_placement="at_start")
    order = order.to_numpy()
    sorted_groups = g.row_group[rows[order]]
    last = np.flatnonzero(np.append(sorted_groups[1:] != sorted_groups[:-1], True))
    winner[sorted_groups[last]] = rows[order[last]]
    return winner
