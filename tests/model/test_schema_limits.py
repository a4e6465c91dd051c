"""What a table schema may hold, as Java's schema validation decides it: keys named once, field ids
distinct and not negative, numeric options that parse as Java ints within their range, and snapshot
retention bounds that make sense. Refused when a table is created or altered, naming what is wrong
(found by fuzzing the service: each was accepted and written)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import ValidationError
from paimon_meta.model.options import CoreOptions
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.types import BIGINT, STRING, DataField
from paimon_meta.table.schema_change import SetOption, alter

FIELDS = (DataField(0, "k", BIGINT(False)), DataField(1, "v", STRING()))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"partition_keys": ("k", "k")}, "duplicate partition keys"),
        ({"primary_keys": ("k", "k")}, "duplicate primary keys"),
        ({"fields": (DataField(0, "k", BIGINT(False)), DataField(0, "v", STRING()))}, "field ids"),
        ({"fields": (DataField(-1, "k", BIGINT(False)), DataField(1, "v", STRING()))}, "field ids"),
    ],
)
def test_keys_and_field_ids(changes: dict[str, object], named: str) -> None:
    args: dict[str, object] = {"id": 0, "fields": FIELDS, "highest_field_id": 1, **changes}
    with pytest.raises(ValidationError, match=named):
        TableSchema(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"bucket": "99999999999999999999"}, "bucket"),
        ({"bucket": "x"}, "bucket"),
        ({"snapshot.num-retained.min": "abc"}, "snapshot.num-retained.min"),
        ({"snapshot.num-retained.min": "0"}, "snapshot.num-retained.min"),
        ({"snapshot.num-retained.max": "-1"}, "snapshot.num-retained.max"),
        ({"snapshot.num-retained.min": "5", "snapshot.num-retained.max": "4"}, "snapshot.num-retained.max"),
        ({"snapshot.expire.limit": "0"}, "snapshot.expire.limit"),
        ({"commit.max-retries": str(2**31)}, "commit.max-retries"),
        ({"snapshot.time-retained": "soon"}, "snapshot.time-retained"),
    ],
)
def test_numeric_options(options: dict[str, str], option: str) -> None:
    with pytest.raises(ValidationError) as refused:
        CoreOptions(options).check_numbers()
    assert refused.value.fields.get("option", refused.value.fields.get("key")) == option, refused.value


def test_numeric_options_java_accepts() -> None:
    CoreOptions(
        {"bucket": "-1", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"}
    ).check_numbers()
    CoreOptions({}).check_numbers()


@pytest.fixture
def catalog(clean_db: str, tmp_path: Path) -> Iterator[MetastoreCatalog]:
    with paimon_meta.connect(clean_db, str(tmp_path / "warehouse")) as cat:
        yield cat


@pytest.mark.postgres
def test_create_and_alter_refuse_what_java_would(catalog: MetastoreCatalog) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])
    table = catalog.create_table("db.good", schema)
    with pytest.raises(ValidationError, match=r"snapshot\.num-retained\.min"):
        catalog.create_table("db.bad", schema, options={"snapshot.num-retained.min": "0"})
    with pytest.raises(ValidationError, match="duplicate partition keys"):
        catalog.create_table("db.bad", schema, partition_keys=["k", "k"])
    with pytest.raises(ValidationError, match=r"snapshot\.num-retained\.min"):
        alter(table, [SetOption("snapshot.num-retained.min", "-1")])
    assert catalog.list_tables("db") == ["good"]  # nothing registered
    assert catalog.get_table("db.good").schema.id == 0  # nothing written
