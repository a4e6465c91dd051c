"""Schema evolution on read: map a data file's columns to the read schema by field id, and cast.

Java's ``SchemaEvolutionUtil``: every file was written with the schema of its ``schema_id``; a column is
found by *field id* (so renames and reorders are transparent), a field the file does not have reads as
null, a dropped field is simply not read, and a type change is a cast from the file's type to the read
type, value for value as Java's ``CastExecutors`` (:mod:`paimon_meta.table.casting.casts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import to_arrow_type
from paimon_meta.model.types import DataType
from paimon_meta.table.casting.casts import ArrowArray, cast_array

__all__ = ["cast_array", "evolve_columns"]


def evolve_columns(
    table: pa.Table,
    file_fields: Mapping[int, tuple[str, DataType]],
    target: Sequence[tuple[int, str, DataType]],
    *,
    fill: Mapping[int, pa.Array] | None = None,
) -> list[ArrowArray]:
    """The target columns of one file's ``table``: by field id from ``file_fields`` (id -> (column
    name, type in the file's schema)), else from ``fill`` (e.g. partition values), else nulls.
    ``ValidationError`` naming the column when its cast fails (``UnsupportedError`` when Java has no
    cast for the pair)."""
    out: list[ArrowArray] = []
    names = set(table.column_names)
    for fid, name, dtype in target:
        source = file_fields.get(fid)
        if source is not None and source[0] in names:
            col = table.column(source[0])
            try:
                out.append(cast_array(col, source[1], dtype))
            except UnsupportedError as e:
                raise UnsupportedError(f"column {name!r} (field id {fid}): {e.message}", field=name) from e
            except ValidationError as e:
                raise ValidationError(f"column {name!r} (field id {fid}): {e.message}", field=name) from e
        elif fill is not None and fid in fill:
            out.append(fill[fid])
        else:
            out.append(pa.nulls(table.num_rows, to_arrow_type(dtype)))
    return out
