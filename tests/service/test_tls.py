"""TLS: ``serve --tls-cert/--tls-key`` with a CA and a certificate this test makes (tests/fixtures/tls.py);
``connect_service("https://...")`` verifies the server's certificate (``rest.tls.ca-bundle``)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.rest import TLS_CA_BUNDLE, ServiceTlsError
from paimon_meta.errors import MetastoreUnavailableError, ValidationError
from paimon_meta.service.server import check_tls
from paimon_meta.service.state import ServiceSettings
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal
from tests.fixtures.tls import TlsFiles, make_tls_files, spawn_tls_service

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())])


def _plain_http_answer(port: int) -> bytes:
    """What a plain-HTTP request to ``port`` gets back before the connection ends (or 5 s pass)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /v1/config HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer x\r\n\r\n")
        received = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := s.recv(4096):
                received += chunk
    return received


def test_a_tls_service_round_trips_with_its_ca_and_is_refused_without(
    clean_db: str,
    tmp_path: Path,
    service_processes: list[ServiceProcess],
    tls_files: TlsFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        token = make_principal(catalog, "job", [("admin", None, None)])
    server = spawn_tls_service(
        service_processes,
        clean_db,
        warehouse,
        tmp_path,
        files=tls_files,
        monkeypatch=monkeypatch,
        args=["--log-level", "info"],
    )
    assert server.base.startswith("https://")
    assert f"on https://127.0.0.1:{server.port}" in server.log_tail(100)

    with paimon_meta.connect_service(server.base, token, **{TLS_CA_BUNDLE: str(tls_files.ca)}) as remote:
        table = remote.create_table("db.t", SCHEMA)
        wb = table.new_batch_write_builder()
        write = wb.new_write()
        write.write_arrow(pa.table({"k": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}))
        assert wb.new_commit().commit(write.prepare_commit()).snapshot_ids == (1,)
        rb = remote.get_table("db.t").new_read_builder()
        assert rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("k").to_pylist() == [1, 2]

    # The system's CAs, or another CA, do not vouch for it: refused at once, naming URL and reason.
    for options in ({}, {TLS_CA_BUNDLE: str(tls_files.other_ca)}):
        monkeypatch.delenv("SSL_CERT_FILE")  # the system's CAs only (Python's ssl reads it too)
        with pytest.raises(ServiceTlsError, match="certificate verify failed") as refused:
            paimon_meta.connect_service(server.base, token, **options)
        assert server.base in refused.value.message
        assert refused.value.fields["attempts"] == 1  # not retried as if transient
        monkeypatch.setenv("SSL_CERT_FILE", str(tls_files.ca))

    with pytest.raises(ValidationError, match=TLS_CA_BUNDLE):
        paimon_meta.connect_service(server.base, token, **{TLS_CA_BUNDLE: str(tmp_path / "missing.pem")})
    with pytest.raises(ValidationError, match=TLS_CA_BUNDLE):
        paimon_meta.connect_service(server.base, token, **{TLS_CA_BUNDLE: str(tls_files.key)})

    # Plain HTTP to the TLS port gets nothing that could pass for the API's answer.
    answer = _plain_http_answer(server.port)
    assert not answer.startswith(b"HTTP/"), answer[:200]
    assert b"prefix" not in answer and b"{" not in answer
    with pytest.raises(MetastoreUnavailableError) as plain:
        paimon_meta.connect_service(
            f"http://127.0.0.1:{server.port}", token, **{"rest.retry.deadline-seconds": "0"}
        )
    assert not isinstance(plain.value, ServiceTlsError)


@contextlib.contextmanager
def _plain_http_server() -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_https_to_a_server_without_tls_is_refused_at_once() -> None:
    with _plain_http_server() as port, pytest.raises(ServiceTlsError, match="does not speak TLS") as e:
        paimon_meta.connect_service(f"https://127.0.0.1:{port}", "pmt_x")
    assert e.value.fields["attempts"] == 1


def test_serve_refuses_tls_settings_it_cannot_use(tmp_path: Path, tls_files: TlsFiles) -> None:
    cert, key = str(tls_files.cert), str(tls_files.key)
    assert check_tls(ServiceSettings()) is False
    assert check_tls(ServiceSettings(tls_cert=cert, tls_key=key)) is True
    with pytest.raises(ValidationError, match="--tls-cert needs --tls-key"):
        check_tls(ServiceSettings(tls_cert=cert))
    with pytest.raises(ValidationError, match="--tls-key needs --tls-cert"):
        check_tls(ServiceSettings(tls_key=key))
    missing = str(tmp_path / "nope.key")
    with pytest.raises(ValidationError, match="--tls-key") as e:
        check_tls(ServiceSettings(tls_cert=cert, tls_key=missing))
    assert missing in e.value.message
    other = make_tls_files(tmp_path / "other")
    with pytest.raises(ValidationError, match="cannot be used together"):
        check_tls(ServiceSettings(tls_cert=cert, tls_key=str(other.key)))
