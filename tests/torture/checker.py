"""The history checker: what storage, the event log, the pointer and the lock table must agree on.

:func:`check_table` verifies the invariants any history must keep, after first running recovery (the
ops ``recover_table`` with no grace period), so a recovery that republishes something is caught too:

* snapshot ids on storage are exactly ``1..L`` (contiguous), every snapshot decodes;
* no (commit user, identifier, kind) is in two snapshots (exactly-once, acknowledged or not);
* in the final snapshot no data file was added twice or deleted while not live;
* event log == storage: one ``snapshot_published``/``recovered``/``external`` event per snapshot id,
  with the snapshot's user, identifier, kind and uuid; none for ids beyond ``L``; pointer == ``L``;
  an ``external`` event never names a commit this metastore prepared (that is a misattributed commit);
* after recovery no lock row is held, and the lock log is a valid hand-off sequence (fencing tokens
  strictly increase; nobody acquires while another token holds the lock without a release or takeover).

:func:`check_torture` adds the client side of a torture run (the writers' journals): every acknowledged
identifier is in exactly the snapshots its acknowledgement named, every identifier was eventually
acknowledged, a user's snapshots follow its identifiers' order, and the live files are exactly the
workload's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.model.identifier import split_identifier
from paimon_meta.model.manifest import FileKind
from paimon_meta.model.snapshot import CommitKind, Snapshot
from paimon_meta.ops.recovery import recover_table
from tests.torture import workload
from tests.torture.journal import History

Key = tuple[str, int, CommitKind]


@dataclass
class TableState:
    """Storage and metastore of one table as the checker read them."""

    snapshots: dict[int, Snapshot] = field(default_factory=dict)
    keys: dict[Key, list[int]] = field(default_factory=lambda: defaultdict(list))
    live_files: set[str] = field(default_factory=set)
    events: list[dict[str, Any]] = field(default_factory=list)
    pointer: int | None = None
    recovery: str = ""
    pending: list[Key] = field(default_factory=list)

    @property
    def latest(self) -> int:
        return max(self.snapshots, default=0)

    def event_counts(self) -> Counter[str]:
        return Counter(str(e["event_type"]) for e in self.events)


@dataclass
class CheckResult:
    state: TableState
    violations: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        self.violations.append(message)


def recover(catalog: MetastoreCatalog, identifier: str, *, older_than_seconds: float = 0.0) -> str:
    """Run recovery (``paimon_meta.ops.recovery.recover_table``) once; returns what it did. The default
    grace of 0 s is for the end of a run, when no writer is left: every pending commit is then resolved
    (published, finished from its stored messages, or aborted)."""
    report = recover_table(catalog, identifier, older_than_seconds=older_than_seconds)
    actions = Counter(c.action for c in report.commits)
    return f"recover_table: {len(report.reconciled)} reconciled, {dict(actions)}"


def read_state(catalog: MetastoreCatalog, identifier: str) -> tuple[TableState, list[str]]:
    """Read storage and the metastore of ``identifier`` (no recovery)."""
    state = TableState()
    problems: list[str] = []
    db, name = split_identifier(identifier)
    row = catalog.registry.get_table_row(db, name)
    table = catalog.get_table(identifier)
    manager = table.snapshot_manager
    ids = manager.list_snapshot_ids()
    if ids and ids != list(range(1, ids[-1] + 1)):
        missing = sorted(set(range(1, ids[-1] + 1)) - set(ids))
        problems.append(f"snapshot ids not contiguous: missing {missing[:20]}")
    for sid in ids:
        snap = manager.snapshot(sid)
        state.snapshots[sid] = snap
        state.keys[snap.dedupe_key].append(sid)
    if ids:
        reader = table.manifest_reader
        live: Counter[str] = Counter()
        final = state.snapshots[ids[-1]]
        for group in reader.manifests(reader.data_manifests(final)):
            for entry in group:
                fname = entry.file.file_name
                if entry.kind is FileKind.ADD:
                    live[fname] += 1
                    if live[fname] > 1:
                        problems.append(f"data file {fname} is added twice in snapshot {final.id}")
                elif live[fname] == 0:
                    problems.append(f"data file {fname} is deleted while not live in snapshot {final.id}")
                else:
                    live[fname] -= 1
        state.live_files = {f for f, n in live.items() if n > 0}
    with catalog.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT event_id, commit_id, event_type, commit_user, commit_identifier, commit_kind, "
                "snapshot_id, payload FROM paimon_commit_events WHERE table_id = :t ORDER BY event_id"
            ),
            {"t": row.table_id},
        )
        state.events = [dict(r._mapping) for r in rows]
    state.pointer = catalog.registry.get_table_row(db, name).latest_snapshot_id
    state.pending = [
        (
            p.prepared.ref.commit_user,
            p.prepared.ref.commit_identifier,
            p.prepared.ref.commit_kind,
        )
        for p in catalog.events.pending_commits(row.table_id)
    ]
    return state, problems


_RECORDING = ("snapshot_published", "recovered", "external")


def _is_recording(event: dict[str, Any]) -> bool:
    """Whether the event is the one that recorded its snapshot (advanced the pointer to it):
    ``snapshot_published``, ``external``, or a ``recovered`` written by ``reconcile`` (it carries the
    snapshot's uuid). Recovery also writes ``recovered`` with a snapshot id for pending commits whose
    key another commit already published (the old attempt of a deduplicated re-run): those point at a
    recorded snapshot and must agree with it, but do not record it."""
    kind = event["event_type"]
    if kind in ("snapshot_published", "external"):
        return True
    return kind == "recovered" and "snapshot_uuid" in (event["payload"] or {})


def _check_events(state: TableState, result: CheckResult) -> None:
    by_sid: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in state.events:
        if e["event_type"] in _RECORDING and e["snapshot_id"] is not None:
            by_sid[int(e["snapshot_id"])].append(e)
    prepared_keys = {
        (e["commit_user"], int(e["commit_identifier"]), e["commit_kind"])
        for e in state.events
        if e["event_type"] == "prepared"
    }
    for sid, snap in sorted(state.snapshots.items()):
        named = by_sid.get(sid, [])
        want = (snap.commit_user, snap.commit_identifier, snap.commit_kind.value)
        for rec in named:
            got = (rec["commit_user"], int(rec["commit_identifier"]), rec["commit_kind"])
            if got != want:
                result.add(f"snapshot {sid}: event {rec['event_type']} names {got}, storage has {want}")
        recs = [e for e in named if _is_recording(e)]
        if len(recs) != 1:
            kinds = [(r["event_type"], str(r["commit_id"])[:8]) for r in named]
            result.add(f"snapshot {sid}: {len(recs)} recording events among {kinds}, expected exactly 1")
            continue
        rec = recs[0]
        payload = rec["payload"] or {}
        if payload.get("snapshot_uuid") not in (None, snap.uuid):
            result.add(
                f"snapshot {sid}: event uuid {payload.get('snapshot_uuid')} != storage uuid {snap.uuid}"
            )
        if rec["event_type"] == "external" and want in prepared_keys:
            result.add(
                f"snapshot {sid} is recorded as external, but this metastore prepared {want}: "
                "the commit that published it was recorded as failed/aborted"
            )
    for sid in sorted(set(by_sid) - set(state.snapshots)):
        result.add(f"event log records snapshot {sid}, which is not on storage")
    if state.pointer != (state.latest or None):
        result.add(f"table pointer is {state.pointer}, latest snapshot on storage is {state.latest}")


def _check_lock(catalog: MetastoreCatalog, identifier: str, result: CheckResult) -> None:
    db, name = split_identifier(identifier)
    lock_id = catalog.registry.lock_id(db, name)
    info = catalog.lock.get_lock(lock_id)
    if info is not None and not info.stale:
        result.add(
            f"lock {lock_id} still held at the end by {info.owner} "
            f"(token {info.fencing_token}, {info.lease_left_seconds:.1f}s of lease left)"
        )
    holder: int | None = None
    last_token = 0
    for stored in catalog.events.lock_events(lock_id, limit=1_000_000):
        ev = stored.event
        kind = ev.event_type.value
        if kind == "released" and ev.fencing_token == holder:
            holder = None
        elif kind in ("expiry_takeover", "force_released"):
            if holder is not None and ev.previous_fencing_token != holder:
                result.add(
                    f"lock log: {kind} of token {ev.previous_fencing_token} while token {holder} held it"
                )
            holder = None
        elif kind == "acquired":
            token = ev.fencing_token or 0
            if holder is not None:
                result.add(f"lock log: token {token} acquired while token {holder} still held the lock")
            if token <= last_token:
                result.add(f"lock log: fencing token {token} after {last_token} (not increasing)")
            holder, last_token = token, max(last_token, token)


def check_table(catalog: MetastoreCatalog, identifier: str, *, run_recovery: bool = True) -> CheckResult:
    """Recover, then check the invariants every history must keep (module docstring)."""
    recovery = recover(catalog, identifier) if run_recovery else "none"
    state, problems = read_state(catalog, identifier)
    state.recovery = recovery
    result = CheckResult(state, problems)
    for key, sids in sorted(state.keys.items(), key=lambda kv: kv[1]):
        if len(sids) > 1:
            result.add(f"{key[0]} identifier {key[1]} {key[2].value} is in snapshots {sids}")
    _check_events(state, result)
    _check_lock(catalog, identifier, result)
    if run_recovery and state.pending:
        result.add(f"pending commits left after recovery: {state.pending[:10]}")
    return result


def check_exactly_once(result: CheckResult, user: str, identifier: int, kinds: Sequence[CommitKind]) -> None:
    """``(user, identifier)`` is in exactly one snapshot per kind."""
    for kind in kinds:
        sids = result.state.keys.get((user, identifier, kind), [])
        if len(sids) != 1:
            result.add(f"{user} identifier {identifier} {kind.value}: in snapshots {sids}, expected one")


def check_torture(
    catalog: MetastoreCatalog, histories: Sequence[History], *, commits: int, identifier: str = workload.TABLE
) -> CheckResult:
    """:func:`check_table` plus the writers' journals of a torture run (module docstring)."""
    result = check_table(catalog, identifier)
    state = result.state
    users = {workload.commit_user(h.writer): h for h in histories}
    for key, sids in state.keys.items():
        user, ident, _ = key
        if user not in users or not 0 <= ident < commits:
            result.add(f"snapshots {sids} carry {key}, which no torture writer commits")
    expected_live: set[str] = set()
    for history in histories:
        user = workload.commit_user(history.writer)
        expected_live |= workload.expected_live_files(history.writer, commits)
        previous_sid = 0
        for i in range(commits):
            kinds = workload.kinds(i)
            found = tuple(sid for kind in kinds for sid in state.keys.get((user, i, kind), []))
            if i not in history.acks:
                attempts = history.attempts.get(i)
                result.add(f"{user} identifier {i} was never acknowledged (attempts: {attempts})")
            for ack in history.acks.get(i, []):
                if ack != found:
                    result.add(f"{user} identifier {i} acknowledged as snapshots {ack}, storage has {found}")
            check_exactly_once(result, user, i, kinds)
            if found:
                if found[0] <= previous_sid:
                    result.add(f"{user} identifier {i} is in snapshot {found[0]}, before identifier {i - 1}")
                previous_sid = found[-1]
    missing = sorted(expected_live - state.live_files)
    extra = sorted(state.live_files - expected_live)
    if missing:
        result.add(f"{len(missing)} files of acknowledged commits are not live: {missing[:10]}")
    if extra:
        result.add(f"{len(extra)} live files no commit should have left: {extra[:10]}")
    return result
