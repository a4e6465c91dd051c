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


def split_identifier(identifier: str) -> tuple[str, str]:
    """``"db.table"`` -> ``("db", "table")``, both validated."""
    parts = identifier.split(".")
    if len(parts) != 2:
        raise ValidationError(
            f"table identifier must be '<database>.<table>', got {identifier!r}", identifier=identifier
        )
    return validate_identifier("database", parts[0]), validate_identifier("table", parts[1])
