"""Service replicas for chaos tests: ``paimon-meta serve`` subprocesses on one metastore and warehouse.

Unlike ``tests.fixtures.service.ServiceProcess`` (which forces a 5 s lease so crash tests end quickly),
a :class:`Replica` runs with the lock settings it is given, by default the product's (30 s lease): a
holder that fails to resolve its lock after a metastore restart then shows in the timeline as a wait of
a lease, far beyond the restart, instead of blending in. ``command_prefix`` runs the server through
another command (``ip netns exec <ns>``: a replica inside a network namespace).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.chaos.cluster import free_port

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Replica:
    """One ``paimon-meta serve`` process; :meth:`stop` sends SIGTERM (SIGKILL after ``timeout``)."""

    metastore_url: str
    warehouse: str
    log_path: Path
    options: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    command_prefix: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 60.0) -> Replica:
        env = {**os.environ, **self.env, "PAIMON_META_URL": self.metastore_url}
        env.pop("PAIMON_META_OPTIONS", None)
        if self.options:
            env["PAIMON_META_OPTIONS"] = ",".join(f"{k}={v}" for k, v in self.options.items())
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *self.command_prefix,
                    sys.executable,
                    *("-m", "paimon_meta.cli", "serve"),
                    *("--warehouse", self.warehouse),
                    *("--host", self.host, "--port", str(self.port)),
                    *("--drain-seconds", "5", "--log-level", "warning"),
                    # commits of these tests only: the exactly-once checks count every snapshot, and the
                    # service's own maintenance would add compactions (tests/maintenance runs it)
                    *("--maintenance-workers", "0"),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"replica exited {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        raise AssertionError(f"replica not ready in {timeout}s: {self.log_tail()}")

    def paused(self) -> bool:
        """Whether the process stopped itself (SIGSTOP at a crash point: state ``T``)."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        self.proc.send_signal(signal.SIGCONT)  # a replica stopped at a crash point handles it too
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def log_lines(self, *needles: str) -> list[str]:
        """The log lines containing any of ``needles``."""
        return [line for line in self.log_text().splitlines() if any(n in line for n in needles)]
