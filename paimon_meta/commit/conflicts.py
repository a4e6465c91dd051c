"""Conflict detection, in Java's order (``ConflictDetection.checkConflicts``):

1. the total bucket count of a partition is unchanged;
2. the delta merges cleanly on its own, then base + delta merge cleanly (no file added twice);
3. no DELETE survives the merge (a deleted file must be live in the base);
4. primary-key tables: within one (partition, bucket), files of level >= 1 sorted by min key have
   non-overlapping key ranges (the LSM invariant that merge-on-read relies on).

Every failure raises :class:`CommitConflictError`: the commit did not land, and retrying against a
newer snapshot (or giving up) is safe.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise
from typing import Any

from paimon_meta.errors import CommitConflictError
from paimon_meta.model.manifest import FileIdentifier, FileKind, ManifestEntry

KeyDecoder = Callable[[bytes], tuple[Any, ...]]


def merge_for_commit(entries: Iterable[ManifestEntry]) -> dict[FileIdentifier, ManifestEntry]:
    """Java ``FileEntry.mergeEntries``: ADD then DELETE of one identifier cancel; a DELETE of an absent
    file is kept (so the caller can reject it); an ADD of a present identifier is a conflict."""
    merged: dict[FileIdentifier, ManifestEntry] = {}
    for e in entries:
        ident = e.identifier
        if e.kind is FileKind.ADD:
            if ident in merged:
                raise CommitConflictError(
                    f"Trying to add file {e.file.file_name} which is already added.",
                    reason="file_already_added",
                    file=e.file.file_name,
                )
            merged[ident] = e
        elif ident in merged:
            del merged[ident]
        else:
            merged[ident] = e
    return merged


def check_total_buckets(base: Sequence[ManifestEntry], delta: Sequence[ManifestEntry]) -> None:
    """A partition's bucket count may only change by rewriting it (OVERWRITE of the whole partition)."""
    known: dict[bytes, int] = {}
    for e in base:
        known.setdefault(e.partition, e.total_buckets)
    for e in delta:
        expected = known.get(e.partition)
        if expected is not None and expected != e.total_buckets and expected > 0 and e.total_buckets > 0:
            raise CommitConflictError(
                f"Total buckets of partition changed from {expected} to {e.total_buckets} "
                f"(file {e.file.file_name}); rescale with an OVERWRITE of the whole partition.",
                reason="bucket_count_changed",
                file=e.file.file_name,
            )


def check_conflicts(
    base: Sequence[ManifestEntry],
    delta: Sequence[ManifestEntry],
    *,
    key_decoder: KeyDecoder | None,
) -> None:
    """Raise CommitConflictError if ``delta`` cannot be applied on top of the live ``base`` entries.

    ``key_decoder`` (primary-key tables only) turns a serialized min/max key into a comparable tuple.
    """
    check_total_buckets(base, delta)
    merge_for_commit(delta)
    merged = merge_for_commit([*base, *delta])
    for e in merged.values():
        if e.kind is FileKind.DELETE:
            raise CommitConflictError(
                f"File deletion conflicts detected! Give up committing. Trying to delete file "
                f"{e.file.file_name} which is not previously added.",
                reason="delete_of_absent_file",
                file=e.file.file_name,
            )
    if key_decoder is not None:
        check_lsm(merged.values(), key_decoder)


def check_lsm(entries: Iterable[ManifestEntry], key_decoder: KeyDecoder) -> None:
    """Files of level >= 1 within one (partition, bucket) must not overlap in key range."""
    groups: dict[tuple[bytes, int, int], list[tuple[tuple[Any, ...], tuple[Any, ...], str]]] = defaultdict(
        list
    )
    for e in entries:
        if e.file.level >= 1:
            groups[(e.partition, e.bucket, e.file.level)].append(
                (key_decoder(e.file.min_key), key_decoder(e.file.max_key), e.file.file_name)
            )
    for (_, bucket, level), files in groups.items():
        files.sort(key=lambda f: f[0])
        for (_, a_max, a_name), (b_min, _, b_name) in pairwise(files):
            if a_max >= b_min:
                raise CommitConflictError(
                    "LSM conflicts detected! Give up committing. "
                    f"Files {a_name} and {b_name} overlap in key range at level {level} of bucket {bucket}.",
                    reason="lsm_key_range_overlap",
                    file=b_name,
                )
