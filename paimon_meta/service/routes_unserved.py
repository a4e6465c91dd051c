"""The protocol's operations this service does not serve yet (``paths.NOT_SERVED``): each is a route that
answers 501 with the protocol's error body naming the operation, so a client learns what is missing
(pypaimon 2.1.0 raises ``NotImplementedException`` with the message) instead of reading a bare 404 as
"no such table" or "no such database". They need a token like every route, and check ``{prefix}``;
they read and write nothing. The served OpenAPI document lists them, answering 501."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import NoReturn

from fastapi import APIRouter, Depends

from paimon_meta.errors import UnsupportedError
from paimon_meta.rest import models, paths
from paimon_meta.service.auth import Require
from paimon_meta.service.routes_common import BEARER, ERRORS, PREFIX

# Any principal's token (nothing is read or written): the grant check every route declares.
router = APIRouter(dependencies=[BEARER, PREFIX, Depends(Require(None))], responses=ERRORS)

_SEGMENT = re.compile(r"{(\w+)}")


def _not_served(method: str, template: str, operation_id: str) -> Callable[..., NoReturn]:
    def endpoint(**_segments: str) -> NoReturn:
        raise UnsupportedError(
            f"{operation_id} ({method} {template}) is not served by paimon-meta yet "
            "(the README lists what is served)",
            operation=operation_id,
        )

    # The path's segments (but {prefix}, which PREFIX declares) as the endpoint's parameters, so the
    # document declares each of them.
    names = [name for name in _SEGMENT.findall(template) if name != "prefix"]
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str) for name in names]
    )
    endpoint.__name__ = operation_id
    return endpoint


for _method, _template, _operation in paths.NOT_SERVED:
    router.add_api_route(
        _template,
        _not_served(_method, _template, _operation),
        methods=[_method],
        operation_id=_operation,
        summary=f"{_operation}: not served yet (501)",
        tags=["not served yet"],
        status_code=501,
        response_description="Not served yet: the protocol's error body names the operation.",
        responses={501: {"model": models.ErrorResponse}},
    )
