"""Benchmark of the commit service (``paimon-meta serve``): what committing through it costs pypaimon,
how it holds up under writers contending for one table, and what HTTP adds over our in-process commit.

Measured side by side in one run, on one scratch metastore and one local warehouse:

(a) **pypaimon 2.1.0, sequential commits, through the service vs its filesystem catalog.** Unmodified
    pypaimon (its own venv, ``.venv-pypaimon``, run as a subprocess) creates an append table (``p`` int
    partition, ``bucket = 1``) once on a REST catalog pointed at the service and once on its own
    filesystem catalog, then commits ``--commits`` times one row each, a new batch write builder per
    commit. Timed: ``commit.commit(messages)`` alone, and write + prepare + commit. Reported: medians over
    commits 11-20, 191-200 and 991-1000, those that fit, and the last ten (the snapshot id is the commit
    number).

(b) **``--writers`` pypaimon processes on one table through the service**, each committing
    ``--writer-commits`` batches (a new write builder per commit), all released together. Reported:
    commits/s (first release to last acknowledgement), and how many commit POSTs the service answered
    ``success: false`` (the base moved: pypaimon rebuilds on the new latest snapshot and retries), counted
    from the event log (``failed`` events with ``error_type = CommitConflict``) against the published
    count. The writers raise ``commit.max-retries`` to ``--writer-max-retries`` (200; pypaimon's default
    10 lets a writer give up when it loses 11 rounds in a row); the retry waits are pypaimon's defaults
    (10 ms doubling up to 10 s, up to 20% jitter). Run with one replica and, with ``--replicas N`` > 1,
    again with N replicas (the writers spread round-robin). A commit pypaimon gives up on is counted and
    reported, not fatal.

(c) **The service's added latency per commit**: our own REST commit path
    (``SnapshotCommitter.commit()``, what the commit route calls) in-process vs the same requests over
    HTTP to the service (keep-alive connection, and a new connection per commit as pypaimon does).
    Requests are built as in ``tests/service/helpers.py`` ``commit_body`` (each snapshot an empty table
    on the previous one: the same metastore work as any REST commit, no manifest IO by the client). Each
    variant has its own table; ``--commits`` commits each, sequential, medians over the same windows.

Usage::

    python bench/bench_rest_service.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                       [--commits 1000] [--writers 8] [--writer-commits 25]
                                       [--writer-max-retries 200] [--replicas 2]
                                       [--no-pypaimon] [--json PATH]

``--no-pypaimon`` runs (c) only. The URL (else ``$PAIMON_META_TEST_DSN``) names a server to create a
scratch database on; it is dropped at the end. Servers run as ``python -m paimon_meta.cli serve`` with the
default lock settings and are stopped with SIGTERM. The load average is printed before, between the parts
and after: the numbers are only comparable at a similar load. The last line printed is a JSON summary;
``--json PATH`` also writes it with every raw latency.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_commit import PYPAIMON_PYTHON, load, scratch_database, window_median  # noqa: E402

import paimon_meta  # noqa: E402
from paimon_meta.catalog.metastore import MetastoreCatalog  # noqa: E402
from paimon_meta.commit.metastore.snapshot_commit import SnapshotCommitRequest  # noqa: E402
from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.metastore.principals import Principals  # noqa: E402
from paimon_meta.serde.json import snapshot_from_json  # noqa: E402
from paimon_meta.table.snapshots import SnapshotManager  # noqa: E402
from paimon_meta.table.table import FileStoreTable  # noqa: E402
from tests.service.helpers import P, commit_body, seed  # noqa: E402

WINDOWS = ((11, 20), (191, 200), (991, 1000))
PRINCIPAL = "bench"
SERVE = (sys.executable, "-m", "paimon_meta.cli", "serve")

#: One pypaimon program, its mode in the JSON config (argv[1]):
#: ``sequential``: create db.<table> (append, p partition, bucket 1) and commit ``commits`` one-row batches;
#: ``writer``: print "ready", wait for the ``go`` file, commit ``commits`` batches to the existing table.
PYPAIMON_SCRIPT = r"""
import json, os, sys, time
import pyarrow as pa
from pypaimon import CatalogFactory, Schema

cfg = json.loads(sys.argv[1])
SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("p", pa.int32(), nullable=False),
                    ("v", pa.string())])

def batch(w, n):
    return pa.table({"k": pa.array([n], pa.int32()), "p": pa.array([0], pa.int32()), "v": [f"{w}-{n}"]},
                    schema=SCHEMA)

catalog = CatalogFactory.create(cfg["catalog"])
if cfg["mode"] == "sequential":
    catalog.create_database("db", True)
    catalog.create_table(cfg["table"], Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["p"], options={"bucket": "1", "bucket-key": "k"}), False)
table = catalog.get_table(cfg["table"])
if cfg["mode"] == "writer":
    table = table.copy({"commit.max-retries": str(cfg["max_retries"])})
    print("ready", flush=True)
    deadline = time.monotonic() + 300
    while not os.path.exists(cfg["go"]):
        if time.monotonic() > deadline:
            raise SystemExit("the go file never appeared")
        time.sleep(0.002)
commit_ms, total_ms, errors = [], [], []
for n in range(cfg["commits"]):
    t0 = time.perf_counter()
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(batch(cfg.get("writer", 0), n))
    messages = w.prepare_commit()
    t1 = time.perf_counter()
    try:
        c.commit(messages)
    except Exception as e:  # reported, not fatal: the run's other numbers still mean something
        errors.append(repr(e)[:500])
    t2 = time.perf_counter()
    w.close(); c.close()
    commit_ms.append((t2 - t1) * 1000)
    total_ms.append((t2 - t0) * 1000)
print(json.dumps({"commit_ms": commit_ms, "write_commit_ms": total_ms, "errors": errors, "end": time.time()}))
"""


# ---- servers -------------------------------------------------------------------------------------------


@dataclass
class Server:
    """One ``paimon-meta serve`` process on 127.0.0.1."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    url: str, warehouse: str, log_dir: Path, timeout: float = 60.0, extra: Sequence[str] = ()
) -> Server:
    port = free_port()
    log_path = log_dir / f"serve-{port}.log"
    env = {k: v for k, v in os.environ.items() if k != "PAIMON_META_OPTIONS"}  # default lock settings
    env["PAIMON_META_URL"] = url
    # the commits measured only: the service's own maintenance would add compactions to the counts (an
    # older revision's serve ignores the variable)
    env.setdefault("PAIMON_META_SERVE_MAINTENANCE_WORKERS", "0")
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [*SERVE, "--warehouse", warehouse, "--port", str(port), "--log-level", "warning", *extra],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
    server = Server(port, proc, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.uri}/readyz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop_server(server)
    raise RuntimeError(f"server not ready in {timeout} s:\n{server.log_tail()}")


def stop_server(server: Server) -> None:
    if server.proc.poll() is not None:
        return
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(30)


@contextmanager
def servers(
    url: str, warehouse: str, log_dir: Path, count: int, extra: Sequence[str] = ()
) -> Iterator[list[Server]]:
    """``count`` replicas on one metastore and warehouse (``extra``: more ``serve`` arguments), stopped
    (SIGTERM) at the end."""
    started: list[Server] = []
    try:
        for _ in range(count):
            started.append(start_server(url, warehouse, log_dir, extra=extra))
        yield started
    finally:
        for s in started:
            stop_server(s)


def rest_options(server: Server, token: str) -> dict[str, str]:
    return {
        "metastore": "rest",
        "uri": server.uri,
        "warehouse": "paimon",
        "token.provider": "bear",
        "token": token,
    }


# ---- (c) in-process vs HTTP -------------------------------------------------------------------------------


def next_base(body: dict[str, Any]) -> Any:
    """The snapshot a committed ``body`` created: the base of the next request."""
    return snapshot_from_json(json.dumps(body["snapshot"]))


def inprocess_commits(
    catalog: MetastoreCatalog, identifier: str, commits: int
) -> tuple[list[float], list[float]]:
    """(``commit()`` alone, the route's work: table row + committer + ``commit()``) per commit, ms."""
    base = seed(catalog, identifier)
    row = catalog.table_row(identifier)
    location = row.location or catalog.table_location(row.database, row.name)
    snapshots = SnapshotManager(catalog.file_io, location)
    schema = FileStoreTable.load(catalog.file_io, location).schema
    table = FileStoreTable(catalog.file_io, location, schema, snapshot_manager=snapshots)
    commit_only, route = [], []
    for _ in range(commits):
        body = commit_body(base)
        snapshot = next_base(body)
        t0 = time.perf_counter()
        row = catalog.table_row(identifier)
        committer = catalog.snapshot_committer(row, table)
        request = SnapshotCommitRequest(body["baseSnapshotUuid"], snapshot, [])
        t1 = time.perf_counter()
        result = committer.commit(request)
        t2 = time.perf_counter()
        if not result.success:
            raise RuntimeError(f"in-process commit refused: {result.reason}")
        commit_only.append((t2 - t1) * 1000)
        route.append((t2 - t0) * 1000)
        base = snapshot
    return commit_only, route


def http_commits(
    catalog: MetastoreCatalog, server: Server, token: str, table: str, commits: int, *, keep_alive: bool
) -> list[float]:
    """The same requests POSTed to the service (body serialized beforehand, no Content-Type as pypaimon
    sends), ms from send to parsed answer."""
    base = seed(catalog, f"db.{table}")
    url = f"{server.uri}{P}/databases/db/tables/{table}"
    headers = {"Authorization": f"Bearer {token}"}
    latencies = []
    # No keep-alive: the client (and its setup) is reused, the TCP connection is not.
    limits = httpx.Limits() if keep_alive else httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(headers=headers, timeout=120, limits=limits) as client:
        table_id = client.get(url).raise_for_status().json()["id"]
        for _ in range(commits):
            body = commit_body(base, _table_id=table_id)
            content = json.dumps(body).encode("utf-8")
            t0 = time.perf_counter()
            response = client.post(f"{url}/commit", content=content)
            answer = response.raise_for_status().json()
            latencies.append((time.perf_counter() - t0) * 1000)
            if answer.get("success") is not True:
                raise RuntimeError(f"HTTP commit refused: {answer}")
            base = next_base(body)
    return latencies


def bench_overhead(
    catalog: MetastoreCatalog, server: Server, token: str, commits: int
) -> dict[str, list[float]]:
    commit_only, route = inprocess_commits(catalog, "db.c_inprocess", commits)
    return {
        "in-process commit()": commit_only,
        "in-process row + committer + commit()": route,
        "HTTP, keep-alive": http_commits(catalog, server, token, "c_http", commits, keep_alive=True),
        "HTTP, new connection": http_commits(catalog, server, token, "c_http_new", commits, keep_alive=False),
    }


# ---- (a), (b) pypaimon ---------------------------------------------------------------------------------


def write_script(tmp: Path) -> Path:
    path = tmp / "pypaimon_bench.py"
    path.write_text(PYPAIMON_SCRIPT)
    return path


def run_pypaimon(script: Path, cfg: dict[str, Any], log_dir: Path) -> dict[str, Any]:
    """Run the pypaimon program to completion; its last stdout line, a JSON object."""
    done = subprocess.run(
        [str(PYPAIMON_PYTHON), str(script), json.dumps(cfg)],
        check=False,
        capture_output=True,
        text=True,
        cwd=log_dir,  # never import this repository by accident
    )
    if done.returncode != 0:
        raise RuntimeError(f"pypaimon exited {done.returncode}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_sequential(
    script: Path, server: Server, token: str, *, fs_warehouse: str, commits: int, tmp: Path
) -> dict[str, dict[str, Any]]:
    results = {}
    for label, catalog in (
        ("service (REST)", rest_options(server, token)),
        ("filesystem", {"warehouse": fs_warehouse}),
    ):
        cfg = {"mode": "sequential", "catalog": catalog, "table": "db.seq", "commits": commits}
        before = request_metrics(server)
        results[label] = run_pypaimon(script, cfg, tmp)
        if label == "service (REST)":
            after = request_metrics(server)
            results[label]["requests"] = metrics_delta(before, after)
        print(f"pypaimon sequential, {label} done: {load()}", flush=True)
    return results


def metrics_delta(
    before: Mapping[str, tuple[float, float]], after: Mapping[str, tuple[float, float]]
) -> dict[str, list[float]]:
    """``"METHOD route"`` -> [requests, seconds] between two scrapes (routes that got requests)."""
    out = {}
    for key, (n, secs) in after.items():
        n0, secs0 = before.get(key, (0.0, 0.0))
        if n > n0:
            out[key] = [n - n0, secs - secs0]
    return out


def summed_metrics(replicas: Sequence[Server]) -> dict[str, tuple[float, float]]:
    total: dict[str, tuple[float, float]] = {}
    for server in replicas:
        for key, (n, secs) in request_metrics(server).items():
            n0, secs0 = total.get(key, (0.0, 0.0))
            total[key] = (n0 + n, secs0 + secs)
    return total


#: The bench principal's token for ``/metrics`` (it needs an admin grant); set in ``main``.
METRICS_AUTH: dict[str, str] = {}


def request_metrics(server: Server) -> dict[str, tuple[float, float]]:
    """``"METHOD route"`` -> (requests, seconds) so far, from the server's own request histogram."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, tuple[float, float]] = {}
    scrape = httpx.get(f"{server.uri}/metrics", headers=METRICS_AUTH, timeout=30)
    scrape.raise_for_status()
    for family in text_string_to_metric_families(scrape.text):
        if family.name != "paimon_meta_service_request_seconds":
            continue
        for sample in family.samples:
            if sample.labels["route"] == "/metrics":
                continue
            key = f"{sample.labels['method']} {sample.labels['route']}"
            count, total = out.get(key, (0.0, 0.0))
            if sample.name.endswith("_count"):
                out[key] = (count + sample.value, total)
            elif sample.name.endswith("_sum"):
                out[key] = (count, total + sample.value)
    return out


def commit_events(catalog: MetastoreCatalog, identifier: str) -> dict[str, int]:
    """The table's published commits and the commits the service answered ``success: false``."""
    with catalog.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT count(*) FILTER (WHERE event_type = 'snapshot_published'), "
                "count(*) FILTER (WHERE event_type = 'failed' "
                "AND payload->>'error_type' = 'CommitConflict'), "
                "count(*) FILTER (WHERE event_type = 'conflict_checked' AND payload->>'conflict' = 'true'), "
                "count(*) FILTER (WHERE event_type = 'failed' "
                "AND coalesce(payload->>'error_type', '') <> 'CommitConflict') "
                "FROM paimon_commit_events WHERE table_identifier = :t"
            ),
            {"t": identifier},
        ).one()
    return {"published": row[0], "conflicts": row[1], "conflict_checked": row[2], "other_failures": row[3]}


def bench_writers(
    script: Path,
    catalog: MetastoreCatalog,
    replicas: Sequence[Server],
    token: str,
    *,
    writers: int,
    commits: int,
    max_retries: int,
    tmp: Path,
) -> dict[str, Any]:
    table = f"w{len(replicas)}"
    identifier = f"db.{table}"
    run_pypaimon(
        script,
        {
            "mode": "sequential",
            "catalog": rest_options(replicas[0], token),
            "table": identifier,
            "commits": 0,
        },
        tmp,
    )
    go = tmp / f"go-{table}"
    procs = []
    for w in range(writers):
        cfg = {
            "mode": "writer",
            "catalog": rest_options(replicas[w % len(replicas)], token),
            "table": identifier,
            "commits": commits,
            "writer": w,
            "go": str(go),
            "max_retries": max_retries,
        }
        with (tmp / f"writer-{table}-{w}.err").open("w") as err:
            procs.append(
                subprocess.Popen(
                    [str(PYPAIMON_PYTHON), str(script), json.dumps(cfg)],
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                    cwd=tmp,
                )
            )
    before = summed_metrics(replicas)
    try:
        for w, p in enumerate(procs):
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                p.wait(60)
                raise RuntimeError(f"writer {w} exited {p.returncode}:\n{writer_err(tmp, table, w)}")
        start = time.time()
        go.touch()
        outs = []
        for w, p in enumerate(procs):
            out, _ = p.communicate(timeout=3600)
            if p.returncode != 0:
                raise RuntimeError(f"writer {w} exited {p.returncode}:\n{writer_err(tmp, table, w)}")
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(30)
    wall = max(o["end"] for o in outs) - start
    requests = metrics_delta(before, summed_metrics(replicas))
    latencies = [x for o in outs for x in o["commit_ms"]]
    errors = [e for o in outs for e in o["errors"]]
    events = commit_events(catalog, identifier)
    latest = catalog.get_table(identifier).latest_snapshot()
    posts = events["published"] + events["conflicts"]
    return {
        "replicas": len(replicas),
        "writers": writers,
        "commits_per_writer": commits,
        "max_retries": max_retries,
        "wall_s": wall,
        "commits_per_s": events["published"] / wall,
        **events,
        "latest_snapshot_id": None if latest is None else latest.id,
        "success_false_share": events["conflicts"] / posts if posts else 0.0,
        "success_false_per_published": events["conflicts"] / events["published"]
        if events["published"]
        else 0.0,
        "server_requests": requests,
        "client_errors": errors,
        "latencies_ms": latencies,
    }


def writer_err(tmp: Path, table: str, w: int) -> str:
    return (tmp / f"writer-{table}-{w}.err").read_text(errors="replace")[-3000:]


# ---- report --------------------------------------------------------------------------------------------


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def windows(commits: int) -> list[tuple[int, int]]:
    """The fixed windows that fit in ``commits``, plus the last ten commits (when that is not one of
    them); 1-``commits`` when none fits."""
    spans = [(f, lst) for f, lst in WINDOWS if lst <= commits]
    if commits >= 30 and (commits - 9, commits) not in spans:
        spans.append((commits - 9, commits))
    return spans or [(1, commits)]


def windows_of(latencies: Sequence[float]) -> dict[str, float]:
    out: dict[str, float] = {}
    if not latencies:
        return out
    for first, last in windows(len(latencies)):
        m = window_median(latencies, first, last)
        if m is not None:
            out[f"{first}-{last}"] = m
    out["all"] = statistics.median(latencies)
    return out


def table_lines(columns: Mapping[str, Sequence[float]], commits: int) -> list[str]:
    lines = ["| commits | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for first, last in windows(commits):
        cells = [window_median(v, first, last) for v in columns.values()]
        lines.append(
            f"| median {first}-{last} | "
            + " | ".join("-" if c is None else f"{c:.2f} ms" for c in cells)
            + " |"
        )
    lines.append(
        "| median all | " + " | ".join(f"{statistics.median(v):.2f} ms" for v in columns.values()) + " |"
    )
    lines.append("| max | " + " | ".join(f"{max(v):.1f} ms" for v in columns.values()) + " |")
    return lines


def comparison_lines(
    a_label: str, a: Sequence[float], b_label: str, b: Sequence[float], commits: int
) -> list[str]:
    out = []
    for first, last in windows(commits):
        x, y = window_median(a, first, last), window_median(b, first, last)
        if x is not None and y is not None:
            out.append(f"{a_label} / {b_label} at {first}-{last}: {x / y:.2f}x ({x - y:+.2f} ms)")
    return out


def report_overhead(results: dict[str, list[float]], commits: int) -> list[str]:
    http, inproc = results["HTTP, keep-alive"], results["in-process commit()"]
    new_conn = results["HTTP, new connection"]
    route = results["in-process row + committer + commit()"]
    return [
        f"### (c) Added latency of the service: our REST commit in-process vs over HTTP "
        f"({commits} commits each)",
        "",
        *table_lines(results, commits),
        "",
        *comparison_lines("HTTP keep-alive", http, "in-process commit()", inproc, commits),
        *comparison_lines("HTTP new connection", new_conn, "in-process commit()", inproc, commits),
        *comparison_lines("HTTP keep-alive", http, "in-process row + committer + commit()", route, commits),
        "",
    ]


def report_sequential(results: dict[str, dict[str, Any]], commits: int) -> list[str]:
    rest, fs = results["service (REST)"], results["filesystem"]
    columns = {
        "commit, service": rest["commit_ms"],
        "commit, filesystem": fs["commit_ms"],
        "write+commit, service": rest["write_commit_ms"],
        "write+commit, filesystem": fs["write_commit_ms"],
    }
    errors = len(rest["errors"]) + len(fs["errors"])
    return [
        f"### (a) pypaimon 2.1.0, {commits} sequential one-row commits: through the service vs "
        "its filesystem catalog",
        "",
        *table_lines(columns, commits),
        "",
        *comparison_lines("commit service", rest["commit_ms"], "filesystem", fs["commit_ms"], commits),
        *comparison_lines(
            "write+commit service", rest["write_commit_ms"], "filesystem", fs["write_commit_ms"], commits
        ),
        *([f"commit errors: {errors} (first: {(rest['errors'] + fs['errors'])[0]})"] if errors else []),
        "",
        f"Requests the service answered during the {commits} pypaimon commits (its own request histogram;",
        "includes the one-off config, create database/table and get table calls; time is the server's, "
        "from request to response):",
        "",
        "| request | per commit | server ms per request (mean) | server ms per commit |",
        "|---|---|---|---|",
        *(
            f"| {key} | {n / commits:.2f} | {secs / n * 1000:.2f} | {secs / commits * 1000:.2f} |"
            for key, (n, secs) in sorted(rest["requests"].items(), key=lambda kv: -kv[1][1])
        ),
        f"| all | {sum(n for n, _ in rest['requests'].values()) / commits:.2f} | - | "
        f"{sum(s for _, s in rest['requests'].values()) / commits * 1000:.2f} |",
        "",
    ]


COMMIT_ROUTE = "POST /v1/{prefix}/databases/{database}/tables/{table}/commit"
SNAPSHOT_ROUTE = "GET /v1/{prefix}/databases/{database}/tables/{table}/snapshot"


def _served(requests: Mapping[str, Sequence[float]], key: str) -> tuple[float, float]:
    n, secs = requests.get(key, (0.0, 0.0))
    return n, secs / n * 1000 if n else 0.0


def report_writers(runs: Sequence[dict[str, Any]]) -> list[str]:
    if not runs:
        return []
    first = runs[0]
    lines = [
        f"### (b) {first['writers']} pypaimon writers x {first['commits_per_writer']} commits on one table "
        f"through the service (commit.max-retries {first['max_retries']}, default retry waits)",
        "",
        "| replicas | " + " | ".join(str(r["replicas"]) for r in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]

    def row(name: str, cell: Any) -> None:
        lines.append(f"| {name} | " + " | ".join(cell(r) for r in runs) + " |")

    row("wall time", lambda r: f"{r['wall_s']:.2f} s")
    row("throughput", lambda r: f"{r['commits_per_s']:.1f} commits/s")
    row("published / expected", lambda r: f"{r['published']} / {r['writers'] * r['commits_per_writer']}")
    row("latest snapshot id", lambda r: str(r["latest_snapshot_id"]))
    row("POSTs answered success:false (CommitConflict)", lambda r: str(r["conflicts"]))
    row("share of commit POSTs answered success:false", lambda r: f"{r['success_false_share']:.1%}")
    row("success:false per published commit", lambda r: f"{r['success_false_per_published']:.2f}")
    row("conflict_checked events with conflict=true", lambda r: str(r["conflict_checked"]))
    row("other failed events", lambda r: str(r["other_failures"]))
    row(
        "commit() latency seen by writers, median / p90 / max",
        lambda r: (
            f"{statistics.median(r['latencies_ms']):.0f} / {_pct(r['latencies_ms'], 0.9):.0f} / "
            f"{max(r['latencies_ms']):.0f} ms"
        ),
    )
    row("client errors (gave up)", lambda r: str(len(r["client_errors"])))
    for key, label in ((COMMIT_ROUTE, "commit POST"), (SNAPSHOT_ROUTE, "GET snapshot")):
        row(
            f"{label}s served / server ms each (mean{', lock wait included' if key == COMMIT_ROUTE else ''})",
            lambda r, key=key: "{:.0f} / {:.1f} ms".format(*_served(r["server_requests"], key)),
        )
    lines.append("")
    for r in runs:
        if r["client_errors"]:
            lines.append(f"first client error at {r['replicas']} replica(s): {r['client_errors'][0]}")
    return lines


def summary(results: dict[str, Any], *, raw: bool) -> dict[str, Any]:
    """The results as JSON: window medians, and with ``raw`` every latency too."""
    out: dict[str, Any] = {k: results[k] for k in ("commits", "load_before", "load_after", "cpus")}
    out["service_overhead_ms"] = {k: windows_of(v) for k, v in results["overhead"].items()}
    if raw:
        out["service_overhead_raw_ms"] = results["overhead"]
    if "sequential" in results:
        seq: dict[str, Any] = {}
        for side, r in results["sequential"].items():
            seq[side] = {
                "commit_ms": windows_of(r["commit_ms"]),
                "write_commit_ms": windows_of(r["write_commit_ms"]),
                "errors": len(r["errors"]),
                **({"server_requests": r["requests"]} if "requests" in r else {}),
            }
            if raw:
                seq[side]["raw"] = r
        out["pypaimon_sequential"] = seq
    if "writers" in results:
        out["writers"] = [
            {
                **{k: v for k, v in r.items() if k not in ("latencies_ms", "client_errors")},
                "client_errors": len(r["client_errors"]),
                "latency_median_ms": statistics.median(r["latencies_ms"]),
                "latency_p90_ms": _pct(r["latencies_ms"], 0.9),
                **(
                    {"latencies_ms": r["latencies_ms"], "client_error_texts": r["client_errors"]}
                    if raw
                    else {}
                ),
            }
            for r in results["writers"]
        ]
    return out


def bench_pypaimon(
    args: argparse.Namespace, catalog: MetastoreCatalog, server: Server, token: str, *, url: str, tmp: Path
) -> dict[str, Any]:
    """(a) and (b): pypaimon sequential through ``server`` and on its filesystem catalog, then the
    writers through one replica and through ``--replicas`` (``server`` and more on its warehouse)."""
    script = write_script(tmp)
    sequential = bench_sequential(
        script, server, token, fs_warehouse=str(tmp / "pypaimon-fs"), commits=args.commits, tmp=tmp
    )

    def writers(replicas: list[Server]) -> dict[str, Any]:
        run = bench_writers(
            script,
            catalog,
            replicas,
            token,
            writers=args.writers,
            commits=args.writer_commits,
            max_retries=args.writer_max_retries,
            tmp=tmp,
        )
        print(f"(b) {len(replicas)} replica(s) done: {load()}", flush=True)
        return run

    runs = [writers([server])]
    if args.replicas > 1:  # started only now: idle replicas stay out of the runs before
        with servers(url, catalog.warehouse, tmp, args.replicas - 1) as extra:
            runs.append(writers([server, *extra]))
    return {"sequential": sequential, "writers": runs}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("PAIMON_META_TEST_DSN"))
    parser.add_argument("--commits", type=int, default=1000, help="sequential commits per side, (a) and (c)")
    parser.add_argument("--writers", type=int, default=8, help="pypaimon writer processes in (b)")
    parser.add_argument("--writer-commits", type=int, default=25, help="commits per writer in (b)")
    parser.add_argument(
        "--replicas", type=int, default=2, help="(b) runs with 1 replica and, if this is > 1, with this many"
    )
    parser.add_argument(
        "--writer-max-retries",
        type=int,
        default=200,
        help="pypaimon's commit.max-retries for the writers in (b) (its default: 10)",
    )
    parser.add_argument("--no-pypaimon", action="store_true", help="skip (a) and (b)")
    parser.add_argument("--json", type=Path, help="also write the results, raw latencies included, here")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("--url (or $PAIMON_META_TEST_DSN) is required")
    if args.commits < 1 or args.writers < 1 or args.writer_commits < 1 or args.replicas < 1:
        parser.error("--commits, --writers, --writer-commits and --replicas must be >= 1")
    results: dict[str, Any] = {
        "commits": args.commits,
        "load_before": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    print(f"before: {load()}", flush=True)
    with (
        scratch_database(args.url) as url,
        tempfile.TemporaryDirectory(prefix="bench-rest-service-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        warehouse = str(tmp / "warehouse")
        with paimon_meta.connect(url, warehouse) as catalog:
            principals = Principals(catalog.engine)
            token = principals.create(PRINCIPAL, created_by="bench")
            principals.grant(PRINCIPAL, Privilege.ADMIN)
            METRICS_AUTH["Authorization"] = f"Bearer {token}"
            with servers(url, warehouse, tmp, 1) as (main_server,):
                results["overhead"] = bench_overhead(catalog, main_server, token, args.commits)
                print(f"(c) in-process vs HTTP done: {load()}", flush=True)
                if not args.no_pypaimon:
                    results.update(bench_pypaimon(args, catalog, main_server, token, url=url, tmp=tmp))
    results["load_after"] = os.getloadavg()
    print(f"after: {load()}")
    lines = report_overhead(results["overhead"], args.commits)
    if "sequential" in results:
        lines += report_sequential(results["sequential"], args.commits)
    if "writers" in results:
        lines += report_writers(results["writers"])
    print("\n".join(lines))
    if args.json is not None:
        args.json.write_text(json.dumps(summary(results, raw=True), indent=1))
    out = summary(results, raw=False)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
