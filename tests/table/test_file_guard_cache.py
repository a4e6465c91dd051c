"""The path guard checks a directory once for the plain names in it; escaped names, other directories
and external paths are still checked one by one."""

from __future__ import annotations

import pytest

from paimon_meta.errors import PathOutsideTableError
from paimon_meta.table.containment import TableRoots
from paimon_meta.table.file_guard import PathGuard

ROOT = "/wh/db.db/t"


def test_plain_names_in_a_checked_directory_and_what_is_still_refused() -> None:
    guard = PathGuard(TableRoots(ROOT))
    bucket = f"{ROOT}/bucket-0"
    assert guard.file_path(bucket, "data-1.parquet", None, field="data file") == f"{bucket}/data-1.parquet"
    assert (
        guard.file_path(bucket + "/", "data-2.parquet", None, field="data file") == f"{bucket}/data-2.parquet"
    )
    # an escaped ".." in a directory already checked: decoded, it leaves the table
    with pytest.raises(PathOutsideTableError):
        guard.file_path(bucket, "%2e%2e", None, field="data file")
    # a name with a separator, a directory outside, an external path outside: each refused
    with pytest.raises(PathOutsideTableError):
        guard.file_path(bucket, "../../u/bucket-0/x.parquet", None, field="data file")
    for _ in range(2):  # not remembered as inside after a refusal
        with pytest.raises(PathOutsideTableError):
            guard.file_path("/wh/db.db/u/bucket-0", "data-1.parquet", None, field="data file")
    with pytest.raises(PathOutsideTableError):
        guard.file_path(bucket, "data-1.parquet", "/elsewhere/data-1.parquet", field="data file")
