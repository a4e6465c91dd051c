"""What restricts a principal's reads of one table (its row filters, column masks and column range), as
the service's other checks need it besides ``/auth`` itself: the data token (``GET .../token``), which
must not hand raw file access to a principal whose reads are filtered or masked, unless an operator
marked it a trusted engine (``serve --trusted-engines``), one that applies the policies itself.

:func:`table_policies` is the FastAPI dependency the routes ask; it answers from the catalog's stored
policies and column assignments (issue 36, phase B: ``paimon_policies`` and ``paimon_assignments``).
Until a catalog keeps any, nothing restricts anyone and the answer is empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fastapi import Request

from paimon_meta.metastore.principals import Access
from paimon_meta.service.deps import state_of


@dataclass(frozen=True, slots=True)
class Restriction:
    """One policy restricting a principal's reads of a table: ``kind`` ``ROW_FILTER``,
    ``COLUMN_MASKING`` (``column`` set) or ``COLUMN`` (a column range); ``principal``: whose policy it
    is (the principal itself, a group or a role it is a member of)."""

    kind: str
    principal: str
    column: str | None = None

    def describe(self) -> str:
        if self.kind == "COLUMN_MASKING":
            return f"a column mask on {self.column!r} (of {self.principal})"
        if self.kind == "ROW_FILTER":
            return f"a row filter (of {self.principal})"
        return f"a column range (of {self.principal})"


class TablePolicies(Protocol):
    def restrictions(self, access: Access, identifier: str) -> Sequence[Restriction]:
        """The policies that restrict ``access``'s principal's reads of table ``identifier``."""
        ...


class NoStoredPolicies:
    """A catalog that keeps no policies and no column assignments: nothing restricts a read."""

    def restrictions(self, access: Access, identifier: str) -> Sequence[Restriction]:
        return ()


def table_policies(request: Request) -> TablePolicies:
    """The request's catalog's policies (a FastAPI dependency; tests may override it)."""
    return NoStoredPolicies()


def is_trusted_engine(request: Request, access: Access) -> bool:
    """Whether the operator marked ``access``'s principal itself (not a group of it: trust is given to
    one engine, never to whoever joins a group) a trusted engine."""
    return access.principal in state_of(request).settings.trusted_engines
