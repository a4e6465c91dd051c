"""The stream slots of one replica: at most ``total`` live streams open, and at most ``per_principal`` of
them held by one principal, so one reader cannot take every slot and lock the others out of the feed and
the console's live view."""

from __future__ import annotations

import threading
from enum import Enum


class Full(Enum):
    """Which bound refused a stream."""

    REPLICA = "feed_streams"
    PRINCIPAL = "principal_feed_streams"


class StreamSlots:
    """Counts of open streams, in all and per principal. Thread-safe."""

    def __init__(self, total: int, per_principal: int) -> None:
        if total < 1 or per_principal < 1:
            raise ValueError("stream bounds must be at least 1")
        self.total, self.per_principal = total, per_principal
        self._lock = threading.Lock()
        self._open = 0
        self._held: dict[str, int] = {}

    def take(self, principal: str) -> Full | None:
        """Take a slot for a stream of ``principal``: None when taken, else the bound that is full
        (nothing taken then). The principal's own bound is looked at first: a principal at its cap is
        told so (429) even while the replica is full too."""
        with self._lock:
            held = self._held.get(principal, 0)
            if held >= self.per_principal:
                return Full.PRINCIPAL
            if self._open >= self.total:
                return Full.REPLICA
            self._held[principal] = held + 1
            self._open += 1
        return None

    def give_back(self, principal: str) -> None:
        with self._lock:
            self._open -= 1
            left = self._held.get(principal, 0) - 1
            if left > 0:
                self._held[principal] = left
            else:
                self._held.pop(principal, None)

    def held(self, principal: str) -> int:
        with self._lock:
            return self._held.get(principal, 0)

    def __len__(self) -> int:
        with self._lock:
            return self._open
