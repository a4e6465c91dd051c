"""How the keyset reads of the event logs are planned (issue 39 item 5).

A keyset page (newest first below a position, or in feed order after one) is one range of an index
whose trailing columns are the keyset, read in index order and stopped by the page's LIMIT: its cost is
the page's, whatever the log's length. Postgres picks that plan when it expects more matching rows than
the LIMIT. When it expects fewer (a table or lane key bound from an array, estimated at the average
table's; a table with no statistics yet), it may instead gather every matching row with a bitmap scan
and sort them: cheap for the quiet table it imagined, a read and a sort of all of a hot table's history
for the one it meets. :data:`ORDERED_READS`, run first in the read's transaction, rules that plan out, so
the plan is the index range for every table (tests/db/test_flat_plans.py checks the plans).

The commit log is partitioned by time (migration 0024): a partition of a few pages (a week's first
hours, the oldest week's last ones) is cheaper to read whole than through an index, and Postgres plans
a sequential scan of it, reading every row of it for a page of a few; :data:`ORDERED_READS` rules that
out too (``enable_seqscan = off`` only makes the plan costly: a relation no index serves is still read).
"""

from __future__ import annotations

from sqlalchemy import text

#: ``SET LOCAL`` (this transaction only, ``set_config(..., true)``): no bitmap and no sequential scans,
#: so a keyset read is its index range, in every partition.
ORDERED_READS = text(
    "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)"
)
