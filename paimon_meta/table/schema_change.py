"""ALTER TABLE: add and rename columns, change column types, set and remove options, comments, writing
``schema/schema-<N+1>``.

:func:`alter` applies several changes as one new schema (the REST catalog's alter); options that decide
how existing files were written (``IMMUTABLE_OPTIONS``) are refused by name.

Matches Java's ``SchemaManager.commitChanges``/``generateTableSchema`` for ``AddColumn`` and
``RenameColumn``: the new schema is derived from the latest one, created if absent (a concurrent ALTER
that took the id first makes us re-read and retry), field ids continue from ``highestFieldId`` and
columns keep their ids when renamed, so files written before the change stay readable.

* Added columns must be nullable (old files have no values for them). The added field takes the next
  id; fields nested in its ROW types then take ids depth-first, children before their parent
  (``ReassignFieldId``). Position: last by default, before the first partition column when
  ``add-column-before-partition`` is true, or ``first``/``after``/``before`` as asked.
* Renames update ``bucket-key``, ``sequence.field`` and the per-field options Java rewrites
  (``fields.<name>.aggregate-function`` etc.). Partition columns are never renamed (Java refuses too);
  primary-key columns only while the table has no snapshot (``_KEY_<name>`` columns of existing data
  files would otherwise carry the old name; Java allows it, we stay on the safe side).
* Type changes (``UpdateColumnType``) are Java's ``updateColumnType`` for top-level columns: the ones
  whose old files Java's ``CastExecutors`` can cast (:func:`paimon_meta.table.casting.casts.can_cast`); files
  keep their type and are cast on read (:mod:`paimon_meta.table.read.evolution`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from paimon_meta.errors import CommitFailedError, TableNotFoundError, ValidationError
from paimon_meta.model import limits
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import ArrayType, DataField, DataType, MapType, MultisetType, RowType
from paimon_meta.table.casting.casts import can_cast
from paimon_meta.table.placement import check_path_option
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager

ADD_COLUMN_BEFORE_PARTITION = "add-column-before-partition"
ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED = "alter-column-null-to-not-null.disabled"
DISABLE_EXPLICIT_TYPE_CASTING = "disable-explicit-type-casting"
RESERVED_NAMES = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind", "_ROW_ID"})
KEY_FIELD_PREFIX = "_KEY_"
MAX_ATTEMPTS = 100
# Per-field option suffixes Java moves to the new name (SchemaManager.applyRenameColumnsToOptions).
_RENAMED_FIELD_OPTION_SUFFIXES = (
    "aggregate-function",
    "ignore-retract",
    "distinct",
    "list-agg-delimiter",
    "map.storage-layout",
    "map.shared-shredding.max-columns",
    "map.shared-shredding.column-placement-policy",
)
_MULTI_FIELD_OPTION_SUFFIXES = ("sequence-group", "nested-key")


@dataclass(frozen=True, slots=True)
class AddColumn:
    """One column to add. At most one of ``first``, ``after``, ``before`` may be given."""

    name: str
    type: DataType
    description: str | None = None
    first: bool = False
    after: str | None = None
    before: str | None = None


ColumnArg = AddColumn | tuple[str, DataType] | tuple[str, DataType, str | None]


class _SchemaSource:
    """The schema and snapshot managers of the table being altered."""

    def __init__(self, target: object) -> None:
        if isinstance(target, SchemaManager):
            self.schemas = target
        else:
            file_io = getattr(target, "file_io", None)
            path = getattr(target, "path", None)
            if file_io is None or not isinstance(path, str):
                raise ValidationError(
                    f"expected a FileStoreTable or SchemaManager, got {type(target).__name__}"
                )
            self.schemas = SchemaManager(file_io, path)
        self.snapshots = SnapshotManager(self.schemas.file_io, self.schemas.paths.root)

    def has_snapshots(self) -> bool:
        return self.snapshots.latest_snapshot_id() is not None


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"column name must be a non-empty string, got {name!r}", field=str(name))
    if name in RESERVED_NAMES or name.startswith(KEY_FIELD_PREFIX):
        raise ValidationError(
            f"column name {name!r} is reserved for Paimon system fields "
            f"({sorted(RESERVED_NAMES)} and the {KEY_FIELD_PREFIX!r} prefix)",
            field=name,
        )


class _IdCounter:
    def __init__(self, value: int) -> None:
        self.value = value

    def next(self) -> int:
        self.value += 1
        return self.value


def _reassign_ids(data_type: DataType, ids: _IdCounter) -> DataType:
    """``ReassignFieldId``: fresh ids for ROW fields nested anywhere in ``data_type``; a field's type
    is visited before the field takes its id (Java evaluates the builder's arguments first)."""
    if isinstance(data_type, RowType):
        fields = []
        for f in data_type.fields:
            inner = _reassign_ids(f.type, ids)
            fields.append(DataField(ids.next(), f.name, inner, f.description, f.default_value))
        return replace(data_type, fields=tuple(fields))
    if isinstance(data_type, ArrayType):
        return replace(data_type, element=_reassign_ids(data_type.element, ids))
    if isinstance(data_type, MultisetType):
        return replace(data_type, element=_reassign_ids(data_type.element, ids))
    if isinstance(data_type, MapType):
        return replace(
            data_type, key=_reassign_ids(data_type.key, ids), value=_reassign_ids(data_type.value, ids)
        )
    return data_type


def _as_add_column(arg: ColumnArg) -> AddColumn:
    if isinstance(arg, AddColumn):
        return arg
    if isinstance(arg, tuple) and len(arg) in (2, 3):
        name, data_type = arg[0], arg[1]
        description = arg[2] if len(arg) == 3 else None
        if not isinstance(data_type, DataType):
            raise ValidationError(f"column {name!r}: expected a DataType, got {data_type!r}", field=str(name))
        return AddColumn(name, data_type, description)
    raise ValidationError(f"expected AddColumn or (name, type[, description]), got {arg!r}")


def _index_of(fields: Sequence[DataField], name: str, what: str) -> int:
    for i, f in enumerate(fields):
        if f.name == name:
            return i
    raise ValidationError(f"{what} column {name!r} does not exist", field=name)


def _insert_position(schema: TableSchema, fields: Sequence[DataField], col: AddColumn) -> int:
    if sum([col.first, col.after is not None, col.before is not None]) > 1:
        raise ValidationError(f"column {col.name!r}: give at most one of first/after/before", field=col.name)
    if col.first:
        return 0
    if col.after is not None:
        return _index_of(fields, col.after, "reference") + 1
    if col.before is not None:
        return _index_of(fields, col.before, "reference")
    before_partition = (schema.options.get(ADD_COLUMN_BEFORE_PARTITION) or "false").lower() == "true"
    if before_partition and schema.partition_keys:
        for i, f in enumerate(fields):
            if f.name in schema.partition_keys:
                return i
    return len(fields)


def apply_add_columns(schema: TableSchema, columns: Iterable[ColumnArg]) -> TableSchema:
    """The schema after adding ``columns`` (in order) to ``schema``; id ``schema.id + 1``."""
    fields = list(schema.fields)
    ids = _IdCounter(schema.highest_field_id)
    names = {f.name for f in fields}
    added = [_as_add_column(c) for c in columns]
    if not added:
        raise ValidationError("add_columns needs at least one column")
    for col in added:
        _check_name(col.name)
        if col.name in names:
            raise ValidationError(f"column {col.name!r} already exists", field=col.name)
        if not col.type.nullable:
            raise ValidationError(
                f"column {col.name!r} cannot be NOT NULL: existing rows have no value for it", field=col.name
            )
        field_id = ids.next()
        data_type = _reassign_ids(col.type, ids)
        fields.insert(
            _insert_position(schema, fields, col), DataField(field_id, col.name, data_type, col.description)
        )
        names.add(col.name)
    return _next_schema(schema, fields, ids.value, schema.primary_keys, schema.options)


def _rename_list(values: Sequence[str], old: str, new: str) -> list[str]:
    return [new if v == old else v for v in values]


def _rename_options(options: Mapping[str, str], old: str, new: str) -> dict[str, str]:
    """``SchemaManager.applyRenameColumnsToOptions`` for one non-nested rename."""
    out = dict(options)
    for key in ("bucket-key", "sequence.field"):
        value = options.get(key)
        if value and value.strip():
            out[key] = ",".join(_rename_list(value.split(","), old, new))
    for suffix in _RENAMED_FIELD_OPTION_SUFFIXES:
        key = f"fields.{old}.{suffix}"
        if key in out:
            out[f"fields.{new}.{suffix}"] = out.pop(key)
    for key in list(options):
        for suffix in _MULTI_FIELD_OPTION_SUFFIXES:
            if key.startswith("fields.") and key.endswith("." + suffix):
                named = key[len("fields.") : -len(suffix) - 1].split(",")
                value = out.pop(key)
                new_key = "fields." + ",".join(_rename_list(named, old, new)) + "." + suffix
                out[new_key] = ",".join(_rename_list(value.split(","), old, new))
    return out


def apply_rename_column(schema: TableSchema, old: str, new: str, *, has_snapshots: bool) -> TableSchema:
    """The schema after renaming column ``old`` to ``new``; id ``schema.id + 1``."""
    _check_name(new)
    fields = list(schema.fields)
    i = _index_of(fields, old, "renamed")
    if any(f.name == new for f in fields):
        raise ValidationError(f"column {new!r} already exists", field=new)
    if old in schema.partition_keys:
        raise ValidationError(f"cannot rename partition column {old!r}", field=old)
    if old in schema.primary_keys and has_snapshots:
        raise ValidationError(
            f"cannot rename primary-key column {old!r} of a table that has data (existing files "
            f"store it as {KEY_FIELD_PREFIX}{old})",
            field=old,
        )
    fields[i] = replace(fields[i], name=new)
    return _next_schema(
        schema,
        fields,
        schema.highest_field_id,
        tuple(_rename_list(schema.primary_keys, old, new)),
        _rename_options(schema.options, old, new),
    )


def _next_schema(
    schema: TableSchema,
    fields: Sequence[DataField],
    highest_field_id: int,
    primary_keys: Sequence[str],
    options: Mapping[str, str],
) -> TableSchema:
    return TableSchema(
        id=schema.id + 1,
        fields=tuple(fields),
        highest_field_id=highest_field_id,
        partition_keys=schema.partition_keys,
        primary_keys=tuple(primary_keys),
        options=dict(options),
        comment=schema.comment,
        time_millis=int(time.time() * 1000),
    )


def _commit(source: _SchemaSource, change: Callable[[TableSchema], TableSchema]) -> TableSchema:
    """Derive from the latest schema and create the next schema file; retry when another ALTER
    created that id first (``SchemaManager.commitChanges``)."""
    for _ in range(MAX_ATTEMPTS):
        latest = source.schemas.latest()
        if latest is None:
            raise TableNotFoundError(f"no schema file under {source.schemas.paths.schema_dir}")
        new = change(latest)
        new.core_options.check_numbers()  # a SetOption Java would refuse is refused here too
        limits.check_table(new, latest)
        if source.schemas.commit_new_schema(new):
            return new
    raise CommitFailedError(f"gave up after {MAX_ATTEMPTS} concurrent schema changes", attempts=MAX_ATTEMPTS)


def add_columns(target: object, columns: Sequence[ColumnArg]) -> TableSchema:
    """Add nullable columns to the table (a ``FileStoreTable`` or its ``SchemaManager``).

    ``columns``: :class:`AddColumn` or ``(name, type[, description])`` tuples. Returns the new
    schema; raises ValidationError naming the column on a duplicate, reserved or NOT NULL column.
    """
    source = _SchemaSource(target)
    cols = list(columns)
    return _commit(source, lambda schema: apply_add_columns(schema, cols))


def rename_column(target: object, old: str, new: str) -> TableSchema:
    """Rename column ``old`` to ``new`` (its field id is kept). Returns the new schema; raises
    ValidationError for unknown/duplicate names, partition columns and primary-key columns of a
    table with data."""
    source = _SchemaSource(target)
    return _commit(
        source, lambda schema: apply_rename_column(schema, old, new, has_snapshots=source.has_snapshots())
    )


def apply_update_column_type(
    schema: TableSchema, name: str, new_type: DataType, *, keep_nullability: bool = False
) -> TableSchema:
    """The schema after changing the type of top-level column ``name`` (Java's ``updateColumnType``):
    not a partition or primary-key column; a NULL column does not become NOT NULL
    (``alter-column-null-to-not-null.disabled``, true by default); only the changes Java can cast old
    files by (``DataTypeCasts.supportsExplicitCast`` or, with ``disable-explicit-type-casting``, the
    implicit ones, and a rule in ``CastExecutors``). Old files keep their type and are cast on read."""
    fields = list(schema.fields)
    i = _index_of(fields, name, "modified")
    if name in schema.partition_keys:
        raise ValidationError(f"cannot update partition column {name!r}", field=name)
    if name in schema.primary_keys:
        raise ValidationError(f"cannot update primary-key column {name!r}", field=name)
    source = fields[i].type
    target = new_type.with_nullable(source.nullable) if keep_nullability else new_type
    null_to_not_null_disabled = (
        schema.options.get(ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED) or "true"
    ).strip().lower() == "true"
    if source.nullable and not target.nullable and null_to_not_null_disabled:
        raise ValidationError(
            f"column {name!r} is nullable and cannot become NOT NULL "
            f"(unless the table sets {ALTER_COLUMN_NULL_TO_NOT_NULL_DISABLED}=false)",
            field=name,
        )
    explicit = (schema.options.get(DISABLE_EXPLICIT_TYPE_CASTING) or "false").strip().lower() != "true"
    if not can_cast(source, target, allow_explicit=explicit):
        raise ValidationError(
            f"Column type {name}[{source}] cannot be converted to {target} without losing information.",
            field=name,
        )
    fields[i] = replace(fields[i], type=target)
    return _next_schema(schema, fields, schema.highest_field_id, schema.primary_keys, schema.options)


def update_column_type(
    target: object, name: str, new_type: DataType, *, keep_nullability: bool = False
) -> TableSchema:
    """Change the type of column ``name`` (see :func:`apply_update_column_type`). Returns the new
    schema; ValidationError naming the column when Java would refuse the change."""
    source = _SchemaSource(target)
    return _commit(
        source,
        lambda schema: apply_update_column_type(schema, name, new_type, keep_nullability=keep_nullability),
    )


# ---- options, comments and several changes in one schema ------------------------------------------------

#: Options that decide where and how existing files were written: changing them would make the table
#: read its files differently (Java's immutable options, plus ``bucket``, whose change needs a rescale).
IMMUTABLE_OPTIONS = frozenset(
    {
        "primary-key",
        "partition",
        "bucket",
        "bucket-key",
        "merge-engine",
        "sequence.field",
        "file.format",
        "deletion-vectors.enabled",
        "changelog-producer",
        "path",
        "type",
    }
)


@dataclass(frozen=True, slots=True)
class SetOption:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class RemoveOption:
    key: str


@dataclass(frozen=True, slots=True)
class UpdateComment:
    comment: str | None


@dataclass(frozen=True, slots=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class UpdateColumnComment:
    name: str
    comment: str | None


@dataclass(frozen=True, slots=True)
class UpdateColumnType:
    """``ALTER TABLE ... MODIFY COLUMN name type``; ``keep_nullability`` keeps the column's nullability."""

    name: str
    type: DataType
    keep_nullability: bool = False


SchemaChange = (
    SetOption
    | RemoveOption
    | UpdateComment
    | AddColumn
    | RenameColumn
    | UpdateColumnComment
    | UpdateColumnType
)


def _check_option_key(key: str) -> None:
    if not isinstance(key, str) or not key.strip():
        raise ValidationError(f"option key must be a non-empty string, got {key!r}", option=str(key))
    if key in IMMUTABLE_OPTIONS:
        raise ValidationError(f"option {key!r} cannot be changed on an existing table", option=key)


def apply_change(schema: TableSchema, change: SchemaChange, *, has_snapshots: bool) -> TableSchema:
    """The schema after one change; id ``schema.id + 1``."""
    if isinstance(change, AddColumn):
        return apply_add_columns(schema, [change])
    if isinstance(change, RenameColumn):
        return apply_rename_column(schema, change.old, change.new, has_snapshots=has_snapshots)
    if isinstance(change, UpdateColumnType):
        return apply_update_column_type(
            schema, change.name, change.type, keep_nullability=change.keep_nullability
        )
    nxt = _next_schema(schema, schema.fields, schema.highest_field_id, schema.primary_keys, schema.options)
    if isinstance(change, SetOption):
        _check_option_key(change.key)
        # an option that places files must keep them in the table (the catalog also checks external
        # locations against its allowlist before it alters: Catalog.alter_table_changes)
        check_path_option(change.key, change.value)
        return replace(nxt, options={**schema.options, change.key: change.value})
    if isinstance(change, RemoveOption):
        _check_option_key(change.key)
        return replace(nxt, options={k: v for k, v in schema.options.items() if k != change.key})
    if isinstance(change, UpdateComment):
        return replace(nxt, comment=change.comment)
    fields = list(schema.fields)
    i = _index_of(fields, change.name, "commented")
    fields[i] = replace(fields[i], description=change.comment)
    return replace(nxt, fields=tuple(fields))


def alter(target: object, changes: Sequence[SchemaChange]) -> TableSchema:
    """Apply ``changes`` in order as ONE new schema (Java's ``SchemaManager.commitChanges``); retried
    on a concurrent ALTER. Returns the new schema; ``ValidationError`` naming the offending change."""
    if not changes:
        raise ValidationError("an ALTER needs at least one change")
    source = _SchemaSource(target)

    def change_all(latest: TableSchema) -> TableSchema:
        has_snapshots = source.has_snapshots()
        schema = latest
        for change in changes:
            schema = replace(apply_change(schema, change, has_snapshots=has_snapshots), id=latest.id + 1)
        return schema

    return _commit(source, change_all)
