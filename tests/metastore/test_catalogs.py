"""Catalogs as metastore objects (issue 35): names and keys unique, warehouses never overlapping (in any
spelling, under concurrency), secrets never shown, drop refused while databases remain, an existing
single-catalog metastore adopted with its rows."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
from sqlalchemy import Engine

from paimon_meta.errors import (
    CatalogAlreadyExistsError,
    CatalogNotEmptyError,
    CatalogNotFoundError,
    LocationError,
    ValidationError,
    WarehouseOverlapError,
)
from paimon_meta.metastore.catalogs import Catalogs, StorageProfile
from paimon_meta.metastore.registry import Registry

pytestmark = pytest.mark.postgres


def test_create_get_list(clean_engine: Engine, tmp_path: Path) -> None:
    catalogs = Catalogs(clean_engine)
    a = catalogs.create(
        "team_a",
        f"{tmp_path}//a/./",
        storage=StorageProfile("http://minio:9000", "eu-west-1", True),
        sts_role_arn="arn:aws:iam::1:role/a",
        sts_external_id="ext-secret",
        options={"s3.secret-key": "hunter2", "bucket": "4"},
        created_by="ops",
    )
    assert a.warehouse == f"{tmp_path}/a" and a.catalog_key == "team_a"
    assert catalogs.get("team_a") == a
    shown = a.public()
    assert "hunter2" not in repr(shown) and "ext-secret" not in repr(shown)
    assert shown["secrets_set"] == ["s3.secret-key", "sts-external-id"]
    assert shown["options"] == {"bucket": "4"} and shown["sts_role_arn"] == "arn:aws:iam::1:role/a"
    assert a.storage_options() == {
        "s3.secret-key": "hunter2",
        "bucket": "4",
        "s3.endpoint": "http://minio:9000",
        "s3.region": "eu-west-1",
        "s3.path-style-access": "true",
    }
    catalogs.create("team_b", "s3://bucket/b", catalog_key="b_key")
    assert [c.name for c in catalogs.list_all()] == ["team_a", "team_b"]
    with pytest.raises(CatalogAlreadyExistsError):
        catalogs.create("team_a", "s3://bucket/other")
    with pytest.raises(CatalogAlreadyExistsError):
        catalogs.create("team_c", "s3://bucket/c", catalog_key="b_key")
    with pytest.raises(CatalogNotFoundError):
        catalogs.get("nope")
    with pytest.raises(LocationError):
        catalogs.create("bad", "s3://bucket/x/../y")
    with pytest.raises(ValidationError, match="role ARN"):
        catalogs.create("bad", "s3://bucket/z", sts_external_id="e")
    with pytest.raises(ValidationError, match="storage profile"):
        catalogs.create("bad", "s3://bucket/z", options={"s3.endpoint": "x"})


@pytest.mark.parametrize(
    "other",
    [
        "s3://bucket/w",  # the same
        "S3A://BUCKET//w/",  # the same place, spelled otherwise
        "s3://bucket",  # around it
        "s3://bucket/w/inner",  # inside it
    ],
)
def test_overlapping_warehouses_are_refused(clean_engine: Engine, other: str) -> None:
    catalogs = Catalogs(clean_engine)
    catalogs.create("a", "s3://bucket/w")
    with pytest.raises(WarehouseOverlapError) as err:
        catalogs.create("b", other)
    assert err.value.fields["holder"] == "a"
    # a sibling sharing a prefix but not a segment is another place
    catalogs.create("c", "s3://bucket/w2")


def test_concurrent_overlapping_creates_one_wins(clean_engine: Engine) -> None:
    catalogs = Catalogs(clean_engine)
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def create(i: int) -> None:
        barrier.wait()
        try:
            catalogs.create(f"c{i}", "s3://bucket/w" + "/x" * i)
            outcomes.append("created")
        except WarehouseOverlapError:
            outcomes.append("refused")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["created"] + ["refused"] * 7
    assert len(catalogs.list_all()) == 1


def test_drop_refused_while_it_holds_databases(clean_engine: Engine) -> None:
    catalogs = Catalogs(clean_engine)
    catalogs.create("a", "s3://bucket/a")
    catalogs.create("b", "s3://bucket/b")
    reg_a = Registry(clean_engine, catalog_key="a")
    reg_b = Registry(clean_engine, catalog_key="b")
    reg_a.create_database("db")
    reg_b.create_database("db")
    reg_a.create_table_row("db", "t", "s3://bucket/a/db.db/t", uuid.uuid4(), 0)
    with pytest.raises(CatalogNotEmptyError, match=r"\['db'\]"):
        catalogs.drop("a")
    with pytest.raises(CatalogNotEmptyError):
        catalogs.alter("a", warehouse="s3://bucket/a2")
    assert catalogs.drop("a", cascade=True) == ["db"]
    assert reg_a.list_databases() == [] and reg_b.list_databases() == ["db"]
    with pytest.raises(CatalogNotFoundError):
        catalogs.drop("a")
    reg_b.drop_database("db")
    assert catalogs.drop("b") == []


def test_alter(clean_engine: Engine) -> None:
    catalogs = Catalogs(clean_engine)
    catalogs.create("a", "s3://bucket/a", options={"x": "1", "y": "2"})
    catalogs.create("b", "s3://bucket/b")
    with pytest.raises(WarehouseOverlapError):
        catalogs.alter("a", warehouse="s3://bucket/b/in")
    changed = catalogs.alter(
        "a",
        warehouse="s3://bucket/a3",
        storage=StorageProfile(region="us-east-1"),
        sts_role_arn="arn:r",
        sts_external_id="e",
        set_options={"z": "3"},
        remove_options=["x"],
    )
    assert changed.warehouse == "s3://bucket/a3" and changed.storage.region == "us-east-1"
    assert changed.options == {"y": "2", "z": "3"} and changed.sts_external_id == "e"
    assert catalogs.get("a") == changed
    cleared = catalogs.alter("a", clear_sts=True)
    assert cleared.sts_role_arn is None and cleared.sts_external_id is None
    # the old place is free again
    catalogs.create("c", "s3://bucket/a")


def test_adopting_a_single_catalog_metastore(clean_engine: Engine, tmp_path: Path) -> None:
    """Rows written before catalogs existed (catalog key ``jdbc``) belong to the default catalog created
    at start-up; the next start finds it; a start disagreeing with it is refused naming both."""
    registry = Registry(clean_engine)  # the default key, as every release before 0019 wrote
    registry.create_database("db")
    catalogs = Catalogs(clean_engine)
    warehouse = str(tmp_path / "wh")
    info, created = catalogs.ensure_default(
        "paimon", warehouse, catalog_key="jdbc", options={"s3.secret-key": "k", "lock.lease-seconds": "5"}
    )
    assert created and info.catalog_key == "jdbc" and catalogs.databases("paimon") == ["db"]
    assert info.options == {"lock.lease-seconds": "5"}  # the server's secrets stay in its configuration
    again, created = catalogs.ensure_default("paimon", warehouse + "/", catalog_key="jdbc")
    assert again == info and not created
    with pytest.raises(ValidationError, match="catalog key 'jdbc'"):
        catalogs.ensure_default("paimon", warehouse, catalog_key="other")
    with pytest.raises(ValidationError, match="catalogs alter"):
        catalogs.ensure_default("paimon", str(tmp_path / "elsewhere"), catalog_key="jdbc")


def test_the_default_catalog_takes_its_profile_from_the_options(clean_engine: Engine) -> None:
    info, created = Catalogs(clean_engine).ensure_default(
        "p",
        "s3://b/w",
        catalog_key="k",
        options={
            "s3.endpoint": "http://e:9000",
            "s3.path.style.access": "TRUE",
            "s3.access-key": "AK",
            "y": "2",
        },
        sts_role_arn="arn:r",
        sts_external_id="ext",
        skip_options={"y"},
    )
    assert created and info.storage == StorageProfile("http://e:9000", None, True)
    assert (info.sts_role_arn, info.sts_external_id, info.options) == ("arn:r", "ext", {})
    with pytest.raises(ValidationError, match="true or false"):
        Catalogs(clean_engine).ensure_default(
            "q", "s3://b/q", catalog_key="q", options={"s3.path-style-access": "yes"}
        )


def test_replicas_starting_at_once_record_the_default_catalog_once(
    clean_engine: Engine, tmp_path: Path
) -> None:
    catalogs = Catalogs(clean_engine)
    barrier = threading.Barrier(6)
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def start() -> None:
        barrier.wait()
        try:
            info, created = catalogs.ensure_default("paimon", str(tmp_path / "wh"), catalog_key="jdbc")
            results.append((info.catalog_id, created))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len({catalog_id for catalog_id, _ in results}) == 1 and len(results) == 6
    assert sorted(created for _, created in results) == [False] * 5 + [True]
    # a refusal that is not about this name stays a refusal
    with pytest.raises(WarehouseOverlapError):
        catalogs.ensure_default("other", str(tmp_path / "wh" / "in"), catalog_key="k2")
