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
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from paimon_meta import errors
from paimon_meta.errors import PaimonMetaError
from paimon_meta.io import get_file_io
from paimon_meta.metastore.registry import validate_identifier
from paimon_meta.model.arrow import from_arrow_schema
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import BATCH_COMMIT_IDENTIFIER
from paimon_meta.serde.commit_message import CURRENT_VERSION, serialize_commit_messages
from paimon_meta.table.table import FileStoreTable
from paimon_meta.table.write.overwrite import OverwriteSpec

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


def _split(identifier: str) -> tuple[str, str]:
    parts = identifier.split(".")
    if len(parts) != 2:
        raise errors.ValidationError(f"table identifier must be '<database>.<table>', got {identifier!r}")
    return validate_identifier("database", parts[0]), validate_identifier("table", parts[1])


@dataclass(frozen=True, slots=True)
class RemoteCommitResult:
    snapshot_ids: tuple[int, ...]
    deduplicated: bool


class _KeepAlive:
    """Persistent HTTP/1.1 connections to one service, one per thread (``http.client`` connections are
    not thread-safe): a commit pays no TCP handshake and no new server-side connection.

    A connection idle longer than ``IDLE_SECONDS`` is closed before use rather than reused: the server
    closes idle keep-alive connections (uvicorn after 5 s), and a request sent on a connection the server
    is closing is lost with no answer. If a reused connection fails anyway before any answer arrives, the
    request is re-sent once on a new connection only when ``resend_safe`` (reads, and what the server
    deduplicates); otherwise the error goes to the caller (for a commit: outcome unknown)."""

    IDLE_SECONDS = 2.0

    def __init__(self, uri: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(uri)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errors.ValidationError(f"a commit service URL is http(s)://host[:port], got {uri!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        self._ssl = ssl.create_default_context() if self.https else None
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._mutex = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
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
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None and time.monotonic() - self._local.used > self.IDLE_SECONDS:
            self._drop(conn)
            conn = None
        reused = conn is not None
        if conn is None:
            conn = self._new()
        try:
            status, raw, close = self._exchange(conn, method, target, body, headers)
        except (ConnectionError, http.client.BadStatusLine):
            self._drop(conn)
            if not (reused and resend_safe):
                raise
            conn = self._new()
            try:
                status, raw, close = self._exchange(conn, method, target, body, headers)
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
        return status, raw

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
    ) -> tuple[int, bytes, bool]:
        conn.request(method, self.base + target, body=body, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, raw, response.will_close

    def close(self) -> None:
        with self._mutex:
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


class RestCatalog:
    """Databases and tables of a ``paimon-meta serve`` catalog. Close it (or use ``with``) when done."""

    def __init__(
        self,
        uri: str,
        token: str,
        *,
        catalog_name: str | None = None,
        options: Mapping[str, str] | None = None,
        timeout_seconds: float = 120.0,
    ) -> None:
        self.uri = uri.rstrip("/")
        self.token = token
        self.options = dict(options or {})
        self.timeout = timeout_seconds
        self._http = _KeepAlive(self.uri, timeout_seconds)
        query = {"warehouse": catalog_name} if catalog_name else None
        config = self._call("GET", "/v1/config", query=query)
        self.prefix = str(config["defaults"]["prefix"])

    # ---- HTTP -------------------------------------------------------------------------------------

    def _path(self, *segments: str) -> str:
        quoted = "/".join(urllib.parse.quote(s, safe="") for s in segments)
        return f"/v1/{urllib.parse.quote(self.prefix, safe='')}/{quoted}"

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, Any] | None = None,
        commit: bool = False,
    ) -> Any:
        target = path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        # Re-sending is safe for reads and for what the server deduplicates (a commit by its identifier,
        # filter-committed); a create is not re-sent (its second answer would be "already exists").
        resend_safe = method == "GET" or commit or path.endswith("/filter-committed")
        try:
            status, raw = self._http.request(method, target, data, headers, resend_safe=resend_safe)
        except (OSError, http.client.HTTPException) as e:
            if commit:
                raise errors.CommitOutcomeUnknownError(
                    f"commit to {self.uri} did not answer ({e}); re-send the same identifier to resolve it"
                ) from e
            raise errors.MetastoreUnavailableError(f"service {self.uri} unreachable: {e}") from e
        if status >= 400:
            raise self._error(status, raw, commit=commit)
        return json.loads(raw) if raw else None

    def _error(self, code: int, raw: bytes, *, commit: bool) -> PaimonMetaError:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        status = int(body.get("code") or code)
        message = str(body.get("message") or http.client.responses.get(code, f"HTTP {code}"))
        rtype, rname = body.get("resourceType"), body.get("resourceName")
        where = f"{message} (HTTP {status} from {self.uri})"
        if status == 404:
            return _NOT_FOUND.get(str(rtype), errors.NotFoundError)(where, resource_name=rname)
        if status == 409:
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

    # ---- catalog ----------------------------------------------------------------------------------

    def create_database(self, name: str, *, ignore_if_exists: bool = True) -> None:
        try:
            self._call("POST", self._path("databases"), {"name": validate_identifier("database", name)})
        except errors.AlreadyExistsError:
            if not ignore_if_exists:
                raise

    def list_databases(self) -> list[str]:
        return self._names(self._path("databases"), "databases")

    def list_tables(self, database: str) -> list[str]:
        return self._names(
            self._path("databases", validate_identifier("database", database), "tables"), "tables"
        )

    def _names(self, path: str, key: str) -> list[str]:
        names: list[str] = []
        token: str | None = None
        while True:
            page = self._call("GET", path, query={"pageToken": token} if token else None)
            names.extend(page[key])
            token = page.get("nextPageToken")
            if not token:
                return names

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
        db, name = _split(identifier)
        fields, _ = from_arrow_schema(schema)
        body = {
            "identifier": {"database": db, "object": name},
            "schema": {
                "fields": [f.to_json() for f in fields],
                "partitionKeys": list(partition_keys),
                "primaryKeys": list(primary_keys),
                "options": dict(options or {}),
                "comment": comment,
            },
        }
        try:
            try:
                self._call("POST", self._path("databases", db, "tables"), body)
            except errors.DatabaseNotFoundError:
                self.create_database(db)  # as Catalog.create_table does (needs the catalog admin grant)
                self._call("POST", self._path("databases", db, "tables"), body)
        except errors.AlreadyExistsError:
            if not ignore_if_exists:
                raise
        return self.get_table(identifier)

    def get_table(self, identifier: str) -> FileStoreTable:
        """The table, read from storage where the service says it lives, committing through the service."""
        db, name = _split(identifier)
        meta = self._call("GET", self._path("databases", db, "tables", name))
        path = str(meta["path"])
        table = FileStoreTable.load(get_file_io(path, self.options), path)

        def factory(_: FileStoreTable, commit_user: str) -> RemoteCommitter:
            return RemoteCommitter(self, db, name, commit_user)

        table.committer_factory = factory
        return table

    def drop_table(self, identifier: str) -> None:
        db, name = _split(identifier)
        self._call("DELETE", self._path("databases", db, "tables", name))

    def commits(self, identifier: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The table's commit history from the service's event log, newest first."""
        return self._log(identifier, "commits", "commits", id_key="commitId", limit=limit)

    # ---- the audit trail (read grant; JSON objects as the service sends them, camelCase) -----------

    def table_registry(self, identifier: str) -> dict[str, Any]:
        """The table's registry row: ``latestSnapshotId`` (the pointer), ``schemaId``, ``location``, ..."""
        db, name = _split(identifier)
        row: dict[str, Any] = self._call("GET", self._path("databases", db, "tables", name, "registry"))
        return row

    def commit_events(
        self, identifier: str, *, commit_id: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """The latest ``limit`` commit events of tables of this name (of one commit), newest first."""
        query = None if commit_id is None else {"commitId": commit_id}
        return self._log(identifier, "events", "events", id_key="eventId", limit=limit, query=query)

    def lock_events(self, identifier: str, *, limit: int = 100) -> list[dict[str, Any]]:
        """The latest ``limit`` events of the table's lock, newest first."""
        return self._log(identifier, "lock-events", "events", id_key="eventId", limit=limit)

    def maintenance_runs(self, identifier: str, *, limit: int = 50) -> list[dict[str, Any]]:
        """The latest ``limit`` expiration and orphan-cleanup runs of tables of this name, newest first."""
        return self._log(identifier, "maintenance-runs", "runs", id_key="runId", limit=limit)

    def snapshot_recordings(self, identifier: str) -> list[tuple[int, str, str]]:
        """(snapshot id, event type, commit id) of every event that recorded a snapshot of the table,
        oldest first (``paimon_meta.ops.audit.recording_events``)."""
        records = self._log(identifier, "snapshot-recordings", "recordings", id_key=None, limit=None)
        return [(int(r["snapshotId"]), str(r["eventType"]), str(r["commitId"])) for r in records]

    def _log(
        self,
        identifier: str,
        resource: str,
        key: str,
        *,
        id_key: str | None,
        limit: int | None,
        query: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` (None: all) rows of a listing of the table paged by position. A newest-first
        log grows at the front while it is paged, so a row may come again on the next page: rows are
        kept once by ``id_key``."""
        db, name = _split(identifier)
        path = self._path("databases", db, "tables", name, resource)
        rows: list[dict[str, Any]] = []
        seen: set[Any] = set()
        token: str | None = None
        while limit is None or len(rows) < limit:
            params = {
                **(query or {}),
                "maxResults": _PAGE if limit is None else min(_PAGE, limit - len(rows)),
            }
            if token:
                params["pageToken"] = token
            page = self._call("GET", path, query=params)
            for row in page[key]:
                if id_key is not None:
                    if row[id_key] in seen:
                        continue
                    seen.add(row[id_key])
                rows.append(row)
            token = page.get("nextPageToken")
            if not token:
                break
        return rows if limit is None else rows[:limit]

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RestCatalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteCommitter:
    """Commits one commit user's messages through the control plane."""

    def __init__(self, catalog: RestCatalog, database: str, table: str, commit_user: str) -> None:
        self.catalog = catalog
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
        body: dict[str, Any] = {
            "commitUser": self.commit_user,
            "commitIdentifier": identifier,
            "messagesVersion": CURRENT_VERSION,
            "messages": base64.b64encode(serialize_commit_messages(list(messages), CURRENT_VERSION)).decode(),
        }
        if isinstance(overwrite, OverwriteSpec):
            body["overwrite"] = dict(overwrite.partition)
            body["overwriteMode"] = "dynamic" if overwrite.dynamic else "static"
        elif overwrite is not None:
            body["overwrite"] = {str(k): str(v) for k, v in overwrite.items()}
        if properties is not None:
            body["properties"] = dict(properties)
        if watermark is not None:
            body["watermark"] = watermark
        path = self.catalog._path("databases", self.database, "tables", self.table, "commit-messages")
        answer = self.catalog._call("POST", path, body, commit=True)
        return RemoteCommitResult(tuple(answer["snapshotIds"]), bool(answer["deduplicated"]))

    def filter_committed(self, identifiers: Sequence[int]) -> list[int]:
        path = self.catalog._path("databases", self.database, "tables", self.table, "filter-committed")
        answer = self.catalog._call(
            "POST", path, {"commitUser": self.commit_user, "identifiers": list(identifiers)}
        )
        return [int(i) for i in answer["identifiers"]]


def connect_service(uri: str, token: str, *, catalog_name: str | None = None, **options: str) -> RestCatalog:
    """The catalog served at ``uri`` (``paimon-meta serve``), authenticated with ``token``; ``options``
    are the storage options of the data files (``s3.endpoint``, ...)."""
    if not uri.startswith(("http://", "https://")):
        raise errors.ValidationError(f"a commit service URL starts with http:// or https://, got {uri!r}")
    return RestCatalog(uri, token, catalog_name=catalog_name, options=options)
