"""The console (/ui): sign-in and out, the session cookie, each page with data, grant filtering."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.db.models import Privilege
from paimon_meta.metastore.principals import Principals
from paimon_meta.service.app import create_app
from paimon_meta.service.console import routes as console_routes
from paimon_meta.service.console import session
from paimon_meta.service.state import ServiceSettings, ServiceState
from tests.fixtures.oidc import IdentityProvider, rsa_key
from tests.fixtures.service import FAST_LOCK, ServiceProcess, make_principal
from tests.fixtures.tls import TlsFiles, spawn_tls_service
from tests.service.helpers import seed

pytestmark = pytest.mark.postgres


def sign_in(client: TestClient, token: str) -> None:
    r = client.post("/ui/login", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert r.headers["location"] == "/ui/"


def count_testid(html: str, name: str) -> int:
    return len(re.findall(rf'data-testid="{name}"', html))


@pytest.fixture
def admin_token(service_catalog: MetastoreCatalog) -> str:
    seed(service_catalog)
    return make_principal(service_catalog, "ops", [("admin", None, None)])


def test_sign_in_sets_a_strict_http_only_cookie(service_client: TestClient, admin_token: str) -> None:
    r = service_client.post("/ui/login", data={"token": admin_token}, follow_redirects=False)
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{session.COOKIE}={admin_token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    assert "Secure" not in cookie  # plain http: a Secure cookie would never be sent back
    page = service_client.get("/ui/")
    assert page.status_code == 200
    assert '<strong data-testid="signed-in-as">ops</strong>' in page.text


def test_cookie_is_secure_under_https(service_catalog: MetastoreCatalog, admin_token: str) -> None:
    from tests.fixtures.service import in_process_client

    with in_process_client(service_catalog) as client:
        client.base_url = client.base_url.copy_with(scheme="https")
        r = client.post("/ui/login", data={"token": admin_token}, follow_redirects=False)
        assert r.status_code == 303
        assert "; Secure" in r.headers["set-cookie"]


def test_bad_token_shows_the_form_again(service_client: TestClient, admin_token: str) -> None:
    r = service_client.post("/ui/login", data={"token": "pmt_nope"}, follow_redirects=False)
    assert r.status_code == 401
    assert 'name="token"' in r.text and "set-cookie" not in r.headers
    assert service_client.post("/ui/login", data={"token": ""}).status_code == 401


def test_pages_need_a_session(service_client: TestClient, admin_token: str) -> None:
    for path in ("/ui/", "/ui/locks", "/ui/maintenance", "/ui/live", "/ui/tables/db/t"):
        r = service_client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login", path
    service_client.cookies.set(session.COOKIE, "pmt_forged")
    r = service_client.get("/ui/", follow_redirects=False)
    assert r.status_code == 303 and "Max-Age=0" in r.headers["set-cookie"]  # the stale session is cleared
    assert service_client.get("/ui/login").status_code == 200
    assert service_client.get("/ui/static/console.css").status_code == 200


def test_sign_out_clears_the_cookie(service_client: TestClient, admin_token: str) -> None:
    sign_in(service_client, admin_token)
    csrf = session.csrf_token(admin_token)
    assert service_client.post("/ui/logout", data={"csrf_token": "wrong"}).status_code == 403
    r = service_client.post("/ui/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/login?done=signed-out"
    assert "Max-Age=0" in r.headers["set-cookie"]
    assert service_client.get("/ui/", follow_redirects=False).status_code == 303


def test_revoking_the_token_ends_the_session(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin_token: str
) -> None:
    sign_in(service_client, admin_token)
    assert service_client.get("/ui/", follow_redirects=False).status_code == 200
    Principals(service_catalog.engine).revoke_tokens("ops")
    assert service_client.get("/ui/", follow_redirects=False).status_code == 303
    # signing out still works (it only clears the cookie)
    r = service_client.post(
        "/ui/logout", data={"csrf_token": session.csrf_token(admin_token)}, follow_redirects=False
    )
    assert r.status_code == 303 and "Max-Age=0" in r.headers["set-cookie"]


def test_overview_and_table_page_show_the_table(service_client: TestClient, admin_token: str) -> None:
    sign_in(service_client, admin_token)
    overview = service_client.get("/ui/").text
    assert count_testid(overview, "overview-table-row") == 1
    assert "db.t" in overview
    assert count_testid(overview, "catalog-rate") == 1 and count_testid(overview, "last-commit") == 1
    assert "0.1</span>" in overview  # the seed's one commit in the last 10 minutes
    assert "snapshot 1," in overview
    page = service_client.get("/ui/tables/db/t")
    assert page.status_code == 200, page.text
    html = page.text
    assert '<h1 data-testid="table-title">db.t</h1>' in html
    assert count_testid(html, "snapshot-chart") == 1
    assert count_testid(html, "commit-row") == 1
    assert count_testid(html, "admin-actions") == 1
    assert count_testid(html, "partition-row") == 2  # p=a, p=b
    assert '"records": [3]' in html  # the timeline's one snapshot: 3 rows


def test_grants_filter_tables_and_hide_admin_actions(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin_token: str
) -> None:
    seed(service_catalog, "db.t2")
    reader = make_principal(service_catalog, "reader", [("read", "db", "t")])
    sign_in(service_client, reader)
    overview = service_client.get("/ui/").text
    assert count_testid(overview, "overview-table-row") == 1
    assert "db.t2" not in overview
    assert count_testid(overview, "catalog-rate") == 0  # catalog totals: catalog readers only
    page = service_client.get("/ui/tables/db/t").text
    assert count_testid(page, "admin-actions") == 0
    assert "/tags" not in page and "/rollback" not in page and "/recover" not in page
    assert service_client.get("/ui/tables/db/t2").status_code == 403


def test_an_oidc_access_token_signs_in(
    service_catalog: MetastoreCatalog, identity_provider: IdentityProvider
) -> None:
    """With ``--oidc-issuer``, the issuer's JWT is pasted into the form (no redirect flow yet)."""
    seed(service_catalog)
    idp = identity_provider
    settings = ServiceSettings(auth_cache_seconds=0, oidc=idp.settings())
    app = create_app(settings, state=ServiceState(settings, service_catalog))
    with TestClient(app, raise_server_exceptions=False) as client:
        jwt = idp.token("alice")
        sign_in(client, jwt)
        assert count_testid(client.get("/ui/").text, "overview-table-row") == 0  # no grants yet
        Principals(service_catalog.engine).grant("user:alice", Privilege.READ, database="db")
        page = client.get("/ui/").text
        assert count_testid(page, "overview-table-row") == 1 and ">user:alice<" in page
        assert client.post("/ui/login", data={"token": idp.token("alice", key=rsa_key())}).status_code == 401


def test_pages_say_when_the_scripts_are_not_installed(
    service_client: TestClient, admin_token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sign_in(service_client, admin_token)
    assert "make console-assets" not in service_client.get("/ui/tables/db/t").text
    monkeypatch.setattr(console_routes, "STATIC_DIR", tmp_path)  # no vendor/ there
    page = service_client.get("/ui/tables/db/t")
    assert page.status_code == 200 and "make console-assets" in page.text
    assert "htmx.min.js" in page.text and "<script src" not in page.text.split("</main>")[1]
    assert count_testid(page.text, "commit-row") == 1  # the tables still render


def test_a_metadata_only_table_has_a_page(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin_token: str
) -> None:
    body = {
        "identifier": {"database": "db", "object": "csv"},
        "schema": {
            "fields": [{"id": 0, "name": "a", "type": "INT"}],
            "partitionKeys": [],
            "primaryKeys": [],
            "options": {"type": "format-table", "file.format": "csv"},
        },
    }
    bearer = {"Authorization": f"Bearer {admin_token}"}
    assert service_client.post("/v1/paimon/databases/db/tables", json=body, headers=bearer).is_success
    sign_in(service_client, admin_token)
    page = service_client.get("/ui/tables/db/csv")
    assert page.status_code == 200, page.text
    assert count_testid(page.text, "table-title") == 1 and count_testid(page.text, "admin-actions") == 0


def test_the_cookie_is_secure_on_a_tls_server(
    clean_db: str,
    tmp_path: Path,
    service_processes: list[ServiceProcess],
    tls_files: TlsFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real ``serve --tls-cert/--tls-key``: the session cookie is ``Secure`` and the session works."""
    warehouse = str(tmp_path / "wh")
    with paimon_meta.connect(clean_db, warehouse, **FAST_LOCK) as catalog:
        token = make_principal(catalog, "ops", [("admin", None, None)])
    server = spawn_tls_service(
        service_processes, clean_db, warehouse, tmp_path, files=tls_files, monkeypatch=monkeypatch
    )
    with httpx.Client(
        base_url=server.base, verify=ssl.create_default_context(cafile=str(tls_files.ca))
    ) as client:
        r = client.post("/ui/login", data={"token": token})
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert "; Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = client.get("/ui/")
        assert page.status_code == 200 and count_testid(page.text, "signed-in-as") == 1


def test_pages_say_only_fixed_messages_chosen_by_code(service_client: TestClient, admin_token: str) -> None:
    """``/ui/login?done=...`` showed the query string's text on the genuine page (escaped, but a
    phishing aid): a page now says the fixed message of a known code, and nothing for anything else."""
    phishing = "Your session expired. Call +1 555 0100 and read out your token"
    r = service_client.get("/ui/login", params={"done": phishing})
    assert r.status_code == 200 and "Call +1 555" not in r.text and count_testid(r.text, "notice") == 0
    r = service_client.get("/ui/login", params={"done": "signed-out"})
    assert count_testid(r.text, "notice") == 1 and "Signed out." in r.text
    sign_in(service_client, admin_token)
    for params in (
        {"done": "rolled-back", "n": "<b>now</b>"},  # a number only
        {"done": "rolled-back"},  # a message naming a number shows only with one
        {"done": "Tag created. Also visit evil.example"},
    ):
        r = service_client.get("/ui/", params=params)
        assert count_testid(r.text, "notice") == 0 and "Rolled back" not in r.text and "now</b>" not in r.text
    r = service_client.get("/ui/", params={"done": "rolled-back", "n": "7"})
    assert "Rolled back to snapshot 7." in r.text
    # signing out says so, by code
    csrf = session.csrf_token(admin_token)
    out = service_client.post("/ui/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert out.headers["location"] == "/ui/login?done=signed-out"


def test_the_maintenance_page_shows_the_queue_and_each_tables_debt(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin_token: str
) -> None:
    import pyarrow as pa

    from paimon_meta.maintenance.worker import Maintainer, MaintainerSettings
    from tests.service.helpers import SCHEMA

    table = service_catalog.create_table("db.pk", SCHEMA, primary_keys=["k"], options={"bucket": "1"})
    seed(service_catalog, "db.other")
    for k in range(6):
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        write.write_arrow(pa.table({"k": pa.array([k], pa.int64()), "p": ["a"], "v": ["x"]}))
        builder.new_commit().commit(write.prepare_commit())
    Maintainer(service_catalog, MaintainerSettings(workers=0)).scheduler.tick(sweep=True)
    sign_in(service_client, admin_token)
    page = service_client.get("/ui/maintenance").text
    assert count_testid(page, "maintenance-job") == 1 and "compact" in page
    assert count_testid(page, "maintenance-debt") == 3  # db.t (the fixture's), db.pk, db.other
    # a reader of one table sees its own
    reader = make_principal(service_catalog, "one", [("read", "db", "other")])
    service_client.cookies.clear()
    sign_in(service_client, reader)
    page = service_client.get("/ui/maintenance").text
    assert count_testid(page, "maintenance-job") == 0 and count_testid(page, "maintenance-debt") == 1


TIME_CELL = re.compile(r'<td class="time">([^<]*)</td>')
ONE_FORMAT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def test_the_table_page_lists_its_maintenance_runs_and_every_time_in_one_format(
    service_client: TestClient, service_catalog: MetastoreCatalog, admin_token: str
) -> None:
    from paimon_meta.ops.expire import expire_snapshots

    expire_snapshots(service_catalog, "db.t", dry_run=True)
    sign_in(service_client, admin_token)
    html = service_client.get("/ui/tables/db/t").text
    runs = html[html.index("<h2>Maintenance runs</h2>") :]
    assert count_testid(runs, "maintenance-row") == 1 and "No runs." not in runs
    assert "expire_snapshots" in runs
    pages = [html, *(service_client.get(p).text for p in ("/ui/", "/ui/maintenance", "/ui/locks"))]
    times = [t for page in pages for t in TIME_CELL.findall(page) if t]
    assert len(times) >= 4  # commits, lock events, runs on the table page; the runs page
    assert all(ONE_FORMAT.fullmatch(t) for t in times), times


def test_a_browser_at_the_root_is_sent_to_the_console_and_its_icon_is_no_refusal(
    service_client: TestClient, admin_token: str
) -> None:
    def refusals() -> str:
        metrics = service_client.get("/metrics", headers={"Authorization": f"Bearer {admin_token}"}).text
        return "\n".join(
            line
            for line in metrics.splitlines()
            if line.startswith("paimon_meta_service_auth_refusals_total")
        )

    before = refusals()
    root = service_client.get("/", headers={"Accept": "text/html"}, follow_redirects=False)
    assert root.status_code == 303 and root.headers["location"] == "/ui/"
    icon = service_client.get("/favicon.ico", follow_redirects=False)
    assert icon.status_code == 204 and icon.content == b""
    assert refusals() == before
    # ... and the console still asks for a session
    assert service_client.get("/ui/", follow_redirects=False).headers["location"] == "/ui/login"
