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
#: Every table of the catalog (``ListTablesGlobally``), a table by its ``id`` (``getTableById``).
TABLES_GLOBALLY = f"{CATALOG}/tables"
TABLE_BY_ID = f"{CATALOG}/tables/id/{{tableId}}"
#: A database's tables with their details (``listTableDetails``); adopting an existing table.
TABLE_DETAILS = f"{DATABASE}/table-details"
REGISTER_TABLE = f"{DATABASE}/register"

# ---- one table -----------------------------------------------------------------------------------------
SNAPSHOT = f"{TABLE}/snapshot"
COMMIT = f"{TABLE}/commit"
ROLLBACK = f"{TABLE}/rollback"
ROLLBACK_SCHEMA = f"{TABLE}/rollback-schema"
PARTITIONS = f"{TABLE}/partitions"
TAGS = f"{TABLE}/tags"
TAG = f"{TAGS}/{{tag}}"
#: Snapshots by version (an id, a tag name, ``LATEST`` or ``EARLIEST``) and the paged list.
SNAPSHOTS = f"{TABLE}/snapshots"
SNAPSHOT_VERSION = f"{SNAPSHOTS}/{{version}}"
#: The table's schemas (``listSchemas``, paged) and one by version (``getSchema``: an id, ``LATEST`` or
#: ``EARLIEST``).
SCHEMAS = f"{TABLE}/schemas"
SCHEMA_VERSION = f"{SCHEMAS}/{{version}}"
#: ``CREATE OR REPLACE TABLE`` (``replaceTable``: a new schema for an existing table).
REPLACE_TABLE = f"{TABLE}/replace"
#: The partition lifecycle (``PARTITIONS``: list with GET, create with POST).
DROP_PARTITIONS = f"{PARTITIONS}/drop"
MARK_DONE_PARTITIONS = f"{PARTITIONS}/mark"
PARTITIONS_BY_NAMES = f"{PARTITIONS}/list-by-names"
PARTITIONS_BY_FILTER = f"{PARTITIONS}/list-by-filter"
#: Streaming readers' progress (``consumer/consumer-<id>``).
CONSUMERS = f"{TABLE}/consumers"
RESET_CONSUMER = f"{CONSUMERS}/reset"
#: A table's branches (``branch/branch-<name>``): list with GET, create with POST; one branch.
BRANCHES = f"{TABLE}/branches"
BRANCH = f"{BRANCHES}/{{branch}}"
RENAME_BRANCH = f"{BRANCH}/rename"
FORWARD_BRANCH = f"{BRANCH}/forward"

# ---- views and functions -------------------------------------------------------------------------------
#: A database's views (list with GET, create with POST), with their details, one view; every view of the
#: catalog; renaming one (across databases too).
VIEWS = f"{DATABASE}/views"
VIEW_DETAILS = f"{DATABASE}/view-details"
VIEW = f"{VIEWS}/{{view}}"
VIEWS_GLOBALLY = f"{CATALOG}/views"
RENAME_VIEW = f"{CATALOG}/views/rename"
#: A database's functions (list with GET, create with POST), with their details, one function; every
#: function of the catalog.
FUNCTIONS = f"{DATABASE}/functions"
FUNCTION_DETAILS = f"{DATABASE}/function-details"
FUNCTION = f"{FUNCTIONS}/{{function}}"
FUNCTIONS_GLOBALLY = f"{CATALOG}/functions"
#: A database's semantic views (list with GET), one semantic view (upsert with POST, get, delete): an
#: opaque model document ``{format, content}`` kept by the catalog.
SEMANTIC_VIEWS = f"{DATABASE}/semantic-views"
SEMANTIC_VIEW = f"{SEMANTIC_VIEWS}/{{semantic_view}}"

# ---- the control plane (our extension) -----------------------------------------------------------------
COMMIT_MESSAGES = f"{TABLE}/commit-messages"
FILTER_COMMITTED = f"{TABLE}/filter-committed"
COMMITS = f"{TABLE}/commits"
#: Restore a dropped table from the recycle bin (``POST``, optional ``dropId``), with its grants.
UNDROP_TABLE = f"{TABLE}/undrop"
#: The recycle bin of a database (``GET``): its dropped tables, with the drop ids an undrop takes.
DROPPED_TABLES = f"{DATABASE}/dropped-tables"
#: Restore a dropped database from the recycle bin (``POST``, optional ``dropId``): its grants, views,
#: functions and the tables dropped with it.
UNDROP_DATABASE = f"{DATABASE}/undrop"
#: The recycle bin's databases (``GET``), with the drop ids an undrop takes.
DROPPED_DATABASES = f"{CATALOG}/dropped-databases"

# ---- the audit trail (our extension) -------------------------------------------------------------------
REGISTRY = f"{TABLE}/registry"
#: Paimon's data token: storage credentials scoped to the table (``getTableToken``).
TABLE_TOKEN = f"{TABLE}/token"
#: The row filters and column masks a reader must apply (``authTableQuery``).
TABLE_AUTH = f"{TABLE}/auth"
EVENTS = f"{TABLE}/events"
LOCK_EVENTS = f"{TABLE}/lock-events"
MAINTENANCE_RUNS = f"{TABLE}/maintenance-runs"
SNAPSHOT_RECORDINGS = f"{TABLE}/snapshot-recordings"
#: The change feed: every table's commit, lock and maintenance events, as CloudEvents, resumable.
CATALOG_EVENTS = f"{CATALOG}/events"
#: On-call work through the service (admin; our extension): a table's recovery, snapshot expiration and
#: orphan cleanup, and the catalog's lock rows with their release.
RECOVER = f"{TABLE}/recover"
EXPIRE_SNAPSHOTS = f"{TABLE}/expire-snapshots"
REMOVE_ORPHAN_FILES = f"{TABLE}/remove-orphan-files"
LOCKS = f"{CATALOG}/locks"
RELEASE_LOCK = f"{LOCKS}/release"

# ---- the protocol, operation by operation --------------------------------------------------------------
#: ``(method, template, operationId)`` of every operation of apache/paimon's ``rest-catalog-open-api.yaml``
#: (56) and of those its Java client (``RESTApi``, ``ResourcePaths``) calls beyond that document (7:
#: schemas, ``replaceTable``, semantic views; each named as ``RESTApi`` names its call, lower camel case),
#: 63 in all: the service serves each (one route apiece) and its OpenAPI document names each route by
#: that operationId (client generators and the spec then agree).
SPEC_OPERATIONS: tuple[tuple[str, str, str], ...] = (
    ("GET", CONFIG, "getConfig"),
    ("GET", DATABASES, "listDatabases"),
    ("POST", DATABASES, "createDatabase"),
    ("GET", DATABASE, "getDatabase"),
    ("DELETE", DATABASE, "dropDatabase"),
    ("POST", DATABASE, "alterDatabase"),
    ("POST", REGISTER_TABLE, "RegisterTable"),
    ("GET", TABLES, "listTables"),
    ("POST", TABLES, "createTable"),
    ("GET", TABLE_DETAILS, "listTableDetails"),
    ("GET", TABLES_GLOBALLY, "ListTablesGlobally"),
    ("GET", TABLE_BY_ID, "getTableById"),
    ("GET", TABLE, "getTable"),
    ("POST", TABLE, "alterTable"),
    ("DELETE", TABLE, "dropTable"),
    ("POST", RENAME_TABLE, "renameTable"),
    ("POST", COMMIT, "commitTable"),
    ("POST", ROLLBACK, "rollbackTable"),
    ("POST", ROLLBACK_SCHEMA, "rollbackSchema"),
    ("GET", TABLE_TOKEN, "getTableToken"),
    ("POST", TABLE_AUTH, "authTableQuery"),
    ("GET", SNAPSHOT, "getTableSnapshot"),
    ("GET", SNAPSHOT_VERSION, "getVersionSnapshot"),
    ("GET", SNAPSHOTS, "listSnapshots"),
    ("GET", PARTITIONS, "listPartitions"),
    ("POST", PARTITIONS, "createPartitions"),
    ("POST", DROP_PARTITIONS, "dropPartitions"),
    ("POST", MARK_DONE_PARTITIONS, "markDonePartitions"),
    ("POST", PARTITIONS_BY_NAMES, "listPartitionsByNames"),
    ("POST", PARTITIONS_BY_FILTER, "listPartitionsByFilter"),
    ("GET", BRANCHES, "listBranches"),
    ("POST", BRANCHES, "createBranch"),
    ("DELETE", BRANCH, "dropBranch"),
    ("POST", RENAME_BRANCH, "renameBranch"),
    ("POST", FORWARD_BRANCH, "forwardBranch"),
    ("GET", TAGS, "listTags"),
    ("POST", TAGS, "createTag"),
    ("GET", TAG, "getTag"),
    ("DELETE", TAG, "deleteTag"),
    ("GET", CONSUMERS, "listConsumers"),
    ("POST", RESET_CONSUMER, "resetConsumer"),
    ("GET", VIEWS, "listViews"),
    ("POST", VIEWS, "createView"),
    ("GET", VIEW_DETAILS, "listViewDetails"),
    ("GET", VIEWS_GLOBALLY, "listViewsGlobally"),
    ("GET", VIEW, "getView"),
    ("POST", VIEW, "alterView"),
    ("DELETE", VIEW, "dropView"),
    ("POST", RENAME_VIEW, "renameView"),
    ("GET", FUNCTIONS, "listFunctions"),
    ("POST", FUNCTIONS, "createFunction"),
    ("GET", FUNCTION_DETAILS, "listFunctionDetails"),
    ("GET", FUNCTIONS_GLOBALLY, "listFunctionsGlobally"),
    ("GET", FUNCTION, "getFunction"),
    ("POST", FUNCTION, "alterFunction"),
    ("DELETE", FUNCTION, "dropFunction"),
    # Beyond the yaml: the Java client's calls (``RESTApiNameTest`` names them).
    ("GET", SCHEMAS, "listSchemas"),
    ("GET", SCHEMA_VERSION, "getSchema"),
    ("POST", REPLACE_TABLE, "replaceTable"),
    ("GET", SEMANTIC_VIEWS, "listSemanticViews"),
    ("GET", SEMANTIC_VIEW, "getSemanticView"),
    ("POST", SEMANTIC_VIEW, "upsertSemanticView"),
    ("DELETE", SEMANTIC_VIEW, "deleteSemanticView"),
)

# ---- the management API (apache/paimon rest-management-open-api.yaml; docs/GOVERNANCE.md) -------------
#: Permissions of the catalog: the direct assignments on one exact resource (``GET``), grant, revoke.
PERMISSIONS = f"{CATALOG}/permissions"
GRANT_PERMISSION = f"{PERMISSIONS}/grant"
REVOKE_PERMISSION = f"{PERMISSIONS}/revoke"
#: A table's data policies (row filters, column masks): list (``GET``), create (``POST``), drop.
TABLE_POLICIES = f"{TABLE}/policies"
DROP_TABLE_POLICY = f"{TABLE_POLICIES}/drop"
#: ``(method, template, operationId)`` of the management operations pypaimon 2.1.0 and paimon-rust 0.4.0
#: call (service/routes_management.py serves each, named by that operationId).
MANAGEMENT_OPERATIONS: tuple[tuple[str, str, str], ...] = (
    ("GET", PERMISSIONS, "listPermissions"),
    ("POST", GRANT_PERMISSION, "grantPermission"),
    ("POST", REVOKE_PERMISSION, "revokePermission"),
    ("GET", TABLE_POLICIES, "listTablePolicies"),
    ("POST", TABLE_POLICIES, "createTablePolicy"),
    ("POST", DROP_TABLE_POLICY, "dropTablePolicy"),
)
#: ``GET .../permissions`` query: the exact resource (``resourceType`` and its locators), optionally one
#: principal and one access; ``GET .../policies`` query: a policy type, a principal, a masked column.
PERMISSION_RESOURCE_TYPE = "resourceType"
PERMISSION_DATABASE = "database"
PERMISSION_TABLE = "table"
PERMISSION_FUNCTION = "function"
PERMISSION_VIEW = "view"
PERMISSION_PRINCIPAL = "principal"
PERMISSION_ACCESS = "access"
POLICY_TYPE = "type"
POLICY_PRINCIPAL = "principal"
POLICY_COLUMN = "column"

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
#: View and function listings' name patterns (SQL LIKE).
VIEW_NAME_PATTERN = "viewNamePattern"
FUNCTION_NAME_PATTERN = "functionNamePattern"
#: ``TABLE_DETAILS``: only tables of this type (the schema's ``type`` option).
TABLE_TYPE = "tableType"
#: ``EVENTS``: the events of one commit.
COMMIT_ID = "commitId"
#: ``CATALOG_EVENTS`` filters: one table (``db.t``), a database, event kinds (comma-separated), the
#: principal, a time range (ISO 8601; ``since`` inclusive, ``until`` exclusive).
FEED_TABLE = "table"
#: The change feed's ``pageToken`` that means "from now on" (the head of the feed).
FEED_NOW = "now"
FEED_DATABASE = "database"
FEED_KIND = "kind"
FEED_PRINCIPAL = "principal"
FEED_SINCE = "since"
FEED_UNTIL = "until"


def expand(template: str, **segments: str) -> str:
    """``template`` with each ``{name}`` replaced by ``segments[name]`` percent-encoded as one path
    segment (``/`` included, so a name cannot reach another route)."""
    return template.format_map({name: quote(value, safe="") for name, value in segments.items()})


# ---- the catalogs' admin API (our extension, shaped as Apache Polaris' management API) ------------------
CATALOGS = "/api/management/v1/catalogs"
CATALOG_ADMIN = f"{CATALOGS}/{{catalog}}"
