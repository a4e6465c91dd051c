"""The outbox's lease and position (metastore/outbox.py): one holder per (catalog key, sink), freed when
its session ends; the position moves only forward and only through the holder's live session."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import Engine, text

from paimon_meta.db.engine import libpq_conninfo
from paimon_meta.errors import LockLostError
from paimon_meta.metastore.feed import START, Position
from paimon_meta.metastore.outbox import LeaseSession, OutboxLease
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


def _shared(session: LeaseSession, holder: str, key: str = "cat", sink: str = "nats:a.b") -> OutboxLease:
    return OutboxLease(session._conninfo, key, sink, holder=holder, session=session)


def test_leases_sharing_one_session(clean_engine: Engine) -> None:
    """The leases of a replica's publishers (one per catalog) on one connection: each catalog's lease is
    still held once, against another session and against another lease of the same session (an advisory
    lock is re-entrant within its session); the positions are each lease's own."""
    conninfo = libpq_conninfo(clean_engine.url)
    session, other = LeaseSession(conninfo), LeaseSession(conninfo)
    a, b = _shared(session, "r1"), _shared(session, "r1", key="cat_b", sink="nats:paimon.b.events")
    twin = _shared(session, "r1")  # a second publisher of catalog cat in the same process
    rival = _shared(other, "r2")
    own = _lease(clean_engine, "r3")  # a replica of the previous release: a connection of its own
    try:
        assert a.try_acquire() and b.try_acquire() and a.try_acquire()
        assert not twin.try_acquire() and not rival.try_acquire() and not own.try_acquire()
        a.advance(Position(5, 0, 1), 1)
        b.advance(Position(7, 1, 2), 2)
        assert (a.position(), b.position()) == (Position(5, 0, 1), Position(7, 1, 2))
        with clean_engine.connect() as conn:
            sessions = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'paimon_meta_outbox'"
                    " AND datname = current_database()"
                )
            ).scalar_one()
        assert sessions == 3  # session, other and own's: not one per lease
        a.release()
        assert b.held and b.position() == Position(7, 1, 2)  # the other catalog's lease stays
        assert twin.try_acquire()  # free within the session now
        with pytest.raises(LockLostError):
            a.advance(Position(6, 0, 1), 1)  # released: cannot write
        twin.release()
        assert rival.try_acquire()
    finally:
        for lease in (a, b, twin, rival, own):
            lease.release()
        session.close()
        other.close()


def test_a_lost_shared_session_loses_every_lease_of_it(clean_engine: Engine) -> None:
    session = LeaseSession(libpq_conninfo(clean_engine.url))
    a, b = _shared(session, "r1"), _shared(session, "r1", key="cat_b")
    try:
        assert a.try_acquire() and b.try_acquire()
        with psycopg.connect(libpq_conninfo(clean_engine.url), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'paimon_meta_outbox' AND datname = current_database()"
            )
        with pytest.raises(LockLostError):
            a.advance(Position(2, 0, 1), 1)
        with pytest.raises(LockLostError):  # b learns it at its next call, its position unmoved
            b.advance(Position(3, 0, 1), 1)
        assert not a.held and not b.held
        successor = _lease(clean_engine, "two")
        assert successor.try_acquire()  # free for another replica
        successor.release()
        assert a.try_acquire() and b.try_acquire()  # a new connection, the leases taken again
        assert a.position() == START and b.position() == START
    finally:
        a.release()
        b.release()
        session.close()
