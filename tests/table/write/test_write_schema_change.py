"""ALTER TABLE ADD COLUMN / RENAME COLUMN: schema-<N+1> files, field ids, options, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_meta.errors import ValidationError
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, INT, STRING, ArrayType, DataField, RowType
from paimon_meta.table.schema_change import AddColumn, add_columns, rename_column
from paimon_meta.table.snapshots import SchemaManager
from paimon_meta.table.write.table_write import TableWrite
from tests.table.write.test_write import file_path, make_table, publish_snapshot, read_file


def _schema_json(root: str, schema_id: int) -> dict[str, object]:
    result: dict[str, object] = json.loads((Path(root) / "schema" / f"schema-{schema_id}").read_text())
    return result


def test_add_columns_continues_field_ids_and_writes_the_next_schema_file(tmp_path: Path) -> None:
    table = make_table(tmp_path, [("a", INT()), ("p", STRING())], partition_keys=["p"])
    nested = RowType(
        True,
        (
            DataField(0, "x", INT()),
            DataField(0, "y", ArrayType(True, RowType(True, (DataField(0, "z", STRING()),)))),
        ),
    )
    schema = add_columns(table, [("b", BIGINT(), "the b"), AddColumn("r", nested, first=True)])
    assert schema.id == 1
    assert [f.name for f in schema.fields] == ["r", "a", "p", "b"]
    by_name = {f.name: f for f in schema.fields}
    assert by_name["b"].id == 2 and by_name["b"].description == "the b"
    # r takes id 3; its nested fields follow, children before their parent (ReassignFieldId):
    # x=4, then inside y's array the row field z=5, then y=6.
    assert by_name["r"].id == 3
    r_type = by_name["r"].type
    assert isinstance(r_type, RowType)
    x, y = r_type.fields
    assert (x.name, x.id, y.name, y.id) == ("x", 4, "y", 6)
    assert isinstance(y.type, ArrayType) and isinstance(y.type.element, RowType)
    assert y.type.element.fields[0].id == 5
    assert schema.highest_field_id == 6
    on_disk = _schema_json(table.path, 1)
    assert on_disk["highestFieldId"] == 6 and on_disk["partitionKeys"] == ["p"]
    assert SchemaManager(table.file_io, table.path).latest() == schema


def test_add_column_positions(tmp_path: Path) -> None:
    table = make_table(
        tmp_path,
        [("a", INT()), ("p", STRING())],
        partition_keys=["p"],
        options={"add-column-before-partition": "true"},
    )
    schema = add_columns(
        table, [("b", INT()), AddColumn("c", INT(), after="a"), AddColumn("d", INT(), before="a")]
    )
    assert [f.name for f in schema.fields] == ["d", "a", "c", "b", "p"]


@pytest.mark.parametrize(
    ("column", "field"),
    [
        (("a", INT()), "a"),  # exists
        (("n", INT(False)), "n"),  # NOT NULL
        (("_KEY_x", INT()), "_KEY_x"),
        (("_SEQUENCE_NUMBER", BIGINT()), "_SEQUENCE_NUMBER"),
        (AddColumn("q", INT(), after="missing"), "missing"),
    ],
)
def test_add_column_refusals_name_the_column(tmp_path: Path, column: object, field: str) -> None:
    table = make_table(tmp_path, [("a", INT())])
    with pytest.raises(ValidationError) as exc:
        add_columns(table, [column])  # type: ignore[list-item]
    assert exc.value.fields["field"] == field
    assert SchemaManager(table.file_io, table.path).list_ids() == [0]


def test_concurrent_alter_is_retried_on_the_newer_schema(tmp_path: Path) -> None:
    table = make_table(tmp_path, [("a", INT())])

    class Racing(SchemaManager):
        raced = False

        def commit_new_schema(self, schema: TableSchema) -> bool:
            if not self.raced:
                # Another writer creates schema-1 (adding "other") between our read and our create.
                self.raced = True
                base = self.schema(0)
                other = TableSchema(1, (*base.fields, DataField(1, "other", INT())), 1, options=base.options)
                assert super().commit_new_schema(other)
            return super().commit_new_schema(schema)

    schema = add_columns(Racing(table.file_io, table.path), [("mine", STRING())])
    assert schema.id == 2
    assert [(f.name, f.id) for f in schema.fields] == [("a", 0), ("other", 1), ("mine", 2)]


def test_rename_keeps_ids_and_rewrites_options(tmp_path: Path) -> None:
    table = make_table(
        tmp_path,
        [("k", INT()), ("b", INT()), ("v", STRING())],
        options={"bucket": "2", "bucket-key": "b", "fields.v.aggregate-function": "max"},
    )
    schema = rename_column(table, "b", "bb")
    schema = rename_column(table, "v", "vv")
    assert [(f.name, f.id) for f in schema.fields] == [("k", 0), ("bb", 1), ("vv", 2)]
    assert schema.options["bucket-key"] == "bb"
    assert schema.options["fields.vv.aggregate-function"] == "max"
    assert "fields.v.aggregate-function" not in schema.options
    # Writers pick the new names up; the bucket function hashes the same values as before.
    w = TableWrite(table, commit_user="u")
    w.write_arrow(pa.table({"k": pa.array([1], pa.int32()), "bb": pa.array([7], pa.int32()), "vv": ["x"]}))
    (m,) = w.prepare_commit()
    (meta,) = m.data_increment.new_files
    assert read_file(file_path(table, m, meta)).column_names == ["k", "bb", "vv"]


def test_rename_refusals(tmp_path: Path) -> None:
    table = make_table(
        tmp_path,
        [("id", INT(False)), ("p", STRING(False)), ("v", STRING())],
        partition_keys=["p"],
        primary_keys=["id", "p"],
        options={"bucket": "1"},
    )
    for old, new, field in [
        ("p", "pp", "p"),
        ("missing", "x", "missing"),
        ("v", "id", "id"),
        ("v", "_KEY_v", "_KEY_v"),
    ]:
        with pytest.raises(ValidationError) as exc:
            rename_column(table, old, new)
        assert exc.value.fields["field"] == field
    # A primary-key column may be renamed while the table has no data ...
    schema = rename_column(table, "id", "ident")
    assert schema.primary_keys == ("ident", "p")
    # ... but not once data files store it as _KEY_<name>.
    w = TableWrite(table, commit_user="u")
    w.write_arrow(pa.table({"ident": pa.array([1], pa.int32()), "p": ["a"], "v": ["x"]}))
    publish_snapshot(table, w.prepare_commit())
    with pytest.raises(ValidationError) as exc:
        rename_column(table, "ident", "id2")
    assert exc.value.fields["field"] == "ident"
