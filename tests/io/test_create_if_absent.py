"""create_if_absent under contention: exactly one winner, locally and on (moto) S3; the capability
probe; the non-atomic fallback for stores without conditional writes."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from paimon_meta.errors import FileAlreadyExistsError, FileIOError
from paimon_meta.io import FileIO, LocalFileIO, S3FileIO, get_file_io, local
from tests.fixtures.s3 import MotoS3

THREADS = 8


def _payload(i: int) -> bytes:
    return f"writer-{i}:".encode() * 4096  # ~40 KB, distinct per writer


def _race(fio: FileIO, path: str) -> list[str]:
    """THREADS creators released together; their outcomes ("won"/"lost"/repr of another error)."""
    barrier = threading.Barrier(THREADS)
    outcomes = [""] * THREADS

    def create(i: int) -> None:
        barrier.wait()
        try:
            fio.create_if_absent(path, _payload(i))
            outcomes[i] = "won"
        except FileAlreadyExistsError:
            outcomes[i] = "lost"
        except Exception as e:
            outcomes[i] = repr(e)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def _assert_one_winner(fio: FileIO, path: str, outcomes: list[str]) -> None:
    assert sorted(outcomes) == ["lost"] * (THREADS - 1) + ["won"], outcomes
    assert fio.read(path) == _payload(outcomes.index("won"))


def test_local_race_has_one_winner(tmp_path: Path) -> None:
    fio = LocalFileIO()
    for round_ in range(5):
        path = f"{tmp_path}/snapshot/snapshot-{round_}"
        _assert_one_winner(fio, path, _race(fio, path))
    assert sorted(os.listdir(tmp_path / "snapshot")) == [f"snapshot-{r}" for r in range(5)]  # no temp left


def test_local_fallback_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: str, dst: str, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "hard links not supported", dst)

    monkeypatch.setattr(os, "link", no_links)
    fio = LocalFileIO()
    path = f"{tmp_path}/snapshot/snapshot-1"
    _assert_one_winner(fio, path, _race(fio, path))
    assert os.listdir(tmp_path / "snapshot") == ["snapshot-1"]


def _anonymous_supported(directory: Path) -> bool:
    fd = local._open_anonymous(os.open(directory, os.O_RDONLY))
    if fd is not None:
        os.close(fd)
    return fd is not None


def test_local_create_links_an_unnamed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the file system has O_TMPFILE, a durable create names no temporary file at all."""
    if not _anonymous_supported(tmp_path):
        pytest.skip(f"no O_TMPFILE on the file system of {tmp_path}")

    def no_named_temp(*args: object, **kwargs: object) -> str:
        raise AssertionError("a named temp file was written")

    monkeypatch.setattr(local, "_write_temp", no_named_temp)
    fio = LocalFileIO()
    fio.create_if_absent(f"{tmp_path}/m/manifest-1", b"m", durable=False)
    fio.create_if_absent(f"{tmp_path}/s/snapshot-1", b"s", sync_first=[f"{tmp_path}/m/manifest-1"])
    fio.create_if_absent(f"{tmp_path}/s/schema-0", b"schema")
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(f"{tmp_path}/s/snapshot-1", b"other", sync_first=[f"{tmp_path}/m/manifest-1"])
    fio.close()
    assert fio.read(f"{tmp_path}/s/snapshot-1") == b"s"
    assert sorted(os.listdir(tmp_path / "s")) == ["schema-0", "snapshot-1"]
    mode = os.stat(tmp_path / "m" / "manifest-1").st_mode & 0o777  # as a file created by name
    assert os.stat(tmp_path / "s" / "snapshot-1").st_mode & 0o777 == mode


@pytest.mark.parametrize("missing", ["O_TMPFILE", "/proc"])
def test_local_create_without_unnamed_files_uses_a_named_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Without O_TMPFILE (the platform or the file system) or without /proc to link it through, the
    same create goes through a hidden named temp file: one winner, same content, nothing left over."""
    named: list[str] = []
    write_temp = local._write_temp

    def counting(directory: str, name: str, data: bytes, *, sync: bool = True) -> str:
        named.append(name)
        return write_temp(directory, name, data, sync=sync)

    monkeypatch.setattr(local, "_write_temp", counting)
    if missing == "O_TMPFILE":
        monkeypatch.setattr(local, "_open_anonymous", lambda dir_fd: None)
    else:
        link = os.link

        def no_proc(src: str, dst: str, *, dst_dir_fd: int | None = None) -> None:
            if src.startswith("/proc/self/fd/"):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", src)
            link(src, dst, dst_dir_fd=dst_dir_fd)

        monkeypatch.setattr(os, "link", no_proc)
    fio = LocalFileIO()
    path = f"{tmp_path}/snapshot/snapshot-1"
    _assert_one_winner(fio, path, _race(fio, path))
    fio.create_if_absent(f"{tmp_path}/m/manifest-1", b"m", durable=False)
    fio.create_if_absent(f"{tmp_path}/snapshot/snapshot-2", b"s", sync_first=[f"{tmp_path}/m/manifest-1"])
    fio.close()
    assert fio.read(f"{tmp_path}/snapshot/snapshot-2") == b"s"
    assert sorted(os.listdir(tmp_path / "snapshot")) == ["snapshot-1", "snapshot-2"]
    assert named.count("snapshot-1") == THREADS and named.count("snapshot-2") == 1


def test_local_capabilities() -> None:
    caps = LocalFileIO().capabilities
    assert caps.atomic_create and caps.atomic_rename


@pytest.mark.s3
def test_moto_answers_conditional_put_with_412(moto_server: MotoS3) -> None:
    client = moto_server.client()
    bucket = moto_server.create_bucket()
    client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        client.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert e.value.response["Error"]["Code"] == "PreconditionFailed"
    moto_server.drop_bucket(bucket)


def _count_puts(fio: S3FileIO) -> list[int]:
    puts = [0]

    def count(**_: object) -> None:
        puts[0] += 1

    fio.client.meta.events.register("before-call.s3.PutObject", count)
    return puts


@pytest.mark.s3
def test_auto_probe_detects_conditional_writes_once(s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    fio = get_file_io(uri, options)
    assert isinstance(fio, S3FileIO)
    puts = _count_puts(fio)
    assert fio.capabilities.atomic_create is True
    assert fio.capabilities.atomic_rename is False
    assert puts[0] == 2  # the probe's two PUTs, and only once
    assert fio.list_recursive(uri) == []  # the probe object was removed
    fio.create_if_absent(fio.join(uri, "x"), b"1")
    assert puts[0] == 3


@pytest.mark.s3
def test_moto_race_has_one_winner(s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    fio = get_file_io(uri, options)
    assert fio.capabilities.atomic_create is True
    for round_ in range(3):
        path = fio.join(uri, "t", "snapshot", f"snapshot-{round_}")
        _assert_one_winner(fio, path, _race(fio, path))


@pytest.mark.s3
def test_auto_probe_detects_a_store_ignoring_if_none_match(
    s3_warehouse_without_conditions: tuple[str, dict[str, str]],
) -> None:
    uri, options = s3_warehouse_without_conditions
    fio = get_file_io(uri, options)
    assert fio.capabilities.atomic_create is False
    assert fio.list_recursive(uri) == []
    path = fio.join(uri, "snapshot-1")
    fio.create_if_absent(path, b"first")
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(path, b"second")  # caught by the HEAD, not by the store
    assert fio.read(path) == b"first"


@pytest.mark.s3
def test_forcing_conditional_writes_on_such_a_store_overwrites(
    s3_warehouse_without_conditions: tuple[str, dict[str, str]],
) -> None:
    # Why the probe matters: trusting If-None-Match on a store that ignores it loses the first object.
    uri, options = s3_warehouse_without_conditions
    fio = get_file_io(uri, {**options, "s3.conditional-writes": "true"})
    path = fio.join(uri, "snapshot-1")
    fio.create_if_absent(path, b"first")
    fio.create_if_absent(path, b"second")
    assert fio.read(path) == b"second"


@pytest.mark.s3
def test_conditional_writes_false_uses_head_then_put(s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    fio = get_file_io(uri, {**options, "s3.conditional-writes": "false"})
    assert isinstance(fio, S3FileIO)
    heads = [0]
    conditional_puts = [0]

    def on_head(**_: object) -> None:
        heads[0] += 1

    def on_put(params: dict[str, object], **_: object) -> None:
        conditional_puts[0] += "IfNoneMatch" in params

    fio.client.meta.events.register("before-call.s3.HeadObject", on_head)
    fio.client.meta.events.register("before-parameter-build.s3.PutObject", on_put)
    assert fio.capabilities.atomic_create is False
    path = fio.join(uri, "snapshot", "snapshot-1")
    fio.create_if_absent(path, b"first")
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(path, b"second")
    assert fio.read(path) == b"first"
    assert heads[0] == 2
    assert conditional_puts[0] == 0  # no probe, no If-None-Match


@pytest.mark.s3
def test_conditional_writes_true_skips_the_probe(s3_warehouse: tuple[str, dict[str, str]]) -> None:
    uri, options = s3_warehouse
    fio = get_file_io(uri, {**options, "s3.conditional-writes": "true"})
    assert isinstance(fio, S3FileIO)
    puts = _count_puts(fio)
    assert fio.capabilities.atomic_create is True
    assert puts[0] == 0


def _entries(tmp_path: Path, n: int, start: int = 1) -> list[tuple[str, bytes]]:
    return [(f"{tmp_path}/snapshot/snapshot-{i}", f"body {i}".encode()) for i in range(start, start + n)]


@pytest.mark.parametrize("anonymous", [True, False], ids=["O_TMPFILE", "named-temp"])
def test_local_create_all_links_in_order_after_one_sync_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, anonymous: bool
) -> None:
    """Several files of one directory: each created only if absent, in order, with their content and
    ``sync_first`` durable before the first name appears; stopped at the first name someone else has
    (the later ones are not created)."""
    if not anonymous:
        monkeypatch.setattr(local, "_open_anonymous", lambda dir_fd: None)
    fio = LocalFileIO()
    fio.create_if_absent(f"{tmp_path}/m/manifest-1", b"m", durable=False)
    done = fio.create_all_if_absent(_entries(tmp_path, 3), sync_first=[f"{tmp_path}/m/manifest-1"])
    assert (done.created, done.error, done.doubtful) == (3, None, 0)
    fio.create_if_absent(f"{tmp_path}/snapshot/snapshot-5", b"someone else's")
    done = fio.create_all_if_absent(_entries(tmp_path, 3, start=4))
    assert (done.created, done.doubtful) == (1, 0) and isinstance(done.error, FileAlreadyExistsError)
    fio.close()
    assert sorted(os.listdir(tmp_path / "snapshot")) == [f"snapshot-{i}" for i in range(1, 6)]
    assert [fio.read(p) for p, _ in _entries(tmp_path, 4)] == [b"body 1", b"body 2", b"body 3", b"body 4"]
    assert fio.read(f"{tmp_path}/snapshot/snapshot-5") == b"someone else's"


def test_local_create_all_syncs_everything_before_the_first_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order the commit path relies on: every file's content and ``sync_first`` fsynced before any
    name appears, the directory fsynced once after the last link; an fsync failure names nothing."""
    if not _anonymous_supported(tmp_path):
        pytest.skip(f"no O_TMPFILE on the file system of {tmp_path}: files are created one at a time")
    log: list[str] = []
    fsync, link = os.fsync, os.link

    def recording_fsync(fd: int) -> None:
        log.append("fsync")
        fsync(fd)

    def recording_link(src: str, dst: str, **kwargs: int | None) -> None:
        log.append("link")
        link(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "link", recording_link)
    fio = LocalFileIO()
    fio.create_if_absent(f"{tmp_path}/m/manifest-1", b"m", durable=False)
    (tmp_path / "snapshot").mkdir()
    log.clear()
    assert (
        fio.create_all_if_absent(_entries(tmp_path, 3), sync_first=[f"{tmp_path}/m/manifest-1"]).created == 3
    )
    first_link = log.index("link")
    assert log[:first_link].count("fsync") == 3 + 2  # three files, the manifest and its directory
    assert log[first_link:] == ["link", "link", "link", "fsync"]

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(FileIOError):
        fio.create_all_if_absent(_entries(tmp_path, 2, start=4))
    fio.close()
    assert sorted(os.listdir(tmp_path / "snapshot")) == [f"snapshot-{i}" for i in range(1, 4)]


def test_create_all_one_at_a_time_reports_the_first_failure(tmp_path: Path) -> None:
    """The base class's way (S3, a wrapper): one create after the other; a name taken stops it there,
    a failure of unknown outcome makes that one doubtful."""
    from paimon_meta.io import FaultInjectingFileIO

    fio = FaultInjectingFileIO(LocalFileIO())
    fio.create_if_absent(f"{tmp_path}/snapshot/snapshot-2", b"taken")
    done = fio.create_all_if_absent(_entries(tmp_path, 3))
    assert (done.created, done.doubtful) == (1, 0) and isinstance(done.error, FileAlreadyExistsError)
    fio.fail_nth("create_if_absent", 1, path_contains="snapshot-5", after_write=True)
    done = fio.create_all_if_absent(_entries(tmp_path, 3, start=4))
    assert (done.created, done.doubtful) == (1, 1) and isinstance(done.error, FileIOError)
    assert not fio.exists(f"{tmp_path}/snapshot/snapshot-6")  # stopped at the doubtful one
