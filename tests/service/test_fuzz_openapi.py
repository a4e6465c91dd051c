"""Property-based fuzzing of the whole HTTP surface from the served OpenAPI document (schemathesis).

Every operation of ``GET /openapi.json`` is fuzzed in-process against a catalog with a seeded table, with
schema-valid and schema-violating requests (schemathesis' positive and negative modes), path parameters
steered towards names that exist so requests get past "no such table":

- as an admin: every answer is documented (status, content type, headers, body schema); an error answer
  is the protocol's error body with ``code`` equal to the status; no 5xx but a documented 501 (the
  documented 500 "outcome unknown" and 503 "unavailable" answer outages, and here there is none);
  an admin request refused with 4xx changes nothing of the catalog (databases, tables, pointers,
  schemas, tags, snapshots, statistics, warehouse files; the audit logs may record the refusal);
- without a token, with a bad one, with a read-only token and with a token without grants: 401 (or 429
  once throttled) for the first two, never a 2xx for a non-GET, and nothing written at all: every row
  of every metastore table and every warehouse file is as it was.

Bounded in ``make test`` and derandomized (the same examples on every run); ``PAIMON_META_SLOW=1`` runs
hundreds of examples per operation with a fresh seed each run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from sqlalchemy import inspect, text

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.errors import NotFoundError
from paimon_meta.ops import tags as tag_ops
from paimon_meta.rest import paths
from paimon_meta.service.openapi import document
from tests.fixtures.postgres import PgServer
from tests.fixtures.service import FAST_LOCK, in_process_client, make_principal
from tests.service.helpers import SCHEMA, auth, seed

pytestmark = pytest.mark.postgres

SLOW = os.environ.get("PAIMON_META_SLOW") == "1"
#: Examples per operation as an admin, and per operation and refused credential.
ADMIN_EXAMPLES = 300 if SLOW else 10
REFUSED_EXAMPLES = 60 if SLOW else 3
#: Reproducible in CI and in the bounded run; the long run explores new ground each time.
DERANDOMIZE = os.environ.get("CI", "").lower() == "true" or not SLOW

#: The document the app serves (``test_served_document_is_the_generated_one``) and its operations.
DOCUMENT = document()
OPERATIONS = [(method.upper(), path) for path, ops in DOCUMENT["paths"].items() for method in ops]
#: Answered without a token.
PUBLIC = frozenset({"/healthz", "/readyz"})
#: Names that exist in the seeded catalog: a steered path parameter takes one of these.
KNOWN = {
    "prefix": ["paimon"],
    "database": ["db"],
    "table": ["t", "u"],
    "tag": ["first"],
    "branch": ["b1"],
    "view": ["v1"],
    "function": ["f1"],
    "semantic_view": ["sv1"],
    "tableId": ["1"],
    "version": ["1", "LATEST", "first"],
    # the catalogs' admin API: the service's default catalog's name, and one of no catalog
    "catalog": ["paimon", "nope"],
}
#: Audit logs and the lock's row: an admin request refused with 4xx may record itself there.
AUDIT_TABLES = frozenset(
    {"paimon_commit_events", "paimon_lock_events", "paimon_maintenance_events", "paimon_distributed_locks"}
)
load_all_checks()
#: schemathesis' checks of an answer against the document, by their documented names.
CONFORMANCE = CHECKS.get_by_names(
    [
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)
ERROR_KEYS = {"message", "resourceType", "resourceName", "code"}


@dataclass
class Fuzz:
    client: TestClient
    catalog: MetastoreCatalog
    warehouse: Path
    schema: Any  # schemathesis' BaseOpenAPISchema
    admin: dict[str, str]
    reader: dict[str, str]  # read grant on db.t only
    nobody: dict[str, str]  # a valid token without grants

    def ensure_seeded(self) -> None:
        """db.t with a snapshot and the tag ``first``, db.u without a snapshot: re-created when a fuzzed
        request dropped or renamed them, so later examples reach existing resources again."""
        try:
            self.catalog.get_table("db.t")
        except NotFoundError:
            seed(self.catalog, "db.t")
        if "first" not in tag_ops.tags_of(self.catalog, "db.t").names():
            tag_ops.create_tag(self.catalog, "db.t", "first")
        try:
            self.catalog.get_table("db.u")
        except NotFoundError:
            self.catalog.create_table("db.u", SCHEMA)


@dataclass(frozen=True)
class Shared:
    """What the module's tests share: one metastore database and warehouse, the seeded catalog, the
    principals and the parsed document. Each test still gets an app of its own (an address throttled by
    one test's bad tokens is not throttled in the next); a test's examples change the catalog the next
    ones see (``ensure_seeded`` restores the names they steer towards), in the same order on every run."""

    catalog: MetastoreCatalog
    warehouse: Path
    schema: Any
    admin: dict[str, str]
    reader: dict[str, str]
    nobody: dict[str, str]


@pytest.fixture(scope="module")
def shared(
    pg_server: PgServer, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shared]:
    name = f"paimon_meta_fuzz_{uuid.uuid4().hex[:12]}"
    url = pg_server.create_database(name, template=pg_template)
    warehouse = tmp_path_factory.mktemp("fuzz") / "warehouse"
    catalog = paimon_meta.connect(url, str(warehouse), **FAST_LOCK)
    try:
        yield Shared(
            catalog=catalog,
            warehouse=warehouse,
            # the served document (test_served_document_is_the_generated_one), parsed once
            schema=schemathesis.openapi.from_dict(DOCUMENT),
            admin=auth(make_principal(catalog, "admin", [("admin", None, None)])),
            reader=auth(make_principal(catalog, "reader", [("read", "db", "t")])),
            nobody=auth(make_principal(catalog, "nobody")),
        )
    finally:
        catalog.close()
        pg_server.drop_database(name)


@pytest.fixture
def fuzz(shared: Shared) -> Iterator[Fuzz]:
    with in_process_client(shared.catalog) as client:
        env = Fuzz(
            client=client,
            catalog=shared.catalog,
            warehouse=shared.warehouse,
            schema=shared.schema,
            admin=shared.admin,
            reader=shared.reader,
            nobody=shared.nobody,
        )
        env.ensure_seeded()
        yield env


#: The digest of one metastore table: every row, in a stable order.
_TABLE_DIGEST = "SELECT md5(coalesce(string_agg(r::text, chr(10) ORDER BY r::text), '')) FROM {} r"


def state_digest(env: Fuzz, *, catalog_only: bool) -> dict[str, str]:
    """A digest of every row of every metastore table (``catalog_only``: all but the audit logs and the
    lock's row) and of every warehouse file (path, size, modification time: Paimon never rewrites a file
    in place but the hints, and those only with a new snapshot)."""
    out: dict[str, str] = {}
    with env.catalog.engine.connect() as conn:
        for name in sorted(inspect(conn).get_table_names()):
            if not name.startswith("paimon_") or (catalog_only and name in AUDIT_TABLES):
                continue
            quoted = conn.dialect.identifier_preparer.quote(name)
            if name == "paimon_access_events":
                # a commit refused for want of a grant is recorded as an access event (AUDIT.md's
                # refused_or_conflicted): the audit of the refusal, not something the caller wrote
                quoted = f"(SELECT * FROM {quoted} WHERE event_type <> 'commit_refused')"  # noqa: S608 - our own table
            if name == "paimon_tables":
                # schema_summary is a cache of the schema file (migration 0023), filled when a caller who
                # may read the table lists table-details: derived from what is stored, not a write of theirs
                columns = [c["name"] for c in inspect(conn).get_columns(name)]
                columns.remove("schema_summary")
                quoted = f"(SELECT {', '.join(columns)} FROM {quoted})"  # noqa: S608 - our own columns
            out[name] = str(conn.execute(text(_TABLE_DIGEST.format(quoted))).scalar_one())
    for path in sorted(env.warehouse.rglob("*")):
        if path.is_file():
            stat = path.stat()
            out[str(path.relative_to(env.warehouse))] = f"{stat.st_size}:{stat.st_mtime_ns}"
    return out


# ---- steering: generated bodies are mostly refused by the first check they meet; members that name
# resources or carry the values the catalog interprets are, some of the time, drawn from these instead.
_COLUMN = st.sampled_from(["k", "p", "v", "new", "nope"])
_TEXT = st.text(max_size=40)
_OPTION_KEY = st.sampled_from(
    [
        "bucket",
        "bucket-key",
        "file.format",
        "merge-engine",
        "sequence.field",
        "changelog-producer",
        "partition.default-name",
        "snapshot.num-retained.min",
        "snapshot.time-retained",
        "dynamic-partition-overwrite",
        "path",
        "type",
    ]
)
_OPTION_VALUE = st.one_of(_TEXT, st.integers().map(str), st.sampled_from(["-1", "0", "2", "orc", "true"]))
_OPTIONS = st.dictionaries(_OPTION_KEY, _OPTION_VALUE, max_size=3)
_TYPE = st.one_of(
    st.sampled_from(
        ["INT", "STRING", "BIGINT NOT NULL", "DECIMAL(38, 2)", "ARRAY<INT>", "ROW<a INT>", "FOO"]
    ),
    _TEXT,
)
_IDENTIFIER = st.fixed_dictionaries(
    {"database": st.sampled_from(["db", "nodb"]), "object": st.sampled_from(["t", "u", "n1"])}
)
_NAMES = st.lists(_COLUMN, min_size=1, max_size=2)
_CHANGE = st.one_of(
    st.fixed_dictionaries({"action": st.just("setOption"), "key": _OPTION_KEY, "value": _OPTION_VALUE}),
    st.fixed_dictionaries({"action": st.just("removeOption"), "key": _OPTION_KEY}),
    st.fixed_dictionaries({"action": st.just("addColumn"), "fieldNames": _NAMES, "dataType": _TYPE}),
    st.fixed_dictionaries({"action": st.just("renameColumn"), "fieldNames": _NAMES, "newName": _COLUMN}),
    st.fixed_dictionaries(
        {"action": st.just("updateColumnComment"), "fieldNames": _NAMES, "newComment": st.none() | _TEXT}
    ),
    st.fixed_dictionaries({"action": st.just("updateComment"), "comment": st.none() | _TEXT}),
)
_SNAPSHOT_ID = st.sampled_from([1, 2, 0, -1, 2**63 - 1])
_BRANCH_NAME = st.sampled_from(["b1", "b2", "main", "1"])
_TAG_NAME = st.one_of(
    st.sampled_from(["first", "second", ".", "..", "123"]),
    # around the longest name whose file name tag-<name> fits in 255 bytes
    st.sampled_from([0, 250, 251, 252, 255, 256]).map(lambda n: "t" * n),
    st.text(alphabet="ab09._-/", max_size=12),
)
#: (method, path template) -> body members drawn instead of generated.
BODIES: dict[tuple[str, str], dict[str, st.SearchStrategy[Any]]] = {
    ("POST", paths.DATABASES): {"name": st.sampled_from(["db", "d1", "D-1"]), "options": _OPTIONS},
    ("POST", paths.DATABASE): {"updates": _OPTIONS, "removals": st.lists(_OPTION_KEY, max_size=2)},
    ("POST", paths.TABLES): {
        "identifier": _IDENTIFIER,
        "schema": st.fixed_dictionaries(
            {
                "fields": st.just(
                    [
                        {"id": 0, "name": "k", "type": "BIGINT NOT NULL"},
                        {"id": 1, "name": "p", "type": "STRING"},
                    ]
                ),
                "options": _OPTIONS,
                "partitionKeys": st.lists(_COLUMN, max_size=2),
                "primaryKeys": st.lists(_COLUMN, max_size=2),
            }
        ),
    },
    ("POST", paths.TABLE): {"changes": st.lists(_CHANGE, min_size=1, max_size=3)},
    ("POST", paths.RENAME_TABLE): {"source": _IDENTIFIER, "destination": _IDENTIFIER},
    ("POST", paths.TAGS): {"tagName": _TAG_NAME, "snapshotId": st.none() | _SNAPSHOT_ID},
    ("POST", paths.ROLLBACK): {
        "instant": st.one_of(
            st.fixed_dictionaries({"type": st.just("snapshot"), "snapshotId": _SNAPSHOT_ID}),
            st.fixed_dictionaries({"type": st.just("tag"), "tagName": _TAG_NAME}),
        ),
        "fromSnapshot": st.none() | _SNAPSHOT_ID,
    },
    ("POST", paths.BRANCHES): {"branch": _BRANCH_NAME, "fromTag": st.none() | _TAG_NAME},
    ("POST", paths.RENAME_BRANCH): {"toBranch": _BRANCH_NAME},
}


def _or_none(member: st.SearchStrategy[Any]) -> Any:
    def pick(draw: bool) -> st.SearchStrategy[tuple[Any] | None]:
        return member.map(lambda x: (x,)) if draw else st.none()

    return pick


def steered(op: Any, mode: GenerationMode) -> st.SearchStrategy[Any]:
    """Cases of ``op``, four in five steered: path parameters name resources that exist, and body
    members (``BODIES``) are each, with even odds, drawn rather than generated."""
    names = [p.name for p in op.path_parameters]
    known = st.fixed_dictionaries({n: st.sampled_from(KNOWN[n]) for n in names})
    members = BODIES.get((op.method.upper(), op.path), {})
    # a member is drawn three times in four (None: the generated one is kept)
    drawn = st.fixed_dictionaries(
        {k: st.sampled_from([False, True, True, True]).flatmap(_or_none(v)) for k, v in members.items()}
    )
    steer = st.integers(0, 4).map(bool)

    def apply(draw: tuple[Any, bool, dict[str, str], dict[str, tuple[Any] | None]]) -> Any:
        case, steering, segments, body = draw
        if not steering:
            return case
        if case.path_parameters is not None:
            case.path_parameters.update(segments)
        if isinstance(case.body, dict):
            case.body.update({k: v[0] for k, v in body.items() if v is not None})
        return case

    return st.tuples(op.as_strategy(mode), steer, known, drawn).map(apply)


def cases(op: Any) -> st.SearchStrategy[Any]:
    return st.one_of(steered(op, GenerationMode.POSITIVE), steered(op, GenerationMode.NEGATIVE))


def send(env: Fuzz, case: Any, headers: dict[str, str] | None) -> Any:
    """The case as a request through the in-process client, with ``headers`` (the credential) replacing
    any the case generated for Authorization."""
    kwargs = case.as_transport_kwargs()
    sent = {k: v for k, v in (kwargs.get("headers") or {}).items() if k.lower() != "authorization"}
    kwargs["headers"] = {**sent, **(headers or {})}
    kwargs.pop("cookies", None)
    if isinstance(kwargs.get("data"), (bytes, str)):  # requests' raw body is httpx's content
        kwargs["content"] = kwargs.pop("data")
    return env.client.request(**kwargs)


def describe(case: Any, response: Any) -> str:
    return f"{case.method} {case.formatted_path} -> {response.status_code} {response.text[:500]}"


def check_answer(op: Any, case: Any, response: Any) -> None:
    """Documented, the error body on errors, and no 5xx but a documented 501. The documented 500
    (outcome unknown) and 503 (unavailable) answer outages; here Postgres and the local warehouse
    answer, so either one is a bug: an input answered as an outage, which a client would retry
    forever."""
    case.validate_response(response, checks=CONFORMANCE)
    status = response.status_code
    if status >= 400:
        body = response.json()
        assert set(body) == ERROR_KEYS and body["code"] == status, describe(case, response)
        assert "Traceback" not in response.text, describe(case, response)
    if status >= 500:
        assert status == 501, f"server error with a healthy metastore and storage: {describe(case, response)}"
        documented = {str(code) for code in op.definition.raw.get("responses", {})}
        assert str(status) in documented, f"undocumented 501: {describe(case, response)}"


#: POSTs that write nothing (a query sent as a body): a reader may be answered 200.
READS_BY_POST = {("POST", paths.TABLE_AUTH)}


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=DERANDOMIZE,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


def label(op: tuple[str, str]) -> str:
    return f"{op[0]} {op[1]}"


def test_served_document_is_the_generated_one(
    service_client: TestClient, service_catalog: MetastoreCatalog
) -> None:
    """What the operations are parametrized from is what the app serves."""
    admin = auth(make_principal(service_catalog, "admin", [("admin", None, None)]))
    assert service_client.get("/openapi.json", headers=admin).json() == DOCUMENT


def refuse_all(fuzz: Fuzz, op: Any, kind: str, headers: dict[str, str] | None, *, public: bool) -> None:
    """Fuzz ``op`` with one refused credential: 401 (429 once the address is throttled) without a valid
    token, never a 2xx for a write with a token that lacks the grant."""

    @fuzz_settings(REFUSED_EXAMPLES)
    @given(case=cases(op))
    def refused(case: Any) -> None:
        response = send(fuzz, case, headers)
        check_answer(op, case, response)
        status = response.status_code
        if public:
            return
        if kind in ("none", "bogus", "basic"):
            assert status in (401, 429), f"{kind}: {describe(case, response)}"
        elif case.method != "GET" and (case.method, op.path) not in READS_BY_POST:
            assert status >= 400, f"{kind}: a write accepted: {describe(case, response)}"

    refused()


def refused_params() -> list[Any]:
    return [pytest.param(method, path, id=label((method, path))) for method, path in OPERATIONS]


@pytest.mark.parametrize(("method", "path"), refused_params())
def test_refused_requests_write_nothing(fuzz: Fuzz, method: str, path: str) -> None:
    op = fuzz.schema[path][method]
    before = state_digest(fuzz, catalog_only=False)
    credentials = {
        "none": None,
        "bogus": {"Authorization": "Bearer pmt_not-a-token"},
        "basic": {"Authorization": "Basic YWRtaW46YWRtaW4="},
        "reader": fuzz.reader,
        "nobody": fuzz.nobody,
    }
    for kind, headers in credentials.items():
        refuse_all(fuzz, op, kind, headers, public=path in PUBLIC)
    assert state_digest(fuzz, catalog_only=False) == before


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[label(o) for o in OPERATIONS])
def test_admin_requests_answer_as_documented(fuzz: Fuzz, method: str, path: str) -> None:
    op = fuzz.schema[path][method]

    @fuzz_settings(ADMIN_EXAMPLES)
    @given(case=cases(op))
    def as_admin(case: Any) -> None:
        fuzz.ensure_seeded()
        before = state_digest(fuzz, catalog_only=True) if method != "GET" else None
        response = send(fuzz, case, fuzz.admin)
        check_answer(op, case, response)
        if before is not None and 400 <= response.status_code < 500:
            after = state_digest(fuzz, catalog_only=True)
            assert after == before, f"refused but wrote: {describe(case, response)}"

    as_admin()
