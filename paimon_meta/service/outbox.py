"""The change feed published to NATS JetStream from an outbox (``serve --events-nats URL``).

What is sent: every event of each catalog's feed (``metastore/feed.py``; all tables and the catalog's
governance events, no grant filter: the subject's readers are the operator's to choose), in
feed order, as the same CloudEvents 1.0 JSON the SSE stream serves, one message per event on the catalog's
subject, with headers ``Nats-Msg-Id`` = the event's id (its feed position), ``Content-Type:
application/cloudevents+json`` and ``Paimon-Meta-Catalog`` = the catalog key. The JetStream stream is
created if missing, with a duplicate window of ``duplicate_window_seconds``, or extended to the subject if
it does not cover it.

Subjects and streams (:meth:`NatsOutboxSettings.for_catalog`): every catalog of the metastore is published
on a subject of its own, by one publisher per catalog (each replica runs one for every catalog it serves,
and serves every catalog: ``service.tenancy.served``, the sweep).

* The default catalog (``serve --catalog-name``): ``--events-nats-subject``, else
  ``paimon.<catalog name>.events``, as before catalogs existed (its consumers see no change).
* Every other catalog: ``paimon.<catalog name>.events``; with an ``--events-nats-subject`` holding
  ``{catalog}`` (e.g. ``acme.lake.{catalog}.events``) that pattern, for every catalog the default one
  included. A catalog whose subject would be the default catalog's is not published (logged).
* The stream: ``--events-nats-stream`` holds every catalog's subject; without it each catalog has its own,
  ``PAIMON_<CATALOG NAME>_EVENTS``. One stream for several catalogs of one metastore is safe for the
  de-duplication: their events' ids (feed positions of the same logs) never coincide.

How (the outbox): the event log is the outbox. One publisher per catalog and subject across replicas
(and across releases: the default catalog's lease is the one previous releases took) holds the lease
(``metastore/outbox.py``: an advisory lock on a dedicated connection, which ``serve`` shares between
the publishers of its catalogs, ``LeaseSession``; the others try
again every ``lease_retry_seconds`` and take over when the holder's session ends). It reads the feed
after its saved position, publishes each event and waits for JetStream's ack, in order, and after each
batch saves the position of the last acked event (invariant: the saved position never passes an event
the broker has not acked). It wakes on the feed's NOTIFY and also looks every ``poll_seconds``.

Duplicates: a publisher killed between an ack and the save makes its successor publish those events
again; JetStream drops a message whose ``Nats-Msg-Id`` it stored within the stream's duplicate window.
Beyond that, a publisher that takes over (or reconnects) first reads the last message of its subject and
resumes after it when it is ahead of the saved position, so a replay needs neither the window nor luck.

A broker that is down or refuses: the publisher retries with capped exponential backoff and jitter,
logs, and counts the failures; it runs in its own thread with its own connections, so commits and
requests never wait for it. The events stay in the log and are published when the broker is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import nats
import nats.errors
import nats.js.errors
import psycopg
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import StorageType
from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.notify import Listener, ListenerPool
from paimon_meta.errors import LockLostError, ValidationError
from paimon_meta.metastore.feed import FEED_CHANNEL, FeedEvent, Position, cloud_event, read_feed
from paimon_meta.metastore.outbox import LeaseSession, OutboxLease
from paimon_meta.rest import models

_log = logging.getLogger(__name__)

#: Headers of every message: JetStream's de-duplication id, the payload's type, the catalog key.
MSG_ID = "Nats-Msg-Id"
CATALOG_HEADER = "Paimon-Meta-Catalog"
CONTENT_TYPE = "application/cloudevents+json"

# A subject is dot-separated tokens of visible characters (no wildcards: we publish to it).
_SUBJECT = re.compile(r"[^\s.*>]+(\.[^\s.*>]+)*")
_STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")


#: The subject of a catalog's events (``{catalog}``: its name) unless ``--events-nats-subject`` says.
SUBJECT_PATTERN = "paimon.{catalog}.events"
#: What ``--events-nats-subject`` writes for the catalog's name in a pattern of every catalog's subjects.
CATALOG_PLACEHOLDER = "{catalog}"


def default_subject(catalog_name: str) -> str:
    """``paimon.<catalog name>.events``."""
    return SUBJECT_PATTERN.replace(CATALOG_PLACEHOLDER, catalog_name)


def default_stream(catalog_name: str) -> str:
    """``PAIMON_<CATALOG NAME>_EVENTS`` (other characters than letters, digits, ``-`` and ``_`` as ``_``):
    one stream per catalog by default, because JetStream de-duplicates ``Nats-Msg-Id`` per stream and
    two metastores' event ids may coincide."""
    return "PAIMON_" + re.sub(r"[^A-Za-z0-9_-]", "_", catalog_name).upper() + "_EVENTS"


@dataclass(frozen=True, slots=True)
class NatsOutboxSettings:
    """Where and how the feed is published (README, "The change feed")."""

    url: str
    #: The default catalog's subject and stream (those of the catalog a ``for_catalog`` made it for).
    subject: str
    stream: str
    #: The other catalogs' subjects: ``{catalog}`` is the catalog's name.
    catalog_subject: str = SUBJECT_PATTERN
    #: The other catalogs' stream (None: one of their own each, :func:`default_stream`).
    catalog_stream: str | None = None
    #: JetStream drops a repeated ``Nats-Msg-Id`` within this window of the stream the publisher creates.
    duplicate_window_seconds: float = 600.0
    #: Events read, published and then saved as one step.
    batch: int = 100
    poll_seconds: float = 1.0
    #: After a batch that was not full, wait this long before reading again (events gather meanwhile).
    gather_seconds: float = 0.05
    lease_retry_seconds: float = 3.0
    publish_timeout_seconds: float = 2.0
    backoff_start_seconds: float = 0.1
    backoff_cap_seconds: float = 5.0

    def __post_init__(self) -> None:
        if not _SUBJECT.fullmatch(self.subject):
            raise ValidationError(
                f"--events-nats-subject {self.subject!r} is not a NATS subject (dot-separated tokens, no "
                "spaces or wildcards)",
                option="--events-nats-subject",
            )
        if CATALOG_PLACEHOLDER not in self.catalog_subject or not _SUBJECT.fullmatch(
            self.catalog_subject.replace(CATALOG_PLACEHOLDER, "c")
        ):
            raise ValidationError(
                f"--events-nats-subject {self.catalog_subject!r} is not a pattern of NATS subjects "
                "(dot-separated tokens, no spaces or wildcards, {catalog} for the catalog's name)",
                option="--events-nats-subject",
            )
        if not _STREAM_NAME.fullmatch(self.stream) or not (
            self.catalog_stream is None or _STREAM_NAME.fullmatch(self.catalog_stream)
        ):
            raise ValidationError(
                f"--events-nats-stream {self.stream!r} is not a JetStream stream name (letters, digits, "
                "'-' and '_')",
                option="--events-nats-stream",
            )

    @classmethod
    def of_flags(
        cls, url: str, default_catalog: str, subject: str | None, stream: str | None
    ) -> NatsOutboxSettings:
        """The settings ``serve --events-nats URL [--events-nats-subject S] [--events-nats-stream N]``
        ask for (the module docstring's scheme).

        Raises:
            ValidationError: a subject, pattern or stream NATS would refuse (names the flag).
        """
        pattern = SUBJECT_PATTERN
        if subject is not None and CATALOG_PLACEHOLDER in subject:
            pattern, subject = subject, subject.replace(CATALOG_PLACEHOLDER, default_catalog)
        return cls(
            url=url,
            subject=subject or default_subject(default_catalog),
            stream=stream or default_stream(default_catalog),
            catalog_subject=pattern,
            catalog_stream=stream,
        )

    def for_catalog(self, catalog_name: str) -> NatsOutboxSettings:
        """The settings of the publisher of another catalog than the default one.

        Raises:
            ValidationError: its subject would be the default catalog's.
        """
        subject = self.catalog_subject.replace(CATALOG_PLACEHOLDER, catalog_name)
        if subject == self.subject:
            raise ValidationError(
                f"catalog {catalog_name!r} would be published on {subject!r}, the default catalog's "
                "subject: give --events-nats-subject a {catalog} pattern",
                option="--events-nats-subject",
                catalog=catalog_name,
            )
        return replace(self, subject=subject, stream=self.catalog_stream or default_stream(catalog_name))

    @property
    def sink(self) -> str:
        """The outbox's key beside the catalog key: its lease and position are per subject."""
        return f"nats:{self.subject}"


def subject_covers(pattern: str, subject: str) -> bool:
    """Whether the NATS subject filter ``pattern`` (``*`` one token, ``>`` the rest) matches ``subject``."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token not in ("*", have[i])):
            return False
    return len(want) == len(have)


class OutboxMetrics:
    """The publisher's metrics, in the service's registry (``/metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.published = Counter(
            "paimon_meta_outbox_published_total",
            "Events of the change feed JetStream acknowledged, by result: stored, or duplicate (a "
            "replay it dropped by Nats-Msg-Id), by catalog.",
            ("catalog", "result"),
            registry=registry,
        )
        self.failures = Counter(
            "paimon_meta_outbox_publish_failures_total",
            "Failed attempts of the outbox publisher, by step: connect (or set up the stream), publish, "
            "metastore, unexpected (a bug: logged with its traceback); by catalog.",
            ("catalog", "step"),
            registry=registry,
        )
        self.lag = Gauge(
            "paimon_meta_outbox_lag_seconds",
            "Age of the oldest event of the change feed read but not yet acknowledged by the broker (0: "
            "caught up, or not the publisher), by catalog.",
            ("catalog",),
            registry=registry,
        )
        self.leader = Gauge(
            "paimon_meta_outbox_leader",
            "1 while this replica holds the catalog's outbox lease (it is the one that publishes), by "
            "catalog.",
            ("catalog",),
            registry=registry,
        )


class Backoff:
    """Capped exponential backoff with jitter (each delay drawn in [half, whole] of the current step)."""

    def __init__(self, start: float, cap: float) -> None:
        self.start, self.cap = start, cap
        self._step = start
        self._random = random.Random()
        self.failures = 0

    def next(self) -> float:
        delay = self._step * (0.5 + 0.5 * self._random.random())
        self._step = min(self.cap, self._step * 2)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self._step = self.start
        self.failures = 0


class _BrokerError(Exception):
    """The broker could not be reached or refused (wraps the client's error)."""

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"{step}: {type(cause).__name__}: {cause}")
        self.step = step


#: What nats-py raises when the broker is unreachable, gone, slow or refusing.
_NATS_ERRORS = (nats.errors.Error, OSError, asyncio.TimeoutError)


class NatsOutbox:
    """The publisher (module docstring). ``start()`` runs it in its own thread; ``stop()`` lets it finish
    the batch in flight and closes its connections."""

    def __init__(
        self,
        engine: Engine,
        *,
        catalog_key: str,
        catalog_name: str,
        settings: NatsOutboxSettings,
        metrics: OutboxMetrics,
        holder: str,
        session: LeaseSession | None = None,
        default: bool = False,
    ) -> None:
        """``session``: the connection holding the leases of this process's publishers (one per catalog);
        None: a connection of its own. ``default``: ``catalog_key`` is the service's default catalog (its
        feed also has the governance events naming no catalog)."""
        self.engine = engine
        self._session = session
        self.catalog_key = catalog_key
        self.default = default
        self.catalog_name = catalog_name
        self.settings = settings
        self.metrics = metrics
        self.holder = holder
        self._conninfo = libpq_conninfo(engine.url)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._leader = metrics.leader.labels(catalog=catalog_name)
        self._lag = metrics.lag.labels(catalog=catalog_name)

    # ---- the thread -----------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"outbox-nats-{self.catalog_name}", daemon=True
        )
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the publisher to stop after the batch in flight (its lease is then released); returns at
        once (:meth:`stop` waits)."""
        self._stopping.set()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the batch in flight (its position saved); True if the thread ended in ``timeout``."""
        self._stopping.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        if self._thread.is_alive():
            _log.warning("outbox: the publisher did not stop within %gs", timeout)
            return False
        return True

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                asyncio.run(self._main())
                return
            except Exception:
                # A bug (or an event the body cannot be made of): say so loudly, count it and start over
                # from the saved position after a pause; the service goes on meanwhile.
                _log.exception("outbox: the publisher failed on an unexpected error; restarting it")
                self.metrics.failures.labels(catalog=self.catalog_name, step="unexpected").inc()
                self._stopping.wait(self.settings.lease_retry_seconds)

    async def _main(self) -> None:
        s = self.settings
        lease = OutboxLease(
            self._conninfo, self.catalog_key, s.sink, holder=self.holder, session=self._session
        )
        listeners = ListenerPool(self._conninfo, max_idle=1)
        backoff = Backoff(s.backoff_start_seconds, s.backoff_cap_seconds)
        try:
            with listeners.listening(FEED_CHANNEL, lazy=True) as listener:
                while not self._stopping.is_set():
                    try:
                        if not await asyncio.to_thread(lease.try_acquire):
                            await self._sleep(s.lease_retry_seconds)
                            continue
                    except psycopg.Error as exc:
                        _log.debug("outbox: the lease could not be tried: %s", exc)
                        await self._sleep(s.lease_retry_seconds)
                        continue
                    _log.info("outbox: publishing the feed to %s on %s", s.subject, s.url)
                    self._leader.set(1)
                    try:
                        await self._lead(lease, listener, backoff)
                    except (LockLostError, psycopg.Error, SQLAlchemyError) as exc:
                        # The lease's session or the metastore is gone: give the lease up (another
                        # replica may take it) and try again later.
                        self.metrics.failures.labels(catalog=self.catalog_name, step="metastore").inc()
                        _log.warning("outbox: metastore trouble, publishing paused: %s", exc)
                        await self._sleep(backoff.next())
                    finally:
                        self._leader.set(0)
                        self._lag.set(0)
                        await asyncio.to_thread(lease.release)
        finally:
            await self._disconnect()
            listeners.close()

    async def _sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``, less when asked to stop."""
        deadline = time.monotonic() + seconds
        while not self._stopping.is_set() and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(left, 0.2))

    # ---- leading: the publishing loop -----------------------------------------------------------------

    async def _lead(self, lease: OutboxLease, listener: Listener, backoff: Backoff) -> None:
        """Publish while holding the lease, until asked to stop.

        Raises:
            LockLostError: the lease's session is gone.
        """
        position = await asyncio.to_thread(lease.position)
        resumed = False
        while not self._stopping.is_set():
            try:
                js = await self._connect()
                if not resumed:
                    position = await self._resume(lease, js, position)
                    resumed = True
            except _BrokerError as exc:
                await self._broker_failed(exc, backoff, lease)
                # The lag grows while the broker is away: the age of the first event it has not got.
                waiting, _ = await asyncio.to_thread(
                    read_feed,
                    self.engine,
                    catalog_key=self.catalog_key,
                    default=self.default,
                    after=position,
                    limit=1,
                )
                self._lag.set(_age(waiting[0]) if waiting else 0.0)
                resumed = False
                continue
            events = await asyncio.to_thread(self._read, listener, position)
            if not events:
                self._lag.set(0)
                await asyncio.to_thread(listener.wait, self.settings.poll_seconds)
                await asyncio.to_thread(lease.check)
                continue
            done, failure = await self._publish(js, events)
            if done:
                position = events[done - 1].position
                await asyncio.to_thread(lease.advance, position, done)
            if failure is not None:
                self._lag.set(_age(events[done]))
                await self._broker_failed(failure, backoff, lease)
                resumed = False
            else:
                if backoff.failures:
                    _log.info("outbox: publishing again after %d failed attempts", backoff.failures)
                    backoff.reset()
                if len(events) < self.settings.batch:
                    # Commits are still coming (each of their transactions NOTIFYs): let a few gather
                    # instead of a feed read and a position write per handful of events.
                    await self._sleep(self.settings.gather_seconds)

    def _read(self, listener: Listener, after: Position) -> list[FeedEvent]:
        """The next batch after ``after``, once the notifications received so far are dropped (this read
        sees what they announced; one arriving after it wakes the next wait)."""
        for _ in range(10_000):
            if listener.connection is None or not listener.wait(0):
                break
        events, _ = read_feed(
            self.engine,
            catalog_key=self.catalog_key,
            default=self.default,
            after=after,
            limit=self.settings.batch,
        )
        return events

    async def _publish(
        self, js: JetStreamContext, events: Sequence[FeedEvent]
    ) -> tuple[int, _BrokerError | None]:
        """Publish ``events`` in order, each after the previous one's ack; how many were acked, and the
        failure that stopped it (None: all were)."""
        s = self.settings
        for done, event in enumerate(events):
            self._lag.set(_age(event))
            headers = {
                MSG_ID: event.position.token(),
                "Content-Type": CONTENT_TYPE,
                CATALOG_HEADER: self.catalog_key,
            }
            try:
                ack = await js.publish(
                    s.subject,
                    dumps_event(event, self.catalog_name),
                    timeout=s.publish_timeout_seconds,
                    stream=s.stream,
                    headers=headers,
                )
            except _NATS_ERRORS as exc:
                return done, _BrokerError("publish", exc)
            self.metrics.published.labels(
                catalog=self.catalog_name, result="duplicate" if ack.duplicate else "stored"
            ).inc()
        return len(events), None

    async def _broker_failed(self, exc: _BrokerError, backoff: Backoff, lease: OutboxLease) -> None:
        self.metrics.failures.labels(catalog=self.catalog_name, step=exc.step).inc()
        delay = backoff.next()
        log = _log.warning if backoff.failures == 1 else _log.debug
        log("outbox: NATS at %s failed (%s); retrying in %.1fs", self.settings.url, exc, delay)
        await self._disconnect()
        await self._sleep(delay)
        await asyncio.to_thread(lease.check)

    # ---- the broker -----------------------------------------------------------------------------------

    async def _connect(self) -> JetStreamContext:
        """The JetStream context of a live connection, connecting (and setting up the stream) if needed.

        Raises:
            _BrokerError: the broker is unreachable or refused.
        """
        if self._nc is not None and self._js is not None and self._nc.is_connected:
            return self._js
        await self._disconnect()
        s = self.settings
        try:
            # Reconnection is ours (the loop above, with backoff): the client's own would hold
            # publishes in its buffer while the broker is away instead of failing them.
            nc = await nats.connect(
                s.url,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0,
                connect_timeout=max(1, round(s.publish_timeout_seconds)),
                name=f"paimon-meta outbox {self.holder}",
                error_cb=_quiet,
            )
        except _NATS_ERRORS as exc:
            raise _BrokerError("connect", exc) from exc
        self._nc, self._js = nc, nc.jetstream(timeout=s.publish_timeout_seconds)
        try:
            await self._ensure_stream(self._js)
        except (*_NATS_ERRORS, nats.js.errors.Error) as exc:
            await self._disconnect()
            raise _BrokerError("connect", exc) from exc
        return self._js

    async def _ensure_stream(self, js: JetStreamContext) -> None:
        s = self.settings
        try:
            info = await js.stream_info(s.stream)
        except nats.js.errors.NotFoundError:
            await js.add_stream(
                name=s.stream,
                subjects=[s.subject],
                storage=StorageType.FILE,
                duplicate_window=s.duplicate_window_seconds,
            )
            _log.info("outbox: created JetStream stream %s for %s", s.stream, s.subject)
            return
        subjects = list(info.config.subjects or [])
        if not any(subject_covers(p, s.subject) for p in subjects):
            info.config.subjects = [*subjects, s.subject]
            await js.update_stream(info.config)
            _log.info("outbox: added %s to the subjects of JetStream stream %s", s.subject, s.stream)

    async def _resume(self, lease: OutboxLease, js: JetStreamContext, saved: Position) -> Position:
        """Where to go on from: after ``saved``, or after the last message of our subject when that one is
        ours and ahead (a predecessor died between its ack and its save).

        Raises:
            _BrokerError: the broker did not answer.
        """
        try:
            last = await js.get_last_msg(self.settings.stream, self.settings.subject)
        except nats.js.errors.NotFoundError:
            return saved
        except (*_NATS_ERRORS, nats.js.errors.Error) as exc:
            raise _BrokerError("connect", exc) from exc
        headers = last.headers or {}
        if headers.get(CATALOG_HEADER) != self.catalog_key:
            return saved
        try:
            position = Position.parse(str(headers.get(MSG_ID, "")), field=MSG_ID)
        except ValidationError:
            return saved
        if position <= saved:
            return saved
        _log.info("outbox: the stream is ahead of the saved position; resuming after %s", position.token())
        await asyncio.to_thread(lease.advance, position, 0)
        return position

    async def _disconnect(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(*_NATS_ERRORS):
                await nc.close()


async def _quiet(exc: Exception) -> None:
    """nats-py's error callback: its errors reach us as exceptions of the calls that failed."""
    _log.debug("outbox: NATS client: %s", exc)


def _age(event: FeedEvent) -> float:
    return max(0.0, (datetime.now(UTC) - event.time).total_seconds())


def dumps_event(event: FeedEvent, catalog_name: str) -> bytes:
    """``event`` as the message body the publisher sends (the SSE stream's CloudEvent JSON)."""
    return (
        models.CloudEvent.model_validate(cloud_event(event, catalog_name))
        .model_dump_json(by_alias=True)
        .encode()
    )
