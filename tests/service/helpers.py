"""Shared pieces of the in-process service tests: a table with one snapshot written by the library,
REST commit bodies built on it, and what "nothing changed" means."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pyarrow as pa
from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.manifests import ManifestWriter
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.manifest import FileKind, ManifestEntry
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot
from paimon_meta.serde.commit_message import serialize_commit_messages
from paimon_meta.serde.json import snapshot_to_json

P = "/v1/paimon"
SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("p", pa.string()), ("v", pa.string())])


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def seed(catalog: MetastoreCatalog, identifier: str = "db.t") -> Snapshot:
    """``identifier`` (partitioned by p, 2 buckets) with one APPEND snapshot of 3 rows; returns it."""
    table = catalog.create_table(
        identifier, SCHEMA, partition_keys=["p"], options={"bucket": "2", "bucket-key": "k"}
    )
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(
        pa.table({"k": pa.array([1, 2, 3], pa.int64()), "p": ["a", "a", "b"], "v": ["x", "y", "z"]})
    )
    commit.commit(write.prepare_commit())
    write.close()
    latest = catalog.get_table(identifier).latest_snapshot()
    assert latest is not None
    return latest


def commit_body(base: Snapshot, **changes: Any) -> dict[str, Any]:
    """A REST commit that builds snapshot base+1 on ``base``: a new uuid, the base's (valid, existing)
    base manifest list as both lists (so the new snapshot is an empty table). ``changes`` override
    members of the snapshot JSON; ``_base_uuid``/``_table_id``/``_statistics`` the request fields."""
    snap = json.loads(snapshot_to_json(base))
    snap.update(
        id=base.id + 1,
        uuid=str(uuid.uuid4()),
        deltaManifestList=base.base_manifest_list,
        commitUser="rest-user",
        commitIdentifier=BATCH_COMMIT_IDENTIFIER,
        commitKind="OVERWRITE",
        deltaRecordCount=-(base.total_record_count or 0),
        totalRecordCount=0,
    )
    snap.pop("deltaManifestListSize", None)
    body: dict[str, Any] = {
        "snapshot": {**snap, **{k: v for k, v in changes.items() if not k.startswith("_")}},
        "statistics": changes.get("_statistics", []),
        "baseSnapshotUuid": changes.get("_base_uuid", base.uuid),
    }
    if "_table_id" in changes:
        body["tableId"] = changes["_table_id"]
    return body


def write_delta(
    catalog: MetastoreCatalog,
    identifier: str,
    entries: list[ManifestEntry],
    *,
    delete_live_of: Snapshot | None = None,
) -> str:
    """Write a delta manifest list into ``identifier``'s ``manifest/`` as a REST client does: ``entries``
    and, with ``delete_live_of``, a DELETE of every live file of that snapshot. Returns its name."""
    table = catalog.get_table(identifier)
    if delete_live_of is not None:
        reader = table.manifest_reader
        for group in reader.manifests(reader.data_manifests(delete_live_of)):
            entries = [
                *entries,
                *(
                    ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                    for e in group
                ),
            ]
    writer = ManifestWriter(
        table.file_io,
        table.paths.manifest_dir,
        [f.type for f in table.schema.partition_type.fields],
        table.schema.id,
    )
    name, _ = writer.write_manifest_list(writer.write_manifests(entries))
    writer.sync()
    return name


def published_count(catalog: MetastoreCatalog) -> int:
    with catalog.engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM paimon_commit_events WHERE event_type = 'snapshot_published'")
            ).scalar_one()
        )


def state_of_storage(catalog: MetastoreCatalog, identifier: str = "db.t") -> tuple[int | None, int, int]:
    """(latest snapshot id on storage, snapshot files, published events): what must not change."""
    table = catalog.get_table(identifier)
    return (
        table.snapshot_manager.latest_snapshot_id(),
        len(table.snapshot_manager.list_snapshot_ids()),
        published_count(catalog),
    )


def messages_body(
    messages: list[CommitMessage], user: str, identifier: int, *, version: int = 14, table_buckets: int = 2
) -> dict[str, Any]:
    """The body of ``POST .../commit-messages`` committing ``messages`` as (``user``, ``identifier``)."""
    raw = serialize_commit_messages(messages, version, table_buckets=table_buckets)
    return {
        "commitUser": user,
        "commitIdentifier": identifier,
        "messagesVersion": version,
        "messages": base64.b64encode(raw).decode(),
    }
