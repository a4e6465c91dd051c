"""FileIO on the local file system (POSIX).

Writes go to a file in the target's directory that is complete and fsynced before it gets its name:
``os.replace`` of a hidden temporary file (replace), or ``os.link`` of an unnamed ``O_TMPFILE`` inode
(create-if-absent, which fails atomically with ``EEXIST``; a hidden temporary file where the file system
has no ``O_TMPFILE``); then the directory is fsynced so the new name survives a crash. Paths are
``/abs/path`` or ``file:///abs/path`` (also ``file:/abs/path``, as Hadoop spells it); results keep the
caller's form.

Deferred durability (``durable=False``, ``sync_first``, ``sync``: see :mod:`paimon_meta.io.base`) lets
the commit path wait for fewer fsyncs where durability is not at stake yet:

* ``create_if_absent(durable=False)`` creates the file in place (``O_CREAT|O_EXCL``: one winner) without
  any fsync: one directory operation instead of the temp file, link and unlink;
  ``create_if_absent(sync_first=files)`` creates a file that references such files, fsyncing them
  (contents and directories) concurrently with its own content before it is linked, and :meth:`sync`
  makes a batch durable on its own. A file created non-durable must be covered by one of them before
  anything that references it is made durable (the coordinator: all manifests of a commit, synced with
  ``snapshot-N``).
* ``write(durable=False)`` is an atomic replace without any fsync, for hint files that readers verify
  (a crash may leave the old content, the new one, or an empty file).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import functools
import os
import stat
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

from paimon_meta.errors import FileAlreadyExistsError, FileIOError, FileNotFound, ValidationError
from paimon_meta.io.base import Capabilities, CreatedAll, FileIO, FileStatus, join_uri

# At most this many fsyncs of one sync (or sync_first) run at once.
_SYNC_THREADS = 4

# errnos meaning "this file system cannot hard-link", where create_if_absent falls back to O_EXCL.
_NO_LINK_ERRNOS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK})


def local_path(path: str) -> str:
    """The OS path of ``/abs/path``, ``file:/abs/path``, ``file:///abs/path`` or
    ``file://localhost/abs/path``. ``ValidationError`` for anything else."""
    p = path
    if p[:5].lower() == "file:":
        p = p[5:]
        if p.startswith("//"):
            authority, sep, tail = p[2:].partition("/")
            if authority not in ("", "localhost"):
                raise ValidationError(f"file URI with a remote host is not supported: {path!r}", path=path)
            p = sep + tail
    if not p.startswith("/"):
        raise ValidationError(f"local path must be absolute: {path!r}", path=path)
    return p


@contextlib.contextmanager
def _os_errors(op: str, path: str) -> Iterator[None]:
    """Map OS errors to the FileIO error hierarchy, naming the operation and the caller's path."""
    try:
        yield
    except FileNotFoundError as e:
        raise FileNotFound(f"{op}: no such file", path=path) from e
    except FileExistsError as e:
        raise FileAlreadyExistsError(f"{op}: file already exists", path=path) from e
    except OSError as e:
        raise FileIOError(f"{op} failed: {e.strerror or e}", path=path, errno=e.errno) from e


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _ensure_dir(directory: str) -> None:
    """``mkdir -p`` that fsyncs each parent whose entry it created (a new directory is only durable
    once its parent's entry is)."""
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    if parent != directory:
        _ensure_dir(parent)
    try:
        os.mkdir(directory)
    except FileExistsError:
        if not os.path.isdir(directory):
            # a file is in the way; not "already exists" in the create_if_absent sense
            raise NotADirectoryError(errno.ENOTDIR, "a path component is a file", directory) from None
        return  # a concurrent creator made it (and fsyncs its parent)
    _fsync_dir(parent)


def _write_fd(fd: int, data: bytes, *, sync: bool = True) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    if sync:
        os.fsync(fd)


def _write_temp(directory: str, name: str, data: bytes, *, sync: bool = True) -> str:
    """A (by default fsynced) hidden temp file beside the target. Hidden (dot-prefixed) so Paimon
    readers, which match ``snapshot-``/``manifest-`` prefixes, never pick it up."""
    temp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_fd(fd, data, sync=sync)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    os.close(fd)
    return temp


def _open_anonymous(dir_fd: int) -> int | None:
    """An unnamed file in the directory ``dir_fd`` (``O_TMPFILE``), open for writing; None where the
    platform or the file system has none."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        return os.open(".", flag | os.O_WRONLY, 0o644, dir_fd=dir_fd)
    except OSError as e:
        # EOPNOTSUPP: the file system has no O_TMPFILE; EISDIR/EINVAL: a kernel older than it
        if e.errno in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL):
            return None
        raise


def _status(path: str, st: os.stat_result) -> FileStatus:
    return FileStatus(
        path=path,
        size=st.st_size,
        mtime_ms=st.st_mtime_ns // 1_000_000,
        etag=f"{st.st_ino}-{st.st_mtime_ns}",
    )


class LocalFileIO(FileIO):
    """FileIO on a POSIX file system: atomic replace, atomic create-if-absent, durable on return (unless
    ``durable=False``)."""

    _CAPABILITIES = Capabilities(atomic_create=True, atomic_rename=True)

    def __init__(self) -> None:
        # Threads for sync/sync_first, started on first use (close() stops them).
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def capabilities(self) -> Capabilities:
        return self._CAPABILITIES

    def read(self, path: str) -> bytes:
        with _os_errors("read", path), open(local_path(path), "rb") as f:
            return f.read()

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Atomic replace: a complete temp file is renamed over ``path``; durable: both it and the
        directory are fsynced. ``durable=False`` (hints) skips the fsyncs and, when the new content is
        exactly as long as the old one (a snapshot id that kept its number of digits), overwrites the
        bytes in place instead: on ext4 a rename over an existing file forces its data out
        (``auto_da_alloc``), ~1 ms of a 2.5 ms commit. Equal lengths keep concurrent writers safe: each
        ``pwrite`` is atomic, so a reader sees one writer's whole value, never a mix of two."""
        target = local_path(path)
        directory, name = os.path.split(target)
        with _os_errors("write", path):
            if not durable and self._overwrite_same_length(target, data):
                return
            _ensure_dir(directory)
            temp = _write_temp(directory, name, data, sync=durable)
            try:
                os.replace(temp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
            if durable:
                _fsync_dir(directory)

    @staticmethod
    def _overwrite_same_length(target: str, data: bytes) -> bool:
        """Overwrite ``target`` in place if it exists with exactly ``len(data)`` bytes; else False."""
        try:
            fd = os.open(target, os.O_WRONLY)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size != len(data):
                return False
            return os.pwrite(fd, data, 0) == len(data)
        finally:
            os.close(fd)

    def create_if_absent(
        self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
    ) -> None:
        """Atomic: a hard link of a complete temp file either takes the name or fails with ``EEXIST``,
        so concurrent creators see exactly one winner and readers never see partial content. On file
        systems without hard links it falls back to ``O_CREAT|O_EXCL`` (still one winner, but a
        reader may then observe the file while it is being written).

        ``durable=False``: ``O_CREAT|O_EXCL`` in place, without any fsync (a concurrent reader could
        see the file half written, and a crash may lose it or its content until :meth:`sync` or a
        ``sync_first`` covered it). ``sync_first``: their contents and directories and ``path``'s own
        content are fsynced concurrently, then ``path`` is linked and its directory fsynced; the
        caller waits about two fsyncs instead of one per file plus two."""
        if not durable:
            if sync_first:
                raise ValidationError("sync_first needs a durable create", path=path)
            target = local_path(path)
            with _os_errors("create_if_absent", path):
                _ensure_dir(os.path.dirname(target))
                self._create_exclusive(target, data, sync=False)
        elif sync_first:
            self._create_if_absent_after(path, data, sync_first)
        else:
            self._create_if_absent(path, data)

    def sync(self, paths: Sequence[str]) -> None:
        """Each file's content and each distinct parent directory (the entries) are fsynced,
        concurrently (the fsyncs are independent; all must finish before the caller publishes
        anything that references the files)."""
        self._fsync_all([local_path(p) for p in paths], with_parents=True)

    def _create_if_absent_after(self, path: str, data: bytes, unsynced: Sequence[str]) -> None:
        target = local_path(path)
        directory, name = os.path.split(target)
        with _os_errors("create_if_absent", path):
            _ensure_dir(directory)
            others = [local_path(p) for p in unsynced]
            self._publish_new(directory, name, data, [*others, *{os.path.dirname(o) for o in others}])

    def _publish_new(self, directory: str, name: str, data: bytes, sync_also: Sequence[str]) -> None:
        """Write ``data`` as a complete, fsynced file that is not yet named, fsync ``sync_also``
        concurrently with it, link it as ``directory/name`` (``EEXIST``: someone else has the name) and
        fsync the directory.

        Where the kernel has ``O_TMPFILE`` (Linux 3.11+: ext4, xfs, btrfs, tmpfs) the unnamed file is an
        anonymous inode linked through ``/proc/self/fd``: no temporary name is created and unlinked in
        the directory (two fewer directory updates for the journal), and a crash before the link leaves
        nothing behind. Elsewhere (or without ``/proc``) a hidden named temp file, as :meth:`write`."""
        target = os.path.join(directory, name)
        dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fd = _open_anonymous(dir_fd)
            if fd is not None:
                try:
                    _write_fd(fd, data, sync=False)
                    self._fsync_all(sync_also, with_parents=False, first=fd)
                    linked = self._link_anonymous(fd, dir_fd, name, target)
                finally:
                    os.close(fd)
                if linked:
                    self._fsync_path(directory)
                    return
                sync_also = ()  # durable now; only the named fallback below is left
            temp = _write_temp(directory, name, data, sync=False)
            try:
                self._fsync_all([temp, *sync_also], with_parents=False)
                self._link(temp, target, data)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
            self._fsync_path(directory)
        finally:
            os.close(dir_fd)

    def create_all_if_absent(
        self, entries: Sequence[tuple[str, bytes]], *, sync_first: Sequence[str] = ()
    ) -> CreatedAll:
        """Files of one directory (else one at a time, as the base class does): every file written
        unnamed (``O_TMPFILE``), one round of concurrent fsyncs for all of them and ``sync_first`` (and
        its directories), then each linked in order (stopping at the first that fails), then one
        fsync of the directory: about two fsync waits for the lot instead of two per file."""
        targets = [local_path(path) for path, _ in entries]
        directories = {os.path.dirname(t) for t in targets}
        if len(entries) < 2 or len(directories) != 1:
            return super().create_all_if_absent(entries, sync_first=sync_first)
        (directory,) = directories
        first = entries[0][0]
        fds: list[int] = []
        with _os_errors("create_if_absent", first):
            _ensure_dir(directory)
            dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            # Nothing is named until every file is durable: a failure up to there creates nothing.
            with _os_errors("create_if_absent", first):
                for _, data in entries:
                    fd = _open_anonymous(dir_fd)
                    if fd is None:
                        break
                    fds.append(fd)
                    _write_fd(fd, data, sync=False)
                if len(fds) < len(entries):  # no O_TMPFILE here
                    return super().create_all_if_absent(entries, sync_first=sync_first)
                self._fsync_all([local_path(p) for p in sync_first], with_parents=True, fds=fds)
            created, doubtful = len(entries), 0
            error: Exception | None = None
            for i, ((path, data), fd, target) in enumerate(zip(entries, fds, targets, strict=True)):
                try:
                    with _os_errors("create_if_absent", path):
                        linked = self._link_anonymous(fd, dir_fd, os.path.basename(target), target)
                        if not linked:  # no /proc, no hard links: this one by name, the rest likewise
                            self._create_if_absent(path, data)
                except FileAlreadyExistsError as e:
                    created, error = i, e
                    break
                except FileIOError as e:
                    created, error, doubtful = i, e, 1
                    break
            if created + doubtful == 0:
                return CreatedAll(0, error, 0)
            try:
                with _os_errors("sync", directory):
                    self._fsync_path(directory)
            except FileIOError as e:
                # The names may not survive a crash: every linked file is in doubt.
                return CreatedAll(0, e, created + doubtful)
            return CreatedAll(created, error, doubtful)
        finally:
            for fd in fds:
                os.close(fd)
            os.close(dir_fd)

    def _link_anonymous(self, fd: int, dir_fd: int, name: str, target: str) -> bool:
        """Give the anonymous file ``fd`` the name ``name`` in ``dir_fd`` if absent (``EEXIST``: someone
        else has it); False where it cannot be linked (no ``/proc``, no hard links): then the caller
        publishes through a named temp file."""
        try:
            # A dir_fd makes os.link call linkat(AT_SYMLINK_FOLLOW), which links the inode the magic
            # /proc link points to (plain link(2) would try to link the /proc entry itself).
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd)
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno in _NO_LINK_ERRNOS or e.errno == errno.ENOENT:
                return False
            raise
        return True

    def _fsync_all(
        self, targets: Sequence[str], *, with_parents: bool, first: int | None = None, fds: Sequence[int] = ()
    ) -> None:
        """fsync ``targets`` (and their directories: ``with_parents``) and the open files ``fds``
        concurrently; ``first``: an open file this thread fsyncs meanwhile."""
        paths = set(targets)
        if with_parents:
            paths |= {os.path.dirname(t) for t in targets}
        jobs: list[Callable[[], None]] = [functools.partial(os.fsync, fd) for fd in fds]
        jobs += [functools.partial(self._fsync_path, p) for p in sorted(paths)]
        if first is not None:
            jobs.insert(0, functools.partial(os.fsync, first))
        if len(jobs) <= 1:
            for job in jobs:
                job()
            return
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_SYNC_THREADS, thread_name_prefix="paimon-fsync")
            pool = self._pool
        futures = [pool.submit(job) for job in jobs[1:]]
        jobs[0]()  # this thread does one of them
        for future in futures:
            future.result()

    @staticmethod
    def _fsync_path(path: str) -> None:
        with _os_errors("sync", path):
            # O_RDONLY opens files and directories alike (no stat first: on a busy server every
            # GIL-releasing call of the lock holder's thread costs a wait to get the GIL back).
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _create_if_absent(self, path: str, data: bytes) -> None:
        target = local_path(path)
        directory, name = os.path.split(target)
        with _os_errors("create_if_absent", path):
            _ensure_dir(directory)
            self._publish_new(directory, name, data, ())

    def _link(self, temp: str, target: str, data: bytes) -> None:
        """Publish a complete temp file under ``target`` if absent (EEXIST: someone else has it)."""
        try:
            os.link(temp, target)
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno not in _NO_LINK_ERRNOS:
                raise
            self._create_exclusive(target, data)

    @staticmethod
    def _create_exclusive(target: str, data: bytes, *, sync: bool = True) -> None:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_fd(fd, data, sync=sync)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(target)  # ours (O_EXCL made it): never leave a partial file under the name
            raise
        os.close(fd)

    def exists(self, path: str) -> bool:
        with _os_errors("exists", path):
            return os.path.isfile(local_path(path))

    def status(self, path: str) -> FileStatus:
        with _os_errors("status", path):
            st = os.stat(local_path(path))
        if not stat.S_ISREG(st.st_mode):
            raise FileNotFound("status: not a file", path=path)
        return _status(path, st)

    def list(self, directory: str) -> list[FileStatus]:
        out: list[FileStatus] = []
        with _os_errors("list", directory):
            try:
                entries = list(os.scandir(local_path(directory)))
            except (FileNotFoundError, NotADirectoryError):
                return []
            for entry in entries:
                st = self._file_stat(entry.path)
                if st is not None:
                    out.append(_status(join_uri(directory, entry.name), st))
        out.sort(key=lambda s: s.path)
        return out

    def list_recursive(self, directory: str) -> builtins.list[FileStatus]:
        root = local_path(directory)
        out: builtins.list[FileStatus] = []
        errors: builtins.list[OSError] = []
        with _os_errors("list_recursive", directory):
            for dirpath, _dirs, files in os.walk(root, onerror=errors.append):
                for name in files:
                    full = os.path.join(dirpath, name)
                    st = self._file_stat(full)
                    if st is not None:
                        out.append(_status(join_uri(directory, os.path.relpath(full, root)), st))
            # os.walk reports the unreadable root (or subdirectories) through onerror only
            fatal = [e for e in errors if not isinstance(e, FileNotFoundError | NotADirectoryError)]
            if fatal:
                raise fatal[0]
        out.sort(key=lambda s: s.path)
        return out

    @staticmethod
    def _file_stat(full: str) -> os.stat_result | None:
        """Stat of a regular file; None for directories and for files deleted while listing."""
        try:
            st = os.stat(full)
        except FileNotFoundError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    def delete(self, path: str) -> None:
        with _os_errors("delete", path):
            try:
                os.unlink(local_path(path))
            except FileNotFoundError:
                return

    def prune_directories(self, directory: str) -> None:
        with _os_errors("prune_directories", directory):
            for current, _dirs, _files in os.walk(local_path(directory), topdown=False):
                try:
                    os.rmdir(current)
                except OSError as e:
                    # a file (or a directory just created into) is there: kept
                    if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                        raise
