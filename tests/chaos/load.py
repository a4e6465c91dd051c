"""The load of a chaos run: clients committing real rows through service replicas, re-sending on failure.

Client ``c`` commits identifiers ``0..commits-1`` under commit user ``chaos-c<c>``; identifier ``i`` goes
to table ``tables[(c + i) % len(tables)]`` and carries one row, key :func:`row_key` ``(c, i)``, written
as a real data file before the commit. A commit is sent to replica ``c % replicas`` first; an unanswered
or refused one (``CommitOutcomeUnknownError``: 5xx or no answer; ``MetastoreUnavailableError``) is
re-sent with the same identifier, alternating replicas, after a capped, jittered backoff, until it is
acknowledged or the client's deadline passes. ``client_options`` (cycled over the clients) are the REST
client's options: ``{rest.retry.deadline-seconds: "0"}`` turns its own retries off, so that client's
every 503 or lost answer reaches this loop (a client that re-sends on its own, as an unmodified
engine's job would). Exactly-once rests on the server deduplicating the
identifier; the checker reads the tables back to prove it. Every failed try is counted by its cause
(``HTTP 503``, ``HTTP 500``, ``no answer``, ...), the numbers the test and the benchmark report.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from paimon_meta.catalog.rest import RemoteCommitter, RestCatalog, connect_service
from paimon_meta.errors import CommitOutcomeUnknownError, MetastoreUnavailableError
from paimon_meta.model.commit_message import CommitMessage
from paimon_meta.model.identifier import split_identifier
from paimon_meta.table.write.table_write import TableWrite

SCHEMA = pa.schema(
    [pa.field("k", pa.int64(), nullable=False), pa.field("c", pa.int32(), nullable=False), ("v", pa.string())]
)
TABLE_OPTIONS = {"bucket": "2", "bucket-key": "k"}
RETRYABLE = (CommitOutcomeUnknownError, MetastoreUnavailableError)
_STATUS = re.compile(r"\(HTTP (\d{3}) from ")


def commit_user(client: int) -> str:
    return f"chaos-c{client}"


def row_key(client: int, identifier: int) -> int:
    return client * 1_000_000 + identifier


def cause(e: BaseException) -> str:
    """What a failed try ran into, for counting: ``HTTP <status>`` or ``no answer``."""
    found = _STATUS.search(str(e))
    if found:
        return f"HTTP {found.group(1)}"
    if "did not answer" in str(e) or "unreachable" in str(e):
        return "no answer"
    return type(e).__name__


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledged commit: where, what the service answered, and the client's own times
    (``time.time()``; the benchmark's latencies, never a test assertion)."""

    table: str
    user: str
    identifier: int
    key: int
    snapshot_ids: tuple[int, ...]
    deduplicated: bool
    tries: int
    sent_at: float
    acked_at: float


@dataclass
class LoadResult:
    acks: list[Ack] = field(default_factory=list)
    causes: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)  # a client that stopped: the error it stopped on

    def acked(self, table: str) -> dict[tuple[str, int], Ack]:
        return {(a.user, a.identifier): a for a in self.acks if a.table == table}


class Load:
    """``clients`` threads committing through ``replicas`` (base URLs) with ``token``; :meth:`start`,
    then :meth:`join`. ``acked`` counts acknowledgements so far (the test schedules restarts by it)."""

    def __init__(
        self,
        replicas: Sequence[str],
        token: str,
        tables: Sequence[str],
        *,
        clients: int,
        commits: int,
        deadline_seconds: float = 300.0,
        max_backoff_seconds: float = 1.0,
        client_options: Sequence[Mapping[str, str]] = ({},),
    ) -> None:
        self.replicas = list(replicas)
        self.token = token
        self.tables = list(tables)
        self.clients = clients
        self.commits = commits
        self.deadline_seconds = deadline_seconds
        self.max_backoff = max_backoff_seconds
        self.client_options = list(client_options)
        self.result = LoadResult()
        self._mutex = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._catalogs: list[RestCatalog] = []
        self.acked = 0
        self.stop = threading.Event()

    @property
    def total(self) -> int:
        return self.clients * self.commits

    def start(self) -> None:
        """Connect every client (catalogs, tables, writers) before any commit, then start them together."""
        ready = threading.Barrier(self.clients + 1)
        setups = [self._setup(c) for c in range(self.clients)]
        for c, setup in enumerate(setups):
            # Daemons: a client stuck on a dead connection must not keep the test process alive.
            thread = threading.Thread(
                target=self._client, args=(c, setup, ready), name=f"chaos-client-{c}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        ready.wait()

    def join(self, timeout: float | None = None) -> LoadResult:
        for thread in self._threads:
            thread.join(timeout)
        for catalog in self._catalogs:
            catalog.close()
        return self.result

    # ---- one client -----------------------------------------------------------------------------------

    def _setup(self, c: int) -> tuple[dict[str, TableWrite], list[dict[str, RemoteCommitter]]]:
        user = commit_user(c)
        options = self.client_options[c % len(self.client_options)]
        catalogs = [connect_service(base, self.token, **options) for base in self.replicas]
        self._catalogs.extend(catalogs)
        writes = {
            t: catalogs[0].get_table(t).new_stream_write_builder().with_commit_user(user).new_write()
            for t in self.tables
        }
        committers = []
        for catalog in catalogs:
            by_table = {}
            for t in self.tables:
                db, name = split_identifier(t)
                by_table[t] = RemoteCommitter(catalog.client, db, name, user)
            committers.append(by_table)
        return writes, committers

    def _client(
        self,
        c: int,
        setup: tuple[dict[str, TableWrite], list[dict[str, RemoteCommitter]]],
        ready: threading.Barrier,
    ) -> None:
        writes, committers = setup
        ready.wait()
        try:
            for i in range(self.commits):
                if self.stop.is_set():
                    return
                table = self.tables[(c + i) % len(self.tables)]
                write = writes[table]
                key = row_key(c, i)
                write.write_arrow(
                    pa.table(
                        {
                            "k": pa.array([key], pa.int64()),
                            "c": pa.array([c], pa.int32()),
                            "v": [f"c{c}-i{i}"],
                        },
                        schema=SCHEMA,
                    )
                )
                messages = write.prepare_commit()
                ack = self._commit(c, i=i, table=table, key=key, messages=messages, committers=committers)
                with self._mutex:
                    self.result.acks.append(ack)
                    self.acked += 1
        except BaseException as e:
            with self._mutex:
                self.result.errors.append(f"client {c}: {type(e).__name__}: {e}")
            raise
        finally:
            for write in writes.values():
                write.close()

    def _commit(
        self,
        c: int,
        *,
        i: int,
        table: str,
        key: int,
        messages: Sequence[CommitMessage],
        committers: list[dict[str, RemoteCommitter]],
    ) -> Ack:
        replica = c % len(self.replicas)
        sent_at = time.time()
        deadline = time.monotonic() + self.deadline_seconds
        backoff = 0.05
        tries = 0
        while True:
            tries += 1
            try:
                answer = committers[replica][table].commit(messages, i)
            except RETRYABLE as e:
                with self._mutex:
                    self.result.causes[cause(e)] += 1
                if time.monotonic() > deadline:
                    raise
                # Unanswered or refused: it may have landed. The same identifier resolves it, exactly once.
                time.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.max_backoff)
                replica = (replica + 1) % len(self.replicas)
                continue
            return Ack(
                table=table,
                user=commit_user(c),
                identifier=i,
                key=key,
                snapshot_ids=tuple(answer.snapshot_ids),
                deduplicated=answer.deduplicated,
                tries=tries,
                sent_at=sent_at,
                acked_at=time.time(),
            )
