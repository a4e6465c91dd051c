"""Tags with a retention (``timeRetained``): the tag file carries Java's ``tagCreateTime`` and
``tagTimeRetained`` in Jackson's forms, reads back without them in its snapshot, and snapshot expiration
deletes the tag once its retention has passed (Java's ``TagTimeExpire``), after which the snapshots only
it kept expire too. Java parsing our tag files is in tests/interop/test_java_tags.py."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.ops.expire import expire_snapshots
from paimon_meta.ops.tags import create_tag
from paimon_meta.serde.json import snapshot_to_json
from paimon_meta.table.tags import TagManager, java_duration_text, local_date_time
from tests.ops.helpers import TABLE, create, write

pytestmark = pytest.mark.postgres

HOUR = 3_600_000


def test_a_retained_tag_is_written_as_java_writes_it(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(3))
    snapshot = create_tag(catalog, TABLE, "daily", time_retained_ms=36 * HOUR + 500)
    table = catalog.get_table(TABLE)
    tags = TagManager(table.file_io, table.path)
    raw = table.file_io.read(tags.path("daily")).decode()
    assert '"tagTimeRetained" : 129600.500000000\n}' in raw  # a Duration: decimal seconds, 9 places
    stamp = json.loads(raw)["tagCreateTime"]
    assert 5 <= len(stamp) <= 7 and stamp[:3] == [*datetime.now().timetuple()[:3]]
    tag = tags.get("daily")
    assert tag.time_retained_ms == 36 * HOUR + 500 and tag.created_ms is not None
    assert snapshot_to_json(tag.snapshot) == snapshot_to_json(
        snapshot
    )  # the tag's members are not the snapshot's
    assert not tag.expired(tag.created_ms + 36 * HOUR) and tag.expired(tag.created_ms + 37 * HOUR)
    # a tag without retention never expires
    create_tag(catalog, TABLE, "forever")
    assert tags.get("forever").time_retained_ms is None and not tags.get("forever").expired(2**62)


def test_java_local_date_time_and_duration_forms() -> None:
    moment = int(datetime(2026, 11, 27, 9, 5).timestamp() * 1000)
    assert local_date_time(moment) == [2026, 11, 27, 9, 5]  # Jackson drops zero seconds and nanos
    assert local_date_time(moment + 7_000) == [2026, 11, 27, 9, 5, 7]
    assert local_date_time(moment + 7_250) == [2026, 11, 27, 9, 5, 7, 250_000_000]
    assert [java_duration_text(ms) for ms in (0, 500, 86_400_000, 5_400_000, 90_061_001)] == [
        "PT0S",
        "PT0.5S",
        "PT24H",
        "PT1H30M",
        "PT25H1M1.001S",
    ]


def test_expiration_deletes_a_tag_past_its_retention_then_what_only_it_kept(
    catalog: MetastoreCatalog,
) -> None:
    create(catalog)
    for i in range(3):
        write(catalog, range(i * 10, i * 10 + 10), overwrite=True)
    create_tag(catalog, TABLE, "short", 1, time_retained_ms=HOUR)
    create_tag(catalog, TABLE, "long", 2, time_retained_ms=48 * HOUR)
    table = catalog.get_table(TABLE)
    created = TagManager(table.file_io, table.path).get("short").created_ms
    assert created is not None

    early = expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0, now_ms=created + HOUR // 2)
    assert early.expired_tags == [] and early.expired == [1, 2]
    assert TagManager(table.file_io, table.path).names() == ["long", "short"]

    dry = expire_snapshots(
        catalog, TABLE, retain_min=1, time_retained_ms=0, now_ms=created + 2 * HOUR, dry_run=True
    )
    assert dry.expired_tags == ["short"] and TagManager(table.file_io, table.path).names() == [
        "long",
        "short",
    ]
    late = expire_snapshots(catalog, TABLE, retain_min=1, time_retained_ms=0, now_ms=created + 2 * HOUR)
    assert late.expired_tags == ["short"]
    assert TagManager(table.file_io, table.path).names() == ["long"]
    with catalog.engine.connect() as conn:
        payload = conn.execute(
            text(
                "SELECT payload FROM paimon_maintenance_events WHERE operation = 'expire_snapshots' "
                "AND event_type = 'finished' ORDER BY event_id DESC LIMIT 1"
            )
        ).scalar_one()
    assert payload["expired_tags"] == ["short"]  # the run records which tags went


def test_bad_retention_and_corrupt_tag_members_are_refused(catalog: MetastoreCatalog) -> None:
    create(catalog)
    write(catalog, range(3))
    with pytest.raises(ValidationError, match="must be positive"):
        create_tag(catalog, TABLE, "zero", time_retained_ms=0)
    table = catalog.get_table(TABLE)
    tags = TagManager(table.file_io, table.path)
    assert tags.names() == []
    good = json.loads(snapshot_to_json(table.snapshot(1)))
    for bad in (
        {"tagCreateTime": "yesterday", "tagTimeRetained": 5},
        {"tagCreateTime": [2026, 1, 1, 0, 0], "tagTimeRetained": "x"},
    ):
        table.file_io.write(tags.path("broken"), json.dumps({**good, **bad}).encode())
        with pytest.raises(CorruptMetadataError):
            tags.get("broken")
        table.file_io.delete(tags.path("broken"))
