"""paimon_meta: Apache Paimon's commit path over a Postgres metastore lock, with an event log.

``paimon_meta.connect(...)`` returns a metastore-backed catalog; ``paimon_meta.open_table(path)`` opens one
table with storage-guarded commits; ``paimon_meta.connect_service(url, token=...)`` returns the commit
service's catalog (both catalogs satisfy ``paimon_meta.catalog.base.Catalog``). All three are imported on
first use, so ``import paimon_meta`` stays cheap for processes (Spark executors) that only write data files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["connect", "connect_service", "open_table"]

if TYPE_CHECKING:
    from paimon_meta.catalog.metastore import connect
    from paimon_meta.catalog.rest import connect_service
    from paimon_meta.catalog.storage import open_table


def __getattr__(name: str) -> Any:
    if name == "connect":
        from paimon_meta.catalog.metastore import connect

        return connect
    if name == "connect_service":
        from paimon_meta.catalog.rest import connect_service

        return connect_service
    if name == "open_table":
        from paimon_meta.catalog.storage import open_table

        return open_table
    raise AttributeError(f"module 'paimon_meta' has no attribute {name!r}")
