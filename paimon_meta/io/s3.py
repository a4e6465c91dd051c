"""FileIO on S3 and S3-compatible stores (boto3), for ``s3://bucket/key`` and ``s3a://bucket/key``.

Options (keys as in pypaimon; absent ones fall back to the AWS SDK defaults, i.e. the standard
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` / ``AWS_REGION`` /
``AWS_DEFAULT_REGION`` / ``AWS_ENDPOINT_URL`` environment variables and the shared config files):

``s3.endpoint``            endpoint URL (``http://host:port``; ``https://`` is assumed without a scheme)
``s3.access-key``          access key id (with ``s3.secret-key``; both or neither)
``s3.secret-key``          secret access key
``s3.session-token``       session token for temporary credentials
``s3.region``              signing region
``s3.path-style-access``   ``true``: ``endpoint/bucket/key`` addressing; ``false``: virtual-hosted
                           (``bucket.endpoint/key``); absent: the SDK decides. ``s3.path.style.access``
                           is accepted as an alias.
``s3.conditional-writes``  ``auto`` (default) | ``true`` | ``false``: whether ``create_if_absent`` uses
                           ``PUT If-None-Match: *``. ``auto`` probes the store once (see
                           :meth:`S3FileIO.capabilities`).
``s3.max-attempts``        attempts per request incl. retries (default 5, botocore "standard" mode)
``s3.connect-timeout``     Paimon duration (``5 s``, ``500 ms``; bare numbers are ms), default 5 s
``s3.read-timeout``        default 30 s

Credentials are required: when neither the options nor the SDK's chain supply any, the first request
raises :class:`~paimon_meta.errors.StorageOptionsMissingError` naming ``s3.access-key`` and
``s3.secret-key`` (nothing was sent).

No operation uses CopyObject or renames: S3 has no atomic rename, and moto's conditional copy is
unreliable. Every botocore error is mapped to the FileIO error hierarchy.
"""

from __future__ import annotations

import builtins
import contextlib
import random
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from paimon_meta.errors import (
    FileAlreadyExistsError,
    FileIOError,
    FileNotFound,
    StorageOptionsMissingError,
    ValidationError,
)
from paimon_meta.io.base import Capabilities, FileIO, FileStatus
from paimon_meta.model.options import parse_duration_ms

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

ENDPOINT = "s3.endpoint"
ACCESS_KEY = "s3.access-key"
SECRET_KEY = "s3.secret-key"
SESSION_TOKEN = "s3.session-token"
REGION = "s3.region"
PATH_STYLE_ACCESS = "s3.path-style-access"
PATH_STYLE_ACCESS_ALIAS = "s3.path.style.access"
CONDITIONAL_WRITES = "s3.conditional-writes"
MAX_ATTEMPTS = "s3.max-attempts"
CONNECT_TIMEOUT = "s3.connect-timeout"
READ_TIMEOUT = "s3.read-timeout"

SCHEMES = ("s3", "s3a")

# A 409 ConditionalRequestConflict means a concurrent operation on the key won the race and our PUT
# was rejected (not applied); AWS asks the client to retry. Bounded, with jittered backoff.
_CONFLICT_ATTEMPTS = 5
_CONFLICT_BACKOFF_S = 0.05
_LIST_PAGE_SIZE = 1000  # S3's maximum keys per ListObjectsV2 response


@dataclass(frozen=True, slots=True)
class S3Settings:
    """The parsed S3 options (see the module docstring for their meaning)."""

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    region: str | None = None
    path_style: bool | None = None
    conditional_writes: str = "auto"
    max_attempts: int = 5
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> S3Settings:
        """Parse and validate; ``ValidationError`` names the offending option."""
        endpoint = options.get(ENDPOINT) or None
        if endpoint is not None and "://" not in endpoint:
            endpoint = "https://" + endpoint
        if endpoint is not None and not endpoint.lower().startswith(("http://", "https://")):
            raise ValidationError(f"option {ENDPOINT}={endpoint!r} must be an http(s) URL", option=ENDPOINT)
        access_key, secret_key = options.get(ACCESS_KEY), options.get(SECRET_KEY)
        if (access_key is None) != (secret_key is None):
            raise ValidationError(f"{ACCESS_KEY} and {SECRET_KEY} must be set together", option=ACCESS_KEY)
        style_key = PATH_STYLE_ACCESS if PATH_STYLE_ACCESS in options else PATH_STYLE_ACCESS_ALIAS
        path_style = _parse_bool(style_key, options[style_key]) if style_key in options else None
        cond = options.get(CONDITIONAL_WRITES, "auto").strip().lower()
        if cond not in ("auto", "true", "false"):
            raise ValidationError(
                f"option {CONDITIONAL_WRITES}={cond!r} must be auto, true or false", option=CONDITIONAL_WRITES
            )
        attempts_text = options.get(MAX_ATTEMPTS, "5")
        if not attempts_text.strip().isdigit() or int(attempts_text) < 1:
            raise ValidationError(
                f"option {MAX_ATTEMPTS}={attempts_text!r} must be >= 1", option=MAX_ATTEMPTS
            )
        return cls(
            endpoint=endpoint,
            access_key=access_key,
            secret_key=secret_key,
            session_token=options.get(SESSION_TOKEN),
            region=options.get(REGION) or None,
            path_style=path_style,
            conditional_writes=cond,
            max_attempts=int(attempts_text),
            connect_timeout_s=parse_duration_ms(options.get(CONNECT_TIMEOUT, "5 s"), key=CONNECT_TIMEOUT)
            / 1e3,
            read_timeout_s=parse_duration_ms(options.get(READ_TIMEOUT, "30 s"), key=READ_TIMEOUT) / 1e3,
        )


def _parse_bool(key: str, text: str) -> bool:
    t = text.strip().lower()
    if t not in ("true", "false"):
        raise ValidationError(f"option {key}={text!r} must be true or false", option=key)
    return t == "true"


def parse_s3_uri(path: str) -> tuple[str, str, str]:
    """``(scheme, bucket, key)`` of ``s3://bucket/key`` (or ``s3a://``); key may be empty."""
    scheme, sep, rest = path.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValidationError(f"not an s3:// or s3a:// URI: {path!r}", path=path)
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValidationError(f"S3 URI without a bucket: {path!r}", path=path)
    return scheme, bucket, key


def _object_key(path: str) -> tuple[str, str]:
    _, bucket, key = parse_s3_uri(path)
    if not key or key.endswith("/"):
        raise ValidationError(f"S3 URI does not name an object: {path!r}", path=path)
    return bucket, key


def _error_code(e: Any) -> tuple[str, int, int]:
    """(error code, HTTP status, botocore retry attempts) of a ClientError."""
    resp = e.response
    meta = resp.get("ResponseMetadata", {})
    return (
        str(resp.get("Error", {}).get("Code", "")),
        int(meta.get("HTTPStatusCode", 0)),
        int(meta.get("RetryAttempts", 0)),
    )


def _is_not_found(code: str, status: int) -> bool:
    # NoSuchBucket is a misconfiguration, not an absent file: it must not read as "no snapshot yet".
    # (A HEAD response has no body, so HEAD on a missing bucket is indistinguishable from a missing
    # key: exists/status report "absent" there; GET, PUT and LIST name the bucket.)
    return code in ("NoSuchKey", "NotFound", "404") or (status == 404 and code != "NoSuchBucket")


def _missing_credentials(path: str, settings: S3Settings | None) -> StorageOptionsMissingError:
    """No credentials in the options nor anywhere the AWS SDK looks: name the options that supply them,
    and the connection options that are unset too (the usual cause: no ``s3.*`` options at all, e.g. a
    catalog on a local warehouse opening a table whose location is ``s3://``)."""
    unset = []
    if settings is not None and settings.endpoint is None:
        unset.append(f"{ENDPOINT} (requests go to AWS S3 itself)")
    if settings is not None and settings.region is None:
        unset.append(REGION)
    also = f"; not set either: {', '.join(unset)}" if unset else ""
    return StorageOptionsMissingError(
        f"S3 storage of {path} needs credentials: options {ACCESS_KEY} and {SECRET_KEY} are missing (and the "
        f"AWS SDK found none in the environment, shared config files or an instance role){also}. "
        f"Pass them as storage options (the CLI's -o {ACCESS_KEY}=... -o {SECRET_KEY}=...)",
        options=[ACCESS_KEY, SECRET_KEY],
        uri=path,
    )


@contextlib.contextmanager
def _s3_errors(op: str, path: str, settings: S3Settings | None = None) -> Iterator[None]:
    """Map botocore errors to FileNotFound / FileIOError naming the operation and the path; missing
    credentials to StorageOptionsMissingError (nothing was sent)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        yield
    except NoCredentialsError as e:
        raise _missing_credentials(path, settings) from e
    except ClientError as e:
        code, status, retries = _error_code(e)
        if _is_not_found(code, status):
            raise FileNotFound(f"{op}: no such object", path=path, code=code) from e
        raise FileIOError(
            f"S3 {op} failed ({code or 'error'}, HTTP {status})",
            path=path,
            code=code,
            status=status,
            outcome_unknown=status >= 500 or retries > 0,
        ) from e
    except BotoCoreError as e:
        raise FileIOError(
            f"S3 {op} failed: {type(e).__name__}: {e}", path=path, code=type(e).__name__, outcome_unknown=True
        ) from e


def _status(path: str, size: int, mtime: Any, etag: str | None) -> FileStatus:
    return FileStatus(
        path=path,
        size=int(size),
        mtime_ms=int(mtime.timestamp() * 1000),
        etag=etag.strip('"') if etag else None,
    )


def _drop_expect_continue(params: dict[str, Any], **_: Any) -> None:
    params.get("headers", {}).pop("Expect", None)


def without_expect_continue(client: Any) -> None:
    """Send PUTs without ``Expect: 100-continue``.

    botocore adds that header to every PUT/POST with a body (``handlers.add_expect_header``, on
    ``before-call.s3``) and then waits for the server's interim ``100 Continue`` before sending the
    body: one extra round trip per PUT, for bodies of a few KB that a rejection would waste nothing
    of. The header is not signed (SigV4 signs only the headers it lists; botocore leaves ``Expect``
    out), and S3 (and MinIO, moto) accept a PUT without it: the client simply sends headers and body
    together. This handler runs after botocore's (same event, registered later) and removes it.
    Idempotent per client (botocore deduplicates by ``unique_id``)."""
    client.meta.events.register(
        "before-call.s3", _drop_expect_continue, unique_id="paimon-meta-no-expect-continue"
    )


class S3FileIO(FileIO):
    """FileIO on one S3 endpoint. ``root`` is the warehouse URI: the ``auto`` conditional-write probe
    writes (and deletes) one object below it. Thread-safe; one boto3 client per instance."""

    def __init__(
        self, root: str, options: Mapping[str, str] | None = None, *, client: S3Client | None = None
    ) -> None:
        parse_s3_uri(root)
        self.root = root
        self.settings = S3Settings.from_options(options or {})
        self._client = client if client is not None else self._make_client(self.settings)
        without_expect_continue(self._client)
        self._probe_lock = threading.Lock()
        self._conditional: bool | None = {"true": True, "false": False}.get(self.settings.conditional_writes)

    @staticmethod
    def _make_client(s: S3Settings) -> S3Client:
        import boto3
        from botocore.config import Config

        config = Config(
            retries={"mode": "standard", "max_attempts": s.max_attempts},
            max_pool_connections=32,
            connect_timeout=s.connect_timeout_s,
            read_timeout=s.read_timeout_s,
            s3={
                "addressing_style": "auto" if s.path_style is None else "path" if s.path_style else "virtual"
            },
        )
        # A private session: boto3's default session is a module-level singleton and not thread-safe.
        session = boto3.session.Session(
            aws_access_key_id=s.access_key,
            aws_secret_access_key=s.secret_key,
            aws_session_token=s.session_token,
            region_name=s.region,
        )
        try:
            with _s3_errors("connect", s.endpoint or "s3"):
                return session.client("s3", endpoint_url=s.endpoint, config=config)
        except ValueError as e:  # botocore's "Invalid endpoint"
            raise ValidationError(f"option {ENDPOINT}={s.endpoint!r}: {e}", option=ENDPOINT) from e

    @property
    def client(self) -> S3Client:
        """The boto3 client (for tests and tooling; FileIO users should not need it)."""
        return self._client

    @property
    def capabilities(self) -> Capabilities:
        """``atomic_create`` per ``s3.conditional-writes``; in ``auto`` mode the first access probes the
        store (PUT a fresh key twice with ``If-None-Match: *``: a 412 on the second proves the store
        enforces it; a success or a rejected header means it does not) and caches the answer."""
        return Capabilities(atomic_create=self._conditional_writes(), atomic_rename=False)

    def _conditional_writes(self) -> bool:
        with self._probe_lock:
            if self._conditional is None:
                self._conditional = self._probe()
            return self._conditional

    def _errors(self, op: str, path: str) -> contextlib.AbstractContextManager[None]:
        return _s3_errors(op, path, self.settings)

    def _probe(self) -> bool:
        scheme, bucket, prefix = parse_s3_uri(self.root)
        key = (
            prefix.rstrip("/") + "/" if prefix.strip("/") else ""
        ) + f".paimon-meta-probe-{uuid.uuid4().hex}"
        path = f"{scheme}://{bucket}/{key}"
        try:
            for second in (False, True):
                verdict = self._probe_put(path, bucket, key, second=second)
                if verdict is not None:
                    return verdict
            return False  # the second PUT overwrote the first: If-None-Match was ignored
        finally:
            with contextlib.suppress(FileIOError), self._errors("delete probe", path):
                self._client.delete_object(Bucket=bucket, Key=key)

    def _probe_put(self, path: str, bucket: str, key: str, *, second: bool) -> bool | None:
        """One probe PUT: True/False when it settles the question, None to go on."""
        from botocore.exceptions import ClientError

        with self._errors("conditional-write probe", path):
            try:
                self._client.put_object(Bucket=bucket, Key=key, Body=b"probe", IfNoneMatch="*")
            except ClientError as e:
                code, status, _ = _error_code(e)
                if second and status == 412:
                    return True
                if status in (400, 501) or code in ("NotImplemented", "InvalidArgument"):
                    return False  # the store rejects the header outright
                raise
        return None

    def read(self, path: str) -> bytes:
        bucket, key = _object_key(path)
        with self._errors("read", path):
            body = self._client.get_object(Bucket=bucket, Key=key)["Body"]
            try:
                return body.read()
            finally:
                body.close()

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """A single PUT: S3 replaces objects atomically, so readers see the old or the new bytes.
        Every PUT is durable: ``durable`` changes nothing."""
        bucket, key = _object_key(path)
        with self._errors("write", path):
            self._client.put_object(Bucket=bucket, Key=key, Body=data)

    def create_if_absent(
        self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
    ) -> None:
        """With conditional writes: ``PUT If-None-Match: *``; 412 -> ``FileAlreadyExistsError``. Every
        PUT is durable, so ``durable`` and ``sync_first`` change nothing.

        botocore retries a request whose response was lost (timeout, 5xx), so a 412 after a retry may
        be caused by our own earlier attempt: then the stored bytes are compared with ``data`` and equal
        bytes count as our success (two writers of identical bytes are indistinguishable; Paimon
        metadata files carry a commit user and time, so they never collide). A 409
        ConditionalRequestConflict (a concurrent operation on the key) did not apply our PUT: it is
        retried a few times; if it persists, a HEAD decides: present -> someone else's object ->
        ``FileAlreadyExistsError``, absent -> ``FileIOError``.

        Without conditional writes (``capabilities.atomic_create`` False) this is HEAD-then-PUT, which
        is NOT atomic: two creators can both succeed and the later PUT wins. The caller must serialise
        creators of the same path (hold the metastore lock).
        """
        bucket, key = _object_key(path)
        if not self._conditional_writes():
            if self.exists(path):
                raise FileAlreadyExistsError("create_if_absent: object already exists", path=path)
            self.write(path, data)
            return
        self._conditional_put(path, bucket, key, data)

    def _conditional_put(self, path: str, bucket: str, key: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        maybe_ours = False  # an earlier attempt may have landed before its response was lost
        for attempt in range(_CONFLICT_ATTEMPTS):
            with self._errors("create_if_absent", path):
                try:
                    self._client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                    return
                except ClientError as e:
                    code, status, retries = _error_code(e)
                    maybe_ours = maybe_ours or retries > 0
                    if status == 412 or code == "PreconditionFailed":
                        self._raise_exists_unless_ours(path, bucket, key, data, maybe_ours)
                        return
                    if status != 409 or code != "ConditionalRequestConflict":
                        raise
            time.sleep(_CONFLICT_BACKOFF_S * (2**attempt) * (1 + random.random() / 5))
        if self.exists(path):
            self._raise_exists_unless_ours(path, bucket, key, data, maybe_ours)
            return
        raise FileIOError(
            f"create_if_absent: {_CONFLICT_ATTEMPTS} attempts met ConditionalRequestConflict",
            path=path,
            code="ConditionalRequestConflict",
            outcome_unknown=maybe_ours,
        )

    def _raise_exists_unless_ours(
        self, path: str, bucket: str, key: str, data: bytes, maybe_ours: bool
    ) -> None:
        if maybe_ours:
            try:
                if self.read(path) == data:
                    return
            except FileNotFound:
                pass
        raise FileAlreadyExistsError("create_if_absent: object already exists", path=path)

    def sync(self, paths: Sequence[str]) -> None:
        """Nothing to do: every PUT was durable when it returned."""

    def exists(self, path: str) -> bool:
        try:
            self.status(path)
        except FileNotFound:
            return False
        return True

    def status(self, path: str) -> FileStatus:
        _, bucket, key = parse_s3_uri(path)
        if not key or key.endswith("/"):
            raise FileNotFound("status: not an object path", path=path)
        with self._errors("status", path):
            head = self._client.head_object(Bucket=bucket, Key=key)
        return _status(path, head["ContentLength"], head["LastModified"], head.get("ETag"))

    def list(self, directory: str) -> list[FileStatus]:
        return self._list(directory, recursive=False)

    def list_recursive(self, directory: str) -> builtins.list[FileStatus]:
        return self._list(directory, recursive=True)

    def _list(self, directory: str, *, recursive: bool) -> builtins.list[FileStatus]:
        scheme, bucket, key = parse_s3_uri(directory)
        prefix = key.rstrip("/") + "/" if key.strip("/") else ""
        kwargs: dict[str, Any] = {
            "Bucket": bucket,
            "Prefix": prefix,
            "PaginationConfig": {"PageSize": _LIST_PAGE_SIZE},
        }
        if not recursive:
            kwargs["Delimiter"] = "/"
        out: builtins.list[FileStatus] = []
        with self._errors("list_recursive" if recursive else "list", directory):
            for page in self._client.get_paginator("list_objects_v2").paginate(**kwargs):
                for obj in page.get("Contents", []):
                    k = obj["Key"]
                    if k.endswith("/"):
                        continue  # a "directory marker" written by some tools, not a file
                    out.append(
                        _status(f"{scheme}://{bucket}/{k}", obj["Size"], obj["LastModified"], obj.get("ETag"))
                    )
        out.sort(key=lambda s: s.path)
        return out

    def delete(self, path: str) -> None:
        bucket, key = _object_key(path)
        with self._errors("delete", path):
            self._client.delete_object(Bucket=bucket, Key=key)

    def close(self) -> None:
        self._client.close()
