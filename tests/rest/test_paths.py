"""The protocol's paths are written once (``paimon_meta.rest.paths``): the service serves exactly those
templates, and the client expands them into one percent-encoded segment per name."""

from __future__ import annotations

from typing import Any

from paimon_meta.rest import paths
from paimon_meta.service.app import create_app
from paimon_meta.service.console import session as console_session
from paimon_meta.service.state import ServiceSettings


def _templates() -> set[str]:
    return {v for k, v in vars(paths).items() if k.isupper() and isinstance(v, str) and v.startswith("/")}


def _route_paths(routes: list[Any]) -> set[str]:
    out: set[str] = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        out |= _route_paths(list(included.routes)) if included is not None else {route.path}
    return out


def test_the_service_serves_every_template_and_nothing_else() -> None:
    served = _route_paths(list(create_app(ServiceSettings()).routes))
    # The operator console's pages are the browser's, under their own prefix (service/console), not
    # the protocol's.
    console = {p for p in served if console_session.is_console(p)}
    assert console and all(p.startswith(console_session.PREFIX + "/") for p in console)
    # V1 and CATALOG are the roots the other templates are built on, not routes; "/" sends a browser to
    # the console and "/favicon.ico" answers 204 (neither is the protocol's).
    assert served - console - {"/", "/favicon.ico"} == _templates() - {paths.V1, paths.CATALOG}


def test_expand_encodes_each_name_as_one_segment() -> None:
    assert paths.expand(paths.TABLE, prefix="paimon", database="db", table="t") == (
        "/v1/paimon/databases/db/tables/t"
    )
    assert paths.expand(paths.TAG, prefix="my cat", database="d/b", table="t?x", tag="v1#") == (
        "/v1/my%20cat/databases/d%2Fb/tables/t%3Fx/tags/v1%23"
    )
    assert paths.expand(paths.CONFIG) == "/v1/config"
