"""Commit a snapshot a client built itself (Paimon's REST ``commit``), through the metastore guard.

A REST client (pypaimon, Java's ``RESTCatalog``) writes data files, manifests and manifest lists, builds
``snapshot-N`` and asks the catalog to commit it. This module is the server's side of that: the same lock,
fencing, create-if-absent publish and event log as a CommitMessage commit, with the conflict check
reduced to what the protocol defines (the client checked its changes against its base itself):

1. **Validate** (no lock): the snapshot's manifest lists and index manifest are plain file names of
   this table's ``manifest/`` directory and exist; its schema exists; every entry of its delta and
   changelog manifests passes the checks a CommitMessage's files pass (``commit/validate.py``: plain
   names, external paths under the table's external roots, buckets, schema ids, levels, counts within
   BIGINT, no file added twice). Else ``ValidationError``: nothing is recorded, nothing published.
   The partition statistics recorded are the server's, computed from those delta entries (the client's
   are only checked to be numbers): what the log says matches what storage holds. Every manifest of the
   new base list that the latest snapshot (read without the lock) did not list, and a new index
   manifest, pass the entry checks too: the client writes the base list as well.
2. ``prepared`` (:class:`PreparedSnapshot`: the snapshot JSON and the statistics) travels with the first
   lock attempt; acquire the table lock; reconcile storage into the log (as every commit does).
3. No server-side dedupe by (commit user, identifier, kind): pypaimon reuses one such triple for every
   batch commit of a write builder. Exactly once (I1) holds through the base check instead: a retry of
   a commit that landed carries a stale base, gets ``success: false``, and the client then finds its
   snapshot by reading the snapshot files after its base (which is why every accepted snapshot is
   written to storage before the answer).
4. **Base check** (I4): ``baseSnapshotUuid`` must be the latest snapshot's uuid (null: no snapshot).
   Otherwise the answer is ``success: false``, the protocol's conflict signal: the client re-reads the
   latest snapshot, re-checks its changes and retries with a new snapshot. A matching base with an id
   other than latest + 1 is a malformed request (``ValidationError``). On the base: no delta ADD names
   a file live in it (unless the delta deletes it too); the base list's new manifests are checked
   again only if the latest snapshot is not the one step 1 read (a client cannot slip a file outside
   the table into the snapshot through its base list).
5. **Fence and publish** (I2, I3): validate the lease in the publishing transaction; create
   ``snapshot-N`` only if absent (a file already there means a writer outside the lock got there first:
   ``success: false``; on a pointer not checked against storage, what storage has is recorded first,
   under the same lock: the guard's "S3 floor" invariant); the LATEST/EARLIEST hints after the release.
6. **Record** in one transaction: pending audit events, the pointer compare-and-set N-1 -> N with
   ``snapshot_published``, the partition statistics (only if the CAS moved the pointer), the release.

A crash anywhere leaves states recovery already resolves: before step 5 nothing is on storage and the
``prepared`` event is pending (recovery aborts it: a REST commit is never re-committed by the server, the
client retries it); after the snapshot is created, the next commit's reconcile (or recovery) finds it on
storage and records it ``recovered``, and the client's retry deduplicates against it. A metastore
connection that dies at step 6 while the server lives on is settled by the holder itself (the lease and
the record go to the lock's retrier: ``guard``'s module docstring).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from paimon_meta.commit import crashpoints
from paimon_meta.commit.changes import partition_deltas
from paimon_meta.commit.crashpoints import CrashPoint
from paimon_meta.commit.metastore.guard import MetastoreGuard, MetastoreSession
from paimon_meta.commit.publish import SnapshotRaceLost, advance_hints, create_snapshot_file
from paimon_meta.commit.validate import MessageValidator
from paimon_meta.errors import (
    BranchNotFoundError,
    CommitOutcomeUnknownError,
    CorruptMetadataError,
    FileNotFound,
    ValidationError,
)
from paimon_meta.metastore.branches import MAIN
from paimon_meta.metastore.events import CommitRef, PreparedSnapshot
from paimon_meta.model.manifest import ManifestEntry
from paimon_meta.model.partition_statistics import PartitionDelta
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.json import snapshot_to_json
from paimon_meta.table.containment import TableRoots, name_problem
from paimon_meta.table.live_files import readded
from paimon_meta.table.table import FileStoreTable

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SnapshotCommitRequest:
    """What a REST client sends: its base, the snapshot it built and the partition deltas."""

    base_snapshot_uuid: str | None
    snapshot: Snapshot
    statistics: Sequence[PartitionDelta] = ()


@dataclass(frozen=True, slots=True)
class SnapshotCommitResult:
    """``success`` False is a conflict (nothing landed; the client rebuilds on the new latest)."""

    success: bool
    commit_id: str
    snapshot_id: int | None = None
    reason: str | None = None


class _Conflict(Exception):
    pass


def _file_names(snapshot: Snapshot) -> list[tuple[str, str]]:
    named = [
        ("baseManifestList", snapshot.base_manifest_list),
        ("deltaManifestList", snapshot.delta_manifest_list),
        ("changelogManifestList", snapshot.changelog_manifest_list),
        ("indexManifest", snapshot.index_manifest),
    ]
    return [(field, name) for field, name in named if name is not None]


#: The files the commit reads after step 1, before anything is recorded (``_validated_entries``,
#: ``_check_new_manifests``): a missing one is a ``ValidationError`` naming the field there
#: (``_client_file``), so step 1 sends no HEAD before that GET (issue 39: one S3 round trip each). The
#: manifest lists are read whatever the base; the index manifest unless it is the latest snapshot's own
#: (then it exists: a live snapshot's files are never deleted).
_READ_LATER = frozenset({"deltaManifestList", "baseManifestList", "changelogManifestList", "indexManifest"})


def validate_snapshot_files(table: FileStoreTable, snapshot: Snapshot, *, read_later: bool = False) -> None:
    """Step 1: every file the snapshot names is a plain name in ``<table>/manifest/`` and exists, and
    its schema exists (on the table's branch: a branch has its own ``schema/``). Raises
    ``ValidationError`` naming the field. ``read_later``: the caller reads the manifest lists of
    ``_READ_LATER`` next (a missing one refused then), so only the other files are checked here; the
    table object's own schema exists without a request (schema files are immutable)."""
    file_io, paths = table.file_io, table.paths
    for field, name in _file_names(snapshot):
        problem = name_problem(name)
        if problem is not None:
            raise ValidationError(
                f"snapshot.{field} must be a file name in the table's manifest directory, got "
                f"{name[:200]!r}: {problem}",
                field=f"snapshot.{field}",
            )
        if read_later and field in _READ_LATER:
            continue
        if not file_io.exists(paths.manifest_path(name)):
            raise ValidationError(
                f"snapshot.{field} names {name!r}, which is not in {paths.manifest_dir}",
                field=f"snapshot.{field}",
            )
    if snapshot.schema_id < 0:
        raise ValidationError(
            f"snapshot.schemaId {snapshot.schema_id} is not a schema of the table", field="snapshot.schemaId"
        )
    if read_later and snapshot.schema_id == table.schema.id:
        return
    if not file_io.exists(table.schema_manager.schema_path(snapshot.schema_id)):
        raise ValidationError(
            f"snapshot.schemaId {snapshot.schema_id} is not a schema of the table", field="snapshot.schemaId"
        )


class SnapshotCommitter:
    """Commits client-built snapshots to one table through a :class:`MetastoreGuard`. ``table``: the
    table object whose schema, roots and manifest reader check what the snapshot names (its snapshot
    manager is the one commits use)."""

    def __init__(self, guard: MetastoreGuard, table: FileStoreTable) -> None:
        self.guard = guard
        self.table = table
        self.snapshots = table.snapshot_manager
        self.file_io = self.snapshots.file_io
        self.reader = table.manifest_reader
        self.validator = MessageValidator(
            table.schema,
            TableRoots.of(table.path, table.schema.options),
            schema_exists=table.schema_manager.exists,
        )

    def commit(self, request: SnapshotCommitRequest) -> SnapshotCommitResult:
        """Steps 1-6 of the module docstring. Raises ``ValidationError`` (bad request, nothing recorded
        or published), ``LockError`` subclasses (lock not had: nothing published) or
        ``CommitOutcomeUnknownError`` (the snapshot may be on storage: the client must re-read)."""
        snap = request.snapshot
        validate_snapshot_files(self.table, snap, read_later=True)
        delta = self._validated_entries(snap)
        seen = self._precheck_id(request)
        # The new manifests of the base list are decoded and checked here, outside the lock, against the
        # latest snapshot read without it; under the lock again only if the latest moved (then the base
        # check fails it anyway, unless that snapshot carries no uuid).
        self._check_new_manifests(seen, snap)
        # The statistics recorded are what the delta manifests say (the CommitMessage path computes
        # them the same way); the client's numbers were only checked to be BIGINTs.
        request = SnapshotCommitRequest(
            request.base_snapshot_uuid, snap, partition_deltas(delta, self.table.partition_spec)
        )
        row = self.guard.table_row
        ref = CommitRef.new(
            table_id=row.table_id,
            table_identifier=row.identifier,
            commit_user=snap.commit_user,
            commit_identifier=snap.commit_identifier,
            commit_kind=snap.commit_kind,
            principal=self.guard.principal,
            branch=self.guard.branch,
        )
        commit_id = str(ref.commit_id)
        self.guard.prepared_snapshot(
            ref,
            PreparedSnapshot(
                ref=ref,
                snapshot=json.loads(snapshot_to_json(snap)),
                statistics=[_delta_json(d) for d in request.statistics],
                payload={"base_snapshot_uuid": request.base_snapshot_uuid},
            ),
        )
        try:
            result = self._locked(commit_id, ref, request, delta, seen)
        except _Conflict as e:
            self.guard.finished(commit_id, outcome="failed", error="CommitConflict", reason=str(e))
            return SnapshotCommitResult(False, commit_id, reason=str(e))
        except CommitOutcomeUnknownError:
            self.guard.finished(commit_id, outcome="unknown")
            raise
        except Exception as e:
            self.guard.finished(commit_id, outcome="failed", error=type(e).__name__, reason=str(e))
            raise
        self.guard.finished(commit_id, outcome="published", snapshot_id=result.snapshot_id)
        return result

    def _locked(
        self,
        commit_id: str,
        ref: CommitRef,
        request: SnapshotCommitRequest,
        delta: Sequence[ManifestEntry],
        seen: Snapshot | None,
    ) -> SnapshotCommitResult:
        result = self._held(commit_id, ref, request, delta, seen)
        # After the lock's release: LATEST is only a hint that every reader verifies (the commit path's
        # note in coordinator._commit_kind).
        if result.snapshot_id is not None:
            advance_hints(self.snapshots, result.snapshot_id)
        return result

    def _held(
        self,
        commit_id: str,
        ref: CommitRef,
        request: SnapshotCommitRequest,
        delta: Sequence[ManifestEntry],
        seen: Snapshot | None,
    ) -> SnapshotCommitResult:
        snap = request.snapshot
        with self.guard.session(commit_id, 1) as session:
            if self.guard.branch != MAIN and not self.file_io.exists(
                self.table.schema_manager.schema_path(snap.schema_id)
            ):
                # dropped (under this lock) since step 1: nothing may be published into its directory
                raise BranchNotFoundError(
                    f"table {self.guard.table_row.identifier} has no branch {self.guard.branch!r}",
                    resource_name=self.guard.branch,
                )
            latest_id = session.latest_snapshot_id()
            if session.storage_unverified() and not _base_matches(self._latest(session, latest_id), request):
                # The pointer was not checked against storage (guard: "S3 floor"); a base other than
                # the pointer's snapshot may be one another engine left beyond it: check storage (and
                # record what it has) before calling it a conflict.
                latest_id = session.verified_latest_snapshot_id()
            latest = self._latest(session, latest_id)
            crashpoints.reached(CrashPoint.AFTER_LOCK)
            t0 = time.monotonic()
            outcome: dict[str, str] = {"outcome": "ok"}
            try:
                self._check_base(latest, request)
                if _key(latest) != _key(seen):
                    self._check_new_manifests(latest, snap)
                self._check_readded(latest, delta)
            except _Conflict as e:
                outcome = {"outcome": "conflict", "reason": "base_snapshot_changed", "message": str(e)}
                raise
            except ValidationError as e:
                outcome = {"outcome": "refused", "reason": "invalid_on_base", "message": str(e)}
                raise
            finally:
                session.record(
                    "conflict_checked",
                    attempt=1,
                    kind=snap.commit_kind.value,
                    base_snapshot_id=latest_id,
                    duration_ms=round((time.monotonic() - t0) * 1000, 3),
                    **outcome,
                )
            session.before_publish()
            crashpoints.reached(CrashPoint.BEFORE_PUBLISH)
            try:
                create_snapshot_file(self.snapshots, snap.id, snapshot_to_json(snap).encode("utf-8"))
            except SnapshotRaceLost as e:
                if session.storage_unverified():
                    # The pointer was not checked against storage (guard: "S3 floor"): storage is ahead
                    # of the log. Record what it has now, under this lock (a crashed commit's snapshot
                    # ``recovered``, another engine's ``external``), so the answer below and the
                    # client's retry on the snapshot it then reads see the log equal to storage.
                    session.verified_latest_snapshot_id()
                raise _Conflict(f"{e} (outside the lock)") from None
            crashpoints.reached(CrashPoint.AFTER_SNAPSHOT)
            session.set_statistics(request.statistics)
            details = {
                "kind": snap.commit_kind.value,
                "source": "rest",
                "base_manifest_list": snap.base_manifest_list,
                "delta_manifest_list": snap.delta_manifest_list,
                "record_delta": snap.delta_record_count,
                "total_records": snap.total_record_count,
                "snapshot_uuid": snap.uuid,
                "partitions": len(request.statistics),
            }
            try:
                session.published(snap, attempt=1, details=details)
            except Exception:  # the snapshot is durable: the commit succeeded whatever the log says
                log.exception(
                    "snapshot %s is published but recording it failed; recorded later (see the deferred "
                    "recording's log line) or by the next holder",
                    snap.id,
                )
            crashpoints.reached(CrashPoint.AFTER_EVENT)
            return SnapshotCommitResult(True, commit_id, snap.id)

    def _latest(self, session: MetastoreSession, latest_id: int | None) -> Snapshot | None:
        # A rollback reuses the ids above its target: nothing cached under another timeline is the base.
        self.snapshots.observe_timeline(session.timeline)
        return None if latest_id is None else self.snapshots.snapshot(latest_id)

    def _validated_entries(self, snap: Snapshot) -> list[ManifestEntry]:
        """Step 1: the delta's and the changelog's entries pass the CommitMessage checks; the delta's."""
        with _client_file("snapshot.deltaManifestList"):
            delta = self.reader.list_entries(snap.delta_manifest_list)
        self.validator.validate_entries(delta, source="deltaManifestList")
        if snap.changelog_manifest_list is not None:
            with _client_file("snapshot.changelogManifestList"):
                changelog = self.reader.list_entries(snap.changelog_manifest_list)
            self.validator.validate_entries(changelog, source="changelogManifestList")
        return delta

    def _check_new_manifests(self, latest: Snapshot | None, snap: Snapshot) -> None:
        """Manifests of the new base list that ``latest`` did not list (a client's merge output), and an
        index manifest it did not have, pass the entry checks (``ValidationError`` otherwise: the client
        writes the base list too, and must not slip a file into the snapshot through it)."""
        known: set[str] = set()
        if latest is not None:
            for name in (latest.base_manifest_list, latest.delta_manifest_list):
                known.update(m.file_name for m in self.reader.manifest_list(name))
        with _client_file("snapshot.deltaManifestList"):
            known.update(m.file_name for m in self.reader.manifest_list(snap.delta_manifest_list))
        with _client_file("snapshot.baseManifestList"):
            new = [m.file_name for m in self.reader.manifest_list(snap.base_manifest_list)]
            new_entries = [(name, list(self.reader.manifest(name))) for name in new if name not in known]
        for name, entries in new_entries:
            self.validator.validate_entries(entries, source=f"baseManifestList {name}")
        if snap.index_manifest is not None and (
            latest is None or snap.index_manifest != latest.index_manifest
        ):
            with _client_file("snapshot.indexManifest"):
                index = self.reader.index_manifest(snap.index_manifest)
            self.validator.validate_index_entries(index, source="indexManifest")

    def _check_readded(self, latest: Snapshot | None, delta: Sequence[ManifestEntry]) -> None:
        """Step 4, on the base: no delta ADD of a file live in it (unless the delta deletes it too).
        ``ValidationError``: the same snapshot would be refused on any base, so it is bad input, not a
        conflict to retry."""
        again = readded(self.snapshots, self.reader, latest, delta)
        if again:
            name = again[0].file.file_name
            raise ValidationError(
                f"deltaManifestList adds file {name}, which is live in snapshot "
                f"{None if latest is None else latest.id} already ({len(again)} such files)",
                field="deltaManifestList",
                file=name,
            )

    def _precheck_id(self, request: SnapshotCommitRequest) -> Snapshot | None:
        """Refuse a malformed id before anything is recorded: when the base is the latest snapshot as
        read now (without the lock), the id must follow it. Checked again under the lock. Returns that
        latest snapshot."""
        latest = self.snapshots.latest_snapshot()
        base = None if latest is None else latest.uuid
        if request.base_snapshot_uuid == base and (latest is None or latest.uuid is not None):
            expected = 1 if latest is None else latest.id + 1
            if request.snapshot.id != expected:
                raise ValidationError(
                    f"snapshot.id must be {expected} (the latest snapshot + 1), got {request.snapshot.id}",
                    field="snapshot.id",
                )
        return latest

    @staticmethod
    def _check_base(latest: Snapshot | None, request: SnapshotCommitRequest) -> None:
        snap = request.snapshot
        expected_id = 1 if latest is None else latest.id + 1
        if not _base_matches(latest, request):
            raise _Conflict(
                f"the latest snapshot is {None if latest is None else latest.id} "
                f"(uuid {None if latest is None else latest.uuid}), not the base "
                f"{request.base_snapshot_uuid} the commit was built on"
            )
        if snap.id != expected_id:
            raise ValidationError(
                f"snapshot.id must be {expected_id} (the latest snapshot + 1), got {snap.id}",
                field="snapshot.id",
            )


def _base_matches(latest: Snapshot | None, request: SnapshotCommitRequest) -> bool:
    """Whether ``request`` was built on ``latest`` (step 4's base check)."""
    if latest is None:
        return request.base_snapshot_uuid is None
    if latest.uuid is None:
        # Written by an engine that records no uuid: the base cannot be named, only the id checked.
        return request.base_snapshot_uuid is None and request.snapshot.id == latest.id + 1
    return request.base_snapshot_uuid == latest.uuid


@contextmanager
def _client_file(field: str) -> Iterator[None]:
    """Reads of files the client wrote and named in ``field``: one that is gone or does not decode is the
    client's fault (``ValidationError`` naming the field and the file: 400), not the server's."""
    try:
        yield
    except (CorruptMetadataError, FileNotFound) as e:
        raise ValidationError(f"{field}: {e}", field=field, path=e.path) from e


def _key(snapshot: Snapshot | None) -> tuple[int, str, str | None] | None:
    """What tells two reads of the latest snapshot apart (ids are reused after a rollback)."""
    return None if snapshot is None else (snapshot.id, snapshot.delta_manifest_list, snapshot.uuid)


def _delta_json(d: PartitionDelta) -> dict[str, object]:
    return {
        "spec": dict(d.spec),
        "recordCount": d.record_count,
        "fileSizeInBytes": d.file_size_in_bytes,
        "fileCount": d.file_count,
        "lastFileCreationTime": d.last_file_creation_time,
        "totalBuckets": d.total_buckets,
    }
