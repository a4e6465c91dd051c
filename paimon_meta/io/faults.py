"""Fault injection for any FileIO: make the k-th matching call fail (before or after it took effect),
or hold it until a test releases it. For torture and race tests of the commit path.

Example::

    fio = FaultInjectingFileIO(LocalFileIO())
    fio.fail_nth("create_if_absent", 1, path_contains="snapshot-", after_write=True)  # lost response
    gate = threading.Event()
    rule = fio.pause_on("write", "manifest-", gate)   # the next manifest write blocks ...
    ...; rule.reached.wait(5); ...; gate.set()        # ... until the test lets it go

Rules count only the calls they match (``op`` and, if given, ``path_contains`` as a substring of the
path); ``n`` is 1-based. Every call is counted in :meth:`FaultInjectingFileIO.calls` and recorded in
:attr:`FaultInjectingFileIO.history` whether or not a rule fired. Thread-safe: rule bookkeeping is
under one lock; the inner call and any pause run outside it.
"""

from __future__ import annotations

import builtins
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from paimon_meta.errors import FileIOError, ValidationError
from paimon_meta.io.base import Capabilities, FileIO, FileStatus

OPS = ("read", "write", "create_if_absent", "sync", "exists", "status", "list", "list_recursive", "delete")
"""The operation names rules and counters use (the FileIO method names). A ``sync`` call is one call
whose path is its paths joined by newlines (``path_contains`` matches any of them)."""

ExceptionFactory = Callable[[str, str], BaseException]
"""Builds the exception to raise from ``(op, path)``."""

_T = TypeVar("_T")


@dataclass(eq=False)
class FaultRule:
    """One installed rule, returned so a test can inspect or remove it.

    ``matched`` counts calls that matched ``op``/``path_contains``; ``fired`` counts the calls it
    affected; ``reached`` is set when it first fires (for a pause: once the call is blocked)."""

    op: str
    path_contains: str | None
    n: int
    times: int | None
    action: Literal["fail", "pause"]
    after: bool
    exc: BaseException | ExceptionFactory | None = None
    event: threading.Event | None = None
    timeout: float | None = None
    matched: int = 0
    fired: int = 0
    reached: threading.Event = field(default_factory=threading.Event)

    def _matches(self, op: str, path: str) -> bool:
        return op == self.op and (self.path_contains is None or self.path_contains in path)

    def _take(self) -> bool:
        """Count one matching call; whether this rule fires on it. Caller holds the lock."""
        self.matched += 1
        if self.matched < self.n or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


class FaultInjectingFileIO(FileIO):
    """Wraps ``inner`` and applies the installed rules to its calls; otherwise transparent."""

    def __init__(self, inner: FileIO) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._rules: builtins.list[FaultRule] = []
        self._counts: Counter[str] = Counter()
        self._history: builtins.list[tuple[str, str]] = []

    @property
    def inner(self) -> FileIO:
        """The wrapped FileIO (calls on it bypass the rules and the counters)."""
        return self._inner

    # -- rules ---------------------------------------------------------------------------------

    def fail_nth(
        self,
        op: str,
        n: int,
        *,
        path_contains: str | None = None,
        after_write: bool = False,
        exc: BaseException | ExceptionFactory | None = None,
        times: int | None = 1,
    ) -> FaultRule:
        """Fail the ``n``-th matching call (and the ``times - 1`` after it; ``times=None``: every one
        from the ``n``-th on). ``after_write=False``: raise instead of calling ``inner`` (the operation
        did not happen). ``after_write=True``: call ``inner`` first, then raise (the operation took
        effect but the caller sees an error, like a lost response); if ``inner`` itself raises, that
        error propagates instead. Default exception: ``FileIOError`` with ``fields["injected"]`` and,
        for ``after_write``, ``fields["outcome_unknown"] = True``."""
        return self._add(
            FaultRule(
                op=_check_op(op),
                path_contains=path_contains,
                n=_check_n(n),
                times=times,
                action="fail",
                after=after_write,
                exc=exc,
            )
        )

    def fail_always(
        self,
        op: str,
        *,
        path_contains: str | None = None,
        after_write: bool = False,
        exc: BaseException | ExceptionFactory | None = None,
    ) -> FaultRule:
        """Fail every matching call (see :meth:`fail_nth`)."""
        return self.fail_nth(op, 1, path_contains=path_contains, after_write=after_write, exc=exc, times=None)

    def pause_on(
        self,
        op: str,
        path_contains: str | None,
        event: threading.Event,
        *,
        n: int = 1,
        times: int | None = 1,
        after: bool = False,
        timeout: float | None = 60.0,
    ) -> FaultRule:
        """Block the ``n``-th matching call (and ``times - 1`` more) until ``event`` is set, before
        calling ``inner`` or, with ``after=True``, after it returned. ``rule.reached`` is set once a
        call is blocked. If ``timeout`` seconds pass unreleased, the call fails with ``FileIOError``
        (so a forgotten release fails the test instead of hanging it); ``None`` waits forever."""
        return self._add(
            FaultRule(
                op=_check_op(op),
                path_contains=path_contains,
                n=_check_n(n),
                times=times,
                action="pause",
                after=after,
                event=event,
                timeout=timeout,
            )
        )

    def remove(self, rule: FaultRule) -> None:
        """Uninstall one rule (no error if already gone)."""
        with self._lock:
            if rule in self._rules:
                self._rules.remove(rule)

    def clear(self) -> None:
        """Uninstall every rule; counters and history are kept."""
        with self._lock:
            self._rules.clear()

    def _add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    # -- observation ---------------------------------------------------------------------------

    def calls(self, op: str | None = None) -> int:
        """Calls made so far to ``op`` (all operations if None), faulted or not."""
        with self._lock:
            return self._counts[_check_op(op)] if op is not None else sum(self._counts.values())

    @property
    def history(self) -> builtins.list[tuple[str, str]]:
        """A copy of every ``(op, path)`` call in arrival order."""
        with self._lock:
            return builtins.list(self._history)

    # -- the FileIO surface --------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return self._inner.capabilities

    def read(self, path: str) -> bytes:
        return self._call("read", path, lambda: self._inner.read(path))

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        self._call("write", path, lambda: self._inner.write(path, data, durable=durable))

    def create_if_absent(
        self, path: str, data: bytes, *, durable: bool = True, sync_first: Sequence[str] = ()
    ) -> None:
        self._call(
            "create_if_absent",
            path,
            lambda: self._inner.create_if_absent(path, data, durable=durable, sync_first=sync_first),
        )

    def sync(self, paths: Sequence[str]) -> None:
        self._call("sync", "\n".join(paths), lambda: self._inner.sync(paths))

    def exists(self, path: str) -> bool:
        return self._call("exists", path, lambda: self._inner.exists(path))

    def status(self, path: str) -> FileStatus:
        return self._call("status", path, lambda: self._inner.status(path))

    def list(self, directory: str) -> list[FileStatus]:
        return self._call("list", directory, lambda: self._inner.list(directory))

    def list_recursive(self, directory: str) -> builtins.list[FileStatus]:
        return self._call("list_recursive", directory, lambda: self._inner.list_recursive(directory))

    def delete(self, path: str) -> None:
        self._call("delete", path, lambda: self._inner.delete(path))

    def prune_directories(self, directory: str) -> None:
        self._call("prune_directories", directory, lambda: self._inner.prune_directories(directory))

    def join(self, base: str, *parts: str) -> str:
        return self._inner.join(base, *parts)

    def close(self) -> None:
        self._inner.close()

    def _call(self, op: str, path: str, fn: Callable[[], _T]) -> _T:
        with self._lock:
            self._counts[op] += 1
            self._history.append((op, path))
            firing = [r for r in self._rules if r._matches(op, path) and r._take()]
        before = [r for r in firing if not r.after]
        after = [r for r in firing if r.after]
        _apply(before, op, path)
        result = fn()
        _apply(after, op, path)
        return result


def _apply(rules: builtins.list[FaultRule], op: str, path: str) -> None:
    """Pauses first (a paused call may still fail afterwards), then the first failure."""
    for rule in rules:
        if rule.action == "pause":
            rule.reached.set()
            if rule.event is not None and not rule.event.wait(rule.timeout):
                raise FileIOError(f"injected pause on {op} was not released", path=path, injected=True)
    for rule in rules:
        if rule.action == "fail":
            rule.reached.set()
            raise _exception(rule, op, path)


def _exception(rule: FaultRule, op: str, path: str) -> BaseException:
    if isinstance(rule.exc, BaseException):
        return rule.exc
    if rule.exc is not None:
        return rule.exc(op, path)
    if rule.after:
        return FileIOError(
            f"injected fault after {op} took effect", path=path, injected=True, outcome_unknown=True
        )
    return FileIOError(f"injected fault: {op} failed", path=path, injected=True, outcome_unknown=False)


def _check_op(op: str) -> str:
    if op not in OPS:
        raise ValidationError(f"unknown FileIO operation {op!r}; expected one of {', '.join(OPS)}", op=op)
    return op


def _check_n(n: int) -> int:
    if n < 1:
        raise ValidationError(f"n must be >= 1 (1-based call index), got {n}", n=n)
    return n
