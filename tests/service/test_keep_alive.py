"""The service client's persistent connections (``paimon_meta.catalog.rest._KeepAlive``) against a plain
HTTP/1.1 server: one connection for many requests, a connection the server dropped is re-sent on only
when re-sending is safe, idle connections are not reused."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from paimon_meta import errors
from paimon_meta.catalog.rest import RemoteCommitter, RestCatalog, _KeepAlive


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections = 0
        self.requests: list[str] = []
        # Close the connection after the next response without saying so (as a server whose idle
        # timeout fired between two requests does).
        self.drop_after_next = False
        self.lock = threading.Lock()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with self.server.lock:
            self.server.requests.append(f"{self.command} {self.path}")
            drop, self.server.drop_after_next = self.server.drop_after_next, False
        if self.path.startswith("/v1/config"):
            payload: Any = {"defaults": {"prefix": "paimon"}, "overrides": {}}
        else:
            payload = {"echo": body.decode() or None, "snapshotIds": [1], "deduplicated": False}
        raw = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        if drop:
            self.close_connection = True

    do_GET = do_POST = _answer


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    thread = threading.Thread(target=s.serve_forever, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        s.shutdown()
        s.server_close()
        thread.join(10)


def test_one_connection_serves_many_requests(server: _Server) -> None:
    client = _KeepAlive(server.base, 10)
    for i in range(5):
        status, raw = client.request("GET", f"/v1/config?i={i}", None, {}, resend_safe=True)
        assert status == 200 and json.loads(raw)["defaults"]["prefix"] == "paimon"
    assert server.connections == 1 and len(server.requests) == 5
    client.close()


def test_a_dropped_connection_is_resent_on_only_when_safe(server: _Server) -> None:
    client = _KeepAlive(server.base, 10)
    client.request("GET", "/v1/config", None, {}, resend_safe=True)
    server.drop_after_next = True
    client.request("GET", "/v1/config", None, {}, resend_safe=True)  # the server closes after this one
    # Safe to re-send (a read, a deduplicated commit): sent again on a new connection, answered.
    status, _ = client.request("GET", "/v1/x", None, {}, resend_safe=True)
    assert status == 200 and server.connections == 2
    server.drop_after_next = True
    client.request("GET", "/v1/config", None, {}, resend_safe=True)
    # Not safe (a create): the error reaches the caller; the next request gets a new connection.
    with pytest.raises(ConnectionError):
        client.request("POST", "/v1/create", b"{}", {"Content-Type": "application/json"}, resend_safe=False)
    assert server.requests.count("POST /v1/create") == 0
    assert client.request("GET", "/v1/config", None, {}, resend_safe=True)[0] == 200
    assert server.connections == 3
    client.close()


def test_an_idle_connection_is_not_reused(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_KeepAlive, "IDLE_SECONDS", 0.0)
    client = _KeepAlive(server.base, 10)
    for _ in range(3):
        client.request("GET", "/v1/config", None, {}, resend_safe=True)
    assert server.connections == 3
    client.close()


def test_catalog_errors_when_the_server_is_gone(server: _Server) -> None:
    # No retries: this is about the error once the server is gone (the retries have their own tests).
    catalog = RestCatalog(server.base, "token", options={"rest.retry.deadline-seconds": "0"})
    committer = RemoteCommitter(catalog.client, "db", "t", "u")
    assert committer.commit([], 1).snapshot_ids == (1,)
    server.shutdown()
    server.server_close()
    catalog.client.http.close()
    with pytest.raises(errors.CommitOutcomeUnknownError):
        committer.commit([], 1)
    with pytest.raises(errors.MetastoreUnavailableError):
        catalog.list_databases()
    catalog.close()
