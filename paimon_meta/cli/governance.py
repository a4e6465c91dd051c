"""``paimon-meta permissions ...`` and ``paimon-meta policies ...``: Paimon's permission assignments and a
table's data policies (row filters, column masks) in the metastore, as the management API keeps them
(docs/GOVERNANCE.md). Every change needs ``--reason`` and is recorded with the operator and the reason in
the governance event log.

``--catalog NAME`` (global) names the metastore catalog; without it, permissions are the service's default
catalog's (rows naming no catalog, as ``principals grant`` writes them) and policies are the catalog
``--warehouse`` opens. ``permissions create-role`` / ``add-member`` / ``remove-member`` manage roles
(``role:NAME``) whose assignments and policies apply to their members.
"""

from __future__ import annotations

import argparse
from typing import Any

from paimon_meta.cli.args import Commands
from paimon_meta.cli.context import Context, Output
from paimon_meta.governance.permissions import (
    Assignment,
    ColumnRange,
    Resource,
    ResourceType,
    format_instant,
    parse_access,
    parse_instant,
    parse_resource_type,
)


def register(commands: Commands) -> None:
    pm = commands.group("permissions", "Paimon permission assignments (resource, access, principal)")
    for action, handler, text in (
        ("grant", _grant, "grant (or replace) one access on one resource to a principal"),
        ("revoke", _revoke, "revoke one assignment (nothing to revoke is not an error)"),
    ):
        p = pm.action(action, handler, text)
        p.add_argument("principal", help="alice, user:<sub>, group:NAME or role:NAME")
        p.add_argument("access", help="SELECT, UPDATE, ALTER, DROP, GRANT, ALL, ... (case-insensitive)")
        _resource_arguments(p)
        if action == "grant":
            cols = p.add_mutually_exclusive_group()
            cols.add_argument("--columns", metavar="A,B", help="COLUMN: the allowlist")
            cols.add_argument("--excluded-columns", metavar="A,B", help="COLUMN: the denylist")
            p.add_argument("--expire-time", metavar="INSTANT", help="2027-01-01T00:00:00Z (exclusive)")
        p.add_argument("--reason", required=True, help="why (recorded in the governance event log)")
    p = pm.action("list", _list, "the assignments on one exact resource, or of one principal")
    _resource_arguments(p, required=False)
    p.add_argument("--principal", help="only this principal's (alone: every assignment it holds itself)")
    p.add_argument("--access", help="only this access")
    p.add_argument("--max-results", type=int, default=None, help="page size (1..1000; default 100)")
    p.add_argument("--page-token", help="the next page (as the previous page printed)")
    p = pm.action("create-role", _create_role, "create principal role:NAME (no token; holds assignments)")
    p.add_argument("name", help="the role's name (after role:)")
    p.add_argument("--reason", required=True, help="why (recorded in the governance event log)")
    for action, handler, text in (
        ("add-member", _add_member, "make a principal a member of a role or group"),
        ("remove-member", _remove_member, "remove a principal from a role or group"),
    ):
        p = pm.action(action, handler, text)
        p.add_argument("group", help="role:NAME or group:NAME")
        p.add_argument("member", help="the principal")
        p.add_argument("--reason", required=True, help="why (recorded in the governance event log)")

    po = commands.group("policies", "a table's row filters and column masks")
    p = po.action("create", _create_policy, "create a row filter or a column mask for a principal")
    p.add_argument("table", metavar="DB.T", help="the table (with query-auth.enabled=true)")
    p.add_argument("principal", help="alice, user:<sub>, group:NAME or role:NAME")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--row-filter", metavar="PREDICATE_JSON", help="Paimon's predicate JSON")
    kind.add_argument("--mask", metavar="TRANSFORM_JSON", help="Paimon's transform JSON (with --column)")
    p.add_argument("--column", help="the masked column (with --mask)")
    p.add_argument("--reason", required=True, help="why (recorded in the governance event log)")
    p = po.action("drop", _drop_policy, "drop a principal's row filter (or its mask on --column)")
    p.add_argument("table", metavar="DB.T", help="the table")
    p.add_argument("principal", help="whose policy")
    p.add_argument("--column", help="drop the mask on this column (default: the row filter)")
    p.add_argument("--reason", required=True, help="why (recorded in the governance event log)")
    p = po.action("list", _list_policies, "a table's policies")
    p.add_argument("table", metavar="DB.T", help="the table")
    p.add_argument("--principal", help="only this principal's")
    p.add_argument("--type", choices=["ROW_FILTER", "COLUMN_MASKING"], help="only row filters or masks")


def _resource_arguments(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    p.add_argument(
        "--resource-type",
        required=required,
        choices=[t.value for t in ResourceType],
        type=str.upper,
        help="CATALOG, CATALOG_ALL, DATABASE, DATABASE_ALL, TABLE, COLUMN, VIEW or FUNCTION",
    )
    p.add_argument("--database", metavar="DB", help="the database (every type but CATALOG, CATALOG_ALL)")
    obj = p.add_mutually_exclusive_group()
    obj.add_argument("--table", metavar="T", help="the table (TABLE, COLUMN)")
    obj.add_argument("--view", metavar="V", help="the view (VIEW)")
    obj.add_argument("--function", metavar="F", help="the function (FUNCTION)")


def _resource(args: argparse.Namespace) -> Resource:
    resource_type = parse_resource_type(args.resource_type)
    name = args.table or args.view or args.function
    return Resource(resource_type, args.database, name)


def _store(ctx: Context) -> Any:
    """The assignments of the ``--catalog`` catalog, else of the default catalog (its rows naming none)."""
    from paimon_meta.metastore.assignments import Assignments

    engine = ctx.engine()
    name = ctx.catalog_name()
    if name is None:
        return Assignments(engine, catalog_key=None)
    from paimon_meta.metastore.catalogs import Catalogs

    return Assignments(engine, catalog_key=Catalogs(engine).get(name).catalog_key, default=False)


def _split(text: str | None) -> list[str] | None:
    return None if text is None else [c.strip() for c in text.split(",") if c.strip()]


def _describe(a: Assignment) -> str:
    text = f"{a.access.value} on {a.resource} to {a.principal}"
    if a.columns is not None:
        text += f" columns {_columns_text(a.columns)}"
    if a.expire_time is not None:
        text += f" until {format_instant(a.expire_time)}"
    return text


def _columns_text(columns: ColumnRange) -> str:
    if columns.allowed is not None:
        return ",".join(sorted(columns.allowed))
    return "all but " + ",".join(sorted(columns.denied))


def _assignment_data(a: Assignment) -> dict[str, Any]:
    from paimon_meta.rest.management import assignment_body

    data: dict[str, Any] = assignment_body(a).model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def _grant(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    resource = _resource(args)
    columns = None
    if args.columns is not None:
        columns = ColumnRange.allowlist(_split(args.columns) or [])
    elif args.excluded_columns is not None:
        columns = ColumnRange.denylist(_split(args.excluded_columns) or [])
    assignment = Assignment(
        args.principal,
        resource,
        parse_access(args.access, resource.type),
        columns,
        None if args.expire_time is None else parse_instant(args.expire_time),
    )
    store = _store(ctx)
    new = store.grant(
        assignment,
        granted_by=operator_identity(),
        reason=args.reason,
        must_exist=store.catalog_key is not None,
    )
    text = ("granted " if new else "replaced ") + _describe(assignment)
    return Output({**_assignment_data(assignment), "new": new}, text)


def _revoke(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    resource = _resource(args)
    access = parse_access(args.access, resource.type)
    store = _store(ctx)
    done = store.revoke(
        resource,
        access,
        args.principal,
        revoked_by=operator_identity(),
        reason=args.reason,
        must_exist=store.catalog_key is not None,
    )
    what = f"{access.value} on {resource} from {args.principal}"
    return Output(
        {"principal": args.principal, "resource": str(resource), "access": access.value, "revoked": done},
        f"revoked {what}" if done else f"no assignment {what}",
    )


def _list(ctx: Context, args: argparse.Namespace) -> Output:
    store = _store(ctx)
    token = None
    if args.resource_type is None:
        if args.principal is None:
            from paimon_meta.errors import ValidationError

            raise ValidationError(
                "give --resource-type (and its locators) or --principal", field="--principal"
            )
        rows = store.of_principal(args.principal)
    else:
        resource = _resource(args)
        rows, token = store.list_page(
            resource,
            principal=args.principal,
            access=None if args.access is None else parse_access(args.access, resource.type),
            page_token=args.page_token,
            max_results=args.max_results,
        )
    data = [{**_assignment_data(s.assignment), "grantedBy": s.granted_by, "reason": s.reason} for s in rows]
    lines = [f"{_describe(s.assignment)}  (by {s.granted_by or '-'}: {s.reason or '-'})" for s in rows]
    if token is not None:
        lines.append(f"next page: --page-token {token}")
    return Output({"permissions": data, "nextPageToken": token}, "\n".join(lines) or "(no assignments)")


def _create_role(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    role = _store(ctx).create_role(args.name, created_by=operator_identity(), reason=args.reason)
    return Output({"principal": role}, f"role {role} created")


def _add_member(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    new = _store(ctx).add_member(args.group, args.member, added_by=operator_identity(), reason=args.reason)
    return Output({"group": args.group, "member": args.member, "new": new}, f"{args.member} in {args.group}")


def _remove_member(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.ops.common import operator_identity

    done = _store(ctx).remove_member(
        args.group, args.member, removed_by=operator_identity(), reason=args.reason
    )
    text = f"{args.member} removed from {args.group}" if done else f"{args.member} was not in {args.group}"
    return Output({"group": args.group, "member": args.member, "removed": done}, text)


def _policies(ctx: Context, identifier: str) -> tuple[Any, Any, Any]:
    """(the store, the table's row, its latest schema) of the catalog ``--catalog``/``--warehouse`` opens."""
    from paimon_meta.metastore.assignments import Policies

    catalog = ctx.catalog()
    row, schema, _ = catalog.table_metadata(identifier)
    return Policies(catalog.engine, catalog_key=catalog.registry.catalog_key), row, schema


def _create_policy(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.errors import ValidationError
    from paimon_meta.metastore.assignments import COLUMN_MASKING, ROW_FILTER, checked_policy
    from paimon_meta.ops.common import operator_identity

    if (args.mask is None) != (args.column is None):
        raise ValidationError("--mask needs --column (and --column is only for --mask)", field="--column")
    store, row, schema = _policies(ctx, args.table)
    policy_type = ROW_FILTER if args.row_filter is not None else COLUMN_MASKING
    rule = args.row_filter if args.row_filter is not None else args.mask
    body = checked_policy(
        schema,
        args.table,
        store.of_table(row.table_id),
        principal=args.principal,
        policy_type=policy_type,
        column=args.column,
        rule=rule,
    )
    store.create(
        row.table_id,
        args.table,
        args.principal,
        policy_type=policy_type,
        on_column=args.column,
        body=body,
        created_by=operator_identity(),
        reason=args.reason,
    )
    what = "row filter" if args.column is None else f"mask on {args.column}"
    return Output(
        {
            "table": args.table,
            "principal": args.principal,
            "type": policy_type,
            "column": args.column,
            "body": body,
        },
        f"{what} of {args.principal} on {args.table} created",
    )


def _drop_policy(ctx: Context, args: argparse.Namespace) -> Output:
    from paimon_meta.metastore.assignments import COLUMN_MASKING, ROW_FILTER
    from paimon_meta.ops.common import operator_identity

    store, row, _ = _policies(ctx, args.table)
    policy_type = ROW_FILTER if args.column is None else COLUMN_MASKING
    store.drop(
        row.table_id,
        args.table,
        policy_type,
        args.principal,
        args.column,
        dropped_by=operator_identity(),
        reason=args.reason,
    )
    what = "row filter" if args.column is None else f"mask on {args.column}"
    return Output(
        {"table": args.table, "principal": args.principal, "type": policy_type, "column": args.column},
        f"{what} of {args.principal} on {args.table} dropped",
    )


def _list_policies(ctx: Context, args: argparse.Namespace) -> Output:
    store, row, _ = _policies(ctx, args.table)
    policies = [
        p
        for p in store.of_table(row.table_id)
        if (args.principal is None or p.principal == args.principal)
        and (args.type is None or p.policy_type == args.type)
    ]
    data = [
        {
            "principal": p.principal,
            "type": p.policy_type,
            "column": p.on_column,
            "body": p.body,
            "createdBy": p.created_by,
            "reason": p.reason,
        }
        for p in policies
    ]
    lines = [
        f"{p.principal:<20} {p.policy_type:<15} {p.on_column or '-':<12} {p.body}  ({p.created_by or '-'}: "
        f"{p.reason or '-'})"
        for p in policies
    ]
    return Output(data, "\n".join(lines) or "(no policies)")
