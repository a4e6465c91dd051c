"""A FileIO on storage credentials the commit service vends for one table (Paimon's data token).

When the service's ``/v1/config`` says ``data-token.enabled=true``, the client holds no storage keys:
it asks ``GET .../token`` for credentials scoped to the table and builds its S3 FileIO from them, over
its own options (the vended ones win, as in pypaimon and Java). :class:`VendedFileIO` fetches them on
first use and again before they expire (when less than :data:`REFRESH_BEFORE_SECONDS`, or half of their
lifetime if that is shorter, is left), and once more if storage answers that they expired anyway
(a clock off by more than the margin). Safe to share between threads: one fetch at a time.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from paimon_meta.errors import FileIOError
from paimon_meta.io import Capabilities, CreatedAll, FileIO, FileStatus, get_file_io

#: Fetch again when this little is left (Java and pypaimon use one hour too).
REFRESH_BEFORE_SECONDS = 3600.0
#: S3 error codes of credentials that expired or were refused as stale: fetch again and retry once.
EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "TokenRefreshRequired", "InvalidToken"})

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class DataToken:
    """Vended storage options and when they expire (epoch milliseconds), as ``GET .../token`` answers.
    The options hold secrets: ``repr`` shows only their keys."""

    options: Mapping[str, str] = field(repr=False)
    expires_at_millis: int
    fetched_at: float = field(default_factory=time.time)

    @property
    def keys(self) -> list[str]:
        return sorted(self.options)

    def stale(self, now: float | None = None) -> bool:
        """Whether to fetch again: less than an hour (or half the lifetime) left."""
        now = time.time() if now is None else now
        expires = self.expires_at_millis / 1000
        margin = min(REFRESH_BEFORE_SECONDS, max(0.0, expires - self.fetched_at) / 2)
        return expires - now < margin


class VendedFileIO(FileIO):
    """The FileIO of one table's ``location``, on credentials from ``fetch`` (refreshed before expiry);
    ``options``: the client's own (endpoint, timeouts...), under the vended ones."""

    def __init__(
        self, location: str, fetch: Callable[[], DataToken], options: Mapping[str, str] | None = None
    ) -> None:
        self.location = location
        self._fetch = fetch
        self._options = dict(options or {})
        self._lock = threading.Lock()
        self._token: DataToken | None = None
        self._io: FileIO | None = None
        self._retired: list[FileIO] = []
        self.fetches = 0

    def current(self, *, force: bool = False) -> FileIO:
        """The FileIO on valid credentials (fetched first if there are none, they are stale, or
        ``force``)."""
        with self._lock:
            if force or self._io is None or self._token is None or self._token.stale():
                token = self._fetch()
                self.fetches += 1
                fresh = get_file_io(self.location, {**self._options, **token.options})
                if self._io is not None:
                    # Another thread may be mid-call on it: closed with this FileIO, not now.
                    self._retired.append(self._io)
                self._token, self._io = token, fresh
            return self._io

    def token(self) -> DataToken:
        """The credentials in use (fetched first if needed)."""
        self.current()
        assert self._token is not None
        return self._token

    def _call(self, op: Callable[[FileIO], T]) -> T:
        io = self.current()
        try:
            return op(io)
        except FileIOError as e:
            if e.fields.get("code") not in EXPIRED_CODES:
                raise
            return op(self.current(force=True))

    @property
    def capabilities(self) -> Capabilities:
        return self.current().capabilities

    def read(self, path: str) -> bytes:
        return self._call(lambda io: io.read(path))

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        self._call(lambda io: io.write(path, data, durable=durable))

    def create_if_absent(
        self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
    ) -> None:
        # Not repeated on an expired token: the first attempt was refused before anything was written
        # (S3 checks credentials first), so the retry is the only create.
        self._call(lambda io: io.create_if_absent(path, data, durable=durable, sync_first=sync_first))

    def create_all_if_absent(
        self, entries: Sequence[tuple[str, bytes]], *, sync_first: Sequence[str] = ()
    ) -> CreatedAll:
        return self.current().create_all_if_absent(entries, sync_first=sync_first)

    def sync(self, paths: Sequence[str]) -> None:
        self._call(lambda io: io.sync(paths))

    def exists(self, path: str) -> bool:
        return self._call(lambda io: io.exists(path))

    def status(self, path: str) -> FileStatus:
        return self._call(lambda io: io.status(path))

    def list(self, directory: str) -> builtins.list[FileStatus]:
        return self._call(lambda io: io.list(directory))

    def list_recursive(self, directory: str) -> builtins.list[FileStatus]:
        return self._call(lambda io: io.list_recursive(directory))

    def delete(self, path: str) -> None:
        self._call(lambda io: io.delete(path))

    def join(self, base: str, *parts: str) -> str:
        return super().join(base, *parts)

    def close(self) -> None:
        with self._lock:
            ios = [*self._retired, *([self._io] if self._io is not None else [])]
            self._retired, self._io, self._token = [], None, None
        for io in ios:
            io.close()
