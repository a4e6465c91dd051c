"""Real-browser fixtures: Debian's Chromium (``/usr/bin/chromium``, or ``$PAIMON_META_CHROMIUM``) driven
by Playwright for Python, headless (``--no-sandbox`` as root), against real ``paimon-meta serve``
processes on a fresh metastore (``console``: an admin and a read-only principal with their tokens).

Without Chromium or Playwright the tests are skipped with the reason, except under ``CI=true`` where
they fail (``make test`` installs Chromium: its ``browser`` target). Every page a test visits through
``Shots.visit`` is kept as a PNG, and every page still open when a test ends as ``<test>--end.png``, in
``$PAIMON_META_ARTIFACTS/browser/`` (``test-artifacts/browser/`` by default; gitignored).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pyarrow as pa
import pytest

import paimon_meta
from paimon_meta.catalog.metastore import MetastoreCatalog
from tests.fixtures.service import FAST_LOCK, REPO, ServiceProcess, make_principal, spawn_service

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

CHROMIUM = Path(os.environ.get("PAIMON_META_CHROMIUM", "/usr/bin/chromium"))
SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False)])
#: The tables every ``console`` fixture starts with, one snapshot each.
TABLES = ("db.orders", "db.users")


def artifacts_dir() -> Path:
    """Where screenshots go: ``$PAIMON_META_ARTIFACTS/browser`` or ``<repo>/test-artifacts/browser``."""
    root = os.environ.get("PAIMON_META_ARTIFACTS")
    return (Path(root) if root else REPO / "test-artifacts") / "browser"


def _missing(reason: str) -> NoReturn:
    message = f"no browser for tests: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="package")
def chromium() -> Iterator[Browser]:
    """One headless Chromium for the tests of this folder (Debian's, driven by Playwright, which downloads
    no browser); Playwright's driver and its event loop stop when they are done, before other tests."""
    if not CHROMIUM.exists():
        _missing(
            f"{CHROMIUM} is missing (as root: apt-get install -y chromium chromium-driver; or make browser)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _missing(f"playwright is not installed ({exc}; pip install -e '.[dev]')")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox"] if os.geteuid() == 0 else [],
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Shots:
    """Screenshots of one test's pages, named ``<test>--<n>-<name>.png`` in :func:`artifacts_dir`."""

    directory: Path
    test: str
    taken: list[Path] = field(default_factory=list)

    def take(self, page: Page, name: str, *, full_page: bool = True) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "page"
        path = self.directory / f"{self.test}--{len(self.taken):02d}-{safe}.png"
        page.screenshot(path=str(path), full_page=full_page)
        self.taken.append(path)
        return path

    def visit(self, page: Page, url: str, name: str) -> Path:
        """Open ``url`` in ``page``, wait for it to load, keep its screenshot."""
        answer = page.goto(url)
        assert answer is not None and answer.ok, f"{url}: {answer and answer.status}"
        return self.take(page, name)


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    directory = artifacts_dir()
    directory.mkdir(parents=True, exist_ok=True)
    test = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    for old in directory.glob(f"{test}--*.png"):
        old.unlink()
    return Shots(directory, test)


@pytest.fixture
def new_context(chromium: Browser, shots: Shots) -> Iterator[Callable[[], BrowserContext]]:
    """Fresh browser contexts (each its own cookies: one per signed-in person); the pages still open
    at the end of the test are screenshotted (``end-<n>``), then the contexts closed."""
    made: list[BrowserContext] = []

    def make() -> BrowserContext:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(
            60_000
        )  # a condition waited for; generous for a loaded machine (load 10+ on 2 cores)
        made.append(context)
        return context

    yield make
    pages = [page for context in made for page in context.pages if not page.is_closed()]
    for n, page in enumerate(pages):
        try:
            shots.take(page, f"end-{n}")
        except Exception as exc:  # a crashed page must not hide the test's own failure
            print(f"no end screenshot of page {n}: {exc}")
    for context in made:
        context.close()


@pytest.fixture
def browser_context(new_context: Callable[[], BrowserContext]) -> BrowserContext:
    return new_context()


@dataclass
class Console:
    """A metastore with ``TABLES`` (one snapshot each), ``paimon-meta serve`` replicas over it, and the
    tokens of an admin (``admin`` everywhere) and a read-only principal (``read`` on ``db``)."""

    catalog: MetastoreCatalog
    db_url: str
    warehouse: str
    log_dir: Path
    started: list[ServiceProcess]
    admin_token: str
    reader_token: str

    @property
    def server(self) -> ServiceProcess:
        return self.started[0]

    def spawn(self) -> ServiceProcess:
        """One more replica over the same metastore and warehouse."""
        return spawn_service(self.started, self.db_url, self.warehouse, self.log_dir)

    def commit(self, identifier: str, k: int) -> int:
        """Commit one row to ``identifier`` as another client would; the new snapshot's id."""
        table = self.catalog.get_table(identifier)
        wb = table.new_batch_write_builder()
        write, commit = wb.new_write(), wb.new_commit()
        try:
            write.write_arrow(pa.table({"k": pa.array([k], pa.int64())}))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
        snapshot = self.catalog.get_table(identifier).latest_snapshot()
        assert snapshot is not None
        return int(snapshot.id)


@pytest.fixture
def console(service_processes: list[ServiceProcess], clean_db: str, tmp_path: Path) -> Iterator[Console]:
    warehouse = str(tmp_path / "warehouse")
    catalog = paimon_meta.connect(clean_db, warehouse, **FAST_LOCK)
    try:
        admin = make_principal(catalog, "ops-admin", [("admin", None, None)])
        reader = make_principal(catalog, "ops-reader", [("read", "db", None)])
        catalog.create_database("db", ignore_if_exists=True)
        console = Console(catalog, clean_db, warehouse, tmp_path, service_processes, admin, reader)
        for n, identifier in enumerate(TABLES):
            catalog.create_table(identifier, SCHEMA)
            console.commit(identifier, n)
        console.spawn()
        yield console
    finally:
        catalog.close()
