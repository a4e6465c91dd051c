"""Damaged or foreign bytes given to the manifest decoders raise CorruptMetadataError naming the file,
never another exception type and never a silently wrong answer where the damage is detectable."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as pa_orc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.model.manifest import (
    EMPTY_STATS,
    DataFileMeta,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
)
from paimon_meta.serde import avro_container
from paimon_meta.serde.avro import (
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_manifest,
    encode_manifest_list,
)
from paimon_meta.serde.manifest_records import entry_to_record
from paimon_meta.serde.manifest_schemas import MANIFEST_ENTRY_SCHEMA
from tests.fixtures.golden import golden_table_path

Decoder = Callable[..., list[Any]]
PATH = "warehouse/db.db/t/manifest/manifest-broken-0"


def _golden_files() -> list[tuple[Path, str, Decoder]]:
    """One golden manifest, manifest list and index manifest per manifest format."""
    out: list[tuple[Path, str, Decoder]] = []
    for fmt, name, manifest_format in (
        ("parquet", "pk_table_with_alter_table", "avro"),
        ("orc", "pk_dv_index_with_commit_message_version10", "orc"),
    ):
        manifests = golden_table_path(fmt, name) / "manifest"
        for pattern, decoder in (
            ("manifest-[0-9a-f]*", decode_manifest),
            ("manifest-list-*", decode_manifest_list),
            ("index-manifest-*", decode_index_manifest),
        ):
            # the largest file of each kind, so that cuts land inside records
            path = max(manifests.glob(pattern), key=lambda p: p.stat().st_size)
            out.append((path, manifest_format, decoder))
    return out


def _raises_corrupt(decoder: Decoder, data: bytes, fmt: str = "avro") -> CorruptMetadataError:
    with pytest.raises(CorruptMetadataError) as info:
        decoder(data, fmt=fmt, path=PATH)
    assert info.value.path == PATH and PATH in str(info.value)
    return info.value


def _corrupt_or_list(decoder: Decoder, data: bytes, fmt: str) -> list[Any] | None:
    """Decoding damaged bytes may only raise CorruptMetadataError (or, if the damage is invisible to
    the format, return entries)."""
    try:
        return decoder(data, fmt=fmt, path=PATH)
    except CorruptMetadataError as e:
        assert PATH in str(e)
        return None


def test_half_of_each_golden_file_is_corrupt() -> None:
    for path, fmt, decoder in _golden_files():
        data = path.read_bytes()
        _raises_corrupt(decoder, data[: len(data) // 2], fmt)


def test_every_truncation_is_detected_or_a_block_prefix() -> None:
    """Avro cannot tell a file cut exactly at a block boundary from a shorter file; every other cut
    must be detected. ORC's footer is at the end, so every cut is."""
    for path, fmt, decoder in _golden_files():
        data = path.read_bytes()
        full = decoder(data, fmt=fmt)
        for cut in range(0, len(data) - 1, max(1, len(data) // 97)):
            got = _corrupt_or_list(decoder, data[:cut], fmt)
            if got is not None:
                assert fmt == "avro" and got == full[: len(got)], (path.name, cut)


def test_flipped_bytes_never_escape_as_other_errors() -> None:
    for path, fmt, decoder in _golden_files():
        data = path.read_bytes()
        for pos in range(0, len(data), max(1, len(data) // 61)):
            damaged = bytearray(data)
            damaged[pos] ^= 0xFF
            _corrupt_or_list(decoder, bytes(damaged), fmt)


def test_damaged_magic_and_sync_markers_are_detected() -> None:
    meta = ManifestFileMeta("m", 1, 1, 0, EMPTY_STATS, 0)
    data = encode_manifest_list([meta], compression="null")
    _raises_corrupt(decode_manifest_list, b"Obj\x02" + data[4:])
    damaged = bytearray(data)
    damaged[-1] ^= 0x01  # the block's trailing sync marker
    assert "sync" in str(_raises_corrupt(decode_manifest_list, bytes(damaged)))


@settings(max_examples=150, deadline=None)
@given(garbage=st.binary(max_size=300))
def test_random_garbage_is_corrupt(garbage: bytes) -> None:
    for decoder in (decode_manifest, decode_manifest_list, decode_index_manifest):
        _raises_corrupt(decoder, garbage, "avro")
        _raises_corrupt(decoder, garbage, "orc")


@settings(max_examples=150, deadline=None)
@given(tail=st.binary(min_size=1, max_size=300), codec=st.sampled_from(["zstd", "snappy", "deflate", "null"]))
def test_valid_header_then_garbage_is_corrupt(tail: bytes, codec: str) -> None:
    data = encode_manifest_list([], compression=codec)
    _raises_corrupt(decode_manifest_list, data + tail)


def test_wrong_kind_of_file_is_corrupt() -> None:
    for path, fmt, _ in _golden_files():
        data = path.read_bytes()
        wrong = (
            decode_manifest
            if path.name.startswith(("manifest-list", "index-manifest"))
            else decode_manifest_list
        )
        err = _raises_corrupt(wrong, data, fmt)
        assert "missing" in str(err)
    avro_file = encode_manifest([])
    _raises_corrupt(decode_manifest, avro_file, "orc")
    orc_file = _golden_files()[3][0].read_bytes()
    _raises_corrupt(decode_manifest, orc_file, "avro")


def test_unknown_codec_is_corrupt() -> None:
    data = encode_manifest_list([], compression="null")
    _raises_corrupt(decode_manifest_list, data.replace(b"\x08null", b"\x08lz4x"))


def test_snappy_crc_mismatch_is_corrupt() -> None:
    meta = ManifestFileMeta("m", 1, 1, 0, EMPTY_STATS, 0)
    data = bytearray(encode_manifest_list([meta], compression="snappy"))
    data[-17] ^= 0x01  # last byte of the CRC, just before the 16-byte sync marker
    assert "CRC" in str(_raises_corrupt(decode_manifest_list, bytes(data)))


# ---- wrong schemas and wrong values ---------------------------------------------------------------------

_FILE = DataFileMeta("f", 1, 1, b"", b"", EMPTY_STATS, EMPTY_STATS, 0, 0, 0, 0)
_ENTRY = ManifestEntry(FileKind.ADD, b"p", 0, 1, _FILE)


def _write(schema: Any, records: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec="null", disable_tuple_notation=True)
    return buf.getvalue()


def _file_field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    fields: list[dict[str, Any]] = schema["fields"][5]["type"]["fields"]
    return next(f for f in fields if f["name"] == name)


def test_field_of_the_wrong_type_is_corrupt() -> None:
    schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    _file_field(schema, "_FILE_SIZE")["type"] = "string"
    record = entry_to_record(_ENTRY)
    record["_FILE"]["_FILE_SIZE"] = "one"
    err = _raises_corrupt(decode_manifest, _write(schema, [record]))
    assert "_FILE._FILE_SIZE" in str(err) and "string" in str(err)


def test_nullable_required_field_is_corrupt() -> None:
    schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    schema["fields"][3]["type"] = ["null", "int"]  # _BUCKET
    record = {**entry_to_record(_ENTRY), "_BUCKET": None}
    assert "_BUCKET" in str(_raises_corrupt(decode_manifest, _write(schema, [record])))


def test_missing_required_field_is_corrupt() -> None:
    schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    file_fields = schema["fields"][5]["type"]["fields"]
    file_fields[:] = [f for f in file_fields if f["name"] != "_LEVEL"]
    record = entry_to_record(_ENTRY)
    del record["_FILE"]["_LEVEL"]
    assert "_LEVEL" in str(_raises_corrupt(decode_manifest, _write(schema, [record])))


def test_null_record_in_nullable_writer_schema_is_corrupt() -> None:
    """Paimon 0.9 declared the top-level record and _FILE nullable; a null there cannot be an entry."""
    schema = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    schema["fields"][5]["type"] = ["null", schema["fields"][5]["type"]]
    _raises_corrupt(decode_manifest, _write(schema, [{**entry_to_record(_ENTRY), "_FILE": None}]))
    _raises_corrupt(decode_manifest, _write(["null", MANIFEST_ENTRY_SCHEMA], [None]))  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("field", "value", "message"), [("_KIND", 7, "FileKind"), ("_VERSION", 1, "_VERSION")]
)
def test_invalid_values_are_corrupt(field: str, value: int, message: str) -> None:
    record = {**entry_to_record(_ENTRY), field: value}
    assert message in str(_raises_corrupt(decode_manifest, _write(MANIFEST_ENTRY_SCHEMA, [record])))


def test_orc_null_in_required_column_is_corrupt() -> None:
    _, fmt, _ = _golden_files()[4]
    path = _golden_files()[4][0]
    assert fmt == "orc" and path.name.startswith("manifest-list")
    table = pa_orc.ORCFile(str(path)).read()
    names = table.column("_FILE_NAME").to_pylist()
    names[0] = None
    table = table.set_column(table.schema.get_field_index("_FILE_NAME"), "_FILE_NAME", pa.array(names))
    buf = io.BytesIO()
    pa_orc.write_table(table, buf)
    assert "_FILE_NAME is null" in str(_raises_corrupt(decode_manifest_list, buf.getvalue(), "orc"))
    without = table.drop_columns(["_SCHEMA_ID"])
    buf = io.BytesIO()
    pa_orc.write_table(without, buf)
    assert "_SCHEMA_ID" in str(_raises_corrupt(decode_manifest_list, buf.getvalue(), "orc"))


def test_header_without_schema_is_corrupt() -> None:
    header = avro_container.MAGIC + b"\x02" + b"\x14avro.codec" + b"\x08null" + b"\x00" + bytes(16)
    _raises_corrupt(decode_manifest, header)
