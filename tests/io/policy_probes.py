"""What the policy tests do with a credential: the S3 calls of a table's readers and writers, made one
by one on the table itself and on its neighbours, and what each must answer.

A *target* is a table-like prefix: the credential's own table, a sibling (``t2``), a table whose name
merely starts with the own table's (``t10``), the same path in another bucket, the database and the
warehouse "directories". Every target holds ``schema/schema-0`` (seeded by :func:`seed`). :func:`probe`
runs every operation of :data:`OPERATIONS` on a target and reports, per operation, whether the store
allowed it (a 404 for a missing key counts as allowed: the caller was allowed to learn that); any answer
but success, 403 or that 404 is raised, so a broken setup cannot pass as "denied".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from tests.io.iam_moto import IamMoto

WAREHOUSE = "warehouse"
DATABASE = f"{WAREHOUSE}/db.db"
TABLE = f"{DATABASE}/t1"
SEEDED = "schema/schema-0"

TargetName = Literal["own", "sibling", "name-prefix", "other-bucket", "database", "warehouse"]


@dataclass(frozen=True)
class Target:
    """A prefix in a bucket (no trailing slash)."""

    bucket: str
    prefix: str

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class World:
    """Two buckets with the same layout; the credentials under test are for ``s3://bucket/TABLE``."""

    bucket: str
    other_bucket: str

    @property
    def table(self) -> Target:
        return Target(self.bucket, TABLE)

    def targets(self) -> dict[TargetName, Target]:
        return {
            "own": Target(self.bucket, TABLE),
            "sibling": Target(self.bucket, f"{DATABASE}/t2"),
            "name-prefix": Target(self.bucket, f"{DATABASE}/t10"),
            "other-bucket": Target(self.other_bucket, TABLE),
            "database": Target(self.bucket, DATABASE),
            "warehouse": Target(self.bucket, WAREHOUSE),
        }


def seed(moto: IamMoto, world: World) -> None:
    """Create both buckets and ``schema/schema-0`` in every target (with the admin's credentials)."""
    admin = moto.s3()
    for bucket in (world.bucket, world.other_bucket):
        admin.create_bucket(Bucket=bucket)
    for target in world.targets().values():
        admin.put_object(Bucket=target.bucket, Key=target.key(SEEDED), Body=b'{"id": 0}')
    # The same layout in the other bucket, so a denial there is not a missing key.
    for name in ("t2", "t10"):
        admin.put_object(Bucket=world.other_bucket, Key=f"{DATABASE}/{name}/{SEEDED}", Body=b"{}")


READS = ("get", "head", "head-missing", "list", "list-recursive")
WRITES = (
    "put",
    "put-if-absent",
    "delete",
    "delete-many",
    "multipart-upload",
    "list-parts",
    "abort-upload",
    "copy-in",
    "copy-out",
)
OPERATIONS = READS + WRITES


class _Refused(Exception):
    """A refusal reported inside a successful answer (DeleteObjects' per-key errors)."""


def _denied(e: Exception) -> bool:
    from botocore.exceptions import ClientError

    if isinstance(e, _Refused):
        return True
    if not isinstance(e, ClientError):
        return False
    status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status == 403 or e.response.get("Error", {}).get("Code") == "AccessDenied"


def _not_found(e: Exception) -> bool:
    from botocore.exceptions import ClientError

    if not isinstance(e, ClientError):
        return False
    return e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404


def _allowed(call: Callable[[], Any], *, missing_ok: bool = False) -> bool:
    try:
        call()
    except Exception as e:
        if _denied(e):
            return False
        if missing_ok and _not_found(e):
            return True
        raise
    return True


def probe(moto: IamMoto, s3: S3Client, world: World, target: Target) -> dict[str, bool]:
    """Every operation of :data:`OPERATIONS` on ``target`` with the client ``s3``: allowed or not."""
    admin = moto.s3()
    b, own = target.bucket, world.table
    fresh = uuid.uuid4().hex[:8]

    def victim() -> str:  # an object for the credential to delete, created by the admin
        key = target.key(f"victim-{uuid.uuid4().hex[:8]}")
        admin.put_object(Bucket=b, Key=key, Body=b"v")
        return key

    def admin_upload() -> tuple[str, str]:
        key = target.key(f"upload-{uuid.uuid4().hex[:8]}")
        return key, admin.create_multipart_upload(Bucket=b, Key=key)["UploadId"]

    def multipart_upload() -> None:
        key = target.key(f"mp-{fresh}")
        upload = s3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
        etag = s3.upload_part(Bucket=b, Key=key, UploadId=upload, PartNumber=1, Body=b"part")["ETag"]
        parts = {"Parts": [{"ETag": etag, "PartNumber": 1}]}
        s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=upload, MultipartUpload=parts)  # type: ignore[arg-type]

    def list_parts() -> None:
        key, upload = admin_upload()
        try:
            s3.list_parts(Bucket=b, Key=key, UploadId=upload)
        finally:
            admin.abort_multipart_upload(Bucket=b, Key=key, UploadId=upload)

    def abort_upload() -> None:
        key, upload = admin_upload()
        try:
            s3.abort_multipart_upload(Bucket=b, Key=key, UploadId=upload)
        except Exception:
            admin.abort_multipart_upload(Bucket=b, Key=key, UploadId=upload)
            raise

    def delete_many() -> None:
        answer = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": victim()}]})
        # AWS reports a refused key in the answer's Errors (HTTP 200); the test server refuses the request.
        if any(e.get("Code") == "AccessDenied" for e in answer.get("Errors", [])):
            raise _Refused(str(answer["Errors"]))

    def get() -> bytes:
        return s3.get_object(Bucket=b, Key=target.key(SEEDED))["Body"].read()

    source = {"Bucket": b, "Key": target.key(SEEDED)}
    results = {
        "get": _allowed(get),
        "head": _allowed(lambda: s3.head_object(Bucket=b, Key=target.key(SEEDED))),
        "head-missing": _allowed(
            lambda: s3.head_object(Bucket=b, Key=target.key("snapshot/LATEST")), missing_ok=True
        ),
        "list": _allowed(lambda: s3.list_objects_v2(Bucket=b, Prefix=target.key(""), Delimiter="/")),
        "list-recursive": _allowed(lambda: s3.list_objects_v2(Bucket=b, Prefix=target.key(""))),
        "put": _allowed(lambda: s3.put_object(Bucket=b, Key=target.key(f"put-{fresh}"), Body=b"x")),
        "put-if-absent": _allowed(
            lambda: s3.put_object(Bucket=b, Key=target.key(f"cas-{fresh}"), Body=b"x", IfNoneMatch="*")
        ),
        "delete": _allowed(lambda: s3.delete_object(Bucket=b, Key=victim())),
        "delete-many": _allowed(delete_many),
        "multipart-upload": _allowed(multipart_upload),
        "list-parts": _allowed(list_parts),
        "abort-upload": _allowed(abort_upload),
        # into the target from the own table; from the target into the own table (reading by copy)
        "copy-in": _allowed(
            lambda: s3.copy_object(
                Bucket=b,
                Key=target.key(f"copy-{fresh}"),
                CopySource={"Bucket": own.bucket, "Key": own.key(SEEDED)},
            )
        ),
        "copy-out": _allowed(
            lambda: s3.copy_object(Bucket=own.bucket, Key=own.key(f"copied-{fresh}"), CopySource=source)  # type: ignore[arg-type]
        ),
    }
    assert set(results) == set(OPERATIONS)
    return results


def expected(level: str, target: TargetName, operation: str, *, pyarrow_create_dir: bool = False) -> bool:
    """What a ``level`` credential for the own table may do (the policy module's contract)."""
    if operation == "copy-out":  # needs GetObject on the target and PutObject on the own table
        return level == "write" and target == "own"
    if target == "own":
        return operation in READS or level == "write"
    if pyarrow_create_dir and level == "write" and target != "other-bucket":
        # the documented cost: an unconditioned s3:ListBucket (pyarrow's HeadBucket) lists anything
        return operation in ("list", "list-recursive")
    return False


def violations(
    results: Mapping[TargetName, Mapping[str, bool]], level: str, *, pyarrow_create_dir: bool = False
) -> list[str]:
    """Every (target, operation) whose outcome differs from :func:`expected`, readably."""
    found = []
    for target, outcomes in results.items():
        for operation, allowed in outcomes.items():
            want = expected(level, target, operation, pyarrow_create_dir=pyarrow_create_dir)
            if allowed != want:
                found.append(
                    f"{target}: {operation} {'allowed' if allowed else 'denied'}, expected the opposite"
                )
    return found


def probe_all(
    moto: IamMoto, s3: S3Client, world: World, only: tuple[TargetName, ...] | None = None
) -> dict[TargetName, dict[str, bool]]:
    """:func:`probe` on every target of the world (``only`` those, if given)."""
    return {
        name: probe(moto, s3, world, target)
        for name, target in world.targets().items()
        if only is None or name in only
    }
