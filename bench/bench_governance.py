"""Benchmark: the cost of the governance model per request at scale (issue 36, "Measure"): loading a
subject's assignments (its own, its groups' and roles') with ``--assignments`` assignments over
``--principals`` principals in the metastore, and ``POST .../auth`` end to end (in-process service) for a
principal with a row filter, a mask and a column range on a ``query-auth.enabled`` table.

Setup (a scratch database): ``--principals`` principals (``p0``...), ``--roles`` roles each with
``--principals / --roles`` members; the assignments spread evenly over the principals and roles (TABLE,
COLUMN, DATABASE_ALL, CATALOG_ALL resources); policies on the measured table for a tenth of the
principals. Measured: ``Assignments.of_subject`` for random principals (one statement: the per-principal
index ``ix_paimon_assignments_principal``), and ``POST /auth`` (authentication, the legacy grant check,
the subject's assignments, ``decide``'s column range, the subject's policies, ``QueryRules.combine`` against
the latest schema read from storage). ``--calls`` each after ``--warmup``; p50 / p99.

Usage::

    python bench/bench_governance.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
        [--principals 10000] [--assignments 100000] [--calls 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import paimon_meta  # noqa: E402
from paimon_meta.db.models import Privilege  # noqa: E402
from paimon_meta.metastore.assignments import Assignments  # noqa: E402
from paimon_meta.metastore.principals import Principals  # noqa: E402

FILTER = json.dumps(
    {
        "kind": "LEAF",
        "transform": {"name": "FIELD_REF", "fieldRef": {"index": 2, "name": "region", "type": "STRING"}},
        "function": "EQUAL",
        "literals": ["eu"],
    }
)
MASK = json.dumps({"name": "NULL"})


def _seed(engine: sa.Engine, principals: int, roles: int, assignments: int) -> None:
    """Principals, roles, memberships and assignments in bulk (SQL generate_series)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO paimon_principals (name) SELECT 'p' || i FROM generate_series(0, :n - 1) i"),
            {"n": principals},
        )
        conn.execute(
            sa.text(
                "INSERT INTO paimon_principals (name) SELECT 'role:r' || i FROM generate_series(0, :n - 1) i"
            ),
            {"n": roles},
        )
        conn.execute(
            sa.text(
                "INSERT INTO paimon_principal_members (member_id, group_id)"
                " SELECT m.principal_id, g.principal_id FROM paimon_principals m"
                " JOIN paimon_principals g ON g.name = 'role:r' || (substr(m.name, 2)::int % :r)"
                " WHERE m.name ~ '^p[0-9]+$'"
            ),
            {"r": roles},
        )
        # assignments: spread over every principal and role, each a distinct identity
        conn.execute(
            sa.text(
                "WITH ids AS (SELECT array_agg(principal_id ORDER BY principal_id) AS a"
                " FROM paimon_principals)"
                " INSERT INTO paimon_assignments (catalog_key, principal_id, resource_type, database_name,"
                " object_name, access, excluded_column_names, granted_by, reason)"
                " SELECT NULL, ids.a[1 + i % cardinality(ids.a)], k.rt,"
                " CASE WHEN k.rt = 'DATABASE_ALL' THEN 'd' || i ELSE 'db' || (i % 50) END,"
                " CASE WHEN k.rt IN ('TABLE', 'COLUMN') THEN 't' || i END, 'SELECT',"
                " CASE WHEN k.rt = 'COLUMN' THEN ARRAY['email'] END, 'bench', 'bench'"
                " FROM ids, generate_series(0, :a - 1) i,"
                " LATERAL (SELECT (ARRAY['TABLE', 'TABLE', 'TABLE', 'COLUMN', 'DATABASE_ALL'])[1 + i % 5]"
                " AS rt) k"
            ),
            {"a": assignments},
        )


def _explain(engine: sa.Engine, store: Assignments) -> None:
    """The plan of the subject query (as ``of_subject`` runs it) for principal p1."""
    sql, params = store.subject_query("p1")
    with engine.connect() as conn:
        plan = conn.execute(sa.text("EXPLAIN (ANALYZE, BUFFERS) " + sql), params).scalars()
        print("\n".join(plan))


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(label: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(
        f"{label}: p50 {statistics.median(ms):.2f} ms, p99 {_pct(ms, 0.99):.2f} ms, mean "
        f"{statistics.fmean(ms):.2f} ms ({len(ms)} calls)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("PAIMON_META_TEST_DSN", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--principals", type=int, default=10_000)
    parser.add_argument("--roles", type=int, default=100)
    parser.add_argument("--assignments", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--explain", action="store_true", help="print the subject query's plan")
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from paimon_meta.service.app import create_app
    from paimon_meta.service.state import ServiceSettings, ServiceState

    name = "bench_gov_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(args.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        catalog = paimon_meta.connect(args.url.rsplit("/", 1)[0] + "/" + name, tempfile.mkdtemp())
        try:
            started = time.perf_counter()
            _seed(catalog.engine, args.principals, args.roles, args.assignments)
            with catalog.engine.connect() as conn:
                count = conn.execute(sa.text("SELECT count(*) FROM paimon_assignments")).scalar_one()
            # what autovacuum does after a bulk load (without statistics the planner takes the table for
            # empty and scans it)
            with catalog.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(sa.text("ANALYZE"))
            print(f"seeded {args.principals} principals, {args.roles} roles, {count} assignments in "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            store = Assignments(catalog.engine, catalog_key="jdbc", default=True)
            rng = random.Random(7)
            for _ in range(args.warmup):
                store.of_subject(f"p{rng.randrange(args.principals)}")
            samples, sizes = [], []
            for _ in range(args.calls):
                who = f"p{rng.randrange(args.principals)}"
                t0 = time.perf_counter()
                loaded = store.of_subject(who)
                samples.append(time.perf_counter() - t0)
                sizes.append(len(loaded.assignments))
            _report("of_subject (own + role assignments, one statement)", samples)
            if args.explain:
                _explain(catalog.engine, store)
            print(f"  assignments per subject: mean {statistics.fmean(sizes):.1f}, max {max(sizes)}")

            # /auth end to end, in process
            people = Principals(catalog.engine)
            boss = people.create("boss")
            people.grant("boss", Privilege.ADMIN)
            reader = people.create("reader")
            people.grant("reader", Privilege.READ)
            plain_token = people.create("plain")
            people.grant("plain", Privilege.READ)
            from paimon_meta.governance.permissions import Access, Assignment, ColumnRange, Resource

            store.grant(Assignment("boss", Resource.catalog_all(), Access.ALL), granted_by="bench")
            store.grant(
                Assignment("reader", Resource.column("db", "t"), Access.SELECT, ColumnRange.denylist(["x"])),
                granted_by="bench",
                must_exist=False,
            )
            settings = ServiceSettings(auth_cache_seconds=30)
            app = create_app(settings, state=ServiceState(settings, catalog))
            with TestClient(app) as client:
                h = {"Authorization": f"Bearer {boss}"}
                client.post("/v1/paimon/databases", json={"name": "db"}, headers=h)
                fields = [
                    {"id": 0, "name": "id", "type": "BIGINT NOT NULL"},
                    {"id": 1, "name": "email", "type": "STRING"},
                    {"id": 2, "name": "region", "type": "STRING"},
                ]
                body = {
                    "identifier": {"database": "db", "object": "t"},
                    "schema": {"fields": fields, "partitionKeys": [], "primaryKeys": [],
                               "options": {"bucket": "1", "query-auth.enabled": "true"}},
                }  # fmt: skip
                assert client.post("/v1/paimon/databases/db/tables", json=body, headers=h).status_code == 200
                t = "/v1/paimon/databases/db/tables/t"
                for policy in (
                    {"principal": "reader", "rowFilter": {"predicate": FILTER}},
                    {"principal": "reader", "columnMask": {"onColumn": "email", "transform": MASK}},
                ):
                    assert client.post(f"{t}/policies", json=policy, headers=h).status_code == 200
                rh = {"Authorization": f"Bearer {reader}"}
                for _ in range(args.warmup):
                    client.post(f"{t}/auth", json={}, headers=rh)
                auth = []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    r = client.post(f"{t}/auth", json={}, headers=rh)
                    auth.append(time.perf_counter() - t0)
                    assert r.status_code == 200 and len(r.json()["filter"]) == 1, r.text
                _report("POST /auth (filter + mask + column range; in-process service)", auth)
                # the same route for a principal holding no policy and no column range: the rest of its cost
                # (authentication, the legacy check, the schema read, the subject's assignments)
                plain = []
                ph = {"Authorization": f"Bearer {plain_token}"}
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    r = client.post(f"{t}/auth", json={}, headers=ph)
                    plain.append(time.perf_counter() - t0)
                    assert r.status_code == 200 and r.json()["filter"] == [], r.text
                _report("POST /auth (no policy, no column range; baseline)", plain)
        finally:
            catalog.close()
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
