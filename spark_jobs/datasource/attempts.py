"""What became of a writer's commit, kept where ``abort`` can read it.

Spark calls a writer's ``abort`` after a failed task *and* after a failed ``commit``, with the same
messages and no word on why; ``commit`` and ``abort`` run in separate Python workers (each gets a
fresh copy of the writer), so ``commit`` cannot tell ``abort`` anything in memory. Deleting the
files is right when no commit was attempted (a task failed) or the commit definitely failed, and
wrong when its outcome is unknown: the snapshot may exist -- or land later, a commit service still
working on a request the client gave up on -- and reference them. So ``commit`` records its attempt
before committing and what it learned after (:class:`CommitAttempts`); ``abort`` deletes only when
there is no record or the record says the commit definitely failed. An unknown outcome is never
cleaned up by the writer: an orphan-file cleanup (``paimon-meta remove-orphan-files``) removes the files later
if no snapshot references them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from paimon_meta.errors import FileNotFound
from paimon_meta.io import get_file_io
from spark_jobs.cli_args import outside_table_storage


class AttemptState(enum.Enum):
    """A recorded commit attempt: started and not known to have failed (UNKNOWN: a crash mid-commit
    leaves this too), or definitely failed (FAILED: nothing of it landed)."""

    UNKNOWN = "unknown"
    FAILED = "failed"


class CommitAttempts:
    """Commit attempts recorded as small files ``<directory>/<key>`` (local or object storage).

    ``io_options`` are the job's own storage options: the directory is not in the table's location,
    so credentials the service vends for the table are never used for it (``table_vends``: the table's
    files are on such credentials; errors for the directory then say so)."""

    def __init__(
        self, directory: str, io_options: Mapping[str, str] | None = None, *, table_vends: bool = False
    ) -> None:
        self.directory = directory
        self.file_io = get_file_io(directory, io_options)
        self.table_vends = table_vends

    def _path(self, key: str) -> str:
        return self.file_io.join(self.directory, key)

    def _write(self, key: str, state: AttemptState) -> None:
        with outside_table_storage(self.directory, "commit attempts directory", table_vends=self.table_vends):
            self.file_io.write(self._path(key), state.value.encode())

    def begin(self, key: str) -> None:
        """Record, before committing, that a commit of ``key`` is under way (outcome unknown)."""
        self._write(key, AttemptState.UNKNOWN)

    def failed(self, key: str) -> None:
        """Record that the commit of ``key`` definitely did not land."""
        self._write(key, AttemptState.FAILED)

    def state(self, key: str) -> AttemptState | None:
        """The recorded state of ``key``'s commit; None if no commit of it was attempted."""
        try:
            with outside_table_storage(
                self.directory, "commit attempts directory", table_vends=self.table_vends
            ):
                text = self.file_io.read(self._path(key)).decode("utf-8").strip()
        except FileNotFound:
            return None
        try:
            return AttemptState(text)
        except ValueError:
            return AttemptState.UNKNOWN  # unreadable: assume the worst, keep the files

    def forget(self, key: str) -> None:
        """Drop the record (after a commit that landed, or once ``abort`` acted on it)."""
        with outside_table_storage(self.directory, "commit attempts directory", table_vends=self.table_vends):
            self.file_io.delete(self._path(key))
