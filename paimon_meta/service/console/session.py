"""The console's session: the bearer token itself in a cookie, and a CSRF token derived from it.

The cookie holds the token the operator signed in with (a static ``pmt_`` token or an OIDC access
token), so any replica serves any session and the token is checked on every request exactly as an
``Authorization`` header is (``service.app``'s middleware): revoking the token or a grant ends or
narrows the session at once (within the auth cache's seconds). The cookie is ``HttpOnly`` (no script
reads it), ``SameSite=Strict`` (no other site's page sends it) and ``Secure`` when the request came over
TLS.

Every console action (a POST) must carry ``csrf_token`` = HMAC-SHA256 keyed with the session's token
over a fixed label: stateless (works on any replica), unguessable without the token, and different for
every token. When the browser sends ``Origin``, it must be this service's own.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

from starlette.datastructures import Headers

#: Everything of the console is under this path.
PREFIX = "/ui"
LOGIN = f"{PREFIX}/login"
LOGOUT = f"{PREFIX}/logout"
STATIC = f"{PREFIX}/static"
#: The live view's stream (a change-feed stream: service.streams).
LIVE_EVENTS = f"{PREFIX}/live/events"
COOKIE = "paimon_meta_console"
#: The session lasts at most this long in the browser (the token's own expiry still applies).
COOKIE_MAX_AGE = 8 * 3600
_CSRF_LABEL = b"paimon-meta console csrf v1"


def is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(f"{PREFIX}/")


def is_public(path: str) -> bool:
    """Console paths answered without a valid session: the sign-in form, signing out (it only clears
    the cookie, which may hold a token revoked meanwhile), the stylesheet and scripts (no data)."""
    return path in (LOGIN, LOGOUT) or path.startswith(f"{STATIC}/")


def cookie_token(headers: Headers) -> str | None:
    """The session's token from the request's cookies, else None."""
    raw = headers.get("cookie")
    if not raw:
        return None
    for part in raw.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name == COOKIE and value:
            return value
    return None


_COOKIE_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")


def cookie_safe(token: str) -> bool:
    """Whether ``token`` can be a cookie's value as it is (static tokens and JWTs are)."""
    return 0 < len(token) <= 4096 and all(c in _COOKIE_SAFE for c in token)


def csrf_token(token: str) -> str:
    """The CSRF token of the session holding ``token`` (module docstring)."""
    return hmac.new(token.encode("utf-8"), _CSRF_LABEL, hashlib.sha256).hexdigest()


def csrf_valid(token: str, presented: str | None) -> bool:
    return bool(presented) and hmac.compare_digest(csrf_token(token), presented or "")


def same_origin(headers: Headers, scheme: str) -> bool:
    """No ``Origin`` header (a same-origin form POST of some browsers, or not a browser), or one naming
    this host (the ``Host`` the request was sent to) with the request's scheme."""
    origin = headers.get("origin")
    if origin is None:
        return True
    if origin == "null":
        return False
    parts = urlsplit(origin)
    return parts.scheme == scheme and parts.netloc == headers.get("host", "")


def cookie_header(token: str, *, secure: bool) -> str:
    """The ``Set-Cookie`` value that opens a session holding ``token``."""
    flags = f"Path={PREFIX}; Max-Age={COOKIE_MAX_AGE}; HttpOnly; SameSite=Strict"
    return f"{COOKIE}={token}; {flags}{'; Secure' if secure else ''}"


#: The console's catalog switcher: the catalog the console's pages are of (absent, or a name that is no
#: catalog of the service: the default catalog). Not a credential: the grants are checked in it as anywhere.
CATALOG_COOKIE = "paimon_meta_catalog"


def console_catalog(path: str, cookies: dict[str, str]) -> str | None:
    """The catalog a console request is of, by its switcher cookie (None: the default catalog)."""
    if not is_console(path):
        return None
    name = cookies.get(CATALOG_COOKIE)
    return name or None


def catalog_cookie_header(name: str, *, secure: bool) -> str:
    """The ``Set-Cookie`` value that switches the console to catalog ``name`` (a validated identifier)."""
    flags = f"Path={PREFIX}; Max-Age={COOKIE_MAX_AGE}; HttpOnly; SameSite=Strict"
    return f"{CATALOG_COOKIE}={name}; {flags}{'; Secure' if secure else ''}"


def clear_cookie_header(*, secure: bool) -> str:
    return f"{COOKIE}=; Path={PREFIX}; Max-Age=0; HttpOnly; SameSite=Strict{'; Secure' if secure else ''}"
