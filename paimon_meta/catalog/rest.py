"""``paimon_meta.connect_service("http://host:port", token=...)``: the catalog API over the commit service.

Metadata calls and commits go to the service with a bearer token (no database credentials on this side);
data files are written and read directly on storage, where the table's ``path`` says (``options`` are the
storage options, ``s3.*``). Commits send the CommitMessages the writers produced to the control plane
(``POST .../commit-messages``), which commits them exactly as an in-process commit does: conflicts,
manifest merge and exactly-once are the server's.

Errors come back typed, from the protocol's error body: 404 by resource type (``DatabaseNotFoundError``,
``TableNotFoundError``, ...), 409 ``AlreadyExistsError`` or, for a commit, ``CommitConflictError`` (nothing
landed), 400 ``ValidationError``, 401/403 ``AccessDeniedError``, 501 ``UnsupportedError``; a commit that
fails with a 5xx or a broken connection is ``CommitOutcomeUnknownError`` (re-send the same identifier:
it is deduplicated if it landed).

**Retries** (:class:`~paimon_meta.catalog.retry.RetryPolicy`; catalog options
``rest.retry.deadline-seconds``, default 30, 0: none, and ``rest.retry.max-backoff-seconds``): a request
is sent again, after capped exponential backoff with full jitter and at least the server's
``Retry-After``, until the call's deadline, only when sending it again cannot do anything twice:

* reads (GETs, ``filter-committed``) on 503, a proxy's 502/504 and connection errors;
* commits on 500, 503, a proxy's 502/504 and connection errors, with the same body: the server
  deduplicates a commit by its (commit user, identifier, kind), so a commit that landed comes back as
  success (``deduplicated``), and a 500 "outcome unknown" is resolved exactly by sending it again;
* everything else (create, drop, ...) only when it did nothing: the connection was refused before a
  byte was sent, or the server answered 503 (metastore, lock or storage unavailable, load shed: before
  any effect, except a create or drop that failed after its change was made; the re-send's "already
  exists" or "not found" then says an earlier attempt may have done it).

Past the deadline the last cause is raised, typed as above with ``status``, ``request_id``,
``attempts`` and ``cause`` in its fields. Each retry is logged (WARNING) and counted
(:attr:`RestClient.retries`, and ``on_retry``). Each attempt sends ``X-Request-Id: <call>.<attempt>``,
the id the service logs the request under.

**TLS**: an ``https://`` URL's server must present a certificate that the system's CAs (or, with the
catalog option ``rest.tls.ca-bundle``, the CA certificates of that PEM file: a private CA) vouch for,
naming the URL's host (or IP address) in its subject alternative names. A refused certificate, or a
server that does not speak TLS, is :class:`ServiceTlsError` naming the URL and the reason, raised at
once: sending again meets the same certificate. Verification cannot be turned off: the bearer token
would go to whoever answers, and a certificate of a private CA is what ``rest.tls.ca-bundle`` is for.
"""

from __future__ import annotations

import base64
import functools
import http.client
import json
import logging
import secrets
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pydantic
from pydantic import BaseModel

from paimon_meta import errors
from paimon_meta.catalog.retry import DEADLINE, RetryPolicy
from paimon_meta.catalog.vended import DataToken, VendedFileIO
from paimon_meta.errors import PaimonMetaError
from paimon_meta.governance.policies import QueryRules
from paimon_meta.io import FileIO, get_file_io
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.identifier import split_identifier, validate_identifier
from paimon_meta.model.schema import TableSchema
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER
from paimon_meta.rest import models, paths
from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec

#: The catalog option (in the service's ``/v1/config`` overrides) that says it vends storage credentials.
DATA_TOKEN_ENABLED = "data-token.enabled"
Body = TypeVar("Body", bound=BaseModel)
Answer = TypeVar("Answer", bound=BaseModel)
Row = TypeVar("Row", bound=BaseModel)
#: A listing's answer (every one carries ``nextPageToken``).
Page = TypeVar(
    "Page",
    models.ListDatabasesResponse,
    models.ListTablesResponse,
    models.ListCommitsResponse,
    models.ListCommitEventsResponse,
    models.ListLockEventsResponse,
    models.ListMaintenanceRunsResponse,
    models.ListSnapshotRecordingsResponse,
)

#: Rows asked for per request of a paged listing (the service's maximum).
_PAGE = 1000

_NOT_FOUND: dict[str, type[errors.NotFoundError]] = {
    "DATABASE": errors.DatabaseNotFoundError,
    "TABLE": errors.TableNotFoundError,
    "SNAPSHOT": errors.SnapshotNotFoundError,
    "TAG": errors.TagNotFoundError,
}
_EXISTS: dict[str, type[errors.AlreadyExistsError]] = {
    "DATABASE": errors.DatabaseAlreadyExistsError,
    "TABLE": errors.TableAlreadyExistsError,
    "TAG": errors.TagAlreadyExistsError,
}


log = logging.getLogger(__name__)

#: Catalog option: a PEM file of the CA certificates an ``https://`` service's certificate must chain
#: to (instead of the system's); see the module docstring.
TLS_CA_BUNDLE = "rest.tls.ca-bundle"


class ServiceTlsError(errors.MetastoreUnavailableError):
    """The TLS connection to the commit service was refused for a reason a repeat cannot fix: its
    certificate did not verify (an unknown CA, another host's name, expired) or it does not speak TLS.
    ``url`` and ``reason`` are in the fields. (The service cannot be used, as for any unreachable
    service; unlike the others, it is never sent again.)"""


def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verification of the server's certificate and host name, against ``ca_bundle``'s CAs or the
    system's (``ValidationError`` naming the option for a bundle that cannot be read)."""
    try:
        return ssl.create_default_context(cafile=ca_bundle)
    except (OSError, ssl.SSLError) as e:  # missing file (OSError), not PEM certificates (SSLError)
        raise errors.ValidationError(
            f"catalog option {TLS_CA_BUNDLE}={ca_bundle!r} cannot be used: {e}", option=TLS_CA_BUNDLE
        ) from None


def _tls_refusal(error: BaseException) -> str | None:
    """Why the TLS handshake was refused for good (the certificate, or no TLS on the other side), or
    None when the failure may be transient (a reset, a timeout)."""
    if isinstance(error, _NotSent):
        error = error.cause
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {getattr(error, 'verify_message', None) or error}"
    if isinstance(error, ssl.SSLError) and getattr(error, "reason", None) in _NOT_TLS:
        return f"the server does not speak TLS ({error.reason})"
    return None


#: OpenSSL's reasons for a handshake answered by something that is not TLS (a plain-HTTP server).
_NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"})

#: The answers a request is sent again on, by its kind (see the module docstring). 503: the service did
#: nothing: it answers 503 for an unavailable metastore, lock or storage (``service/errors.py``) or a
#: shed request, before any effect, with one exception for creates and drops (below); 502/504 from a
#: proxy (not the protocol's error body): the request may have reached the service (the service's own
#: 502, storage refusing it, is not sent again); 500 to a commit: its outcome is unknown, and re-sending
#: it resolves it (the server deduplicates the commit's identifier). The exception: a create or drop
#: whose change was made before the metastore or storage failed (at its transaction's commit, in the
#: read after it, in a drop's purge of the files) is answered 503 too; its re-send then meets "already
#: exists" / "not found", and that error says an earlier attempt may have done it (``RestClient._error``).
#: Nothing is done twice either way.
_RETRY_STATUSES: dict[str, frozenset[int]] = {
    "read": frozenset({502, 503, 504}),
    "commit": frozenset({500, 502, 503, 504}),
    "write": frozenset({503}),
}


@dataclass(frozen=True, slots=True)
class RemoteCommitResult:
    snapshot_ids: tuple[int, ...]
    deduplicated: bool


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """One request about to be sent again: which (``method``, ``path``), after which ``attempt`` (from
    1), in how many seconds (``delay``), and why (``cause``; ``status`` and ``request_id`` of the
    failed attempt when it was answered)."""

    method: str
    path: str
    attempt: int
    delay: float
    cause: str
    status: int | None
    request_id: str


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    body: bytes
    retry_after: str | None
    request_id: str | None


class _NotSent(ConnectionError):
    """The connection could not be opened (refused, unreachable host, connect timeout, TLS handshake):
    not a byte of the request reached the service, so sending it again cannot do anything twice."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(f"could not connect: {cause}")
        self.cause = cause


class _KeepAlive:
    """Persistent HTTP/1.1 connections to one service, one per thread (``http.client`` connections are
    not thread-safe): a commit pays no TCP handshake and no new server-side connection.

    A connection idle longer than ``IDLE_SECONDS`` is closed before use rather than reused: the server
    closes idle keep-alive connections (uvicorn after 5 s), and a request sent on a connection the server
    is closing is lost with no answer. If a reused connection fails anyway before any answer arrives, the
    request is re-sent once on a new connection only when ``resend_safe`` (reads, and what the server
    deduplicates); otherwise the error goes to the caller (for a commit: outcome unknown). A new
    connection is opened before the request is written: failing to open it raises :class:`_NotSent`."""

    IDLE_SECONDS = 2.0

    def __init__(self, uri: str, timeout: float, *, ca_bundle: str | None = None) -> None:
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errors.ValidationError(f"a commit service URL is http(s)://host[:port], got {uri!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        # ``ca_bundle`` is ignored for http:// (one set of options may serve both kinds of URL).
        self._ssl = _tls_context(ca_bundle) if self.https else None
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._mutex = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.connect()
        except OSError as e:
            conn.close()
            raise _NotSent(e) from e
        with self._mutex:
            self._all.append(conn)
        return conn

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        with self._mutex:
            if conn in self._all:
                self._all.remove(conn)
        self._local.conn = None

    def request(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, resend_safe: bool
    ) -> tuple[int, bytes]:
        """(status, body) of the answer: :meth:`exchange` without the headers."""
        answer = self.exchange(method, target, body, headers, resend_safe=resend_safe)
        return answer.status, answer.body

    def exchange(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], *, resend_safe: bool
    ) -> _Answer:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and time.monotonic() - self._local.used > self.IDLE_SECONDS:
            self._drop(conn)
            conn = None
        reused = conn is not None
        if conn is None:
            conn = self._new()
        try:
            answer, close = self._exchange(conn, method, target, body, headers)
        except (ConnectionError, http.client.BadStatusLine) as lost:
            self._drop(conn)
            if not (reused and resend_safe):
                raise
            try:
                conn = self._new()
            except _NotSent as e:
                # Not "never sent": the request went out on the connection that failed first.
                raise ConnectionError(f"{lost or type(lost).__name__}; then {e}") from e
            try:
                answer, close = self._exchange(conn, method, target, body, headers)
            except BaseException:
                self._drop(conn)
                raise
        except BaseException:
            self._drop(conn)
            raise
        if close:
            self._drop(conn)
        else:
            self._local.conn, self._local.used = conn, time.monotonic()
        return answer

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> tuple[_Answer, bool]:
        conn.request(method, self.base + target, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        answer = _Answer(
            response.status, raw, response.getheader("Retry-After"), response.getheader("X-Request-Id")
        )
        return answer, response.will_close

    def close(self) -> None:
        with self._mutex:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


@dataclass(slots=True)
class _Failure:
    """Why one attempt of a call failed: the error it would raise, the answer's status and request id
    (None without an answer), its ``Retry-After``, whether the request may have reached the service
    (False: refused before sending), and whether the service itself answered."""

    error: PaimonMetaError
    status: int | None
    request_id: str
    retry_after: str | None
    reached: bool
    from_service: bool = False  # the answer is the protocol's error body (not a proxy's page)


class RestClient:
    """The HTTP side of one served catalog, shared by a :class:`RestCatalog` and its committers: the bearer
    token, persistent connections, the catalog's prefix (``GET /v1/config``), requests built from
    ``paimon_meta.rest`` (paths and bodies, as the service defines them) and answers read with the same
    models; an error answer comes back as paimon_meta's error, after the retries the module docstring
    describes (``retry``: when; ``on_retry``: called before each retry's wait)."""

    def __init__(
        self,
        uri: str,
        token: str,
        *,
        catalog_name: str | None = None,
        timeout_seconds: float = 120.0,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        self.uri = uri.rstrip("/")
        self.token = token
        self.retry = retry or RetryPolicy()
        self.on_retry = on_retry
        self._retries = 0
        self._count = threading.Lock()
        tls = {} if ca_bundle is None else {"ca_bundle": ca_bundle}
        self.http = _KeepAlive(self.uri, timeout_seconds, **tls)
        query = {paths.WAREHOUSE: catalog_name} if catalog_name else None
        config = self.get(paths.CONFIG, models.ConfigResponse, query=query)
        prefix = config.defaults.get("prefix")
        if prefix is None:
            raise errors.MetastoreUnavailableError(
                f"service {self.uri} named no catalog prefix in its config"
            )
        self.prefix = prefix
        #: The server's overrides win over the client's options (``data-token.enabled``, ...).
        self.config = config

    @property
    def data_token_enabled(self) -> bool:
        """Whether the service vends table-scoped storage credentials (``data-token.enabled`` in its
        ``/v1/config`` overrides): then tables are read and written with those, not the client's keys."""
        return self.config.overrides.get(DATA_TOKEN_ENABLED, "false").strip().lower() == "true"

    @property
    def retries(self) -> int:
        """Requests sent again so far, over every call of this client (any thread)."""
        return self._retries

    def path(self, template: str, **segments: str) -> str:
        """``template`` (one of ``paimon_meta.rest.paths``) under this catalog's prefix."""
        return paths.expand(template, prefix=self.prefix, **segments)

    def get(self, path: str, answer: type[Answer], *, query: Mapping[str, Any] | None = None) -> Answer:
        return self._read(answer, self.send("GET", path, query=query), commit=False)

    def post(self, path: str, body: BaseModel, answer: type[Answer], *, commit: bool = False) -> Answer:
        """POST ``body``; ``commit``: a commit's request (an unanswered one is ``CommitOutcomeUnknownError``,
        a 409 ``CommitConflictError``)."""
        return self._read(answer, self.send("POST", path, body, commit=commit), commit=commit)

    def send(
        self,
        method: str,
        path: str,
        body: BaseModel | None = None,
        *,
        query: Mapping[str, Any] | None = None,
        commit: bool = False,
    ) -> bytes:
        """The answer's body (2xx); an error answer raised as paimon_meta's error once retrying is not
        safe or the deadline has passed (see the module docstring)."""
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else models.dump(body)
        if commit:
            kind = "commit"
        elif method == "GET" or isinstance(body, models.FilterCommittedRequest):
            kind = "read"
        else:
            kind = "write"  # a create's second answer would be "already exists": sent again only if unsent
        call = secrets.token_hex(6)
        policy = self.retry
        started = policy.clock()
        # Whether an attempt of this call may have reached the service (answered, or cut off after
        # sending): a commit's later 409 then cannot mean that nothing landed.
        reached = False
        attempt = 0
        while True:
            attempt += 1
            outcome = self._attempt(method, target, data, kind, f"{call}.{attempt}", reached=reached)
            if isinstance(outcome, bytes):
                return outcome
            reached = reached or outcome.reached
            error = outcome.error
            error.fields.update(
                status=outcome.status, request_id=outcome.request_id, attempts=attempt, cause=error.message
            )
            elapsed = policy.clock() - started
            remaining = policy.deadline_seconds - elapsed
            if not self._retryable(kind, outcome):
                raise error from error.__cause__
            if not policy.enabled or remaining <= 0:
                raise self._gave_up(error, attempt, elapsed) from error.__cause__
            delay = policy.delay(attempt - 1, outcome.retry_after, remaining)
            self._count_retry(
                RetryEvent(method, path, attempt, delay, error.message, outcome.status, outcome.request_id),
                remaining,
            )
            policy.sleep(delay)

    def _gave_up(self, error: PaimonMetaError, attempts: int, elapsed: float) -> PaimonMetaError:
        """The error of the last attempt, saying that it was the last (when it was not the first)."""
        if attempts == 1:
            return error
        deadline = f"{DEADLINE}={self.retry.deadline_seconds:g}"
        message = f"{error.message}; gave up after {attempts} attempts in {elapsed:.1f} s ({deadline})"
        return type(error)(message, **error.fields)

    def _count_retry(self, event: RetryEvent, remaining: float) -> None:
        with self._count:
            self._retries += 1
        log.warning(  # the cause names the request id
            "%s %s failed: %s; sending it again in %.2f s (attempt %d, %.1f s left)",
            event.method,
            event.path,
            event.cause,
            event.delay,
            event.attempt + 1,
            remaining,
        )
        if self.on_retry is not None:
            self.on_retry(event)

    def _attempt(
        self, method: str, target: str, data: bytes | None, kind: str, request_id: str, *, reached: bool
    ) -> bytes | _Failure:
        """One sending of the request: the answer's body (2xx), else why it failed."""
        headers = {"Authorization": f"Bearer {self.token}", "X-Request-Id": request_id}
        if data is not None:
            headers["Content-Type"] = "application/json"
        commit = kind == "commit"
        try:
            answer = self.http.exchange(method, target, data, headers, resend_safe=kind != "write")
        except (OSError, http.client.HTTPException) as e:
            error: PaimonMetaError
            where = f"{self.uri} (request id {request_id})"
            refusal = _tls_refusal(e)
            if refusal is not None:
                # Refused during the handshake: nothing was sent (a commit's outcome is known: none).
                error = ServiceTlsError(
                    f"TLS connection to {self.uri} refused: {refusal}", url=self.uri, reason=refusal
                )
            elif commit:
                error = errors.CommitOutcomeUnknownError(
                    f"commit to {where} did not answer ({e}); re-send the same identifier to resolve it"
                )
            else:
                error = errors.MetastoreUnavailableError(f"service {where} unreachable: {e}")
            error.__cause__ = e
            return _Failure(error, None, request_id, None, reached=not isinstance(e, _NotSent))
        if answer.status < 400:
            return answer.body
        rid = answer.request_id or request_id
        reached = reached and kind != "read"  # a read's earlier attempts changed nothing
        try:
            body: models.ErrorResponse | None = models.load(models.ErrorResponse, answer.body)
        except pydantic.ValidationError:
            body = None  # not the protocol's error body (a proxy's page, uvicorn's own answer)
        error = self._error(answer.status, body, commit=commit, request_id=rid, reached=reached)
        return _Failure(error, answer.status, rid, answer.retry_after, True, from_service=body is not None)

    @staticmethod
    def _retryable(kind: str, failure: _Failure) -> bool:
        """Whether sending the failed request again is safe and may help (the module docstring)."""
        if failure.status in (502, 504) and failure.from_service:
            return False  # the service's own 502: storage refused it (credentials, bucket): not transient
        if failure.status is not None:
            return failure.status in _RETRY_STATUSES[kind]
        cause = failure.error.__cause__
        if isinstance(failure.error, ServiceTlsError):
            return False  # a certificate the client refuses stays refused
        if isinstance(cause, _NotSent):
            return True  # refused before sending: safe for any request
        return kind != "write"

    def _read(self, answer: type[Answer], raw: bytes, *, commit: bool) -> Answer:
        try:
            return models.load(answer, raw)
        except pydantic.ValidationError as e:
            problems = models.describe_errors(e.errors())
            where = f"service {self.uri} answered what is not a {answer.__name__}: {problems}"
            if commit:
                raise errors.CommitOutcomeUnknownError(
                    f"{where}; re-send the same identifier to resolve it"
                ) from e
            raise errors.MetastoreUnavailableError(where) from e

    def _error(
        self,
        code: int,
        body: models.ErrorResponse | None,
        *,
        commit: bool,
        request_id: str,
        reached: bool = False,
    ) -> PaimonMetaError:
        """The error an answer of status ``code`` stands for. ``reached``: an earlier attempt of this
        request may have reached the service. For a commit, a 409 may then be the answer to a commit
        still in flight or landed under another attempt: not "nothing landed" but an unknown outcome. For
        a create or drop re-sent after a 503, a 409 or 404 may be its own earlier attempt's doing (see
        ``_RETRY_STATUSES``)."""
        status = body.code if body is not None and body.code else code
        message = body.message if body is not None and body.message else None
        message = message or http.client.responses.get(code, f"HTTP {code}")
        rtype, rname = (body.resource_type, body.resource_name) if body is not None else (None, None)
        where = f"{message} (HTTP {status} from {self.uri}, request id {request_id})"
        if reached and not commit and status in (404, 409):
            where += "; an earlier attempt of this request, answered 503, may have done it"
        if status == 404:
            return _NOT_FOUND.get(str(rtype), errors.NotFoundError)(where, resource_name=rname)
        if status == 409:
            if commit and reached:
                return errors.CommitOutcomeUnknownError(
                    f"{where}, after an earlier attempt that may have reached the service; re-send the "
                    "same identifier to resolve it"
                )
            if commit:
                return errors.CommitConflictError(where)
            return _EXISTS.get(str(rtype), errors.AlreadyExistsError)(where, resource_name=rname)
        if status in (401, 403):
            return errors.AccessDeniedError(where, status=status)
        if status == 501:
            return errors.UnsupportedError(where)
        if 400 <= status < 500:
            return errors.ValidationError(where)
        if commit:
            return errors.CommitOutcomeUnknownError(f"{where}; re-send the same identifier to resolve it")
        return errors.MetastoreUnavailableError(where)

    def close(self) -> None:
        self.http.close()


def _request(model: type[Body], **fields: Any) -> Body:
    """A request body, checked as the service checks it: what it would refuse with a 400 is refused
    here, before anything is sent."""
    try:
        return model.model_validate(fields)
    except pydantic.ValidationError as e:
        raise errors.ValidationError(models.describe_errors(e.errors())) from e


class RestCatalog:
    """Databases and tables of a ``paimon-meta serve`` catalog. Close it (or use ``with``) when done.

    ``options``: the storage options of the data files, the client's ``rest.retry.*`` options
    (:mod:`paimon_meta.catalog.retry`; ``retry`` overrides them, ``on_retry`` sees each retry) and
    ``rest.tls.ca-bundle`` (module docstring, "TLS")."""

    def __init__(
        self,
        uri: str,
        token: str,
        *,
        catalog_name: str | None = None,
        options: Mapping[str, str] | None = None,
        timeout_seconds: float = 120.0,
        retry: RetryPolicy | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
    ) -> None:
        self.client = RestClient(
            uri,
            token,
            catalog_name=catalog_name,
            timeout_seconds=timeout_seconds,
            retry=retry or RetryPolicy.from_options(options or {}),
            on_retry=on_retry,
            ca_bundle=(options or {}).get(TLS_CA_BUNDLE),
        )
        self.uri = self.client.uri
        self.token = token
        self.prefix = self.client.prefix
        self.options = dict(options or {})
        self.timeout = timeout_seconds
        self._vended: dict[str, VendedFileIO] = {}
        self._vended_lock = threading.Lock()

    # ---- catalog ----------------------------------------------------------------------------------

    def create_database(self, name: str, ignore_if_exists: bool = True) -> None:
        body = _request(models.CreateDatabaseRequest, name=validate_identifier("database", name))
        try:
            self.client.send("POST", self.client.path(paths.DATABASES), body)
        except errors.AlreadyExistsError:
            if not ignore_if_exists:
                raise

    def list_databases(self) -> list[str]:
        pages = self._pages(self.client.path(paths.DATABASES), models.ListDatabasesResponse)
        return [name for page in pages for name in page.databases]

    def list_tables(self, database: str) -> list[str]:
        path = self.client.path(paths.TABLES, database=validate_identifier("database", database))
        return [name for page in self._pages(path, models.ListTablesResponse) for name in page.tables]

    def _pages(self, path: str, model: type[Page]) -> Iterator[Page]:
        """The pages of a listing by name, each asked with the previous page's ``nextPageToken``, until
        one has none."""
        token: str | None = None
        while True:
            page = self.client.get(path, model, query={paths.PAGE_TOKEN: token} if token else None)
            yield page
            token = page.next_page_token
            if not token:
                return

    def create_table(
        self,
        identifier: str,
        schema: pa.Schema,
        *,
        partition_keys: Sequence[str] = (),
        primary_keys: Sequence[str] = (),
        options: Mapping[str, str] | None = None,
        comment: str | None = None,
        ignore_if_exists: bool = False,
    ) -> FileStoreTable:
        db, name = split_identifier(identifier)
        fields, _ = from_arrow_schema(schema)
        body = _request(
            models.CreateTableRequest,
            identifier=models.Identifier(database=db, object=name),
            schema_=_request(
                models.SchemaBody,
                fields=[f.to_json() for f in fields],
                partition_keys=list(partition_keys),
                primary_keys=list(primary_keys),
                options=dict(options or {}),
                comment=comment,
            ),
        )
        path = self.client.path(paths.TABLES, database=db)
        try:
            try:
                self.client.send("POST", path, body)
            except errors.DatabaseNotFoundError:
                # As MetastoreCatalog.create_table does (needs the catalog admin grant).
                self.create_database(db)
                self.client.send("POST", path, body)
        except errors.AlreadyExistsError:
            if not ignore_if_exists:
                raise
        return self.get_table(identifier)

    def get_table(self, identifier: str) -> FileStoreTable:
        """The table, read from storage where the service says it lives, committing through the service."""
        db, name = split_identifier(identifier)
        meta = self.client.get(
            self.client.path(paths.TABLE, database=db, table=name), models.GetTableResponse
        )
        table = FileStoreTable.load(self._file_io(identifier, meta.path), meta.path)
        client = self.client

        def factory(_: FileStoreTable, commit_user: str) -> RemoteCommitter:
            return RemoteCommitter(client, db, name, commit_user)

        table.committer_factory = factory
        table.query_auth = QueryAuthorization(client, db, name)
        return table

    def drop_table(self, identifier: str) -> None:
        db, name = split_identifier(identifier)
        self.client.send("DELETE", self.client.path(paths.TABLE, database=db, table=name))
        with self._vended_lock:
            vended = self._vended.pop(identifier, None)
        if vended is not None:
            vended.close()

    def data_token(self, identifier: str, *, access: str | None = None) -> DataToken:
        """Storage credentials the service vends for the table (``GET .../token``): what the grant
        allows, or ``access="read"`` for less. ``UnsupportedError`` when the service vends none."""
        db, name = split_identifier(identifier)
        answer = self.client.get(
            self.client.path(paths.TABLE_TOKEN, database=db, table=name),
            models.GetTableTokenResponse,
            query={"access": access} if access else None,
        )
        return DataToken(dict(answer.token), answer.expires_at_millis)

    def table_io_options(self, identifier: str) -> dict[str, str]:
        """The storage options to open the table's files with elsewhere (Spark executors): the
        client's options, and over them the vended credentials when the service vends them (fetched
        again when near their expiry: call this for each new task set of a long job)."""
        if not self.client.data_token_enabled:
            return dict(self.options)
        with self._vended_lock:
            vended = self._vended.get(identifier)
        if vended is None:  # not opened through this catalog yet: its location first
            db, name = split_identifier(identifier)
            meta = self.client.get(
                self.client.path(paths.TABLE, database=db, table=name), models.GetTableResponse
            )
            opened = self._file_io(identifier, meta.path)
            assert isinstance(opened, VendedFileIO)
            vended = opened
        return {**self.options, **vended.token().options}

    def _file_io(self, identifier: str, location: str) -> FileIO:
        """The FileIO for a table's files: the client's options, or (the service vending) credentials
        for this table, shared by every handle of it this catalog opens."""
        if not self.client.data_token_enabled:
            return get_file_io(location, self.options)
        with self._vended_lock:
            vended = self._vended.get(identifier)
            if vended is None or vended.location != location:
                vended = self._vended[identifier] = VendedFileIO(
                    location, functools.partial(self.data_token, identifier), self.options
                )
            return vended

    def commits(self, identifier: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The table's commit history from the service's event log, newest first."""
        rows = self._log(
            identifier,
            paths.COMMITS,
            models.ListCommitsResponse,
            lambda page: page.commits,
            key=lambda row: row.commit_id,
            limit=limit,
        )
        return [models.plain(row) for row in rows]

    # ---- the audit trail (read grant; JSON objects as the service sends them, camelCase) -----------

    def table_registry(self, identifier: str) -> dict[str, Any]:
        """The table's registry row: ``latestSnapshotId`` (the pointer), ``schemaId``, ``location``, ..."""
        db, name = split_identifier(identifier)
        path = self.client.path(paths.REGISTRY, database=db, table=name)
        return models.plain(self.client.get(path, models.TableRegistryResponse))

    def commit_events(
        self, identifier: str, *, commit_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The latest ``limit`` commit events of tables of this name (of one commit), newest first."""
        rows = self._log(
            identifier,
            paths.EVENTS,
            models.ListCommitEventsResponse,
            lambda page: page.events,
            key=lambda row: row.event_id,
            limit=limit,
            query=None if commit_id is None else {paths.COMMIT_ID: commit_id},
        )
        return [models.plain(row) for row in rows]

    def lock_events(self, identifier: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The latest ``limit`` events of the table's lock, newest first."""
        rows = self._log(
            identifier,
            paths.LOCK_EVENTS,
            models.ListLockEventsResponse,
            lambda page: page.events,
            key=lambda row: row.event_id,
            limit=limit,
        )
        return [models.plain(row) for row in rows]

    def maintenance_runs(self, identifier: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The latest ``limit`` expiration and orphan-cleanup runs of tables of this name, newest first."""
        rows = self._log(
            identifier,
            paths.MAINTENANCE_RUNS,
            models.ListMaintenanceRunsResponse,
            lambda page: page.runs,
            key=lambda row: row.run_id,
            limit=limit,
        )
        return [models.plain(row) for row in rows]

    def snapshot_recordings(self, identifier: str) -> list[tuple[int, str, str]]:
        """(snapshot id, event type, commit id) of every event that recorded a snapshot of the table,
        oldest first (``paimon_meta.ops.audit.recording_events``)."""
        rows = self._log(
            identifier,
            paths.SNAPSHOT_RECORDINGS,
            models.ListSnapshotRecordingsResponse,
            lambda page: page.recordings,
            key=None,
            limit=None,
        )
        return [(row.snapshot_id, row.event_type, str(row.commit_id)) for row in rows]

    def catalog_events(
        self, *, after: str | None = None, table: str | None = None, limit: int = 100
    ) -> tuple[list[dict[str, Any]], str]:
        """The change feed: up to ``limit`` events (CloudEvents, as JSON objects) after position ``after``
        (None: from the start) of the tables this principal may read (``table``: of one ``db.t``), and
        the position to ask from next (``GET /v1/{prefix}/events``)."""
        query: dict[str, Any] = {paths.MAX_RESULTS: limit}
        if after:
            query[paths.PAGE_TOKEN] = after
        if table:
            query[paths.FEED_TABLE] = table
        page = self.client.get(
            self.client.path(paths.CATALOG_EVENTS), models.ListCatalogEventsResponse, query=query
        )
        return [e.model_dump(mode="json", by_alias=True) for e in page.events], page.next_page_token

    # ---- on-call operations (admin grants; ``paimon-meta ... --metastore http://``) -------------------

    def _table_op(self, template: str, identifier: str, body: BaseModel) -> dict[str, Any]:
        db, name = split_identifier(identifier)
        path = self.client.path(template, database=db, table=name)
        return self.client.post(path, body, models.OperationReport).root

    def recover(
        self,
        identifier: str,
        *,
        older_than_seconds: float | None = None,
        dry_run: bool = False,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Recovery of the table run by the service (``POST .../recover``): the report's fields."""
        body = _request(
            models.RecoverTableRequest, older_than_seconds=older_than_seconds, dry_run=dry_run, reason=reason
        )
        return self._table_op(paths.RECOVER, identifier, body)

    def expire_snapshots(self, identifier: str, **settings: Any) -> dict[str, Any]:
        """Snapshot expiration run by the service (``POST .../expire-snapshots``; ``settings``:
        ``retain_min``, ``retain_max``, ``older_than_seconds``, ``max_deletes``, ``dry_run``)."""
        return self._table_op(
            paths.EXPIRE_SNAPSHOTS, identifier, _request(models.ExpireSnapshotsRequest, **settings)
        )

    def remove_orphan_files(
        self, identifier: str, *, older_than_seconds: float, dry_run: bool = False
    ) -> dict[str, Any]:
        """Orphan cleanup run by the service (``POST .../remove-orphan-files``)."""
        body = _request(
            models.RemoveOrphanFilesRequest, older_than_seconds=older_than_seconds, dry_run=dry_run
        )
        return self._table_op(paths.REMOVE_ORPHAN_FILES, identifier, body)

    def list_locks(self) -> list[dict[str, Any]]:
        """The lock rows of the tables this principal administers (``GET .../locks``)."""
        return self.client.get(self.client.path(paths.LOCKS), models.ListLocksResponse).locks

    def release_lock(self, lock_id: str, *, reason: str, force: bool = False) -> dict[str, Any]:
        """Release a lock row through the service (``POST .../locks/release``)."""
        body = _request(models.ReleaseLockRequest, lock_id=lock_id, reason=reason, force=force)
        return self.client.post(self.client.path(paths.RELEASE_LOCK), body, models.OperationReport).root

    def _log(
        self,
        identifier: str,
        template: str,
        model: type[Page],
        rows_of: Callable[[Page], Sequence[Row]],
        *,
        key: Callable[[Row], object] | None,
        limit: int | None,
        query: Mapping[str, str] | None = None,
    ) -> list[Row]:
        """Up to ``limit`` (None: all) rows of a listing of the table paged by position. A newest-first
        log grows at the front while it is paged, so a row may come again on the next page: rows are
        kept once by ``key``."""
        db, name = split_identifier(identifier)
        path = self.client.path(template, database=db, table=name)
        rows: list[Row] = []
        seen: set[object] = set()
        token: str | None = None
        while limit is None or len(rows) < limit:
            params: dict[str, Any] = {
                **(query or {}),
                paths.MAX_RESULTS: _PAGE if limit is None else min(_PAGE, limit - len(rows)),
            }
            if token:
                params[paths.PAGE_TOKEN] = token
            page = self.client.get(path, model, query=params)
            for row in rows_of(page):
                if key is not None:
                    if key(row) in seen:
                        continue
                    seen.add(key(row))
                rows.append(row)
            token = page.next_page_token
            if not token:
                break
        return rows if limit is None else rows[:limit]

    def close(self) -> None:
        with self._vended_lock:
            vended, self._vended = list(self._vended.values()), {}
        for io in vended:
            io.close()
        self.client.close()

    def __enter__(self) -> RestCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteCommitter:
    """Commits one commit user's messages to one table through the control plane
    (``POST .../commit-messages``, ``POST .../filter-committed``)."""

    def __init__(self, client: RestClient, database: str, table: str, commit_user: str) -> None:
        self.client = client
        self.database = database
        self.table = table
        self.commit_user = commit_user

    def commit(
        self,
        messages: Sequence[CommitMessage],
        identifier: int = BATCH_COMMIT_IDENTIFIER,
        *,
        overwrite: Mapping[str, Any] | OverwriteSpec | None = None,
        properties: Mapping[str, str] | None = None,
        watermark: int | None = None,
    ) -> RemoteCommitResult:
        # Only the fields given are sent (models.dump leaves the unset ones out).
        fields: dict[str, Any] = {
            "commit_user": self.commit_user,
            "commit_identifier": identifier,
            "messages_version": CURRENT_VERSION,
            "messages": base64.b64encode(serialize_commit_messages(list(messages), CURRENT_VERSION)).decode(),
        }
        if isinstance(overwrite, OverwriteSpec):
            fields["overwrite"] = dict(overwrite.partition)
            fields["overwrite_mode"] = "dynamic" if overwrite.dynamic else "static"
        elif overwrite is not None:
            fields["overwrite"] = {str(k): str(v) for k, v in overwrite.items()}
        if properties is not None:
            fields["properties"] = dict(properties)
        if watermark is not None:
            fields["watermark"] = watermark
        body = _request(models.CommitMessagesRequest, **fields)
        path = self.client.path(paths.COMMIT_MESSAGES, database=self.database, table=self.table)
        answer = self.client.post(path, body, models.CommitMessagesResponse, commit=True)
        return RemoteCommitResult(tuple(answer.snapshot_ids), answer.deduplicated)

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]:
        body = _request(
            models.FilterCommittedRequest, commit_user=self.commit_user, identifiers=list(identifiers)
        )
        path = self.client.path(paths.FILTER_COMMITTED, database=self.database, table=self.table)
        return list(self.client.post(path, body, models.FilterCommittedResponse).identifiers)


class QueryAuthorization:
    """What a read of a ``query-auth.enabled`` table through the service applies: ``POST .../auth`` with
    the projected columns (``{"select": [...]}``, null without a projection, as pypaimon sends it), its
    answer parsed into :class:`~paimon_meta.governance.policies.QueryRules` against the read's schema
    (:mod:`paimon_meta.table.read.query_auth` applies them). Fails closed: an answer that is not exactly
    a list of filters and a map of masks, or holds a rule that cannot be applied exactly, is
    ``PolicyRuleError`` (never rows unfiltered); a 403 is :class:`~paimon_meta.errors.QueryNotAllowedError`
    naming the table and the columns asked for."""

    def __init__(self, client: RestClient, database: str, table: str) -> None:
        self.client = client
        self.database = database
        self.table = table

    def __call__(self, schema: TableSchema, select: Sequence[str] | None) -> QueryRules:
        identifier = f"{self.database}.{self.table}"
        path = self.client.path(paths.TABLE_AUTH, database=self.database, table=self.table)
        body = _request(models.AuthTableQueryRequest, select=None if select is None else list(select))
        try:
            raw = self.client.send("POST", path, body)
        except errors.AccessDeniedError as e:
            if e.fields.get("status") != 403:
                raise
            columns = "every column" if select is None else f"columns {list(select)}"
            raise errors.QueryNotAllowedError(
                f"reading {columns} of {identifier} is not allowed: {e.message}",
                table=identifier,
                columns=None if select is None else list(select),
                status=403,
            ) from e
        filters, masks = _auth_answer(raw, identifier)
        return QueryRules.parse(filters, masks, schema.fields)


def _auth_answer(raw: bytes, identifier: str) -> tuple[list[str], dict[str, str]]:
    """The ``filter`` and ``columnMasking`` of an ``/auth`` answer (absent or null: none, as pypaimon
    reads them); ``PolicyRuleError`` when the answer is anything else."""

    def malformed(what: str, rule: str = "row filter") -> errors.PolicyRuleError:
        return errors.PolicyRuleError(
            f"the service's query authorization of {identifier} is malformed ({what}): refusing to read "
            "rather than read unfiltered",
            rule=rule,
            reason="json",
            table=identifier,
        )

    try:
        answer = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise malformed("not JSON") from None
    if not isinstance(answer, dict):
        raise malformed("not a JSON object")
    filters = answer.get("filter")
    masks = answer.get("columnMasking")
    if filters is None:
        filters = []
    if not isinstance(filters, list) or not all(isinstance(f, str) for f in filters):
        raise malformed("filter is not a list of predicate JSON strings")
    if masks is None:
        masks = {}
    if not isinstance(masks, dict) or not all(isinstance(t, str) for t in masks.values()):
        raise malformed("columnMasking is not a map of column to transform JSON strings", "column mask")
    return filters, masks


def connect_service(
    uri: str,
    token: str,
    *,
    warehouse: str | None = None,
    catalog_name: str | None = None,
    **options: str,
) -> RestCatalog:
    """The catalog served at ``uri`` (``paimon-meta serve``), authenticated with ``token``: the one named
    ``warehouse`` (a catalog of the service, as Paimon's clients name it: ``GET /v1/config?warehouse=``
    answers its prefix; ``catalog_name`` is the same, by its older name), else the service's default
    catalog. ``options`` are the storage options of the data files (``s3.endpoint``, ...), the client's
    retry options (``rest.retry.deadline-seconds``, ``rest.retry.max-backoff-seconds``: see
    :class:`RestCatalog`) and, for an ``https://`` URL, ``rest.tls.ca-bundle`` (the CAs to verify the
    server's certificate with, instead of the system's).

    Raises:
        ValidationError: not an http(s) URL, or ``warehouse`` and ``catalog_name`` naming two catalogs.
        NotFoundError: the service has no catalog named ``warehouse`` (404 ``CATALOG``).
        ServiceTlsError: the server's certificate was refused, or it does not speak TLS."""
    if not uri.startswith(("http://", "https://")):
        raise errors.ValidationError(f"a commit service URL starts with http:// or https://, got {uri!r}")
    if warehouse is not None and catalog_name is not None and warehouse != catalog_name:
        raise errors.ValidationError(
            f"warehouse {warehouse!r} and catalog_name {catalog_name!r} name two catalogs: give one",
            warehouse=warehouse,
        )
    return RestCatalog(uri, token, catalog_name=warehouse or catalog_name, options=options)
