"""The change one commit makes to one partition's totals (Java's ``PartitionStatistics`` of a commit).

Pure data: the commit path computes the deltas (``paimon_meta.commit.changes.partition_deltas``), the
REST service decodes them from a client's commit, and the metastore applies them
(``paimon_meta.metastore.statistics``) in the transaction that publishes the snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from paimon_meta.errors import ValidationError


@dataclass(frozen=True, slots=True)
class PartitionDelta:
    """The change one commit makes to one partition (signed counts; Paimon's ``PartitionStatistics``)."""

    spec: Mapping[str, str]
    record_count: int
    file_size_in_bytes: int
    file_count: int
    last_file_creation_time: int
    total_buckets: int | None = None

    @property
    def key(self) -> str:
        """Canonical JSON of the spec: the row key (order of the spec's entries does not matter)."""
        return partition_key(self.spec)


def partition_key(spec: Mapping[str, str]) -> str:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in spec.items()):
        raise ValidationError(f"a partition spec maps names to strings, got {dict(spec)!r}", spec=dict(spec))
    return json.dumps(dict(sorted(spec.items())), separators=(",", ":"), ensure_ascii=False)
