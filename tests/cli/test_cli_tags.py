"""``paimon-meta tags`` (list, create, delete) and ``paimon-meta read --tag``, also past expiration."""

from __future__ import annotations

import pytest

from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.cli.helpers import Cli
from tests.ops.helpers import TABLE, create, write

pytestmark = pytest.mark.postgres


def test_tags_and_read_by_tag(cli: Cli, catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(5), overwrite=True)
    write(catalog, range(10, 13), overwrite=True)
    write(catalog, range(20, 22), overwrite=True)

    assert cli.json("tags", TABLE) == []
    first = cli.json("tags", TABLE, "--create", "first", "--snapshot", "1")
    assert first == {"tag": "first", "snapshot_id": 1}
    assert cli.json("tags", TABLE, "--create", "last") == {"tag": "last", "snapshot_id": 3}
    assert cli.json("tags", TABLE, "--create", "first", code=4)["type"] == "TagAlreadyExistsError"
    assert cli.json("tags", TABLE) == [{"tag": "first", "snapshot_id": 1}, {"tag": "last", "snapshot_id": 3}]

    def keys(*args: str) -> list[int]:
        return sorted(r["k"] for r in cli.json("read", TABLE, "--limit", "100", *args))

    assert keys("--tag", "first") == list(range(5))
    assert keys("--tag", "last") == [20, 21]
    expired = cli.json("expire-snapshots", TABLE, "--retain-min", "1", "--older-than", "0s")
    assert expired["expired"] == [1, 2]
    assert cli.run("read", TABLE, "--snapshot", "1")[0] == 3
    assert keys("--tag", "first") == list(range(5))  # the tag outlives its snapshot
    projected = cli.json("read", TABLE, "--tag", "first", "--columns", "v")
    assert {tuple(r) for r in projected} == {("v",)} and len(projected) == 5

    assert cli.json("read", TABLE, "--tag", "nope", code=3)["type"] == "TagNotFoundError"
    assert cli.run("read", TABLE, "--tag", "first", "--snapshot", "3")[0] == 2  # one or the other
    assert cli.json("tags", TABLE, "--delete", "first") == {"tag": "first", "snapshot_id": 1}
    assert cli.json("tags", TABLE) == [{"tag": "last", "snapshot_id": 3}]
    assert cli.json("tags", TABLE, "--delete", "first", code=3)["type"] == "TagNotFoundError"
