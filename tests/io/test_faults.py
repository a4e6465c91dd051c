"""FaultInjectingFileIO: k-th call failures, failures after the effect, pauses, counters."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from paimon_meta.errors import FileAlreadyExistsError, FileIOError, FileNotFound, ValidationError
from paimon_meta.io import FaultInjectingFileIO, LocalFileIO


@pytest.fixture
def fio() -> FaultInjectingFileIO:
    return FaultInjectingFileIO(LocalFileIO())


def test_nth_call_fails_before_taking_effect(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    rule = fio.fail_nth("write", 2)
    fio.write(f"{tmp_path}/a", b"a")
    with pytest.raises(FileIOError) as e:
        fio.write(f"{tmp_path}/b", b"b")
    assert e.value.fields == {"path": f"{tmp_path}/b", "injected": True, "outcome_unknown": False}
    fio.write(f"{tmp_path}/c", b"c")
    assert [p.name for p in sorted(tmp_path.iterdir())] == ["a", "c"]
    assert (rule.matched, rule.fired) == (3, 1)
    assert rule.reached.is_set()


def test_path_filter_counts_only_matching_calls(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    fio.fail_nth("create_if_absent", 2, path_contains="snapshot-")
    fio.create_if_absent(f"{tmp_path}/manifest-1", b"m")
    fio.create_if_absent(f"{tmp_path}/snapshot-1", b"s")
    fio.create_if_absent(f"{tmp_path}/manifest-2", b"m")
    with pytest.raises(FileIOError):
        fio.create_if_absent(f"{tmp_path}/snapshot-2", b"s")
    assert not fio.exists(f"{tmp_path}/snapshot-2")


def test_after_write_takes_effect_then_fails(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    path = f"{tmp_path}/snapshot/snapshot-3"
    fio.fail_nth("create_if_absent", 1, after_write=True)
    with pytest.raises(FileIOError) as e:
        fio.create_if_absent(path, b"landed")
    assert e.value.fields["outcome_unknown"] is True
    assert fio.read(path) == b"landed"
    with pytest.raises(FileAlreadyExistsError):  # a blind retry finds its own file
        fio.create_if_absent(path, b"landed")


def test_deferred_durability_is_passed_through(tmp_path: Path) -> None:
    calls: list[tuple[str, object]] = []

    class Inner(LocalFileIO):
        def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
            calls.append(("write", durable))
            super().write(path, data, durable=durable)

        def create_if_absent(
            self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
        ) -> None:
            calls.append(("create_if_absent", (durable, list(sync_first))))
            super().create_if_absent(path, data, durable=durable, sync_first=sync_first)

        def sync(self, paths: Sequence[str]) -> None:
            calls.append(("sync", list(paths)))
            super().sync(paths)

    fio = FaultInjectingFileIO(Inner())
    m1, m2, snap = f"{tmp_path}/manifest-1", f"{tmp_path}/manifest-2", f"{tmp_path}/snapshot-1"
    fio.create_if_absent(m1, b"m", durable=False)
    fio.create_if_absent(m2, b"m", durable=False)
    fio.sync([m1])
    fio.create_if_absent(snap, b"s", sync_first=[m2])
    fio.write(f"{tmp_path}/LATEST", b"1", durable=False)
    assert calls == [
        ("create_if_absent", (False, [])),
        ("create_if_absent", (False, [])),
        ("sync", [m1]),
        ("create_if_absent", (True, [m2])),
        ("write", False),
    ]
    assert fio.calls("sync") == 1
    # rules still apply: a sync is one call, matched on any of its paths
    fio.fail_nth("sync", 1, path_contains="manifest-2")
    with pytest.raises(FileIOError):
        fio.sync([m1, m2])
    assert fio.history[-1] == ("sync", f"{m1}\n{m2}")


def test_after_write_lets_the_inner_error_through(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    rule = fio.fail_nth("read", 1, after_write=True)
    with pytest.raises(FileNotFound):
        fio.read(f"{tmp_path}/absent")
    assert rule.fired == 1


def test_times_and_fail_always_and_remove(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    fio.write(f"{tmp_path}/f", b"x")
    twice = fio.fail_nth("exists", 2, times=2)
    outcomes: list[bool | str] = []
    for _ in range(5):
        try:
            outcomes.append(fio.exists(f"{tmp_path}/f"))
        except FileIOError:
            outcomes.append("err")
    assert outcomes == [True, "err", "err", True, True]
    fio.remove(twice)
    always = fio.fail_always("list")
    for _ in range(3):
        with pytest.raises(FileIOError):
            fio.list(str(tmp_path))
    fio.remove(always)
    assert [s.path for s in fio.list(str(tmp_path))] == [f"{tmp_path}/f"]
    fio.fail_always("delete")
    fio.clear()
    fio.delete(f"{tmp_path}/f")


def test_custom_exceptions(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    boom = TimeoutError("boom")
    fio.fail_nth("status", 1, exc=boom)
    fio.fail_nth("read", 1, exc=lambda op, path: FileNotFound(f"gone during {op}", path=path))
    with pytest.raises(TimeoutError) as e:
        fio.status(f"{tmp_path}/x")
    assert e.value is boom
    with pytest.raises(FileNotFound, match="gone during read"):
        fio.read(f"{tmp_path}/x")


def test_counters_and_history(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    fio.fail_nth("read", 1)
    fio.write(f"{tmp_path}/a", b"a")
    with pytest.raises(FileIOError):
        fio.read(f"{tmp_path}/a")
    fio.read(f"{tmp_path}/a")
    fio.list_recursive(str(tmp_path))
    assert (fio.calls("read"), fio.calls("write"), fio.calls("delete"), fio.calls()) == (2, 1, 0, 4)
    assert fio.history == [
        ("write", f"{tmp_path}/a"),
        ("read", f"{tmp_path}/a"),
        ("read", f"{tmp_path}/a"),
        ("list_recursive", str(tmp_path)),
    ]
    fio.inner.read(f"{tmp_path}/a")  # bypasses the wrapper
    assert fio.calls("read") == 2


def test_bad_rules_are_rejected(fio: FaultInjectingFileIO) -> None:
    with pytest.raises(ValidationError, match="rename"):
        fio.fail_nth("rename", 1)
    with pytest.raises(ValidationError):
        fio.fail_nth("read", 0)
    with pytest.raises(ValidationError):
        fio.calls("copy")


def test_capabilities_and_join_are_delegated(fio: FaultInjectingFileIO) -> None:
    assert fio.capabilities == LocalFileIO().capabilities
    assert fio.join("/w", "a") == "/w/a"


def _in_thread(fn: object) -> tuple[threading.Thread, list[object]]:
    result: list[object] = []

    def run() -> None:
        try:
            result.append(fn())  # type: ignore[operator]
        except Exception as e:
            result.append(e)

    t = threading.Thread(target=run)
    t.start()
    return t, result


def test_pause_before_blocks_until_released(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    gate = threading.Event()
    path = f"{tmp_path}/snapshot-1"
    rule = fio.pause_on("create_if_absent", "snapshot-", gate)
    t, result = _in_thread(lambda: fio.create_if_absent(path, b"slow"))
    assert rule.reached.wait(5)
    assert not fio.exists(path)  # paused before the effect
    fio.create_if_absent(path, b"fast")  # only the first matching call pauses
    gate.set()
    t.join(5)
    assert isinstance(result[0], FileAlreadyExistsError)
    assert fio.read(path) == b"fast"


def test_pause_after_holds_the_response(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    gate = threading.Event()
    path = f"{tmp_path}/LATEST"
    rule = fio.pause_on("write", None, gate, after=True)
    t, result = _in_thread(lambda: fio.write(path, b"7"))
    assert rule.reached.wait(5)
    assert fio.read(path) == b"7"  # written, but the writer has not returned
    assert t.is_alive()
    gate.set()
    t.join(5)
    assert result == [None]


def test_unreleased_pause_times_out(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    fio.pause_on("read", None, threading.Event(), timeout=0.05)
    with pytest.raises(FileIOError, match="not released"):
        fio.read(f"{tmp_path}/x")


def test_rules_fire_exactly_once_under_concurrency(fio: FaultInjectingFileIO, tmp_path: Path) -> None:
    fio.write(f"{tmp_path}/f", b"x")
    rule = fio.fail_nth("read", 100)
    errors: list[Exception] = []
    lock = threading.Lock()

    def reader() -> None:
        for _ in range(50):
            try:
                fio.read(f"{tmp_path}/f")
            except FileIOError as e:
                with lock:
                    errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 1
    assert (rule.matched, rule.fired, fio.calls("read")) == (400, 1, 400)
