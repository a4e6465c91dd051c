"""Manifests, manifest lists and index manifests (Avro containers, every codec, golden Java files when
present): byte-level and container-aware mutations (block counts and sizes, codec, writer schema).

tests/serde/test_manifest_corrupt.py covers random garbage, truncations and single flips of golden files;
this adds multi-edit mutations, edits aimed at the varint block framing and the header (codec swapped,
schema edited structurally), and decoding a file as the wrong kind. Only CorruptMetadataError (naming the
file) may come out; whatever decodes must encode again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from paimon_meta.errors import CorruptMetadataError
from paimon_meta.serde.avro import (
    decode_index_manifest,
    decode_manifest,
    decode_manifest_list,
    encode_index_manifest,
    encode_manifest,
    encode_manifest_list,
)
from tests.fuzz.mutate import avro_mutations, byte_mutations
from tests.fuzz.seeds import avro_seeds, fuzz_settings

PATH = "fuzz/manifest-x"

CODECS: dict[str, tuple[Callable[..., list[Any]], Callable[..., bytes]]] = {
    "manifest": (decode_manifest, encode_manifest),
    "manifest_list": (decode_manifest_list, encode_manifest_list),
    "index_manifest": (decode_index_manifest, encode_index_manifest),
}


def _decode(kind: str, data: bytes) -> None:
    decode, encode = CODECS[kind]
    try:
        items = decode(data, fmt="avro", path=PATH)
    except CorruptMetadataError as e:
        assert PATH in str(e)
        return
    again = encode(items, compression="null")
    assert decode(again, fmt="avro") == items


@fuzz_settings(1500)
@given(data=st.data())
def test_mutated_bytes_only_raise_corrupt_metadata(data: st.DataObject) -> None:
    seeds = avro_seeds()
    kind, valid = data.draw(st.sampled_from(seeds))
    mutated = data.draw(byte_mutations(valid, tuple(b for _, b in seeds)))
    _decode(data.draw(st.sampled_from([kind, kind, *CODECS])), mutated)


@fuzz_settings(1500)
@given(data=st.data())
def test_container_mutations_only_raise_corrupt_metadata(data: st.DataObject) -> None:
    kind, valid = data.draw(st.sampled_from(avro_seeds()))
    mutated = data.draw(avro_mutations(valid))
    _decode(data.draw(st.sampled_from([kind, kind, *CODECS])), mutated)
