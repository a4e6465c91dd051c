"""The README's pypaimon snippet runs verbatim against a served catalog, and docs/openapi.json is the
document the app serves (regenerate it with ``python -m paimon_meta.service.openapi > docs/openapi.json``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import paimon_meta
from paimon_meta.ops.audit import commit_history
from paimon_meta.service.openapi import document
from tests.fixtures.service import FAST_LOCK, REPO, ServiceProcess, make_principal, spawn_service

MARKER = "<!-- service-snippet:"


def readme_snippet() -> str:
    text = (REPO / "README.md").read_text()
    after = text[text.index(MARKER) :]
    match = re.search(r"```python\n(.*?)```", after, re.DOTALL)
    assert match is not None
    return match.group(1)


def test_openapi_document_is_current() -> None:
    committed = json.loads((REPO / "docs" / "openapi.json").read_text())
    assert committed == document(), "regenerate docs/openapi.json: python -m paimon_meta.service.openapi"


@pytest.mark.interop
@pytest.mark.postgres
def test_readme_snippet_runs_verbatim(
    clean_db: str, tmp_path: Path, pypaimon_python: Path, service_processes: list[ServiceProcess]
) -> None:
    """Once with an admin token (it creates the database and the table), then with a token that may
    only write ``shop``, as the README's ``principals grant etl write --database shop``: its
    ``create_database(..., True)``/``create_table(..., True)`` answered 409 are ignored, its commit lands."""
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        tokens = [
            make_principal(catalog, "readme", [("admin", None, None)]),
            make_principal(catalog, "etl", [("write", "shop", None)]),
        ]
    server = spawn_service(service_processes, clean_db, warehouse, tmp_path)
    script = tmp_path / "snippet.py"
    script.write_text(readme_snippet())
    for token in tokens:
        env = {**os.environ, "PAIMON_CATALOG_URI": server.base, "PAIMON_TOKEN": token}
        done = subprocess.run(
            [str(pypaimon_python), str(script)],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "amount" in done.stdout and "9.5" in done.stdout
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        table = catalog.get_table("shop.orders")
        rb = table.new_read_builder()
        got = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id").to_pylist()
        row = catalog.registry.get_table_row("shop", "orders")
        principals = [c["principal"] for c in commit_history(catalog.engine, row.table_id)]
    assert got == [
        {"id": 1, "day": "2026-11-23", "amount": 9.5},
        {"id": 1, "day": "2026-11-23", "amount": 9.5},
        {"id": 2, "day": "2026-11-23", "amount": 3.0},
        {"id": 2, "day": "2026-11-23", "amount": 3.0},
    ]
    assert principals == ["etl", "readme"]  # newest first
