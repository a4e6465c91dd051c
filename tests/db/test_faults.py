"""Transient metastore faults told apart from bugs, from what the driver really raises."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest
import sqlalchemy.exc
from sqlalchemy import create_engine, text

from paimon_meta.db.engine import libpq_conninfo, normalize_url
from paimon_meta.db.faults import FaultKind, fault_of
from paimon_meta.errors import MetastoreUnavailableError
from tests.fixtures.service import free_port

pytestmark = pytest.mark.postgres


def test_a_refused_connection_is_unavailable_and_safe_to_repeat() -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    engine = create_engine(normalize_url(url), connect_args={"connect_timeout": 2})
    with pytest.raises(sqlalchemy.exc.OperationalError) as caught, engine.connect():
        pass
    fault = fault_of(MetastoreUnavailableError("metastore unreachable during list"))
    assert fault is None  # no driver error behind it: nothing to classify
    wrapped = MetastoreUnavailableError("metastore unreachable")
    wrapped.__cause__ = caught.value
    fault = fault_of(wrapped)
    assert fault is not None and fault.kind is FaultKind.UNAVAILABLE
    assert fault.repeatable(read_only=False)


def test_a_connection_terminated_mid_session_is_a_reset_only_reads_repeat(clean_db: str) -> None:
    with psycopg.connect(libpq_conninfo(clean_db), autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(libpq_conninfo(clean_db), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError) as caught:
            victim.execute("SELECT 1")
    fault = fault_of(caught.value)
    assert fault is not None and fault.kind is FaultKind.RESET
    assert fault.repeatable(read_only=True) and not fault.repeatable(read_only=False)


def test_a_serialization_failure_from_postgres_rolled_back_and_repeats(clean_db: str) -> None:
    conninfo = libpq_conninfo(clean_db)
    with psycopg.connect(conninfo, autocommit=True) as setup:
        setup.execute("CREATE TABLE IF NOT EXISTS fault_probe (k int primary key, v int)")
        setup.execute("INSERT INTO fault_probe VALUES (1, 0) ON CONFLICT (k) DO UPDATE SET v = 0")
    with psycopg.connect(conninfo) as a, psycopg.connect(conninfo) as b:
        for conn in (a, b):
            conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            conn.execute("SELECT v FROM fault_probe WHERE k = 1")
        a.execute("UPDATE fault_probe SET v = v + 1 WHERE k = 1")
        a.commit()
        with pytest.raises(psycopg.errors.SerializationFailure) as caught:
            b.execute("UPDATE fault_probe SET v = v + 1 WHERE k = 1")
    wrapped = sqlalchemy.exc.OperationalError("UPDATE", {}, caught.value)
    fault = fault_of(wrapped)
    assert fault is not None and fault.kind is FaultKind.SERIALIZATION and fault.nothing_done


def test_bugs_and_refusals_are_not_faults(clean_db: str) -> None:
    engine = create_engine(normalize_url(clean_db))
    with pytest.raises(sqlalchemy.exc.ProgrammingError) as caught, engine.connect() as conn:
        conn.execute(text("SELECT * FROM no_such_table_here"))
    engine.dispose()
    assert fault_of(caught.value) is None
    try:
        try:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        except psycopg.Error:
            raise KeyError("a bug while handling it") from None
    except KeyError as bug:
        assert fault_of(bug) is None
