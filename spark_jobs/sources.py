"""Input DataFrames for the command-line jobs: Parquet/CSV files, a Spark table, or generated rows."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from paimon_meta.errors import ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import AtomicType, DataField, TypeRoot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_GENERATED_PARTITIONS = 4
_SPARK_INTEGERS = {
    TypeRoot.TINYINT: "tinyint",
    TypeRoot.SMALLINT: "smallint",
    TypeRoot.INT: "int",
    TypeRoot.BIGINT: "bigint",
}


def _generated_column(field: DataField, role: str) -> str:
    """A Spark SQL expression over ``id`` producing values for ``field``: ``id`` itself for keys,
    ``id % 4`` for partition columns, a derived value otherwise."""
    name, dtype = field.name, field.type
    root = dtype.root
    value = "id" if role == "key" else f"(id % {_GENERATED_PARTITIONS})" if role == "partition" else None
    if root in _SPARK_INTEGERS:
        source = value or "(id * 7919 % 1000003)"
        if root in (TypeRoot.TINYINT, TypeRoot.SMALLINT) and value != "id":
            source = f"({source} % 100)"
        return f"cast({source} as {_SPARK_INTEGERS[root]}) as `{name}`"
    if root in (TypeRoot.CHAR, TypeRoot.VARCHAR):
        prefix = {"partition": "p", "key": "k"}.get(role, "v")
        return f"concat('{prefix}', cast({value or '(id * 31 % 100000)'} as string)) as `{name}`"
    if root in (TypeRoot.DOUBLE, TypeRoot.FLOAT):
        return f"cast({value or 'id'} * 0.5 as {root.value.lower()}) as `{name}`"
    if root is TypeRoot.BOOLEAN:
        return f"({value or 'id'} % 2 = 0) as `{name}`"
    if root is TypeRoot.DATE:
        return f"date_add(date'2024-01-01', cast({value or 'id % 365'} as int)) as `{name}`"
    if root in (TypeRoot.TIMESTAMP, TypeRoot.TIMESTAMP_LTZ):
        spark_type = "timestamp" if root is TypeRoot.TIMESTAMP_LTZ else "timestamp_ntz"
        return f"cast(timestamp_seconds(1700000000 + {value or 'id'}) as {spark_type}) as `{name}`"
    if root is TypeRoot.DECIMAL and isinstance(dtype, AtomicType):
        spark_type = f"decimal({dtype.precision}, {dtype.scale})"
        return f"cast(({value or 'id'} % 100000) / 100 as {spark_type}) as `{name}`"
    if root in (TypeRoot.BINARY, TypeRoot.VARBINARY):
        return f"cast(concat('b', cast({value or 'id'} as string)) as binary) as `{name}`"
    raise ValidationError(f"cannot generate values for column {name!r} of type {dtype}", field=name)


def generated_frame(spark: SparkSession, schema: TableSchema, rows: int, *, start: int = 0) -> DataFrame:
    """``rows`` synthetic rows for ``schema``: primary-key columns take ``id`` (unique),
    partition columns ``id % 4``, other columns values derived from ``id``."""
    exprs = []
    for f in schema.fields:
        if f.name in schema.partition_keys:
            role = "partition"
        elif f.name in schema.primary_keys or (not schema.primary_keys and f is schema.fields[0]):
            role = "key"
        else:
            role = "value"
        exprs.append(_generated_column(f, role))
    return spark.range(start, start + rows).selectExpr(*exprs)


def load_source(spark: SparkSession, args: argparse.Namespace, schema: TableSchema) -> DataFrame:
    """The DataFrame named by the command line's source arguments."""
    if args.source_parquet:
        return spark.read.parquet(args.source_parquet)
    if args.source_csv:
        return spark.read.option("header", "true").option("inferSchema", "true").csv(args.source_csv)
    if args.source_table:
        return spark.table(args.source_table)
    return generated_frame(spark, schema, args.generate)
