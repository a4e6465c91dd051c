"""IAM session-policy documents for table-scoped vended S3 credentials.

The service vends credentials per table through STS ``AssumeRole`` with an inline session policy; AWS
grants a session the intersection of its role's policy and this document, so the document alone decides
what the holder can reach inside the role's warehouse. Pure functions: no boto3. docs/CREDENTIALS.md
explains the choices for operators; ``tests/io/test_policies.py`` proves them against an IAM-enforcing
moto server (``tests/io/iam_moto.py``) with our S3FileIO, pyarrow as pypaimon 2.1.0 drives it, and whole
table writes.

For a table at ``s3://bucket/prefix``:

* ``read``: ``s3:GetObject`` on ``arn:aws:s3:::bucket/prefix/*`` and on the table's own key
  ``arn:aws:s3:::bucket/prefix`` (clients HEAD a "directory" path before listing it: MinIO then answers
  404 and the client lists); ``s3:ListBucket`` on ``arn:aws:s3:::bucket`` only while ``s3:prefix`` is
  ``prefix/`` or under it.
* ``write``: read's grants plus ``s3:PutObject``, ``s3:DeleteObject`` (Paimon writers delete their own
  uncommitted files on abort, and Java and pypaimon writers expire snapshots after committing by
  default), ``s3:AbortMultipartUpload`` and ``s3:ListMultipartUploadParts`` on the same object resources.
* Nothing on other buckets; nothing bucket-wide but the prefix-conditioned ``ListBucket``.

Measured decisions (the tests keep them true):

* The listing condition has no bare ``prefix`` entry: a ``ListObjectsV2(Prefix="…/t1")`` it allows
  returns table ``t10``'s keys. No measured client lists without the slash (our S3FileIO, pyarrow and
  pypaimon list ``dir/``). The cost: AWS answers a HEAD of the missing key ``prefix`` itself 403, not
  404 (it evaluates ``ListBucket`` with the key as ``s3:prefix``), so a client that stats the table root
  on AWS fails; none of the measured flows does. A missing key *under* ``prefix/`` is a 404, as it must be
  (Paimon probes ``snapshot/LATEST`` and the next snapshot's name).
* ``pyarrow_create_dir`` (write level only, off by default): pyarrow's
  ``S3FileSystem.create_dir(recursive=True)``, which pypaimon 2.1.0 calls before the first file of every
  new directory (``bucket-0/``, ``manifest/``, a new partition), first sends ``HeadBucket`` (authorized
  as ``s3:ListBucket`` with no ``s3:prefix``: indistinguishable from listing the whole bucket) and then
  PUTs an empty marker for every ancestor (``warehouse/``, ``warehouse/db.db/``, then the table's own).
  Denied, the write fails (pyarrow does not tolerate it). The option grants exactly those: an unconditioned
  ``s3:ListBucket`` on the bucket (the holder can list every key in it: names, sizes, partition values
  in paths; no object can be read) and ``s3:PutObject`` on the ancestor marker keys (it can overwrite
  those keys, which no Paimon reader reads). Our S3FileIO needs neither.

Invariant: every object resource is the table's own key, a key under ``prefix/``, or (with
``pyarrow_create_dir``) an ancestor's ``…/`` marker key; the bucket ARN appears only with the
``s3:prefix`` condition or (with ``pyarrow_create_dir``) for ``s3:ListBucket`` alone.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from paimon_meta.errors import ValidationError

AccessLevel = Literal["read", "write"]

POLICY_VERSION = "2012-10-17"
# STS AssumeRole: the plaintext of a session policy "can't exceed 2,048 characters" (STS also limits the
# packed binary form, reported as PackedPolicyTooLarge; a document under 2,048 plain characters of this
# shape stays well within it).
MAX_SESSION_POLICY_CHARS = 2048

READ_ACTIONS: tuple[str, ...] = ("s3:GetObject", "s3:ListBucket")
WRITE_ACTIONS: tuple[str, ...] = (
    *READ_ACTIONS,
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)

_SCHEMES = ("s3://", "s3a://")
_ARN = "arn:aws:s3:::"


def actions_for(level: AccessLevel) -> tuple[str, ...]:
    """The S3 actions a credential of ``level`` is granted (``ValidationError`` for another level)."""
    if level == "read":
        return READ_ACTIONS
    if level == "write":
        return WRITE_ACTIONS
    raise ValidationError(f"unknown access level {level!r} (read or write)", level=level)


def split_location(location: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of an ``s3://`` or ``s3a://`` table location, the prefix without a trailing
    slash. ``ValidationError`` naming the location for anything else: a local path or another scheme,
    no bucket, no key, an empty, ``.`` or ``..`` segment, IAM wildcards (``*``, ``?``) or a policy
    variable (``${``), which IAM would interpret instead of matching literally."""
    scheme = next((s for s in _SCHEMES if location.startswith(s)), None)
    if scheme is None:
        raise ValidationError(
            f"cannot vend S3 credentials for {location!r}: not an s3:// or s3a:// location",
            location=location,
        )
    bucket, _, key = location[len(scheme) :].partition("/")
    prefix = key.rstrip("/")
    if not bucket:
        raise ValidationError(f"no bucket in table location {location!r}", location=location)
    if not prefix:
        raise ValidationError(
            f"table location {location!r} names no key under bucket {bucket!r}: a policy for it would "
            "cover the whole bucket",
            location=location,
        )
    if any(part in ("", ".", "..") for part in prefix.split("/")):
        raise ValidationError(
            f"table location {location!r} has an empty, '.' or '..' path segment", location=location
        )
    if any(c in location for c in "*?") or "${" in location:
        raise ValidationError(
            f"table location {location!r} contains an IAM wildcard (* or ?) or policy variable (${{)",
            location=location,
        )
    return bucket, prefix


def ancestor_markers(prefix: str) -> list[str]:
    """The "directory" marker keys pyarrow's recursive ``create_dir`` PUTs above the table's own:
    ``a/b/t`` -> ``["a/", "a/b/"]``."""
    parts = prefix.split("/")[:-1]
    return ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]


def table_policy(location: str, level: AccessLevel, *, pyarrow_create_dir: bool = False) -> dict[str, Any]:
    """The IAM policy document (Version 2012-10-17) granting ``level`` on the table at ``location``
    (see the module docstring; ``pyarrow_create_dir`` widens a ``write`` document for pypaimon's pyarrow
    writers and changes nothing for ``read``)."""
    bucket, prefix = split_location(location)
    actions = actions_for(level)
    object_actions = [a for a in actions if a != "s3:ListBucket"]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "TableObjects",
            "Effect": "Allow",
            "Action": object_actions,
            "Resource": [f"{_ARN}{bucket}/{prefix}", f"{_ARN}{bucket}/{prefix}/*"],
        },
        {
            "Sid": "ListTable",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [f"{_ARN}{bucket}"],
            # Not "prefix*": that would let t1 list t10. "prefix/" is matched by "prefix/*" too; it is
            # spelled out because it is the listing every client makes of the table root.
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/", f"{prefix}/*"]}},
        },
    ]
    if pyarrow_create_dir and level == "write":
        head_bucket = {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"{_ARN}{bucket}"]}
        statements.append({"Sid": "PyarrowHeadBucket", **head_bucket})
        markers = ancestor_markers(prefix)
        if markers:
            statements.append(
                {
                    "Sid": "PyarrowParentMarkers",
                    "Effect": "Allow",
                    "Action": ["s3:PutObject"],
                    "Resource": [f"{_ARN}{bucket}/{m}" for m in markers],
                }
            )
    return {"Version": POLICY_VERSION, "Statement": statements}


def policy_json(policy: dict[str, Any]) -> str:
    """``policy`` as compact ASCII JSON for STS's ``Policy`` parameter. ``ValidationError`` naming the
    table's location when it exceeds the 2,048 characters STS accepts for a session policy."""
    text = json.dumps(policy, separators=(",", ":"))
    if len(text) > MAX_SESSION_POLICY_CHARS:
        location = _location_of(policy)
        raise ValidationError(
            f"the session policy for {location} is {len(text)} characters; STS accepts at most "
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
            if isinstance(resource, str) and resource.startswith(_ARN) and "/" in resource:
                return "s3://" + resource.removeprefix(_ARN)
    return None
