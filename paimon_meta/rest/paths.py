"""Every URL path of the service, written once: the REST catalog protocol's (apache/paimon
``rest-catalog-open-api.yaml``; pypaimon's ``api/resource_paths.py``), our extensions (the control plane,
the audit trail) and the operations endpoints. The service's routes are these templates; the client
expands the same templates with :func:`expand`. Query parameter names are here too.

A template's ``{name}`` is one path segment: ``{prefix}`` the catalog's name as ``GET /v1/config``
answers it (``defaults.prefix``), ``{database}``, ``{table}``, ``{tag}`` names.
"""

from __future__ import annotations

from urllib.parse import quote

#: The protocol's version root: every body under it is JSON whatever its Content-Type.
V1 = "/v1"
CONFIG = f"{V1}/config"
CATALOG = f"{V1}/{{prefix}}"

DATABASES = f"{CATALOG}/databases"
DATABASE = f"{DATABASES}/{{database}}"
TABLES = f"{DATABASE}/tables"
TABLE = f"{TABLES}/{{table}}"
RENAME_TABLE = f"{CATALOG}/tables/rename"

# ---- one table -----------------------------------------------------------------------------------------
SNAPSHOT = f"{TABLE}/snapshot"
COMMIT = f"{TABLE}/commit"
ROLLBACK = f"{TABLE}/rollback"
PARTITIONS = f"{TABLE}/partitions"
TAGS = f"{TABLE}/tags"
TAG = f"{TAGS}/{{tag}}"

# ---- the control plane (our extension) -----------------------------------------------------------------
COMMIT_MESSAGES = f"{TABLE}/commit-messages"
FILTER_COMMITTED = f"{TABLE}/filter-committed"
COMMITS = f"{TABLE}/commits"

# ---- the audit trail (our extension) -------------------------------------------------------------------
REGISTRY = f"{TABLE}/registry"
EVENTS = f"{TABLE}/events"
LOCK_EVENTS = f"{TABLE}/lock-events"
MAINTENANCE_RUNS = f"{TABLE}/maintenance-runs"
SNAPSHOT_RECORDINGS = f"{TABLE}/snapshot-recordings"

# ---- operations (not the protocol's) -------------------------------------------------------------------
HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"
OPENAPI = "/openapi.json"
DOCS = "/docs"
REDOC = "/redoc"

# ---- query parameters ----------------------------------------------------------------------------------
#: ``GET /v1/config``: the catalog the client asks for (pypaimon 2.1.0 URL-encodes it twice).
WAREHOUSE = "warehouse"
#: Listings: the page size and the token of the next page (``nextPageToken`` of the previous answer).
MAX_RESULTS = "maxResults"
PAGE_TOKEN = "pageToken"
#: Name patterns (SQL LIKE) of the listings that take one; a tag name prefix.
DATABASE_NAME_PATTERN = "databaseNamePattern"
TABLE_NAME_PATTERN = "tableNamePattern"
PARTITION_NAME_PATTERN = "partitionNamePattern"
TAG_NAME_PREFIX = "tagNamePrefix"
#: ``EVENTS``: the events of one commit.
COMMIT_ID = "commitId"


def expand(template: str, **segments: str) -> str:
    """``template`` with each ``{name}`` replaced by ``segments[name]`` percent-encoded as one path
    segment (``/`` included, so a name cannot reach another route)."""
    return template.format_map({name: quote(value, safe="") for name, value in segments.items()})
