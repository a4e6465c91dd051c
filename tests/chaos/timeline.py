"""The recorded timeline of a chaos run, held against the cluster's outages, and the exactly-once check.

Waits are read from what the metastore recorded (``clock_timestamp()`` of each event), never from the
test's clock:

* a **commit's wait**: from its ``prepared`` event (written with its first lock attempt, so lock waits are
  inside) to the event that settled it (``snapshot_published``, ``aborted`` (deduplicated, conflict),
  ``failed``, or ``recovered`` by a later holder's reconcile), per commit id. A commit settled only by the
  ``recover`` run after the load is not a wait (nobody was waiting for it: its client had re-sent) and is
  reported apart;
* a **lock acquisition's wait** (``wait_ms`` of its ``acquired`` event) and **hold** (to the release,
  takeover or loss that ended it: ``paimon_lock_activity``), and no acquisition left open at the end.

The promise (issue 25): none of these exceeds the longest outage + ``SLACK_SECONDS``. A holder that never
retries its release after the restart shows up as a hold of a whole lease (the replicas run the product's
30 s lease) ended by ``expiry_takeover``, and every writer behind it as a wait of about a lease.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.identifier import split_identifier
from tests.chaos.cluster import Downtime
from tests.chaos.load import Ack
from tests.torture.checker import check_table

#: What the check must catch is a wait of about a lease (30 s here) instead of about the outage. The slack
#: is the time the commits queued behind an outage take to drain once the metastore is back, on a loaded
#: machine (at load 10 on 2 cores a 3.8 s outage let two commits wait 6.1-6.2 s: 2.4 s over it), kept
#: well under the lease so a lease-long stall still fails the test.
SLACK_SECONDS = 10.0

_COMMITS = text(
    "SELECT commit_id, table_identifier, commit_user, commit_identifier, "
    "min(created_at) FILTER (WHERE event_type = 'prepared') AS prepared_at, "
    "min(created_at) FILTER (WHERE event_type IN ('snapshot_published', 'aborted', 'failed', 'recovered')) "
    "AS settled_at, "
    "array_agg(event_type || '@' || to_char(EXTRACT(EPOCH FROM created_at), 'FM9999999999.000') "
    "|| coalesce(' ' || (payload ->> 'reason'), '') ORDER BY event_id) AS events "
    "FROM paimon_commit_events WHERE table_identifier = ANY(:tables) GROUP BY commit_id, table_identifier, "
    "commit_user, commit_identifier"
)
_LOCKS = text(
    "SELECT lock_id, owner, fencing_token, acquired_at, wait_ms, ended_by, ended_at, held_ms, still_open, "
    "EXTRACT(EPOCH FROM acquired_at - lag(ended_at) OVER (PARTITION BY lock_id ORDER BY acquire_event_id)) "
    "AS free_before FROM paimon_lock_activity WHERE lock_id = ANY(:locks) ORDER BY acquire_event_id"
)
_TAKEOVERS = text(
    "SELECT lock_id, created_at, previous_owner, owner, wait_ms FROM paimon_lock_events "
    "WHERE lock_id = ANY(:locks) AND event_type = 'expiry_takeover' ORDER BY event_id"
)


@dataclass(frozen=True, slots=True)
class CommitWait:
    commit_id: str
    table: str
    user: str
    identifier: int
    prepared_at: datetime
    settled_at: datetime | None
    events: tuple[str, ...]

    @property
    def seconds(self) -> float | None:
        return None if self.settled_at is None else (self.settled_at - self.prepared_at).total_seconds()

    def describe(self) -> str:
        return (
            f"{self.table} {self.user}#{self.identifier} commit {self.commit_id[:8]} prepared "
            f"{self.prepared_at.timestamp():.3f}, settled after {self.seconds}s: {list(self.events)}"
        )


@dataclass(frozen=True, slots=True)
class LockActivity:
    """One acquisition of a table lock and what ended it (a row of ``paimon_lock_activity``)."""

    lock_id: str
    owner: str
    fencing_token: int
    acquired_at: datetime
    wait_seconds: float
    ended_by: str | None
    ended_at: datetime | None
    held_seconds: float | None
    still_open: bool
    #: Seconds the lock was free before this acquisition (since the previous one on it ended).
    free_before: float | None = None

    def describe(self) -> str:
        return (
            f"{self.lock_id} token {self.fencing_token} owner {self.owner} acquired "
            f"{self.acquired_at.timestamp():.3f} after waiting {self.wait_seconds:.3f}s (the hold before "
            f"ended {None if self.free_before is None else round(self.free_before, 3)}s before), "
            f"ended by {self.ended_by} after {self.held_seconds}s"
        )


@dataclass
class Timeline:
    commits: list[CommitWait]
    locks: list[LockActivity]
    takeovers: list[dict[str, object]]

    def budget(self, downtimes: Sequence[Downtime]) -> float:
        return max((d.seconds for d in downtimes), default=0.0) + SLACK_SECONDS

    def problems(self, downtimes: Sequence[Downtime], load_ended_at: float) -> list[str]:
        """Every wait or hold beyond the budget, and every acquisition left open."""
        budget = self.budget(downtimes)
        out = []
        for c in self.commits:
            if c.settled_at is None or c.settled_at.timestamp() > load_ended_at:
                continue  # settled by the recover run (or not at all: the pending check reports it)
            if c.seconds is not None and c.seconds > budget:
                out.append(f"commit waited {c.seconds:.2f}s > {budget:.2f}s: {c.describe()}")
        for lock in self.locks:
            if lock.wait_seconds > budget:
                out.append(
                    f"lock acquisition waited {lock.wait_seconds:.2f}s > {budget:.2f}s: {lock.describe()}"
                )
            if lock.still_open:
                out.append(f"lock acquisition never ended: {lock.describe()}")
            elif lock.held_seconds is not None and lock.held_seconds > budget:
                out.append(f"lock held {lock.held_seconds:.2f}s > {budget:.2f}s: {lock.describe()}")
        return out

    def settled_by_recovery(self, load_ended_at: float) -> list[CommitWait]:
        return [
            c for c in self.commits if c.settled_at is not None and c.settled_at.timestamp() > load_ended_at
        ]

    def summary(self) -> dict[str, object]:
        waits = sorted(c.seconds for c in self.commits if c.seconds is not None)
        lock_waits = sorted(lock.wait_seconds for lock in self.locks)
        holds = sorted(lock.held_seconds for lock in self.locks if lock.held_seconds is not None)
        return {
            "commits": len(self.commits),
            "commit_wait_max_s": round(waits[-1], 3) if waits else None,
            "lock_acquisitions": len(self.locks),
            "lock_wait_max_s": round(lock_waits[-1], 3) if lock_waits else None,
            "lock_hold_max_s": round(holds[-1], 3) if holds else None,
            "lock_ended_by": dict(Counter(str(lock.ended_by) for lock in self.locks)),
            "expiry_takeovers": len(self.takeovers),
        }


def read_timeline(catalog: MetastoreCatalog, tables: Sequence[str]) -> Timeline:
    locks = [catalog.registry.lock_id(*split_identifier(t)) for t in tables]
    engine: Engine = catalog.engine
    with engine.connect() as conn:
        commits = [
            CommitWait(
                str(r.commit_id),
                r.table_identifier,
                r.commit_user,
                int(r.commit_identifier),
                r.prepared_at,
                r.settled_at,
                tuple(r.events),
            )
            for r in conn.execute(_COMMITS, {"tables": list(tables)})
            if r.prepared_at is not None
        ]
        activity = [
            LockActivity(
                r.lock_id,
                r.owner,
                int(r.fencing_token),
                r.acquired_at,
                float(r.wait_ms or 0) / 1000,
                r.ended_by,
                r.ended_at,
                None if r.held_ms is None else float(r.held_ms) / 1000,
                bool(r.still_open),
                None if r.free_before is None else float(r.free_before),
            )
            for r in conn.execute(_LOCKS, {"locks": locks})
        ]
        takeovers = [dict(r._mapping) for r in conn.execute(_TAKEOVERS, {"locks": locks})]
    return Timeline(commits, activity, takeovers)


def integrity_problems(
    catalog: MetastoreCatalog, table: str
) -> tuple[list[str], Counter[int], dict[tuple[str, int], list[int]]]:
    """What any history must keep (``tests.torture.checker.check_table`` without recovery: the run's
    ``recover`` already ran) plus nothing pending and no row read back twice. Also returns the rows' key
    counts and the snapshots of each (user, identifier)."""
    result = check_table(catalog, table, run_recovery=False)
    state = result.state
    problems = [f"{table}: {v}" for v in result.violations]
    if state.pending:
        problems.append(f"{table}: pending commits after recover: {state.pending[:10]}")
    found: dict[tuple[str, int], list[int]] = {}
    for (user, identifier, _kind), sids in state.keys.items():
        found.setdefault((user, identifier), []).extend(sids)
    rb = catalog.get_table(table).new_read_builder()
    rows = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    counts = Counter(rows.column("k").to_pylist())
    twice = sorted(k for k, n in counts.items() if n > 1)
    if twice:
        problems.append(f"{table}: rows read back more than once: {twice[:10]}")
    return problems, counts, found


def exactly_once_problems(
    catalog: MetastoreCatalog, table: str, acked: dict[tuple[str, int], Ack]
) -> list[str]:
    """:func:`integrity_problems` plus: every acknowledged (user, identifier) in exactly the snapshot its
    acknowledgement named and in no other, no snapshot of anything unacknowledged, snapshot ids 1..N for N
    acknowledgements, and the rows read back are exactly the acknowledged ones."""
    problems, counts, found = integrity_problems(catalog, table)
    for key, ack in acked.items():
        sids = sorted(found.get(key, []))
        if sids != sorted(ack.snapshot_ids):
            problems.append(
                f"{table}: {key} acknowledged as snapshots {ack.snapshot_ids}, storage has {sids}"
            )
    for key in sorted(set(found) - set(acked)):
        problems.append(f"{table}: snapshots {found[key]} carry {key}, which was never acknowledged")
    ids = sorted({sid for sids in found.values() for sid in sids})
    if ids != list(range(1, len(acked) + 1)):
        problems.append(f"{table}: snapshot ids {ids[:3]}..{ids[-3:]} are not 1..{len(acked)}")
    want = {a.key for a in acked.values()}
    if set(counts) != want:
        problems.append(
            f"{table}: rows missing {sorted(want - set(counts))[:10]}, "
            f"unexpected {sorted(set(counts) - want)[:10]}"
        )
    return problems
