"""A moto server that enforces IAM, in its own process, for proving the vended-credential policies.

moto enforces identity policies only when ``INITIAL_NO_AUTH_ACTION_COUNT`` is finite, a setting read once
when ``moto.settings`` is imported and shared by everything in that process; so the server runs in a child
process (``python tests/io/iam_moto.py TRACE_FILE``), never beside the session's plain moto server.

moto 5 enforces a *role's* policy on assumed-role credentials but not AWS's full evaluation, so the child
replaces moto's authorization of S3 requests with AWS's rules as AWS documents them (without them a
policy could pass here and fail on AWS, or the reverse). What moto 5.2 does instead is said in brackets:

1. Conditions: ``String(Not)Equals`` and ``String(Not)Like`` (``...IfExists`` too); a list of values
   matches any; ``StringLike`` globs ``*`` and ``?``; a key absent from the request fails a positive
   operator; a statement whose condition does not hold does not apply. Any other operator raises, so a
   policy using one fails loudly. [moto evaluates only ``StringEquals``, ignores the rest, and answers
   Deny when a condition fails.]
2. The request context of a listing: ``s3:prefix``, ``s3:delimiter``, ``s3:max-keys`` from its query.
   [none: so moto ignores the ``s3:prefix`` condition that keeps ``t1`` from listing ``t10``.]
3. Actions: ``HeadBucket`` needs ``s3:ListBucket``; ``DeleteObjects`` needs ``s3:DeleteObject`` on each
   key; ``CopyObject`` also needs ``s3:GetObject`` on the source. [``s3:HeadBucket``, which no policy
   grants; one check against the bucket; the destination only.]
4. Wildcards in ``Action`` (case-insensitive) and ``Resource`` are IAM globs. [regexes: the ``.`` of
   ``db.db`` matched any character.]
5. A GET/HEAD of a missing key answers 404 only if the caller may ``s3:ListBucket`` with the key as
   ``s3:prefix``, else 403 (AWS's HeadObject/GetObject "Permissions" sections; that the key is the
   ``s3:prefix`` is what Ceph RGW adopted to match AWS: ceph/ceph#68577). [always 404.] MinIO differs:
   it applies this rule to anonymous requests only.
6. An assumed-role session's permissions are the intersection of its role's policies and the session
   policy passed to ``AssumeRole``. [the session policy is stored and ignored.] The tests still put the
   document under test in the role's policy, so they prove it even where a server ignores session
   policies; this point lets the same server check the production shape (a warehouse-wide role plus
   the per-table session policy).
7. An unsigned request is 403 AccessDenied. [HTTP 500: a KeyError on the missing header.]

Every decision is appended to ``TRACE_FILE`` as a JSON line (``principal``, ``action``, ``resource``,
``context``, ``allowed``, ``note``: why a check was made beyond the request's own): the tests read it to
see exactly which calls a client made and which were refused. The child prints one JSON line
(``endpoint``, the admin user's keys) once ready and exits when its stdin closes, so it cannot outlive
the tests.

The test side: :func:`start_iam_moto` and :class:`IamMoto`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

if TYPE_CHECKING:
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sts import STSClient

ACCOUNT_ID = "123456789012"  # moto's default account
REGION = "us-east-1"
ADMIN_USER = "pm-iam-admin"
_START_TIMEOUT_S = 30.0

Context = dict[str, str]


# ---------------------------------------------------------------------------------------------------
# AWS policy semantics (pure; used by the child, and unit-tested directly)


def iam_glob(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcard match: ``*`` any run of characters, ``?`` one character, the rest literal."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL | (re.IGNORECASE if ignore_case else 0)) is not None


_STRING_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda expected, actual: expected == actual,
    "StringLike": iam_glob,
}


def condition_holds(operator: str, key: str, expected: str | list[str], context: Mapping[str, str]) -> bool:
    """Whether one condition (``{operator: {key: expected}}``) holds for a request's ``context``, as AWS
    evaluates it. ``ValueError`` for an operator this server does not model."""
    base, if_exists = (
        (operator[: -len("IfExists")], True) if operator.endswith("IfExists") else (operator, False)
    )
    negated = base.startswith("StringNot")
    positive = base.replace("StringNot", "String", 1) if negated else base
    match = _STRING_OPERATORS.get(positive)
    if match is None:
        raise ValueError(f"condition operator {operator!r} is not modelled by the IAM moto server")
    values = [expected] if isinstance(expected, str) else list(expected)
    actual = next((v for k, v in context.items() if k.lower() == key.lower()), None)  # keys: any case
    if actual is None:
        # AWS: an absent key fails a positive operator and satisfies a negated one; IfExists: holds.
        return if_exists or negated
    matched = any(match(value, actual) for value in values)
    return not matched if negated else matched


def conditions_hold(
    conditions: Mapping[str, Mapping[str, str | list[str]]], context: Mapping[str, str]
) -> bool:
    """All operators, and all keys within each, must hold (AND); values within a key are OR."""
    return all(
        condition_holds(operator, key, expected, context)
        for operator, block in conditions.items()
        for key, expected in block.items()
    )


def _element_matches(statement: Mapping[str, Any], element: str, value: str) -> bool:
    patterns = statement[element]
    patterns = [patterns] if isinstance(patterns, str) else patterns
    return any(iam_glob(p, value, ignore_case=element in ("Action", "NotAction")) for p in patterns)


def statement_effect(
    statement: Mapping[str, Any], action: str, resource: str, context: Mapping[str, str]
) -> str | None:
    """``"Allow"``/``"Deny"`` when ``statement`` applies to the request, else ``None`` (identity
    policies only: no ``Principal``)."""
    if "NotAction" in statement:
        if _element_matches(statement, "NotAction", action):
            return None
    elif not _element_matches(statement, "Action", action):
        return None
    if "NotResource" in statement:
        if _element_matches(statement, "NotResource", resource):
            return None
    elif "Resource" in statement and not _element_matches(statement, "Resource", resource):
        return None
    if not conditions_hold(statement.get("Condition", {}), context):
        return None
    return str(statement["Effect"])


def policy_decision(
    documents: list[Mapping[str, Any]], action: str, resource: str, context: Mapping[str, str]
) -> bool:
    """AWS's evaluation over identity policies: an explicit Deny wins, else any Allow, else denied."""
    effects = set()
    for document in documents:
        statements = document["Statement"]
        for statement in [statements] if isinstance(statements, dict) else statements:
            effects.add(statement_effect(statement, action, resource, context))
    return "Deny" not in effects and "Allow" in effects


def _header(headers: Any, name: str) -> str | None:
    for key, value in headers.items():
        if str(key).lower() == name:
            return str(value)
    return None


def s3_authorizations(
    action: str, resource: str, path: str, headers: Any, body: bytes
) -> list[tuple[str, str, Context]]:
    """The ``(action, resource, context)`` triples AWS authorizes for one S3 request that moto labelled
    ``action`` on ``resource`` (see the module docstring, points 2 and 3)."""
    query = parse_qs(urlsplit(path).query, keep_blank_values=True)
    if action == "s3:HeadBucket":
        action = "s3:ListBucket"
    if action == "s3:ListBucket":
        context = {
            f"s3:{name}": query[name][0] for name in ("prefix", "delimiter", "max-keys") if name in query
        }
        return [(action, resource, context)]
    if action == "s3:DeleteObject" and "delete" in query and "/" not in resource.split(":::", 1)[1]:
        root = ET.fromstring(body)
        keys = [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]
        return [("s3:DeleteObject", f"{resource}/{key}", {}) for key in keys]
    checks: list[tuple[str, str, Context]] = [(action, resource, {})]
    source = _header(headers, "x-amz-copy-source")
    if action == "s3:PutObject" and source is not None:
        source_path = unquote(urlsplit(source).path).lstrip("/")
        checks.append(("s3:GetObject", f"arn:aws:s3:::{source_path}", {}))
    return checks


# ---------------------------------------------------------------------------------------------------
# The child process


def _install_aws_semantics(trace: Path) -> None:
    """Replace moto's authorization of S3 requests with :func:`s3_authorizations` and
    :func:`policy_decision` over the principal's identity policies and, for an assumed-role session, its
    session policy (points 1-6 of the module docstring). IAM and STS calls keep moto's own checks."""
    from moto.iam import access_control as ac
    from moto.s3.exceptions import S3AccessDeniedError
    from moto.s3.models import s3_backends
    from moto.sts.models import sts_backends

    lock = threading.Lock()

    def record(
        principal: str, action: str, resource: str, context: Context, *, allowed: bool, note: str = ""
    ) -> None:
        entry = {"principal": principal, "action": action, "resource": resource, "context": context}
        line = json.dumps({**entry, "allowed": allowed, "note": note})
        with lock, trace.open("a") as f:
            f.write(line + "\n")

    def session_policy(access_key: Any) -> Mapping[str, Any] | None:
        if not isinstance(access_key, ac.AssumedRoleAccessKey):
            return None
        for role in sts_backends[access_key.account_id][access_key.partition].assumed_roles:
            if role.access_key_id == access_key._access_key_id and role.policy:
                document: Mapping[str, Any] = json.loads(role.policy)
                return document
        return None

    def permitted(access_key: Any, action: str, resource: str, context: Context) -> bool:
        # AWS: a session's effective permissions are its identity policies' intersected with its session
        # policy (an explicit Deny in either wins).
        identity = [ac.IAMPolicy(p)._policy_json for p in access_key.collect_policies()]
        session = session_policy(access_key)
        return policy_decision(identity, action, resource, context) and (
            session is None or policy_decision([session], action, resource, context)
        )

    def object_missing(resource: str) -> bool:
        bucket, _, key = resource.split(":::", 1)[1].partition("/")
        try:
            return s3_backends[ACCOUNT_ID]["aws"].get_object(bucket, key) is None
        except Exception:  # no such bucket: moto answers NoSuchBucket itself
            return False

    def check_s3(self: Any, resource: str) -> None:
        principal = self._access_key.arn
        for action, res, context in s3_authorizations(
            self._action, resource, self._path, self._headers, self._body
        ):
            allowed = permitted(self._access_key, action, res, context)
            record(principal, action, res, context, allowed=allowed)
            if not allowed:
                self._raise_access_denied()
        copying = _header(self._headers, "x-amz-copy-source") is not None
        if self._action == "s3:GetObject" and not copying and object_missing(resource):
            # AWS answers a missing key 404 only to a caller allowed s3:ListBucket, evaluated with the key
            # as s3:prefix; otherwise 403 (see point 5).
            bucket_arn, _, key = resource.partition("/")
            context = {"s3:prefix": key}
            allowed = permitted(self._access_key, "s3:ListBucket", bucket_arn, context)
            record(
                principal,
                "s3:ListBucket",
                bucket_arn,
                context,
                allowed=allowed,
                note="404 or 403 for a missing key",
            )
            if not allowed:
                self._raise_access_denied()

    original_init = ac.S3IAMRequest.__init__

    def init_s3(self: Any, *args: Any, **kwargs: Any) -> None:
        if _header(kwargs["headers"], "authorization") is None:
            # moto reads the Authorization header unconditionally (a KeyError: HTTP 500); AWS answers an
            # anonymous request to a bucket without a public policy 403 AccessDenied.
            record("anonymous", "s3:" + str(kwargs["action"]), kwargs["path"], {}, allowed=False)
            raise S3AccessDeniedError()
        original_init(self, *args, **kwargs)

    ac.S3IAMRequest.__init__ = init_s3  # type: ignore[method-assign]
    ac.S3IAMRequest.check_action_permitted = check_s3  # type: ignore[method-assign]


def _bootstrap_admin() -> tuple[str, str]:
    """An IAM user allowed everything, created in the backend directly (no request, so nothing is spent
    of the unauthenticated allowance, which is zero)."""
    from moto.iam.models import iam_backends

    backend = iam_backends[ACCOUNT_ID]["aws"]
    backend.create_user(region_name=REGION, user_name=ADMIN_USER)
    admin = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    backend.put_user_policy(ADMIN_USER, "admin", json.dumps(admin))
    key = backend.create_access_key(ADMIN_USER)
    return key.access_key_id, key.secret_access_key


def main(trace: str) -> None:
    """Run the server until stdin closes (see the module docstring)."""
    from moto import settings
    from moto.server import ThreadedMotoServer

    if settings.INITIAL_NO_AUTH_ACTION_COUNT != 0:
        raise SystemExit("INITIAL_NO_AUTH_ACTION_COUNT=0 must be set before moto is imported")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    _install_aws_semantics(Path(trace))
    access_key, secret_key = _bootstrap_admin()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    print(
        json.dumps({"endpoint": f"http://{host}:{port}", "access_key": access_key, "secret_key": secret_key})
    )
    sys.stdout.flush()
    sys.stdin.read()  # EOF: the parent is gone or done
    server.stop()


# ---------------------------------------------------------------------------------------------------
# The test side


class IamMotoUnavailable(RuntimeError):
    """The IAM moto server could not be started (the message says why)."""


@dataclass(frozen=True)
class Credentials:
    """An access key, optionally temporary (with its session token)."""

    access_key: str
    secret_key: str
    session_token: str | None = None
    principal: str = ""  # the ARN the server's trace names (an assumed role's session ARN)

    def s3_options(self, endpoint: str) -> dict[str, str]:
        """``s3.*`` options (as paimon_meta and pypaimon read them) for this server."""
        options = {
            "s3.endpoint": endpoint,
            "s3.access-key": self.access_key,
            "s3.secret-key": self.secret_key,
            "s3.region": REGION,
            "s3.path-style-access": "true",
        }
        if self.session_token is not None:
            options["s3.session-token"] = self.session_token
        return options


@dataclass(frozen=True)
class Decision:
    """One authorization the server made (a line of its trace)."""

    principal: str
    action: str
    resource: str
    context: Context
    allowed: bool
    note: str = ""


class IamMoto:
    """The running child: its ``endpoint``, ``admin`` credentials, clients, roles and its trace."""

    def __init__(
        self, process: subprocess.Popen[str], endpoint: str, admin: Credentials, trace: Path
    ) -> None:
        self.process = process
        self.endpoint = endpoint
        self.admin = admin
        self.trace = trace
        self._clients: dict[tuple[str, Credentials], Any] = {}

    def _client(self, service: str, credentials: Credentials) -> Any:
        cached = self._clients.get((service, credentials))
        if cached is None:
            import boto3
            from botocore.config import Config

            cached = boto3.session.Session().client(
                service,  # type: ignore[call-overload]
                endpoint_url=self.endpoint,
                aws_access_key_id=credentials.access_key,
                aws_secret_access_key=credentials.secret_key,
                aws_session_token=credentials.session_token,
                region_name=REGION,
                config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
            )
            self._clients[(service, credentials)] = cached
        return cached

    def s3(self, credentials: Credentials | None = None) -> S3Client:
        """An S3 client signing with ``credentials`` (default: the admin's)."""
        client: S3Client = self._client("s3", credentials or self.admin)
        return client

    def iam(self) -> IAMClient:
        client: IAMClient = self._client("iam", self.admin)
        return client

    def sts(self) -> STSClient:
        client: STSClient = self._client("sts", self.admin)
        return client

    def role_with_policy(self, policy: Mapping[str, Any]) -> str:
        """A new role the admin may assume whose only permission policy is ``policy``; its ARN."""
        name = f"pm-table-{uuid.uuid4().hex[:12]}"
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:user/{ADMIN_USER}"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        arn = self.iam().create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        self.iam().put_role_policy(RoleName=name, PolicyName="table", PolicyDocument=json.dumps(policy))
        return arn

    def assume(self, role_arn: str, session_policy: str | None = None) -> Credentials:
        """Temporary credentials of ``role_arn`` (``session_policy`` is sent as STS would get it; moto
        ignores it, which is why the role's own policy carries the document under test)."""
        kwargs: dict[str, Any] = {"RoleArn": role_arn, "RoleSessionName": "pm-test"}
        if session_policy is not None:
            kwargs["Policy"] = session_policy
        answer = self.sts().assume_role(**kwargs)
        c = answer["Credentials"]
        arn = answer["AssumedRoleUser"]["Arn"]
        return Credentials(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"], principal=arn)

    def mark(self) -> int:
        """A position in the trace; :meth:`decisions` returns what came after it."""
        return self.trace.stat().st_size if self.trace.exists() else 0

    def decisions(self, since: int = 0, principal: str | None = None) -> list[Decision]:
        """The decisions after ``since`` (a :meth:`mark`), only ``principal``'s if given."""
        if not self.trace.exists():
            return []
        with self.trace.open() as f:
            f.seek(since)
            found = [Decision(**json.loads(line)) for line in f if line.strip()]
        return [d for d in found if principal is None or d.principal == principal]

    def stop(self) -> None:
        for client in self._clients.values():
            client.close()
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_iam_moto(trace: Path, python: str = sys.executable) -> IamMoto:
    """Start the child (see the module docstring), its log beside ``trace``; ``IamMotoUnavailable``
    with the reason if it does not come up within 30 s."""
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(name, None)
    log_path = trace.with_suffix(".log")
    # The log goes to a file, not a pipe: nobody reads a pipe after start-up, and a full one would block
    # the server mid-request.
    with log_path.open("w") as log:
        try:
            process = subprocess.Popen(
                [python, str(Path(__file__).resolve()), str(trace)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
            )
        except OSError as e:
            raise IamMotoUnavailable(f"cannot run {python}: {e}") from e
    ready: list[str] = []
    reader = threading.Thread(
        target=lambda: ready.append(process.stdout.readline() if process.stdout else "")
    )
    reader.daemon = True
    reader.start()
    reader.join(_START_TIMEOUT_S)
    line = ready[0] if ready else ""
    if not line.strip():
        process.kill()
        process.wait(10)
        err = log_path.read_text().strip()[-2000:]
        raise IamMotoUnavailable(f"the IAM moto server did not start: {err or 'no output'}")
    info = json.loads(line)
    admin_arn = f"arn:aws:iam::{ACCOUNT_ID}:user/{ADMIN_USER}"
    admin = Credentials(info["access_key"], info["secret_key"], principal=admin_arn)
    return IamMoto(process, info["endpoint"], admin, trace)


if __name__ == "__main__":
    main(sys.argv[1])
