"""The table writer processes commit to, spawning them and watching them (stopped state, exit codes)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Mapping, Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pyarrow as pa

import paimon_meta
from tests.integration import _workers
from tests.integration._workers import Target

ctx = multiprocessing.get_context("spawn")

Message = tuple[Any, ...]

#: ``db.t``, the table the writers commit to: partitioned by ``p``, 2 buckets.
SCHEMA = pa.schema(
    [pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False), ("v", pa.string())]
)


def create_target(url: str, warehouse: str, options: Mapping[str, str]) -> Target:
    """Create ``db.t`` through the metastore at ``url`` (catalog ``options``: lease, timeouts) and
    return where writers commit to it."""
    with paimon_meta.connect(url, warehouse, **options) as catalog:
        catalog.create_table("db.t", SCHEMA, partition_keys=["p"], options={"bucket": "2"})
    return Target(url, warehouse, options=options)


def start_writer(
    target: Target,
    user: str,
    identifiers: Sequence[int],
    out: multiprocessing.Queue[Message],
    *,
    env: Mapping[str, str] | None = None,
    file_names: Sequence[str] | None = None,
) -> BaseProcess:
    """A process running :func:`tests.integration._workers.commit_files`, started."""
    proc = ctx.Process(
        target=_workers.commit_files,
        args=(target, user, list(identifiers), out),
        kwargs={"env": dict(env or {}), "file_names": None if file_names is None else list(file_names)},
    )
    proc.start()
    return proc


def collect(
    out: multiprocessing.Queue[Message], procs: Sequence[BaseProcess], *, timeout: float
) -> list[Message]:
    """Messages until every process said ``done``; fails if one dies first or time runs out."""
    messages: list[Message] = []
    done = 0
    deadline = time.monotonic() + timeout
    while done < len(procs):
        try:
            msg = out.get(timeout=1.0)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"a writer died: exit codes {dead}"
            assert time.monotonic() < deadline, f"writers did not finish in {timeout}s"
            continue
        messages.append(msg)
        done += msg[0] == "done"
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    return messages


def wait_until_stopped(proc: BaseProcess, *, timeout: float = 60.0) -> None:
    """Block until ``proc`` stopped itself (SIGSTOP at a pause point): state ``T`` in /proc."""
    deadline = time.monotonic() + timeout
    stat = Path(f"/proc/{proc.pid}/stat")
    while time.monotonic() < deadline:
        assert proc.exitcode is None, f"the writer exited ({proc.exitcode}) instead of pausing"
        # the state follows the parenthesised command name
        if stat.read_text().rsplit(")", 1)[1].split()[0] in ("T", "t"):
            return
        time.sleep(0.02)
    raise AssertionError(f"process {proc.pid} did not stop within {timeout}s")


def resume(proc: BaseProcess) -> None:
    """Let a writer stopped at a pause point go on (SIGCONT)."""
    os.kill(proc.pid or 0, signal.SIGCONT)
