"""FileIO chosen by URI scheme: ``/abs/path`` or ``file://`` -> :class:`LocalFileIO`; ``s3://`` or
``s3a://`` -> :class:`S3FileIO` (boto3, an optional dependency, is imported only when one is built)."""

from __future__ import annotations

from collections.abc import Mapping

from paimon_meta.errors import ValidationError
from paimon_meta.io.base import (
    Capabilities,
    CreatedAll,
    FileIO,
    FileStatus,
    join_uri,
    key_ancestors,
    keys_overlap,
    location_key,
    normalise_uri,
    resolve_location,
    scheme_of,
)
from paimon_meta.io.faults import FaultInjectingFileIO, FaultRule
from paimon_meta.io.local import LocalFileIO
from paimon_meta.io.s3 import S3FileIO

__all__ = [
    "Capabilities",
    "CreatedAll",
    "FaultInjectingFileIO",
    "FaultRule",
    "FileIO",
    "FileStatus",
    "LocalFileIO",
    "S3FileIO",
    "get_file_io",
    "join_uri",
    "key_ancestors",
    "keys_overlap",
    "location_key",
    "normalise_uri",
    "resolve_location",
    "scheme_of",
]


def get_file_io(uri: str, options: Mapping[str, str] | None = None) -> FileIO:
    """The FileIO for ``uri``'s scheme, configured from ``options`` (S3: the ``s3.*`` keys documented
    in :mod:`paimon_meta.io.s3`; other keys are ignored, so a catalog's whole option map may be
    passed). ``ValidationError`` for a relative path or an unsupported scheme."""
    scheme = scheme_of(uri)
    if scheme == "file":
        return LocalFileIO()
    if scheme in ("s3", "s3a"):
        return S3FileIO(uri, options)
    raise ValidationError(
        f"unsupported storage scheme {scheme!r} in {uri!r} (supported: file, s3, s3a)", uri=uri
    )
