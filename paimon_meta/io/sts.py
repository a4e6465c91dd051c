"""Table-scoped S3 credentials from STS ``AssumeRole`` with an inline session policy.

The commit service vends these to the principals its grants allow (Paimon's data token: ``GET
.../token``). One :class:`StsVendor` per process: it assumes ``role_arn`` with the server's own
credentials (its ``s3.*`` options, else the AWS SDK's chain), passing the session policy of
:mod:`paimon_meta.io.policies` for the table's location and access level, so the credentials can do at
most what both the role and that policy allow: nothing outside the table's prefix. MinIO serves STS on
its S3 endpoint and ignores ``RoleArn`` (it applies the calling user's policy, narrowed by the session
policy); AWS needs the role's trust policy to name the server's principal and its maximum session
duration to be at least ``duration_seconds`` (docs/CREDENTIALS.md).

Secrets never leave :class:`VendedCredentials` except through :meth:`VendedCredentials.options` (the map
handed to the client): its ``repr`` hides them, and errors name only the role, the table and STS's code.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from paimon_meta.errors import CredentialVendingError, ValidationError
from paimon_meta.io import s3
from paimon_meta.io.base import scheme_of
from paimon_meta.io.policies import AccessLevel, actions_for, policy_json, table_policy

if TYPE_CHECKING:
    from mypy_boto3_sts import STSClient

#: An STS call's bounds (not the storage options' 30 s reads): a vend runs under its key's lock with a
#: request waiting on it, so a hanging STS costs at most ~3 x (2 + 5) s plus backoff, then a 503.
STS_ATTEMPTS = 3
STS_CONNECT_TIMEOUT_S = 2.0
STS_READ_TIMEOUT_S = 5.0
#: STS's limits on ``DurationSeconds`` (the role's own maximum may be lower: STS then refuses).
MIN_DURATION_SECONDS = 900
MAX_DURATION_SECONDS = 12 * 3600
DEFAULT_DURATION_SECONDS = 6 * 3600
#: STS's limit on ``RoleSessionName`` and the characters it allows.
_SESSION_NAME_MAX = 64
_SESSION_NAME_UNSAFE = re.compile(r"[^\w+=,.@-]")
#: Error codes STS answers when it is throttling or failing, not refusing.
_TRANSIENT_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable", "InternalFailure"}
)


#: What botocore logs at DEBUG includes STS's whole response body: the vended secrets.
_SECRET_ELEMENTS = re.compile(rb"<(AccessKeyId|SecretAccessKey|SessionToken)>[^<]*</\1>")
_SECRET_ELEMENTS_TEXT = re.compile(r"<(AccessKeyId|SecretAccessKey|SessionToken)>[^<]*</\1>")


class _RedactStsSecrets(logging.Filter):
    """Blanks the secret elements of an STS answer in botocore's DEBUG records (``Response body``), so
    an application that turns botocore's logging up does not write vended credentials to its logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(_redacted(a) for a in record.args)
        if isinstance(record.msg, (str, bytes)):
            record.msg = _redacted(record.msg)
        return True


def _redacted(value: object) -> object:
    if isinstance(value, bytes):
        return _SECRET_ELEMENTS.sub(rb"<\1>(redacted)</\1>", value)
    if isinstance(value, str):
        return _SECRET_ELEMENTS_TEXT.sub(r"<\1>(redacted)</\1>", value)
    return value


_REDACTION = _RedactStsSecrets()


def _redact_botocore_logs() -> None:
    for name in ("botocore.parsers", "botocore.endpoint"):
        logger = logging.getLogger(name)
        if _REDACTION not in logger.filters:
            logger.addFilter(_REDACTION)


@dataclass(frozen=True, slots=True)
class StsSettings:
    """Where and how to assume the vending role. ``endpoint``/``region``: STS's (default: the server's
    ``s3.endpoint``, which is where MinIO and moto serve STS, and ``s3.region``); on AWS with a custom
    ``s3.endpoint`` pass the STS endpoint explicitly."""

    role_arn: str
    duration_seconds: int = DEFAULT_DURATION_SECONDS
    external_id: str | None = None
    endpoint: str | None = None
    region: str | None = None
    #: Write credentials also allow what pyarrow's recursive ``create_dir`` sends (pypaimon 2.1.0 calls
    #: it before a new directory's first file): a bucket-wide ``ListBucket`` and PUTs of the ancestors'
    #: ``…/`` markers. Off: AWS and MinIO refuse pypaimon's writes (reads work); our clients need none.
    #: See :func:`paimon_meta.io.policies.table_policy` and docs/CREDENTIALS.md.
    pyarrow_create_dir: bool = False

    def __post_init__(self) -> None:
        if not self.role_arn.startswith("arn:") or len(self.role_arn) < 20:
            raise ValidationError(
                f"the STS role ARN {self.role_arn!r} is not an ARN (arn:aws:iam::<account>:role/<name>; "
                "MinIO accepts arn:minio:iam:::role/<id>)",
                option="sts-role-arn",
            )
        if not MIN_DURATION_SECONDS <= self.duration_seconds <= MAX_DURATION_SECONDS:
            raise ValidationError(
                f"STS credential lifetime {self.duration_seconds} s is outside STS's "
                f"{MIN_DURATION_SECONDS}..{MAX_DURATION_SECONDS} s",
                option="sts-duration",
            )
        if self.external_id is not None and not 2 <= len(self.external_id) <= 1224:
            raise ValidationError("the STS external id must be 2..1224 characters", option="sts-external-id")


@dataclass(frozen=True, slots=True)
class VendedCredentials:
    """Credentials for one table at one access level, valid until ``expires_at``."""

    location: str
    level: AccessLevel
    actions: tuple[str, ...]
    session_name: str
    expires_at: datetime
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    session_token: str = field(repr=False)
    #: The non-secret connection options the client needs too (endpoint, region, addressing style).
    connection: Mapping[str, str] = field(default_factory=dict)

    @property
    def expires_at_millis(self) -> int:
        return int(self.expires_at.timestamp() * 1000)

    def remaining_seconds(self, now: datetime | None = None) -> float:
        return (self.expires_at - (now or datetime.now(UTC))).total_seconds()

    def options(self) -> dict[str, str]:
        """The storage options a client builds its S3 FileIO from (pypaimon, Java and ours read these
        keys): the connection options, then the temporary keys."""
        return {
            **self.connection,
            s3.ACCESS_KEY: self.access_key,
            s3.SECRET_KEY: self.secret_key,
            s3.SESSION_TOKEN: self.session_token,
        }


def vendable(location: str) -> bool:
    """Whether STS credentials can reach ``location``: an ``s3://``/``s3a://`` URI (any case)."""
    try:
        return scheme_of(location) in s3.SCHEMES
    except ValidationError:  # a relative path: not a storage location at all
        return False


def session_name(principal: str, level: AccessLevel) -> str:
    """``pm-<level>-<principal>``, cut to STS's 64 characters of its alphabet: CloudTrail shows it in the
    assumed role's ARN, tying a storage request to the principal the service vended for."""
    safe = _SESSION_NAME_UNSAFE.sub("_", principal)
    return f"pm-{level}-{safe}"[:_SESSION_NAME_MAX]


class StsVendor:
    """Assumes the role for a table's location and access level (one STS round trip per call; the
    service caches what it vends). Thread-safe: the boto3 client is built once, lazily."""

    def __init__(self, settings: StsSettings, storage_options: Mapping[str, str]) -> None:
        self.settings = settings
        self._storage = s3.S3Settings.from_options(storage_options)
        self._client: STSClient | None = None
        self._client_lock = threading.Lock()
        _redact_botocore_logs()

    def connection_options(self) -> dict[str, str]:
        """What a client needs besides keys to reach the same store the server uses."""
        out: dict[str, str] = {}
        if self._storage.endpoint:
            out[s3.ENDPOINT] = self._storage.endpoint
        region = self._storage.region or self.settings.region
        if region:
            out[s3.REGION] = region
        if self._storage.path_style is not None:
            out[s3.PATH_STYLE_ACCESS] = "true" if self._storage.path_style else "false"
        return out

    def vend(self, location: str, level: AccessLevel, principal: str) -> VendedCredentials:
        """Credentials limited to ``location`` (an ``s3://`` table location) at ``level``.
        ``CredentialVendingError`` when STS does not vend them; ``ValidationError`` for a location that
        is not on S3 (nothing is sent then)."""
        from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

        policy = policy_json(
            table_policy(location, level, pyarrow_create_dir=self.settings.pyarrow_create_dir)
        )
        name = session_name(principal, level)
        request: dict[str, Any] = {
            "RoleArn": self.settings.role_arn,
            "RoleSessionName": name,
            "Policy": policy,
            "DurationSeconds": self.settings.duration_seconds,
        }
        if self.settings.external_id is not None:
            request["ExternalId"] = self.settings.external_id
        try:
            answer = self._sts().assume_role(**request)
        except ClientError as e:
            error = e.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            transient = code in _TRANSIENT_CODES or status >= 500
            raise CredentialVendingError(
                f"STS AssumeRole on {self.settings.role_arn} for {location} ({level}) failed: {code} "
                f"{error.get('Message', '')}".rstrip(),
                transient=transient,
                code=code,
                status=status,
                role_arn=self.settings.role_arn,
            ) from e
        except ParamValidationError as e:
            # botocore refused the request before sending it (the role ARN's or external id's form).
            raise CredentialVendingError(
                f"STS AssumeRole on {self.settings.role_arn} is malformed: {e}",
                transient=False,
                code="ParamValidation",
                role_arn=self.settings.role_arn,
            ) from e
        except BotoCoreError as e:
            # No answer: unreachable endpoint, timeout, connection reset (boto3 retried already).
            raise CredentialVendingError(
                f"STS unreachable for AssumeRole on {self.settings.role_arn}: {type(e).__name__}",
                transient=True,
                role_arn=self.settings.role_arn,
            ) from e
        creds = answer["Credentials"]
        expires = creds["Expiration"]
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=UTC)
        return VendedCredentials(
            location=location,
            level=level,
            actions=actions_for(level),
            session_name=name,
            expires_at=expires,
            access_key=creds["AccessKeyId"],
            secret_key=creds["SecretAccessKey"],
            session_token=creds["SessionToken"],
            connection=self.connection_options(),
        )

    def _sts(self) -> STSClient:
        with self._client_lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                storage = self._storage
                kwargs: dict[str, Any] = {
                    "endpoint_url": self.settings.endpoint or storage.endpoint,
                    "region_name": self.settings.region or storage.region,
                    "config": Config(
                        retries={"mode": "standard", "total_max_attempts": STS_ATTEMPTS},
                        connect_timeout=STS_CONNECT_TIMEOUT_S,
                        read_timeout=STS_READ_TIMEOUT_S,
                    ),
                }
                if storage.access_key is not None:
                    kwargs["aws_access_key_id"] = storage.access_key
                    kwargs["aws_secret_access_key"] = storage.secret_key
                    kwargs["aws_session_token"] = storage.session_token
                self._client = boto3.session.Session().client("sts", **kwargs)
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None
