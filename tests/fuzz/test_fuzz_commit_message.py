"""CommitMessage bytes (every serializer version): framing-aware mutations and version confusion.

tests/serde/test_commit_message.py already fuzzes random bytes, truncations and single-byte flips of one
message per version; this adds what it does not: whole batches with several messages and files, edits of
the int32/int64 length, count and offset fields (extreme values, splices of other seeds), and bytes written
at one version read at another. Only CorruptMetadataError may come out, and whatever decodes must encode
again and round-trip.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimon_meta.errors import CorruptMetadataError, ValidationError
from paimon_meta.metastore.events import (
    MESSAGES_COMPRESS_ABOVE,
    CommitEventType,
    CommitRef,
    Prepared,
    StoredCommitEvent,
)
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.serde.commit_message import (
    SUPPORTED_READ_VERSIONS,
    SUPPORTED_WRITE_VERSIONS,
    deserialize_commit_message,
    deserialize_commit_messages,
    serialize_commit_messages,
)
from tests.fuzz.mutate import byte_mutations
from tests.fuzz.seeds import commit_message_bytes, fuzz_settings

PATH = "fuzz/commit-messages"


def _decode(data: bytes, version: int, *, batch: bool = True) -> None:
    try:
        if batch:
            msgs = deserialize_commit_messages(data, version, path=PATH)
        else:
            msgs = [deserialize_commit_message(data, version, path=PATH)]
    except CorruptMetadataError as e:
        assert e.path == PATH
        return
    if version not in SUPPORTED_WRITE_VERSIONS:
        return
    try:
        again = serialize_commit_messages(msgs, version)
    except ValidationError as e:  # decoded a value the same version cannot write back
        raise AssertionError(f"decoded at {version} but cannot be encoded at {version}: {e}") from e
    assert deserialize_commit_messages(again, version) == msgs


@fuzz_settings(2500)
@given(data=st.data())
def test_mutated_batches_only_raise_corrupt_metadata(data: st.DataObject) -> None:
    seeds = commit_message_bytes()
    version, valid = data.draw(st.sampled_from(seeds))
    mutated = data.draw(byte_mutations(valid, tuple(b for _, b in seeds)))
    _decode(mutated, version)


@fuzz_settings(800)
@given(data=st.data())
def test_mutated_single_messages_only_raise_corrupt_metadata(data: st.DataObject) -> None:
    version, valid = data.draw(st.sampled_from(commit_message_bytes()))
    # a batch is "int count" + messages: from offset 4 on, the first message and its successors
    mutated = data.draw(byte_mutations(valid[4:]))
    _decode(mutated, version, batch=False)


@pytest.mark.parametrize("written", sorted(SUPPORTED_WRITE_VERSIONS))
def test_bytes_read_at_every_other_version(written: int) -> None:
    """A prepared event names its serializer version; a wrong one must be detected, never misread into
    an exception of another kind (a misread that decodes must still be a consistent value)."""
    valid = dict(commit_message_bytes())[written]
    for read in sorted(SUPPORTED_READ_VERSIONS):
        _decode(valid, read)
        for cut in (1, 5, len(valid) // 2, len(valid) - 1):
            _decode(valid[:cut], read)


@fuzz_settings(600)
@given(data=st.data())
def test_mutated_compressed_prepared_bodies_only_raise_corrupt_metadata(data: st.DataObject) -> None:
    """The zstd-compressed body of a ``prepared`` event (what recovery decodes) under byte mutations and
    size claims: a decode either returns messages or raises CorruptMetadataError naming the commit."""
    version, valid = data.draw(st.sampled_from(commit_message_bytes()))
    if version not in SUPPORTED_WRITE_VERSIONS:
        return
    copies = MESSAGES_COMPRESS_ABOVE // len(valid) + 1  # big enough to be stored compressed
    body = serialize_commit_messages(deserialize_commit_messages(valid, version) * copies, version)
    ref = CommitRef.new(
        table_id=1,
        table_identifier="db.t",
        commit_user="u",
        commit_identifier=1,
        commit_kind=CommitKind.APPEND,
    )
    event = Prepared.of(ref=ref, messages=body, messages_version=version, payload={})
    assert event.messages_codec is not None
    mutated = data.draw(byte_mutations(event.messages))
    size = data.draw(st.sampled_from([len(body), len(body) - 1, len(body) + 1, 0, 1 << 30]))
    stored = StoredCommitEvent(
        event_id=1,
        ref=ref,
        event_type=CommitEventType.PREPARED,
        attempt=1,
        snapshot_id=None,
        payload={**event.typed_payload(), "messages_size": size},
        messages=mutated,
        messages_version=version,
        created_at=datetime.now(UTC),
        duration_ms=None,
    )
    try:
        stored.commit_messages()
    except CorruptMetadataError as e:
        assert str(ref.commit_id) in e.message
