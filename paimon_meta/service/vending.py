"""Vended storage credentials (Paimon's data token): what ``GET .../token`` answers.

A principal with ``read`` on a table gets credentials that can only read the table's files; with
``write`` (or ``admin``), credentials that can also write and delete them (docs/CREDENTIALS.md says
which actions and why). They come from STS (:class:`paimon_meta.io.sts.StsVendor`) and are reused for
the same principal, table and level while more than half their lifetime is left, so a client fetches
once per table and lifetime and a crowd of clients costs one STS round trip; concurrent requests for
the same credentials wait for one STS call rather than each making their own.

Every answer is recorded in the data-access log (``paimon_access_events``: principal, table, level,
actions, expiry, the STS session name; never the credentials) and counted. Secrets appear only in the
answer's body: not in a log line, an event, an error body or a metric.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Histogram

from paimon_meta.db.models import AccessLevel
from paimon_meta.io.policies import AccessLevel as PolicyLevel
from paimon_meta.io.sts import StsSettings, StsVendor, VendedCredentials
from paimon_meta.metastore.access_events import CredentialsVended
from paimon_meta.metastore.registry import TableRow

log = logging.getLogger("paimon_meta.service.vending")

#: Credentials cached per replica (principal x table x level); the least recently used go first.
MAX_CACHED = 10_000
#: Reused while more than this share of the lifetime is left (pypaimon and Java fetch again when less
#: than an hour is left; with the default 6 h that leaves them 3 h of use per fetch).
REUSE_WHILE_LEFT = 0.5

_Key = tuple[str, str, AccessLevel]
_POLICY_LEVEL: dict[AccessLevel, PolicyLevel] = {AccessLevel.READ: "read", AccessLevel.WRITE: "write"}


class CredentialVending:
    """The process's vendor, its cache and its metrics. ``record`` writes the access event (the
    metastore); tests may pass their own."""

    def __init__(
        self,
        settings: StsSettings,
        storage_options: dict[str, str],
        registry: CollectorRegistry,
        record: Callable[[CredentialsVended], int],
        *,
        catalog: str = "",
    ) -> None:
        #: The name of the catalog it vends for (its metrics' ``catalog`` label).
        self.catalog = catalog
        self.settings = settings
        self.vendor = StsVendor(settings, storage_options)
        self._record = record
        self._cache: OrderedDict[_Key, VendedCredentials] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._key_locks: dict[_Key, threading.Lock] = {}
        # One set per registry: every catalog's vending of a process counts in the same metrics.
        self.vended, self.vend_failures, self.sts_seconds = _metrics_of(registry)

    def credentials(
        self, principal: str, row: TableRow, location: str, level: AccessLevel
    ) -> VendedCredentials:
        """Credentials for ``principal`` on the table at ``location``, from the cache or STS; recorded
        in the access log either way. Raises ``CredentialVendingError`` (STS failed) or
        ``ValidationError`` (the location is not on S3)."""
        key: _Key = (principal, location, level)
        with self._lock_of(key):
            cached = self._cached(key)
            if cached is None:
                started = time.perf_counter()
                try:
                    fresh = self.vendor.vend(location, _POLICY_LEVEL[level], principal)
                except Exception as e:
                    kind = "transient" if getattr(e, "transient", False) else "refused"
                    self.vend_failures.labels(catalog=self.catalog, kind=kind).inc()
                    raise
                finally:
                    self.sts_seconds.labels(catalog=self.catalog).observe(time.perf_counter() - started)
                self._keep(key, fresh)
            creds = cached or fresh
        self._record(
            CredentialsVended(
                principal=principal,
                table_id=row.table_id,
                table_identifier=row.identifier,
                level=level,
                actions=creds.actions,
                expires_at=creds.expires_at,
                payload={
                    "session_name": creds.session_name,
                    "cached": cached is not None,
                    "role_arn": self.settings.role_arn,
                    "location": location,
                },
            )
        )
        self.vended.labels(
            catalog=self.catalog, level=level.value, source="cache" if cached is not None else "sts"
        ).inc()
        log.info(
            "vended %s credentials for %s to %s until %s (%s)",
            level.value,
            row.identifier,
            principal,
            creds.expires_at.isoformat(),
            "reused" if cached is not None else f"session {creds.session_name}",
        )
        return creds

    def _lock_of(self, key: _Key) -> threading.Lock:
        with self._cache_lock:
            lock = self._key_locks.get(key)
            if lock is None:
                if len(self._key_locks) > MAX_CACHED:
                    # Dropping idle locks is safe: a waiter holds its own reference.
                    self._key_locks = {k: v for k, v in self._key_locks.items() if v.locked()}
                lock = self._key_locks[key] = threading.Lock()
            return lock

    def _cached(self, key: _Key) -> VendedCredentials | None:
        with self._cache_lock:
            creds = self._cache.get(key)
            if creds is None:
                return None
            if (
                creds.remaining_seconds(datetime.now(UTC))
                <= self.settings.duration_seconds * REUSE_WHILE_LEFT
            ):
                del self._cache[key]
                return None
            self._cache.move_to_end(key)
            return creds

    def _keep(self, key: _Key, creds: VendedCredentials) -> None:
        with self._cache_lock:
            self._cache[key] = creds
            self._cache.move_to_end(key)
            while len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)

    def forget(self, location: str) -> None:
        """Drop cached credentials of a location (its table was dropped or renamed)."""
        with self._cache_lock:
            for key in [k for k in self._cache if k[1] == location]:
                del self._cache[key]

    def close(self) -> None:
        self.vendor.close()


_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, tuple[Counter, Counter, Histogram]] = (
    weakref.WeakKeyDictionary()
)
_METRICS_LOCK = threading.Lock()


def _metrics_of(registry: CollectorRegistry) -> tuple[Counter, Counter, Histogram]:
    """The vending metrics of ``registry``, registered once (many catalogs' vendings share them)."""
    with _METRICS_LOCK:
        found = _METRICS.get(registry)
        if found is not None:
            return found
        vended = Counter(
            "paimon_meta_service_credentials_vended_total",
            "Storage credentials handed to clients, by access level and source (sts: a new STS "
            "session; cache: reused), by catalog.",
            ("catalog", "level", "source"),
            registry=registry,
        )
        failures = Counter(
            "paimon_meta_service_credential_vend_failures_total",
            "STS AssumeRole calls that failed, by kind (transient: retry later; refused: the role or "
            "its settings); by catalog.",
            ("catalog", "kind"),
            registry=registry,
        )
        seconds = Histogram(
            "paimon_meta_service_sts_seconds",
            "STS AssumeRole round trips, by catalog.",
            ("catalog",),
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=registry,
        )
        _METRICS[registry] = (vended, failures, seconds)
        return vended, failures, seconds
