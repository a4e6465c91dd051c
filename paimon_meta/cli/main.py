"""The ``paimon-meta`` command: metastore, tables, commits, locks, recovery, maintenance, metrics, demo.

``main(argv)`` returns the exit code (see ``EXIT_CODES``); the console script and ``python -m
paimon_meta.cli`` exit with it. Results go to stdout (aligned tables, or JSON with ``--json``); progress
of long work and errors go to stderr, errors as one line (with the traceback under ``--debug``).

``--metastore`` is a database URL, or the URL of a commit service (``paimon-meta serve``) with a token:
then the read-only and audit commands (``REMOTE_COMMANDS``) read through the service (``cli_remote``)
and every other command is refused (``DatabaseUrlRequiredError``) before anything is done.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimon_meta import errors
from paimon_meta.cli import render
from paimon_meta.errors import (
    CommitConflictError,
    DatabaseNotFoundError,
    LockTimeoutError,
    NotFoundError,
    PaimonMetaError,
    TableNotFoundError,
    ValidationError,
)
from paimon_meta.ops.common import RefusedError, parse_age

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import MetastoreCatalog
    from paimon_meta.catalog.rest import RestCatalog
    from paimon_meta.table.table import FileStoreTable

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_REFUSED = 4
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILURE: "operational failure (storage or metastore error, unresolved commit, failed demo check)",
    EXIT_USAGE: "usage error (bad arguments or invalid input)",
    EXIT_NOT_FOUND: "not found (table, database, lock, commit or snapshot)",
    EXIT_REFUSED: (
        "conflict or refused (commit conflict, live lock not forced, table lock busy past timeout, "
        "token refused by the service)"
    ),
}

ENV_URL = "PAIMON_META_URL"
ENV_WAREHOUSE = "PAIMON_META_WAREHOUSE"
ENV_OPTIONS = "PAIMON_META_OPTIONS"
ENV_TOKEN = "PAIMON_META_TOKEN"  # as spark_jobs' --service/--token

#: The commands that work with ``--metastore http(s)://...`` (read-only; ``tags`` only lists there).
REMOTE_COMMANDS = ("tables", "snapshots", "read", "commits", "events --table", "tags (listing)")
#: Where to look instead, for read-only commands a service does not answer.
_SERVICE_HINTS = {
    "db current": "the service's GET /readyz says whether it is ready (its log says why not)",
    "metrics": "scrape the service's GET /metrics with an admin token",
    "locks list": "a table's lock history: `paimon-meta events --table DB.T --locks`",
}

EPILOG = (
    "exit codes:\n" + "".join(f"  {code}  {text}\n" for code, text in EXIT_CODES.items()) + "\nenvironment:\n"
    f"  {ENV_URL}        metastore URL (postgresql+psycopg://user@host:5432/db); unset: an embedded\n"
    "                         Postgres under $PAIMON_META_HOME (default ~/.paimon-meta); a commit\n"
    "                         service's http(s)://host:port serves the read-only commands:\n"
    f"                         {', '.join(REMOTE_COMMANDS)}\n"
    f"  {ENV_TOKEN}      bearer token for a commit service URL; --token wins\n"
    f"  {ENV_WAREHOUSE}  warehouse root (/path or s3://bucket/prefix)\n"
    f"  {ENV_OPTIONS}    catalog/storage options, 'k=v,k=v' (s3.endpoint, s3.access-key, s3.secret-key,\n"
    "                         s3.region, s3.path-style-access, lock.lease-seconds, ...); --option wins\n"
    "\ndurations: 90s, 15min, 2h, 1d, 250ms (a bare number is seconds)"
)


@dataclass(slots=True)
class Output:
    """What a command produced: ``data`` for --json, ``text`` for people, and the exit code."""

    data: Any
    text: str
    code: int = EXIT_OK
    extra: list[str] = field(default_factory=list)


class DatabaseUrlRequiredError(errors.UnsupportedError):
    """The command needs the metastore database, and ``--metastore`` is a commit service's URL."""

    def __init__(self, command: str, url: str) -> None:
        hint = _SERVICE_HINTS.get(command)
        super().__init__(
            f"`paimon-meta {command}` needs a database URL (--metastore postgresql+psycopg://...), "
            f"not the commit service {url}; over a service only {', '.join(REMOTE_COMMANDS)} work"
            + (f" ({hint})" if hint else ""),
            command=command,
            url=url,
        )


def is_service_url(url: str | None) -> bool:
    return url is not None and url.startswith(("http://", "https://"))


def command_name(args: argparse.Namespace) -> str:
    """``locks release``, ``db upgrade``, ``tables``: the command as typed, for messages."""
    action = getattr(args, f"{args.command}_command", None)  # db, locks, principals: their ACTION
    return f"{args.command} {action}" if action else str(args.command)


class _Context:
    """Connections shared by one invocation, created on first use and closed at the end."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._catalog: MetastoreCatalog | None = None
        self._remote: RestCatalog | None = None

    def progress(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def options(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in _split_options(os.environ.get(ENV_OPTIONS, "")) + list(self.args.option or []):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValidationError(f"option {item!r} is not KEY=VALUE")
            out[key.strip()] = value.strip()
        return out

    def service_url(self) -> str | None:
        """The commit service ``--metastore`` names, or None when it is a database (or unset)."""
        url: str | None = self.args.metastore or os.environ.get(ENV_URL)
        return url if is_service_url(url) else None

    def require_database(self, command: str | None = None) -> None:
        """Refuse (before anything is done) when ``--metastore`` is a service, not a database."""
        url = self.service_url()
        if url is not None:
            raise DatabaseUrlRequiredError(command or command_name(self.args), url)

    def metastore_url(self) -> str:
        self.require_database()
        url: str | None = self.args.metastore or os.environ.get(ENV_URL)
        if url:
            return url
        from paimon_meta.db.embedded import ensure_embedded_postgres

        self.progress("no --metastore / PAIMON_META_URL: using the embedded Postgres under PAIMON_META_HOME")
        return str(ensure_embedded_postgres().url)

    def catalog(self) -> MetastoreCatalog:
        self.require_database()
        if self._catalog is None:
            import paimon_meta

            self._catalog = paimon_meta.connect(
                self.metastore_url(), self.args.warehouse or os.environ.get(ENV_WAREHOUSE), **self.options()
            )
        return self._catalog

    def remote(self) -> RestCatalog | None:
        """The commit service's catalog when ``--metastore`` is one (token: ``--token`` or
        ``$PAIMON_META_TOKEN``), else None: the database path."""
        url = self.service_url()
        if url is None:
            return None
        if self._remote is None:
            token = self.args.token or os.environ.get(ENV_TOKEN)
            if not token:
                raise ValidationError(
                    f"--metastore {url} is a commit service: give its bearer token with --token or "
                    f"${ENV_TOKEN}",
                    url=url,
                )
            from paimon_meta.catalog.rest import connect_service

            self._remote = connect_service(url, token, **self.options())
        return self._remote

    def table(self, identifier: str) -> FileStoreTable:
        """A table to read, opened by the database catalog or the commit service."""
        remote = self.remote()
        return self.catalog().get_table(identifier) if remote is None else remote.get_table(identifier)

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
        if self._remote is not None:
            self._remote.close()


def _split_options(text: str) -> list[str]:
    return [p.strip() for p in text.replace("\n", ",").split(",") if p.strip()]


# ---- commands ------------------------------------------------------------------------------------------


def _db_upgrade(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.migrate import current, heads, upgrade

    url = ctx.metastore_url()
    before = current(url)
    upgrade(url)
    after = current(url)
    data = {"before": before, "current": after, "head": heads()}
    return Output(data, f"metastore schema: {before or '(empty)'} -> {after}")


def _db_current(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.db.migrate import current, heads

    rev, head = current(ctx.metastore_url()), heads()
    data = {"current": rev, "head": head, "up_to_date": rev is not None and [rev] == head}
    note = "up to date" if data["up_to_date"] else "run `paimon-meta db upgrade`"
    return Output(data, f"current {rev or '(none)'}, head {', '.join(head)} ({note})")


def _tables(ctx: _Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is not None:
        from paimon_meta.cli import remote as cli_remote

        rows = cli_remote.table_rows(remote, args.database)
        return Output(rows, render.table(rows))
    cat = ctx.catalog()
    databases = [args.database] if args.database else cat.list_databases()
    rows = []
    for db in databases:
        for t in sorted(cat.registry.list_table_rows(db), key=lambda r: r.name):
            rows.append(
                {
                    "table": t.identifier,
                    "latest_snapshot_id": t.latest_snapshot_id,
                    "schema_id": t.schema_id,
                    "location": t.location,
                    "updated_at": t.updated_at,
                }
            )
    return Output(rows, render.table(rows))


def _snapshots(ctx: _Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is None:
        from paimon_meta.ops.audit import snapshot_rows

        rows = snapshot_rows(ctx.catalog(), args.table)
    else:
        from paimon_meta.cli import remote as cli_remote

        rows = cli_remote.snapshot_rows(remote, args.table)
    cols: list[render.Column] = [
        ("snapshot_id", "id"),
        ("commit_kind", "kind"),
        ("committed_at", "committed at"),
        ("commit_user", "user"),
        ("commit_identifier", "identifier"),
        ("delta_records", "delta"),
        ("total_records", "total"),
        ("recorded_as", "event log"),
    ]
    return Output(rows, render.table(rows, cols))


def _read(ctx: _Context, args: argparse.Namespace) -> Output:
    table = ctx.table(args.table)
    builder = table.new_read_builder()
    if args.snapshot is not None:
        if not table.snapshot_manager.snapshot_exists(args.snapshot):
            raise NotFoundError(f"{args.table} has no snapshot {args.snapshot} (never written or expired)")
        builder = builder.with_snapshot(args.snapshot)
    if args.tag is not None:
        builder = builder.with_tag(args.tag)
    if args.columns:
        builder = builder.with_projection([c.strip() for c in args.columns.split(",") if c.strip()])
    splits = builder.new_scan().plan().splits()
    rows: list[dict[str, Any]] = []
    for batch in builder.new_read().to_arrow_batches(splits):
        rows.extend(batch.to_pylist()[: args.limit - len(rows)])
        if len(rows) >= args.limit:
            break
    return Output(rows, render.table(rows))


def _commits(ctx: _Context, args: argparse.Namespace) -> Output:
    remote = ctx.remote()
    if remote is None:
        from paimon_meta.ops.audit import commit_history
        from paimon_meta.ops.common import resolve_table

        cat = ctx.catalog()
        row, _ = resolve_table(cat, args.table)
        rows = commit_history(cat.engine, row.table_id, limit=args.limit)
    else:
        from paimon_meta.cli import remote as cli_remote

        rows = cli_remote.commit_history(remote, args.table, args.limit)
    cols: list[render.Column] = [
        ("first_event_at", "started"),
        ("commit_kind", "kind"),
        "outcome",
        ("snapshot_id", "snapshot"),
        "attempts",
        "retries",
        "conflicts",
        ("elapsed_ms", "ms"),
        ("commit_user", "user"),
        ("final_reason", "reason"),
        ("commit_id", "commit"),
    ]
    return Output(rows, render.table(rows, cols))


def _events(ctx: _Context, args: argparse.Namespace) -> Output:
    if args.maintenance:
        mcols: list[render.Column] = [
            ("started_at", "started"),
            "table_identifier",
            "operation",
            "outcome",
            "dry_run",
            ("elapsed_ms", "ms"),
            "operator",
            "result",
        ]
        rows = _event_rows(ctx, args, "maintenance")
        return Output(rows, render.table(rows, mcols))
    if args.locks:
        cols: list[render.Column] = [
            ("created_at", "at"),
            "lock_id",
            ("event_type", "event"),
            "owner",
            ("fencing_token", "token"),
            "wait_ms",
            "operator",
            "reason",
            "previous_owner",
        ]
        rows = _event_rows(ctx, args, "locks")
        return Output(rows, render.table(rows, cols))
    rows = _event_rows(ctx, args, "commits")
    if args.commit and not rows:
        raise NotFoundError(f"no events for commit {args.commit}")
    cols = [
        ("event_id", "id"),
        ("created_at", "at"),
        ("table_identifier", "table"),
        ("event_type", "event"),
        "attempt",
        ("commit_kind", "kind"),
        ("snapshot_id", "snapshot"),
        "duration_ms",
        ("commit_id", "commit"),
        "payload",
    ]
    return Output(rows, render.table(rows, cols))


def _event_rows(ctx: _Context, args: argparse.Namespace, kind: str) -> list[dict[str, Any]]:
    """The rows of ``events`` (``kind``: commits, locks, maintenance), from the database or the service
    (there only of one table: its grants are per table)."""
    from paimon_meta.ops import audit

    if not args.table:
        ctx.require_database("events (without --table)")
    remote = ctx.remote()
    if remote is not None:
        from paimon_meta.cli import remote as cli_remote

        if kind == "maintenance":
            return cli_remote.maintenance_history(remote, args.table, args.limit)
        if kind == "locks":
            return cli_remote.lock_events(remote, args.table, args.limit)
        return cli_remote.commit_events(remote, args.table, args.commit, args.limit)
    cat = ctx.catalog()
    if kind == "maintenance":
        return audit.maintenance_history(cat.engine, table=args.table, limit=args.limit)
    if kind == "locks":
        lock_id = None
        if args.table:
            from paimon_meta.catalog.metastore import split_identifier

            lock_id = cat.registry.lock_id(*split_identifier(args.table))
        return audit.lock_events(cat.engine, lock_id=lock_id, limit=args.limit)
    return audit.commit_events(cat.engine, table=args.table, commit_id=args.commit, limit=args.limit)


def _locks_list(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.locks import list_locks

    rows = list_locks(ctx.catalog().lock, stale_only=args.stale)
    data = [render.jsonable(r) for r in rows]
    cols: list[render.Column] = [
        ("lock_id", "key"),
        "kind",
        "owner",
        ("fencing_token", "token"),
        ("age_seconds", "age s"),
        ("lease_left_seconds", "lease left s"),
        ("heartbeat_age_seconds", "heartbeat s ago"),
        "stale",
    ]
    return Output(data, render.table(data, cols))


def _locks_release(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.locks import release_lock

    result = release_lock(ctx.catalog().lock, args.key, reason=args.reason, force=args.force)
    held = result.lock
    how = "forced" if result.forced else "stale"
    text = (
        f"released {held.lock_id} ({how}; was held by {held.owner or 'a Java writer'}, "
        f"token {render.cell(held.fencing_token)}, age {held.age_seconds:.1f}s) "
        f"by {result.operator}: {result.reason}"
    )
    return Output(result.to_dict(), text)


def _recover(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.recovery import recover_all, recover_table

    cat = ctx.catalog()
    grace = None if args.older_than is None else parse_age(args.older_than)
    if args.table:
        reports = [
            recover_table(
                cat, args.table, older_than_seconds=grace, dry_run=args.dry_run, progress=ctx.progress
            )
        ]
    else:
        reports = recover_all(cat, older_than_seconds=grace, dry_run=args.dry_run, progress=ctx.progress)
    lines = []
    for r in reports:
        counts = ", ".join(
            f"{r.count(a)} {a}" for a in ("published", "finished", "aborted", "skipped", "failed")
        )
        head = (
            f"{r.table}: {len(r.reconciled)} snapshots recorded, {len(r.commits)} pending ({counts}), "
            f"{len(r.deleted_files)} files deleted" + (" [dry run]" if r.dry_run else "")
        )
        lines.append(head if r.error is None else f"{r.table}: NOT RECOVERED: {r.error}")
        if r.commits:
            rows = [render.jsonable(c) for c in r.commits]
            lines.append(
                render.table(
                    rows,
                    [
                        ("commit_id", "commit"),
                        ("commit_kind", "kind"),
                        "action",
                        ("snapshot_id", "snapshot"),
                        "reason",
                    ],
                )
            )
    code = EXIT_OK if all(r.ok for r in reports) else EXIT_FAILURE
    return Output([r.to_dict() for r in reports], "\n".join(lines) or "(no tables)", code)


def _expire(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.expire import expire_snapshots

    report = expire_snapshots(
        ctx.catalog(),
        args.table,
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        time_retained_ms=None if args.older_than is None else int(parse_age(args.older_than) * 1000),
        max_deletes=args.max_deletes,
        dry_run=args.dry_run,
        progress=ctx.progress,
    )
    if report.expired:
        text = (
            f"{report.table}: {'would expire' if report.dry_run else 'expired'} snapshots "
            f"{report.expired[0]}..{report.expired[-1]} ({len(report.expired)}); earliest is now "
            f"{report.earliest_after}; {len(report.deleted_data_files)} data files and "
            f"{len(report.deleted_metadata_files)} metadata files "
            f"{'to delete' if report.dry_run else 'deleted'}"
        )
    else:
        text = f"{report.table}: {report.note or 'nothing to expire'}"
    return Output(report.to_dict(), text)


def _orphans(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.orphans import remove_orphan_files

    report = remove_orphan_files(
        ctx.catalog(),
        args.table,
        older_than_seconds=parse_age(args.older_than),
        dry_run=args.dry_run,
        progress=ctx.progress,
    )
    verb = "would delete" if report.dry_run else "deleted"
    count = len(report.orphans) if report.dry_run else len(report.deleted)
    lines = [
        f"{report.table}: scanned {report.scanned} files, {report.referenced} referenced, "
        f"{report.too_young} unreferenced but too young; {verb} {count} orphans ({report.orphan_bytes} bytes)"
    ]
    if report.orphans and report.dry_run:
        lines.append(
            render.table([render.jsonable(o) for o in report.orphans], ["path", "size", "age_seconds"])
        )
    code = EXIT_FAILURE if report.failed else EXIT_OK
    return Output(report.to_dict(), "\n".join(lines), code)


def _metrics(ctx: _Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops import metrics

    engine = ctx.catalog().engine
    if args.serve is None:
        families = metrics.collect(engine)
        return Output(families, metrics.render(families))
    server = metrics.MetricsServer(engine, args.serve, host=args.host)
    ctx.progress(f"serving metrics on http://{args.host}:{server.port}/metrics (Ctrl-C stops)")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return Output({"served": server.port}, "")


def _demo(ctx: _Context, args: argparse.Namespace) -> Output:
    try:
        from paimon_meta.cli.demo import run_demo
    except ImportError as e:
        raise PaimonMetaError(
            f"the demo is not available ({e}); install the spark extra: paimon-meta[spark]"
        ) from e
    code = run_demo(
        metastore_url=args.metastore or os.environ.get(ENV_URL) or None,
        warehouse=args.warehouse or os.environ.get(ENV_WAREHOUSE) or None,
        rows_per_writer=args.rows_per_writer,
        writers=args.writers,
        progress=print,
        options=ctx.options(),
    )
    return Output({"exit_code": code}, "", EXIT_OK if code == 0 else EXIT_FAILURE)


# ---- parser --------------------------------------------------------------------------------------------


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


def _add_globals(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--metastore",
        metavar="URL",
        default=default,
        help=f"metastore URL, or a commit service's http(s):// URL (default ${ENV_URL}, else embedded)",
    )
    parser.add_argument(
        "--warehouse", metavar="URI", default=default, help=f"warehouse root (default ${ENV_WAREHOUSE})"
    )
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=default,
        metavar="KEY=VALUE",
        help="catalog/storage option (repeatable)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=default,
        help=f"bearer token when --metastore is a commit service URL (default ${ENV_TOKEN})",
    )
    flag_default = False if default is None else default
    parser.add_argument("--json", action="store_true", default=flag_default, help="print results as JSON")
    parser.add_argument(
        "--debug", action="store_true", default=flag_default, help="debug logging and stack traces on errors"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``paimon-meta --help`` documents exit codes and environment)."""
    parser = argparse.ArgumentParser(
        prog="paimon-meta",
        description="Operate Apache Paimon tables committed through a Postgres metastore.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_globals(parser, None)
    # The global options are accepted after the command too (``paimon-meta locks list --json``).
    common = argparse.ArgumentParser(add_help=False)
    _add_globals(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str,
        handler: Callable[[_Context, argparse.Namespace], Output],
        help_text: str,
        *,
        remote: bool = False,
    ) -> Any:
        """A command; ``remote``: it also reads through a commit service (``--metastore http://``)."""
        p = sub.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=help_text,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(handler=handler, remote=remote)
        return p

    db = sub.add_parser("db", help="metastore schema (Alembic migrations)")
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    db_sub.add_parser(
        "upgrade", parents=[common], help="migrate the metastore to the latest revision"
    ).set_defaults(handler=_db_upgrade)
    db_sub.add_parser("current", parents=[common], help="show the metastore's revision").set_defaults(
        handler=_db_current
    )

    p = command("tables", _tables, "list registered tables (of one database, or all)", remote=True)
    p.add_argument("database", nargs="?", metavar="DB")

    p = command(
        "snapshots",
        _snapshots,
        "list a table's snapshots on storage and how the event log recorded them",
        remote=True,
    )
    p.add_argument("table", metavar="TABLE", help="db.table")

    p = command("read", _read, "print rows of a table", remote=True)
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--limit", type=_positive, default=20, help="at most N rows (default 20)")
    at = p.add_mutually_exclusive_group()
    at.add_argument("--snapshot", type=int, metavar="ID", help="read as of this snapshot")
    at.add_argument(
        "--tag", metavar="NAME", help="read the snapshot this tag keeps (also after that snapshot expired)"
    )
    p.add_argument("--columns", metavar="A,B", help="only these columns")

    p = command(
        "commits", _commits, "a table's commits from the event log (outcome, attempts, time)", remote=True
    )
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--limit", type=_positive, default=50, help="latest N commits (default 50)")

    p = command(
        "events",
        _events,
        "raw commit events (lock events with --locks, maintenance runs with --maintenance)",
        remote=True,
    )
    p.add_argument("--table", metavar="TABLE", help="only this db.table")
    p.add_argument("--commit", metavar="ID", help="only this commit id")
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--locks", action="store_true", help="lock events instead (of --table's lock)")
    kinds.add_argument(
        "--maintenance", action="store_true", help="expire / orphan-cleanup runs instead, one row a run"
    )
    p.add_argument("--limit", type=_positive, default=100, help="latest N events (default 100)")

    locks = sub.add_parser("locks", help="list or release metastore locks (ours and Java's)")
    locks_sub = locks.add_subparsers(dest="locks_command", metavar="ACTION", required=True)
    p = locks_sub.add_parser(
        "list", parents=[common], help="every lock row: owner, token, age, lease left, heartbeat, stale"
    )
    p.add_argument("--stale", action="store_true", help="only expired rows")
    p.set_defaults(handler=_locks_list)
    p = locks_sub.add_parser(
        "release",
        parents=[common],
        help="delete a lock row (refuses a live lock unless --force); recorded with operator and reason",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("key", metavar="KEY", help="lock id, e.g. jdbc.db.table")
    p.add_argument("--reason", required=True, help="why (stored in the lock event log)")
    p.add_argument("--force", action="store_true", help="release even a live, heartbeating lock")
    p.set_defaults(handler=_locks_release)

    p = command("recover", _recover, "resolve commits that were prepared but never finished")
    p.add_argument("table", nargs="?", metavar="TABLE", help="db.table (default: every table)")
    p.add_argument(
        "--older-than",
        metavar="DURATION",
        help="grace period since a commit's last event (default: max(2 x lease, acquire timeout + lease))",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="show what would be done; take no lock, write nothing"
    )

    p = command("expire-snapshots", _expire, "expire old snapshots and delete the files only they used")
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument(
        "--retain-min", type=_positive, help="snapshot.num-retained.min (table option, default 10)"
    )
    p.add_argument("--retain-max", type=_positive, help="snapshot.num-retained.max (default unbounded)")
    p.add_argument("--older-than", metavar="DURATION", help="snapshot.time-retained (default 1h)")
    p.add_argument("--max-deletes", type=_positive, help="snapshot.expire.limit (default 50)")
    p.add_argument("--dry-run", action="store_true", help="decide under the lock, delete nothing")

    p = command("remove-orphan-files", _orphans, "delete unreferenced files older than a threshold")
    p.add_argument("table", metavar="TABLE", help="db.table")
    p.add_argument("--older-than", metavar="DURATION", default="1d", help="minimum file age (default 1d)")
    p.add_argument("--dry-run", action="store_true", help="list the orphans, delete nothing")

    p = command("metrics", _metrics, "commit and lock metrics from the event log, Prometheus text format")
    p.add_argument("--serve", type=_port, metavar="PORT", help="serve GET /metrics instead of printing once")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")

    from paimon_meta.cli import serve as cli_service

    cli_service.add_commands(sub, command, common)

    p = command("demo", _demo, "the end-to-end Spark demo (needs the spark extra)")
    p.add_argument("--rows-per-writer", type=_positive, default=1_000_000)
    p.add_argument("--writers", type=_positive, default=4)
    return parser


# ---- entry point ---------------------------------------------------------------------------------------


def _exit_code(error: BaseException) -> int:
    if isinstance(error, TableNotFoundError | DatabaseNotFoundError | NotFoundError | errors.NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(
        error,
        CommitConflictError
        | RefusedError
        | LockTimeoutError
        | errors.AlreadyExistsError
        | errors.AccessDeniedError,
    ):
        return EXIT_REFUSED
    if isinstance(error, ValidationError):
        return EXIT_USAGE
    return EXIT_FAILURE


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    if not isinstance(error, PaimonMetaError):
        text = f"{type(error).__name__}: {text}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``paimon-meta`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2)
        return int(e.code or 0) if isinstance(e.code, int) else EXIT_USAGE
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    ctx = _Context(args)
    try:
        if not getattr(args, "remote", False):
            ctx.require_database()
        out: Output = args.handler(ctx, args)
    except KeyboardInterrupt:
        print("paimon-meta: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        code = _exit_code(e)
        if args.debug:
            traceback.print_exc()
        print(f"paimon-meta: error: {_one_line(e)}", file=sys.stderr)
        if args.json:
            fields = getattr(e, "fields", {})
            print(
                render.to_json(
                    {"error": _one_line(e), "type": type(e).__name__, "exit_code": code, "fields": fields}
                )
            )
        return code
    finally:
        ctx.close()
    if args.json:
        print(render.to_json(out.data))
    elif out.text:
        print(out.text)
    return out.code


if __name__ == "__main__":
    sys.exit(main())
