"""Benchmark: authenticating a static token, the engine's pooled connection vs one round trip on an
autocommit session (issue 39, item 3: "authenticating a request costs 4 Postgres round trips").

``Principals.authenticate`` runs one statement (token -> principal -> grants, service grants). On the
SQLAlchemy engine's pool it costs 4 round trips (the pool's ping, BEGIN, the statement, the ROLLBACK of
the connection's return); on the lock's ``SessionPool`` (autocommit, no ping for a recently idle
connection) 1, what the service uses. Both run here, in the same process on the same scratch metastore,
``--calls`` times after ``--warmup``; reported: p50 / p99 per call. Postgres is local: each saved round
trip is worth ~0.1 ms here and one network RTT to a remote Postgres. The round trips themselves are
counted by ``test_b_authenticating_a_request_is_one_postgres_round_trip``
(``tests/service/test_rest_commit_requests.py``).

Usage::

    python bench/bench_auth.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--calls 1000]
"""

from __future__ import annotations

import argparse
import os
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
from paimon_meta.metastore.principals import Principals  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("PAIMON_META_TEST_DSN", "postgresql+psycopg://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    name = "bench_auth_" + uuid.uuid4().hex[:8]
    admin = sa.create_engine(args.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    try:
        catalog = paimon_meta.connect(args.url.rsplit("/", 1)[0] + "/" + name, tempfile.mkdtemp())
        try:
            token = Principals(catalog.engine).create("writer")
            for label, principals in (
                ("engine pool (4 round trips)", Principals(catalog.engine)),
                (
                    "autocommit session (1 round trip)",
                    Principals(catalog.engine, sessions=catalog.lock.sessions),
                ),
            ):
                for _ in range(args.warmup):
                    principals.authenticate(token)
                times = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    if principals.authenticate(token) is None:
                        raise SystemExit("the token did not authenticate")
                    times.append((time.perf_counter() - start) * 1000)
                times.sort()
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                print(
                    f"{label}: p50 {statistics.median(times):.3f} ms, p99 {p99:.3f} ms ({args.calls} calls)"
                )
        finally:
            catalog.close()
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE {name} WITH (FORCE)"))
        admin.dispose()


if __name__ == "__main__":
    main()
