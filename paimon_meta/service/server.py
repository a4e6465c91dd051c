"""Run the service with uvicorn: ``paimon-meta serve``.

On SIGTERM (or SIGINT) uvicorn stops accepting connections, lets in-flight requests finish for up to
``drain_seconds`` and then exits; a commit cut off after that (or by SIGKILL) leaves only states
recovery resolves (docs/DESIGN.md, "The commit service"). Several replicas may serve one metastore and
warehouse: every commit takes the table's lock.
"""

from __future__ import annotations

import logging

import uvicorn

from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings

log = logging.getLogger("paimon_meta.service")


def serve(
    settings: ServiceSettings, *, host: str = "127.0.0.1", port: int = 8181, log_level: str = "info"
) -> None:
    """Serve until SIGTERM/SIGINT (blocks)."""
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,  # our middleware logs each request with its id and principal
        timeout_graceful_shutdown=max(1, int(settings.drain_seconds)),
        lifespan="on",
    )
    server = uvicorn.Server(config)
    log.info("serving catalog %r on http://%s:%d", settings.catalog_name, host, port)
    server.run()
