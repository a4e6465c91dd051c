"""Named points of the commit protocol where a test can kill or freeze the committing process.

Crash and freeze tests need to stop a real process at an exact step of docs/DESIGN.md's commit
protocol, not at a random moment. The coordinator calls :func:`reached` at each :class:`CrashPoint`;
what happens there is chosen by environment variables of the committing process, so a test sets them
for a child process only:

``PAIMON_META_TEST_CRASH_AT=<point>[,<point>...]``
    At the first of these points the commit reaches, the process dies at once: no ``finally`` blocks,
    no lock release, no flushing (``os._exit``), like a power cut of that process. Postgres sees the
    connection drop and rolls back an open transaction; the lock row stays until its lease expires.
``PAIMON_META_TEST_CRASH_MODE=exit|kill``
    ``exit`` (default): ``os._exit(CRASH_EXIT_CODE)``, so a supervisor can tell a planned crash from
    other failures by the exit code. ``kill``: the process sends itself SIGKILL (exit status -9).
``PAIMON_META_TEST_PAUSE_AT=<point>[,<point>...]``
    At the first of these points the commit reaches, the process stops itself with SIGSTOP (the lock
    heartbeat thread included, as a GC pause or a frozen VM would) and continues when someone sends
    SIGCONT. A test sees the stop as state ``T`` in ``/proc/<pid>/stat``.

``PAIMON_META_TEST_POINT_HIT=<n>``
    Fire at the n-th time a listed point is reached in this process instead of the first (a service
    replica's n-th commit, say: in the middle of a group commit).

Each variable fires once per process (a restarted writer must set it again). With none set,
:func:`reached` is a dictionary lookup.
"""

from __future__ import annotations

import enum
import os
import signal
import sys
import threading

CRASH_AT_ENV = "PAIMON_META_TEST_CRASH_AT"
CRASH_MODE_ENV = "PAIMON_META_TEST_CRASH_MODE"
PAUSE_AT_ENV = "PAIMON_META_TEST_PAUSE_AT"
POINT_HIT_ENV = "PAIMON_META_TEST_POINT_HIT"

#: Exit status of a crash in ``exit`` mode.
CRASH_EXIT_CODE = 86


class CrashPoint(enum.StrEnum):
    """Where :func:`reached` is called, in protocol order (step numbers of docs/DESIGN.md)."""

    #: Step 2 done: the delta manifests are written; nothing is in Postgres yet.
    AFTER_MANIFESTS = "after_manifests"
    #: Steps 3-4 done: the ``prepared`` event is recorded, the lock is held and the event log is
    #: reconciled with storage; nothing is staged yet.
    AFTER_LOCK = "after_lock"
    #: Steps 7-8 done: lists staged (on local disk not yet fsynced), the lease validated; the
    #: publishing transaction is open (its row lock blocks takeovers until it ends, or the server
    #: ends it).
    BEFORE_PUBLISH = "before_publish"
    #: Step 9 done: ``snapshot-N`` is durable on storage; nothing about it is in Postgres yet.
    AFTER_SNAPSHOT = "after_snapshot"
    #: Step 11 done: ``snapshot_published`` and the pointer are committed and the lock released; the
    #: caller has not been told yet.
    AFTER_EVENT = "after_event"


_fired: set[str] = set()
_hits: dict[str, int] = {}


def _armed(env: str, point: CrashPoint) -> bool:
    value = os.environ.get(env)
    if not value or env in _fired:
        return False
    if point.value not in {p.strip() for p in value.split(",")}:
        return False
    _hits[env] = _hits.get(env, 0) + 1
    if _hits[env] < int(os.environ.get(POINT_HIT_ENV) or 1):
        return False
    _fired.add(env)
    return True


def reached(point: CrashPoint) -> None:
    """Crash or freeze here if this process was told to (see the module docstring)."""
    if _armed(PAUSE_AT_ENV, point):
        sys.stderr.write(f"paimon_meta: pausing at {point.value} (pid {os.getpid()})\n")
        sys.stderr.flush()
        # Sent to this thread, not the process: a process-directed SIGSTOP is taken by whichever thread
        # the kernel picks (often the main one), and until it starts the group stop the committing
        # thread runs on past this point (a service's worker thread could publish the event).
        signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
    if _armed(CRASH_AT_ENV, point):
        sys.stderr.write(f"paimon_meta: crashing at {point.value} (pid {os.getpid()})\n")
        sys.stderr.flush()
        if os.environ.get(CRASH_MODE_ENV, "exit") == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(CRASH_EXIT_CODE)
