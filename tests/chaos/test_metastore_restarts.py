"""The service keeps its promises across metastore restarts (issue 25).

A private PostgreSQL 15 cluster (``tests.chaos.cluster``), two ``paimon-meta serve`` replicas on it and
one local warehouse, and clients committing real rows to four tables through both replicas
(``tests.chaos.load``; half of them with the REST client's retries off, re-sending on their own to the
other replica) while the cluster is stopped and started three times (``-m immediate``, ``fast``,
``immediate``). While it is down (and after the replicas' authentication cache expired, so no answer
can come from memory) every route of both replicas is probed once. Then ``paimon-meta
recover`` runs, and:

* every acknowledged commit is in its table exactly once (snapshots, the event log and the rows read
  back), nothing unacknowledged is, nothing is published twice, nothing is pending;
* no commit and no lock acquisition waited (and no lock was held) longer than the longest outage + 2 s,
  by the timeline the metastore recorded (``tests.chaos.timeline``), and no acquisition stayed open;
* while down, every probed route answered 503 with ``Retry-After`` and the protocol's error body (never
  500), ``/readyz`` 503; afterwards ``/readyz`` answered 200 again by itself; ``/healthz`` answered 200
  throughout.

All failures are gathered and reported together (with the timeline's summary and the clients' failed
tries by cause), so one run shows every broken promise. Sizes: 8 clients x 100 commits over 4 tables
(25 per client and table); ``PAIMON_META_SLOW=1``: 12 clients x 120 commits, as the issue's run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.retry import DEADLINE
from paimon_meta.service.state import ServiceSettings
from tests.chaos.cluster import PostgresCluster
from tests.chaos.load import SCHEMA, TABLE_OPTIONS, Load, LoadResult
from tests.chaos.probes import (
    HealthWatch,
    Probe,
    post_bodies,
    probe_routes,
    routes,
    unavailable_problems,
    wait_ready,
)
from tests.chaos.replicas import REPO, Replica
from tests.chaos.timeline import exactly_once_problems, integrity_problems, read_timeline
from tests.fixtures.service import make_principal

pytestmark = pytest.mark.postgres

SLOW = os.environ.get("PAIMON_META_SLOW") == "1"
CLIENTS = 12 if SLOW else 8
COMMITS = 120 if SLOW else 100
DATABASE = "chaos"
TABLES = [f"{DATABASE}.t{n}" for n in range(4)]
PROBE_TABLE = f"{DATABASE}.probe"  # probe commits go here: whether they land is not the load's business
#: (pg_ctl stop mode, share of the load acknowledged when the restart starts)
RESTARTS = [("immediate", 0.2), ("fast", 0.45), ("immediate", 0.7)]
READY_TIMEOUT = 30.0
#: How long a replica trusts a token it checked (``paimon-meta serve`` runs with the default).
AUTH_CACHE_SECONDS = ServiceSettings().auth_cache_seconds


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    c = PostgresCluster.start_new(DATABASE)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    """Started replicas are appended by the test; all are stopped at the end, whatever happened."""
    started: list[Replica] = []
    try:
        yield started
    finally:
        for r in started:
            r.stop()


def _setup(cluster: PostgresCluster, warehouse: str) -> tuple[MetastoreCatalog, str, dict[str, bytes]]:
    """The tables, a writer principal's token, and the probed POST bodies (a commit of one real row to
    the probe table)."""
    catalog = paimon_meta.connect(cluster.url, warehouse)
    for t in [*TABLES, PROBE_TABLE]:
        catalog.create_table(t, SCHEMA, options=TABLE_OPTIONS)
    token = make_principal(catalog, "chaos-writers", [("write", DATABASE, None)])
    # The probe table has a snapshot (its latest-snapshot route answers 200 while up).
    builder = catalog.get_table(PROBE_TABLE).new_stream_write_builder().with_commit_user("chaos-probe")
    write = builder.new_write()
    write.write_arrow(pa.table({"k": [0], "c": [0], "v": ["probe"]}, schema=SCHEMA))
    builder.new_commit().commit(write.prepare_commit(), 0)
    write.write_arrow(pa.table({"k": [1], "c": [0], "v": ["probe"]}, schema=SCHEMA))
    messages = write.prepare_commit()
    write.close()
    return catalog, token, post_bodies("chaos-probe", 1, messages)


def _recover(cluster: PostgresCluster, warehouse: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PAIMON_META_URL": cluster.url, "PAIMON_META_WAREHOUSE": warehouse}
    return subprocess.run(
        [sys.executable, "-m", "paimon_meta.cli", "--json", "recover", "--older-than", "0s"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _report(result: LoadResult, downtimes: object, timeline: dict[str, object], logs: list[str]) -> str:
    return json.dumps(
        {
            "acknowledged": len(result.acks),
            "failed_tries_by_cause": dict(result.causes),
            "resent_commits": sum(1 for a in result.acks if a.tries > 1),
            "deduplicated_answers": sum(1 for a in result.acks if a.deduplicated),
            "downtimes": downtimes,
            "timeline": timeline,
            "replica_log_lines": logs[:30],
        },
        indent=1,
        default=str,
    )


def test_two_replicas_commit_exactly_once_across_three_metastore_restarts(
    cluster: PostgresCluster, replicas: list[Replica], tmp_path: Path
) -> None:
    warehouse = str(tmp_path / "warehouse")
    catalog, token, probe_bodies = _setup(cluster, warehouse)
    failures: dict[str, list[str]] = {}
    try:
        for n in range(2):
            replicas.append(Replica(cluster.url, warehouse, tmp_path / f"replica-{n}.log").start())
        bases = [r.base for r in replicas]
        probed_routes = routes(DATABASE, PROBE_TABLE.split(".")[1])
        # The probes are valid requests: with the metastore up every route answers 2xx (so a 503 while it
        # is down is the outage's, not a refused request's).
        failures["answers while up"] = [
            f"expected 2xx: {p.describe()}"
            for p in probe_routes(bases, token, probed_routes, probe_bodies)
            if p.status is None or not 200 <= p.status < 300
        ]
        health = HealthWatch(bases).start()
        # Even clients ride on the REST client's own retries; odd ones have them off and re-send
        # themselves, to the other replica (see tests.chaos.load).
        load = Load(
            bases, token, TABLES, clients=CLIENTS, commits=COMMITS, client_options=[{}, {DEADLINE: "0"}]
        )
        load.start()
        probes: list[Probe] = []
        not_ready: list[str] = []
        restarted_under_load = 0
        try:
            for mode, share in RESTARTS:
                while load.acked < share * load.total and not load.result.errors:
                    time.sleep(0.05)
                if load.result.errors or load.acked >= load.total:
                    break

                def while_down() -> None:
                    # Past the replicas' authentication cache: the token cannot be checked either now.
                    time.sleep(AUTH_CACHE_SECONDS + 0.2)
                    probes.extend(probe_routes(bases, token, probed_routes, probe_bodies))

                cluster.restart(mode, while_down=while_down)
                if load.acked < load.total:  # commits were still coming when the cluster was back
                    restarted_under_load += 1
                for base in bases:
                    if wait_ready(base, READY_TIMEOUT) is None:
                        not_ready.append(
                            f"{base}/readyz not 200 within {READY_TIMEOUT}s after the {mode} restart"
                        )
        finally:
            result = load.join(timeout=600)
            load_ended_at = time.time()
            health.close()

        failures["clients"] = result.errors
        failures["restarts under load"] = (
            [f"only {restarted_under_load} of {len(RESTARTS)} restarts ended with the load still running"]
            if restarted_under_load < len(RESTARTS)
            else []
        )
        failures["answers while down"] = unavailable_problems(probes)
        failures["/readyz after"] = not_ready
        failures["/healthz"] = health.failures[:20]

        recovered = _recover(cluster, warehouse)
        failures["recover"] = (
            []
            if recovered.returncode == 0
            else [
                f"recover exited {recovered.returncode}: "
                f"{recovered.stdout[-2000:]} {recovered.stderr[-2000:]}"
            ]
        )
        exactly_once: list[str] = []
        for table in TABLES:
            exactly_once += exactly_once_problems(catalog, table, result.acked(table))
        failures["exactly once"] = exactly_once
        failures["probe table"] = integrity_problems(catalog, PROBE_TABLE)[0]
        timeline = read_timeline(catalog, TABLES)
        failures["waits (recorded timeline)"] = timeline.problems(cluster.downtimes, load_ended_at)
        logs = [
            line
            for r in replicas
            for line in r.log_lines("failed", "expires after", "could not record", "Traceback")
        ]
        report = _report(
            result,
            [(d.mode, round(d.seconds, 3)) for d in cluster.downtimes],
            {
                **timeline.summary(),
                "budget_s": round(timeline.budget(cluster.downtimes), 3),
                "settled_by_recover": len(timeline.settled_by_recovery(load_ended_at)),
                "probes": len(probes),
            },
            logs,
        )
        print(report)
        broken = {k: v for k, v in failures.items() if v}
        assert not broken, "\n".join(
            [f"== {k} ({len(v)}):\n  " + "\n  ".join(v[:15]) for k, v in broken.items()]
            + ["== report:", report]
        )
    finally:
        catalog.close()
