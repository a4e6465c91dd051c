"""LISTEN connections that re-open themselves: after a Postgres restart (a private embedded server) a
listener LISTENs again and is woken by NOTIFY, instead of polling for the rest of its wait."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.db.notify import ListenerPool, channel_for
from tests.torture.pg import PrivatePostgres, terminate_backends

pytestmark = pytest.mark.postgres


def _notify(url: str, channel: str) -> None:
    with psycopg.connect(libpq_conninfo(url), autocommit=True) as conn:
        conn.execute(sql.SQL("NOTIFY {}").format(sql.Identifier(channel)))


@pytest.mark.parametrize("mode", ["immediate", "fast"])
def test_a_listener_listens_again_after_a_restart_and_is_woken_by_notify(
    private_pg: PrivatePostgres, mode: str
) -> None:
    channel = channel_for("test", f"restart-{mode}")
    pool = ListenerPool(libpq_conninfo(private_pg.url))
    try:
        with pool.listening(channel) as listener:
            _notify(private_pg.url, channel)
            assert listener.wait(10)
            private_pg.restart(mode)
            # The broken connection is re-opened; that wakes the waiter once (a NOTIFY may have been
            # missed while it was down).
            assert listener.wait(30)
            assert (listener.broken, listener.reconnects) == (1, 1)
            assert not listener.wait(0.05)  # nothing spurious
            _notify(private_pg.url, channel)
            assert listener.wait(30)  # a real notification on the new connection
            assert listener.reconnects == 1
    finally:
        pool.close()


def test_a_listener_keeps_trying_while_the_server_is_down(private_pg: PrivatePostgres) -> None:
    channel = channel_for("test", "down")
    pool = ListenerPool(libpq_conninfo(private_pg.url), connect_timeout=2)
    try:
        with pool.listening(channel) as listener:
            private_pg.stop()
            try:
                # Down: each wait sleeps (the caller polls) and reports nothing.
                assert not listener.wait(0.3)
                assert not listener.wait(0.3)
                assert listener.broken == 1 and listener.reconnects == 0 and listener.connection is None
            finally:
                private_pg.start()
            assert listener.wait(30)  # re-opened
            _notify(private_pg.url, channel)
            assert listener.wait(30)
    finally:
        pool.close()


def test_a_terminated_listener_session_is_replaced(private_pg: PrivatePostgres) -> None:
    channel = channel_for("test", "terminated")
    pool = ListenerPool(libpq_conninfo(private_pg.url))
    try:
        with pool.listening(channel) as listener:
            assert terminate_backends(private_pg.url, application_name="paimon_meta_listen") == 1
            assert listener.wait(30)
            assert listener.reconnects == 1
            _notify(private_pg.url, channel)
            assert listener.wait(30)
        # the re-opened connection goes back to the pool and serves the next listener
        with pool.listening(channel) as again:
            _notify(private_pg.url, channel)
            assert again.wait(30)
    finally:
        pool.close()


def test_a_lazy_listener_starts_without_a_server_and_listens_once_it_is_up(
    private_pg: PrivatePostgres,
) -> None:
    channel = channel_for("test", "lazy")
    pool = ListenerPool(libpq_conninfo(private_pg.url), connect_timeout=2)
    try:
        private_pg.stop()
        try:
            with pytest.raises(psycopg.OperationalError), pool.listening(channel):
                pass
            with pool.listening(channel, lazy=True) as listener:
                assert listener.connection is None
                assert not listener.wait(0.2)
                private_pg.start()
                assert listener.wait(30)  # it LISTENs now
                _notify(private_pg.url, channel)
                assert listener.wait(30)
        finally:
            if _down(private_pg):
                private_pg.start()
    finally:
        pool.close()


def _down(pg: PrivatePostgres) -> bool:
    try:
        with psycopg.connect(libpq_conninfo(pg.url), connect_timeout=2):
            return False
    except psycopg.OperationalError:
        return True
