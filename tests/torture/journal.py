"""A writer's journal: the client side of the history, durable before and after every commit.

One JSON object per line, appended and fsync'ed:

* ``{"op": "attempt", "i": 3, ...}`` before ``commit(messages, 3)`` is called;
* ``{"op": "ack", "i": 3, "sids": [7, 8], "dedup": false, ...}`` after it returned (acknowledged);
* ``{"op": "error", "i": 3, "type": "LockTimeoutError", "typed": true, ...}`` when it raised.

A writer killed mid-write leaves at most one torn last line, which readers skip. Every line carries the
writer's pid and a wall-clock time so a history can be lined up with the chaos driver's log.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Journal:
    """Append-only, fsync'ed JSON lines (one writer process at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _append(self, record: dict[str, Any]) -> None:
        record = {**record, "pid": os.getpid(), "t": round(time.time(), 6)}
        os.write(self._fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    def attempt(self, identifier: int) -> None:
        self._append({"op": "attempt", "i": identifier})

    def ack(self, identifier: int, snapshot_ids: tuple[int, ...], deduplicated: bool) -> None:
        self._append({"op": "ack", "i": identifier, "sids": list(snapshot_ids), "dedup": deduplicated})

    def error(self, identifier: int, exc: BaseException, *, typed: bool) -> None:
        self._append(
            {
                "op": "error",
                "i": identifier,
                "type": type(exc).__name__,
                "typed": typed,
                "message": str(exc)[:500],
            }
        )

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class History:
    """What one writer's journal says happened."""

    writer: int
    acks: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    dedup_acks: int = 0
    attempts: dict[int, int] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    torn_lines: int = 0

    @property
    def acked(self) -> set[int]:
        return set(self.acks)

    def next_identifier(self) -> int:
        """The first identifier not acknowledged (identifiers are committed in order)."""
        i = 0
        while i in self.acks:
            i += 1
        return i

    def unacked_attempts(self) -> set[int]:
        return {i for i in self.attempts if i not in self.acks}


def read_history(writer: int, path: Path) -> History:
    history = History(writer)
    if not path.exists():
        return history
    lines = path.read_bytes().split(b"\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if n == len(lines) - 1 or all(not rest.strip() for rest in lines[n + 1 :]):
                history.torn_lines += 1  # the writer died while appending its last line
                continue
            raise
        history.pids.add(int(record["pid"]))
        i = int(record["i"])
        if record["op"] == "attempt":
            history.attempts[i] = history.attempts.get(i, 0) + 1
        elif record["op"] == "ack":
            history.acks.setdefault(i, []).append(tuple(int(s) for s in record["sids"]))
            history.dedup_acks += bool(record["dedup"])
        elif record["op"] == "error":
            history.errors.append(record)
    return history
