"""Both catalogs satisfy the ``Catalog`` protocol: checked by mypy (the functions below) and at run time
(names, parameter kinds and defaults, which mypy does not compare)."""

from __future__ import annotations

import inspect

import pytest

from paimon_meta.catalog.base import Catalog
from paimon_meta.catalog.metastore import MetastoreCatalog
from paimon_meta.catalog.rest import RestCatalog

IMPLEMENTATIONS = [MetastoreCatalog, RestCatalog]


# mypy fails here if an implementation's method drifts from the protocol's signature (a parameter renamed,
# retyped or dropped, a return type changed) or a protocol method is missing.
def _metastore_catalog_is_a_catalog(catalog: MetastoreCatalog) -> Catalog:
    return catalog


def _rest_catalog_is_a_catalog(catalog: RestCatalog) -> Catalog:
    return catalog


def _members() -> list[str]:
    return sorted(
        name
        for name, value in vars(Catalog).items()
        if callable(value) and (not name.startswith("_") or name in ("__enter__", "__exit__"))
    )


def test_the_protocol_names_the_common_operations() -> None:
    assert _members() == [
        "__enter__",
        "__exit__",
        "close",
        "create_database",
        "create_table",
        "drop_table",
        "get_table",
        "list_databases",
        "list_tables",
    ]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", _members())
def test_implementation_has_the_protocol_signature(implementation: type, name: str) -> None:
    """Every parameter of the protocol's method, with its kind and default; any other parameter of the
    implementation is optional (``MetastoreCatalog.drop_table``'s ``purge``)."""
    expected = inspect.signature(getattr(Catalog, name)).parameters
    actual = inspect.signature(getattr(implementation, name)).parameters
    for param in expected.values():
        assert param.name in actual, f"{implementation.__name__}.{name} lacks {param.name!r}"
        got = actual[param.name]
        assert got.kind == param.kind, f"{implementation.__name__}.{name}({param.name}): {got.kind}"
        assert got.default == param.default, f"{implementation.__name__}.{name}({param.name}): {got.default}"
    for extra in actual.keys() - expected.keys():
        param = actual[extra]
        assert param.default is not inspect.Parameter.empty or param.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ), f"{implementation.__name__}.{name} requires {extra!r}, which the protocol does not pass"


def test_implementations_are_catalogs_at_run_time() -> None:
    assert all(issubclass(implementation, Catalog) for implementation in IMPLEMENTATIONS)
