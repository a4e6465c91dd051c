"""The pypaimon-shaped read API of a table: ``table.new_read_builder()`` -> scan -> read.

::

    builder = table.new_read_builder().with_projection(["a", "b"]).with_partition_filter({"dt": "2024-01-01"})
    splits = builder.new_scan().plan().splits()
    arrow_table = builder.new_read().to_arrow(splits)

Names follow pypaimon (``new_read_builder``, ``with_projection``, ``with_partition_filter``,
``new_scan().plan().splits()``, ``new_read().to_arrow/to_pandas/to_arrow_batch_reader``).
On a ``query-auth.enabled`` table opened through a catalog that gives row filters and column masks
(``connect_service``), each plan asks for them and each read applies them
(:mod:`paimon_meta.table.read.query_auth`).
``with_snapshot(id)`` and ``with_tag(name)`` time-travel, and so do the table options
``scan.snapshot-id``, ``scan.tag-name`` and ``scan.timestamp-millis`` (:mod:`paimon_meta.table.time_travel`);
like Java and pypaimon, a time-travelled read uses the schema that snapshot was committed with, while a
read of the latest snapshot uses the table's latest schema. With ``scan.fallback-branch`` set, a read
also returns, for each partition the branch read has no file in, that partition from the fallback
branch (Java's ``FallbackReadFileStoreTable``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from paimon_meta.errors import AccessDeniedError, UnsupportedError, ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.model.types import DataField
from paimon_meta.table.file_guard import path_guard
from paimon_meta.table.manifests import ManifestReader
from paimon_meta.table.option_policy import BRANCH, MAIN_BRANCH, SCAN_FALLBACK_BRANCH, check_read_options
from paimon_meta.table.read.query_auth import QueryAuth, RowRules, apply_rules, query_auth_enabled
from paimon_meta.table.read.scan import FileStoreScan, PartitionFilterArg, Plan, Split
from paimon_meta.table.read.split_read import SplitReader, resolve_projection
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.tags import validate_tag_name
from paimon_meta.table.time_travel import TimeTravel, TravelKind, resolve, snapshot_at_or_before

if TYPE_CHECKING:
    import pandas as pd


class ReadableTable(Protocol):
    """What a read needs of a table (``FileStoreTable`` provides it): its storage, schemas, snapshots,
    manifests and fallback branch."""

    @property
    def file_io(self) -> FileIO: ...

    @property
    def path(self) -> str: ...

    @property
    def branch_root(self) -> str: ...

    @property
    def branch_name(self) -> str: ...

    @property
    def schema(self) -> TableSchema: ...

    @property
    def schema_manager(self) -> SchemaManager: ...

    @property
    def snapshot_manager(self) -> SnapshotManager: ...

    @property
    def manifest_reader(self) -> ManifestReader: ...

    @property
    def query_auth(self) -> QueryAuth | None: ...

    def latest_snapshot(self) -> Snapshot | None: ...

    def snapshot(self, snapshot_id: int) -> Snapshot: ...

    def schema_of(self, snapshot: Snapshot) -> TableSchema: ...

    def fallback_branch(self, schema: TableSchema | None = None) -> ReadableTable | None: ...


class ReadBuilder:
    """Configures a scan and a read of one table (pypaimon's ``ReadBuilder``)."""

    def __init__(self, table: ReadableTable, *, fallback: bool = True) -> None:
        self.table = table
        self._projection: list[str] | None = None
        self._partition_filter: PartitionFilterArg | None = None
        self._buckets: int | Iterable[int] | None = None
        self._snapshot_id: int | None = None
        self._tag: str | None = None
        # False for the read of a fallback branch itself (Java's createWithoutFallbackBranch)
        self._use_fallback = fallback

    def with_projection(self, projection: Sequence[str]) -> ReadBuilder:
        """Read only these columns, in this order (unknown names fail at ``new_scan``/``new_read``)."""
        self._projection = list(projection)
        return self

    def with_partition_filter(self, partition_filter: PartitionFilterArg) -> ReadBuilder:
        """A partition spec ``{"k": value}`` (values typed or as Java's partition strings; the default
        partition name means null), a list of specs (any matches), or a predicate on the decoded
        partition tuple (ordered as the partition keys)."""
        self._partition_filter = partition_filter
        return self

    def with_bucket_filter(self, buckets: int | Iterable[int]) -> ReadBuilder:
        """Read only these buckets."""
        self._buckets = buckets if isinstance(buckets, int) else list(buckets)
        return self

    def with_snapshot(self, snapshot_id: int) -> ReadBuilder:
        """Read the table as of this snapshot (with that snapshot's schema); wins over the table's
        time-travel options and replaces an earlier ``with_tag``."""
        self._snapshot_id = snapshot_id
        self._tag = None
        return self

    def with_tag(self, name: str) -> ReadBuilder:
        """Read the snapshot tag ``name`` keeps (with that snapshot's schema), also after the snapshot
        itself expired; wins over the table's time-travel options and replaces an earlier
        ``with_snapshot``. ``ValidationError`` for a bad name now, ``TagNotFoundError`` at
        ``new_scan``/``new_read`` if there is no such tag."""
        self._tag = validate_tag_name(name)
        self._snapshot_id = None
        return self

    def time_travel(self) -> TimeTravel | None:
        """The snapshot this read travels to and how it was chosen; None for the latest snapshot."""
        return resolve(self.table, snapshot_id=self._snapshot_id, tag=self._tag)

    def _snapshot_and_schema(self) -> tuple[Snapshot | None, TableSchema, TimeTravel | None]:
        travel = self.time_travel()
        if travel is None:
            return self.table.latest_snapshot(), self.table.schema, None
        return travel.snapshot, self.table.schema_of(travel.snapshot), travel

    def _checked(self) -> tuple[Snapshot | None, TableSchema, TimeTravel | None]:
        snapshot, schema, travel = self._snapshot_and_schema()
        check_read_options(schema.options)
        _check_branch_option(schema, self.table.branch_name)
        return snapshot, schema, travel

    def read_type(self) -> list[DataField]:
        """The fields a read returns."""
        return resolve_projection(self._snapshot_and_schema()[1], self._projection)

    def new_scan(self) -> TableScan:
        """Plans the read; ``UnsupportedError`` naming a table option that changes what a read returns
        and is not implemented (:mod:`paimon_meta.table.option_policy`)."""
        snapshot, schema, travel = self._checked()
        resolve_projection(schema, self._projection)  # fail early on unknown columns
        scan = FileStoreScan(
            self.table.manifest_reader,
            schema,
            snapshot,
            partition_filter=self._partition_filter,
            bucket_filter=self._buckets,
        )
        fallback = self._fallback_builder(schema, travel)
        authorize = self._authorizer(schema)
        if fallback is None:
            return TableScan(scan, authorize=authorize)
        # Java's FallbackReadScan: the partitions this branch has (by the partition filter alone, not
        # the bucket filter) are complete here; the fallback branch serves every other partition.
        listing = FileStoreScan(
            self.table.manifest_reader, schema, snapshot, partition_filter=self._partition_filter
        )
        return TableScan(scan, fallback=(listing, fallback.new_scan()), authorize=authorize)

    def _authorizer(self, schema: TableSchema) -> Callable[[], RowRules] | None:
        """How a plan of this read asks for its rules (None: neither the table (its main branch) nor the
        schema read is ``query-auth.enabled``, or the table was opened without a catalog that gives
        rules)."""
        auth = self.table.query_auth
        if auth is None:
            return None
        schemas = [self.table.schema, schema]
        if self.table.branch_name != MAIN_BRANCH:
            # a branch holds the table's data: the table's own (main's) latest options govern it too,
            # even when the branch was made from a snapshot before query-auth.enabled was set
            main = SchemaManager(self.table.file_io, self.table.path).latest()
            schemas += [] if main is None else [main]
        if not query_auth_enabled(*schemas):
            return None
        select = None if self._projection is None else list(self._projection)
        return lambda: auth(schema, select)

    def authorize(self, splits: Sequence[Split]) -> list[Split]:
        """``splits`` (planned elsewhere: a streaming read's deltas) carrying this read's rules, asked
        now, as a plan of :meth:`new_scan` carries them; unchanged when the read asks for none."""
        _, schema, _ = self._checked()
        authorize = self._authorizer(schema)
        if authorize is None:
            return list(splits)
        rules = authorize()
        return [dataclasses.replace(s, rules=rules) for s in splits]

    def new_read(self) -> TableRead:
        """Reads splits; refuses the same table options as :meth:`new_scan`."""
        _, schema, travel = self._checked()
        fields = resolve_projection(schema, self._projection)
        reader = SplitReader(
            self.table.file_io, schema, self.table.schema_manager, fields, guard=path_guard(self.table)
        )
        fallback = self._fallback_builder(schema, travel)
        return TableRead(
            reader,
            None if fallback is None else fallback.new_read().reader,
            rules_required=self._authorizer(schema) is not None,
            widen=self._widened,
        )

    def _widened(self, columns: Sequence[str]) -> TableRead:
        """The same read of ``columns`` (the selected ones and those the rules need), applying no rules
        itself."""
        builder = copy.copy(self)
        builder._projection = list(columns)
        _, schema, travel = builder._checked()
        fallback = builder._fallback_builder(schema, travel)
        reader = SplitReader(
            self.table.file_io,
            schema,
            self.table.schema_manager,
            resolve_projection(schema, builder._projection),
            guard=path_guard(self.table),
        )
        return TableRead(reader, None if fallback is None else fallback.new_read().reader)

    def _fallback_builder(self, schema: TableSchema, travel: TimeTravel | None) -> ReadBuilder | None:
        """The same read of the ``scan.fallback-branch`` (None without one): the projection by field
        position, the same filters, and when time travelling to a snapshot the fallback's latest
        snapshot not newer than the one read here (Java's ``rewriteFallbackOptions``). Time travel by
        tag or timestamp with a fallback branch is refused: Java hands those options to the fallback
        branch unchanged, where they name that branch's own tags and snapshots."""
        if not self._use_fallback:
            return None
        table = self.table.fallback_branch(schema)
        if table is None:
            return None
        builder = ReadBuilder(table, fallback=False)
        if travel is not None:
            if travel.kind is not TravelKind.SNAPSHOT:
                raise UnsupportedError(
                    f"time travel by {travel.target} of a table with {SCAN_FALLBACK_BRANCH} is not "
                    "supported (time travel to a snapshot id is)",
                    option=SCAN_FALLBACK_BRANCH,
                    value=table.branch_name,
                )
            # SnapshotManager.earlierOrEqualTimeMills, else Snapshot.FIRST_SNAPSHOT_ID as Java does
            at_or_before = snapshot_at_or_before(table, travel.snapshot.time_millis)
            builder._snapshot_id = 1 if at_or_before is None else at_or_before.id
        fallback_schema = builder._snapshot_and_schema()[1]
        check_fallback_schema(schema, fallback_schema, self.table.branch_name, table.branch_name)
        if self._projection is not None:
            positions = [
                schema.field_names.index(f.name) for f in resolve_projection(schema, self._projection)
            ]
            builder._projection = [fallback_schema.fields[i].name for i in positions]
        builder._partition_filter = self._partition_filter
        builder._buckets = self._buckets
        return builder


def _check_branch_option(schema: TableSchema, branch: str) -> None:
    # Java reads the snapshots of the branch its options name; a schema whose branch option names
    # another branch than the one it was loaded from would mix two branches: refused.
    named = (schema.options.get(BRANCH) or MAIN_BRANCH).strip()
    if named != branch:
        raise UnsupportedError(
            f"table option {BRANCH}={named!r} names another branch than the one read ({branch!r}); "
            f"open that branch with FileStoreTable.branch({named!r})",
            option=BRANCH,
            value=named,
        )


def check_fallback_schema(
    main: TableSchema, fallback: TableSchema, main_branch: str, fallback_branch: str
) -> None:
    """``FallbackReadFileStoreTable.validateSchema``: the same field types position by position (top-level
    nullability aside), and if the branch read has primary keys, the same primary keys.
    ``ValidationError`` naming both branches otherwise."""
    main_types = [f.type.with_nullable(True) for f in main.fields]
    fallback_types = [f.type.with_nullable(True) for f in fallback.fields]
    if main_types != fallback_types:
        raise ValidationError(
            f"branch {main_branch!r} and its {SCAN_FALLBACK_BRANCH} {fallback_branch!r} do not have the same "
            f"row type: {[str(f.type) for f in main.fields]} vs {[str(f.type) for f in fallback.fields]}",
            option=SCAN_FALLBACK_BRANCH,
            value=fallback_branch,
        )
    if main.primary_keys and list(main.primary_keys) != list(fallback.primary_keys):
        raise ValidationError(
            f"branch {main_branch!r} has primary keys {list(main.primary_keys)} but its "
            f"{SCAN_FALLBACK_BRANCH} {fallback_branch!r} has {list(fallback.primary_keys)}",
            option=SCAN_FALLBACK_BRANCH,
            value=fallback_branch,
        )


class TableScan:
    """Plans splits (pypaimon's ``TableScan``). ``authorize``: asks for the rules every split of a plan
    carries (a ``query-auth.enabled`` table through a catalog that gives them)."""

    def __init__(
        self,
        scan: FileStoreScan,
        *,
        fallback: tuple[FileStoreScan, TableScan] | None = None,
        authorize: Callable[[], RowRules] | None = None,
    ) -> None:
        self.file_store_scan = scan
        self.fallback = fallback
        self.authorize = authorize

    def plan(self) -> Plan:
        # asked first: a read the catalog refuses plans nothing
        rules = None if self.authorize is None else self.authorize()
        plan = self._plan()
        if rules is None:
            return plan
        return Plan(plan.snapshot_id, tuple(dataclasses.replace(s, rules=rules) for s in plan.split_list))

    def _plan(self) -> Plan:
        plan = self.file_store_scan.plan()
        if self.fallback is None:
            return plan
        listing, fallback_scan = self.fallback
        complete = {entry.partition for entry in listing.plan_files()}
        extra = tuple(
            dataclasses.replace(split, fallback=True)
            for split in fallback_scan._plan().splits()
            if split.partition not in complete
        )
        return Plan(plan.snapshot_id, plan.split_list + extra)


class TableRead:
    """Reads splits into Arrow (pypaimon's ``TableRead``), applying the rules a split carries
    (:mod:`paimon_meta.table.read.query_auth`). ``rules_required``: the read is of a ``query-auth.enabled``
    table through a catalog that gives rules, so a split carrying none (not planned by this table's
    scan) is refused rather than read unfiltered. ``widen``: the same read of more columns (those the
    rules need)."""

    def __init__(
        self,
        reader: SplitReader,
        fallback_reader: SplitReader | None = None,
        *,
        rules_required: bool = False,
        widen: Callable[[Sequence[str]], TableRead] | None = None,
    ) -> None:
        self.reader = reader
        self.fallback_reader = fallback_reader
        self.rules_required = rules_required
        self._widen = widen
        self._widened: dict[tuple[str, ...], TableRead] = {}

    @property
    def schema(self) -> pa.Schema:
        return self.reader.output_schema

    def _read(self, splits: Sequence[Split]) -> Iterator[pa.Table]:
        for split in splits:
            rules = split.rules
            if rules is None:
                if self.rules_required:
                    raise AccessDeniedError(
                        "this table has query-auth.enabled: read the splits its scan planned (they carry "
                        "the catalog's row filters and column masks), not splits planned without them"
                    )
                yield self._raw(split)
            elif not rules.restricted:
                yield self._raw(split)
            else:
                yield self._restricted(split, rules)

    def _restricted(self, split: Split, rules: RowRules) -> pa.Table:
        selected = self.schema.names
        needed = rules.needed_columns(selected)
        if needed == selected:
            return apply_rules(rules, self._raw(split), selected)
        key = tuple(needed)
        wide = self._widened.get(key)
        if wide is None:
            if self._widen is None:
                raise ValidationError(
                    f"the rules of this read need columns {needed}, and this read cannot read more than "
                    f"{selected}"
                )
            wide = self._widened[key] = self._widen(needed)
        return apply_rules(rules, wide._raw(split), selected)

    def _raw(self, split: Split) -> pa.Table:
        if not split.fallback:
            return self.reader.read_split(split)
        if self.fallback_reader is None:
            raise ValidationError("a split of a fallback branch needs a read of a table with one")
        # the fallback branch's columns, in the projection's positions, under this branch's names
        table = self.fallback_reader.read_split(split)
        return pa.Table.from_arrays(table.columns, schema=self.schema)

    def to_arrow(self, splits: Sequence[Split]) -> pa.Table:
        """All rows of ``splits`` as one table (an empty table with the read schema if none)."""
        tables = list(self._read(splits))
        if not tables:
            return self.schema.empty_table()
        return pa.concat_tables(tables)

    def to_arrow_batches(self, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
        """The rows as record batches, split by split (one split in memory at a time)."""
        for table in self._read(splits):
            yield from table.to_batches()

    def to_arrow_batch_reader(self, splits: Sequence[Split]) -> pa.RecordBatchReader:
        """The rows as a reader of :meth:`to_arrow_batches` (a masked column is nullable in its schema:
        the first split is read to learn it)."""
        batches = self.to_arrow_batches(splits)
        first = next(batches, None)
        if first is None:
            return pa.RecordBatchReader.from_batches(self.schema, iter(()))
        return pa.RecordBatchReader.from_batches(first.schema, itertools.chain([first], batches))

    def to_pandas(self, splits: Sequence[Split]) -> pd.DataFrame:
        frame: pd.DataFrame = self.to_arrow(splits).to_pandas()
        return frame
