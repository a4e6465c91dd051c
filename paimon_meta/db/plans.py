"""How the keyset reads of the event logs are planned (issue 39 item 5).

A keyset page (newest first below a position, or in feed order after one) is one range of an index
whose trailing columns are the keyset, read in index order and stopped by the page's LIMIT: its cost is
the page's, whatever the log's length. Postgres picks that plan when it expects more matching rows than
the LIMIT. When it expects fewer (a table or lane key bound from an array, estimated at the average
table's; a table with no statistics yet), it may instead gather every matching row with a bitmap scan
and sort them: cheap for the quiet table it imagined, a read and a sort of all of a hot table's history
for the one it meets. :data:`ORDERED_READS`, run first in the read's transaction, rules that plan out, so
the plan is the index range for every table (tests/db/test_flat_plans.py checks the plans).
"""

from __future__ import annotations

from sqlalchemy import text

#: ``SET LOCAL`` (this transaction only): no bitmap scans, so a keyset read is its index range.
ORDERED_READS = text("SET LOCAL enable_bitmapscan = off")
