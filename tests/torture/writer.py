"""One torture writer process: ``python -m tests.torture.writer <config.json>``.

It reads its journal, resumes at the first unacknowledged identifier and commits the rest in order,
with the same commit user and the same messages as before (exactly-once relies on the commit path's
dedupe). Every failed commit is journalled and retried with the same identifier: a typed error means
"did not land" or "unknown, resolve by retrying"; either way the retry must end in exactly one snapshot.
Exit codes: 0 all identifiers acknowledged, 3 gave up on an identifier (too many failures).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.storage import storage_committer
from paimon_meta.errors import PaimonMetaError
from paimon_meta.table.table import FileStoreTable
from tests.torture import workload
from tests.torture.journal import Journal, read_history

MAX_FAILURES_PER_IDENTIFIER = 60
SETUP_TIMEOUT_SECONDS = 60.0
EXIT_GAVE_UP = 3


@dataclass(frozen=True)
class WriterConfig:
    writer: int
    commits: int
    metastore_url: str
    warehouse: str
    journal: str
    options: dict[str, str] = field(default_factory=dict)
    table: str = workload.TABLE
    pace_seconds: float = 0.0  # a pause after each acknowledged commit (keeps short runs long enough)
    # Commit like Java or pypaimon would: storage-guarded (create_if_absent), no lock, no event log.
    storage_guard: bool = False

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), sort_keys=True))

    @staticmethod
    def load(path: Path) -> WriterConfig:
        return WriterConfig(**json.loads(path.read_text()))


def _open(config: WriterConfig) -> tuple[MetastoreCatalog, FileStoreTable]:
    """Connect and open the table, retrying while the metastore is unreachable (a restart)."""
    deadline = time.monotonic() + SETUP_TIMEOUT_SECONDS
    while True:
        try:
            catalog = paimon_meta.connect(config.metastore_url, config.warehouse, **config.options)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
            continue
        try:
            table = catalog.get_table(config.table)
            if config.storage_guard:
                table.committer_factory = storage_committer
            return catalog, table
        except Exception:
            catalog.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run(config: WriterConfig) -> int:
    journal_path = Path(config.journal)
    start = read_history(config.writer, journal_path).next_identifier()
    journal = Journal(journal_path)
    catalog, table = _open(config)
    try:
        user = workload.commit_user(config.writer)
        commit = table.new_stream_write_builder().with_commit_user(user).new_commit()
        for i in range(start, config.commits):
            msgs = workload.messages(config.writer, i)
            failures = 0
            while True:
                journal.attempt(i)
                try:
                    result = commit.commit(msgs, i)
                except PaimonMetaError as e:
                    journal.error(i, e, typed=True)
                except Exception as e:  # recorded as a finding: the commit path should raise typed errors
                    journal.error(i, e, typed=False)
                else:
                    journal.ack(i, result.snapshot_ids, result.deduplicated)
                    time.sleep(config.pace_seconds)
                    break
                failures += 1
                if failures >= MAX_FAILURES_PER_IDENTIFIER:
                    return EXIT_GAVE_UP
                time.sleep(min(0.05 * failures, 0.5))
    finally:
        journal.close()
        catalog.close()
    return 0


def main(argv: list[str]) -> int:
    return run(WriterConfig.load(Path(argv[1])))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
