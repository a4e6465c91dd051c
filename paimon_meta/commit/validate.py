"""What a commit may name: every file inside its table, every number within its range.

The commit path is the trust boundary: the control plane, the REST commit, the Spark jobs and the
library all hand it files somebody else's code described. Before anything is written (step 1 of the
commit protocol, docs/DESIGN.md) each CommitMessage is checked field by field, and a refusal is a
:class:`~paimon_meta.errors.ValidationError` naming the message index and the field:

* file names (data, changelog, extra, index, deletion-vector targets) are plain names
  (:func:`~paimon_meta.table.containment.name_problem`): the table's own directories give them their
  place, so no name can reach another table's files or leave the warehouse;
* an ``external_path`` lies under one of the table's configured ``data-file.external-paths`` roots and
  ends with the file's own name;
* the bucket fits the table's bucket mode; ``total_buckets`` is a bucket count;
* schema ids exist; levels lie in ``0 .. num-levels - 1``; sizes, row counts, deleted-row counts and
  sequence numbers are non-negative, ordered and within BIGINT, and so are the commit's sums;
* partitions decode as the table's partition row (arity and types);
* no file (partition, bucket, name or external path) is added twice by one commit.

What needs the base (a file added that is already live, a deleted file that is not) is checked under
the lock, in the conflict check (``commit/conflicts.py``, ``table/live_files.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from paimon_meta.errors import PathOutsideTableError, ValidationError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import (
    DataFileMeta,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
)
from paimon_meta.model.schema import TableSchema
from paimon_meta.table.containment import MAX_BIGINT, TableRoots, name_problem
from paimon_meta.table.paths import POSTPONE_BUCKET
from paimon_meta.table.write.arrow_input import num_levels

# Buckets (dynamic-bucket tables number theirs up from 0) and levels are Java ints.
MAX_INT = 2**31 - 1

_DATA_FIELDS = (
    ("data_increment.new_files", True),
    ("data_increment.deleted_files", False),
    ("data_increment.changelog_files", True),
    ("compact_increment.compact_before", False),
    ("compact_increment.compact_after", True),
    ("compact_increment.changelog_files", True),
)
_INDEX_FIELDS = (
    "data_increment.new_index_files",
    "data_increment.deleted_index_files",
    "compact_increment.new_index_files",
    "compact_increment.deleted_index_files",
)


class MessageValidator:
    """Checks CommitMessages against one table's schema and roots (:func:`validate` for one call)."""

    def __init__(
        self,
        schema: TableSchema,
        roots: TableRoots,
        *,
        schema_exists: Callable[[int], bool] | None = None,
    ) -> None:
        self.schema = schema
        self.roots = roots
        self._partition_types = [f.type for f in schema.partition_type.fields]
        self._buckets = schema.num_buckets
        self._primary_key = bool(schema.trimmed_primary_keys)
        self._max_level = _max_level(schema)
        self._schema_exists = schema_exists
        self._known_schemas = {schema.id}

    def validate(self, messages: Sequence[CommitMessage]) -> None:
        """Raise ``ValidationError`` (field, message index) at the first thing a commit may not name."""
        added = _Added()
        for index, msg in enumerate(messages):
            where: dict[str, Any] = {"message_index": index}
            self._placement(msg.partition, msg.bucket, msg.total_buckets, where)
            if msg.check_from_snapshot is not None:
                _int_in(msg.check_from_snapshot, -1, MAX_BIGINT, "check_from_snapshot", where)
            for (increment, adds), files in _data_files(msg):
                for f in files:
                    at = {**where, "increment": increment, "file": _shown(f.file_name)}
                    self._data_file(f, at, adds=adds)
                    if adds:
                        added.add(f.external_path or (msg.partition, msg.bucket, f.file_name), f, at)
            for increment, ifiles in _index_files(msg):
                for i in ifiles:
                    self._index_file(i, {**where, "increment": increment, "file": _shown(i.file_name)})
        added.check_total()

    def validate_entries(self, entries: Sequence[ManifestEntry], *, source: str) -> None:
        """The same checks for manifest entries a client wrote (the REST commit): ``source`` names
        where they come from (``deltaManifestList``, ...); the error names the entry's index."""
        added = _Added()
        decoded: set[bytes] = set()
        for index, e in enumerate(entries):
            where: dict[str, Any] = {
                "entry_index": index,
                "increment": source,
                "file": _shown(e.file.file_name),
            }
            self._placement(e.partition, e.bucket, e.total_buckets, where, decoded=decoded)
            adds = e.kind is FileKind.ADD
            self._data_file(e.file, where, adds=adds)
            if adds:
                added.add(e.file.external_path or (e.partition, e.bucket, e.file.file_name), e.file, where)
        added.check_total()

    def validate_index_entries(self, entries: Sequence[IndexManifestEntry], *, source: str) -> None:
        """Index manifest entries a client wrote: names, external paths, sizes, placement."""
        decoded: set[bytes] = set()
        for index, e in enumerate(entries):
            where: dict[str, Any] = {
                "entry_index": index,
                "increment": source,
                "file": _shown(e.index_file.file_name),
            }
            self._placement(e.partition, e.bucket, None, where, decoded=decoded)
            self._index_file(e.index_file, where)

    # ---- one message or entry ----------------------------------------------------------------------

    def _placement(
        self,
        partition: bytes,
        bucket: int,
        total: int | None,
        where: dict[str, Any],
        *,
        decoded: set[bytes] | None = None,
    ) -> None:
        """The bucket fits the table's bucket mode and the partition decodes as its partition row."""
        label, n = _label(where), self._buckets
        _int_in(bucket, -2, MAX_INT, "bucket", where)
        if n > 0:
            if not 0 <= bucket < n:
                raise ValidationError(
                    f"{label}: bucket {bucket}, the table has {n} buckets", field="bucket", **where
                )
        elif n == -1:
            # Bucket-unaware append tables write bucket 0 only; dynamic-bucket primary-key tables
            # number their buckets from 0.
            if bucket < 0 or (not self._primary_key and bucket != 0):
                mode = "dynamic-bucket" if self._primary_key else "bucket-unaware"
                raise ValidationError(f"{label}: bucket {bucket} on a {mode} table", field="bucket", **where)
        elif n == POSTPONE_BUCKET and bucket < 0 and bucket != POSTPONE_BUCKET:
            raise ValidationError(
                f"{label}: bucket {bucket} on a postpone-bucket table", field="bucket", **where
            )
        if total is not None:
            _int_in(total, -2, MAX_INT, "total_buckets", where)
            if total > 0 and bucket >= total:
                raise ValidationError(
                    f"{label}: bucket {bucket} of {total} total buckets", field="total_buckets", **where
                )
        if decoded is not None and partition in decoded:
            return
        try:
            values = deserialize_row(partition, self._partition_types)
        except Exception as e:
            raise ValidationError(
                f"{label}: partition does not decode as the table's "
                f"{len(self._partition_types)} partition columns: {e}",
                field="partition",
                partition=bytes(partition[:256]).hex(),
                **where,
            ) from e
        # The partition's values are recorded in the metastore (partition statistics), which cannot
        # store NUL in text: refused here, before anything is published.
        if any(isinstance(v, str) and "\x00" in v for v in values):
            raise ValidationError(f"{label}: a partition value contains NUL", field="partition", **where)
        if decoded is not None:
            decoded.add(partition)

    def _data_file(self, f: DataFileMeta, where: dict[str, Any], *, adds: bool) -> None:
        label = _label(where)
        _name(f.file_name, label, "file_name", where)
        for extra in f.extra_files:
            _name(extra, label, "extra_files", where)
        if f.external_path is not None:
            self._external(f.external_path, f.file_name, label, where)
        _int_in(f.file_size, 0, MAX_BIGINT, "file_size", where)
        _int_in(f.row_count, 0, MAX_BIGINT, "row_count", where)
        if f.delete_row_count is not None:
            _int_in(f.delete_row_count, 0, f.row_count, "delete_row_count", where)
        _int_in(f.min_sequence_number, 0, MAX_BIGINT, "min_sequence_number", where)
        _int_in(f.max_sequence_number, f.min_sequence_number, MAX_BIGINT, "max_sequence_number", where)
        # A deleted file's level is what the base says (the conflict check finds it there or refuses).
        _int_in(f.level, 0, self._max_level if adds else MAX_INT, "level", where)
        _int_in(f.schema_id, 0, MAX_BIGINT, "schema_id", where)
        if f.schema_id not in self._known_schemas:
            if self._schema_exists is None or not self._schema_exists(f.schema_id):
                raise ValidationError(
                    f"{label}: schema_id {f.schema_id} of file {f.file_name!r} is not a schema of the table",
                    field="schema_id",
                    **where,
                )
            self._known_schemas.add(f.schema_id)
        if f.creation_time is not None:
            _int_in(f.creation_time, -MAX_BIGINT, MAX_BIGINT, "creation_time", where)
        if f.first_row_id is not None:
            _int_in(f.first_row_id, 0, MAX_BIGINT, "first_row_id", where)

    def _index_file(self, i: IndexFileMeta, where: dict[str, Any]) -> None:
        label = _label(where)
        _name(i.file_name, label, "file_name", where)
        if i.external_path is not None:
            self._external(i.external_path, i.file_name, label, where)
        _int_in(i.file_size, 0, MAX_BIGINT, "file_size", where)
        _int_in(i.row_count, 0, MAX_BIGINT, "row_count", where)
        for dv in i.dv_ranges or ():
            _name(dv.data_file_name, label, "dv_ranges.data_file_name", where)
            _int_in(dv.offset, 0, MAX_BIGINT, "deletion vector offset", where)
            _int_in(dv.length, 0, MAX_BIGINT, "deletion vector length", where)

    def _external(self, path: str, name: str, label: str, where: dict[str, Any]) -> None:
        # Only the configured external roots: a path under the table's own root would be a second
        # spelling of a file the table already places by name.
        if not self.roots.in_external(path):
            raise PathOutsideTableError(
                f"{label} external_path {path[:300]!r} is not under the table's data-file.external-paths "
                f"roots {list(self.roots.external)}",
                path=path[:1000],
                table=self.roots.root,
                field="external_path",
                **where,
            )
        if name_problem(name) is None and not path.rstrip("/").endswith("/" + name):
            raise ValidationError(
                f"{label} external_path {path[:300]!r} does not end with the file name {name!r}",
                field="external_path",
                **where,
            )


def validate_messages(
    messages: Sequence[CommitMessage],
    schema: TableSchema,
    roots: TableRoots,
    *,
    schema_exists: Callable[[int], bool] | None = None,
) -> None:
    """Check ``messages`` for a table with ``schema`` at ``roots`` (see the module docstring)."""
    MessageValidator(schema, roots, schema_exists=schema_exists).validate(messages)


def _data_files(msg: CommitMessage) -> Iterable[tuple[tuple[str, bool], Sequence[DataFileMeta]]]:
    d, c = msg.data_increment, msg.compact_increment
    groups = (
        d.new_files,
        d.deleted_files,
        d.changelog_files,
        c.compact_before,
        c.compact_after,
        c.changelog_files,
    )
    return zip(_DATA_FIELDS, groups)


def _index_files(msg: CommitMessage) -> Iterable[tuple[str, Sequence[IndexFileMeta]]]:
    d, c = msg.data_increment, msg.compact_increment
    groups = (d.new_index_files, d.deleted_index_files, c.new_index_files, c.deleted_index_files)
    return zip(_INDEX_FIELDS, groups)


def _max_level(schema: TableSchema) -> int:
    """The highest level a writer may add a file at: Java's ``CoreOptions.numLevels`` (``num-levels``,
    else ``num-sorted-run.compaction-trigger`` + 1, i.e. 6 levels by default) - 1, or ours if higher
    (``table.write_input.num_levels``): a Java compaction's level-5 files pass."""
    text = schema.options.get("num-sorted-run.compaction-trigger")
    try:
        java = int(schema.options.get("num-levels") or (int(text) + 1 if text else 6))
    except ValueError:
        java = 6
    return max(java, num_levels(schema), 1) - 1


class _Added:
    """Files a commit adds, by where they are: none twice; their rows within BIGINT in all."""

    def __init__(self) -> None:
        self.seen: dict[object, str] = {}
        self.rows = 0

    def add(self, key: object, f: DataFileMeta, where: dict[str, Any]) -> None:
        other = self.seen.get(key)
        if other is not None:
            raise ValidationError(
                f"{_label(where)}: file {f.file_name!r} is added twice by this commit (also {other})",
                field="file_name",
                **where,
            )
        self.seen[key] = _label(where)
        self.rows += f.row_count

    def check_total(self) -> None:
        if self.rows > MAX_BIGINT:
            raise ValidationError(f"the commit adds {self.rows} rows in all, over BIGINT", field="row_count")


def _label(where: dict[str, Any]) -> str:
    """``message 3 data_increment.new_files`` or ``deltaManifestList entry 5``."""
    if "message_index" in where:
        return f"message {where['message_index']} {where.get('increment', '')}".rstrip()
    return f"{where.get('increment', 'entry')} entry {where.get('entry_index')}"


def _int_in(value: object, low: int, high: int, name: str, where: dict[str, Any]) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ValidationError(
            f"{_label(where)}: {name} {value!r} is outside {low}..{high}", field=name, **where
        )


def _name(name: object, label: str, field: str, where: dict[str, Any]) -> None:
    problem = name_problem(name)
    if problem is not None:
        raise ValidationError(
            f"{label} {field} {repr(name)[:200]} is not a plain file name: {problem}", field=field, **where
        )


def _shown(name: object) -> str:
    return repr(name)[:200] if not isinstance(name, str) else name[:200]


def newest_schema_id(messages: Sequence[CommitMessage]) -> int | None:
    """The largest ``schema_id`` of a data file the messages add or delete (None: they name none)."""
    ids = [f.schema_id for msg in messages for _, files in _data_files(msg) for f in files]
    return max(ids, default=None)
