"""The outbox's lease and position (metastore/outbox.py): one holder per (catalog key, sink), freed when
its session ends; the position moves only forward and only through the holder's live session."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import Engine, text

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.errors import LockLostError
from paimon_meta.metastore.feed import START, Position
from paimon_meta.metastore.outbox import OutboxLease
from tests.fixtures.postgres import isolated_metastore

# The feed's horizon is the oldest transaction open on the whole Postgres cluster: this module's
# databases live on a cluster of its own (tests/fixtures/postgres.py, isolated_metastore).
pg_server, pg_template, pg_url, pg_engine = isolated_metastore()

pytestmark = pytest.mark.postgres


def _lease(engine: Engine, holder: str, sink: str = "nats:a.b") -> OutboxLease:
    return OutboxLease(libpq_conninfo(engine.url), "cat", sink, holder=holder)


def test_one_holder_per_catalog_and_sink(clean_engine: Engine) -> None:
    first, second = _lease(clean_engine, "one"), _lease(clean_engine, "two")
    other_sink = _lease(clean_engine, "three", sink="nats:c.d")
    try:
        assert first.try_acquire() and first.try_acquire()  # held, and again
        assert not second.try_acquire()
        assert other_sink.try_acquire()  # another sink is another outbox
        first.release()
        assert second.try_acquire()  # the holder's session ended: the lock with it
    finally:
        for lease in (first, second, other_sink):
            lease.release()


def test_the_position_moves_only_forward(clean_engine: Engine) -> None:
    lease = _lease(clean_engine, "one")
    try:
        assert lease.try_acquire()
        assert lease.position() == START
        lease.advance(Position(10, 0, 5), 3)
        lease.advance(Position(10, 2, 1), 2)
        lease.advance(Position(9, 2, 99), 7)  # behind: ignored, counted nowhere
        assert lease.position() == Position(10, 2, 1)
        with clean_engine.connect() as conn:
            row = conn.execute(text("SELECT published, updated_by FROM paimon_outbox_positions")).one()
        assert tuple(row) == (5, "one")
    finally:
        lease.release()


def test_a_lost_session_cannot_move_the_position(clean_engine: Engine) -> None:
    lease = _lease(clean_engine, "one")
    try:
        assert lease.try_acquire()
        lease.advance(Position(1, 0, 1), 1)
        with psycopg.connect(libpq_conninfo(clean_engine.url), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'paimon_meta_outbox' AND datname = current_database()"
            )
        with pytest.raises(LockLostError):
            lease.advance(Position(2, 0, 1), 1)
        assert not lease.held
        with pytest.raises(LockLostError):
            lease.check()
        successor = _lease(clean_engine, "two")
        assert successor.try_acquire()  # free for a successor
        assert not lease.try_acquire()
        successor.release()
        assert lease.try_acquire()  # and this one may try again like any replica
        assert lease.position() == Position(1, 0, 1)
    finally:
        lease.release()
