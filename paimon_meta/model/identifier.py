"""Database and table names: the names we accept (``IDENTIFIER_PATTERN``) and ``"db.table"`` identifiers.
Pure checks, shared by the metastore, the catalogs (the REST client too) and the service."""

from __future__ import annotations

import re

from paimon_meta.errors import ValidationError

#: Database and table names (and catalog keys) we accept.
IDENTIFIER_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,127}")


def validate_identifier(kind: str, name: str) -> str:
    """Return ``name`` if it is a valid ``kind`` identifier (``database``, ``table``, ...).

    Raises:
        ValidationError: naming the identifier and the rule.
    """
    # fullmatch: with match() and a '$' anchor, "t\n" would pass (a name with a newline).
    if not isinstance(name, str) or not IDENTIFIER_PATTERN.fullmatch(name):
        raise ValidationError(
            f"invalid {kind} name {name!r}: must match {IDENTIFIER_PATTERN.pattern}",
            kind=kind,
            identifier=name,
        )
    return name


#: A function's name: Paimon's ``RESTFunctionValidator`` (and pypaimon's ``_FUNCTION_NAME_PATTERN``)
#: accept letters, digits, ``.``, ``_`` and ``-`` with at least one letter (``ns.fn`` is a valid name);
#: bounded here as other names are.
FUNCTION_NAME_PATTERN = re.compile(r"(?=[A-Za-z0-9._\-]*[A-Za-z])[A-Za-z0-9._\-]{1,128}")


def validate_function_name(name: str) -> str:
    """Return ``name`` if it is a valid function name (see :data:`FUNCTION_NAME_PATTERN`).

    Raises:
        ValidationError: naming the function and the rule.
    """
    if not isinstance(name, str) or not FUNCTION_NAME_PATTERN.fullmatch(name):
        raise ValidationError(
            f"invalid function name {name!r}: must match {FUNCTION_NAME_PATTERN.pattern}",
            kind="function",
            identifier=name,
        )
    return name


def split_identifier(identifier: str) -> tuple[str, str]:
    """``"db.table"`` -> ``("db", "table")``, both validated."""
    parts = identifier.split(".")
    if len(parts) != 2:
        raise ValidationError(
            f"table identifier must be '<database>.<table>', got {identifier!r}", identifier=identifier
        )
    return validate_identifier("database", parts[0]), validate_identifier("table", parts[1])
