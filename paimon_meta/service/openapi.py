"""The OpenAPI document of the service, as committed in docs/openapi.json (a test keeps them equal).

``python -m paimon_meta.service.openapi > docs/openapi.json`` regenerates it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from paimon_meta.service.app import create_app
from paimon_meta.service.state import ServiceSettings


def document() -> dict[str, Any]:
    doc: dict[str, Any] = create_app(ServiceSettings()).openapi()
    return doc


if __name__ == "__main__":
    json.dump(document(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
