"""What the view and function routes share: page sizes and tokens, which databases a caller's grants let
it read (the filter of a catalog-wide listing, applied in the query so pages stay full), and the
protocol's bodies built from the catalog's rows. No IO here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from paimon_meta.errors import ValidationError
from paimon_meta.governance.permissions import Access as A
from paimon_meta.governance.permissions import Resource
from paimon_meta.metastore.catalog_objects import Audit, FunctionRow, ViewRow
from paimon_meta.metastore.principals import Access, utc_now
from paimon_meta.model.catalog_objects import params_json
from paimon_meta.model.identifier import validate_function_name, validate_identifier
from paimon_meta.rest import models
from paimon_meta.service import convert

#: A page's size when the caller names none (pypaimon's unpaged listings follow ``nextPageToken``).
DEFAULT_PAGE = 100

Item = TypeVar("Item")


def limit_of(max_results: int | None) -> int:
    """``maxResults`` checked (1..``convert.MAX_PAGE``), or the default page size."""
    limit = DEFAULT_PAGE if max_results is None else max_results
    if not 0 < limit <= convert.MAX_PAGE:
        raise ValidationError(f"maxResults must be between 1 and {convert.MAX_PAGE}", field="maxResults")
    return limit


def _token_name(value: str) -> str:
    """A page token's name: an identifier, or a function's name (which may hold ``.``)."""
    try:
        return validate_identifier("name", value)
    except ValidationError:
        pass
    try:
        return validate_function_name(value)
    except ValidationError:
        raise ValidationError("pageToken is not one this server issued", field="pageToken") from None


def after_in(database: str, page_token: str | None) -> tuple[str, str] | None:
    """Where a database's listing resumes: its page token is the last name of the previous page."""
    return None if not page_token else (database, _token_name(page_token))


def after_globally(page_token: str | None) -> tuple[str, str] | None:
    """Where a catalog-wide listing resumes: its page token is the last ``database.name`` listed."""
    if not page_token:
        return None
    database, sep, name = page_token.partition(".")
    if not sep:
        raise ValidationError("pageToken is not one this server issued", field="pageToken")
    return _token_name(database), _token_name(name)


def readable_databases(access: Access) -> set[str] | None:
    """The databases whose views and functions ``access`` may list: None for all of them (``SELECT`` on
    the ``CATALOG_ALL`` scope: a catalog-wide reader), else those it may ``LIST`` (an assignment on one
    table reaches no view)."""
    now = utc_now()
    if access.may(A.SELECT, Resource.catalog_all(), at=now):
        return None
    named = {a.resource.database for a in access.assignments if a.resource.database is not None}
    return {d for d in named if access.may(A.LIST, Resource.of_database(d), at=now)}


def page(
    fetch: Callable[[int], tuple[Sequence[Item], bool]], limit: int, token: Callable[[Item], str]
) -> tuple[list[Item], str | None]:
    """A page of at most ``limit`` items and its next token (null on the last page), from ``fetch(n)``
    answering up to ``n`` items in order and whether more follow (it may stop sooner: its byte
    budget)."""
    items, more = fetch(limit)
    return list(items), token(items[-1]) if more and items else None


class Named(Protocol):
    """A view's or a function's row, as the listings page it."""

    @property
    def name(self) -> str: ...
    @property
    def identifier(self) -> str: ...


Row = TypeVar("Row", bound=Named)


def database_page(
    page_rows: Callable[..., tuple[list[Row], bool]],
    database: str,
    max_results: int | None,
    page_token: str | None,
    pattern: str | None,
) -> tuple[list[Row], str | None]:
    """A page of ``database``'s objects by name (``page_rows``: ``page_views`` or ``page_functions`` of
    the catalog's objects), resumed after the previous page's last name; at most about
    ``convert.PAGE_BYTES`` of definitions."""
    validate_identifier("database", database)
    after = after_in(database, page_token)
    return page(
        lambda n: page_rows(
            database=database, name_pattern=pattern, after=after, limit=n, budget=convert.PAGE_BYTES
        ),
        limit_of(max_results),
        lambda row: row.name,
    )


def global_page(
    page_rows: Callable[..., tuple[list[Row], bool]],
    access: Access,
    max_results: int | None,
    page_token: str | None,
    *,
    database_pattern: str | None,
    pattern: str | None,
) -> tuple[list[Row], str | None]:
    """A page of the objects of every database ``access`` may read, by database then name, resumed
    after the previous page's last ``database.name``; at most about ``convert.PAGE_BYTES`` of
    definitions."""
    after = after_globally(page_token)
    databases = readable_databases(access)
    return page(
        lambda n: page_rows(
            database_pattern=database_pattern,
            name_pattern=pattern,
            databases=databases,
            after=after,
            limit=n,
            budget=convert.PAGE_BYTES,
        ),
        limit_of(max_results),
        lambda row: row.identifier,
    )


def _audit(audit: Audit) -> dict[str, Any]:
    return {
        "owner": audit.created_by or convert.SERVICE_OWNER,
        "created_at": convert.millis(audit.created_at),
        "created_by": audit.created_by or convert.SERVICE_OWNER,
        "updated_at": convert.millis(audit.updated_at),
        "updated_by": audit.updated_by or convert.SERVICE_OWNER,
    }


def view_response(row: ViewRow) -> models.GetViewResponse:
    """``GetViewResponse``; ``id`` is the view's uuid (``view-<n>`` for a view Java inserted)."""
    schema = row.schema.to_json()
    return models.GetViewResponse(
        id=str(row.view_uuid) if row.view_uuid is not None else f"view-{row.view_id}",
        name=row.name,
        schema=models.ViewSchemaBody(**schema),
        **_audit(row.audit),
    )


def function_response(row: FunctionRow) -> models.GetFunctionResponse:
    spec = row.spec
    return models.GetFunctionResponse(
        uuid=str(row.function_uuid),
        name=row.name,
        input_params=params_json(spec.input_params),
        return_params=params_json(spec.return_params),
        deterministic=spec.deterministic,
        definitions={k: dict(v) for k, v in spec.definitions.items()},
        comment=spec.comment,
        options=dict(spec.options),
        **_audit(row.audit),
    )
