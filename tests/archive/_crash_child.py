"""An archiver process that dies inside its archive commit: ``python tests/archive/_crash_child.py URL
CATALOG BOUNDARY`` with ``PAIMON_META_TEST_CRASH_AT`` set by the parent (e.g. ``after_snapshot``: the
archive's snapshot is on storage, Postgres knows nothing of it, the lock row is left behind)."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta

from paimon_meta.archive.archiver import Archiver
from paimon_meta.catalog.metastore import connect_catalog
from tests.archive.helpers import FAST_LOCK
from tests.archive.window_store import WindowStore


def main() -> int:
    url, name, boundary_text = sys.argv[1:4]
    boundary = datetime.fromisoformat(boundary_text)
    catalog = connect_catalog(url, None, FAST_LOCK, migrate=False, catalog=name)
    store = WindowStore(catalog.engine, [boundary])
    Archiver(catalog.engine, store, operator="child", clock=lambda: boundary + timedelta(days=2)).run()
    return 0  # only if the crash point never fired


if __name__ == "__main__":
    sys.exit(main())
