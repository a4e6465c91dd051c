"""The names of principals the identity provider signs in, of groups and of roles: what one may be
(shared by ``principals`` and ``assignments``, which import nothing of each other's the other way)."""

from __future__ import annotations

from paimon_meta.errors import ValidationError

#: Longest claim value or group name taken after its prefix (the name column holds 255 characters).
MAX_EXTERNAL_NAME = 200


def external_name(kind: str, value: object) -> str:
    """``value`` if it can name a signed-in user or a group: a string of 1 to ``MAX_EXTERNAL_NAME``
    printable characters (no control or format characters, no line breaks) without leading or
    trailing blanks.

    Raises:
        ValidationError: naming ``kind`` and the rule.
    """
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_EXTERNAL_NAME
        or not value.isprintable()
        or value != value.strip()
    ):
        raise ValidationError(
            f"invalid {kind} name: must be 1 to {MAX_EXTERNAL_NAME} printable characters without "
            "leading or trailing blanks",
            kind=kind,
        )
    return value
