"""``serve`` freezes the objects built at start out of the collector's full collections (a full
collection traversing them paused requests for ~100 ms); an app built with a given state in a process
that builds many (tests) does not, unless asked."""

from __future__ import annotations

import gc

import pytest
from fastapi.testclient import TestClient

from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings, ServiceState

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("freeze", [True, False])
def test_the_start_is_frozen_only_when_asked(
    service_catalog: MetastoreCatalog, monkeypatch: pytest.MonkeyPatch, freeze: bool
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    settings = ServiceSettings(gc_freeze_at_start=freeze)
    with TestClient(create_app(settings, state=ServiceState(settings, service_catalog))) as client:
        assert client.get("/healthz").status_code == 200
    assert calls == (["freeze"] if freeze else [])
