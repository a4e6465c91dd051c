"""URI helpers, the scheme factory, and behaviour specific to LocalFileIO."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from paimon_meta.errors import (
    FileAlreadyExistsError,
    FileIOError,
    FileNotFound,
    LocationError,
    ValidationError,
)
from paimon_meta.io import (
    LocalFileIO,
    S3FileIO,
    get_file_io,
    join_uri,
    key_ancestors,
    keys_overlap,
    location_key,
    normalise_uri,
    scheme_of,
)
from paimon_meta.io.local import local_path


@pytest.mark.parametrize(
    ("uri", "scheme"),
    [("/w", "file"), ("file:///w", "file"), ("FILE:/w", "file"), ("s3://b/w", "s3"), ("S3A://b", "s3a")],
)
def test_scheme_of(uri: str, scheme: str) -> None:
    assert scheme_of(uri) == scheme


def test_relative_paths_are_rejected() -> None:
    with pytest.raises(ValidationError, match="absolute"):
        get_file_io("warehouse/db")


def test_factory_dispatches_by_scheme() -> None:
    assert isinstance(get_file_io("/tmp/w"), LocalFileIO)
    assert isinstance(get_file_io("file:///tmp/w"), LocalFileIO)
    s3 = get_file_io("s3a://bkt/w", {"s3.region": "us-east-1", "s3.conditional-writes": "false", "x": "y"})
    assert isinstance(s3, S3FileIO)
    with pytest.raises(ValidationError, match="'oss'") as e:
        get_file_io("oss://bkt/w")
    assert e.value.fields["uri"] == "oss://bkt/w"


@pytest.mark.parametrize(
    ("base", "parts", "joined"),
    [
        ("/w", ("db.db", "t"), "/w/db.db/t"),
        ("/w/", ("/a/", "b/c"), "/w/a/b/c"),
        ("/", ("a",), "/a"),
        ("file:///", ("a",), "file:///a"),
        ("file:///w", ("", "a"), "file:///w/a"),
        ("s3://b", ("w", "t"), "s3://b/w/t"),
        ("s3://b/w//", ("t",), "s3://b/w/t"),
    ],
)
def test_join_uri(base: str, parts: tuple[str, ...], joined: str) -> None:
    assert join_uri(base, *parts) == joined


@pytest.mark.parametrize(
    ("uri", "normal"),
    [
        ("/w//db.db/", "/w/db.db"),
        ("file:/w", "file:///w"),
        ("file://localhost/w/", "file:///w"),
        ("File:///w//t", "file:///w/t"),
        ("S3://bkt//w/", "s3://bkt/w"),
        ("s3a://bkt", "s3a://bkt"),
        # issue 34: every spelling of one place has one normal form
        ("/w/./db.db/./t/.", "/w/db.db/t"),
        ("S3://BKT/w/./t//", "s3://BKT/w/t"),  # a legacy bucket's name keeps its case
        ("/w/db.db/%74", "/w/db.db/t"),
        ("/w/db.db%2Ft", "/w/db.db/t"),
        ("/w/%252e%252e", "/w/%2e%2e"),  # decoded once: the text %2e%2e, not a '..' segment
        ("/", "/"),
        ("file:///./", "file:///"),
    ],
)
def test_normalise_uri(uri: str, normal: str) -> None:
    assert normalise_uri(uri) == normal


@pytest.mark.parametrize(
    "uri",
    [
        "file://remote-host/w",
        "s3:/bkt/w",
        "s3:///w",
        "rel/path",
        "/w/../etc",
        "s3://b/w/%2e%2e/x",
        "/w/x%2F..%2Fy",
        "/w/%00",
        "/w/%ff",
    ],
)
def test_normalise_rejects(uri: str) -> None:
    with pytest.raises(ValidationError):
        normalise_uri(uri)


def test_dot_dot_is_a_typed_refusal_naming_it() -> None:
    with pytest.raises(LocationError, match=r"'\.\.'") as e:
        normalise_uri("s3://b/w/db.db/../t")
    assert e.value.fields == {"uri": "s3://b/w/db.db/../t", "reason": "dot-dot"}


@pytest.mark.parametrize(
    ("uri", "key"),
    [
        ("file:///w//t/", "/w/t"),
        ("file://localhost/w", "/w"),
        ("/w", "/w"),
        ("s3a://B/w", "s3://b/w"),
        ("s3n://b/w/./t", "s3://b/w/t"),
        ("S3://b", "s3://b"),
        ("s3://BKT/w", "s3://bkt/w"),
    ],
)
def test_location_key_names_one_place_once(uri: str, key: str) -> None:
    assert location_key(uri) == key


def test_key_ancestors_and_overlap() -> None:
    assert key_ancestors("/a/b/c") == ["/", "/a", "/a/b"]
    assert key_ancestors("s3://b/w/t") == ["s3://b", "s3://b/w"]
    assert key_ancestors("/") == [] and key_ancestors("s3://b") == []
    assert keys_overlap("/a/b", "/a/b") and keys_overlap("/a", "/a/b") and keys_overlap("/a/b/c", "/a")
    assert keys_overlap("/", "/x") and keys_overlap("s3://b", "s3://b/w")
    assert not keys_overlap("/a/b", "/a/bc") and not keys_overlap("s3://b/w", "s3://bb/w")


def test_local_path_forms() -> None:
    assert local_path("/a/b") == "/a/b"
    assert local_path("file:/a/b") == "/a/b"
    assert local_path("file:///a/b") == "/a/b"
    assert local_path("file://localhost/a/b") == "/a/b"
    for bad in ["a/b", "file://host/a", "s3://b/k"]:
        with pytest.raises(ValidationError):
            local_path(bad)


def test_hadoop_style_file_uri_keeps_its_form(tmp_path: Path) -> None:
    fio = LocalFileIO()
    root = f"file:{tmp_path}"
    fio.write(f"{root}/d/x", b"1")
    assert [s.path for s in fio.list(f"{root}/d")] == [f"{root}/d/x"]
    assert [s.path for s in fio.list_recursive(root)] == [f"{root}/d/x"]


def test_etag_is_inode_and_mtime(tmp_path: Path) -> None:
    fio = LocalFileIO()
    path = f"{tmp_path}/f"
    fio.write(path, b"x")
    st = os.stat(path)
    assert fio.status(path).etag == f"{st.st_ino}-{st.st_mtime_ns}"


def test_writes_leave_no_temp_files(tmp_path: Path) -> None:
    fio = LocalFileIO()
    fio.write(f"{tmp_path}/a/f", b"1")
    fio.write(f"{tmp_path}/a/f", b"2")
    fio.create_if_absent(f"{tmp_path}/a/g", b"3")
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(f"{tmp_path}/a/g", b"4")
    assert sorted(os.listdir(tmp_path / "a")) == ["f", "g"]


def test_deferred_durability(tmp_path: Path) -> None:
    fio = LocalFileIO()
    m = f"{tmp_path}/manifest/m-1"
    fio.create_if_absent(m, b"m", durable=False)  # in place: one winner, no temp file
    with pytest.raises(FileAlreadyExistsError):
        fio.create_if_absent(m, b"other", durable=False)
    with pytest.raises(ValidationError):
        fio.create_if_absent(f"{tmp_path}/manifest/m-2", b"m", durable=False, sync_first=[m])
    fio.create_if_absent(f"{tmp_path}/snapshot/s-1", b"s", sync_first=[m])
    fio.write(f"{tmp_path}/snapshot/LATEST", b"1", durable=False)
    fio.sync([m, f"{tmp_path}/snapshot/LATEST"])
    fio.close()
    assert fio.read(m) == b"m"
    assert sorted(os.listdir(tmp_path / "manifest")) == ["m-1"]
    assert sorted(os.listdir(tmp_path / "snapshot")) == ["LATEST", "s-1"]


def test_non_durable_write_is_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hint keeping its length is overwritten in place (no temp file, no rename: on ext4 a rename over
    existing data forces it out, ~1 ms a commit); a length change, or a durable write, renames."""
    fio = LocalFileIO()
    hint = f"{tmp_path}/snapshot/LATEST"
    renames: list[str] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        renames.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    target = str(tmp_path / "snapshot" / "LATEST")
    for value, renamed in ((b"9", True), (b"8", False), (b"10", True), (b"11", False), (b"7", True)):
        renames.clear()
        fio.write(hint, value, durable=False)
        assert fio.read(hint) == value
        assert renames == ([target] if renamed else []), value
    assert sorted(os.listdir(tmp_path / "snapshot")) == ["LATEST"]
    renames.clear()
    fio.write(hint, b"8")  # durable: the atomic, fsynced replace
    assert renames == [target] and fio.read(hint) == b"8"


def test_failed_replace_leaves_target_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fio = LocalFileIO()
    path = f"{tmp_path}/f"
    fio.write(path, b"old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(FileIOError, match="No space left") as e:
        fio.write(path, b"new")
    assert e.value.path == path
    monkeypatch.undo()
    assert fio.read(path) == b"old"
    assert os.listdir(tmp_path) == ["f"]


def test_a_file_in_the_way_is_an_io_error_not_already_exists(tmp_path: Path) -> None:
    fio = LocalFileIO()
    fio.write(f"{tmp_path}/t", b"x")
    for op in (fio.write, fio.create_if_absent):
        with pytest.raises(FileIOError) as e:
            op(f"{tmp_path}/t/snapshot-1", b"y")
        assert not isinstance(e.value, FileAlreadyExistsError | FileNotFound)
    assert fio.list(f"{tmp_path}/t") == []


def test_reading_a_directory_is_an_io_error(tmp_path: Path) -> None:
    with pytest.raises(FileIOError) as e:
        LocalFileIO().read(str(tmp_path))
    assert not isinstance(e.value, FileNotFound)


def test_unreadable_directory_is_an_io_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (a permission change would not do: tests may run as root)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"x")

    def denied(path: object = ".") -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", denied)
    for op in (LocalFileIO().list, LocalFileIO().list_recursive):
        with pytest.raises(FileIOError, match="Permission denied") as e:
            op(str(tmp_path / "d"))
        assert not isinstance(e.value, FileNotFound)
