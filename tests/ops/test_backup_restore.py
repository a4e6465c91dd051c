"""The backup/restore drill of docs/OPERATIONS.md, run as written: ``pg_dump`` of the metastore, then a copy
of the warehouse (with a commit landing between the two, as on a live catalog), restored into a fresh
database and directory, ``db relocate``, ``recover``, ``verify`` clean, and commits continue there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.cli import main
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.errors import ValidationError
from paimon_meta.metastore.registry import relocate
from paimon_meta.ops.tags import create_tag
from tests.fixtures.postgres import DbFactory
from tests.ops.helpers import FAST_LOCK, TABLE, create, read_keys, write

pytestmark = pytest.mark.postgres


def _embedded_bin(name: str) -> Path:
    from paimon_meta.db.embedded import _bin

    try:
        return _bin(name)
    except Exception:  # the embedded extra is not installed: no such tool
        return Path("/nonexistent") / name


def pg_tool(url: str, name: str) -> str:
    """``pg_dump``/``pg_restore`` of the server's major version (an older client refuses a newer
    server; Debian keeps each version's tools under /usr/lib/postgresql/<major>/bin)."""
    with psycopg.connect(libpq_conninfo(url)) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
    assert version is not None
    major = int(version[0]) // 10000
    candidate = Path(f"/usr/lib/postgresql/{major}/bin/{name}")
    if candidate.exists():
        return str(candidate)
    # the embedded Postgres (make test without a DSN) ships its own tools, of its own version
    found = [str(_embedded_bin(name))] if _embedded_bin(name).exists() else []
    on_path = shutil.which(name)
    if on_path is not None:
        found.append(on_path)
    for tool in found:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
        if re.search(rf"\b{major}\.", out):
            return tool
    pytest.fail(f"no {name} for PostgreSQL {major} among {found} (install postgresql-client-{major})")


def test_backup_restore_drill(
    catalog: MetastoreCatalog,
    clean_db: str,
    tmp_path: Path,
    pg_db_factory: DbFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    warehouse = catalog.warehouse
    create(catalog)
    create(catalog, "db.other")
    for i in range(3):
        write(catalog, range(i * 10, i * 10 + 10))
    write(catalog, [100], identifier="db.other")
    create_tag(catalog, TABLE, "before-backup", 2)

    # 1. the metastore first ...
    dump = tmp_path / "metastore.dump"
    subprocess.run(
        [pg_tool(clean_db, "pg_dump"), "--format=custom", "--file", str(dump), libpq_conninfo(clean_db)],
        check=True,
    )
    write(catalog, range(30, 35))  # a commit lands between the dump and the copy
    # 2. ... then the warehouse: everything the dump recorded is in the copy (never the other order)
    restored_wh = str(tmp_path / "restored-warehouse")
    shutil.copytree(warehouse, restored_wh)

    # 3. restore into a fresh database and relocate the registry's absolute locations
    restored_db = pg_db_factory(migrated=False)
    subprocess.run(
        [
            pg_tool(restored_db, "pg_restore"),
            "--no-owner",
            "--exit-on-error",
            "-d",
            libpq_conninfo(restored_db),
            str(dump),
        ],
        check=True,
    )
    base = ["--metastore", restored_db, "--warehouse", restored_wh]
    for key, value in FAST_LOCK.items():
        base += ["-o", f"{key}={value}"]
    capsys.readouterr()
    assert main([*base, "db", "relocate", warehouse, restored_wh, "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert {(m["kind"], m["name"]) for m in planned} == {
        ("table", TABLE),
        ("table", "db.other"),
        ("database", "db"),
        ("database_property", "db"),
    }
    assert main([*base, "verify", "--json"]) == 5  # before relocating: the registry names the old place
    capsys.readouterr()
    assert main([*base, "db", "relocate", warehouse, restored_wh]) == 0
    assert "relocated 4 locations" in capsys.readouterr().out

    # 4. verify: the commit after the dump is on storage beyond the pointer; recover records it
    assert main([*base, "verify", "--json"]) == 5
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["table"], f["snapshot_ids"]) for f in findings] == [
        ("snapshots_beyond_pointer", TABLE, [4])
    ]
    assert main([*base, "recover", TABLE]) == 0
    capsys.readouterr()
    assert main([*base, "verify", "--data-files"]) == 0
    assert "clean" in capsys.readouterr().out

    # 5. commits continue on the restored catalog, which is independent of the original
    restored = paimon_meta.connect(restored_db, restored_wh, **FAST_LOCK)
    try:
        assert restored.get_table(TABLE).path.startswith(restored_wh)
        assert write(restored, range(40, 42)) == 5
        assert read_keys(restored) == [*range(30), *range(30, 35), 40, 41]
        assert read_keys(restored, snapshot=2) == list(range(20))
    finally:
        restored.close()
    assert main([*base, "verify"]) == 0
    assert read_keys(catalog) == list(range(35))  # the original is untouched
    assert catalog.get_table(TABLE).path.startswith(warehouse + "/")


def test_relocate_moves_only_whole_path_segments_and_refuses_relative_locations(
    catalog: MetastoreCatalog,
) -> None:
    create(catalog)
    warehouse = catalog.warehouse.rstrip("/")
    assert relocate(catalog.engine, warehouse[:-2], "/elsewhere") == []  # a prefix, not a parent
    moved = relocate(catalog.engine, warehouse + "/", "s3://bucket/wh", dry_run=True)
    assert {(m.kind, m.new) for m in moved} >= {("table", "s3://bucket/wh/db.db/t")}
    assert catalog.get_table(TABLE).path == f"{warehouse}/db.db/t"  # a dry run changes nothing
    for bad in (("relative/wh", "/x"), (warehouse, "x"), (warehouse, warehouse + "/")):
        with pytest.raises(ValidationError):
            relocate(catalog.engine, *bad)
