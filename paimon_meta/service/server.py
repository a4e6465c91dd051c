"""Run the service with uvicorn: ``paimon-meta serve``.

On SIGTERM (or SIGINT) the replica drains (:class:`DrainingServer`): not ready at once, new requests
503, streams ended, in-flight requests finish for up to ``drain_seconds``, then it exits 0; a commit cut
off after that (or by SIGKILL) leaves only states recovery resolves (docs/DESIGN.md, "The commit
service"), which a replica runs in the background (``ServiceState``, one replica at a time). Several
replicas may serve one metastore and warehouse: every commit takes the table's lock.

Slow and oversized clients (README, "Hardening"): uvicorn closes a connection idle between requests after
``keep_alive_seconds`` and answers 503 beyond ``max_connections``; it has no limit of its own on the
time or size of a request's headers, so the HTTP protocol here (uvicorn's httptools one) closes a
connection whose request line and headers take longer than ``header_timeout_seconds`` from its first
byte (or from the connection's opening), and answers 400 and closes one whose headers exceed
``max_header_bytes``. The body's limits are the app's (``service.app``: 413, 408).

Proxies (``forwarded_allow_ips``, README "Behind a proxy"): ``X-Forwarded-For`` and
``X-Forwarded-Proto`` are believed only from the addresses named; by default from none, so the client's
address (the failed-token throttle's key, the access log's) is the connection's.

TLS (``tls_cert``/``tls_key``, README "TLS"): uvicorn serves HTTPS with the certificate chain and key,
which are loaded once before serving (a missing, unreadable or mismatched file stops ``serve`` with an
error naming the flag and the file, not a traceback); a plain-HTTP request to the port fails the TLS
handshake and gets no HTTP answer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import threading
import time
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from paimon_meta.errors import ValidationError
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState

log = logging.getLogger("paimon_meta.service")


class HeaderLimitsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline and a size limit on each request's headers.

    The deadline starts when the connection opens and again at the first byte of each request (an idle
    connection between requests is uvicorn's keep-alive timeout's); it ends when the headers are
    complete. Past it the connection is closed (nothing can be answered to a request not yet read).
    Headers (request line included) over the limit make the parser fail: uvicorn answers 400 and closes.
    """

    header_timeout: float = 10.0
    max_header_bytes: int = 64 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._header_bytes = 0

    def _arm(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        log.warning(
            "closed a connection from %s: request headers not received in %gs",
            self.client,
            self.header_timeout,
        )
        self.transport.close()

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.max_header_bytes:
            raise ValueError(f"request headers over {self.max_header_bytes} bytes")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._arm()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()


#: After the drain, how long uvicorn waits for connections to close before it cancels what is left.
SHUTDOWN_GRACE_SECONDS = 3


class DrainingServer(uvicorn.Server):
    """uvicorn's server with our drain on SIGTERM/SIGINT (README "Graceful drain").

    At the signal the port stays open while the replica drains: ``/readyz`` answers 503 at once (a load
    balancer takes the replica out), every new request is answered 503 + Retry-After, live streams end
    with an SSE ``retry:`` hint, and the requests in flight (commits) may finish for ``drain_seconds``.
    At that deadline commits still queued behind a table's lock are withdrawn (503, nothing published)
    and requests still running are answered 503 by the middleware; then uvicorn closes the port and the
    connections, the app's shutdown releases what it holds, and the process exits 0 (the signal is not
    raised again). A second signal stops at once, as uvicorn's own.
    """

    def __init__(self, config: uvicorn.Config, drain_seconds: float) -> None:
        super().__init__(config)
        self.drain_seconds = drain_seconds
        self._drain: threading.Thread | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        service: ServiceState | None = getattr(getattr(self.config.app, "state", None), "service", None)
        if self._drain is not None or service is None or self.should_exit:
            # A second signal, or one before the app started: uvicorn's own (at once).
            self.should_exit = True
            self.force_exit = self._drain is not None
            return
        service.begin_drain()
        self._drain = threading.Thread(
            target=self._drain_then_exit, args=(service,), name="drain", daemon=True
        )
        self._drain.start()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets)
        service: ServiceState | None = getattr(getattr(self.config.app, "state", None), "service", None)
        if service is not None and service.draining and service.abandoned:
            # Requests answered 503 at the deadline still run on worker threads (a commit waiting for its
            # table's lock): their answers were given, the app is shut down, and waiting for them (the
            # event loop's end cancels their tasks and waits for the threads) could take a lock's whole
            # timeout. Nothing of theirs can be published any more than a killed process's could.
            log.warning("exiting with %d request(s) still running past the drain", service.abandoned)
            logging.shutdown()
            os._exit(0)

    def _drain_then_exit(self, service: ServiceState) -> None:
        started = time.monotonic()
        deadline = started + self.drain_seconds
        while service.busy() and time.monotonic() < deadline and not self.should_exit:
            time.sleep(0.02)
        if service.busy():
            service.deadline_reached()
            late = time.monotonic() + SHUTDOWN_GRACE_SECONDS
            while service.busy() and time.monotonic() < late:
                time.sleep(0.02)
        log.info("drained in %.2fs; stopping", time.monotonic() - started)
        self.should_exit = True


def protocol_for(settings: ServiceSettings) -> type[HeaderLimitsProtocol]:
    """:class:`HeaderLimitsProtocol` with ``settings``' limits."""
    return type(
        "HeaderLimits",
        (HeaderLimitsProtocol,),
        {"header_timeout": settings.header_timeout_seconds, "max_header_bytes": settings.max_header_bytes},
    )


def check_tls(settings: ServiceSettings) -> bool:
    """Whether ``settings`` ask for TLS, after loading their certificate chain and key once.

    Raises:
        ValidationError: only one of the two is given, or they cannot be loaded (missing, unreadable,
            not PEM, the key not the certificate's); the message names the flag and the file.
    """
    cert, key = settings.tls_cert, settings.tls_key
    if cert is None and key is None:
        return False
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise ValidationError(f"{given} needs {missing} too (both or neither)", option=missing)
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise ValidationError(f"{flag} {path!r}: {e.strerror or e}", option=flag) from None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise ValidationError(
            f"--tls-cert {cert!r} and --tls-key {key!r} cannot be used together: {e}", option="--tls-cert"
        ) from None
    return True


def serve(
    settings: ServiceSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8181,
    log_level: str = "info",
    log_config: dict[str, Any] | None = LOGGING_CONFIG,
) -> None:
    """Serve until SIGTERM/SIGINT (blocks). ``log_config``: uvicorn's logging set-up (None: the caller
    configured the ``uvicorn`` loggers itself).

    Raises:
        ValidationError: the TLS settings cannot be used (:func:`check_tls`).
    """
    tls = check_tls(settings)
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config,
        access_log=False,  # our middleware logs each request with its id and principal
        # The drain itself ran before uvicorn's shutdown (DrainingServer): what is left is closing.
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        lifespan="on",
        http=protocol_for(settings),
        timeout_keep_alive=max(1, int(settings.keep_alive_seconds)),
        limit_concurrency=settings.max_connections,
        # X-Forwarded-For/-Proto believed only from the proxies named (uvicorn's default believes any
        # loopback client, which could then pick the address the failed-token throttle counts).
        proxy_headers=bool(settings.forwarded_allow_ips),
        forwarded_allow_ips=list(settings.forwarded_allow_ips) or None,
        ssl_certfile=settings.tls_cert if tls else None,
        ssl_keyfile=settings.tls_key if tls else None,
    )
    server = DrainingServer(config, settings.drain_seconds)
    scheme = "https" if tls else "http"
    log.info("serving catalog %r on %s://%s:%d", settings.catalog_name, scheme, host, port)
    server.run()
