"""Branches of one table on storage, as Java's ``FileSystemBranchManager`` keeps them.

A branch ``b`` is the directory ``<table>/branch/branch-b`` holding its own ``snapshot/``, ``schema/`` and
``tag/``; its manifests and data files are in the table's own directories (:func:`paths.branch_path`).

* create ``b``: the main branch's schemas up to the latest (up to the tag snapshot's schema when made
  from a tag, with the tag file and the tagged snapshot: Java's ``createBranch(name, tag)``).
* drop ``b``: delete everything under its directory.
* rename ``a`` to ``b``: copy every file of ``a`` under ``b``, then drop ``a`` (object stores have no
  directory rename; Java renames a directory where it can).
* fast-forward to ``b``: main becomes the branch, by :class:`FastForward`'s plan.

Nothing here takes a lock or records anything: :mod:`paimon_meta.ops.branches` runs these under the
table's metastore lock. Ordering invariant (what a crash may leave): a branch exists for this package
while it has a schema file (``FileStoreTable.branch_names``), so schemas are written last and deleted
last: a crash leaves either a complete branch, a directory without a schema (cleaned by the next
create of that name), or, in a rename, both names (never neither).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from paimon_meta.errors import (
    BranchAlreadyExistsError,
    BranchNotFoundError,
    FileNotFound,
    ValidationError,
)
from paimon_meta.io.base import FileIO
from paimon_meta.model.snapshot import Snapshot
from paimon_meta.serde.json import snapshot_to_json
from paimon_meta.table.containment import name_problem
from paimon_meta.table.option_policy import MAIN_BRANCH
from paimon_meta.table.paths import (
    BRANCH_DIR,
    BRANCH_PREFIX,
    SCHEMA_DIR,
    branch_path,
    join_path,
    validate_branch_name,
)
from paimon_meta.table.snapshots import SchemaManager, SnapshotManager
from paimon_meta.table.tags import TagManager

#: Members a tag file carries beyond its snapshot (Java's ``Tag.trimToSnapshot`` drops them).
_TAG_ONLY_MEMBERS = ("tagCreateTime", "tagTimeRetained")


def validate_new_branch_name(name: str) -> str:
    """A name a branch may be created (or renamed) with: Java's ``BranchManager.validateBranch`` (not
    ``main``, not blank, not only digits) and one plain directory name ``branch-<name>``."""
    if name == MAIN_BRANCH:
        raise ValidationError(
            f"branch name {MAIN_BRANCH!r} is the default branch and cannot be used", branch=name
        )
    validate_branch_name(name)
    problem = name_problem(BRANCH_PREFIX + name)
    if problem is not None:
        raise ValidationError(f"invalid branch name {name!r}: {problem}", branch=name)
    return name


def tag_snapshot(snapshot: Snapshot) -> Snapshot:
    """``Tag.trimToSnapshot``: the snapshot a tag file keeps, without the tag's own members."""
    if not any(k in snapshot.unknown for k in _TAG_ONLY_MEMBERS):
        return snapshot
    unknown = {k: v for k, v in snapshot.unknown.items() if k not in _TAG_ONLY_MEMBERS}
    return dataclasses.replace(snapshot, unknown=unknown)


class BranchManager:
    """The branches of the table at ``table_path`` (main is the table itself and is not listed)."""

    def __init__(self, file_io: FileIO, table_path: str) -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.directory = join_path(self.table_path, BRANCH_DIR)

    def root(self, name: str) -> str:
        return branch_path(self.table_path, name)

    def names(self) -> list[str]:
        """Branches that have a schema file, sorted."""
        out = set()
        prefix = self.directory + "/" + BRANCH_PREFIX
        for status in self.file_io.list_recursive(self.directory):
            rest = status.path[len(prefix) :] if status.path.startswith(prefix) else None
            if rest is None:
                continue
            name, _, below = rest.partition("/")
            if below.startswith(SCHEMA_DIR + "/schema-"):
                out.add(name)
        return sorted(out)

    def exists(self, name: str) -> bool:
        return name != MAIN_BRANCH and bool(SchemaManager(self.file_io, self.root(name)).list_ids())

    def require(self, name: str) -> None:
        """``BranchNotFoundError`` unless branch ``name`` (not main) exists."""
        if name == MAIN_BRANCH or not self.exists(name):
            raise BranchNotFoundError(f"branch {name!r} does not exist", resource_name=name, branch=name)

    # ---- create -----------------------------------------------------------------------------------------

    def create(self, name: str, from_tag: str | None = None) -> Snapshot | None:
        """Create branch ``name`` from main's latest schema, or from tag ``from_tag`` (its snapshot
        becomes the branch's first). Returns the branch's snapshot (None for an empty branch).

        Raises ValidationError (a bad name), BranchAlreadyExistsError, TagNotFoundError."""
        validate_new_branch_name(name)
        if self.exists(name):
            raise BranchAlreadyExistsError(f"branch {name!r} already exists", resource_name=name, branch=name)
        main_schemas = SchemaManager(self.file_io, self.table_path)
        snapshot: Snapshot | None = None
        copies: list[tuple[str, bytes]] = []
        root = self.root(name)
        if from_tag is None:
            latest = main_schemas.latest()
            if latest is None:
                raise ValidationError(f"table {self.table_path} has no schema to branch from")
            schema_id = latest.id
        else:
            tags = TagManager(self.file_io, self.table_path)
            snapshot = tag_snapshot(tags.get(from_tag).snapshot)
            copies.append(
                (TagManager(self.file_io, root).path(from_tag), self.file_io.read(tags.path(from_tag)))
            )
            main_snapshots = SnapshotManager(self.file_io, self.table_path)
            try:
                # the snapshot file itself while main still has it (Java copies it); expired: from the tag
                data = self.file_io.read(main_snapshots.snapshot_path(snapshot.id))
            except FileNotFound:
                data = snapshot_to_json(snapshot).encode("utf-8")
            copies.append((SnapshotManager(self.file_io, root).snapshot_path(snapshot.id), data))
            schema_id = snapshot.schema_id
        branch_schemas = SchemaManager(self.file_io, root)
        schemas = [
            (branch_schemas.schema_path(i), self.file_io.read(main_schemas.schema_path(i)))
            for i in main_schemas.list_ids()
            if i <= schema_id
        ]
        # leftovers of a branch of that name whose drop or create died before its schemas were handled
        self._delete_all(root)
        for path, data in [*copies, *schemas]:  # schemas last: the branch exists once they are there
            self.file_io.write(path, data)
        return snapshot

    # ---- drop and rename --------------------------------------------------------------------------------

    def drop(self, name: str) -> int:
        """Delete branch ``name``'s directory; returns how many files were deleted. The data files only
        its snapshots used become orphans (``remove-orphan-files`` deletes them once old).
        ``BranchNotFoundError`` if there is no such branch."""
        self.require(name)
        return self._delete_all(self.root(name))

    def rename(self, name: str, to: str) -> int:
        """Rename branch ``name`` to ``to``; returns how many files moved.

        Raises BranchNotFoundError, BranchAlreadyExistsError, ValidationError (a bad new name)."""
        if name == MAIN_BRANCH:
            raise ValidationError("cannot rename the main branch", branch=name)
        self.require(name)
        validate_new_branch_name(to)
        if self.exists(to):
            raise BranchAlreadyExistsError(f"branch {to!r} already exists", resource_name=to, branch=to)
        source, target = self.root(name), self.root(to)
        self._delete_all(target)
        files = self._schemas_last([s.path for s in self.file_io.list_recursive(source)], source)
        for path in files:  # the new name exists once its schemas are copied, the old one until deleted
            self.file_io.write(target + path[len(source) :], self.file_io.read(path))
        self._delete_all(source)
        return len(files)

    def _delete_all(self, root: str) -> int:
        files = self._schemas_last([s.path for s in self.file_io.list_recursive(root)], root)
        for path in files:
            self.file_io.delete(path)
        # Java lists branches by directory: an empty branch-<name> left on a local disk is a branch to it
        self.file_io.prune_directories(root)
        return len(files)

    @staticmethod
    def _schemas_last(paths: Sequence[str], root: str) -> list[str]:
        schema_dir = join_path(root, SCHEMA_DIR) + "/"
        return sorted(paths, key=lambda p: (p.startswith(schema_dir), p))


@dataclass(frozen=True, slots=True)
class FastForward:
    """What fast-forwarding main to a branch changes on main (Java's ``fastForward``: main's snapshots,
    schemas and tags from the branch's earliest snapshot on are replaced by the branch's).

    ``keep_through``: main keeps its snapshots up to this id (0: none). Java deletes every main snapshot
    from the branch's earliest on and copies the branch's over; main's snapshots that are byte for byte
    the branch's files (a branch made from a tag starts with the tagged snapshot) are kept instead of
    deleted and re-created, so main loses only snapshots the branch does not have, and no snapshot id
    is deleted and created again with the same content."""

    branch: str
    keep_through: int
    #: main's snapshots after ``keep_through`` (deleted), ascending
    removed: tuple[Snapshot, ...]
    #: the branch's snapshots after ``keep_through`` with their files' bytes (created on main), ascending
    added: tuple[tuple[Snapshot, bytes], ...]
    #: (main's path, the branch file's bytes) of the branch's schemas and tags main lacks or holds
    #: otherwise; paths of main's schemas and tags the branch does not have (deleted)
    schemas_written: tuple[tuple[str, bytes], ...]
    schemas_deleted: tuple[str, ...]
    tags_written: tuple[tuple[str, bytes], ...]
    tags_deleted: tuple[str, ...]

    @property
    def latest(self) -> int:
        """Main's latest snapshot once fast-forwarded."""
        return self.added[-1][0].id if self.added else self.keep_through


def _read_or_none(file_io: FileIO, path: str) -> bytes | None:
    try:
        return file_io.read(path)
    except FileNotFound:
        return None


def plan_fast_forward(file_io: FileIO, table_path: str, name: str) -> FastForward:
    """Plan fast-forwarding main at ``table_path`` to branch ``name``; nothing is changed.

    Raises BranchNotFoundError, ValidationError (``main``, or a branch without a snapshot)."""
    if name == MAIN_BRANCH:
        raise ValidationError(f"cannot fast-forward to {MAIN_BRANCH!r}: name a branch", branch=name)
    branches = BranchManager(file_io, table_path)
    branches.require(name)
    root = branches.root(name)
    main, branch = SnapshotManager(file_io, table_path), SnapshotManager(file_io, root)
    branch_ids = branch.list_snapshot_ids()
    if not branch_ids:
        raise ValidationError(f"cannot fast-forward to branch {name!r}: it has no snapshot", branch=name)
    earliest = branch.snapshot(branch_ids[0])
    keep_through = earliest.id - 1
    for sid in branch_ids:
        data = file_io.read(branch.snapshot_path(sid))
        if sid != keep_through + 1 or _read_or_none(file_io, main.snapshot_path(sid)) != data:
            break
        keep_through = sid
    removed = tuple(main.snapshot(s) for s in main.list_snapshot_ids() if s > keep_through)
    added = tuple(
        (branch.snapshot(s), file_io.read(branch.snapshot_path(s))) for s in branch_ids if s > keep_through
    )
    main_schemas, branch_schemas = SchemaManager(file_io, table_path), SchemaManager(file_io, root)
    branch_schema_ids = set(branch_schemas.list_ids())
    schemas_written = _differing(
        file_io,
        [(branch_schemas.schema_path(i), main_schemas.schema_path(i)) for i in sorted(branch_schema_ids)],
    )
    schemas_deleted = tuple(
        main_schemas.schema_path(i)
        for i in main_schemas.list_ids()
        if i >= earliest.schema_id and i not in branch_schema_ids
    )
    main_tags, branch_tags = TagManager(file_io, table_path), TagManager(file_io, root)
    branch_tag_names = set(branch_tags.names())
    tags_written = _differing(
        file_io, [(branch_tags.path(t), main_tags.path(t)) for t in sorted(branch_tag_names)]
    )
    tags_deleted = tuple(
        main_tags.path(t)
        for t in main_tags.names()
        if t not in branch_tag_names and main_tags.get(t).snapshot.id >= earliest.id
    )
    return FastForward(
        name, keep_through, removed, added, schemas_written, schemas_deleted, tags_written, tags_deleted
    )


def _differing(file_io: FileIO, pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, bytes], ...]:
    """(target, source bytes) of each (source, target) whose target is absent or holds other bytes."""
    out = []
    for source, target in pairs:
        data = file_io.read(source)
        if _read_or_none(file_io, target) != data:
            out.append((target, data))
    return tuple(out)


def apply_fast_forward(file_io: FileIO, table_path: str, plan: FastForward) -> None:
    """Make main what ``plan`` says, in an order where a crash leaves main readable: the LATEST hint
    first, then main's removed snapshots newest first (a contiguous prefix is left at any moment), the
    removed tags, the branch's schemas (before any snapshot that uses them), its snapshots ascending
    (each created only if absent), its tags, then main's schemas nothing uses any more. Run under the
    table's lock, after the metastore has recorded the snapshots removed (a crash then leaves what
    the next lock holder finishes or, run again, this plan redoes)."""
    snapshots = SnapshotManager(file_io, table_path)
    if plan.removed:
        if plan.keep_through > 0:
            snapshots.commit_latest_hint(plan.keep_through)
        else:
            file_io.delete(snapshots.paths.latest_hint_path)
        for snap in reversed(plan.removed):
            file_io.delete(snapshots.snapshot_path(snap.id))
    for path in plan.tags_deleted:
        file_io.delete(path)
    for path, data in plan.schemas_written:
        file_io.write(path, data)
    for snap, data in plan.added:
        file_io.create_if_absent(snapshots.snapshot_path(snap.id), data)
    for path, data in plan.tags_written:
        file_io.write(path, data)
    for path in plan.schemas_deleted:
        file_io.delete(path)
    if plan.added:
        snapshots.commit_latest_hint(plan.latest)
