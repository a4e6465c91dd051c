"""Tables changed by our own table operations, for the interop read tests (``tests/interop/written.py``).

Each builder writes a table, changes it with one of our operations and checks that the operation did
what the case is about (so a case cannot silently test nothing), then returns the table's path and the
rows it holds by construction:

* **compacted**: our full compaction (``paimon_meta.table.compact.compact``) committed by us as a
  COMPACT snapshot: a primary-key table (merged across levels, retractions dropped), a fixed-bucket
  and a bucket-unaware append table (small files rewritten);
* **overwrite**: dynamic partition overwrite (only the partitions the new rows are in) and static
  overwrite (the whole table by rows of one partition; one partition by no rows, which empties it);
* **manifest full compaction**: ``manifest.full-compaction-threshold-size`` = 1 byte, so every commit
  rewrites the base manifests into one, dropping the DELETE entries of a compaction or overwrite;
* **expired**: snapshots expired by ``paimon_meta.ops.expire`` (through a catalog: the one case here
  that needs a Postgres metastore), with the data files the retained snapshots no longer need deleted;
* **evolved**: columns added (at the end and after a given column) and renamed with
  ``schema_change.alter``, rows written before and after each change.

The columns avoid timestamps before 1970 (pyarrow's ORC writer stores those in a way paimon-rust cannot
read: docs/INTEROP.md), so every engine can read every case in both formats.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import paimon_meta
from paimon_meta.model.arrow import to_arrow_schema
from paimon_meta.model.types import (
    BIGINT,
    BYTES,
    DECIMAL,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    TIMESTAMP_LTZ,
    DataField,
)
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.table.compact import compact
from paimon_meta.table.schema_change import AddColumn, RenameColumn, alter
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec
from tests.interop.written import (
    KEY_COLUMNS,
    BuildContext,
    Built,
    Column,
    Written,
    batch,
    commit,
    create_table,
    pk_rounds,
)

# Six values per column, as the base cases: row 0 ordinary, 1 minimums, 2 maximums, 3 nulls, 4/5 edges.
CHANGE_COLUMNS: list[Column] = [
    ("i", INT(), [1, -(2**31), 2**31 - 1, None, 0, -3]),
    ("s", STRING(), ["hello", "", "héllo wörld 日本語 🦀", None, "x" * 40, "a/b=c"]),
    (
        "dec",
        DECIMAL(18, 4),
        ["1.5000", "-99999999999999.9999", "99999999999999.9999", None, "0.0000", "-0.0001"],
    ),
    ("by", BYTES(), [b"bytes", b"", bytes(range(16)), None, b"\x00", b"\xff"]),
    (
        "ts6",
        TIMESTAMP(6),
        [
            "2024-01-02 03:04:05.678901",
            "1970-01-01 00:00:00.000000",
            "2262-04-10 23:59:59.999999",
            None,
            "2038-01-19 03:14:08.000001",
            "2100-02-28 12:00:00.000001",
        ],
    ),
    (
        "ltz3",
        TIMESTAMP_LTZ(3),
        [
            "2024-01-02 03:04:05.678",
            "1970-01-01 00:00:00.001",
            "2262-04-10 23:59:59.999",
            None,
            "2038-01-19 03:14:08.001",
            "2000-02-29 00:00:00.000",
        ],
    ),
]
FIELDS = [*KEY_COLUMNS, *((n, t) for n, t, _ in CHANGE_COLUMNS)]
DATA_FIELDS = [DataField(i, name, t) for i, (name, t) in enumerate(FIELDS)]
MANIFEST_FULL_COMPACTION = {"manifest.full-compaction-threshold-size": "1 b"}


def _table_options(fmt: str, bucket: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    options = {"bucket": str(bucket), "file.format": fmt, **(extra or {})}
    if bucket > 0:
        options["bucket-key"] = "id"
    return options


def _create(root: Path, fmt: str, bucket: int, *, pk: bool, extra: dict[str, str] | None = None) -> str:
    return create_table(
        root,
        FIELDS,
        partition_keys=["p"],
        primary_keys=["id", "p"] if pk else (),
        options=_table_options(fmt, bucket, extra),
    )


def _latest_kind(table: FileStoreTable) -> str:
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    return snapshot.commit_kind.name


def _rows(first_id: int, parts: Sequence[str]) -> pa.Table:
    """len(parts) rows with ids from ``first_id``, the column values taken round-robin."""
    n = len(parts)
    return batch(list(range(first_id, first_id + n)), parts, CHANGE_COLUMNS, [i % 6 for i in range(n)])


def _without_partition(data: pa.Table, partition: str) -> pa.Table:
    return data.filter(pc.not_equal(data.column("p"), partition))


def _compact(table: FileStoreTable) -> None:
    result = compact(table)
    assert result.buckets > 0 and result.files_after < result.files_before, result
    assert _latest_kind(table) == "COMPACT"


# ---- compacted -------------------------------------------------------------------------------------


def build_compacted_pk(ctx: BuildContext, root: Path, fmt: str) -> Built:
    path = _create(root, fmt, 2, pk=True)
    rounds, expected = pk_rounds(CHANGE_COLUMNS)
    for data in rounds:
        commit(path, data)
    _compact(paimon_meta.open_table(path))
    return path, [expected]


def build_compacted_append(ctx: BuildContext, root: Path, fmt: str, *, bucket: int) -> Built:
    """Four small commits into two partitions (into both buckets of each), then compacted."""
    path = _create(root, fmt, bucket, pk=False)
    batches = [_rows(1 + 8 * r, ["a", "b"] * 4) for r in range(4)]
    for data in batches:
        commit(path, data)
    _compact(paimon_meta.open_table(path))
    return path, batches


# ---- overwrite -------------------------------------------------------------------------------------


def build_overwrite_dynamic(ctx: BuildContext, root: Path, fmt: str, *, pk: bool) -> Built:
    """Rows in a, b and c; then an OVERWRITE with rows of b only (one of them an existing key): with
    ``dynamic-partition-overwrite`` (the default) only b is replaced."""
    path = _create(root, fmt, 2 if pk else -1, pk=pk)
    first = _rows(1, ["a", "a", "b", "b", "c", "c"])
    commit(path, first)
    second = _rows(3, ["b", "b", "b"])
    commit(path, second, overwrite={})
    assert _latest_kind(paimon_meta.open_table(path)) == "OVERWRITE"
    return path, [_without_partition(first, "b"), second]


def build_overwrite_static_table(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """A static OVERWRITE of the whole table by rows of partition c only: a and b are gone too."""
    path = _create(root, fmt, -1, pk=False)
    commit(path, _rows(1, ["a", "b", "c", "a", "b", "c"]))
    second = _rows(20, ["c", "c"])
    commit(path, second, overwrite=OverwriteSpec.static({}))
    assert _latest_kind(paimon_meta.open_table(path)) == "OVERWRITE"
    return path, [second]


def build_overwrite_static_partition(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """A static OVERWRITE of partition a by no rows: a is emptied, b and c stay."""
    path = _create(root, fmt, 2, pk=True)
    first = _rows(1, ["a", "b", "c", "a", "b", "c"])
    commit(path, first)
    commit(path, None, overwrite=OverwriteSpec.static({"p": "a"}))
    assert _latest_kind(paimon_meta.open_table(path)) == "OVERWRITE"
    return path, [_without_partition(first, "a")]


# ---- manifest full compaction ---------------------------------------------------------------------


def _assert_base_fully_compacted(table: FileStoreTable) -> None:
    """The latest snapshot's base is one manifest of ADD entries only, though the table saw DELETEs."""
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    base = table.manifest_reader.manifest_list(snapshot.base_manifest_list)
    assert len(base) == 1 and base[0].num_deleted_files == 0, base
    earlier = [table.snapshot(i) for i in range(1, snapshot.id)]
    deltas = [m for s in earlier for m in table.manifest_reader.manifest_list(s.delta_manifest_list)]
    assert any(m.num_deleted_files > 0 for m in deltas), "no DELETE entry was ever compacted away"


def build_manifest_compacted_pk(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """The primary-key rounds, our compaction (DELETEs of the files it replaced), one more commit."""
    path = _create(root, fmt, 2, pk=True, extra=MANIFEST_FULL_COMPACTION)
    rounds, expected = pk_rounds(CHANGE_COLUMNS)
    for data in rounds:
        commit(path, data)
    _compact(paimon_meta.open_table(path))
    last = _rows(100, ["a", "d"])
    commit(path, last)
    _assert_base_fully_compacted(paimon_meta.open_table(path))
    return path, [expected, last]


def build_manifest_compacted_append(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """Three commits, a dynamic overwrite of b (DELETEs), one more commit."""
    path = _create(root, fmt, -1, pk=False, extra=MANIFEST_FULL_COMPACTION)
    batches = [_rows(1 + 6 * r, ["a", "b", "c"] * 2) for r in range(3)]
    for data in batches:
        commit(path, data)
    replacement = _rows(50, ["b"])
    commit(path, replacement, overwrite={})
    last = _rows(60, ["a", "c"])
    commit(path, last)
    _assert_base_fully_compacted(paimon_meta.open_table(path))
    return path, [*(_without_partition(b, "b") for b in batches), replacement, last]


# ---- expired ---------------------------------------------------------------------------------------


def _expire_keeping(ctx: BuildContext, identifier: str, keep: int) -> None:
    """Expire every snapshot but the last ``keep``; the data files only they needed must be gone."""
    catalog = ctx.catalog()
    report = expire_snapshots(catalog, identifier, retain_min=keep, time_retained_ms=0)
    table = catalog.get_table(identifier)
    latest = table.latest_snapshot()
    assert latest is not None and report.expired == list(range(1, latest.id - keep + 1)), report
    assert report.deleted_data_files, "the expired snapshots held no file to delete"
    assert not any(table.file_io.exists(f) for f in report.deleted_data_files)
    assert not table.file_io.exists(table.snapshot_manager.paths.snapshot_path(1))


def _catalog_table(ctx: BuildContext, root: Path, fmt: str, bucket: int, *, pk: bool) -> FileStoreTable:
    """A table created through the catalog at ``root`` (``<warehouse>/<db>.db/<table>``)."""
    identifier = f"{root.parent.name.removesuffix('.db')}.{root.name}"
    table = ctx.catalog().create_table(
        identifier,
        to_arrow_schema(DATA_FIELDS),
        partition_keys=["p"],
        primary_keys=["id", "p"] if pk else (),
        options=_table_options(fmt, bucket),
    )
    assert table.path == str(root), (table.path, root)
    return table


def build_expired_pk(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """The primary-key rounds and our compaction through the catalog, then all but 2 snapshots expired:
    the level-0 files the compaction replaced are deleted."""
    table = _catalog_table(ctx, root, fmt, 2, pk=True)
    identifier = f"{root.parent.name.removesuffix('.db')}.{root.name}"
    rounds, expected = pk_rounds(CHANGE_COLUMNS)
    for data in rounds:
        commit(ctx.catalog().get_table(identifier), data)
    _compact(ctx.catalog().get_table(identifier))
    last = _rows(100, ["b"])
    commit(ctx.catalog().get_table(identifier), last)
    _expire_keeping(ctx, identifier, 2)
    return table.path, [expected, last]


def build_expired_append(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """Commits through the catalog, a dynamic overwrite of b, then all but the latest snapshot expired:
    the files of the replaced b are deleted."""
    table = _catalog_table(ctx, root, fmt, -1, pk=False)
    identifier = f"{root.parent.name.removesuffix('.db')}.{root.name}"
    batches = [_rows(1 + 6 * r, ["a", "b", "c"] * 2) for r in range(2)]
    for data in batches:
        commit(ctx.catalog().get_table(identifier), data)
    replacement = _rows(50, ["b", "b"])
    commit(ctx.catalog().get_table(identifier), replacement, overwrite={})
    _expire_keeping(ctx, identifier, 1)
    return table.path, [*(_without_partition(b, "b") for b in batches), replacement]


# ---- evolved ---------------------------------------------------------------------------------------

_T1 = dt.datetime(2024, 1, 2, 3, 4, 5, 678901)
_T2 = dt.datetime(2038, 1, 19, 3, 14, 8, 1)


def _arrow_rows(path: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """``rows`` as a table of the table's latest schema (missing columns are null)."""
    table = paimon_meta.open_table(path)
    return pa.Table.from_pylist(list(rows), schema=to_arrow_schema(table.schema.fields))


def build_evolved_append(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """Rows before and after two ALTERs: (1) add DECIMAL ``d`` at the end, rename ``s`` to ``s2``, add
    BIGINT ``n`` after ``id``; (2) rename ``i`` to ``i2``, add TIMESTAMP(9) ``ts9``."""
    path = create_table(
        root,
        [*KEY_COLUMNS, ("i", INT()), ("s", STRING()), ("ts6", TIMESTAMP(6))],
        partition_keys=["p"],
        options=_table_options(fmt, -1),
    )
    before: list[dict[str, Any]] = [
        {"id": 1, "p": "a", "i": 10, "s": "one", "ts6": _T1},
        {"id": 2, "p": "b", "i": None, "s": None, "ts6": None},
    ]
    commit(path, _arrow_rows(path, before))
    alter(
        paimon_meta.open_table(path),
        [AddColumn("d", DECIMAL(18, 4)), RenameColumn("s", "s2"), AddColumn("n", BIGINT(), after="id")],
    )
    middle: list[dict[str, Any]] = [
        {"id": 3, "n": 30, "p": "a", "i": 30, "s2": "three", "ts6": _T2, "d": Decimal("3.0300")},
        {"id": 4, "n": None, "p": "c", "i": -4, "s2": "", "ts6": None, "d": None},
    ]
    commit(path, _arrow_rows(path, middle))
    alter(paimon_meta.open_table(path), [RenameColumn("i", "i2"), AddColumn("ts9", TIMESTAMP(9))])
    after: list[dict[str, Any]] = [
        {"id": 5, "n": 50, "p": "b", "i2": 5, "s2": "five", "ts6": _T1, "d": Decimal("-5"), "ts9": _T2}
    ]
    commit(path, _arrow_rows(path, after))
    renamed = [{("i2" if k == "i" else "s2" if k == "s" else k): v for k, v in r.items()} for r in before]
    middle = [{("i2" if k == "i" else k): v for k, v in r.items()} for r in middle]
    fields = [f.name for f in paimon_meta.open_table(path).schema.fields]
    assert fields == ["id", "n", "p", "i2", "s2", "ts6", "d", "ts9"], fields
    return path, [_arrow_rows(path, [*renamed, *middle, *after])]


def build_evolved_pk(ctx: BuildContext, root: Path, fmt: str) -> Built:
    """A primary-key table: rows, then an ALTER (add DOUBLE ``d``, rename ``s`` to ``s2``), then an update
    of a key written before it, a new key and the ``-D`` of an old key: merged across schemas."""
    path = create_table(
        root,
        [*KEY_COLUMNS, ("i", INT()), ("s", STRING()), ("by", BYTES())],
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options=_table_options(fmt, 2),
    )
    before = [{"id": k, "p": "ab"[k % 2], "i": k * 10, "s": f"v{k}", "by": bytes([k])} for k in range(1, 5)]
    commit(path, _arrow_rows(path, before))
    alter(paimon_meta.open_table(path), [AddColumn("d", DOUBLE()), RenameColumn("s", "s2")])
    after = [
        {"id": 1, "p": "b", "i": -1, "s2": "updated", "by": None, "d": 0.5},
        {"id": 5, "p": "b", "i": 50, "s2": "new", "by": b"\x05", "d": None},
    ]
    data = _arrow_rows(path, [*after, {"id": 2, "p": "a"}])
    commit(path, data.append_column("_row_kind", pa.array(["+U", "+I", "-D"])))
    kept = [{**{("s2" if k == "s" else k): v for k, v in r.items()}, "d": None} for r in before]
    expected = [r for r in kept if r["id"] not in (1, 2)] + after
    return path, [_arrow_rows(path, expected)]


def _changed(name: str, fmt: str, builder: Any, **kwargs: Any) -> Written:
    return Written(
        name,
        "changed",
        fmt,
        builder=functools.partial(builder, **kwargs) if kwargs else builder,
        needs_catalog=name.startswith("expired_"),
    )


CHANGED: list[Written] = [
    _changed("compacted_pk_parquet", "parquet", build_compacted_pk),
    _changed("compacted_pk_orc", "orc", build_compacted_pk),
    _changed("compacted_append_fixed_parquet", "parquet", build_compacted_append, bucket=2),
    _changed("compacted_append_unaware_orc", "orc", build_compacted_append, bucket=-1),
    _changed("overwrite_dynamic_pk_parquet", "parquet", build_overwrite_dynamic, pk=True),
    _changed("overwrite_dynamic_append_orc", "orc", build_overwrite_dynamic, pk=False),
    _changed("overwrite_static_table_parquet", "parquet", build_overwrite_static_table),
    _changed("overwrite_static_partition_orc", "orc", build_overwrite_static_partition),
    _changed("manifest_full_compaction_pk_parquet", "parquet", build_manifest_compacted_pk),
    _changed("manifest_full_compaction_append_orc", "orc", build_manifest_compacted_append),
    _changed("expired_pk_parquet", "parquet", build_expired_pk),
    _changed("expired_append_orc", "orc", build_expired_append),
    _changed("evolved_append_parquet", "parquet", build_evolved_append),
    _changed("evolved_pk_orc", "orc", build_evolved_pk),
]
