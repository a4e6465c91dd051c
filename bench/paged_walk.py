"""What the listing benchmarks share: walking a paged listing of the REST catalog as pypaimon pages it
(``maxResults``, then the previous answer's ``nextPageToken`` as ``pageToken``), timing each page, and
the percentile of those times."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx


def page_ms(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (seconds), in milliseconds rounded to 0.01."""
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def walk(
    client: httpx.Client,
    path: str,
    key: str,
    token: str,
    *,
    page: int,
    params: Mapping[str, str] | None = None,
) -> tuple[int, list[float]]:
    """(items, seconds per page) of one walk through every page of ``GET path`` (``key``: the answer's
    list member)."""
    items, times, cursor = 0, [], None
    while True:
        query: dict[str, Any] = {**(params or {}), "maxResults": page} | (
            {"pageToken": cursor} if cursor else {}
        )
        t0 = time.perf_counter()
        answer = client.get(path, params=query, headers={"Authorization": f"Bearer {token}"})
        times.append(time.perf_counter() - t0)
        answer.raise_for_status()
        body = answer.json()
        items += len(body[key])
        cursor = body["nextPageToken"]
        if cursor is None:
            return items, times
