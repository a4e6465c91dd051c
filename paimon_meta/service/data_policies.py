"""What restricts a principal's reads of one table (its row filters, column masks and column range),
looked up once here for every route that needs it: ``/auth`` itself (answered from :meth:`read_rules`),
the data token (``GET .../token``), which
must not hand raw file access to a principal whose reads are filtered or masked, unless an operator
marked it a trusted engine (``serve --trusted-engines``), one that applies the policies itself; and the
console's table preview, which reads as that principal (the same ``QueryRules`` every reader applies).

:func:`table_policies` is the FastAPI dependency the routes ask; it answers from the catalog's stored
policies and column assignments (``paimon_policies``, ``paimon_assignments``; migration 0022): those of
the principal, its groups and its roles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from fastapi import Request

from paimon_meta.errors import QueryNotAllowedError
from paimon_meta.governance.evaluate import column_range
from paimon_meta.governance.permissions import ColumnRange, Resource, ResourceType
from paimon_meta.governance.policies import QueryRules
from paimon_meta.metastore.assignments import Assignments, Policies, StoredPolicy, SubjectAssignments
from paimon_meta.metastore.principals import Access
from paimon_meta.model.schema import TableSchema
from paimon_meta.service.deps import served_of, state_of
from paimon_meta.service.tenancy.served import ServedCatalog
from paimon_meta.table.read.query_auth import QueryAuth


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

    def read_rules(self, access: Access, identifier: str) -> ReadRules:
        """The row filters, column masks and column range of ``access``'s reads of ``identifier``."""
        ...


@dataclass(frozen=True, slots=True)
class ReadRules:
    """A principal's policies on one table, as the service's own reads (the console's preview) apply
    them: ``filters`` and ``masks`` as ``/auth`` answers them (JSON texts), ``columns`` its range."""

    filters: tuple[str, ...] = ()
    masks: tuple[tuple[str, str], ...] = ()
    columns: ColumnRange = field(default_factory=ColumnRange)

    def readable(self, schema: TableSchema) -> list[str] | None:
        """The columns of ``schema`` the range admits (None: every one)."""
        if self.columns.is_full:
            return None
        return [f.name for f in schema.fields if self.columns.permits(f.name)]

    def query_auth(self, identifier: str) -> QueryAuth:
        """What a read of the table through the service applies (``FileStoreTable.query_auth``): these
        rules bound to the read's schema; a selection outside the range is refused as ``/auth`` refuses
        it (:class:`~paimon_meta.errors.QueryNotAllowedError`)."""

        def rules(schema: TableSchema, select: Sequence[str] | None) -> QueryRules:
            wanted = [f.name for f in schema.fields] if select is None else list(select)
            refused = self.columns.refused(wanted)
            if refused:
                raise QueryNotAllowedError(
                    f"columns {refused} of {identifier} are outside the principal's column range",
                    table=identifier,
                    columns=refused,
                )
            return QueryRules.combine(self.filters, self.masks, schema.fields)

        return rules


@dataclass(frozen=True, slots=True)
class StoredPolicies:
    """The policies one catalog keeps (``paimon_policies``) and its principals' column assignments
    (``paimon_assignments``): what applies to a principal is its own, its groups' and its roles'."""

    served: ServedCatalog

    def _lookup(
        self, access: Access, identifier: str
    ) -> tuple[SubjectAssignments, list[StoredPolicy], Resource]:
        """The caller's subject with its assignments, the table's policies that apply to it, the table."""
        catalog = self.served.catalog
        row = catalog.table_row(identifier)
        store = Assignments(catalog.engine, catalog_key=self.served.key, default=self.served.default)
        held = store.of_subject(access.principal, access.groups)
        policies = Policies(catalog.engine, catalog_key=self.served.key).of_subject(
            row.table_id, held.subject
        )
        return held, policies, Resource(ResourceType.TABLE, row.database, row.name)

    def restrictions(self, access: Access, identifier: str) -> Sequence[Restriction]:
        held, policies, table = self._lookup(access, identifier)
        out = [Restriction(p.policy_type, p.principal, p.on_column) for p in policies]
        now = datetime.now(UTC)
        for a in held.assignments:
            if a.columns is not None and not column_range([a], held.subject, table, now).is_full:
                out.append(Restriction("COLUMN", a.principal))
        return out

    def read_rules(self, access: Access, identifier: str) -> ReadRules:
        held, policies, table = self._lookup(access, identifier)
        return ReadRules(
            tuple(p.body for p in policies if p.on_column is None),
            tuple((p.on_column, p.body) for p in policies if p.on_column is not None),
            column_range(held.assignments, held.subject, table, datetime.now(UTC)),
        )


def table_policies(request: Request) -> TablePolicies:
    """The policies of the request's catalog (a FastAPI dependency; tests may override it)."""
    return StoredPolicies(served_of(request))


def is_trusted_engine(request: Request, access: Access) -> bool:
    """Whether the operator marked ``access``'s principal itself (not a group of it: trust is given to
    one engine, never to whoever joins a group) a trusted engine."""
    return access.principal in state_of(request).settings.trusted_engines
