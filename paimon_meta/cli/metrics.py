"""``paimon-meta metrics``: commit and lock metrics from the event log, printed once or served."""

from __future__ import annotations

import argparse
import contextlib

from paimon_meta.cli.args import METRICS_TABLE_SERIES, Commands, non_negative_int, port
from paimon_meta.cli.context import Context, Output


def register(commands: Commands) -> None:
    p = commands.add(
        "metrics", _metrics, "commit and lock metrics from the event log, Prometheus text format"
    )
    p.add_argument("--serve", type=port, metavar="PORT", help="serve GET /metrics instead of printing once")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument(
        "--table-series",
        type=non_negative_int,
        default=METRICS_TABLE_SERIES,
        metavar="N",
        help="tables (and locks) with series of their own, the first met; the others are counted in "
        f"their catalog's (other) series (default {METRICS_TABLE_SERIES}; the rollup keeps the tables "
        "that have them)",
    )


def _metrics(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops import metrics

    engine = ctx.catalog().engine
    if args.serve is None:
        families = metrics.collect(engine, table_series=args.table_series)
        return Output(families, metrics.render(families))
    server = metrics.MetricsServer(engine, args.serve, host=args.host, table_series=args.table_series)
    ctx.progress(f"serving metrics on http://{args.host}:{server.port}/metrics (Ctrl-C stops)")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return Output({"served": server.port}, "")
