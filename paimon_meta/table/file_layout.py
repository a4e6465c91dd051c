"""What a table's data files hold and how they are encoded: Java's ``KeyValue.schema`` and ``SpecialFields``.

An append table's files hold the table's columns; a primary-key table's files hold ``_KEY_<k>`` for each
trimmed primary-key column (field id ``Integer.MAX_VALUE / 2 + id``), ``_SEQUENCE_NUMBER`` BIGINT NOT NULL,
``_VALUE_KIND`` TINYINT NOT NULL, then every table column again (keys included); with
``data-file.thin-mode`` the ``_KEY_`` copies are left out. Writers (:mod:`paimon_meta.table.write.data_file`),
readers (:mod:`paimon_meta.table.read.split_read`) and merge engines
(:mod:`paimon_meta.table.mergetree.merge_engine`) share this description.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from paimon_meta.errors import UnsupportedError, ValidationError
from paimon_meta.model.arrow import to_arrow_field
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, TINYINT, DataField

KEY_FIELD_PREFIX = "_KEY_"
KEY_FIELD_ID_START = 2_147_483_647 // 2  # SpecialFields.KEY_FIELD_ID_START = Integer.MAX_VALUE / 2
SEQUENCE_NUMBER_FIELD = DataField(2_147_483_646, "_SEQUENCE_NUMBER", BIGINT(False))
VALUE_KIND_FIELD = DataField(2_147_483_645, "_VALUE_KIND", TINYINT(False))
SUPPORTED_FORMATS = ("parquet", "orc")
FILE_COMPRESSION_ZSTD_LEVEL = "file.compression.zstd-level"

# Java's file.compression values -> pyarrow codec names, per format.
PARQUET_CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "gzip": "gzip",
    "lz4": "lz4",
    "brotli": "brotli",
    "none": "none",
    "uncompressed": "none",
}
ORC_CODECS = {
    "zstd": "zstd",
    "snappy": "snappy",
    "lz4": "lz4",
    "zlib": "zlib",
    "gzip": "zlib",
    "none": "uncompressed",
    "uncompressed": "uncompressed",
}


def key_field(source: DataField) -> DataField:
    """The ``_KEY_<name>`` column of a primary-key column (``SpecialFields``)."""
    return DataField(KEY_FIELD_ID_START + source.id, KEY_FIELD_PREFIX + source.name, source.type)


@dataclass(frozen=True, slots=True)
class FileLayout:
    """What one table schema's data files hold and how they are encoded.

    ``fields`` are the columns of the rows handed to a writer, in order; primary-key tables have
    ``key_arity`` leading ``_KEY_`` columns followed by ``_SEQUENCE_NUMBER`` and ``_VALUE_KIND``. The
    files hold the same columns (``file_fields``), minus the ``_KEY_`` ones when ``thin``.
    """

    schema_id: int
    fields: tuple[DataField, ...]
    key_arity: int
    file_format: str
    compression: str
    zstd_level: int
    options: Mapping[str, str]
    thin: bool = False

    @staticmethod
    def for_schema(schema: TableSchema) -> FileLayout:
        """The layout Java uses for ``schema`` (``file.format``, ``file.compression``)."""
        opts = schema.core_options
        fmt = opts.file_format
        if fmt not in SUPPORTED_FORMATS:
            raise UnsupportedError(
                f"file.format={fmt!r} is not supported for writing (only parquet and orc)",
                option="file.format",
            )
        codecs = PARQUET_CODECS if fmt == "parquet" else ORC_CODECS
        if opts.file_compression not in codecs:
            raise UnsupportedError(
                f"file.compression={opts.file_compression!r} is not supported for {fmt} files",
                option="file.compression",
            )
        level_text = schema.options.get(FILE_COMPRESSION_ZSTD_LEVEL, "1")
        try:
            zstd_level = int(level_text)
        except ValueError as e:
            raise ValidationError(
                f"option {FILE_COMPRESSION_ZSTD_LEVEL}={level_text!r} is not an integer",
                option=FILE_COMPRESSION_ZSTD_LEVEL,
            ) from e
        if schema.primary_keys:
            keys = tuple(key_field(schema.field(k)) for k in schema.trimmed_primary_keys)
            fields = (*keys, SEQUENCE_NUMBER_FIELD, VALUE_KIND_FIELD, *schema.fields)
            key_arity = len(keys)
        else:
            fields, key_arity = schema.fields, 0
        # Java's supportsThinMode holds for every valid schema: each key column is a value column.
        thin = key_arity > 0 and opts.data_file_thin_mode
        return FileLayout(
            schema.id, fields, key_arity, fmt, opts.file_compression, zstd_level, dict(schema.options), thin
        )

    @property
    def is_key_value(self) -> bool:
        return self.key_arity > 0

    @property
    def key_fields(self) -> tuple[DataField, ...]:
        return self.fields[: self.key_arity]

    @property
    def value_fields(self) -> tuple[DataField, ...]:
        return self.fields[self.key_arity + 2 :] if self.is_key_value else self.fields

    @property
    def value_offset(self) -> int:
        """Index of the first value column in the rows."""
        return self.key_arity + 2 if self.is_key_value else 0

    @property
    def file_fields(self) -> tuple[DataField, ...]:
        """The columns stored in a data file: ``fields`` without the ``_KEY_`` ones in thin mode."""
        return self.fields[self.key_arity :] if self.thin else self.fields

    @property
    def key_value_positions(self) -> tuple[int, ...]:
        """For each key column, the index of its value column in ``value_fields``."""
        by_id = {f.id: i for i, f in enumerate(self.value_fields)}
        return tuple(by_id[f.id - KEY_FIELD_ID_START] for f in self.key_fields)

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the rows handed to a writer (``fields``), with Parquet field ids."""
        return pa.schema([to_arrow_field(f, field_ids=True) for f in self.fields])

    def file_arrow_schema(self) -> pa.Schema:
        """The Arrow schema of a data file (``file_fields``), with Parquet field ids."""
        return pa.schema([to_arrow_field(f, field_ids=True) for f in self.file_fields])
