"""Large compactions as the Spark compaction job (``spark_jobs.compaction``) on a configured cluster.

A worker given a Spark master (``serve --maintenance-spark-master``, ``maintain --spark-master``) runs the
compaction of a table holding at least ``paimon-meta.maintenance.compaction.spark-min-bytes`` (default
1 GiB) as ``python -m spark_jobs.compaction`` in a child process instead of in its own threads: the
rewrites run on the cluster's executors, the commit on the job's driver. The job is an ordinary writer of
the table: it commits through the metastore lock with the same conflict checks, and it is the job that
yields and re-plans on a conflict with a user commit (``table.compact``), as in-process maintenance does.

Invariants:

* The child is started by module name (no import: the package never imports ``spark_jobs``), opening
  the table exactly as the worker's catalog does: its warehouse and every catalog option (the catalog
  key among them) in a private option file removed afterwards, the metastore URL in its environment
  (storage keys and the database password never on a command line).
* Nothing is half done by a failure: the job either committed its COMPACT snapshot or left orphan files
  (the orphan scan removes them once old enough); a non-zero exit, a timeout (the child is killed) or an
  answer that is not the job's JSON fails the run with a typed error, so the queue retries it with
  backoff and finally dead-letters it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_meta.errors import PaimonMetaError

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog

#: The job's module (run with ``python -m``).
JOB_MODULE = "spark_jobs.compaction"
#: The keys of the job's JSON answer the run records.
RESULT_KEYS = (
    "snapshot_ids",
    "buckets",
    "conflicts",
    "rows_rewritten",
    "compacted_files",
    "written_files",
)


class SparkCompactionError(PaimonMetaError):
    """The Spark compaction job failed, timed out or answered something else than its JSON result
    (fields: ``table``, ``master``, ``exit_code``, ``output``: the end of what it printed)."""


@dataclass(frozen=True, slots=True)
class SparkCompaction:
    """Where and how large compactions run: ``master`` (``spark://host:7077``, ``yarn``, ``local[4]``),
    the Python that runs the job (default: this one; it needs ``pyspark`` and ``spark_jobs``), how long
    a job may take before it is killed, and extra environment for it (``PYSPARK_PYTHON``, ...)."""

    master: str
    python: str = sys.executable
    timeout_seconds: float = 3600.0
    env: dict[str, str] = field(default_factory=dict)


def compact_on_spark(catalog: MetastoreCatalog, identifier: str, spark: SparkCompaction) -> dict[str, Any]:
    """Run the compaction job for ``identifier`` and return its result (:data:`RESULT_KEYS`, plus
    ``engine`` and ``master``).

    Raises:
        SparkCompactionError: the job failed, timed out or its answer is not its JSON result.
    """
    url = catalog.engine.url.render_as_string(hide_password=False)
    with tempfile.TemporaryDirectory(prefix="paimon-meta-spark-") as private:
        option_file = os.path.join(private, "options")
        fd = os.open(option_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for key, value in sorted(catalog.options.items()):
                if "\n" in key or "\n" in value:
                    raise SparkCompactionError(
                        f"catalog option {key!r} holds a line break: it cannot be handed to the Spark job",
                        table=identifier,
                        master=spark.master,
                    )
                f.write(f"{key}={value}\n")
        command = [
            spark.python,
            "-m",
            JOB_MODULE,
            "--table",
            identifier,
            "--warehouse",
            catalog.warehouse,
            "--option-file",
            option_file,
            "--master",
            spark.master,
            "--json",
        ]
        env = {**os.environ, **spark.env, "PAIMON_META_URL": url}
        try:
            done = subprocess.run(
                command,
                env=env,
                capture_output=True,
                text=True,
                timeout=spark.timeout_seconds,
                check=False,
            )
        except OSError as e:  # the job's Python is missing or not executable
            raise SparkCompactionError(
                f"the Spark compaction of {identifier} could not start {spark.python}: {e}",
                table=identifier,
                master=spark.master,
                exit_code=None,
                output="",
            ) from None
        except subprocess.TimeoutExpired as e:
            raise SparkCompactionError(
                f"the Spark compaction of {identifier} took longer than {spark.timeout_seconds:g} s "
                "and was killed",
                table=identifier,
                master=spark.master,
                exit_code=None,
                output=_tail(e.stderr),
            ) from None
    if done.returncode != 0:
        output = _tail(done.stderr) or _tail(done.stdout)
        raise SparkCompactionError(
            f"the Spark compaction of {identifier} exited with {done.returncode}: {_last_line(output)}",
            table=identifier,
            master=spark.master,
            exit_code=done.returncode,
            output=output,
        )
    result = _result(done.stdout)
    if result is None:
        raise SparkCompactionError(
            f"the Spark compaction of {identifier} printed no result",
            table=identifier,
            master=spark.master,
            exit_code=0,
            output=_tail(done.stdout),
        )
    return {**{k: result[k] for k in RESULT_KEYS}, "engine": "spark", "master": spark.master}


def _result(stdout: str) -> dict[str, Any] | None:
    """The job's JSON result: its last line that is a JSON object holding every key."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and all(k in value for k in RESULT_KEYS):
            return value
        return None
    return None


def _last_line(output: str, limit: int = 300) -> str:
    """The job's last words: its last line naming an error (a Python or Java exception), else its last
    line, cut to ``limit`` characters (the run's message; the whole tail is in the error's fields)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line or "Exception" in line]
    last = (named or lines or ["(no output)"])[-1]
    return last[:limit]


def _tail(text: str | bytes | None, limit: int = 2000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return text[-limit:]
