"""The consumers of one table, kept as Java's ``ConsumerManager`` keeps them.

A streaming reader with a ``consumer-id`` records its progress in ``consumer/consumer-<id>``: the JSON
``{"nextSnapshot": N}``, the first snapshot it has not read yet. Snapshot expiration keeps every snapshot
from the smallest ``nextSnapshot`` on (``paimon_meta.ops.references.consumer_min_next_snapshot``). A
consumer file is replaced whole on every update (Java's ``overwriteFileUtf8``).

``consumer.expiration-time``: a consumer whose file was last written longer ago than that is gone
(Java's ``ConsumerManager.expire``, run by Java's commit before it expires snapshots; here by the
maintenance job that expires snapshots): it holds back snapshot expiration no more.
"""

from __future__ import annotations

import json

from paimon_meta.errors import CorruptMetadataError, FileNotFound, ValidationError
from paimon_meta.io.base import FileIO
from paimon_meta.table.containment import name_problem
from paimon_meta.table.paths import join_path

CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"
#: Java's ``Consumer`` JSON field.
NEXT_SNAPSHOT = "nextSnapshot"


def validate_consumer_id(consumer_id: str) -> None:
    """``ValidationError`` unless ``consumer_id`` makes a plain file name ``consumer-<id>``."""
    problem = name_problem(f"{CONSUMER_PREFIX}{consumer_id}") if consumer_id else "empty"
    if problem is not None:
        raise ValidationError(f"consumer id {consumer_id!r} is not valid: {problem}", field="consumerId")


class ConsumerManager:
    """Reads and writes ``consumer/consumer-<id>`` files of one table (main branch)."""

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.directory = join_path(table_path, CONSUMER_DIR)

    def path(self, consumer_id: str) -> str:
        return join_path(self.directory, f"{CONSUMER_PREFIX}{consumer_id}")

    def consumers(self) -> dict[str, int]:
        """Every consumer's next snapshot, by id (sorted by id)."""
        out: dict[str, int] = {}
        for status in self.file_io.list(self.directory):
            name = status.path.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith(CONSUMER_PREFIX):
                out[name[len(CONSUMER_PREFIX) :]] = self._decode(self.file_io.read(status.path), status.path)
        return dict(sorted(out.items()))

    def next_snapshot(self, consumer_id: str) -> int | None:
        """The consumer's next snapshot, or None when there is no such consumer."""
        path = self.path(consumer_id)
        try:
            return self._decode(self.file_io.read(path), path)
        except FileNotFound:
            return None

    def reset(self, consumer_id: str, next_snapshot: int) -> None:
        """Set (or create) the consumer's next snapshot."""
        validate_consumer_id(consumer_id)
        self.file_io.write(self.path(consumer_id), json.dumps({NEXT_SNAPSHOT: next_snapshot}).encode())

    def expired(self, cutoff_ms: int) -> list[str]:
        """The ids of the consumers whose file was last written before ``cutoff_ms`` (epoch ms)."""
        out = []
        for status in self.file_io.list(self.directory):
            name = status.path.rstrip("/").rsplit("/", 1)[-1]
            if name.startswith(CONSUMER_PREFIX) and status.mtime_ms < cutoff_ms:
                out.append(name[len(CONSUMER_PREFIX) :])
        return sorted(out)

    def expire(self, cutoff_ms: int) -> list[str]:
        """Delete the consumers :meth:`expired` names; their ids."""
        ids = self.expired(cutoff_ms)
        for consumer_id in ids:
            self.file_io.delete(self.path(consumer_id))
        return ids

    def delete(self, consumer_id: str) -> None:
        """Remove the consumer (absent: nothing to do)."""
        validate_consumer_id(consumer_id)
        self.file_io.delete(self.path(consumer_id))

    @staticmethod
    def _decode(data: bytes, path: str) -> int:
        try:
            return int(json.loads(data)[NEXT_SNAPSHOT])
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptMetadataError(f"consumer file is not readable: {e}", path=path) from e
