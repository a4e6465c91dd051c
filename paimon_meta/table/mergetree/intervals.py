"""Java's ``IntervalPartition``: a bucket's files cut into *sections* of overlapping key ranges.

Files are sorted by (min key, max key); a new section starts at a file whose min key is above the max
key of every file before it (ranges that touch, ``min == max`` of an earlier file, stay together: they
may share that key). Invariant: **no key is in two sections**, so a bucket reads as the concatenation
of its sections, each merged on its own (``MergeTreeReaders.readerForMergeTree``), and a section of one
file needs no merge at all (a file holds each key at most once: writers and compaction merge per key).

Keys are compared as the decoded trimmed primary key (``model.binary_row``): Python's ordering of the
decoded values is the key comparator's for the key types Paimon allows (numbers, strings by code point,
which is UTF-8 byte order, bytes, dates, decimals). Keys that cannot be decoded or compared give no
sections (None): the caller then treats the bucket as one section, which is always correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from paimon_meta.errors import PaimonMetaError
from paimon_meta.model.binary_row import deserialize_row
from paimon_meta.model.manifest import DataFileMeta
from paimon_meta.model.types import DataType


def key_sections(
    files: Sequence[DataFileMeta], key_types: Sequence[DataType]
) -> list[list[DataFileMeta]] | None:
    """The files cut into sections in key order (see the module docstring), or None when some file's
    key range cannot be decoded or compared."""
    try:
        keyed = sorted(
            (
                (deserialize_row(f.min_key, key_types), deserialize_row(f.max_key, key_types), i, f)
                for i, f in enumerate(files)
            ),
            key=lambda t: (t[0], t[1], t[2]),
        )
        sections: list[list[DataFileMeta]] = []
        bound: tuple[Any, ...] | None = None
        for low, high, _, f in keyed:
            if not sections or (bound is not None and low > bound):
                sections.append([f])
                bound = high
                continue
            sections[-1].append(f)
            bound = high if bound is None or high > bound else bound
    except (PaimonMetaError, TypeError, ValueError):
        return None
    return sections
