"""What one service process holds: settings, the catalog (engine, lock sessions, FileIO), principals and
its metrics. Created in the app's lifespan, never at import time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from paimon_meta.archive.background import ArchiveMetrics, BackgroundArchiver
from paimon_meta.archive.store import partitioned_log
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.metastore.group import GroupCommitter, GroupReport, GroupSettings
from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.faults import Fault
from paimon_meta.errors import CommitConflictError, NotFoundError, TableNotFoundError, ValidationError
from paimon_meta.io.sts import StsSettings, vendable
from paimon_meta.maintenance.spark import SparkCompaction
from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
from paimon_meta.metastore import lock_metrics
from paimon_meta.metastore.access_events import append_commit_refused, append_vended
from paimon_meta.metastore.catalogs import CatalogInfo
from paimon_meta.metastore.outbox import LeaseSession
from paimon_meta.metastore.principals import Access, Principals, hash_token
from paimon_meta.metastore.registry import TableRow
from paimon_meta.service.bounds import DEFAULT_STATEMENT_TIMEOUTS, parse_statement_timeouts
from paimon_meta.service.errors import Answer, OverloadedError, TooManyStreamsError
from paimon_meta.service.feed_hub import FeedHub
from paimon_meta.service.oidc import OidcSettings, OidcVerifier, is_static_token
from paimon_meta.service.outbox import NatsOutbox, NatsOutboxSettings, OutboxMetrics
from paimon_meta.service.streams.rights import StreamRights
from paimon_meta.service.streams.slots import Full, StreamSlots
from paimon_meta.service.tenancy.served import DEFAULT_REFRESH_SECONDS, ServedCatalog, ServedCatalogs
from paimon_meta.service.vending import CredentialVending
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.table import FileStoreTable
from paimon_meta.telemetry import rollup

log = logging.getLogger("paimon_meta.service")

#: The lock (in the metastore's lock table) a replica holds while it runs recovery in the background.
RECOVERY_LOCK = "paimon_meta:recovery"
#: After the drain, how long closing waits for commits holding a table's lock to finish.
CLOSE_GRACE_SECONDS = 5.0
#: What a client of a stopping replica is told to wait before it re-sends (to another replica).
DRAIN_RETRY_AFTER_SECONDS = 1
#: What a principal at its stream cap is told to wait (a stream of its own must end first).
STREAM_RETRY_AFTER_SECONDS = 5


def statement_timeouts_of(specs: list[str] | None) -> dict[str, float]:
    """``serve --statement-timeout CLASS=SECONDS`` items over the defaults (service.bounds)."""
    return parse_statement_timeouts(specs)


#: Events of the log a request of the change feed reads at most (``serve --feed-scan-rows``).
DEFAULT_FEED_SCAN_ROWS = 10_000
#: Seconds; request latencies from sub-millisecond reads to lock timeouts.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

log = logging.getLogger(__name__)

#: The commit log's partitions made ahead: periods covered past now, how often it is checked, and how soon
#: it is tried again after a failure (service.state.ServiceState._partitions_loop).
EVENT_PARTITIONS_AHEAD = 2
EVENT_PARTITIONS_CHECK_SECONDS = 600.0
EVENT_PARTITIONS_RETRY_SECONDS = 30.0
#: Events a background fold of the metrics rollup folds before it checks for the drain (then goes on).
FOLD_BATCH_EVENTS = 50_000
#: Seconds before a failed background fold is tried again (at least ``metrics_fold_seconds``).
FOLD_RETRY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """How ``paimon-meta serve`` runs. ``catalog_name`` is the REST ``prefix`` clients get from
    ``/v1/config`` (and pass as their ``warehouse`` option)."""

    metastore_url: str | None = None
    warehouse: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    catalog_name: str = "paimon"
    max_body_bytes: int = 16 * 1024 * 1024
    worker_threads: int = 32
    drain_seconds: float = 30.0
    auth_cache_seconds: float = 1.0
    event_log_metrics: bool = True
    #: Seconds a scrape of the event log's metrics is reused by the next scrapes (0: every scrape asks).
    metrics_cache_seconds: float = 5.0
    #: Tables (and locks) with series of their own in the event log's metrics (``telemetry.rollup``).
    metrics_table_series: int = 100
    #: Seconds between background folds of the event log into the metrics rollup (0: scrapes fold).
    metrics_fold_seconds: float = 0.0
    #: Freeze the objects built at start out of the garbage collector's full collections (``serve``: on;
    #: off for apps built in a process that builds many, as tests do: frozen garbage is never freed).
    gc_freeze_at_start: bool = False
    # Against hostile or broken clients (README, "Hardening"): a request body must arrive within
    # ``body_timeout_seconds`` (else 408), request headers within ``header_timeout_seconds`` and at most
    # ``max_header_bytes`` (else the connection is closed), an idle connection is closed after
    # ``keep_alive_seconds``; beyond ``max_connections`` connections or requests in flight new requests
    # get 503. Failed authentications (a token presented and refused) are throttled per client address:
    # ``auth_failure_burst`` of them, then one more every ``auth_failure_refill_seconds`` (else 429);
    # burst 0 turns the throttle off.
    body_timeout_seconds: float = 30.0
    header_timeout_seconds: float = 10.0
    max_header_bytes: int = 64 * 1024
    keep_alive_seconds: float = 5.0
    max_connections: int = 1024
    auth_failure_burst: int = 20
    auth_failure_refill_seconds: float = 3.0
    # Group commit of the control plane's commit-messages requests (per table, per replica).
    group_max_commits: int = 64
    group_max_hold_seconds: float = 0.5
    group_max_batch: int = 16
    # Admission control (README, "Failure modes"): beyond ``max_in_flight`` authenticated requests being
    # handled, ``max_table_commits`` commits of one table or ``max_commits`` commits in all (queued or
    # running on this replica), a request is answered 503 + Retry-After at once instead of waiting in an
    # unbounded queue. ``/healthz``, ``/readyz`` and ``/metrics`` are never shed.
    max_in_flight: int = 256
    max_table_commits: int = 256
    max_commits: int = 1024
    # Live change-feed streams (Server-Sent Events) open on this replica: they last as long as their
    # subscribers, so they do not count against ``max_in_flight`` (which they would fill); beyond this
    # many a new one is answered 503 + Retry-After.
    max_feed_streams: int = 512
    # Principals an operator marked trusted engines (``serve --trusted-engines``): they enforce row
    # filters and column masks themselves, so they get data tokens for tables whose reads policies
    # restrict for them (service.data_policies); every other restricted principal is refused one.
    trusted_engines: frozenset[str] = frozenset()
    # Of those, at most this many held by one principal (None: a sixteenth of ``max_feed_streams``, at
    # least 1): beyond it a new one of that principal is answered 429 + Retry-After.
    max_feed_streams_per_principal: int | None = None
    # An open stream re-checks its principal (token revoked, grants, expiry) at least this often
    # (service/streams/rights.py): one query per replica for all its streams.
    feed_recheck_seconds: float = 5.0
    # A live stream whose client has not taken one write for this long is ended (it resumes with the
    # last id it received): a stalled subscriber keeps neither a slot nor memory on the replica.
    feed_send_timeout_seconds: float = 30.0
    # The newest events the replica's shared feed reader keeps in memory (service.feed_hub); a stream
    # further behind reads the log itself until it is back in them.
    feed_ring_events: int = 10_000
    # Events of the log one request of the change feed reads at most (a page, or one read of a stream
    # behind the ring): past it the page ends where the read got, and its token continues from there.
    feed_scan_rows: int = DEFAULT_FEED_SCAN_ROWS
    # Seconds each route class's requests may spend (``serve --statement-timeout CLASS=SECONDS``;
    # service.bounds): their queries' statement timeout, and reads are cancelled at the deadline and
    # when their client goes away. 0: no deadline for that class.
    statement_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_STATEMENT_TIMEOUTS))
    # Vended storage credentials (Paimon's data token, README "Vended credentials"): None keeps clients
    # on their own storage options (a local warehouse has nothing to vend).
    sts: StsSettings | None = None
    # Bearer JWTs of an OpenID Connect issuer (README "Signing in with OIDC"): None accepts only the
    # static tokens (``pmt_...``), which keep working beside JWTs either way.
    oidc: OidcSettings | None = None
    # TLS (README "TLS"): the server's certificate chain and private key, PEM files; both or neither
    # (``server.serve`` refuses one alone). None: plain HTTP (behind a TLS-terminating proxy, or local).
    tls_cert: str | None = None
    tls_key: str | None = None
    # The change feed published to NATS JetStream from an outbox (README "The change feed",
    # service/outbox.py): None publishes nothing.
    events_nats: NatsOutboxSettings | None = None
    # Proxies whose ``X-Forwarded-For``/``X-Forwarded-Proto`` are believed (README "Behind a proxy"):
    # addresses or networks; empty: none, so a client cannot choose the address the failed-token
    # throttle counts it under.
    forwarded_allow_ips: tuple[str, ...] = ()
    # Maintenance run from the commit log (paimon_meta/maintenance/, README "Maintenance"): this many
    # worker threads on this replica (0: none, and no scheduler either); jobs are shared by every replica
    # and the standalone ``paimon-meta maintain`` through the queue in Postgres. ``paimon-meta serve``
    # runs 2 unless told otherwise (--maintenance-workers); an embedded app, none.
    maintenance_workers: int = 0
    # Large compactions as the Spark compaction job on this cluster (``serve --maintenance-spark-master``;
    # maintenance/spark.py); None: every compaction in the workers' own threads.
    maintenance_spark: SparkCompaction | None = None
    # Recovery in the background (README "Graceful drain"): every this many seconds one replica at a time
    # (a lease on the metastore lock ``RECOVERY_LOCK``) settles the commits left prepared, e.g. by a replica
    # stopped mid-commit; 0 turns it off (``paimon-meta recover`` then does it). ``paimon-meta serve`` runs
    # it every 60 s unless told otherwise (--recovery-interval-seconds); an embedded app, never (as its
    # maintenance workers: an app that embeds the service decides what runs in its process).
    recovery_interval_seconds: float = 0.0
    # Seconds a catalog other than the default is served from this replica's cache before its row is read
    # again (service.tenancy.served): a dropped or altered catalog is noticed within this time.
    catalog_refresh_seconds: float = DEFAULT_REFRESH_SECONDS
    # Every this many seconds every catalog of the metastore is served by this replica (connected if no
    # request named it yet: its maintenance workers, recovery and NATS outbox start; a dropped one
    # retired): service.tenancy.served's sweep. 0: only the catalogs requested here are served.
    # ``paimon-meta serve`` sweeps every 30 s unless told otherwise (--catalog-sweep-seconds); an embedded
    # app, never (as its maintenance workers).
    catalog_sweep_seconds: float = 0.0
    # The commit log's archiver (paimon_meta/archive/, docs/OPERATIONS.md "The commit log's archive"):
    # every this many seconds one replica at a time (a lease on the metastore lock ``ARCHIVER_LOCK``)
    # archives the event log's partitions past their catalogs' ``paimon-meta.events.retention`` into each
    # catalog's ``system.commit_log`` and drops them. 0 turns it off (``paimon-meta events archive`` then
    # does it). ``paimon-meta serve`` runs it hourly unless told otherwise (--archive-interval-seconds); an
    # embedded app, never (as its maintenance workers).
    archive_interval_seconds: float = 0.0
    # The commit log's partitions by time (migration 0024): this replica makes the partitions for now and
    # the next EVENT_PARTITIONS_AHEAD periods of this many days, at start and every
    # EVENT_PARTITIONS_CHECK_SECONDS (paimon_meta.metastore.event_partitions; every replica may: they
    # serialise on an advisory lock). ``paimon-meta serve`` does, every 7 days unless told otherwise
    # (--event-partition-days); 0: never (an embedded app: ``paimon-meta events make-partitions`` does).
    event_partition_days: float = 0.0
    # Migrate the metastore at start-up (``serve --migrate``); by default a replica only checks that the
    # schema is within the compatibility window and migrations are a Job's (``paimon-meta db upgrade``).
    migrate: bool = False

    @property
    def feed_streams_per_principal(self) -> int:
        """The per-principal cap on live streams (the setting, or its default share)."""
        if self.max_feed_streams_per_principal is not None:
            return self.max_feed_streams_per_principal
        return max(1, self.max_feed_streams // 16)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _until(deadline: float, access: Access | None) -> float:
    """``deadline`` (monotonic seconds), or earlier: when ``access``'s credential expires or one of its
    assignments reaches its ``expireTime`` (invariant: no cached answer outlives the token it was given
    for, nor an assignment it holds)."""
    if access is None:
        return deadline
    wall = time.time()
    changes = access.expires_next(wall)
    if changes is None:
        return deadline
    return min(deadline, time.monotonic() + (changes - wall))


class ServiceMetrics:
    """Request, commit and auth metrics of this process (``prometheus_client``, own registry)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "paimon_meta_service_requests_total",
            "HTTP requests by route template, method and status.",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.catalog_requests = Counter(
            "paimon_meta_service_catalog_requests_total",
            "HTTP requests by the catalog they were served by (its name: the default catalog for a path "
            "without a prefix) and status; requests naming no catalog of the service are not counted here.",
            ("catalog", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "paimon_meta_service_request_seconds",
            "HTTP request latency by route template and method.",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "paimon_meta_service_requests_in_flight", "Requests being handled now.", registry=self.registry
        )
        self.commits = Counter(
            "paimon_meta_service_commits_total",
            "Commits by route (snapshot: the REST snapshot commit; messages: CommitMessages) and outcome "
            "(published, conflict, rejected, overloaded, failed), by catalog.",
            ("catalog", "route", "outcome"),
            registry=self.registry,
        )
        self.commit_latency = Histogram(
            "paimon_meta_service_commit_seconds",
            "Time to commit (either commit route), lock wait included, by catalog.",
            ("catalog",),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.group_commits = Histogram(
            "paimon_meta_service_group_commits",
            "Commits per table lock hold of the control plane's group commit.",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=self.registry,
        )
        self.group_hold = Histogram(
            "paimon_meta_service_group_hold_seconds",
            "How long group commit held a table's lock (one hold).",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.dependency_errors = Counter(
            "paimon_meta_service_dependency_errors_total",
            "Requests answered 502/503 because a dependency failed, by kind: the metastore fault "
            "(unavailable, reset, serialization, deadlock, lock_timeout, canceled, metastore) or storage.",
            ("kind",),
            registry=self.registry,
        )
        self.retries = Counter(
            "paimon_meta_service_retries_total",
            "Requests the server ran again after a transient metastore fault, by the fault's kind.",
            ("kind",),
            registry=self.registry,
        )
        self.shed = Counter(
            "paimon_meta_service_shed_total",
            "Requests refused at once with 503 by admission control, by the bound that was full "
            "(in_flight, table_commits, commits).",
            ("bound",),
            registry=self.registry,
        )
        self.commits_admitted = Gauge(
            "paimon_meta_service_commits_admitted",
            "Commits queued or running on this replica.",
            registry=self.registry,
        )
        self.feed_streams = Gauge(
            "paimon_meta_service_feed_streams",
            "Live change-feed streams open on this replica, by catalog.",
            ("catalog",),
            registry=self.registry,
        )
        self.feed_oldest_transaction = Gauge(
            "paimon_meta_service_feed_oldest_transaction_seconds",
            "Age of the oldest transaction on the metastore's Postgres server (as the change feed's reader "
            "last saw it): events committed after it started are delivered only once it ends.",
            registry=self.registry,
        )
        self.feed_streams_ended = Counter(
            "paimon_meta_service_feed_streams_ended_total",
            "Live change-feed streams ended because their principal's rights changed, by reason "
            "(revoked, expired, grants, unverified); by catalog.",
            ("catalog", "reason"),
            registry=self.registry,
        )
        self.feed_streams_dropped = Counter(
            "paimon_meta_service_feed_streams_dropped_total",
            "Live change-feed streams ended because their client took no write for the send timeout, by "
            "catalog.",
            ("catalog",),
            registry=self.registry,
        )
        self.auth_refusals = Counter(
            "paimon_meta_service_auth_refusals_total",
            "Requests refused for a missing/unknown token (unauthenticated) or grant (forbidden).",
            ("reason",),
            registry=self.registry,
        )
        #: The change feed's publisher to NATS (``serve --events-nats``); zero without it.
        self.outbox = OutboxMetrics(self.registry)


class AuthThrottle:
    """Failed authentications per client address, as token buckets: each address may fail ``burst``
    times, and regains one failure every ``refill_seconds``. At most ``max_addresses`` are tracked (the
    least recently failing one is forgotten first: it is the one whose bucket refilled the most)."""

    def __init__(
        self,
        burst: int,
        refill_seconds: float,
        *,
        max_addresses: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.refill_seconds = max(refill_seconds, 1e-3)
        self.max_addresses = max_addresses
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # address -> (left, at)
        self._lock = threading.Lock()

    def _left(self, address: str, now: float) -> float:
        left, at = self._buckets.get(address, (float(self.burst), now))
        return min(float(self.burst), left + (now - at) / self.refill_seconds)

    def retry_after(self, address: str) -> int:
        """0 when ``address`` may try a token now, else the whole seconds until it may."""
        if self.burst <= 0:
            return 0
        with self._lock:
            if address not in self._buckets:
                return 0
            left = self._left(address, self._clock())
        return 0 if left >= 1 else max(1, math.ceil((1 - left) * self.refill_seconds))

    def failed(self, address: str) -> None:
        if self.burst <= 0:
            return
        with self._lock:
            now = self._clock()
            self._buckets[address] = (max(0.0, self._left(address, now) - 1), now)
            self._buckets.move_to_end(address)
            while len(self._buckets) > self.max_addresses:
                self._buckets.popitem(last=False)

    def __len__(self) -> int:
        return len(self._buckets)


@dataclass(slots=True)
class CommitCount:
    """The outcome :meth:`ServiceState.counted_commit` counts (``published`` unless told otherwise)."""

    outcome: str = "published"


class ServiceState:
    """One per process; shared by request threads (everything in it is thread-safe)."""

    def __init__(self, settings: ServiceSettings, catalog: MetastoreCatalog) -> None:
        self.settings = settings
        self.catalog = catalog
        # Authentication in one Postgres round trip on the lock's autocommit sessions (issue 39).
        self.principals = Principals(catalog.engine, sessions=catalog.lock.sessions)
        self.metrics = ServiceMetrics()
        # The default catalog's series exist from the start (0 until something happens), as they did
        # before they had a catalog label: a dashboard reading them sees a value, not an absent series.
        for family in (
            self.metrics.feed_streams,
            self.metrics.feed_streams_dropped,
            self.metrics.commit_latency,
        ):
            family.labels(catalog=settings.catalog_name)
        # The lock's deferred releases and recordings (a holder resolving its own lock after the
        # metastore came back) are counted in this process's registry.
        lock_metrics.register(catalog.lock, self.metrics.registry)
        self.started = time.time()
        self.replica = f"{os.uname().nodename}:{os.getpid()}"
        engine = catalog.engine
        if settings.sts is not None and not vendable(catalog.warehouse):
            # /v1/config would tell clients to fetch credentials the token route cannot vend (pypaimon
            # would then fail on every table): refuse to start instead.
            raise ValidationError(
                f"--sts-role-arn vends S3 credentials, but the warehouse {catalog.warehouse!r} is not on "
                "S3: drop the flag (clients of a local warehouse need no credentials)",
                option="sts-role-arn",
            )
        self.vending = (
            CredentialVending(
                settings.sts,
                settings.options,
                self.metrics.registry,
                lambda event: append_vended(engine, event),
                catalog=settings.catalog_name,
            )
            if settings.sts is not None
            else None
        )
        # Checks bearer JWTs (and fetches the issuer's keys) only once one arrives: nothing at start-up.
        self.oidc = OidcVerifier(settings.oidc) if settings.oidc is not None else None
        self._auth_cache: dict[str, tuple[float, Access | None]] = {}
        # Tokens that authenticated in the last ``KNOWN_GOOD_SECONDS`` (hashes, least recent first):
        # they are still checked on each request, but a throttled address may present them.
        self._known_good: OrderedDict[str, float] = OrderedDict()
        self.auth_throttle = AuthThrottle(settings.auth_failure_burst, settings.auth_failure_refill_seconds)
        self._metrics_lock = threading.Lock()
        self._event_log_scrape: tuple[float, str] | None = None
        self._lock = threading.Lock()
        self._snapshot_managers: dict[tuple[str, str], SnapshotManager] = {}
        self._schema_managers: dict[tuple[str, str], SchemaManager] = {}
        self._commit_tables: dict[tuple[str, str, int], FileStoreTable] = {}
        # Keyed by the catalog key first: the same names (and, for managers, tables) in two catalogs
        # never share an entry; a catalog dropped or altered has its entries forgotten.
        self._commit_rows: dict[tuple[str, str], TableRow] = {}
        self._in_flight = 0
        # The drain (server.DrainingServer): set at SIGTERM; the deadline future is resolved (on the event
        # loop) when ``drain_seconds`` passed with requests still in flight.
        self._draining = threading.Event()
        self._deadline_passed = False
        self._abandoned = 0  # requests answered 503 at the deadline and still running
        self._deadline: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self._stop_recovery = threading.Event()
        self._recovery: threading.Thread | None = None
        self.stream_slots = StreamSlots(settings.max_feed_streams, settings.feed_streams_per_principal)
        self.stream_rights = StreamRights(self.principals.standing, interval=settings.feed_recheck_seconds)
        self._feed_hub: FeedHub | None = None
        self._commits = 0
        self._table_commits: dict[tuple[str, str], int] = {}
        self.groups = GroupCommitter(
            catalog.lock,
            settings=GroupSettings(
                max_commits=settings.group_max_commits,
                max_hold_seconds=settings.group_max_hold_seconds,
                max_batch=settings.group_max_batch,
            ),
            lock_settings=catalog.lock_settings,
            observer=self._observe_group,
        )
        # Every catalog this replica serves: the default one (above) and the others of the metastore,
        # connected when a request first names them (service.tenancy.served).
        self.catalogs = ServedCatalogs(
            ServedCatalog(settings.catalog_name, catalog, default=True, vending=self.vending),
            server_options=settings.options,
            sts=settings.sts,
            metrics_registry=self.metrics.registry,
            record_vended=lambda event: append_vended(engine, event),
            refresh_seconds=settings.catalog_refresh_seconds,
            maintenance_workers=settings.maintenance_workers,
            maintenance_spark=settings.maintenance_spark,
            where=self.replica,
            start_outbox=self._start_outbox if settings.events_nats is not None else None,
        )
        self.catalogs.on_forget = self._forget_catalog
        # Started last: it reads the feed on its own thread and connections, and commits never wait for it.
        # The leases of every catalog's publisher are held on one connection of this replica.
        self._outbox_leases = (
            LeaseSession(libpq_conninfo(engine.url)) if settings.events_nats is not None else None
        )
        self.outbox = (
            NatsOutbox(
                engine,
                catalog_key=catalog.registry.catalog_key,
                default=True,
                catalog_name=settings.catalog_name,
                settings=settings.events_nats,
                metrics=self.metrics.outbox,
                holder=self.replica,
                session=self._outbox_leases,
            )
            if settings.events_nats is not None
            else None
        )
        if self.outbox is not None:
            self.outbox.start()
        # Maintenance runs on its own threads and connections; its commits take the table's lock like any
        # writer's, and it is maintenance that retries on a conflict.
        self.maintainer = Maintainer(
            catalog,
            MaintainerSettings(workers=settings.maintenance_workers, spark=settings.maintenance_spark),
            where=self.replica,
        )
        self.maintainer.start()
        if settings.recovery_interval_seconds > 0:
            self._recovery = threading.Thread(target=self._recover_loop, name="recovery", daemon=True)
            self._recovery.start()
        self.archiver: BackgroundArchiver | None = None
        if settings.archive_interval_seconds > 0:
            self.archiver = BackgroundArchiver(
                engine,
                holder=self.replica,
                interval_seconds=settings.archive_interval_seconds,
                store=lambda: partitioned_log(engine),
                open_catalog=self._archive_catalog,
                metrics=ArchiveMetrics(self.metrics.registry),
            )
            self.archiver.start()
        self._partitioner: threading.Thread | None = None
        if settings.event_partition_days > 0:
            self._partitioner = threading.Thread(
                target=self._partitions_loop, name="event-partitions", daemon=True
            )
            self._partitioner.start()
        self._folder: threading.Thread | None = None
        if settings.event_log_metrics and settings.metrics_fold_seconds > 0:
            self._folder = threading.Thread(target=self._fold_loop, name="metrics-fold", daemon=True)
            self._folder.start()
        self._sweeper: threading.Thread | None = None
        if settings.catalog_sweep_seconds > 0:
            self._sweeper = threading.Thread(target=self._sweep_loop, name="catalog-sweep", daemon=True)
            self._sweeper.start()

    def _archive_catalog(self, info: CatalogInfo) -> MetastoreCatalog:
        """The served catalog an archive of ``info`` is written through (the server's lock settings)."""
        if info.catalog_key == self.catalogs.default.key:
            return self.catalogs.default.catalog
        return self.catalogs.get(info.name).catalog

    def _start_outbox(self, info: CatalogInfo) -> NatsOutbox | None:
        """The publisher of the change feed of ``info``, another catalog than the default, started (None:
        its subject would be the default catalog's: logged)."""
        assert self.settings.events_nats is not None
        try:
            settings = self.settings.events_nats.for_catalog(info.name)
        except ValidationError as e:
            log.error("catalog %r is not published to NATS: %s", info.name, e.message)
            return None
        outbox = NatsOutbox(
            self.catalog.engine,
            catalog_key=info.catalog_key,
            catalog_name=info.name,
            settings=settings,
            metrics=self.metrics.outbox,
            holder=self.replica,
            session=self._outbox_leases,
        )
        outbox.start()
        return outbox

    def _fold_loop(self) -> None:
        """Fold the event log's new events into the metrics rollup (``telemetry.rollup``) until the drain:
        batch after batch while a backlog remains (after the upgrade to 0027: the whole log), then every
        ``metrics_fold_seconds``. One replica folds at a time (the rollup's advisory lock); a scrape then
        folds only what came since."""
        interval = self.settings.metrics_fold_seconds
        while True:
            wait = interval
            try:
                report = rollup.fold(
                    self.catalog.engine,
                    max_events=FOLD_BATCH_EVENTS,
                    table_series=self.settings.metrics_table_series,
                )
                if report.events and not report.caught_up:
                    wait = 0.0
            except Exception:
                wait = max(interval, FOLD_RETRY_SECONDS)
                log.warning("folding the event log's metrics failed; next try in %gs", wait, exc_info=True)
            if self._stop_recovery.wait(wait):
                return

    def _sweep_loop(self) -> None:
        """Serve every catalog of the metastore (``ServedCatalogs.sweep``) now and every
        ``catalog_sweep_seconds``, until the drain."""
        interval = self.settings.catalog_sweep_seconds
        while not self._stop_recovery.is_set():
            try:
                self.catalogs.sweep()
            except Exception:
                log.warning("the sweep of the catalogs failed; next try in %gs", interval, exc_info=True)
            if self._stop_recovery.wait(interval):
                return

    # -- the drain --------------------------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        """SIGTERM arrived: /readyz answers 503, new requests 503 + Retry-After, streams end."""
        return self._draining.is_set()

    def begin_drain(self) -> None:
        """Stop admitting (any thread): readiness flips, live streams are woken to end with a retry hint."""
        if self._draining.is_set():
            return
        self._draining.set()
        log.info("draining: not ready, new requests refused (503), in-flight ones may finish")
        with self._lock:
            hub = self._feed_hub
        if hub is not None:
            hub.wake_all()
        for served in self.catalogs.every():
            other = served.hub()
            if other is not None:
                other.wake_all()
        self._stop_recovery.set()
        if self.archiver is not None:
            self.archiver.stop(timeout=0)  # no pass starts; one under way may be cut off anywhere (safe)

    def busy(self) -> int:
        """Requests (streams aside) being handled now."""
        with self._lock:
            return self._in_flight

    def deadline(self) -> asyncio.Future[None]:
        """A future (of the running loop) resolved when the drain's deadline passed."""
        with self._lock:
            if self._deadline is None:
                loop = asyncio.get_running_loop()
                future: asyncio.Future[None] = loop.create_future()
                if self._deadline_passed:
                    future.set_result(None)
                self._deadline = (loop, future)
            return self._deadline[1]

    def deadline_reached(self) -> int:
        """The drain's time is up (any thread): commits still queued here behind a table's lock are
        withdrawn (their callers get a retryable 503: nothing of theirs was published), and requests still
        running are answered 503 by the middleware. Returns how many commits were withdrawn."""
        with self._lock:
            self._deadline_passed = True
            deadline = self._deadline
        if deadline is not None:
            loop, future = deadline
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits any more
                loop.call_soon_threadsafe(_resolve, future)
        withdrawn = self.groups.cancel_waiting()
        if withdrawn:
            log.warning("drain deadline: %d queued commit(s) withdrawn (answered 503, retryable)", withdrawn)
        return withdrawn

    def abandon(self) -> None:
        """A request was answered 503 at the drain's deadline while it still runs (on a worker thread)."""
        with self._lock:
            self._abandoned += 1

    def abandoned_done(self) -> None:
        with self._lock:
            self._abandoned -= 1

    @property
    def abandoned(self) -> int:
        """Requests answered at the deadline whose work still runs (the process need not wait for them)."""
        with self._lock:
            return self._abandoned

    def _partitions_loop(self) -> None:
        """Make the commit log's partitions ahead (``EventPartitions.ensure_ahead``) now and every
        ``EVENT_PARTITIONS_CHECK_SECONDS``, until the drain. A failure (the metastore down, a lock not
        had in time) is logged and tried again sooner; it never stops the service: the partitions made
        cover ``EVENT_PARTITIONS_AHEAD`` periods, so commits keep landing meanwhile."""
        from datetime import timedelta

        from paimon_meta.metastore.event_partitions import EventPartitions

        parts = EventPartitions(
            self.catalog.engine, period=timedelta(days=self.settings.event_partition_days), actor=self.replica
        )
        while True:
            wait = EVENT_PARTITIONS_CHECK_SECONDS
            try:
                made = parts.ensure_ahead(periods=EVENT_PARTITIONS_AHEAD)
                if made:
                    log.info("commit log partitions made ahead: %s", ", ".join(made))
            except Exception:
                wait = EVENT_PARTITIONS_RETRY_SECONDS
                log.warning(
                    "making the commit log's partitions ahead failed; next try in %gs", wait, exc_info=True
                )
            if self._stop_recovery.wait(wait):
                return

    def _recover_loop(self) -> None:
        """Recovery in the background, one replica at a time per catalog: whoever holds a catalog's lease
        runs it for that catalog. Every catalog this replica serves (the default one, and the others it
        connected for a request) is recovered, each under its own lease."""
        interval = self.settings.recovery_interval_seconds
        while not self._stop_recovery.wait(interval):
            for served in self.catalogs.every():
                if self._stop_recovery.is_set():
                    return
                self._recover_catalog(served.catalog, interval)

    def _recover_catalog(self, catalog: MetastoreCatalog, interval: float) -> None:
        from paimon_meta.ops.recovery import recover_all

        lock_id = f"{RECOVERY_LOCK}:{catalog.registry.catalog_key}"
        try:
            lease = catalog.lock.try_acquire(
                lock_id, owner=self.replica, lease_seconds=max(30, int(interval))
            )
            if lease is None:
                return  # another replica's turn
            try:
                reports = recover_all(catalog)
            finally:
                lease.release()
            settled = sum(len(r.commits) for r in reports)
            if settled:
                log.info(
                    "recovery: %d pending commit(s) of catalog %s settled",
                    settled,
                    catalog.registry.catalog_key,
                )
        except Exception:
            log.warning(
                "recovery in the background of catalog %s failed; next try in %gs",
                catalog.registry.catalog_key,
                interval,
                exc_info=True,
            )

    def observe_failure(self, answer: Answer) -> None:
        """Count a request answered for a dependency's failure (called by the exception handler)."""
        if answer.dependency is not None:
            self.metrics.dependency_errors.labels(kind=answer.dependency).inc()

    def observe_retry(self, fault: Fault) -> None:
        self.metrics.retries.labels(kind=str(fault.kind)).inc()

    def admit_request(self) -> bool:
        """Take a slot for a request about to be handled; False (shed) when ``max_in_flight`` are."""
        with self._lock:
            if self._in_flight >= self.settings.max_in_flight:
                full = True
            else:
                self._in_flight += 1
                full = False
        if full:
            self.metrics.shed.labels(bound="in_flight").inc()
            return False
        self.metrics.in_flight.inc()
        return True

    def request_done(self) -> None:
        with self._lock:
            self._in_flight -= 1
        self.metrics.in_flight.dec()

    def open_feed_stream(self, principal: str, catalog: str) -> None:
        """Take a slot for a live change-feed stream of ``principal``; give it back with
        :meth:`close_feed_stream`. ``catalog``: the name of the stream's catalog (its metrics' label).

        Raises:
            TooManyStreamsError: the principal holds ``feed_streams_per_principal`` streams here (429).
            OverloadedError: ``max_feed_streams`` are open here (503).
        """
        full = self.stream_slots.take(principal)
        if full is None:
            self.metrics.feed_streams.labels(catalog=catalog).inc()
            return
        self.metrics.shed.labels(bound=full.value).inc()
        if full is Full.PRINCIPAL:
            cap = self.settings.feed_streams_per_principal
            raise TooManyStreamsError(
                f"principal {principal!r} has {cap} change-feed streams open on this replica, its cap "
                f"(--max-feed-streams-per-principal {cap}): end one, or page the feed",
                retry_after=STREAM_RETRY_AFTER_SECONDS,
            )
        raise OverloadedError(
            f"this replica has {self.settings.max_feed_streams} change-feed streams open; retry shortly"
            " or page the feed"
        )

    def close_feed_stream(self, principal: str, catalog: str) -> None:
        self.stream_slots.give_back(principal)
        self.metrics.feed_streams.labels(catalog=catalog).dec()

    def close_feed_hub(self) -> None:
        """Stop the change feed's reader and the re-check of the streams' rights (the app's shutdown;
        a new stream would start another reader)."""
        with self._lock:
            hub, self._feed_hub = self._feed_hub, None
        if hub is not None:
            hub.close()
        for served in self.catalogs.every():
            if not served.default:
                served.close_hub()
        self.stream_rights.close()

    def feed_hub(self, served: ServedCatalog | None = None) -> FeedHub:
        """This replica's shared reader of the change feed of ``served`` (default: the default
        catalog's; service.feed_hub), started on first use. Each catalog has its own: a reader delivers
        only its catalog's events."""
        if served is not None and not served.default:
            return served.feed_hub(self.settings.feed_ring_events)[0]
        with self._lock:
            if self._feed_hub is None:
                self._feed_hub = FeedHub(
                    self.catalog.engine,
                    self.catalog.registry.catalog_key,
                    capacity=self.settings.feed_ring_events,
                    default=True,
                )
                self._feed_hub.start()
                hub = self._feed_hub
                self.metrics.feed_oldest_transaction.set_function(
                    lambda: hub.stats().oldest_transaction_seconds
                )
            return self._feed_hub

    @contextmanager
    def counted_commit(self, route: str, catalog: str) -> Iterator[CommitCount]:
        """Count the commit the body makes in ``paimon_meta_service_commits_total{catalog, route,
        outcome}`` and time it (``catalog``: the name of the request's catalog); the body sets ``outcome``
        for an answer that is not an exception (a refused base)."""
        count = CommitCount()
        started = time.monotonic()
        try:
            yield count
        except CommitConflictError:
            count.outcome = "conflict"
            raise
        except (ValidationError, NotFoundError):  # the caller's fault: nothing was attempted
            count.outcome = "rejected"
            raise
        except OverloadedError:
            count.outcome = "overloaded"
            raise
        except BaseException:
            count.outcome = "failed"
            raise
        finally:
            self.metrics.commits.labels(catalog=catalog, route=route, outcome=count.outcome).inc()
            self.metrics.commit_latency.labels(catalog=catalog).observe(time.monotonic() - started)

    @contextmanager
    def admit_commit(self, identifier: str, catalog: MetastoreCatalog | None = None) -> Iterator[None]:
        """Hold a place for one commit of ``identifier`` while it is queued or running on this replica.

        Raises:
            OverloadedError: the table already has ``max_table_commits`` commits here, or the replica
                ``max_commits`` in all (503 + Retry-After: nothing was done; re-send as it is).
        """
        # per catalog: the same db.t of two catalogs are two tables, with their own bound
        key = ((catalog or self.catalog).registry.catalog_key, identifier)
        with self._lock:
            table = self._table_commits.get(key, 0)
            bound = (
                "table_commits"
                if table >= self.settings.max_table_commits
                else "commits"
                if self._commits >= self.settings.max_commits
                else None
            )
            if bound is None:
                self._table_commits[key] = table + 1
                self._commits += 1
        if bound is not None:
            self.metrics.shed.labels(bound=bound).inc()
            what = f"table {identifier}" if bound == "table_commits" else "this replica"
            raise OverloadedError(f"too many commits queued for {what}; retry shortly")
        self.metrics.commits_admitted.inc()
        try:
            yield
        finally:
            with self._lock:
                self._commits -= 1
                left = self._table_commits[key] - 1
                if left:
                    self._table_commits[key] = left
                else:
                    del self._table_commits[key]
            self.metrics.commits_admitted.dec()

    def _observe_group(self, report: GroupReport) -> None:
        self.metrics.group_commits.observe(report.commits)
        self.metrics.group_hold.observe(report.held_seconds)

    def cached_access(self, token: str) -> tuple[bool, Access | None]:
        """``(True, access)`` when the token's answer is cached and fresh (no I/O: callable on the
        event loop), else ``(False, None)``."""
        if self.settings.auth_cache_seconds <= 0:
            return False, None
        with self._lock:
            hit = self._auth_cache.get(hash_token(token))
        if hit is not None and hit[0] > time.monotonic():
            return True, hit[1]
        return False, None

    def record_refused_commit(
        self,
        principal: str,
        database: str,
        table: str,
        message: str,
        route: str,
        *,
        catalog: MetastoreCatalog | None = None,
    ) -> None:
        """Record a commit refused for want of a write grant in the data-access log (``commit_refused``),
        so an audit of each principal's commits counts it; a table that does not exist has nothing to
        record. Never raises: the refusal's answer does not depend on its record (a failure is logged)."""
        catalog = catalog or self.catalog
        try:
            row = catalog.registry.get_table_row(database, table)
            append_commit_refused(
                catalog.engine,
                principal=principal,
                table_id=row.table_id,
                table_identifier=row.identifier,
                payload={"route": route, "message": message},
            )
        except TableNotFoundError:
            return
        except Exception:
            log.warning(
                "could not record the refused commit of %s to %s.%s",
                principal,
                database,
                table,
                exc_info=True,
            )

    def authenticate(self, token: str) -> Access | None:
        """The token's principal and grants, cached for ``auth_cache_seconds`` (a revoked token or
        grant takes effect within that time; 0 = every request asks the metastore), and never past the
        token's own expiry (a JWT's ``exp``, a static token's ``expires_at``).

        A static token (``pmt_...``) is looked up in the metastore; any other token is verified as a
        JWT of the configured OIDC issuer (``service.oidc``), or refused when there is none.

        Raises:
            IdentityProviderUnavailableError: the issuer's keys could not be fetched (503).
        """
        ttl = self.settings.auth_cache_seconds
        if ttl <= 0:
            return self._remember(token, self._lookup(token))
        known, cached = self.cached_access(token)
        if known:
            return cached
        key = hash_token(token)
        now = time.monotonic()
        access = self._remember(token, self._lookup(token))
        with self._lock:
            if len(self._auth_cache) > 10_000:
                self._auth_cache.clear()
            self._auth_cache[key] = (_until(now + ttl, access), access)
        return access

    def _lookup(self, token: str) -> Access | None:
        # The two paths never meet: a JWT is never looked up as a static token, nor the reverse.
        if is_static_token(token):
            return self.principals.authenticate(token)
        if self.oidc is None:
            return None
        return self.oidc.sign_in(token, self.principals)

    KNOWN_GOOD_SECONDS = 600.0

    def _remember(self, token: str, access: Access | None) -> Access | None:
        if access is not None:
            key = hash_token(token)
            with self._lock:
                self._known_good[key] = _until(time.monotonic() + self.KNOWN_GOOD_SECONDS, access)
                self._known_good.move_to_end(key)
                while len(self._known_good) > 10_000:
                    self._known_good.popitem(last=False)
        return access

    def known_good(self, token: str) -> bool:
        """The token authenticated recently (it is still checked: it may have been revoked since)."""
        with self._lock:
            until = self._known_good.get(hash_token(token))
        return until is not None and until > time.monotonic()

    def event_log_scrape(self, scrape: Callable[[], str]) -> str:
        """The event log's metrics, ``scrape()`` at most once per ``metrics_cache_seconds`` (concurrent
        scrapes wait for the one in progress instead of each querying the log)."""
        ttl = self.settings.metrics_cache_seconds
        with self._metrics_lock:
            cached = self._event_log_scrape
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]
            text = scrape()
            if ttl > 0:
                self._event_log_scrape = (time.monotonic() + ttl, text)
            return text

    def _forget_catalog(self, catalog_key: str) -> None:
        """Forget every cached row, table and manager of a catalog that was dropped or altered."""
        with self._lock:
            for cache in (self._commit_rows, self._snapshot_managers, self._schema_managers):
                for k in [k for k in cache if k[0] == catalog_key]:
                    del cache[k]
            for key in [k for k in self._commit_tables if k[0] == catalog_key]:
                del self._commit_tables[key]

    def commit_row(self, identifier: str, catalog: MetastoreCatalog | None = None) -> tuple[TableRow, bool]:
        """``(row, cached)``: the registry row commits of ``identifier`` start from, kept per replica.
        Only for commits: each one compares the row with the registry under the table's lock (the lock
        of the row's name, which a rename holds) and fails with ``TableRowChangedError``, or
        ``TableNotFoundError`` if it was dropped, before publishing anything; the caller then calls
        :meth:`forget_row` and retries once with a row read now (``cached`` False)."""
        catalog = catalog or self.catalog
        key = (catalog.registry.catalog_key, identifier)
        with self._lock:
            row = self._commit_rows.get(key)
        if row is not None:
            return row, True
        row = catalog.table_row(identifier)
        with self._lock:
            if len(self._commit_rows) > 10_000:
                self._commit_rows.clear()
            self._commit_rows[key] = row
        return row, False

    def forget_row(self, identifier: str, catalog: MetastoreCatalog | None = None) -> None:
        key = ((catalog or self.catalog).registry.catalog_key, identifier)
        with self._lock:
            self._commit_rows.pop(key, None)

    def commit_table(
        self, row: TableRow, catalog: MetastoreCatalog | None = None, *, newer_than: int | None = None
    ) -> FileStoreTable:
        """The table object commits of ``row`` use, shared by requests (its manifest caches stay warm
        across commits: manifests are immutable and never renamed). One per location and schema; its
        snapshot cache follows the table's timeline (see ``SnapshotManager.observe_timeline``).

        The schema is the one the registry row records, without a LIST of ``schema/`` when this replica
        already holds that schema's table object (issue 39: the LIST was one S3 round trip per commit).
        Invariant: the table object of ``(catalog, location, S)`` is built from ``schema-S`` (schema
        files are immutable), and it is used for a row recording S only. Every schema change through
        the metastore (alter, replace, schema rollback; on any replica) writes the file and moves the
        row's ``schema_id`` under the table's lock, so a commit from a row read now sees the schema as of
        that read (before, as of the LIST: the same window up to the lock). A row this replica cached
        (``commit_row``) may be behind another replica's ALTER: its commits pass ``schema_id`` to the
        guard, which checks under the lock that the registry still records it (else
        ``TableRowChangedError``, the row is read again: see ``routes_commits._commit``), so no commit
        publishes on a schema another replica replaced. Listed as before when the row records no schema
        id (rows Java inserted) or when nothing is cached for it; a schema written straight to storage by
        an engine outside the metastore (the registry not told) is seen once the registry records it or
        the cache is dropped, or at once by a commit whose files name a schema newer than the cached one
        (``newer_than``: the table object's schema id; the directory is listed again). Known gap (as
        before this cache): a schema rolled back and written again under the same id
        (``rollback-schema`` then ``ALTER``) is not told apart from the first."""
        catalog = catalog or self.catalog
        location = catalog.paimon_location(row)
        ckey = catalog.registry.catalog_key
        if row.schema_id is not None and newer_than is None:
            with self._lock:
                known = self._commit_tables.get((ckey, location, row.schema_id))
            if known is not None:
                return known
        with self._lock:
            schemas = self._schema_managers.get((ckey, location))
            if schemas is None:
                if len(self._schema_managers) > 1000:
                    self._schema_managers.clear()
                schemas = SchemaManager(catalog.table_file_io(location), location)
                self._schema_managers[(ckey, location)] = schemas
        ids = schemas.list_ids()
        if not ids:
            raise TableNotFoundError(f"no Paimon table at {location} (no schema file)", path=location)
        key = (ckey, location, ids[-1])
        with self._lock:
            table = self._commit_tables.get(key)
        if table is None:
            schema, manager = schemas.schema(ids[-1]), self._manager_at(catalog, location)
            table = FileStoreTable(schemas.file_io, location, schema, snapshot_manager=manager)
            with self._lock:
                if len(self._commit_tables) > 1000:
                    self._commit_tables.clear()
                table = self._commit_tables.setdefault(key, table)
        return table

    def snapshot_manager(self, row: TableRow, catalog: MetastoreCatalog | None = None) -> SnapshotManager:
        """One manager per table location (its cache of immutable snapshot files is shared by
        requests, and by the table objects commits use: what a commit-messages request published is
        in it). A table kept as metadata only has none: refused naming its type."""
        catalog = catalog or self.catalog
        manager = self._manager_at(catalog, catalog.paimon_location(row))
        # The row's timeline (read for this request): its cached snapshots are of the table as it is now
        # (a rollback, through any replica, reuses the ids above its target). Commits check again under
        # the lock.
        manager.observe_timeline(row.timeline)
        return manager

    def _manager_at(self, catalog: MetastoreCatalog, location: str) -> SnapshotManager:
        key = (catalog.registry.catalog_key, location)
        with self._lock:
            manager = self._snapshot_managers.get(key)
            if manager is None:
                if len(self._snapshot_managers) > 1000:
                    self._snapshot_managers.clear()
                manager = SnapshotManager(catalog.table_file_io(location), location)
                self._snapshot_managers[key] = manager
        return manager

    def close(self) -> None:
        # In-flight requests had their drain time (server.DrainingServer): what is still running gets a
        # moment to release its lock; a commit cut off after that is settled by recovery, like any commit
        # of a stopped process. Maintenance stops taking jobs (a job cut off is taken over after its lease).
        self._stop_recovery.set()
        if self.archiver is not None:
            self.archiver.stop(timeout=min(30.0, max(1.0, self.settings.drain_seconds)))
        if self._partitioner is not None:
            self._partitioner.join(timeout=30.0)  # a partition being made commits or rolls back first
        if self._folder is not None:
            self._folder.join(timeout=30.0)  # a fold's chunk commits or rolls back (either is safe)
        if self._sweeper is not None:
            self._sweeper.join(timeout=30.0)  # a sweep connecting a catalog finishes before they close
        self.maintainer.stop(timeout=min(30.0, max(1.0, self.settings.drain_seconds)))
        self.groups.join(timeout=min(self.settings.drain_seconds, CLOSE_GRACE_SECONDS))
        if self.outbox is not None:
            # After the last commits of this replica: the batch in flight is acked and its position saved.
            self.outbox.stop(timeout=min(10.0, max(1.0, self.settings.drain_seconds)))
        if self.vending is not None:
            self.vending.close()
        self.close_feed_hub()
        self.catalogs.close()
        if self._outbox_leases is not None:
            self._outbox_leases.close()  # after every publisher stopped
        self.catalog.close()
