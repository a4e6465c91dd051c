"""Running ``paimon-meta`` in-process against one metastore and warehouse."""

from __future__ import annotations

import json
from typing import Any

import pytest

from paimon_meta.cli import main
from tests.ops.helpers import FAST_LOCK


class Cli:
    def __init__(self, url: str, warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
        self.base = ["--metastore", url, "--warehouse", warehouse]
        for key, value in FAST_LOCK.items():
            self.base += ["--option", f"{key}={value}"]
        self.capsys = capsys

    def run(self, *args: str) -> tuple[int, str, str]:
        code = main([*self.base, *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str, code: int = 0) -> Any:
        got, out, err = self.run(*args, "--json")
        assert got == code, (got, out, err)
        return json.loads(out)
