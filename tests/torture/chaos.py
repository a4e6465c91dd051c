"""The chaos driver: N writer processes on one table, SIGKILLed and SIGSTOPped at random moments.

Sizes come from the environment (defaults are the small CI size; docs/TORTURE.md has the big one):

=====================================  =======  ===============================================
variable                               default  meaning
=====================================  =======  ===============================================
``PAIMON_META_TORTURE_WRITERS``        3        writer processes
``PAIMON_META_TORTURE_COMMITS``        12       identifiers per writer (0..K-1)
``PAIMON_META_TORTURE_KILLS``          3        SIGKILLs (the writer is restarted)
``PAIMON_META_TORTURE_STOPS``          2        SIGSTOPs (SIGCONT after lease + 0.3..1.5 s)
``PAIMON_META_TORTURE_LEASE``          2        ``lock.lease-seconds`` of every writer
``PAIMON_META_TORTURE_SEED``           random   seed of the chaos schedule (printed on failure)
``PAIMON_META_TORTURE_CRASHES``        2        writer starts armed with a random crash point
                                                (``PAIMON_META_TEST_CRASH_AT``: dies there)
``PAIMON_META_TORTURE_PAUSES``         2        writer starts armed with a random pause point
                                                (``PAIMON_META_TEST_PAUSE_AT``: SIGSTOPs itself
                                                there; SIGCONT after lease + 0.3..1.5 s)
``PAIMON_META_TORTURE_POINTS``         all      comma list of the crash/pause points to draw from
``PAIMON_META_TORTURE_RECOVERY_EVERY`` 3        seconds between concurrent recoveries (``recover_
                                                table`` with a grace of two leases); 0: none
``PAIMON_META_TORTURE_PACE_MS``        0        pause of each writer after each acknowledgement
``PAIMON_META_TORTURE_FOREIGN``        1        of the writers, how many commit without the
                                                metastore (storage guard, as Java/pypaimon would)
=====================================  =======  ===============================================

Chaos events fire at progress thresholds spread over 5%..80% of the total work (plus a random delay of
up to 400 ms, so they land at every phase of a commit), which guarantees they happen while writers run.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import paimon_meta
from paimon_meta.commit.crashpoints import (
    CRASH_AT_ENV,
    CRASH_EXIT_CODE,
    CRASH_MODE_ENV,
    PAUSE_AT_ENV,
    CrashPoint,
)
from paimon_meta.errors import CorruptMetadataError, PaimonMetaError
from paimon_meta.io import get_file_io
from paimon_meta.serde.json import snapshot_from_json
from tests.torture.journal import History, read_history
from tests.torture.workload import TABLE
from tests.torture.writer import WriterConfig

REPO_ROOT = Path(__file__).resolve().parents[2]


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


@dataclass(frozen=True)
class TortureSize:
    writers: int
    commits: int
    kills: int
    stops: int
    lease_seconds: int
    seed: int
    crashes: int = 0
    pauses: int = 0
    points: tuple[str, ...] = tuple(p.value for p in CrashPoint)
    recovery_every: float = 3.0
    pace_seconds: float = 0.0
    foreign_writers: int = 0

    @staticmethod
    def from_env() -> TortureSize:
        seed_text = os.environ.get("PAIMON_META_TORTURE_SEED", "").strip()
        points = os.environ.get("PAIMON_META_TORTURE_POINTS", "").strip()
        return TortureSize(
            writers=_env_int("PAIMON_META_TORTURE_WRITERS", 3),
            commits=_env_int("PAIMON_META_TORTURE_COMMITS", 12),
            kills=_env_int("PAIMON_META_TORTURE_KILLS", 3),
            stops=_env_int("PAIMON_META_TORTURE_STOPS", 2),
            lease_seconds=_env_int("PAIMON_META_TORTURE_LEASE", 2),
            seed=int(seed_text) if seed_text else random.randrange(2**31),
            crashes=_env_int("PAIMON_META_TORTURE_CRASHES", 2),
            pauses=_env_int("PAIMON_META_TORTURE_PAUSES", 2),
            points=tuple(CrashPoint(p.strip()) for p in points.split(",") if p.strip())
            or tuple(p.value for p in CrashPoint),
            recovery_every=float(os.environ.get("PAIMON_META_TORTURE_RECOVERY_EVERY", "").strip() or 3.0),
            pace_seconds=_env_int("PAIMON_META_TORTURE_PACE_MS", 0) / 1000,
            foreign_writers=_env_int("PAIMON_META_TORTURE_FOREIGN", 1),
        )

    def time_budget_seconds(self) -> float:
        """Generous wall-clock bound of one run (a hang fails instead of stalling CI)."""
        per_commit = 0.6 + self.pace_seconds
        chaos = (self.kills + self.stops + self.crashes + self.pauses) * (self.lease_seconds + 3)
        return 120 + self.writers * self.commits * per_commit + chaos


@dataclass(frozen=True)
class SeenSnapshot:
    """What the storage observer saw the first time it listed a snapshot file."""

    etag: str | None
    size: int
    sha256: str
    seen_at: float


class SnapshotObserver:
    """Polls the snapshot directory during the run and remembers every snapshot file's ETag and content
    hash the first time it is seen; any later difference (or disappearance) is a replaced snapshot."""

    def __init__(self, warehouse: str, options: Mapping[str, str], table_path: str, interval: float) -> None:
        self.file_io = get_file_io(warehouse, options)
        self.snapshot_dir = self.file_io.join(table_path, "snapshot")
        self.interval = interval
        self.seen: dict[str, SeenSnapshot] = {}
        self.violations: list[str] = []
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torture-observer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except PaimonMetaError:
                self.errors += 1  # a listing racing a write may fail; the next poll sees it

    def poll(self) -> None:
        self.polls += 1
        for status in self.file_io.list(self.snapshot_dir):
            name = status.path.rsplit("/", 1)[-1]
            if not name.startswith("snapshot-"):
                continue
            first = self.seen.get(name)
            if first is None:
                data = self.file_io.read(status.path)
                try:
                    snapshot_from_json(data, path=status.path)
                except CorruptMetadataError as e:  # snapshots are created whole, never torn
                    self.violations.append(f"{name} does not decode: {e}")
                self.seen[name] = SeenSnapshot(
                    status.etag, status.size, hashlib.sha256(data).hexdigest(), time.time()
                )
            elif (first.etag, first.size) != (status.etag, status.size):
                self.violations.append(
                    f"{name} replaced: first seen etag={first.etag} size={first.size}, "
                    f"now etag={status.etag} size={status.size}"
                )

    def final_check(self) -> list[str]:
        """Compare everything ever seen with storage now (call after the run)."""
        try:
            self.poll()
        except PaimonMetaError as e:
            self.violations.append(f"final listing failed: {e}")
        out = list(self.violations)
        current = {s.path.rsplit("/", 1)[-1]: s for s in self.file_io.list(self.snapshot_dir)}
        for name, first in sorted(self.seen.items()):
            status = current.get(name)
            if status is None:
                out.append(f"{name} was seen during the run and is gone")
                continue
            digest = hashlib.sha256(self.file_io.read(status.path)).hexdigest()
            if digest != first.sha256 or status.etag != first.etag:
                out.append(f"{name} content changed after it was first seen")
        return sorted(set(out))


class ConcurrentRecovery:
    """Runs recovery of the table every ``every`` seconds while the writers run, with a grace of two
    leases: commits of writers that are dead, frozen or just slow get finished or recorded under their
    feet, which exactly-once must survive."""

    def __init__(
        self, metastore_url: str, warehouse: str, options: Mapping[str, str], every: float, grace: float
    ) -> None:
        self.metastore_url = metastore_url
        self.warehouse = warehouse
        self.options = dict(options)
        self.every = every
        self.grace = grace
        self.runs = 0
        self.errors: list[str] = []
        self.untyped: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="torture-recovery", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)

    def _loop(self) -> None:
        from tests.torture.checker import recover

        with paimon_meta.connect(self.metastore_url, self.warehouse, **self.options) as catalog:
            while not self._stop.wait(self.every):
                try:
                    recover(catalog, TABLE, older_than_seconds=self.grace)
                    self.runs += 1
                except PaimonMetaError as e:
                    self.errors.append(f"{type(e).__name__}: {e}")
                except Exception as e:  # a finding: recovery should raise typed errors only
                    self.untyped.append(f"{type(e).__name__}: {e}")


def _process_state(pid: int) -> str | None:
    """The state letter of ``/proc/<pid>/stat`` (``T``: stopped), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


@dataclass
class _Proc:
    writer: int
    popen: subprocess.Popen[bytes] | None = None
    stopped_until: float | None = None
    restart_at: float | None = None
    done: bool = False
    starts: int = 0
    exit_codes: list[int] = field(default_factory=list)


@dataclass
class ChaosReport:
    size: TortureSize
    kills: int = 0
    stops: int = 0
    crash_exits: int = 0
    self_pauses: int = 0
    restarts: int = 0
    skipped_events: int = 0
    recoveries: int = 0
    server_actions: Counter[str] = field(default_factory=Counter)
    recovery_errors: list[str] = field(default_factory=list)
    recovery_untyped: list[str] = field(default_factory=list)
    unexpected_exits: list[str] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0
    histories: list[History] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def summary(self) -> str:
        s = self.size
        acked = sum(len(h.acks) for h in self.histories)
        dedup = sum(h.dedup_acks for h in self.histories)
        errors = sum(len(h.errors) for h in self.histories)
        return (
            f"seed={s.seed} writers={s.writers} ({s.foreign_writers} without metastore) "
            f"commits={s.commits} lease={s.lease_seconds}s: "
            f"{self.kills} kills, {self.stops} stops, {self.crash_exits} crash-point exits, "
            f"{self.self_pauses} pause-point stops, {self.restarts} restarts, {dict(self.server_actions)}, "
            f"{self.skipped_events} skipped events, {self.recoveries} concurrent recoveries "
            f"({len(self.recovery_errors)} failed), {acked} acks "
            f"({dedup} deduplicated), {errors} commit errors, {self.seconds:.1f}s"
        )


class ChaosRun:
    """Runs the writers to completion under chaos; the table must exist already."""

    def __init__(
        self,
        size: TortureSize,
        *,
        metastore_url: str,
        warehouse: str,
        options: Mapping[str, str],
        workdir: Path,
        server_actions: Mapping[str, tuple[int, Callable[[], None]]] | None = None,
    ) -> None:
        """``server_actions``: name -> (how many times, what to do), e.g. restarting Postgres; they are
        scheduled among the kills and stops."""
        self.size = size
        self.server_actions = dict(server_actions or {})
        self.rng = random.Random(size.seed)
        self.metastore_url = metastore_url
        self.warehouse = warehouse
        self.options = {
            **options,
            "lock.lease-seconds": str(size.lease_seconds),
            "lock.acquire-timeout-seconds": "60",
        }
        self.workdir = workdir
        self.procs = [_Proc(w) for w in range(size.writers)]
        self.report = ChaosReport(size)
        self.crashes_left = size.crashes
        self.pauses_left = size.pauses

    def journal_path(self, writer: int) -> Path:
        return self.workdir / f"journal-w{writer}.jsonl"

    def _log(self, message: str) -> None:
        self.report.log.append(f"{time.time():.3f} {message}")

    def _start(self, proc: _Proc) -> None:
        config_path = self.workdir / f"writer-w{proc.writer}.json"
        WriterConfig(
            writer=proc.writer,
            commits=self.size.commits,
            metastore_url=self.metastore_url,
            warehouse=self.warehouse,
            journal=str(self.journal_path(proc.writer)),
            options=dict(self.options),
            pace_seconds=self.size.pace_seconds,
            storage_guard=proc.writer >= self.size.writers - self.size.foreign_writers,
        ).dump(config_path)
        env = {k: v for k, v in os.environ.items() if k not in (CRASH_AT_ENV, PAUSE_AT_ENV, CRASH_MODE_ENV)}
        # Some starts die (or freeze) at a named step of the protocol instead of at a random moment.
        if self.crashes_left and self.rng.random() < 0.5:
            self.crashes_left -= 1
            env[CRASH_AT_ENV] = self.rng.choice(self.size.points)
        elif self.pauses_left and self.rng.random() < 0.5:
            self.pauses_left -= 1
            env[PAUSE_AT_ENV] = self.rng.choice(self.size.points)
        log = open(self.workdir / f"writer-w{proc.writer}.log", "ab")  # noqa: SIM115 - owned by Popen
        try:
            proc.popen = subprocess.Popen(
                [sys.executable, "-m", "tests.torture.writer", str(config_path)],
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        proc.starts += 1
        proc.restart_at = None
        self._log(
            f"start w{proc.writer} pid={proc.popen.pid} "
            f"crash_at={env.get(CRASH_AT_ENV)} pause_at={env.get(PAUSE_AT_ENV)}"
        )

    def _acked_total(self) -> int:
        return sum(len(read_history(p.writer, self.journal_path(p.writer)).acks) for p in self.procs)

    def _reap(self, now: float) -> None:
        for proc in self.procs:
            if proc.popen is None or proc.done:
                continue
            code = proc.popen.poll()
            if code is None:
                continue
            proc.exit_codes.append(code)
            pid = proc.popen.pid
            proc.popen = None
            proc.stopped_until = None
            if code == 0:
                proc.done = True
                self._log(f"w{proc.writer} pid={pid} finished")
                continue
            if code == -signal.SIGKILL:
                self._log(f"w{proc.writer} pid={pid} killed")
            elif code == CRASH_EXIT_CODE:
                self.report.crash_exits += 1
                self._log(f"w{proc.writer} pid={pid} died at its crash point")
            else:
                self.report.unexpected_exits.append(f"w{proc.writer} pid={pid} exit {code}")
                self._log(f"w{proc.writer} pid={pid} unexpected exit {code}")
            proc.restart_at = now + self.rng.uniform(0.0, 0.5)

    def _notice_self_pauses(self, now: float) -> None:
        """Writers that stopped themselves at a pause point get a SIGCONT after more than a lease."""
        for proc in self.procs:
            if proc.popen is None or proc.stopped_until is not None:
                continue
            if _process_state(proc.popen.pid) == "T":
                proc.stopped_until = now + self.size.lease_seconds + self.rng.uniform(0.3, 1.5)
                self.report.self_pauses += 1
                self._log(f"w{proc.writer} pid={proc.popen.pid} stopped itself at its pause point")

    def _runnable(self) -> list[_Proc]:
        return [p for p in self.procs if p.popen is not None and p.stopped_until is None and not p.done]

    def _chaos(self, event: str) -> bool:
        if event in self.server_actions:
            self._log(f"{event} begins")
            self.server_actions[event][1]()
            self.report.server_actions[event] += 1
            self._log(f"{event} done")
            return True
        targets = self._runnable()
        if not targets:
            return False
        if event == "stop" and any(p.stopped_until is not None for p in self.procs):
            return False  # one frozen writer at a time, so the others keep making progress
        proc = self.rng.choice(targets)
        assert proc.popen is not None
        try:
            if event == "kill":
                os.kill(proc.popen.pid, signal.SIGKILL)
                self.report.kills += 1
            else:
                os.kill(proc.popen.pid, signal.SIGSTOP)
                proc.stopped_until = time.monotonic() + self.size.lease_seconds + self.rng.uniform(0.3, 1.5)
                self.report.stops += 1
        except ProcessLookupError:
            return False
        self._log(f"{event} w{proc.writer} pid={proc.popen.pid}")
        return True

    def run(self) -> ChaosReport:
        size = self.size
        started = time.monotonic()
        deadline = started + size.time_budget_seconds()
        total = size.writers * size.commits
        events = ["kill"] * size.kills + ["stop"] * size.stops
        events += [name for name, (count, _) in self.server_actions.items() for _ in range(count)]
        self.rng.shuffle(events)
        n = len(events)
        thresholds = [int(total * (0.05 + 0.75 * (j + 1) / (n + 1))) for j in range(n)]
        next_event_at: float | None = None
        recovery = None
        if size.recovery_every > 0:
            recovery = ConcurrentRecovery(
                self.metastore_url,
                self.warehouse,
                self.options,
                size.recovery_every,
                grace=2.0 * size.lease_seconds,
            )
            recovery.start()
        for proc in self.procs:
            self._start(proc)
        try:
            while not all(p.done for p in self.procs):
                now = time.monotonic()
                if now > deadline:
                    self.report.timed_out = True
                    break
                self._reap(now)
                self._notice_self_pauses(now)
                for proc in self.procs:
                    if proc.stopped_until is not None and now >= proc.stopped_until and proc.popen:
                        os.kill(proc.popen.pid, signal.SIGCONT)
                        proc.stopped_until = None
                        self._log(f"cont w{proc.writer} pid={proc.popen.pid}")
                    due = proc.restart_at is not None and now >= proc.restart_at
                    if proc.popen is None and not proc.done and due:
                        self.report.restarts += 1
                        self._start(proc)
                if events:
                    if next_event_at is None and self._acked_total() >= thresholds[0]:
                        next_event_at = now + self.rng.uniform(0.0, 0.4)
                    if next_event_at is not None and now >= next_event_at:
                        if self._chaos(events[0]):
                            events.pop(0)
                            thresholds.pop(0)
                            next_event_at = None
                        elif all(p.done for p in self.procs):
                            break
                time.sleep(0.02)
        finally:
            for proc in self.procs:
                if proc.popen is not None and proc.popen.poll() is None:
                    os.kill(proc.popen.pid, signal.SIGCONT)
                    proc.popen.kill()
                    proc.popen.wait(30)
            if recovery is not None:
                recovery.stop()
                self.report.recoveries = recovery.runs
                self.report.recovery_errors = recovery.errors
                self.report.recovery_untyped = recovery.untyped
        self.report.skipped_events = len(events)
        self.report.seconds = time.monotonic() - started
        self.report.histories = [read_history(p.writer, self.journal_path(p.writer)) for p in self.procs]
        return self.report
