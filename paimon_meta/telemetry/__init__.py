"""What operators see of the event log as numbers: the commit, lock and maintenance logs folded into
counters and histograms as they grow (:mod:`paimon_meta.telemetry.rollup`), so a ``/metrics`` scrape
reads a bounded rollup instead of aggregating the whole log (issue 39).

Below the entry points and the operations package: it reads the logs and writes its own tables, never
HTTP, the service or the CLI (import-linter contract).
"""
