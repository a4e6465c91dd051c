"""The rights of open streams, re-checked while they stay open.

A stream (the change feed's SSE route, the console's live view) is authenticated once, when it opens,
and may then last for hours. :class:`StreamRights` keeps, for each credential with a stream open on this
replica, where its principal stands now: one thread of the replica re-reads them all every ``interval``
seconds in one query (``Principals.standing``), never per event nor per stream. A stream asks
:meth:`StreamRights.verdict` (no IO: a look at that state) before each batch it sends and at least every
``interval`` seconds while idle:

* its static token was revoked, or its principal deleted: the stream ends;
* its credential expired (a static token's ``expires_at``, a JWT's ``exp``): it ends; this one is looked
  at on our clock at every verdict, not only at the re-checks;
* it is sent events under the grants and assignments as they are now, decided at the verdict's time
  (the caller checks that they still cover what the stream delivers, else it ends): an assignment
  reaching its ``expireTime`` stops applying at the next verdict, as a revoked one does after the next
  re-check;
* the re-check has not succeeded for ``stale_after`` seconds (the metastore is down): nothing is sent
  until it does; the stream ends once it has not for ``give_up_after`` seconds.

Invariant: no event is sent under rights older than ``stale_after`` seconds, nor after the credential's
expiry. A stream that ends says why in its last write (an SSE comment, ``: stream ended: <why>``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from paimon_meta.metastore.principals import Access, Standing, hash_token
from paimon_meta.service.oidc import is_static_token

log = logging.getLogger(__name__)

#: Why a stream ended (the ``reason`` label of its metric, and the words of its last comment).
REVOKED = "revoked"
EXPIRED = "expired"
UNCOVERED = "grants"
UNVERIFIED = "unverified"
DRAINING = "draining"
WHY = {
    DRAINING: "this replica is shutting down: reconnect with the last event id (another replica resumes)",
    REVOKED: "the token was revoked, or its principal deleted",
    EXPIRED: "the token expired",
    UNCOVERED: "the principal's grants no longer cover this stream",
    UNVERIFIED: "the principal's rights could not be re-checked (the metastore did not answer)",
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a stream may do now: send events under ``access``, decided at ``at`` (the verdict's wall
    time: an assignment whose ``expireTime`` is past it gives nothing); or, with ``access`` None, send
    nothing (``ended`` None: wait, the rights are not re-checked yet; else end, for that reason)."""

    access: Access | None
    ended: str | None = None
    at: datetime | None = None


class Credential:
    """One credential (a token) with streams open here; shared by its streams."""

    __slots__ = ("access", "checked_at", "key", "static", "streams")

    def __init__(self, key: str, static: bool, access: Access, checked_at: float) -> None:
        self.key, self.static = key, static
        #: Where the principal stands as of ``checked_at``; None once revoked (for good).
        self.access: Access | None = access
        self.checked_at = checked_at
        self.streams = 0


class StreamRights:
    """The credentials of this replica's open streams, re-checked together (module docstring).
    Thread-safe; :meth:`verdict` does no IO, so streams call it on the event loop."""

    def __init__(
        self,
        standing: Callable[[Collection[str], Collection[str]], Standing],
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if interval <= 0:
            raise ValueError("the re-check interval must be positive")
        self.interval = interval
        #: Rights older than this are not sent under (one missed re-check is tolerated).
        self.stale_after = 2 * interval + 1.0
        self.give_up_after = self.stale_after + 30.0
        self._standing, self._clock, self._wall = standing, clock, wall
        self._lock = threading.Lock()
        self._credentials: dict[str, Credential] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checks = self.failures = 0

    # ---- what streams call -------------------------------------------------------------------------

    def watch(self, token: str, access: Access) -> Credential:
        """Keep ``token`` (just authenticated as ``access``) re-checked while a stream holds it; give it
        back with :meth:`release`."""
        key = hash_token(token)
        with self._lock:
            credential = self._credentials.get(key)
            if credential is None:
                credential = Credential(key, is_static_token(token), access, self._clock())
                self._credentials[key] = credential
            credential.streams += 1
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="paimon-stream-rights", daemon=True)
                self._thread.start()
        return credential

    def release(self, credential: Credential) -> None:
        with self._lock:
            credential.streams -= 1
            if credential.streams <= 0 and self._credentials.get(credential.key) is credential:
                del self._credentials[credential.key]

    def verdict(self, credential: Credential) -> Verdict:
        access = credential.access
        if access is None:
            return Verdict(None, REVOKED)
        wall = self._wall()
        if access.valid_until is not None and access.valid_until <= wall:
            return Verdict(None, EXPIRED)
        age = self._clock() - credential.checked_at
        if age > self.give_up_after:
            return Verdict(None, UNVERIFIED)
        if age > self.stale_after:
            return Verdict(None)
        return Verdict(access, at=datetime.fromtimestamp(wall, UTC))

    # ---- the re-check ----------------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Re-check every watched credential in one query; False when it failed (logged; the
        credentials keep their last state, which ages)."""
        with self._lock:
            credentials = [c for c in self._credentials.values() if c.access is not None]
        if not credentials:
            return True
        started = self._clock()
        hashes = {c.key for c in credentials if c.static}
        names: set[str] = set()
        for c in credentials:
            if not c.static and c.access is not None:
                names.update((c.access.principal, *c.access.groups))
        try:
            standing = self._standing(hashes, names)
        except Exception as e:  # the metastore did not answer: the streams hold, then end (docstring)
            self.failures += 1
            log.warning("re-checking the rights of %d open streams failed: %s", len(credentials), e)
            return False
        with self._lock:
            for c in credentials:
                c.access = _now(c, standing)
                c.checked_at = started
        self.checks += 1
        return True

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()


def _now(credential: Credential, standing: Standing) -> Access | None:
    """``credential``'s access as ``standing`` says it is now (None: revoked or its principal gone)."""
    before = credential.access
    if before is None:
        return None
    if credential.static:
        return standing.tokens.get(credential.key)
    # A signed-in user: the identity (principal, groups, expiry) is the JWT's; only the grants and
    # assignments change.
    own = standing.grants.get(before.principal)
    if own is None:
        return None
    groups = tuple(g for g in before.groups if g in standing.grants)
    return Access(
        before.principal,
        own + tuple(grant for g in groups for grant in standing.grants[g]),
        groups=groups,
        valid_until=before.valid_until,
        service=before.service,
        catalog=before.catalog,
        held=standing.held_by(before.principal) + tuple(h for g in groups for h in standing.held_by(g)),
    )
