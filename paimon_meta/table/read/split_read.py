"""Reading splits into Arrow: data files, deletion vectors, schema evolution, merge-on-read.

* Append tables: each file's rows (minus deleted positions) mapped to the read schema, concatenated.
* Primary-key tables (``merge-engine=deduplicate``): per key the row that sorts last wins, in Java's
  ``SortMergeReaderWithMinHeap`` order: ``sequence.field`` values (nulls first, honouring
  ``sequence.field.sort-order``), then ``_SEQUENCE_NUMBER``, then retractions before additions; a
  winning ``-U``/``-D`` row removes the key (``DropDeleteReader``). Remaining ties (which Java leaves
  to heap order) go to the newer file: lower level, then higher max sequence number, then the later
  row. Only the value columns are returned. Keys are read from the value columns, never from the
  ``_KEY_*`` copies (Java >= 1.0): thin-mode files, which have no copies, read like the others.
  A bucket is read by key section (Java's ``IntervalPartition``, ``mergetree.intervals``):
  sections hold disjoint key ranges, so each merges on its own and a section of one file (one row per key)
  is read as-is, its retractions dropped: a compacted base next to a few new files is not merged.
* Other merge engines (``partial-update``, ``aggregation``, ``first-row``): rows sorted by key and then
  in the same order are folded per key by
  :mod:`paimon_meta.table.mergetree.merge_engine`, and keys whose result is
  a retraction are dropped. First-row reads skip level-0 files and concatenate the others (scan).
* Deletion-vector tables: positions marked in a file's vector are dropped before anything else.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as pa_orc
import pyarrow.parquet as pq

from paimon_meta.errors import CorruptMetadataError, UnsupportedError, ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.arrow import to_arrow_schema, to_arrow_type
from paimon_meta.model.binary_row import Timestamp
from paimon_meta.model.manifest import DataFileMeta
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, TINYINT, DataField, DataType, TypeRoot
from paimon_meta.serde.orc_timestamps import LTZ_LEGACY_OPTION, correct_timestamps, writer_timezone
from paimon_meta.table.file_guard import PathGuard
from paimon_meta.table.file_layout import FileLayout
from paimon_meta.table.mergetree.intervals import key_sections
from paimon_meta.table.mergetree.merge_engine import DEDUPLICATE, MergeEngine, key_group_starts
from paimon_meta.table.read.deletion_vectors import DeletionFile, read_deletion_vector
from paimon_meta.table.read.evolution import evolve_columns
from paimon_meta.table.read.scan import Split
from paimon_meta.table.snapshots import SchemaManager

SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
SEQUENCE_FIELD = "sequence.field"
SEQUENCE_FIELD_SORT_ORDER = "sequence.field.sort-order"
DATA_EVOLUTION_ENABLED = "data-evolution.enabled"
_ADD_KINDS = pa.array([0, 2], pa.int8())  # +I, +U; -U (1) and -D (3) retract
_COMPRESSION_EXTENSIONS = frozenset({"gz", "bz2", "deflate", "snappy", "lz4", "zst", "zstd"})

FieldTarget = tuple[int, str, DataType]
# pyarrow >= 25 takes null placement per sort key (the global option is deprecated).
_PER_KEY_NULL_PLACEMENT = int(pa.__version__.split(".")[0]) >= 25


def file_format_of(file_name: str) -> str:
    """``DataFilePathFactory.formatIdentifier``: the extension, skipping a compression suffix."""
    parts = file_name.rsplit(".", 2)
    if len(parts) < 2:
        raise CorruptMetadataError(f"data file name {file_name!r} has no format extension", path=file_name)
    if parts[-1].lower() in _COMPRESSION_EXTENSIONS and len(parts) == 3:
        return parts[-2].lower()
    return parts[-1].lower()


def read_data_file(
    data: bytes,
    fmt: str,
    columns: Sequence[str],
    *,
    path: str,
    avro_schema: pa.Schema | None = None,
    orc_ltz_legacy: bool = True,
) -> pa.Table:
    """The named columns (those present) of one data file's bytes; ORC timestamps as Java reads them
    (``orc_ltz_legacy``: the table's ``orc.timestamp-ltz.legacy.type``, :func:`orc_ltz_legacy`)."""
    try:
        if fmt == "parquet":
            pf = pq.ParquetFile(pa.BufferReader(data))
            present = set(pf.schema_arrow.names)
            return pf.read(columns=[c for c in columns if c in present], use_threads=False)
        if fmt == "orc":
            of = pa_orc.ORCFile(pa.BufferReader(data))
            present = set(of.schema.names)
            table = of.read(columns=[c for c in columns if c in present])
            if any(_has_timestamp(f.type) for f in table.schema):
                zone = writer_timezone(data, path=path)
                table = correct_timestamps(
                    table, zone, writer=of.writer, ltz_legacy=orc_ltz_legacy, path=path
                )
            return table
        if fmt == "avro":
            records = list(fastavro.reader(io.BytesIO(data)))
            table = (
                pa.Table.from_pylist(records, schema=avro_schema)
                if avro_schema
                else pa.Table.from_pylist(records)
            )
            return table.select([c for c in columns if c in table.column_names])
    except (pa.ArrowException, ValueError, OSError) as e:
        raise CorruptMetadataError(f"cannot read {fmt} data file: {e}", path=path) from e
    raise UnsupportedError(f"data file format {fmt!r} is not supported (parquet, orc, avro)", path=path)


def _has_timestamp(data_type: pa.DataType) -> bool:
    if pa.types.is_timestamp(data_type):
        return True
    return any(_has_timestamp(data_type.field(i).type) for i in range(data_type.num_fields))


def orc_ltz_legacy(schema: TableSchema) -> bool:
    """The table's ``orc.timestamp-ltz.legacy.type`` (default true, as Java's ``OrcOptions``)."""
    return (schema.options.get(LTZ_LEGACY_OPTION) or "true").strip().lower() == "true"


def primary_key_columns(file_schema: TableSchema) -> dict[int, tuple[str, DataType]]:
    """Where a primary-key data file written with ``file_schema`` holds its keys, by field id: the value
    columns of the trimmed primary key. Java (since 1.0, ``FormatReaderMapping.trimKeyFields``) never reads
    the ``_KEY_<k>`` copies, so files that have them and thin-mode files that do not
    (``data-file.thin-mode``; paimon-rust always writes those) read alike, whatever the table option says."""
    return {f.id: (f.name, f.type) for f in (file_schema.field(k) for k in file_schema.trimmed_primary_keys)}


def check_key_value_columns(table: pa.Table, keys: dict[int, tuple[str, DataType]], path: str) -> None:
    """CorruptMetadataError naming ``path`` unless a primary-key file's ``table`` has its system
    columns and the value columns its keys are read from (:func:`primary_key_columns`)."""
    required = (SEQUENCE_NUMBER, VALUE_KIND, *(k for k, _ in keys.values()))
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise CorruptMetadataError(f"primary-key data file lacks columns {missing}", path=path)


def _data_file_path(guard: PathGuard, bucket_path: str, file: DataFileMeta) -> str:
    """Where a data file is (its external path, else in its bucket directory), refused
    (``PathOutsideTableError``) unless it is a file of the table: a manifest naming
    ``../../<other table>/bucket-0/<file>`` or another table's external path must not read its rows."""
    return guard.file_path(bucket_path, file.file_name, file.external_path, field="data file")


def read_file_for_rewrite(
    file_io: FileIO,
    schema: TableSchema,
    schemas: SchemaManager,
    layout: FileLayout,
    *,
    bucket_path: str,
    file: DataFileMeta,
    guard: PathGuard,
) -> pa.Table:
    """One data file's rows in ``layout`` (the current ``schema``'s file layout; older schemas evolved by
    field id), for compaction: primary-key files with their ``_KEY_*`` columns filled from the key
    value columns, so files with and without the copies (thin mode) mix."""
    file_schema = schema if file.schema_id == schema.id else schemas.schema(file.schema_id)
    values = {f.id: (f.name, f.type) for f in file_schema.fields}
    columns = [f.name for f in file_schema.fields]
    file_fields: list[DataField] = list(file_schema.fields)
    keys: dict[int, tuple[str, DataType]] = {}
    if layout.is_key_value:
        keys = primary_key_columns(file_schema)
        columns += [SEQUENCE_NUMBER, VALUE_KIND]
        file_fields = [
            DataField(-1, SEQUENCE_NUMBER, BIGINT(False)),
            DataField(-2, VALUE_KIND, TINYINT(False)),
            *file_fields,
        ]
    path = _data_file_path(guard, bucket_path, file)
    fmt = file_format_of(file.file_name)
    avro_schema = to_arrow_schema(file_fields) if fmt == "avro" else None
    data = read_data_file(
        file_io.read(path),
        fmt,
        columns,
        path=path,
        avro_schema=avro_schema,
        orc_ltz_legacy=orc_ltz_legacy(schema),
    )
    if layout.is_key_value:
        check_key_value_columns(data, keys, path)
    for f in schema.partition_type.fields:
        if f.id not in values or values[f.id][0] not in data.column_names:
            # Java writes partition columns into every data file; a file without them is not ours
            # to rewrite.
            raise UnsupportedError(f"data file lacks partition column {f.name!r}", path=path, field=f.name)
    targets = [(f.id, f.name, f.type) for f in schema.fields]
    out = evolve_columns(data, values, targets)
    if layout.is_key_value:
        key_targets = [(f.id, f.name, f.type) for f in (schema.field(k) for k in schema.trimmed_primary_keys)]
        out = [
            *evolve_columns(data, keys, key_targets),
            data.column(SEQUENCE_NUMBER),
            data.column(VALUE_KIND),
            *out,
        ]
    return pa.Table.from_arrays(out, schema=layout.arrow_schema())


def _constant(value: Any, data_type: DataType, n: int) -> pa.Array:
    arrow_type = to_arrow_type(data_type)
    if value is None:
        return pa.nulls(n, arrow_type)
    if isinstance(value, Timestamp):
        nanos = pa.array(np.full(n, value.to_epoch_nanos(), dtype=np.int64)).cast(pa.timestamp("ns"))
        return pc.cast(nanos, arrow_type, safe=False)
    if data_type.root is TypeRoot.TIME and isinstance(value, int):
        return pa.array([value] * n, pa.int32()).cast(arrow_type)
    return pa.array([value] * n, arrow_type)


def _sort_indices_nulls_first(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Array:
    if _PER_KEY_NULL_PLACEMENT:
        return pc.sort_indices(table, sort_keys=[(name, order, "at_start") for name, order in keys])
    return pc.sort_indices(table, sort_keys=keys, null_placement="at_start")


def _keep_mask(num_rows: int, deleted: np.ndarray) -> pa.Array:
    keep = np.ones(num_rows, dtype=bool)
    keep[deleted[deleted < num_rows]] = False
    return pa.array(keep)


class SplitReader:
    """Reads splits of one table into Arrow tables holding the ``fields`` of ``schema`` (the read
    schema: the table's latest schema, or a time-travelled snapshot's)."""

    def __init__(
        self,
        file_io: FileIO,
        schema: TableSchema,
        schemas: SchemaManager,
        fields: Sequence[DataField],
        *,
        guard: PathGuard,
    ):
        self.file_io = file_io
        # files a manifest names are opened only if they are the table's (table.file_guard)
        self.guard = guard
        self.schema = schema
        self.schemas = schemas
        self.fields = tuple(fields)
        self.output_schema = to_arrow_schema(self.fields)
        options = schema.core_options
        self.has_pk = bool(schema.primary_keys)
        self.engine = MergeEngine.for_schema(schema) if self.has_pk else None
        if self.engine is not None:
            self.engine.check_fields(self.fields)  # only the fields read are merged, as Java's projection
        if (options.get(DATA_EVOLUTION_ENABLED, "false") or "false").lower() == "true":
            # files then hold column subsets stitched by row id, which this reader does not do
            raise UnsupportedError("tables with data-evolution.enabled are not supported")
        self.key_targets: list[FieldTarget] = [
            (f.id, f.name, f.type) for f in (schema.field(k) for k in schema.trimmed_primary_keys)
        ]
        seq = options.get(SEQUENCE_FIELD) or ""
        self.seq_targets: list[FieldTarget] = [
            (f.id, f.name, f.type) for f in (schema.field(n.strip()) for n in seq.split(",") if n.strip())
        ]
        order = (options.get(SEQUENCE_FIELD_SORT_ORDER, "ascending") or "ascending").lower()
        self.seq_order = "descending" if order == "descending" else "ascending"
        # what the merge needs: the fields read, then the sequence fields of their sequence groups
        self.merge_fields = tuple(
            self.engine.read_fields(schema, self.fields) if self.engine else self.fields
        )
        self.out_targets: list[FieldTarget] = [(f.id, f.name, f.type) for f in self.merge_fields]
        self._index_files: dict[str, bytes] = {}
        self.orc_ltz_legacy = orc_ltz_legacy(schema)

    # -- one file --
    def _deleted_positions(self, deletion_file: DeletionFile | None) -> np.ndarray | None:
        if deletion_file is None:
            return None
        data = self._index_files.get(deletion_file.path)
        if data is None:
            self.guard.check(deletion_file.path, field="deletion vector index file")
            data = self.file_io.read(deletion_file.path)
            self._index_files[deletion_file.path] = data
        return read_deletion_vector(data, deletion_file)

    def _read_file(
        self, split: Split, file: DataFileMeta, deletion_file: DeletionFile | None
    ) -> tuple[pa.Table, dict[int, tuple[str, DataType]], dict[int, tuple[str, DataType]]]:
        """The file's needed columns (deleted rows dropped), its value fields and key fields by id."""
        file_schema = self.schema if file.schema_id == self.schema.id else self.schemas.schema(file.schema_id)
        values = {f.id: (f.name, f.type) for f in file_schema.fields}
        keys: dict[int, tuple[str, DataType]] = {}
        wanted = {fid for fid, _, _ in (*self.out_targets, *self.seq_targets)}
        columns = [values[fid][0] for fid in wanted if fid in values]
        avro_fields = list(file_schema.fields)
        if self.has_pk:
            keys = primary_key_columns(file_schema)
            columns += [k for k, _ in keys.values()] + [SEQUENCE_NUMBER, VALUE_KIND]
            avro_fields += [
                DataField(-1, SEQUENCE_NUMBER, BIGINT(False)),
                DataField(-2, VALUE_KIND, TINYINT(False)),
            ]
        path = _data_file_path(self.guard, split.bucket_path, file)
        fmt = file_format_of(file.file_name)
        avro_schema = to_arrow_schema(avro_fields) if fmt == "avro" else None
        columns = list(dict.fromkeys(columns))  # a key may also be an output column: read it once
        table = read_data_file(
            self.file_io.read(path),
            fmt,
            columns,
            path=path,
            avro_schema=avro_schema,
            orc_ltz_legacy=self.orc_ltz_legacy,
        )
        if self.has_pk:
            check_key_value_columns(table, keys, path)
        deleted = self._deleted_positions(deletion_file)
        if deleted is not None and len(deleted):
            table = table.filter(_keep_mask(table.num_rows, deleted))
        return table, values, keys

    def _partition_fill(self, split: Split, n: int) -> dict[int, pa.Array]:
        """Partition columns as constants, for files that do not store them."""
        out = {}
        for f, value in zip(self.schema.partition_type.fields, split.partition_values):
            out[f.id] = _constant(value, f.type, n)
        return out

    # -- one split --
    def read_split(self, split: Split) -> pa.Table:
        """The rows of one split as a table with :attr:`output_schema`."""
        dvs = split.deletion_files or (None,) * len(split.files)
        if not self.has_pk:
            parts = []
            for file, dv in zip(split.files, dvs):
                table, values, _ = self._read_file(split, file, dv)
                fill = self._partition_fill(split, table.num_rows)
                cols = evolve_columns(table, values, self.out_targets, fill=fill)
                parts.append(pa.Table.from_arrays(cols, schema=self.output_schema))
            return pa.concat_tables(parts) if parts else self.output_schema.empty_table()
        return self._read_pk_split(split, dvs)

    def _read_pk_split(self, split: Split, dvs: Sequence[DeletionFile | None]) -> pa.Table:
        indexed = list(zip(split.files, dvs))
        if split.raw_convertible:
            return self._read_pk_files(split, indexed, raw=True)
        sections = self._sections(split)
        if sections is None:
            return self._read_pk_files(split, indexed, raw=False)
        # Java's readerForMergeTree: the bucket is its sections (key ranges no other section holds:
        # ``mergetree.intervals``) in key order; a section of one file holds each key once, its
        # winner is its row, so it reads as-is with retractions dropped; the others merge on their own.
        # A fully compacted base run next to a few new files reads without merging the base.
        dv_of = {id(f): dv for f, dv in indexed}
        parts = []
        lone: list[tuple[DataFileMeta, DeletionFile | None]] = []  # consecutive one-file sections
        for section in sections:
            if len(section) == 1:
                lone.append((section[0], dv_of[id(section[0])]))
                continue
            if lone:
                parts.append(self._read_pk_files(split, lone, raw=True))
                lone = []
            parts.append(self._read_pk_files(split, [(f, dv_of[id(f)]) for f in section], raw=False))
        if lone:
            parts.append(self._read_pk_files(split, lone, raw=True))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _sections(self, split: Split) -> list[list[DataFileMeta]] | None:
        """The split's key sections when reading them one by one is the same as merging the split:
        a merge engine other than ``deduplicate`` folds even a lone row (aggregations of one value,
        partial-update's retraction rules), so only ``deduplicate`` reads by section here."""
        if self.engine is None or self.engine.name != DEDUPLICATE or len(split.files) < 2:
            return None
        key_types = [t for _, _, t in self.key_targets]
        sections = key_sections(split.files, key_types)
        return sections if sections is not None and len(sections) > 1 else None

    def _read_pk_files(
        self, split: Split, files: Sequence[tuple[DataFileMeta, DeletionFile | None]], *, raw: bool
    ) -> pa.Table:
        """``files`` of the split (all of it, or one key section) read into the output schema, merged
        by key unless ``raw`` (no key in two files, so no merge: retractions are just dropped)."""
        n_out, n_key, n_seq = len(self.out_targets), len(self.key_targets), len(self.seq_targets)
        parts = []
        # File age for tie-breaking: higher level = older; within a level, lower max sequence = older.
        ages = sorted(range(len(files)), key=lambda i: (-files[i][0].level, files[i][0].max_sequence_number))
        rank_of = {file_index: age for age, file_index in enumerate(ages)}
        for i, (file, dv) in enumerate(files):
            table, values, keys = self._read_file(split, file, dv)
            n = table.num_rows
            cols = evolve_columns(table, values, self.out_targets)
            if not raw:
                cols += evolve_columns(table, keys, self.key_targets)
                cols += evolve_columns(table, values, self.seq_targets)
                cols += [
                    table.column(SEQUENCE_NUMBER),
                    pa.array(np.full(n, rank_of[i], dtype=np.int32)),
                    pa.array(np.arange(n, dtype=np.int64)),
                ]
            cols.append(table.column(VALUE_KIND))
            parts.append(pa.Table.from_arrays(cols, names=[f"c{j}" for j in range(len(cols))]))
        if not parts:
            return self.output_schema.empty_table()
        merged = pa.concat_tables(parts)
        kind = merged.column(merged.num_columns - 1)
        if raw:
            result = merged.filter(pc.is_in(kind, value_set=_ADD_KINDS))
        else:
            result = self._merge(merged, n_out, n_key, n_seq)
        return pa.Table.from_arrays(result.columns[: len(self.fields)], schema=self.output_schema)

    def _merge(self, merged: pa.Table, n_out: int, n_key: int, n_seq: int) -> pa.Table:
        """Keep, per key, the row that sorts last; drop keys whose winner is a retraction."""
        if self.engine is not None and self.engine.name != DEDUPLICATE:
            return self._merge_with_engine(self.engine, merged, n_out, n_key, n_seq)
        key_names = [f"c{n_out + j}" for j in range(n_key)]
        seq_names = [f"c{n_out + n_key + j}" for j in range(n_seq)]
        base = n_out + n_key + n_seq
        seq_no, age, row, kind = (f"c{base + j}" for j in range(4))
        is_add = pc.is_in(merged.column(kind), value_set=_ADD_KINDS)
        merged = merged.append_column("add", is_add)
        # Java's sequence-field comparator puts nulls first whatever the order (nullIsLast=false);
        # the other keys are never null.
        keys = [(s, self.seq_order) for s in seq_names]
        keys += [(seq_no, "ascending"), ("add", "ascending"), (age, "ascending"), (row, "ascending")]
        order = _sort_indices_nulls_first(merged, keys).to_numpy()
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order), dtype=np.int64)
        keyed = merged.select(key_names).append_column("rank", pa.array(rank))
        winners = keyed.group_by(key_names, use_threads=False).aggregate([("rank", "max")])
        picked = merged.take(pa.array(order[winners.column("rank_max").to_numpy()]))
        picked = picked.filter(picked.column("add"))
        if key_names:
            picked = picked.take(pc.sort_indices(picked, sort_keys=[(k, "ascending") for k in key_names]))
        return picked

    def _merge_with_engine(
        self, engine: MergeEngine, merged: pa.Table, n_out: int, n_key: int, n_seq: int
    ) -> pa.Table:
        """Rows sorted by key then in merge order, each key's rows folded by the merge engine; keys
        whose result is a retraction are dropped (``DropDeleteReader``)."""
        key_names = [f"c{n_out + j}" for j in range(n_key)]
        seq_names = [f"c{n_out + n_key + j}" for j in range(n_seq)]
        base = n_out + n_key + n_seq
        seq_no, age, row, kind = (f"c{base + j}" for j in range(4))
        merged = merged.append_column("add", pc.is_in(merged.column(kind), value_set=_ADD_KINDS))
        keys = [(k, "ascending") for k in key_names] + [(s, self.seq_order) for s in seq_names]
        keys += [(seq_no, "ascending"), ("add", "ascending"), (age, "ascending"), (row, "ascending")]
        ordered = merged.take(_sort_indices_nulls_first(merged, keys))
        starts = key_group_starts([ordered.column(k) for k in key_names], ordered.num_rows)
        result = engine.merge(
            [ordered.column(j).combine_chunks() for j in range(n_out)],
            self.merge_fields,
            ordered.column(kind).to_numpy(),
            ordered.column(seq_no).to_numpy(),
            starts,
        )
        keep = pa.array((result.kinds == 0) | (result.kinds == 2))
        return pa.Table.from_arrays(
            [c.filter(keep) for c in result.columns], names=[f"c{j}" for j in range(n_out)]
        )

    def read(self, splits: Sequence[Split]) -> Iterator[pa.Table]:
        for split in splits:
            yield self.read_split(split)


def resolve_projection(schema: TableSchema, projection: Sequence[str] | None) -> list[DataField]:
    """The read fields for a projection (all fields when None); unknown names are an error."""
    if projection is None:
        return list(schema.fields)
    by_name = {f.name: f for f in schema.fields}
    missing = [n for n in projection if n not in by_name]
    if missing:
        raise ValidationError(
            f"unknown columns {missing}; the table has {schema.field_names}", field=missing[0]
        )
    return [by_name[n] for n in projection]
