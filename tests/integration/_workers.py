"""Entry points of the writer processes of the integration tests (spawned, so importable).

Each worker connects with the metastore URL like a separate application would, commits one hand-built
data file per identifier with its own commit user, and reports every acknowledged commit on a queue.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from typing import Any

import paimon_meta
from tests.commit.helpers import append_msg, data_file


@dataclass(frozen=True)
class Target:
    """Where a worker commits: metastore URL, warehouse (+ options for connect) and table."""

    url: str
    warehouse: str
    table: str = "db.t"
    options: Mapping[str, str] = field(default_factory=dict)


def commit_files(
    target: Target,
    user: str,
    identifiers: Sequence[int],
    out: Queue[tuple[Any, ...]],
    *,
    env: Mapping[str, str] | None = None,
    file_names: Sequence[str] | None = None,
) -> None:
    """Commit identifier ``i`` as one APPEND of one data file (``file_names[k]`` or a fresh name).

    Reports ``("acked", user, identifier, file_name, snapshot_ids, deduplicated, attempts)`` per
    acknowledged commit and ``("done", user)`` at the end. ``env`` is set first (crash and pause
    points of ``paimon_meta.commit.crashpoints``).
    """
    os.environ.update(env or {})
    with paimon_meta.connect(target.url, target.warehouse, **target.options) as catalog:
        t = catalog.get_table(target.table)
        assert t.committer_factory is not None
        committer = t.committer_factory(t, user)
        for k, identifier in enumerate(identifiers):
            f = data_file(rows=1, name=None if file_names is None else file_names[k])
            result = committer.commit([append_msg(identifier % 2, identifier % 2, f)], identifier)
            out.put(
                (
                    "acked",
                    user,
                    identifier,
                    f.file_name,
                    result.snapshot_ids,
                    result.deduplicated,
                    getattr(result, "attempts", None),
                )
            )
    out.put(("done", user))
