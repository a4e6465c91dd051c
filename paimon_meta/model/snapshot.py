"""Snapshot (``org.apache.paimon.Snapshot``, JSON version 3) and CommitKind."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SNAPSHOT_VERSION = 3
BATCH_COMMIT_IDENTIFIER = 2**63 - 1  # Java Long.MAX_VALUE: what batch writers use


class CommitKind(enum.Enum):
    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"
    ANALYZE = "ANALYZE"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One published snapshot. ``unknown`` keeps fields this version does not know (Java ignores them
    on read; we keep them so a round trip loses nothing)."""

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    version: int = SNAPSHOT_VERSION
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    log_offsets: Mapping[int, int] | None = None
    total_record_count: int | None = None
    delta_record_count: int | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: Mapping[str, str] | None = None
    next_row_id: int | None = None
    uuid: str | None = None
    operation: str | None = None
    writer_version: str | None = None
    unknown: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dedupe_key(self) -> tuple[str, int, CommitKind]:
        """The exactly-once identity of the commit that produced this snapshot."""
        return (self.commit_user, self.commit_identifier, self.commit_kind)
