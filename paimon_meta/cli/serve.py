"""``paimon-meta serve``: the commit service (Paimon's REST catalog protocol over the metastore).

The only place the CLI imports ``paimon_meta.service``, and only when the command runs (the service's
dependencies are the ``service`` extra); the service never imports the CLI.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from paimon_meta.cli import logs
from paimon_meta.cli.args import METRICS_TABLE_SERIES, Commands, non_negative_int
from paimon_meta.cli.context import ENV_URL, Context, Output

if TYPE_CHECKING:
    from paimon_meta.service.oidc import OidcSettings
    from paimon_meta.service.outbox import NatsOutboxSettings


def register(commands: Commands) -> None:
    p = commands.add(
        "serve", _serve, "serve Paimon's REST catalog protocol over the metastore (the commit service)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8181, help="port (default 8181)")
    p.add_argument(
        "--catalog-name",
        default="paimon",
        help="the default catalog: the REST prefix clients use as 'warehouse' for --warehouse (the "
        "metastore's other catalogs are served under their own names)",
    )
    p.add_argument(
        "--catalog-sweep-seconds",
        type=float,
        default=30.0,
        help="every catalog of the metastore is served (its maintenance, recovery and NATS outbox "
        "started) within this long of its creation, requested or not (default 30; 0: only catalogs "
        "requested here)",
    )
    p.add_argument(
        "--catalog-refresh-seconds",
        type=float,
        default=2.0,
        help="a catalog other than the default is re-read from the metastore this often: a catalog "
        "dropped or altered is noticed within it (default 2)",
    )
    p.add_argument("--workers", type=int, default=32, help="threads for blocking work (default 32)")
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=30.0,
        help="on SIGTERM: not ready at once, new requests 503, in-flight ones may finish for this long, "
        "then 503 for what is left and exit 0 (default 30)",
    )
    p.add_argument(
        "--migrate",
        action="store_true",
        help="migrate the metastore to this release's schema at start-up (default: only check it is "
        "within the compatibility window; migrations are `paimon-meta db upgrade`'s, e.g. a Job)",
    )
    p.add_argument(
        "--recovery-interval-seconds",
        type=float,
        default=60.0,
        help="settle commits left pending (a replica stopped mid-commit) this often, one replica at a "
        "time (0: never; `paimon-meta recover` does it; default 60)",
    )
    p.add_argument(
        "--event-partition-days",
        type=float,
        default=7.0,
        help="the commit log is partitioned by time: partitions of this many days are made ahead (now "
        "and the next two periods), at start and every 10 minutes; a change applies to partitions made "
        "after it (default 7; 0: this replica makes none, `paimon-meta events make-partitions` does)",
    )
    p.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024, help="request body limit")
    p.add_argument(
        "--group-max-commits",
        type=int,
        default=64,
        help="commit-messages requests of one table committed under one lock hold, at most (1: no grouping)",
    )
    p.add_argument(
        "--group-max-hold-ms",
        type=float,
        default=500.0,
        help="longest a group holds a table's lock before letting others in (default 500)",
    )
    p.add_argument(
        "--group-max-batch",
        type=int,
        default=16,
        help="queued commits of one table made durable together, at most (1: one at a time; default 16)",
    )
    # Against slow, oversized and guessing clients (README, "Hardening").
    p.add_argument(
        "--body-timeout-seconds", type=float, default=30.0, help="a body must arrive in this (408)"
    )
    p.add_argument(
        "--header-timeout-seconds", type=float, default=10.0, help="request headers must arrive in this"
    )
    p.add_argument("--max-header-bytes", type=int, default=64 * 1024, help="request headers limit (400)")
    p.add_argument("--keep-alive-seconds", type=float, default=5.0, help="idle connections closed after")
    p.add_argument("--max-connections", type=int, default=1024, help="connections or requests (then 503)")
    p.add_argument(
        "--auth-failure-burst",
        type=int,
        default=20,
        help="refused tokens per client address before 429 (0: no throttle; default 20)",
    )
    p.add_argument(
        "--auth-failure-refill-seconds",
        type=float,
        default=3.0,
        help="one more refused token allowed per address every this many seconds (default 3)",
    )
    # Admission control (README, "Failure modes"): beyond these, 503 + Retry-After at once.
    p.add_argument(
        "--max-in-flight", type=int, default=256, help="authenticated requests handled at once (default 256)"
    )
    p.add_argument(
        "--max-feed-streams",
        type=int,
        default=512,
        help="live change-feed streams open at once on this replica (default 512; no in-flight slot each)",
    )
    p.add_argument(
        "--max-feed-streams-per-principal",
        type=int,
        default=None,
        help="live streams one principal may hold on this replica, then 429 (default: a sixteenth of "
        "--max-feed-streams, at least 1)",
    )
    p.add_argument(
        "--feed-recheck-seconds",
        type=float,
        default=5.0,
        help="an open stream re-checks its principal (token revoked, grants, expiry) at least this often "
        "(default 5)",
    )
    # Bounds on every request (README, "Hardening"): no request holds a worker past its deadline.
    p.add_argument(
        "--statement-timeout",
        action="append",
        metavar="CLASS=SECONDS",
        help="deadline of a route class's requests (their queries' statement timeout; reads are also "
        "cancelled at it and when their client leaves), 503 + Retry-After past it; classes feed "
        "(change-feed pages, default 10), read (other GETs, console pages, default 30), write (default "
        "120); 0: none. Repeat for each class",
    )
    p.add_argument(
        "--feed-scan-rows",
        type=int,
        default=10_000,  # service.state.DEFAULT_FEED_SCAN_ROWS
        help="events of the log one change-feed request reads at most; past it the page ends where "
        "the read got and its token continues from there (default 10000)",
    )
    # Behind a proxy (README, "Behind a proxy"): whose X-Forwarded-For / -Proto to believe.
    p.add_argument(
        "--forwarded-allow-ips",
        default="",
        metavar="IPS",
        help="comma-separated addresses or networks of proxies whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed (default: none, not even loopback)",
    )
    # The change feed to NATS JetStream (README, "The change feed"): off without --events-nats.
    p.add_argument(
        "--events-nats",
        metavar="URL",
        help="publish the change feed to NATS JetStream at URL (nats://host:4222); off when absent",
    )
    p.add_argument(
        "--events-nats-subject",
        metavar="SUBJECT",
        help="the default catalog's subject (default paimon.<catalog name>.events; the other catalogs' "
        "are paimon.<catalog name>.events), or with {catalog} every catalog's (e.g. lake.{catalog}.events)",
    )
    p.add_argument(
        "--events-nats-stream",
        metavar="NAME",
        help="the JetStream stream of every catalog's subject, created if missing (default one per "
        "catalog, PAIMON_<CATALOG NAME>_EVENTS)",
    )
    p.add_argument(
        "--feed-send-timeout",
        type=float,
        default=30.0,
        help="seconds a live change-feed stream may wait for its client to take one write before it is "
        "ended (the client resumes with its last event id; default 30)",
    )
    p.add_argument(
        "--max-table-commits",
        type=int,
        default=256,
        help="commits of one table queued or running on this replica (default 256)",
    )
    p.add_argument(
        "--max-commits",
        type=int,
        default=1024,
        help="commits queued or running on this replica (default 1024)",
    )
    p.add_argument(
        "--metrics-cache-seconds",
        type=float,
        default=5.0,
        help="reuse the event log's part of /metrics for this long (0: query on every scrape)",
    )
    p.add_argument(
        "--no-event-log-metrics",
        action="store_true",
        help="leave the event log's families out of /metrics, and fold no rollup in the background",
    )
    p.add_argument(
        "--metrics-table-series",
        type=non_negative_int,
        default=METRICS_TABLE_SERIES,
        metavar="N",
        help=f"tables (and locks) with series of their own in the event log's metrics, the first met; "
        f"the others are counted in their catalog's (other) series (default {METRICS_TABLE_SERIES})",
    )
    p.add_argument(
        "--metrics-fold-seconds",
        type=float,
        default=2.0,
        help="fold the event log's new events into the metrics rollup this often in the background "
        "(0: only when /metrics is scraped; default 2)",
    )
    # Vended credentials (README, "Vended credentials"): STS AssumeRole scoped to each table.
    p.add_argument(
        "--sts-role-arn",
        help="vend table-scoped S3 credentials by assuming this role (off when absent)",
    )
    p.add_argument(
        "--sts-duration",
        default="6 h",
        help="lifetime of vended credentials, a Paimon duration (default 6 h; 15 min..12 h, within the "
        "role's maximum session duration)",
    )
    p.add_argument("--sts-external-id", help="ExternalId the role's trust policy requires, if any")
    p.add_argument(
        "--sts-endpoint", help="STS endpoint URL (default: the -o s3.endpoint, where MinIO serves STS)"
    )
    p.add_argument("--sts-region", help="STS signing region (default: the -o s3.region)")
    p.add_argument(
        "--sts-pyarrow-create-dir",
        action="store_true",
        help="write credentials also allow what pyarrow's create_dir sends (bucket-wide ListBucket, "
        "ancestor directory markers): needed by pypaimon 2.1.0 writers on AWS/MinIO (docs/CREDENTIALS.md)",
    )
    p.add_argument(
        "--trusted-engines",
        metavar="NAMES",
        default=None,
        help="principals (comma-separated names, as `paimon-meta principals` shows them) that apply row "
        "filters and column masks themselves: they get data tokens for tables their policies restrict; "
        "every other restricted principal is refused one (docs/CREDENTIALS.md; default "
        "$PAIMON_META_TRUSTED_ENGINES, else none)",
    )
    # Bearer JWTs of an OpenID Connect issuer (README, "Signing in with OIDC"), beside static tokens.
    p.add_argument(
        "--oidc-issuer",
        metavar="URL",
        help="accept bearer JWTs of this issuer (its exact 'iss'); off when absent",
    )
    p.add_argument("--oidc-audience", metavar="A", help="the 'aud' a JWT must carry (with --oidc-issuer)")
    p.add_argument(
        "--oidc-jwks-url",
        metavar="URL",
        help="the issuer's signing keys (default: jwks_uri of {issuer}/.well-known/openid-configuration)",
    )
    p.add_argument(
        "--oidc-principal-claim",
        default="sub",
        metavar="CLAIM",
        help="the claim naming the principal, user:<value> (default sub)",
    )
    p.add_argument(
        "--oidc-groups-claim",
        metavar="CLAIM",
        help="a claim listing groups: the grants of principal group:<value> apply (default: none)",
    )
    p.add_argument(
        "--oidc-algorithms",
        default="RS256,ES256",
        metavar="ALGS",
        help="signature algorithms accepted, comma-separated public-key ones (default RS256,ES256)",
    )
    # TLS (README, "TLS"): both or neither.
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate chain (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    # Maintenance from the commit log (README, "Maintenance"): compaction, expiration, partition TTL,
    # tags, orphan cleanup and recycle-bin purges, by Paimon's table options.
    p.add_argument(
        "--maintenance-workers",
        type=int,
        default=2,
        help="maintenance jobs run at once on this replica (default 2; 0: none here)",
    )
    p.add_argument(
        "--maintenance-spark-master",
        metavar="MASTER",
        help="run the compaction of a table of paimon-meta.maintenance.compaction.spark-min-bytes or more "
        "(default 1 gb) as the Spark compaction job on this master (spark://host:7077, yarn, local[4]); "
        "default: every compaction in the workers' threads",
    )
    # The commit log's archive (docs/OPERATIONS.md, "The commit log's archive").
    p.add_argument(
        "--archive-interval-seconds",
        type=float,
        default=3600.0,
        metavar="S",
        help="archive the commit log's partitions past each catalog's paimon-meta.events.retention into its "
        "system.commit_log, then drop them, every S seconds, one replica at a time (default 3600; 0: off, "
        "`paimon-meta events archive` does it)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the service's and uvicorn's log level (default info)",
    )


def announce_start(metastore_url: str | None, warehouse: str | None, catalog_name: str) -> None:
    """Say where the service keeps things before it starts: the catalog, its warehouse and the metastore
    (password hidden). A warehouse nobody chose (no ``--warehouse`` nor ``$PAIMON_META_WAREHOUSE``: the
    default under ``$PAIMON_META_HOME``) is a warning when the metastore is a real server's, where tables
    would otherwise land in the home directory of whoever started the replica without anyone noticing."""
    from sqlalchemy import make_url

    from paimon_meta.db.embedded import default_home

    log = logging.getLogger("paimon_meta.service")
    where = warehouse or str(Path(default_home()) / "warehouse")
    shown = "the embedded Postgres" if metastore_url is None else make_url(metastore_url).render_as_string()
    log.info("catalog %r: warehouse %s, metastore %s", catalog_name, where, shown)
    if warehouse is None and metastore_url is not None:
        log.warning(
            "no --warehouse (nor $PAIMON_META_WAREHOUSE): tables go under the default %s on this machine; "
            "give every replica the same --warehouse (a shared path or s3://...)",
            where,
        )


def _serve(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.catalog.metastore import ENV_WAREHOUSE
    from paimon_meta.errors import ValidationError
    from paimon_meta.io.sts import StsSettings, vendable
    from paimon_meta.maintenance.spark import SparkCompaction
    from paimon_meta.model.options import parse_duration_ms
    from paimon_meta.service.server import serve
    from paimon_meta.service.state import ServiceSettings, statement_timeouts_of

    if ctx.catalog_name() is not None:
        # The service serves every catalog of the metastore; a --catalog would go unused.
        raise ValidationError(
            f"serve serves every catalog of the metastore, --catalog {ctx.catalog_name()!r} names none to "
            "open: drop it (--catalog-name names the default catalog, the one --warehouse is the root of)",
            option="--catalog",
        )
    if args.feed_scan_rows < 1:
        raise ValidationError("--feed-scan-rows must be at least 1", field="--feed-scan-rows")

    logs.configure_service(args.log_format, args.log_level)
    sts = (
        StsSettings(
            role_arn=args.sts_role_arn,
            duration_seconds=parse_duration_ms(args.sts_duration, key="--sts-duration") // 1000,
            external_id=args.sts_external_id,
            endpoint=args.sts_endpoint,
            region=args.sts_region,
            pyarrow_create_dir=args.sts_pyarrow_create_dir,
        )
        if args.sts_role_arn
        else None
    )
    warehouse = args.warehouse or os.environ.get(ENV_WAREHOUSE)
    announce_start(args.metastore or os.environ.get(ENV_URL), warehouse, args.catalog_name)
    if sts is not None and not vendable(warehouse or ""):
        raise ValidationError(
            f"--sts-role-arn vends S3 credentials, but the warehouse {warehouse!r} is not on S3: drop the "
            "flag (clients of a local warehouse need no credentials)",
            option="sts-role-arn",
        )
    settings = ServiceSettings(
        metastore_url=ctx.metastore_url(),
        warehouse=warehouse,
        options=ctx.options(),
        catalog_name=args.catalog_name,
        catalog_refresh_seconds=args.catalog_refresh_seconds,
        catalog_sweep_seconds=args.catalog_sweep_seconds,
        worker_threads=args.workers,
        drain_seconds=args.drain_seconds,
        recovery_interval_seconds=args.recovery_interval_seconds,
        archive_interval_seconds=args.archive_interval_seconds,
        event_partition_days=args.event_partition_days,
        migrate=args.migrate,
        max_body_bytes=args.max_body_bytes,
        group_max_commits=args.group_max_commits,
        group_max_hold_seconds=args.group_max_hold_ms / 1000,
        group_max_batch=args.group_max_batch,
        body_timeout_seconds=args.body_timeout_seconds,
        header_timeout_seconds=args.header_timeout_seconds,
        max_header_bytes=args.max_header_bytes,
        keep_alive_seconds=args.keep_alive_seconds,
        max_connections=args.max_connections,
        auth_failure_burst=args.auth_failure_burst,
        auth_failure_refill_seconds=args.auth_failure_refill_seconds,
        metrics_cache_seconds=args.metrics_cache_seconds,
        event_log_metrics=not args.no_event_log_metrics,
        metrics_table_series=args.metrics_table_series,
        metrics_fold_seconds=args.metrics_fold_seconds,
        gc_freeze_at_start=True,
        max_in_flight=args.max_in_flight,
        max_feed_streams=args.max_feed_streams,
        max_feed_streams_per_principal=args.max_feed_streams_per_principal,
        feed_recheck_seconds=args.feed_recheck_seconds,
        forwarded_allow_ips=_forwarded_allow_ips(args.forwarded_allow_ips),
        feed_send_timeout_seconds=args.feed_send_timeout,
        feed_scan_rows=args.feed_scan_rows,
        statement_timeouts=statement_timeouts_of(args.statement_timeout),
        max_table_commits=args.max_table_commits,
        max_commits=args.max_commits,
        sts=sts,
        trusted_engines=_trusted_engines(args),
        oidc=_oidc(args),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        events_nats=_events_nats(args),
        maintenance_workers=args.maintenance_workers,
        maintenance_spark=(
            SparkCompaction(args.maintenance_spark_master) if args.maintenance_spark_master else None
        ),
    )
    if not args.migrate:
        # Before uvicorn starts: an empty or older metastore is one line naming what to run, not a
        # failed start-up's traceback. (Migrating is `paimon-meta db upgrade`'s, or --migrate's.)
        from paimon_meta.db.migrate import check_compatible

        check_compatible(settings.metastore_url or ctx.metastore_url())
    # uvicorn's loggers go through ours (configured above): it installs no handlers of its own.
    serve(settings, host=args.host, port=args.port, log_level=args.log_level, log_config=None)
    return Output({"stopped": True}, "")


def _forwarded_allow_ips(raw: str) -> tuple[str, ...]:
    """The proxies ``--forwarded-allow-ips`` names: addresses or networks (``10.0.0.0/8``), or ``*``
    (any client: only where nothing but the proxy can reach the port)."""
    import ipaddress

    from paimon_meta.errors import ValidationError

    out = tuple(part.strip() for part in raw.split(",") if part.strip())
    for part in out:
        if part == "*":
            continue
        try:
            ipaddress.ip_network(part, strict=False)
        except ValueError:
            raise ValidationError(
                f"--forwarded-allow-ips: {part!r} is not an address or a network",
                option="--forwarded-allow-ips",
            ) from None
    return out


def _events_nats(args: argparse.Namespace) -> NatsOutboxSettings | None:
    """The outbox's settings the ``--events-nats*`` flags ask for (None without ``--events-nats``)."""
    from paimon_meta.errors import ValidationError
    from paimon_meta.service.outbox import NatsOutboxSettings

    if args.events_nats is None:
        for flag in ("events_nats_subject", "events_nats_stream"):
            if getattr(args, flag) is not None:
                option = "--" + flag.replace("_", "-")
                raise ValidationError(f"{option} needs --events-nats", option=option)
        return None
    return NatsOutboxSettings.of_flags(
        args.events_nats, args.catalog_name, args.events_nats_subject, args.events_nats_stream
    )


#: ``--trusted-engines``' default (principal names, comma-separated).
TRUSTED_ENGINES_ENV = "PAIMON_META_TRUSTED_ENGINES"


def _trusted_engines(args: argparse.Namespace) -> frozenset[str]:
    """``--trusted-engines``, else ``$PAIMON_META_TRUSTED_ENGINES``: the principal names (blanks
    ignored)."""
    value = args.trusted_engines if args.trusted_engines is not None else os.environ.get(TRUSTED_ENGINES_ENV)
    return frozenset(n.strip() for n in (value or "").split(",") if n.strip())


def _oidc(args: argparse.Namespace) -> OidcSettings | None:
    """The OIDC settings the ``--oidc-*`` flags ask for (None without ``--oidc-issuer``); a typed error
    naming the flag for an incomplete or invalid set."""
    from paimon_meta.errors import ValidationError
    from paimon_meta.service.oidc import OidcSettings

    if args.oidc_issuer is None:
        for flag in ("oidc_audience", "oidc_jwks_url", "oidc_groups_claim"):
            if getattr(args, flag) is not None:
                option = "--" + flag.replace("_", "-")
                raise ValidationError(f"{option} needs --oidc-issuer", option=option)
        return None
    if not args.oidc_audience:
        raise ValidationError("--oidc-issuer needs --oidc-audience", option="--oidc-audience")
    return OidcSettings(
        issuer=args.oidc_issuer,
        audience=args.oidc_audience,
        jwks_url=args.oidc_jwks_url,
        principal_claim=args.oidc_principal_claim,
        groups_claim=args.oidc_groups_claim,
        algorithms=tuple(a.strip() for a in args.oidc_algorithms.split(",") if a.strip()),
    )
