"""How the commit service's client waits before sending a request again: capped exponential backoff with
full jitter, the server's ``Retry-After`` honoured, everything within one deadline per call.

What is sent again is the client's decision (``paimon_meta.catalog.rest``); this module only says when.
Its clock, sleep and randomness are injectable, so a test drives a whole retry loop without waiting.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC

from paimon_meta.errors import ValidationError

#: Catalog options (``connect_service(url, token=..., **{DEADLINE: "60"})``, ``--option k=v`` of the CLI
#: and the Spark jobs, the data source's options). The deadline bounds the time from a call's first
#: attempt to the start of its last one (0: no retries, the first failure is the answer); the backoff
#: before retry ``n`` (from 0) is uniform in ``[0, min(MAX_BACKOFF, 0.1 s * 2**n))``.
DEADLINE = "rest.retry.deadline-seconds"
MAX_BACKOFF = "rest.retry.max-backoff-seconds"
DEFAULT_DEADLINE_SECONDS = 30.0
DEFAULT_MAX_BACKOFF_SECONDS = 5.0
BASE_BACKOFF_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When to send a request again. ``clock`` (monotonic seconds) measures the deadline, ``wall``
    (epoch seconds) reads an HTTP-date ``Retry-After``, ``uniform`` draws the jitter in [0, 1)."""

    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS
    max_backoff_seconds: float = DEFAULT_MAX_BACKOFF_SECONDS
    base_backoff_seconds: float = BASE_BACKOFF_SECONDS
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    wall: Callable[[], float] = field(default=time.time, compare=False)
    uniform: Callable[[], float] = field(default=random.random, compare=False)

    @staticmethod
    def from_options(options: Mapping[str, str]) -> RetryPolicy:
        """The policy the catalog options ask for (defaults for the keys not given); ``ValidationError``
        naming the option for a value that is not a finite number >= 0."""
        return RetryPolicy(
            deadline_seconds=_seconds(options, DEADLINE, DEFAULT_DEADLINE_SECONDS),
            max_backoff_seconds=_seconds(options, MAX_BACKOFF, DEFAULT_MAX_BACKOFF_SECONDS),
        )

    @property
    def enabled(self) -> bool:
        return self.deadline_seconds > 0

    def backoff(self, retry: int) -> float:
        """The wait before retry ``retry`` (0 for the first) when the server named none: "full jitter"
        (uniform up to the capped exponential), which spreads clients that failed together."""
        ceiling = min(self.max_backoff_seconds, self.base_backoff_seconds * 2.0 ** min(retry, 62))
        return self.uniform() * ceiling

    def delay(self, retry: int, retry_after: str | None, remaining: float) -> float:
        """The wait before retry ``retry``: at least what ``Retry-After`` asks for (seconds or an
        HTTP-date; one that does not parse is ignored), plus the jittered backoff (clients told the same
        ``Retry-After`` do not come back in step); never past the deadline (``remaining`` seconds)."""
        asked = parse_retry_after(retry_after, self.wall()) if retry_after is not None else None
        return max(0.0, min((asked or 0.0) + self.backoff(retry), remaining))


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait by a ``Retry-After`` value (RFC 9110 10.2.3: delay-seconds or an HTTP-date,
    ``now`` the wall clock in epoch seconds); None when it is neither. A date in the past is 0."""
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # a "-0000" zone: the time is UTC (RFC 5322 3.3)
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def _seconds(options: Mapping[str, str], key: str, default: float) -> float:
    raw = options.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValidationError(f"{key} must be a number of seconds, got {raw!r}", option=key) from None
    if not math.isfinite(value) or value < 0:
        raise ValidationError(f"{key} must be >= 0 seconds, got {raw!r}", option=key)
    return value
