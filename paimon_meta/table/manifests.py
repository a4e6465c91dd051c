"""Reading a table's manifest lists, manifests and index manifests, through caches.

Matches Java's ``ManifestList``/``ManifestFile``/``IndexManifestFile`` readers (``ManifestsReader``): a
snapshot's data files are its base manifest list plus its delta manifest list (in that order). Manifest
files are immutable, so they are cached by path. Scan planning (:mod:`paimon_meta.table.read.scan`), the
live-file check (:mod:`paimon_meta.table.live_files`) and writers restoring their buckets read through one
:class:`ManifestReader` per table.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from paimon_meta.errors import PathOutsideTableError
from paimon_meta.io.base import FileIO
from paimon_meta.model.manifest import IndexManifestEntry, ManifestEntry, ManifestFileMeta
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.avro import decode_index_manifest, decode_manifest, decode_manifest_list
from paimon_meta.table.cache import LruCache
from paimon_meta.table.containment import name_problem
from paimon_meta.table.paths import TablePaths

DEFAULT_MANIFEST_CACHE_ENTRIES = 200_000
DEFAULT_SCAN_PARALLELISM = 4
SCAN_MANIFEST_PARALLELISM = "scan.manifest.parallelism"  # Java's option key


def sniff_format(data: bytes, default: str) -> str:
    """The container format of a manifest by its magic bytes (tables may switch
    ``manifest.format`` over time, so the option only breaks ties)."""
    if data[:4] == b"Obj\x01":
        return "avro"
    if data[:3] == b"ORC":
        return "orc"
    return default


class ManifestReader:
    """Reads manifest lists and manifests of one table through bounded caches.

    Reusable by the commit coordinator (it reads the latest snapshot's base files the same way).
    """

    def __init__(
        self,
        file_io: FileIO,
        paths: TablePaths,
        *,
        manifest_format: str = "avro",
        parallelism: int = DEFAULT_SCAN_PARALLELISM,
        cache: LruCache[tuple[ManifestEntry, ...]] | None = None,
        list_cache: LruCache[tuple[ManifestFileMeta, ...]] | None = None,
    ) -> None:
        self.file_io = file_io
        self.paths = paths
        self.manifest_format = manifest_format
        self.parallelism = max(1, parallelism)
        self.cache = cache if cache is not None else LruCache(DEFAULT_MANIFEST_CACHE_ENTRIES)
        self.list_cache = list_cache if list_cache is not None else LruCache(DEFAULT_MANIFEST_CACHE_ENTRIES)

    def _manifest_path(self, name: str) -> str:
        """``manifest/<name>``; ``PathOutsideTableError`` unless ``name`` is a plain name: a snapshot or a
        manifest list naming ``../../<other table>/manifest/...`` must not read another table's files."""
        problem = name_problem(name)
        if problem is not None:
            raise PathOutsideTableError(
                f"manifest file {repr(name)[:300]} is not a plain file name ({problem})",
                path=str(name)[:1000],
                table=self.paths.root,
                field="manifest file",
            )
        return self.paths.manifest_path(name)

    def manifest_list(self, name: str) -> tuple[ManifestFileMeta, ...]:
        """The manifest metas of a manifest list (``CorruptMetadataError`` naming the file)."""
        path = self._manifest_path(name)

        def load() -> tuple[ManifestFileMeta, ...]:
            data = self.file_io.read(path)
            return tuple(decode_manifest_list(data, fmt=sniff_format(data, self.manifest_format), path=path))

        return self.list_cache.get_or_load(path, load)

    def manifest(self, name: str) -> tuple[ManifestEntry, ...]:
        """The entries of one manifest file (``CorruptMetadataError`` naming the file)."""
        path = self._manifest_path(name)

        def load() -> tuple[ManifestEntry, ...]:
            data = self.file_io.read(path)
            return tuple(decode_manifest(data, fmt=sniff_format(data, self.manifest_format), path=path))

        return self.cache.get_or_load(path, load)

    def manifests(self, metas: Sequence[ManifestFileMeta]) -> list[tuple[ManifestEntry, ...]]:
        """The entries of each manifest, in the order given; uncached files are fetched in parallel."""
        found = [self.cache.get(self._manifest_path(m.file_name)) for m in metas]
        missing = [i for i, entries in enumerate(found) if entries is None]
        if len(missing) <= 1 or self.parallelism == 1:
            loaded = [self.manifest(metas[i].file_name) for i in missing]
        else:
            with ThreadPoolExecutor(max_workers=min(self.parallelism, len(missing))) as pool:
                loaded = list(pool.map(lambda i: self.manifest(metas[i].file_name), missing))
        for i, entries in zip(missing, loaded):
            found[i] = entries
        return [entries for entries in found if entries is not None]

    def index_manifest(self, name: str) -> list[IndexManifestEntry]:
        """The entries of an index manifest (not cached: one small file per scan)."""
        path = self._manifest_path(name)
        data = self.file_io.read(path)
        return decode_index_manifest(data, fmt=sniff_format(data, self.manifest_format), path=path)

    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """Base then delta manifest metas of a snapshot (Java ``ManifestList.readDataManifests``)."""
        return [
            *self.manifest_list(snapshot.base_manifest_list),
            *self.manifest_list(snapshot.delta_manifest_list),
        ]

    def list_entries(self, list_name: str) -> list[ManifestEntry]:
        """Every entry of the manifests of one manifest list, in order (ADDs and DELETEs unmerged)."""
        entries: list[ManifestEntry] = []
        for group in self.manifests(self.manifest_list(list_name)):
            entries.extend(group)
        return entries

    def data_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """Every entry of a snapshot's base and delta manifests, in order (unmerged)."""
        entries: list[ManifestEntry] = []
        for group in self.manifests(self.data_manifests(snapshot)):
            entries.extend(group)
        return entries
