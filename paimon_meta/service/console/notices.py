"""What a console page says after an action or sign-out (``?done=<code>``): a fixed message per code,
never text from the query string (a link could otherwise make the genuine page say whatever its sender
wants: a phishing aid). An unknown code says nothing; ``n``, digits only, is the one number a message
may name (a snapshot id, a count)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

DONE = "done"
NUMBER = "n"
#: Code -> message (``{n}``: the ``n`` parameter; a message that names it is shown only with one).
MESSAGES: Mapping[str, str] = {
    "lock-released": "Lock released.",
    "recovered": "Recovery ran: {n} pending commits resolved.",
    "expired": "Expiration ran: {n} snapshots expired.",
    "orphans-removed": "Orphan cleanup ran: {n} files deleted.",
    "tag-created": "Tag created on snapshot {n}.",
    "tag-deleted": "Tag deleted.",
    "rolled-back": "Rolled back to snapshot {n}.",
    "signed-out": "Signed out.",
    "table-undropped": "Table restored from the recycle bin.",
    "database-undropped": "Database restored from the recycle bin with {n} tables.",
    "permission-granted": "Permission granted.",
    "permission-revoked": "Permission revoked (if it was held).",
    "policy-created": "Policy created.",
    "policy-dropped": "Policy dropped.",
}
_MAX_DIGITS = 19


def message(query: Mapping[str, str]) -> str | None:
    """The message ``query``'s ``done`` code names, or None (no code, an unknown one, or a message
    naming a number without a valid ``n``)."""
    template = MESSAGES.get(query.get(DONE, ""))
    if template is None:
        return None
    if "{n}" not in template:
        return template
    n = query.get(NUMBER, "")
    if not (n.isascii() and n.isdigit() and len(n) <= _MAX_DIGITS):
        return None
    return template.format(n=int(n))


def url(path: str, code: str, n: int | None = None) -> str:
    """``path`` with the query that makes it say ``code``'s message."""
    if code not in MESSAGES:
        raise ValueError(f"unknown console notice {code!r}")
    query = {DONE: code} if n is None else {DONE: code, NUMBER: str(n)}
    return f"{path}?{urlencode(query)}"
