"""A moto S3 server that records the requests it serves, for the cluster tests.

Executors on a cluster read data files in their own processes; counting the files a read opened from
there would need a hook in the data source. The store sees every read instead: this server (moto's
``ThreadedMotoServer`` behind the session fixture's faithful middleware, :mod:`tests.fixtures.s3`)
records each request's method and path. A driver marks the boundaries of what it does with
``GET /_phase/<name>`` (answered here, never reaching moto); :meth:`RecordingS3.opened_in` lists the data
files read between a phase marker and the next.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tests.fixtures.s3 import _START_TIMEOUT_S, MotoS3, _FaithfulS3Middleware, _WsgiApp

PHASE_PREFIX = "/_phase/"


class _RecordingMiddleware:
    def __init__(self, app: _WsgiApp, log: list[tuple[str, str]], lock: threading.Lock) -> None:
        self._app = app
        self._log = log
        self._lock = lock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = urllib.parse.unquote(str(environ.get("PATH_INFO", "")))
        method = str(environ.get("REQUEST_METHOD", ""))
        if path.startswith(PHASE_PREFIX):
            with self._lock:
                self._log.append(("PHASE", path[len(PHASE_PREFIX) :]))
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        with self._lock:
            self._log.append((method, path))
        return self._app(environ, start_response)


class RecordingS3(MotoS3):
    """A :class:`MotoS3` whose requests are recorded (``(method, path)``, ``("PHASE", name)`` markers)."""

    def __init__(self, endpoint: str, log: list[tuple[str, str]], lock: threading.Lock) -> None:
        super().__init__(endpoint)
        self._log = log
        self._lock = lock

    def requests(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._log)

    def opened_in(self, phase: str) -> set[str]:
        """Paths of the data files (``.../data-*``) read by GET between marker ``phase`` and the next one."""
        log = self.requests()
        starts = [i for i, (method, name) in enumerate(log) if (method, name) == ("PHASE", phase)]
        assert len(starts) == 1, f"phase {phase!r} marked {len(starts)} times"
        opened = set()
        for method, path in log[starts[0] + 1 :]:
            if method == "PHASE":
                break
            if method == "GET" and path.rsplit("/", 1)[-1].startswith("data-"):
                opened.add(path)
        return opened


@contextlib.contextmanager
def recording_moto() -> Iterator[RecordingS3]:
    """A recording moto server on 127.0.0.1 (an ephemeral port), stopped at exit."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    starter = threading.Thread(target=server.start, daemon=True)
    starter.start()
    starter.join(_START_TIMEOUT_S)
    if starter.is_alive():
        raise RuntimeError(f"ThreadedMotoServer did not start within {_START_TIMEOUT_S} s")
    try:
        log: list[tuple[str, str]] = []
        lock = threading.Lock()
        wsgi_server = server._server
        if wsgi_server is None or not hasattr(wsgi_server, "app"):
            raise RuntimeError("ThreadedMotoServer internals changed: cannot install the middleware")
        wsgi_server.app = _RecordingMiddleware(_FaithfulS3Middleware(wsgi_server.app), log, lock)
        host, port = server.get_host_and_port()
        moto = RecordingS3(f"http://{host}:{port}", log, lock)
        werkzeug_log = logging.getLogger("werkzeug")
        level = werkzeug_log.level
        werkzeug_log.setLevel(logging.WARNING)  # one INFO line per request otherwise
        try:
            yield moto
        finally:
            werkzeug_log.setLevel(level)
            moto.client().close()
    finally:
        server.stop()
