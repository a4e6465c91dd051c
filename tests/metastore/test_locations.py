"""Locations as a user types them: relative paths are resolved once; a table is opened on the store its
own location names, whatever the catalog's warehouse is."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from sqlalchemy import text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.cli import main
from paimon_meta.cli.context import EXIT_FAILURE, EXIT_USAGE
from paimon_meta.errors import StorageOptionsMissingError, TableAlreadyExistsError
from paimon_meta.ops.recovery import recover_table

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _write(catalog: MetastoreCatalog, identifier: str, keys: list[int]) -> None:
    wb = catalog.get_table(identifier).new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"k": pa.array(keys, pa.int64()), "v": [str(k) for k in keys]}))
    wb.new_commit().commit(w.prepare_commit())


def _keys(catalog: MetastoreCatalog, identifier: str) -> list[int]:
    rb = catalog.get_table(identifier).new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist())


def test_relative_paths_are_resolved_once(
    clean_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with paimon_meta.connect(clean_db, "wh") as catalog:
        assert catalog.warehouse == str(tmp_path / "wh")
        catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        _write(catalog, "db.t", [1, 2])
    table = paimon_meta.open_table("wh/db.db/t")
    assert table.path == str(tmp_path / "wh" / "db.db" / "t")
    assert table.latest_snapshot() is not None
    assert main(["--metastore", clean_db, "--warehouse", "wh", "read", "db.t", "--json"]) == 0
    assert '"k": 2' in capsys.readouterr().out


@pytest.mark.s3
def test_a_table_is_opened_on_its_own_store(
    clean_db: str, tmp_path: Path, s3_warehouse: tuple[str, dict[str, str]]
) -> None:
    s3_uri, s3_options = s3_warehouse
    with paimon_meta.connect(clean_db, s3_uri, **s3_options) as on_s3:
        on_s3.create_table("db.remote", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        _write(on_s3, "db.remote", [7])
    # The same metastore, a local warehouse: the S3 table is still opened on S3 (with the -o options).
    with paimon_meta.connect(clean_db, str(tmp_path / "local"), **s3_options) as local:
        local.create_table("db.here", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        _write(local, "db.remote", [8])
        assert _keys(local, "db.remote") == [7, 8]
        assert local.get_table("db.remote").path.startswith("s3://")
        assert recover_table(local, "db.remote").ok


@pytest.mark.s3
def test_missing_s3_options_are_named(
    clean_db: str,
    tmp_path: Path,
    s3_warehouse: tuple[str, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A catalog on a local warehouse holding an s3:// table, without S3 credentials: opening that table
    says which options are missing (it used to be an 'outcome unknown' FileIOError from botocore), and
    ``paimon-meta recover`` recovers the other tables and names them for it."""
    s3_uri, s3_options = s3_warehouse
    with paimon_meta.connect(clean_db, s3_uri, **s3_options) as on_s3:
        on_s3.create_table("db.remote", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        _write(on_s3, "db.remote", [7])
    # No credentials anywhere the AWS SDK looks.
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local_wh = str(tmp_path / "local")
    with paimon_meta.connect(clean_db, local_wh, **{"s3.endpoint": s3_options["s3.endpoint"]}) as local:
        local.create_table("db.here", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        _write(local, "db.here", [1])
        with pytest.raises(StorageOptionsMissingError) as e:
            local.get_table("db.remote")
        assert e.value.fields["options"] == ["s3.access-key", "s3.secret-key"]
        assert e.value.fields["uri"].startswith(s3_uri)
        assert "s3.access-key and s3.secret-key are missing" in str(e.value)
        assert "s3.endpoint" not in str(e.value)  # it was given
        assert _keys(local, "db.here") == [1]

    base = ["--metastore", clean_db, "--warehouse", local_wh]
    assert main([*base, "recover", "db.remote"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "s3.access-key and s3.secret-key are missing" in err
    assert "s3.endpoint (requests go to AWS S3 itself)" in err  # no -o options at all this time
    # Every table: the local one is recovered, the S3 one is reported with the options it lacks.
    assert main([*base, "recover"]) == EXIT_FAILURE
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("db.here: 0 snapshots recorded") for line in lines)
    (remote,) = [line for line in lines if line.startswith("db.remote:")]
    assert "NOT RECOVERED: StorageOptionsMissingError" in remote and "s3.secret-key are missing" in remote


def test_renaming_a_row_java_inserted_keeps_its_files(clean_db: str, tmp_path: Path) -> None:
    """A row Java's JdbcCatalog inserted has no location (it is computed from the name). Renamed, it gets
    the location its old name computed to: the table reads and commits as before under the new name,
    and the old name's directory, still holding its files, cannot be adopted by a new table."""
    with paimon_meta.connect(clean_db, str(tmp_path / "wh")) as catalog:
        catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
        _write(catalog, "db.t", [1, 2])
        with catalog.engine.begin() as conn:  # as Java inserts it: no location, no uuid
            conn.execute(
                text("UPDATE paimon_tables SET location = NULL, table_uuid = NULL WHERE table_name = 't'")
            )
        assert catalog.table_row("db.t").location is None
        catalog.rename_table("db.t", "db.renamed")
        row = catalog.table_row("db.renamed")
        assert row.location == str(tmp_path / "wh" / "db.db" / "t")
        assert _keys(catalog, "db.renamed") == [1, 2]
        _write(catalog, "db.renamed", [3])
        assert _keys(catalog, "db.renamed") == [1, 2, 3]
        with pytest.raises(TableAlreadyExistsError, match="holds"):
            catalog.create_table("db.t", SCHEMA, options={"bucket": "1", "bucket-key": "k"})
