"""Merging manifest entries into the set of live files (Java's ``FileEntry.mergeEntries``).

Shared by scan planning and the commit coordinator's conflict check. Entries are applied in order
(base manifests, then delta manifests, each in file order):

* ADD of an identifier already present is an error (Java: ``checkState`` with the message below);
* DELETE of a present ADD removes both (each file is added once and deleted once);
* DELETE of an absent identifier is *kept* in the map: its ADD must be in manifests not merged yet,
  or the commit deletes a file that is not there, which the conflict check reports
  ("Trying to delete file ... which is not previously added.").
"""

from __future__ import annotations

from collections.abc import Iterable

from paimon_meta.errors import ValidationError
from paimon_meta.model.manifest import FileIdentifier, FileKind, ManifestEntry


def identifier_text(identifier: FileIdentifier) -> str:
    """Java's ``FileEntry.Identifier.toString()`` layout (the partition shown as hex bytes)."""
    embedded = "null" if identifier.embedded_index is None else f"[{identifier.embedded_index.hex()}]"
    external = "null" if identifier.external_path is None else identifier.external_path
    return (
        f"{{partition={identifier.partition.hex()}, bucket={identifier.bucket}, "
        f"level={identifier.level}, fileName={identifier.file_name}, "
        f"extraFiles=[{', '.join(identifier.extra_files)}], embeddedIndex={embedded}, "
        f"externalPath={external}}}"
    )


def merge_entries(
    entries: Iterable[ManifestEntry],
    into: dict[FileIdentifier, ManifestEntry] | None = None,
) -> dict[FileIdentifier, ManifestEntry]:
    """Apply ``entries`` in order onto ``into`` (a new dict if None) and return it.

    The result maps identifiers to the surviving ADD entries and to dangling DELETE entries (see
    :func:`dangling_deletes`). Raises ``ValidationError`` (fields ``identifier``, ``file_name``) for an
    ADD of a file that is already added, with Java's message.
    """
    merged: dict[FileIdentifier, ManifestEntry] = {} if into is None else into
    for entry in entries:
        ident = entry.identifier
        if entry.kind is FileKind.ADD:
            old = merged.get(ident)
            if old is not None:
                raise ValidationError(
                    f"Trying to add file {identifier_text(ident)} which is already in the the map: "
                    f"{old.kind.name} {old.file.file_name}",
                    identifier=ident,
                    file_name=entry.file.file_name,
                )
            merged[ident] = entry
        elif entry.kind is FileKind.DELETE:
            if ident in merged:
                del merged[ident]
            else:
                merged[ident] = entry
        else:  # pragma: no cover - FileKind has two members; a decoder never yields another
            raise ValidationError(f"unknown file kind {entry.kind!r}", file_name=entry.file.file_name)
    return merged


def live_files(merged: dict[FileIdentifier, ManifestEntry]) -> list[ManifestEntry]:
    """The ADD entries of a merge result, in insertion order."""
    return [e for e in merged.values() if e.kind is FileKind.ADD]


def dangling_deletes(merged: dict[FileIdentifier, ManifestEntry]) -> list[ManifestEntry]:
    """DELETE entries whose file was never added in what was merged: for a full merge (base +
    delta) each one is a commit deleting a file that is not live."""
    return [e for e in merged.values() if e.kind is FileKind.DELETE]


def delete_of_absent_message(entry: ManifestEntry, table_name: str) -> str:
    """Java's conflict-check message for a dangling DELETE (``ConflictDetection``)."""
    return (
        f"Trying to delete file {entry.file.file_name} for table {table_name} which is not previously added."
    )
