"""TableSchema (``org.apache.paimon.schema.TableSchema``, JSON version 3)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from paimon_meta.errors import ValidationError
from paimon_meta.model.options import CoreOptions
from paimon_meta.model.types import DataField, RowType

SCHEMA_VERSION = 3


@dataclass(frozen=True, slots=True)
class TableSchema:
    """One schema version of a table; each change writes ``schema/schema-<id+1>``."""

    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = 0
    version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValidationError(f"duplicate field names in schema {self.id}: {names}")
        for key in (*self.partition_keys, *self.primary_keys):
            if key not in names:
                raise ValidationError(f"key column {key!r} is not a field of schema {self.id}", field=key)
        for what, keys in (("partition", self.partition_keys), ("primary", self.primary_keys)):
            if len(set(keys)) != len(keys):
                raise ValidationError(f"duplicate {what} keys in schema {self.id}: {list(keys)}", field=what)
        ids = [f.id for f in self.fields]
        if len(set(ids)) != len(ids) or any(i < 0 for i in ids):
            raise ValidationError(
                f"field ids of schema {self.id} must be distinct and not negative: {ids}", field="id"
            )
        if self.primary_keys and not set(self.partition_keys) <= set(self.primary_keys):
            raise ValidationError(
                "primary keys must contain all partition keys "
                f"(partition {list(self.partition_keys)}, primary {list(self.primary_keys)})"
            )

    @property
    def core_options(self) -> CoreOptions:
        return CoreOptions(self.options)

    @property
    def row_type(self) -> RowType:
        return RowType(False, self.fields)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise ValidationError(f"no field named {name!r} in schema {self.id}", field=name)

    def fields_by_id(self) -> dict[int, DataField]:
        return {f.id: f for f in self.fields}

    def project(self, names: list[str] | tuple[str, ...]) -> RowType:
        return RowType(False, tuple(self.field(n) for n in names))

    @property
    def partition_type(self) -> RowType:
        return self.project(self.partition_keys)

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """Primary key minus partition columns: the key stored in data files as ``_KEY_<k>``."""
        if not self.primary_keys:
            return []
        trimmed = [k for k in self.primary_keys if k not in self.partition_keys]
        if not trimmed:
            raise ValidationError(f"primary key {list(self.primary_keys)} must not equal the partition keys")
        return trimmed

    @property
    def bucket_keys(self) -> list[str]:
        """The bucket key: ``bucket-key`` option, else the trimmed primary key, else all columns."""
        explicit = self.core_options.bucket_key
        if explicit:
            for k in explicit:
                self.field(k)
            if self.primary_keys and not set(explicit) <= set(self.trimmed_primary_keys):
                raise ValidationError(
                    f"bucket-key {explicit} must be a subset of the primary key {self.trimmed_primary_keys}"
                )
            return explicit
        if self.primary_keys:
            return self.trimmed_primary_keys
        return self.field_names

    @property
    def num_buckets(self) -> int:
        return self.core_options.bucket
