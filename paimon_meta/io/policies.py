"""IAM session-policy documents for table-scoped vended S3 credentials.

The service vends credentials per table through STS ``AssumeRole`` with an inline session policy; the
effective permissions are the intersection of the role's policy and this document, so the document alone
decides what the holder can reach inside the role's warehouse. Pure functions: no boto3.

Decisions (docs/CREDENTIALS.md explains them for operators):

* ``read``: ``s3:GetObject`` on the table's exact key ``arn:aws:s3:::bucket/prefix`` (clients HEAD the
  table's "directory" path) and on ``arn:aws:s3:::bucket/prefix/*``; ``s3:ListBucket`` on the bucket,
  conditioned on ``s3:prefix`` being ``prefix``, ``prefix/`` or ``prefix/*``. Never ``prefix*``: that
  would let table ``t1`` list ``t10``.
* ``write``: read's actions plus ``s3:PutObject``, ``s3:DeleteObject`` (Paimon writers delete their own
  uncommitted files on abort, and Java and pypaimon writers expire snapshots after committing by
  default), ``s3:AbortMultipartUpload`` and ``s3:ListMultipartUploadParts`` on the same object resources.
* Nothing on other buckets, nothing bucket-wide but the prefix-conditioned ``ListBucket``.

Invariant: every resource and condition value in a document is the table's own key, or lies under
``prefix/``; the bucket ARN appears only with the ``s3:prefix`` condition.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from paimon_meta.errors import ValidationError

AccessLevel = Literal["read", "write"]

POLICY_VERSION = "2012-10-17"
# STS AssumeRole: "The plaintext that you use for both inline and managed session policies can't exceed
# 2,048 characters" (the packed binary limit is separate and reported by STS as PackedPolicyTooLarge).
MAX_SESSION_POLICY_CHARS = 2048

READ_ACTIONS: tuple[str, ...] = ("s3:GetObject", "s3:ListBucket")
WRITE_ACTIONS: tuple[str, ...] = (
    *READ_ACTIONS,
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)

_OBJECT_READ = ("s3:GetObject",)
_OBJECT_WRITE = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
_SCHEMES = ("s3://", "s3a://")


def actions_for(level: AccessLevel) -> tuple[str, ...]:
    """The S3 actions a credential of ``level`` is granted (``ValidationError`` for another level)."""
    if level == "read":
        return READ_ACTIONS
    if level == "write":
        return WRITE_ACTIONS
    raise ValidationError(f"unknown access level {level!r} (read or write)", level=level)


def split_location(location: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of an ``s3://`` or ``s3a://`` table location, the prefix without leading or
    trailing slashes. ``ValidationError`` naming the location for anything else (a local path, a bucket
    without a key, an empty bucket, a key with empty segments)."""
    scheme = next((s for s in _SCHEMES if location.startswith(s)), None)
    if scheme is None:
        raise ValidationError(
            f"cannot vend S3 credentials for {location!r}: not an s3:// or s3a:// location",
            location=location,
        )
    rest = location[len(scheme) :]
    bucket, _, key = rest.partition("/")
    prefix = key.rstrip("/")
    if not bucket:
        raise ValidationError(f"no bucket in table location {location!r}", location=location)
    if not prefix:
        raise ValidationError(
            f"table location {location!r} names no key under bucket {bucket!r}: a policy would cover "
            "the whole bucket",
            location=location,
        )
    if any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValidationError(
            f"table location {location!r} has an empty, '.' or '..' path segment", location=location
        )
    if any(ch in prefix or ch in bucket for ch in "*?"):
        # IAM treats * and ? in resources and StringLike values as wildcards.
        raise ValidationError(
            f"table location {location!r} contains an IAM wildcard character (* or ?)",
            location=location,
        )
    return bucket, prefix


def table_policy(location: str, level: AccessLevel) -> dict[str, Any]:
    """The IAM policy document (Version 2012-10-17) granting ``level`` on the table at ``location``."""
    bucket, prefix = split_location(location)
    actions_for(level)  # validates the level
    object_actions = _OBJECT_READ if level == "read" else _OBJECT_WRITE
    return {
        "Version": POLICY_VERSION,
        "Statement": [
            {
                "Sid": "TableObjects",
                "Effect": "Allow",
                "Action": list(object_actions),
                "Resource": [f"arn:aws:s3:::{bucket}/{prefix}", f"arn:aws:s3:::{bucket}/{prefix}/*"],
            },
            {
                "Sid": "ListTablePrefix",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": [prefix, f"{prefix}/", f"{prefix}/*"]}},
            },
        ],
    }


def policy_json(policy: dict[str, Any]) -> str:
    """``policy`` as compact JSON for STS's ``Policy`` parameter. ``ValidationError`` naming the table's
    location when it exceeds the 2,048 characters STS accepts for a session policy."""
    text = json.dumps(policy, separators=(",", ":"), sort_keys=False)
    if len(text) > MAX_SESSION_POLICY_CHARS:
        location = _location_of(policy)
        raise ValidationError(
            f"session policy for {location} is {len(text)} characters; STS accepts at most "
            f"{MAX_SESSION_POLICY_CHARS}",
            location=location,
            length=len(text),
        )
    return text


def _location_of(policy: dict[str, Any]) -> str | None:
    """The ``s3://bucket/prefix`` a document of :func:`table_policy` was made for (its first object
    resource), or ``None`` for a document of another shape."""
    for statement in policy.get("Statement", []):
        for resource in statement.get("Resource", []):
            if isinstance(resource, str) and resource.startswith("arn:aws:s3:::") and "/" in resource:
                return "s3://" + resource.removeprefix("arn:aws:s3:::")
    return None
