"""The session pool of the hot statements (``paimon_meta.db.pool``): replacing connections the server
closed, server statements kept across rollbacks."""

from __future__ import annotations

import select

import pytest
from sqlalchemy import Engine, text

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.pool import ServerStatement, SessionPool, run_batch

pytestmark = pytest.mark.postgres


def test_a_connection_the_server_closed_is_replaced_without_an_error(clean_engine: Engine) -> None:
    pool = SessionPool(libpq_conninfo(clean_engine.url))
    try:
        with pool.connection() as conn:
            first_pid = conn.info.backend_pid
            fd = conn.fileno()
        with clean_engine.begin() as admin:  # a server restart, as far as this connection can tell
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": first_pid})
        assert select.select([fd], [], [], 10)[0]  # the server's goodbye has arrived
        with pool.connection() as conn:
            assert conn.execute("SELECT pg_backend_pid() AS pid").fetchone() != {"pid": first_pid}
    finally:
        pool.close()


def test_server_statements_survive_rollbacks_and_repeated_queries(clean_engine: Engine) -> None:
    pool = SessionPool(libpq_conninfo(clean_engine.url))
    statement = ServerStatement("paimon_test_echo", "SELECT %(x)s::int AS x", (("x", "int4"),))
    try:
        with pool.connection() as conn:
            assert run_batch(conn, [statement.bind({"x": 1})]) == [[{"x": 1}]]
            for _ in range(10):  # what a driver might prepare on its own after a few runs
                conn.execute("SELECT pg_backend_pid()")
            conn.execute("BEGIN")
            conn.execute("ROLLBACK")
            assert run_batch(conn, [statement.bind({"x": 2})]) == [[{"x": 2}]]
    finally:
        pool.close()
