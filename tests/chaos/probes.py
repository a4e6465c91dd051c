"""What the replicas answer while the metastore is down, and whether they stay alive and get ready again.

* :func:`probe_routes`: one request to every probed route of every replica, all at once (a route that
  retries server-side before answering does not stretch the outage by the sum of the routes' retries);
* :class:`HealthWatch`: ``/healthz`` of every replica polled throughout a run (it must answer 200 always:
  the process is up, whatever the metastore does);
* :func:`wait_ready`: ``/readyz`` polled until it answers 200 again by itself.

:func:`unavailable_problems` is the protocol's promise for an outage: 503 with ``Retry-After`` and the
error body ``{message, resourceType, resourceName, code}`` (code 503), never a 500.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.rest import models, paths
from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages

PREFIX = "paimon"  # the catalog name replicas serve (``paimon-meta serve --catalog-name``'s default)
ERROR_BODY_KEYS = {"message", "resourceType", "resourceName", "code"}


@dataclass(frozen=True, slots=True)
class Probe:
    """One answer (or transport error) of one route of one replica."""

    replica: str
    route: str
    status: int | None
    retry_after: str | None
    body: Any
    error: str | None = None
    at: float = 0.0

    def describe(self) -> str:
        what = self.error or f"{self.status} Retry-After={self.retry_after!r} {json.dumps(self.body)[:200]}"
        return f"{self.replica} {self.route}: {what}"


def routes(database: str, table: str) -> list[tuple[str, str]]:
    """(method, path) of every route probed: the catalog's config, listings and reads of the catalog, the
    table and its audit trail, a commit and a filter-committed (POST, bodies from :func:`post_bodies`)."""
    seg = {"prefix": PREFIX, "database": database, "table": table}
    reads = (
        paths.TABLE,
        paths.SNAPSHOT,
        paths.PARTITIONS,
        paths.TAGS,
        paths.COMMITS,
        paths.REGISTRY,
        paths.EVENTS,
        paths.LOCK_EVENTS,
        paths.SNAPSHOT_RECORDINGS,
    )
    return [
        ("GET", paths.CONFIG + f"?{paths.WAREHOUSE}={PREFIX}"),
        ("GET", paths.expand(paths.DATABASES, prefix=PREFIX)),
        ("GET", paths.expand(paths.DATABASE, prefix=PREFIX, database=database)),
        ("GET", paths.expand(paths.TABLES, prefix=PREFIX, database=database)),
        *(("GET", paths.expand(template, **seg)) for template in reads),
        ("POST", paths.expand(paths.COMMIT_MESSAGES, **seg)),
        ("POST", paths.expand(paths.FILTER_COMMITTED, **seg)),
    ]


def post_bodies(user: str, identifier: int, messages: Sequence[CommitMessage]) -> dict[str, bytes]:
    """The bodies of the probed POST routes by the last segment of their path: a commit of ``messages``
    as ``(user, identifier)`` and the filter-committed of that identifier."""
    commit = models.CommitMessagesRequest.model_validate(
        {
            "commit_user": user,
            "commit_identifier": identifier,
            "messages_version": CURRENT_VERSION,
            "messages": base64.b64encode(serialize_commit_messages(list(messages), CURRENT_VERSION)).decode(),
        }
    )
    filtered = models.FilterCommittedRequest.model_validate(
        {"commit_user": user, "identifiers": [identifier]}
    )
    return {
        paths.COMMIT_MESSAGES.rsplit("/", 1)[1]: models.dump(commit),
        paths.FILTER_COMMITTED.rsplit("/", 1)[1]: models.dump(filtered),
    }


def probe(base: str, token: str, method: str, path: str, body: bytes | None = None) -> Probe:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    at = time.time()
    try:
        response = httpx.request(method, base + path, headers=headers, content=body, timeout=60)
    except httpx.HTTPError as e:
        return Probe(base, f"{method} {path}", None, None, None, f"{type(e).__name__}: {e}", at)
    try:
        parsed: Any = response.json()
    except ValueError:
        parsed = response.text[:500]
    return Probe(
        base, f"{method} {path}", response.status_code, response.headers.get("Retry-After"), parsed, None, at
    )


def probe_routes(
    replicas: Sequence[str], token: str, routes_: Sequence[tuple[str, str]], bodies: dict[str, bytes]
) -> list[Probe]:
    """Every route of every replica, concurrently, plus ``/readyz`` and ``/healthz`` (no token); a POST
    sends the body :func:`post_bodies` gives for its path."""
    jobs = [
        (base, method, path, bodies[path.rsplit("/", 1)[1]] if method == "POST" else None)
        for base in replicas
        for method, path in [*routes_, ("GET", paths.READYZ), ("GET", paths.HEALTHZ)]
    ]
    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(lambda job: probe(job[0], token, job[1], job[2], job[3]), jobs))


def unavailable_problems(probes: Sequence[Probe]) -> list[str]:
    """Every probe taken while the metastore was down that broke the outage's promise."""
    problems = []
    for p in probes:
        if p.route.endswith(paths.HEALTHZ):
            if p.status != 200:
                problems.append(f"/healthz not 200 while the metastore is down: {p.describe()}")
            continue
        if p.status != 503:
            problems.append(f"expected 503: {p.describe()}")
            continue
        if p.route.endswith(paths.READYZ):
            continue  # says only "not ready"; no Retry-After promised
        if p.retry_after is None or not p.retry_after.strip().isdigit():
            problems.append(f"503 without a Retry-After of whole seconds: {p.describe()}")
        if not isinstance(p.body, dict) or set(p.body) != ERROR_BODY_KEYS or p.body.get("code") != 503:
            problems.append(f"503 without the protocol's error body: {p.describe()}")
    return problems


@dataclass
class HealthWatch:
    """Polls ``/healthz`` of ``replicas`` every ``interval`` seconds in a thread until :meth:`close`;
    ``failures`` holds every answer that was not 200 (or did not come)."""

    replicas: Sequence[str]
    interval: float = 0.25
    polls: int = 0
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> HealthWatch:
        self._thread = threading.Thread(target=self._run, name="chaos-healthz", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.wait(self.interval):
                for base in self.replicas:
                    self.polls += 1
                    try:
                        status = client.get(base + paths.HEALTHZ).status_code
                    except httpx.HTTPError as e:
                        self.failures.append(f"{time.time():.3f} {base}/healthz: {type(e).__name__}: {e}")
                        continue
                    if status != 200:
                        self.failures.append(f"{time.time():.3f} {base}/healthz: {status}")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def wait_ready(base: str, timeout: float = 30.0) -> float | None:
    """Poll ``/readyz`` until 200; seconds it took, or None if not ready within ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if httpx.get(base + paths.READYZ, timeout=5).status_code == 200:
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return None
