"""The FileIO contract, run against local paths, file:// URIs and moto S3."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from paimon_meta.errors import FileAlreadyExistsError, FileNotFound
from paimon_meta.io import FileIO, LocalFileIO, get_file_io


@dataclass
class Store:
    fio: FileIO
    root: str

    def p(self, *parts: str) -> str:
        return self.fio.join(self.root, *parts)


@pytest.fixture(params=["local", "file-uri", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: object) -> Store:
    if request.param == "local":
        return Store(LocalFileIO(), f"{tmp_path}/w")
    if request.param == "file-uri":
        return Store(get_file_io(f"file://{tmp_path}/w"), f"file://{tmp_path}/w")
    uri, options = request.getfixturevalue("s3_warehouse")
    return Store(get_file_io(uri, options), uri)


def test_write_read_roundtrip(store: Store) -> None:
    payloads = {"empty": b"", "small": b"hello", "binary": bytes(range(256)) * 4096}
    for name, data in payloads.items():
        store.fio.write(store.p("t", name), data)
    for name, data in payloads.items():
        assert store.fio.read(store.p("t", name)) == data


def test_missing_file_errors_name_the_path(store: Store) -> None:
    missing = store.p("nope", "snapshot-1")
    with pytest.raises(FileNotFound) as e:
        store.fio.read(missing)
    assert e.value.path == missing
    with pytest.raises(FileNotFound):
        store.fio.status(missing)
    assert store.fio.exists(missing) is False


def test_write_replaces_and_status_tracks_it(store: Store) -> None:
    path = store.p("snapshot", "LATEST")
    before = time.time()
    store.fio.write(path, b"1")
    st1 = store.fio.status(path)
    assert (st1.path, st1.size) == (path, 1)
    assert st1.etag
    assert before - 5 <= st1.mtime_ms / 1000 <= time.time() + 5
    store.fio.write(path, b"22")
    st2 = store.fio.status(path)
    assert st2.size == 2
    assert st2.etag != st1.etag
    assert store.fio.read(path) == b"22"
    assert store.fio.exists(path)


def test_create_if_absent_never_replaces(store: Store) -> None:
    path = store.p("snapshot", "snapshot-1")
    store.fio.create_if_absent(path, b"first")
    etag = store.fio.status(path).etag
    with pytest.raises(FileAlreadyExistsError) as e:
        store.fio.create_if_absent(path, b"second")
    assert e.value.path == path
    assert store.fio.read(path) == b"first"
    assert store.fio.status(path).etag == etag


def test_deferred_durability_keeps_the_contract(store: Store) -> None:
    manifest, snapshot, hint = store.p("manifest", "m-1"), store.p("snapshot", "snapshot-1"), store.p("L")
    store.fio.create_if_absent(manifest, b"m", durable=False)
    with pytest.raises(FileAlreadyExistsError):
        store.fio.create_if_absent(manifest, b"other", durable=False)
    store.fio.create_if_absent(snapshot, b"s", sync_first=[manifest])
    store.fio.write(hint, b"1", durable=False)
    store.fio.write(hint, b"2", durable=False)
    store.fio.sync([manifest, hint])
    store.fio.sync([])
    assert [store.fio.read(p) for p in (manifest, snapshot, hint)] == [b"m", b"s", b"2"]


def test_list_is_direct_files_sorted_in_callers_form(store: Store) -> None:
    for name in ["b", "a", "sub/c", "sub/deeper/d", "subx"]:
        store.fio.write(store.p("dir", name), name.encode())
    listed = store.fio.list(store.p("dir"))
    assert [s.path for s in listed] == [store.p("dir", n) for n in ["a", "b", "subx"]]
    assert [s.size for s in listed] == [1, 1, 4]
    assert [s.path for s in store.fio.list(store.p("dir") + "/")] == [s.path for s in listed]
    assert [s.path for s in store.fio.list(store.p("dir", "sub"))] == [store.p("dir", "sub", "c")]


def test_list_recursive_returns_every_file(store: Store) -> None:
    names = ["b", "a", "sub/c", "sub/deeper/d", "subx"]
    for name in names:
        store.fio.write(store.p("dir", name), b"x" * len(name))
    listed = store.fio.list_recursive(store.p("dir"))
    assert [s.path for s in listed] == sorted(store.p("dir", n) for n in names)
    assert {s.path: s.size for s in listed} == {store.p("dir", n): len(n) for n in names}
    # a sibling sharing the name prefix is not "below" dir
    store.fio.write(store.p("dirx", "e"), b"e")
    assert len(store.fio.list_recursive(store.p("dir"))) == len(names)


def test_absent_directory_lists_empty(store: Store) -> None:
    assert store.fio.list(store.p("absent")) == []
    assert store.fio.list_recursive(store.p("absent")) == []


def test_directories_are_not_files(store: Store) -> None:
    store.fio.write(store.p("d", "f"), b"x")
    assert store.fio.exists(store.p("d")) is False
    with pytest.raises(FileNotFound):
        store.fio.status(store.p("d"))


def test_delete(store: Store) -> None:
    path = store.p("manifest", "manifest-1")
    store.fio.write(path, b"m")
    store.fio.delete(path)
    assert not store.fio.exists(path)
    with pytest.raises(FileNotFound):
        store.fio.read(path)
    store.fio.delete(path)  # absent: not an error
    store.fio.create_if_absent(path, b"again")  # the name is free again
    assert store.fio.read(path) == b"again"


def test_join_keeps_form(store: Store) -> None:
    assert store.p("a", "/b/", "c/d") == store.root + "/a/b/c/d"
    store.fio.write(store.p("a", "b"), b"1")
    assert store.fio.read(store.root + "/a/b") == b"1"
