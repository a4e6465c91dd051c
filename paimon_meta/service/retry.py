"""Server-side repeats of requests that met a transient metastore failure, before any error reaches the
client (Polaris #1202: serialization failures passed on to 5% of the writers' requests).

A request is run again when the failure says that is safe (``paimon_meta.db.faults``): a read after any
transient failure, a write only when nothing of it took effect (no connection, a serialization failure or
deadlock that rolled the transaction back, a lock or statement timeout). Commits are never repeated here:
their outcome after a reset is settled by the commit path and the client's re-send of the identifier.

Backoff: capped exponential with full jitter, within a budget of seconds per request; then the failure
goes to the one exception handler (503 + ``Retry-After``).
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from fastapi import Request, Response
from fastapi.routing import APIRoute

from paimon_meta.db.faults import Fault, fault_of
from paimon_meta.rest import paths

log = logging.getLogger("paimon_meta.service")

#: Routes never repeated by the server: commits (see the module's docstring).
NOT_REPEATED = frozenset({paths.COMMIT, paths.COMMIT_MESSAGES})
_READS = frozenset({"GET", "HEAD"})
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` runs at most (the first included), each wait drawn from [0, min(cap, base * 2**n)],
    no wait that would end past ``budget_seconds`` after the first run started."""

    attempts: int = 4
    base_seconds: float = 0.05
    cap_seconds: float = 1.0
    budget_seconds: float = 3.0

    def wait(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``retry`` (1-based)."""
        bound = min(self.cap_seconds, self.base_seconds * (2 ** (retry - 1)))
        return (rng or random).uniform(0.0, bound)


async def repeat(
    call: Callable[[], Awaitable[T]],
    observe: Callable[[Fault], None],
    *,
    read_only: bool,
    policy: RetryPolicy = RetryPolicy(),
    what: str = "-",
    stop: Callable[[], bool] = lambda: False,
) -> T:
    """``await call()``, run again while it fails with a transient metastore fault that makes a repeat
    safe (any for a read, one that left nothing done for a write) and the policy allows; ``observe``
    is told of each repeat; never once ``stop()`` (the request's budget is spent: its deadline passed or
    its client left). The last failure is raised as it was."""
    started = anyio.current_time()
    retry = 0
    while True:
        try:
            return await call()
        except Exception as e:
            fault = fault_of(e)
            retry += 1
            if (
                fault is None
                or not fault.repeatable(read_only=read_only)
                or retry >= policy.attempts
                or stop()
            ):
                raise
            wait = policy.wait(retry)
            if anyio.current_time() + wait - started > policy.budget_seconds:
                raise
            observe(fault)
            log.info(
                "%s: repeating after %s (%s), retry %d in %.0f ms",
                what,
                fault.kind,
                fault.message,
                retry,
                wait * 1000,
            )
            await anyio.sleep(wait)


def _ignore(fault: Fault) -> None:
    pass


def _spent(request: Request) -> bool:
    """Whether the request's budget (service.bounds) is spent: no repeat then."""
    budget = getattr(request.state, "budget", None)
    return budget is not None and budget.reason is not None


class RetryingRoute(APIRoute):
    """An ``APIRoute`` whose handler runs again after a repeatable transient metastore failure (the
    body, already read into the request, is parsed again from memory). The service's state counts each
    repeat (``observe_retry``)."""

    policy = RetryPolicy()

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.path in NOT_REPEATED:
            return handler
        policy = self.policy

        async def handle(request: Request) -> Response:
            service = getattr(request.app.state, "service", None)
            return await repeat(
                functools.partial(handler, request),
                getattr(service, "observe_retry", _ignore),
                read_only=request.method in _READS,
                policy=policy,
                what=f"request {getattr(request.state, 'request_id', '-')}",
                stop=functools.partial(_spent, request),
            )

        return handle
