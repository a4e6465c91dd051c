"""What a first-row writer does after writing its level-0 files: Java's lookup compaction
(``LookupMergeTreeCompactRewriter`` with ``FirstRowMergeFunctionWrapper``, forced up from level 0 by
``ForceUpLevel0Compaction``), without which the rows stay invisible: batch reads of first-row tables skip
level 0 (``DataTableBatchScan``) and concatenate the other levels without merging.

The new rows (each key's first, as the in-buffer merge left them) are looked up in the bucket's files above
level 0; a key found there already has its first row, so the new one is dropped (Java's
``contains(key)``). The rest become one sorted run above level 0:

* on the level just above the newest (lowest) occupied level, or on ``num-levels - 1`` when no level above
  0 is occupied (a fresh run: nothing to rewrite);
* when level 1 is taken, merged with the level-1 files whose key range meets the new keys' range (their
  rows are kept as they are: their keys are not among the new ones), so level 1 stays one sorted run.

The result is a compaction increment: ``compact_before`` = the new level-0 files (and rewritten level-1
files), ``compact_after`` = the new run; committed as Java commits it, an APPEND of the level-0 files then a
COMPACT. Like Java's writer, this assumes one writer per bucket; another writer's concurrent compaction of
the same files makes the commit fail with a conflict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_meta.io.base import FileIO
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CompactIncrement
from paimon_meta.model.manifest import DataFileMeta, FileSource
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.file_guard import PathGuard
from paimon_meta.table.file_layout import SEQUENCE_NUMBER_FIELD, FileLayout
from paimon_meta.table.mergetree.merge_engine import MergeEngine, merge_key_value_rows
from paimon_meta.table.read.split_read import read_file_for_rewrite
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.write.data_file import RollingDataFileWriter, row_values

Key = tuple[Any, ...]


class FirstRowLevels:
    """One bucket's files above level 0, as this writer knows them (restored from the latest snapshot,
    then kept up to date with its own compactions)."""

    def __init__(
        self,
        file_io: FileIO,
        schema: TableSchema,
        schemas: SchemaManager,
        layout: FileLayout,
        *,
        bucket_path: str,
        files: Sequence[DataFileMeta],
        max_level: int,
        guard: PathGuard,
    ) -> None:
        self.guard = guard  # the files it reads are named by manifests: they must be the table's
        self.file_io = file_io
        self.schema = schema
        self.schemas = schemas
        self.layout = layout
        self.bucket_path = bucket_path
        self.files = [f for f in files if f.level > 0]
        self.max_level = max_level
        self.key_names = [f.name for f in layout.key_fields]
        self.key_types = [f.type for f in layout.key_fields]

    def _range(self, f: DataFileMeta) -> tuple[Key, Key]:
        return deserialize_row(f.min_key, self.key_types), deserialize_row(f.max_key, self.key_types)

    def _meets(self, f: DataFileMeta, low: Key, high: Key) -> bool:
        f_low, f_high = self._range(f)
        return not (f_high < low or f_low > high)

    def _read(self, f: DataFileMeta) -> pa.Table:
        return read_file_for_rewrite(
            self.file_io,
            self.schema,
            self.schemas,
            self.layout,
            bucket_path=self.bucket_path,
            file=f,
            guard=self.guard,
        )

    def compact(
        self,
        engine: MergeEngine,
        new_files: Sequence[DataFileMeta],
        new_rows: Sequence[pa.Table],
        rolling: RollingDataFileWriter,
    ) -> CompactIncrement:
        """Move ``new_files`` (level 0, holding ``new_rows``) up as the module docstring says, writing
        with ``rolling`` (its files are deleted if this fails)."""
        data = pa.concat_tables(new_rows)
        sort_keys = [(k, "ascending") for k in self.key_names] + [(SEQUENCE_NUMBER_FIELD.name, "ascending")]
        data = data.take(pc.sort_indices(data, sort_keys=sort_keys))
        data = merge_key_value_rows(engine, self.layout, data)  # each key's first row of this commit
        fresh = self._drop_known_keys(data)
        rewrite: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        if fresh.num_rows:
            level, rewrite = self._output(fresh)
            rows = pa.concat_tables([fresh, *(self._read(f) for f in rewrite)])
            rows = rows.take(pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in self.key_names]))
            try:
                rolling.write(rows)
                rolling.flush()
            except BaseException:
                rolling.abort()
                raise
            after = [
                dataclasses.replace(f, level=level, file_source=FileSource.COMPACT) for f in rolling.drain()
            ]
        gone = {f.file_name for f in rewrite}
        self.files = [f for f in self.files if f.file_name not in gone] + after
        return CompactIncrement(compact_before=(*new_files, *rewrite), compact_after=tuple(after))

    def _drop_known_keys(self, data: pa.Table) -> pa.Table:
        """The rows of ``data`` (sorted by key) whose key no file above level 0 holds."""
        if data.num_rows == 0:
            return data
        low = tuple(row_values(data, 0, self.layout.key_fields))
        high = tuple(row_values(data, data.num_rows - 1, self.layout.key_fields))
        candidates = [f for f in self.files if self._meets(f, low, high)]
        if not candidates:
            return data
        known = pa.concat_tables([self._read(f).select(self.key_names) for f in candidates])
        fresh = data.join(known, keys=self.key_names, join_type="left anti", use_threads=False)
        fresh = fresh.take(pc.sort_indices(fresh, sort_keys=[(k, "ascending") for k in self.key_names]))
        return pa.Table.from_arrays(fresh.select(data.column_names).columns, schema=data.schema)

    def _output(self, fresh: pa.Table) -> tuple[int, list[DataFileMeta]]:
        """The level of the new run, and the files of that level it must be merged with."""
        occupied = {f.level for f in self.files}
        if not occupied:
            return self.max_level, []
        newest = min(occupied)
        if newest > 1:
            return newest - 1, []
        low = tuple(row_values(fresh, 0, self.layout.key_fields))
        high = tuple(row_values(fresh, fresh.num_rows - 1, self.layout.key_fields))
        return 1, [f for f in self.files if f.level == 1 and self._meets(f, low, high)]
