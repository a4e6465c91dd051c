"""The catalogs one service process serves: the default catalog (``serve --catalog-name --warehouse``,
connected at start-up and never re-read) and every other catalog of ``paimon_catalogs``, connected the
first time a request names it and cached.

Invariants:

* A request is served by the catalog its ``{prefix}`` (or ``/v1/config``'s ``warehouse``) names, and only
  by it: the :class:`ServedCatalog` carries its catalog key, which scopes the registry, the change feed,
  the locks and the grants (``Access.in_catalog``).
* A catalog dropped or altered is noticed within ``refresh_seconds``: its cached entry is re-read from the
  metastore at most that old; a dropped one answers 404 from then on, an altered one (warehouse, storage
  profile, STS role, options) is connected anew. The replaced objects are closed once no request can be
  using them: at shutdown (``close``), or ``RETIRE_SECONDS`` after they were replaced.
* Every catalog's objects share the default catalog's engine (one connection pool per process); only the
  default catalog's ``close`` disposes it.
* Every catalog of the metastore is served by every replica within ``sweep`` intervals (``serve
  --catalog-sweep-seconds``), requested here or not: its maintenance workers, its background recovery and
  its NATS outbox run wherever it is served, so a catalog created by the CLI is maintained and published
  although no request named it on this replica. (The work itself is shared between replicas by the
  metastore: the maintenance queue's leases, the recovery lease, the outbox lease.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import CollectorRegistry

from paimon_meta.catalog.metastore import CATALOG_KEY, CATALOG_OPTIONS, ConnectInfo, MetastoreCatalog
from paimon_meta.errors import CatalogNotFoundError
from paimon_meta.io.sts import DEFAULT_DURATION_SECONDS, StsSettings, vendable
from paimon_meta.maintenance.spark import SparkCompaction
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.metastore.access_events import CredentialsVended
from paimon_meta.metastore.catalogs import CatalogInfo, Catalogs
from paimon_meta.service.feed_hub import FeedHub
from paimon_meta.service.vending import CredentialVending

log = logging.getLogger("paimon_meta.service.tenancy")

#: Seconds a cached catalog is served before its row is read again (a drop or alter is noticed then).
DEFAULT_REFRESH_SECONDS = 2.0
#: Seconds a replaced catalog's objects are kept open for the requests that still use them.
RETIRE_SECONDS = 120.0


class Publisher(Protocol):
    """A catalog's publisher of its change feed (``service.outbox.NatsOutbox``)."""

    def request_stop(self) -> None:
        """Ask it to stop after the batch in flight; returns at once."""

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop it and wait up to ``timeout``; True if it ended."""


@dataclass(slots=True)
class ServedCatalog:
    """One catalog as the service serves it."""

    name: str
    catalog: MetastoreCatalog
    #: Whether it is the service's default catalog (the grants naming no catalog apply in it).
    default: bool
    #: Its credential vending (its STS role), or None: its clients use their own storage options.
    vending: CredentialVending | None
    #: The row it was connected from (None: the default catalog, connected from the flags).
    info: CatalogInfo | None = None
    checked_at: float = 0.0
    #: Its maintenance scheduler and workers on this replica (None: none run here for it).
    maintainer: Maintainer | None = None
    #: Its change feed's publisher on this replica (None: ``--events-nats`` is off, or the default
    #: catalog, whose publisher the state runs).
    outbox: Publisher | None = None
    _hub: FeedHub | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> str:
        return self.catalog.registry.catalog_key

    def feed_hub(self, capacity: int) -> tuple[FeedHub, bool]:
        """The shared reader of this catalog's change feed, started on first use (``True`` then)."""
        with self._lock:
            if self._hub is not None:
                return self._hub, False
            self._hub = FeedHub(self.catalog.engine, self.key, capacity=capacity, default=self.default)
            self._hub.start()
            return self._hub, True

    def hub(self) -> FeedHub | None:
        with self._lock:
            return self._hub

    def close_hub(self) -> None:
        with self._lock:
            hub, self._hub = self._hub, None
        if hub is not None:
            hub.close()

    def close(self) -> None:
        """Close what this catalog holds but the shared engine (the default catalog's is closed by the
        state itself)."""
        if self.outbox is not None:
            self.outbox.stop(timeout=10.0)
        if self.maintainer is not None:
            self.maintainer.stop(timeout=10.0)
        self.close_hub()
        if self.vending is not None:
            self.vending.close()
        self.catalog.close()


def catalog_options(info: CatalogInfo, server_options: dict[str, str]) -> dict[str, str]:
    """The options a served catalog is connected with: the server's own catalog settings (lock lease and
    timeouts, recycle bin, ...: ``CATALOG_OPTIONS`` but the catalog key), then the catalog's storage
    profile and options, and its catalog key."""
    own = {k: v for k, v in server_options.items() if k in CATALOG_OPTIONS and k != CATALOG_KEY}
    return {**own, **info.storage_options(), CATALOG_KEY: info.catalog_key}


class ServedCatalogs:
    """The default catalog and the others, by name (thread-safe)."""

    def __init__(
        self,
        default: ServedCatalog,
        *,
        server_options: dict[str, str],
        sts: StsSettings | None,
        metrics_registry: CollectorRegistry,
        record_vended: Callable[[CredentialsVended], int],
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        maintenance_workers: int = 0,
        maintenance_spark: SparkCompaction | None = None,
        where: str = "",
        start_outbox: Callable[[CatalogInfo], Publisher | None] | None = None,
    ) -> None:
        self.default = default
        self._server_options = dict(server_options)
        self._sts = sts
        self._registry = metrics_registry
        self._record_vended = record_vended
        self.refresh_seconds = refresh_seconds
        #: Maintenance workers each served catalog runs on this replica (``serve --maintenance-workers``;
        #: 0: none): a catalog is maintained by the replicas serving it (its queue is in the metastore).
        self.maintenance_workers = maintenance_workers
        #: Where their large compactions run (``serve --maintenance-spark-master``; None: in-process).
        self.maintenance_spark = maintenance_spark
        self._where = where
        #: Starts a catalog's publisher of its change feed when it is connected (None: no outbox).
        self._start_outbox = start_outbox
        self._catalogs = Catalogs(default.catalog.engine)
        self._served: dict[str, ServedCatalog] = {}
        self._retired: list[tuple[float, ServedCatalog]] = []
        self._lock = threading.Lock()
        self._closed = False
        #: Called with a catalog key whose objects were replaced or dropped (caches keyed by it go).
        self.on_forget: Callable[[str], None] = lambda key: None

    def cached(self, name: str) -> ServedCatalog | None:
        """The catalog if it is served now without reading the metastore (callable on the event loop),
        else None (then :meth:`get` reads it)."""
        if name == self.default.name:
            return self.default
        with self._lock:
            served = self._served.get(name)
        if served is not None and time.monotonic() - served.checked_at < self.refresh_seconds:
            return served
        return None

    def get(self, name: str) -> ServedCatalog:
        """The catalog named ``name`` (reads the metastore when its cached entry is older than
        ``refresh_seconds``).

        Raises:
            CatalogNotFoundError: no such catalog (the protocol's 404, ``CATALOG``).
        """
        hit = self.cached(name)
        if hit is not None:
            return hit
        try:
            info = self._catalogs.get(name)
        except CatalogNotFoundError:
            self._retire(name)
            raise CatalogNotFoundError(f"no catalog {name!r} in this service", catalog=name) from None
        if info.catalog_key == self.default.key:
            # Another name for the default catalog's rows (a metastore whose default catalog could not be
            # recorded under its own name): never served twice, with two warehouses over the same rows.
            self._retire(name)
            raise CatalogNotFoundError(
                f"catalog {name!r} has the default catalog's key {info.catalog_key!r}: use "
                f"{self.default.name!r}",
                catalog=name,
            )
        return self._serve(info)

    def sweep(self) -> list[str]:
        """Serve every catalog of the metastore on this replica: connect those not served yet (their
        maintenance workers and publisher start), connect anew the altered ones, retire the dropped ones
        (one read of ``paimon_catalogs``). Returns the names served after it (the default first). A catalog
        that cannot be connected is logged and tried again at the next sweep.

        Raises:
            SQLAlchemyError: the metastore did not answer (the caller tries again later).
        """
        infos = self._catalogs.list_all()
        listed = {info.name for info in infos}
        for info in infos:
            if info.name == self.default.name or info.catalog_key == self.default.key:
                continue
            try:
                self._serve(info)
            except CatalogNotFoundError:
                pass  # the service is stopping
            except Exception:
                log.warning(
                    "catalog %r could not be connected; next sweep tries again", info.name, exc_info=True
                )
        with self._lock:
            gone = [name for name in self._served if name not in listed]
        for name in gone:
            self._retire(name)
        return [s.name for s in self.every()]

    def _serve(self, info: CatalogInfo) -> ServedCatalog:
        """The served entry of ``info`` (just read from the metastore): the cached one if it was connected
        from the same row, else connected now (the replaced one retired)."""
        name = info.name
        now = time.monotonic()
        with self._lock:
            served = self._served.get(name)
            if served is not None and served.info == info:
                served.checked_at = now
                return served
        fresh = self._connect(info)
        fresh.checked_at = now
        replaced: ServedCatalog | None = None
        with self._lock:
            if self._closed:
                raced: ServedCatalog | None = fresh
                keep = None
            else:
                old = self._served.get(name)
                if old is not None and old.info == info:  # another thread connected it meanwhile
                    old.checked_at = now
                    keep, raced = old, fresh
                else:
                    self._served[name] = keep = fresh
                    raced, replaced = None, old
                    if old is not None:
                        self._retired.append((now, old))
                        # its publisher lets the new one take the lease now, not when it is closed
                        if old.outbox is not None:
                            old.outbox.request_stop()
            expired = [s for at, s in self._retired if now - at > RETIRE_SECONDS]
            self._retired = [(at, s) for at, s in self._retired if now - at <= RETIRE_SECONDS]
        if raced is not None:
            raced.close()
        if keep is None:
            raise CatalogNotFoundError(f"the service is stopping: no catalog {name!r}", catalog=name)
        if replaced is not None:
            log.info("catalog %r changed: connected anew", name)
            self.on_forget(replaced.key)
        for expired_one in expired:
            expired_one.close()
        return keep

    def _retire(self, name: str) -> None:
        with self._lock:
            old = self._served.pop(name, None)
            if old is not None:
                self._retired.append((time.monotonic(), old))
        if old is not None:
            if old.outbox is not None:
                old.outbox.request_stop()  # a dropped catalog is published no more
            log.info("catalog %r was dropped: no longer served", name)
            self.on_forget(old.key)

    def _connect(self, info: CatalogInfo) -> ServedCatalog:
        engine = self.default.catalog.engine
        connect = self.default.catalog.info
        catalog = MetastoreCatalog(
            engine,
            info.warehouse,
            catalog_options(info, self._server_options),
            info=ConnectInfo(connect.metastore_url, info.warehouse, connect.embedded),
            own_engine=False,
            default_catalog=False,
        )
        vending = None
        if info.sts_role_arn is not None and vendable(catalog.warehouse):
            base = self._sts
            settings = StsSettings(
                role_arn=info.sts_role_arn,
                external_id=info.sts_external_id,
                duration_seconds=base.duration_seconds if base is not None else DEFAULT_DURATION_SECONDS,
                endpoint=base.endpoint if base is not None else None,
                region=base.region if base is not None else None,
                pyarrow_create_dir=base.pyarrow_create_dir if base is not None else False,
            )
            vending = CredentialVending(
                settings,
                catalog.file_io_options,
                self._registry,
                self._record_vended,
                catalog=info.name,
            )
        maintainer = None
        if self.maintenance_workers > 0:
            maintainer = Maintainer(
                catalog,
                MaintainerSettings(workers=self.maintenance_workers, spark=self.maintenance_spark),
                where=self._where,
            )
            maintainer.start()
        outbox = self._start_outbox(info) if self._start_outbox is not None else None
        return ServedCatalog(
            info.name,
            catalog,
            default=False,
            vending=vending,
            info=info,
            maintainer=maintainer,
            outbox=outbox,
        )

    def every(self) -> list[ServedCatalog]:
        """The catalogs served now (the default first)."""
        with self._lock:
            return [self.default, *self._served.values()]

    def close(self) -> None:
        """Close every catalog but the default (the state closes it, with the engine)."""
        with self._lock:
            self._closed = True
            served, self._served = list(self._served.values()), {}
            retired, self._retired = [s for _, s in self._retired], []
        for s in served + retired:
            try:
                s.close()
            except Exception:
                log.warning("closing catalog %r failed", s.name, exc_info=True)
