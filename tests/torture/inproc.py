"""In-process fault scenarios: one catalog whose tables use a :class:`FaultInjectingFileIO`, a chain of
commits that each append a file and compact the previous one (two snapshots per commit), and an
incremental exactly-once check after every commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.commit.coordinator import CommitCoordinator, CommitResult
from paimon_meta.errors import CommitConflictError, CommitOutcomeUnknownError, PaimonMetaError
from paimon_meta.io import FaultInjectingFileIO, FaultRule, get_file_io
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.snapshot import CommitKind
from paimon_meta.table.snapshots import SnapshotManager
from paimon_meta.table.table import FileStoreTable
from tests.commit.helpers import append_msg, compact_msg, data_file
from tests.torture import workload

USER = "fault-writer"


def chain_file(i: int, *, compacted: bool = False) -> str:
    return f"data-chain-{i}{'-c' if compacted else ''}.parquet"


def chain_messages(i: int) -> list[CommitMessage]:
    """Identifier ``i`` appends file ``i`` and (``i >= 1``) compacts file ``i - 1``: two snapshots."""
    p, b = i % workload.PARTITIONS, i % workload.BUCKETS
    out = [append_msg(p, b, data_file(name=chain_file(i), min_key=i, max_key=i))]
    if i >= 1:
        q, c = (i - 1) % workload.PARTITIONS, (i - 1) % workload.BUCKETS
        before = data_file(name=chain_file(i - 1), min_key=i - 1, max_key=i - 1)
        after = data_file(name=chain_file(i - 1, compacted=True), level=1, min_key=i - 1, max_key=i - 1)
        out.append(compact_msg(q, c, [before], [after]))
    return out


def chain_kinds(i: int) -> tuple[CommitKind, ...]:
    return (CommitKind.APPEND, CommitKind.COMPACT) if i >= 1 else (CommitKind.APPEND,)


def chain_live_files(committed: int) -> set[str]:
    """Live files once identifiers ``0..committed-1`` are committed."""
    if committed == 0:
        return set()
    return {chain_file(committed - 1)} | {chain_file(i, compacted=True) for i in range(committed - 1)}


@dataclass
class Outcome:
    """How one faulty commit ended, before and after its retry without faults."""

    identifier: int
    label: str
    error: str | None = None
    typed: bool = True
    unknown: bool = False
    fired: int = 0
    retried_dedup: bool | None = None


@dataclass
class FaultBench:
    """A table of ``catalog`` behind a FaultInjectingFileIO, and what each commit should have left."""

    catalog: MetastoreCatalog
    warehouse: str
    options: Mapping[str, str]
    fio: FaultInjectingFileIO = field(init=False)
    observer: SnapshotManager = field(init=False)
    next_identifier: int = 0
    violations: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    seen: dict[tuple[str, int, CommitKind], list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fio = FaultInjectingFileIO(self.catalog.file_io)
        self.catalog.file_io = self.fio  # every table the catalog opens from now on goes through it
        table = self.catalog.create_table(
            workload.TABLE, workload.SCHEMA, partition_keys=["p"], options=workload.TABLE_OPTIONS
        )
        # The checker's own view of storage: not faulty, and its snapshot cache survives between cases.
        self.observer = SnapshotManager(get_file_io(self.warehouse, self.options), table.path)

    def table(self) -> FileStoreTable:
        return self.catalog.get_table(workload.TABLE)

    def committer(self, user: str = USER) -> CommitCoordinator:
        table = self.table()
        assert table.committer_factory is not None
        return cast(CommitCoordinator, table.committer_factory(table, user))

    def commit_clean(self, i: int) -> CommitResult:
        return self.committer().commit(chain_messages(i), i)

    def run_case(self, label: str, rules: Sequence[FaultRule] = ()) -> Outcome:
        """Commit the next identifier with the fault rules currently installed, then clear them, check
        the table is readable, retry the same identifier if the commit raised, and check it is present
        exactly once per kind."""
        i = self.next_identifier
        self.next_identifier += 1
        outcome = Outcome(i, label)
        result: CommitResult | None = None
        try:
            result = self.commit_clean(i)
        except PaimonMetaError as e:
            outcome.error = f"{type(e).__name__}: {e}"
            outcome.unknown = isinstance(e, CommitOutcomeUnknownError)
            if isinstance(e, CommitConflictError):
                self.violations.append(f"[{label}] unexpected conflict (nothing conflicts here): {e}")
        except Exception as e:
            outcome.error = f"{type(e).__name__}: {e}"
            outcome.typed = False
            self.violations.append(f"[{label}] commit raised an untyped {type(e).__name__}: {e}")
        finally:
            outcome.fired = sum(r.fired for r in rules)
            self.fio.clear()
        self._check_readable(label)
        if result is None:
            try:
                result = self.commit_clean(i)
                outcome.retried_dedup = result.deduplicated
            except Exception as e:
                self.violations.append(f"[{label}] the retry without faults failed: {type(e).__name__}: {e}")
        self._check_present_once(label, i, result)
        self.outcomes.append(outcome)
        return outcome

    def _check_readable(self, label: str) -> None:
        try:
            table = self.table()
            builder = table.new_read_builder()
            builder.new_scan().plan().splits()
        except Exception as e:
            self.violations.append(f"[{label}] table not readable after the fault: {type(e).__name__}: {e}")

    def refresh(self) -> None:
        ids = self.observer.list_snapshot_ids()
        known = {sid for sids in self.seen.values() for sid in sids}
        for sid in ids:
            if sid not in known:
                snap = self.observer.snapshot(sid)
                self.seen.setdefault(snap.dedupe_key, []).append(sid)

    def _check_present_once(self, label: str, i: int, result: CommitResult | None) -> None:
        self.refresh()
        found: list[int] = []
        for kind in chain_kinds(i):
            sids = self.seen.get((USER, i, kind), [])
            if len(sids) != 1:
                self.violations.append(f"[{label}] identifier {i} {kind.value} is in snapshots {sids}")
            found += sids
        if result is not None and tuple(found) != result.snapshot_ids:
            self.violations.append(
                f"[{label}] identifier {i} returned snapshots {result.snapshot_ids}, storage has {found}"
            )
