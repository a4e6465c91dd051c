"""Manifest files, manifest lists and index manifests: bytes <-> spec objects.

Writing produces Avro byte-compatible with Java Paimon (same schema text, field order, record names;
codec zstd by default). Reading accepts Avro written by Java (0.9 onwards) or pypaimon, and, with
``fmt="orc"``, the ORC manifests of tables created with ``manifest.format=orc``. Codecs are pure:
``path`` only names the file in errors, which are CorruptMetadataError for undecodable bytes and
ValidationError for spec objects that cannot be encoded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.model.manifest import IndexManifestEntry, ManifestEntry, ManifestFileMeta
from paimon_meta.serde import avro_container as container
from paimon_meta.serde import manifest_records as records
from paimon_meta.serde import manifest_schemas as schemas
from paimon_meta.serde.orc import read_records as read_orc_records

__all__ = [
    "decode_index_manifest",
    "decode_manifest",
    "decode_manifest_list",
    "encode_index_manifest",
    "encode_manifest",
    "encode_manifest_list",
]


class _Kind:
    """One manifest kind: its Java schema (text and parsed once, both immutable) and converters."""

    __slots__ = ("encoded", "from_record", "name", "parsed", "schema", "shape", "text", "to_record")

    def __init__(
        self,
        name: str,
        schema: dict[str, Any],
        shape: schemas.Shape,
        to_record: Callable[[Any], dict[str, Any]],
        from_record: Callable[[dict[str, Any]], Any],
    ) -> None:
        self.name = name
        self.schema = schema
        self.text = schemas.schema_text(schema)
        self.parsed = schemas.parse_for_codec(schema)
        self.shape = shape
        self.to_record = to_record
        self.from_record = from_record
        # The items are frozen dataclasses of immutable values: each encodes to fixed bytes, so the
        # commit path's re-encodings (base manifest lists, manifest merges) are copies.
        self.encoded = container.EncodedRecords()


_MANIFEST = _Kind(
    "manifest file",
    schemas.MANIFEST_ENTRY_SCHEMA,
    schemas.MANIFEST_ENTRY_SHAPE,
    records.entry_to_record,
    records.entry_from_record,
)
_MANIFEST_LIST = _Kind(
    "manifest list",
    schemas.MANIFEST_FILE_META_SCHEMA,
    schemas.MANIFEST_FILE_META_SHAPE,
    records.file_meta_to_record,
    records.file_meta_from_record,
)
_INDEX_MANIFEST = _Kind(
    "index manifest",
    schemas.INDEX_MANIFEST_ENTRY_SCHEMA,
    schemas.INDEX_MANIFEST_ENTRY_SHAPE,
    records.index_entry_to_record,
    records.index_entry_from_record,
)


def _encode(kind: _Kind, items: Sequence[Any], compression: str) -> bytes:
    codec = container.avro_codec_name(compression)
    try:
        return container.write_container(
            kind.text, kind.parsed, items, kind.to_record, codec=codec, encoded=kind.encoded
        )
    except ValidationError as e:
        raise ValidationError(f"{kind.name}: {e.message}", **e.fields) from e


def _decode(kind: _Kind, data: bytes, fmt: str, path: str | None) -> list[Any]:
    fmt = fmt.lower()
    if not isinstance(data, bytes):  # bytearray / memoryview from a caller's buffer
        data = bytes(data)
    if fmt == "orc":
        rows = read_orc_records(data, kind.shape, what=kind.name, path=path)
    elif fmt == "avro":
        rows = _avro_records(kind, data, path)
    else:
        raise ValidationError(f"unsupported manifest format {fmt!r} (avro or orc)", option="manifest.format")
    out: list[Any] = []
    convert = kind.from_record
    try:
        for row in rows:
            out.append(convert(row))
    except CorruptMetadataError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CorruptMetadataError(f"{kind.name} record {len(out)} is invalid: {e!r}", path=path) from e
    return out


def _avro_records(kind: _Kind, data: bytes, path: str | None) -> Any:
    header = container.read_header(data, path=path)
    if header.schema_text == kind.text:
        parsed = kind.parsed  # our own files (and Java's of the same version): skip re-parsing
    else:
        try:
            schemas.check_shape(schemas.avro_shape(header.schema), kind.shape, "record")
            parsed = schemas.parse_for_codec(header.schema)
        except schemas.ShapeError as e:
            raise CorruptMetadataError(f"not a {kind.name}: {e}", path=path) from e
        except Exception as e:  # fastavro's schema errors have no common base
            raise CorruptMetadataError(f"invalid Avro schema in {kind.name}: {e!r}", path=path) from e
    return container.iter_records(data, parsed, header, path=path)


def encode_manifest(entries: Sequence[ManifestEntry], *, compression: str = "zstd") -> bytes:
    """A manifest file (Avro) holding ``entries`` in order."""
    return _encode(_MANIFEST, entries, compression)


def decode_manifest(data: bytes, *, fmt: str = "avro", path: str | None = None) -> list[ManifestEntry]:
    """The entries of a manifest file (``fmt`` is the table's ``manifest.format``: avro or orc)."""
    return _decode(_MANIFEST, data, fmt, path)


def encode_manifest_list(metas: Sequence[ManifestFileMeta], *, compression: str = "zstd") -> bytes:
    """A manifest list (Avro) naming ``metas`` in order."""
    return _encode(_MANIFEST_LIST, metas, compression)


def decode_manifest_list(
    data: bytes, *, fmt: str = "avro", path: str | None = None
) -> list[ManifestFileMeta]:
    """The manifest file metas of a manifest list."""
    return _decode(_MANIFEST_LIST, data, fmt, path)


def encode_index_manifest(entries: Sequence[IndexManifestEntry], *, compression: str = "zstd") -> bytes:
    """An index manifest (Avro) holding ``entries`` in order."""
    return _encode(_INDEX_MANIFEST, entries, compression)


def decode_index_manifest(
    data: bytes, *, fmt: str = "avro", path: str | None = None
) -> list[IndexManifestEntry]:
    """The entries of an index manifest."""
    return _decode(_INDEX_MANIFEST, data, fmt, path)
