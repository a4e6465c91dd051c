"""Retry policy with Paimon's option keys: ``commit.max-retries`` (10), ``commit.timeout`` (unbounded),
``commit.min-retry-wait`` (10 ms), ``commit.max-retry-wait`` (10 s); wait = min(min * 2^n, max) plus up to
20% jitter, as ``FileStoreCommitImpl.commitRetryWait``."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from paimon_meta.model.options import CoreOptions


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 10
    timeout_ms: int | None = None
    min_wait_ms: int = 10
    max_wait_ms: int = 10_000

    @staticmethod
    def from_options(options: CoreOptions) -> RetryPolicy:
        return RetryPolicy(
            max_retries=options.commit_max_retries,
            timeout_ms=options.commit_timeout_ms,
            min_wait_ms=options.commit_min_retry_wait_ms,
            max_wait_ms=options.commit_max_retry_wait_ms,
        )

    def wait_ms(self, retry: int, rng: random.Random | None = None) -> float:
        """The pause before retry number ``retry`` (1-based)."""
        base = min(self.min_wait_ms * (2 ** min(retry - 1, 30)), self.max_wait_ms)
        return float(base + (rng or random).uniform(0, 0.2 * base))

    def may_retry(self, retry: int, started_monotonic: float) -> bool:
        if retry > self.max_retries:
            return False
        if self.timeout_ms is None:
            return True
        return (time.monotonic() - started_monotonic) * 1000 < self.timeout_ms
