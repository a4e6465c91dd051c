"""A Spark standalone cluster on this machine: a master and workers as separate JVMs, started from
PySpark's own launch classes (``$SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master`` /
``...deploy.worker.Worker``), everything on 127.0.0.1 and free ports.

Each JVM runs in its own process group; a worker's executors and their Python workers are its children,
so :meth:`SparkCluster.stop` ends all of them by killing the three groups (SIGTERM, then SIGKILL).
Logs go to ``<log_dir>/{master,worker-N}.log``; :meth:`SparkCluster.logs` returns their tails.

Also a command line for ``make spark-cluster-test``::

    python -m tests.spark.cluster run -- pytest tests/spark -q

starts a cluster, runs the command with ``PAIMON_META_SPARK_MASTER`` set to the master URL (the ``spark``
session fixture then uses it instead of ``local[2,2]``) and stops the cluster, whatever the outcome.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

#: Set to a ``spark://`` URL, the test session's ``spark`` fixture runs on that cluster.
MASTER_ENV = "PAIMON_META_SPARK_MASTER"
#: The cluster's worker work dirs, ``os.pathsep``-separated (set by ``run`` next to the master URL).
WORKER_DIRS_ENV = "PAIMON_META_SPARK_WORKER_DIRS"
#: The cluster's master web UI, ``http://127.0.0.1:<port>`` (set by ``run``).
WEB_UI_ENV = "PAIMON_META_SPARK_WEB_UI"
REPO_ROOT = Path(__file__).resolve().parents[2]
_START_TIMEOUT_S = 90.0
_STOP_TIMEOUT_S = 10.0


def spark_home() -> str:
    """PySpark's package directory: it ships ``bin/spark-class`` and the jars."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the cluster's JVMs and of drivers connecting to it: this interpreter for the
    Python workers, loopback, the repository on ``PYTHONPATH`` (executors run in their work dirs)."""
    env = dict(os.environ if base is None else base)
    env["SPARK_HOME"] = spark_home()
    env["PYSPARK_PYTHON"] = env.get("PYSPARK_PYTHON") or sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = env.get("PYSPARK_DRIVER_PYTHON") or env["PYSPARK_PYTHON"]
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    paths = [str(REPO_ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def app_conf(master: str) -> dict[str, str]:
    """Spark conf for an application on the cluster: one core per executor, two executors (one per
    worker), 512 MB each (a worker of 1 GB then fits two applications' executors), and no job before
    both executors registered, so tasks really spread over the two workers."""
    return {
        "spark.master": master,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.executor.memory": "512m",
        "spark.task.maxFailures": "2",
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
        "spark.executorEnv.PYTHONPATH": cluster_env()["PYTHONPATH"],
    }


class ClusterStartError(RuntimeError):
    """The cluster did not come up; the message carries its logs."""


@dataclass
class SparkCluster:
    """A running standalone cluster (see the module docstring)."""

    master_url: str
    web_ui: str
    log_dir: Path
    worker_dirs: list[Path]
    _processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    @classmethod
    @contextlib.contextmanager
    def running(
        cls, log_dir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"
    ) -> Iterator[SparkCluster]:
        """Start a master and ``workers`` workers, wait until every worker registered, stop all at exit."""
        cluster = cls._launch(log_dir, workers=workers, cores=cores, memory=memory)
        try:
            cluster.wait_until_registered(workers)
            yield cluster
        finally:
            cluster.stop()

    @classmethod
    def _launch(cls, log_dir: Path, *, workers: int, cores: int, memory: str) -> SparkCluster:
        log_dir.mkdir(parents=True, exist_ok=True)
        port, ui_port = free_port(), free_port()
        master_url = f"spark://127.0.0.1:{port}"
        cluster = cls(master_url, f"http://127.0.0.1:{ui_port}", log_dir, [])
        try:
            cluster._spawn(
                "master",
                [
                    *("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)),
                    *("--webui-port", str(ui_port)),
                ],
            )
            for n in range(1, workers + 1):
                work_dir = log_dir / f"worker-{n}-work"
                work_dir.mkdir(exist_ok=True)
                cluster.worker_dirs.append(work_dir)
                cluster._spawn(
                    f"worker-{n}",
                    [
                        *("org.apache.spark.deploy.worker.Worker", master_url, "--cores", str(cores)),
                        *("--memory", memory, "--host", "127.0.0.1", "--port", str(free_port())),
                        *("--webui-port", str(free_port()), "--work-dir", str(work_dir)),
                    ],
                )
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        log: IO[bytes] = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
        env = cluster_env()
        # the daemons' own logs (and a spark-class that forks) land here, not in $SPARK_HOME
        env["SPARK_LOG_DIR"] = str(self.log_dir)
        env.setdefault("SPARK_DAEMON_MEMORY", "256m")
        with log:
            self._processes.append(
                subprocess.Popen(
                    [os.path.join(spark_home(), "bin", "spark-class"), *args],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.log_dir,
                    start_new_session=True,  # its own process group: stop() kills it with its children
                )
            )

    def state(self) -> dict[str, Any]:
        """The master's status (its web UI's ``/json/``)."""
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as response:
            status: dict[str, Any] = json.load(response)
            return status

    def wait_until_registered(self, workers: int, timeout: float = _START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer from the master's web UI"
        while time.monotonic() < deadline:
            dead = [p.args for p in self._processes if p.poll() is not None]
            if dead:
                raise ClusterStartError(f"a cluster process exited: {dead}\n{self.logs()}")
            try:
                alive = [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= workers:
                    return
                last = f"{len(alive)} of {workers} workers alive"
            except (OSError, ValueError) as e:
                # ValueError: an answer that is not the status JSON (seen once under load: the UI's HTML
                # page while it was starting); asked again until the timeout, which names the last one.
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.5)
        raise ClusterStartError(f"cluster not up after {timeout:.0f} s ({last})\n{self.logs()}")

    def stop(self) -> None:
        """Kill every process group (master, workers, their executors and Python workers)."""
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        for process in self._processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            # executors outlive a worker's SIGTERM briefly; the group goes either way
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)
        self._processes.clear()

    def logs(self, tail: int = 60) -> str:
        """The last ``tail`` lines of every log under the log dir (executors' stderr included)."""
        out = []
        for path in sorted(self.log_dir.rglob("*")):
            if path.is_file() and (path.suffix == ".log" or path.name in ("stderr", "stdout")):
                lines = path.read_text(errors="replace").splitlines()[-tail:]
                out.append(f"==> {path} <==\n" + "\n".join(lines))
        return "\n".join(out)


def write_defaults(conf_dir: Path, master: str) -> Path:
    """``<conf_dir>/spark-defaults.conf`` holding :func:`app_conf`: every driver started with
    ``SPARK_CONF_DIR=conf_dir`` (a job's subprocess, the demo) sizes its executors to share the
    workers with the test session's application instead of asking for Spark's default 1 GB executor,
    which a 1 GB worker already half used cannot give ("Initial job has not accepted any resources")."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "spark-defaults.conf"
    path.write_text("".join(f"{key} {value}\n" for key, value in sorted(app_conf(master).items())))
    return path


def _run(command: Sequence[str], workers: int, cores: int, memory: str) -> int:
    with tempfile.TemporaryDirectory(prefix="spark-cluster-") as tmp:
        failed = True
        try:
            with SparkCluster.running(Path(tmp), workers=workers, cores=cores, memory=memory) as cluster:
                print(f"spark cluster: {cluster.master_url} (web UI {cluster.web_ui})", flush=True)
                env = cluster_env()
                env["SPARK_CONF_DIR"] = str(write_defaults(Path(tmp) / "conf", cluster.master_url).parent)
                env[MASTER_ENV] = cluster.master_url
                env["SPARK_MASTER"] = cluster.master_url  # build_session's default (the demo, the jobs)
                env[WEB_UI_ENV] = cluster.web_ui
                env[WORKER_DIRS_ENV] = os.pathsep.join(str(d) for d in cluster.worker_dirs)
                code = subprocess.call(list(command), env=env)
                failed = code != 0
                if failed:
                    print(cluster.logs(), file=sys.stderr)
                return code
        except ClusterStartError as e:
            print(e, file=sys.stderr)
            return 2
        finally:
            if failed:
                print(f"spark cluster: logs were in {tmp}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.spark.cluster", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="start a cluster, run COMMAND against it, stop the cluster")
    # the session app and a test's own driver app each take one core per worker
    run.add_argument("--workers", type=int, default=2)
    run.add_argument("--cores", type=int, default=2)
    run.add_argument("--memory", default="1g")
    run.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("run needs a command, e.g. run -- pytest tests/spark -q")
    return _run(command, args.workers, args.cores, args.memory)


if __name__ == "__main__":
    sys.exit(main())
