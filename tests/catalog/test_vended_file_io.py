"""VendedFileIO: credentials fetched on first use, shared by every call, fetched again before they
expire and once more when storage says they expired; the secrets never show in its repr."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from paimon_meta.catalog import vended
from paimon_meta.catalog.vended import DataToken, VendedFileIO
from paimon_meta.errors import FileIOError
from paimon_meta.io import LocalFileIO


def _token(
    seconds_left: float, lifetime: float | None = None, options: dict[str, str] | None = None
) -> DataToken:
    now = time.time()
    fetched = now - ((lifetime or seconds_left) - seconds_left)
    return DataToken(options or {"s3.secret-key": "s3cr3t"}, int((now + seconds_left) * 1000), fetched)


def test_stale_an_hour_before_expiry_or_at_half_a_short_lifetime() -> None:
    assert not _token(6 * 3600).stale()
    assert not _token(3601, lifetime=6 * 3600).stale()
    assert _token(3599, lifetime=6 * 3600).stale()
    # 20 min credentials: fetched again with 10 min left, not at once (an hour's margin would mean
    # one fetch per call).
    assert not _token(11 * 60, lifetime=20 * 60).stale()
    assert _token(9 * 60, lifetime=20 * 60).stale()


def test_one_fetch_serves_every_call_until_stale(tmp_path: Path) -> None:
    fetched: list[DataToken] = []

    def fetch() -> DataToken:
        fetched.append(_token(6 * 3600))
        return fetched[-1]

    io = VendedFileIO(str(tmp_path), fetch)
    io.write(str(tmp_path / "a"), b"1")
    assert io.read(str(tmp_path / "a")) == b"1"
    assert io.exists(str(tmp_path / "a")) and len(io.list(str(tmp_path))) == 1
    assert io.fetches == 1
    # Near expiry: the next call fetches again.
    io._token = _token(600, lifetime=6 * 3600)
    io.read(str(tmp_path / "a"))
    assert io.fetches == 2
    assert "s3cr3t" not in repr(io.token())
    io.close()


class _Expired(LocalFileIO):
    """Storage refusing the first credentials as expired (a clock off by more than the margin)."""

    calls = 0

    def read(self, path: str) -> bytes:
        type(self).calls += 1
        if type(self).calls == 1:
            raise FileIOError("expired", code="ExpiredToken", path=path)
        return super().read(path)


def test_expired_credentials_are_fetched_again_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").write_bytes(b"x")
    monkeypatch.setattr(vended, "get_file_io", lambda location, options: _Expired())
    io = VendedFileIO(str(tmp_path), lambda: _token(6 * 3600))
    assert io.read(str(tmp_path / "a")) == b"x"
    assert io.fetches == 2


def test_other_storage_errors_are_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Denied(LocalFileIO):
        def read(self, path: str) -> bytes:
            raise FileIOError("denied", code="AccessDenied", path=path)

    monkeypatch.setattr(vended, "get_file_io", lambda location, options: Denied())
    io = VendedFileIO(str(tmp_path), lambda: _token(6 * 3600))
    with pytest.raises(FileIOError, match="denied"):
        io.read(str(tmp_path / "a"))
    assert io.fetches == 1


def test_vended_options_win_over_the_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def capture(location: str, options: dict[str, str]) -> LocalFileIO:
        seen.append(options)
        return LocalFileIO()

    monkeypatch.setattr(vended, "get_file_io", capture)
    io = VendedFileIO(
        str(tmp_path),
        lambda: _token(6 * 3600, options={"s3.access-key": "vended", "s3.endpoint": "http://s3"}),
        {"s3.access-key": "mine", "s3.read-timeout": "5 s"},
    )
    io.exists(str(tmp_path / "a"))
    assert seen == [{"s3.access-key": "vended", "s3.endpoint": "http://s3", "s3.read-timeout": "5 s"}]
