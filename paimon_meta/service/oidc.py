"""Bearer JWTs from an OpenID Connect identity provider (``serve --oidc-issuer URL --oidc-audience A``).

A bearer token that is not one of our static tokens (those start with ``pmt_``; the two paths never
meet) is verified as a JWT (PyJWT) before anything is written:

1. its header names an allowed algorithm (``algorithms``: asymmetric only; never ``none`` nor an HMAC,
   whose secret could be the public key everyone can read) and a key id (``kid``);
2. the key with that id is taken from the issuer's JWKS (:class:`JwksKeys`: ``jwks_url``, else the
   ``jwks_uri`` of ``{issuer}/.well-known/openid-configuration``), and the header's algorithm must be
   the key's own;
3. the signature, ``iss`` (exactly ``issuer``), ``aud`` (``audience`` among them), ``exp``, ``nbf`` and
   ``iat`` (each within ``leeway_seconds`` of our clock) are checked; ``exp``, ``iat``, ``iss``,
   ``aud`` and the principal claim must be present;
4. the principal claim's value names the principal ``user:<value>`` (created with no grants on its
   first sign-in, recorded as created by ``oidc:<issuer>``), and each value of the groups claim the
   group principal ``group:<value>`` if an operator created it (its grants are the user's too). See
   ``metastore.principals`` for why these namespaces cannot meet the operator's principals.

A refused token is answered 401 like an unknown static token; the reason is logged (never the token).
When the issuer's keys cannot be fetched (the identity provider is down, slow, or answers what is not a
JWKS) and no usable keys are known, or the token's key id is unknown and the fetch that would tell
failed, the request is answered 503 with ``Retry-After``: a dependency is down, the token was not
judged, and a client may send it again (``service/errors.py``'s convention). Keys already known keep
verifying while the issuer is down (for at most ``MAX_STALE_SECONDS``). The discovery document is read
once per process.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt import PyJWK, PyJWKClient

from paimon_meta.errors import PrincipalAlreadyExistsError, ValidationError
from paimon_meta.metastore.principals import (
    MAX_GROUPS,
    TOKEN_PREFIX,
    Access,
    Principals,
    group_principal,
    user_principal,
)
from paimon_meta.service.errors import NotAuthenticatedError, OverloadedError

log = logging.getLogger("paimon_meta.service.oidc")
#: Refusals are logged where every other refusal is (``service.auth``, not imported: it imports the
#: state, which imports this module).
auth_log = logging.getLogger("paimon_meta.service.auth")

#: Signature algorithms a JWT may be signed with: public-key ones only. ``none`` and the HMACs (HS256,
#: ...) are never accepted: an HMAC "verified" with a public key is forged by anyone who has the key.
ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
DEFAULT_ALGORITHMS = ("RS256", "ES256")
#: Longest bearer JWT looked at (identity providers' tokens are a few KiB even with many groups).
MAX_TOKEN_CHARS = 16 * 1024
#: Key types a JWKS key may have to be used (``oct``, a shared secret, never is).
_KEY_TYPES = frozenset({"RSA", "EC", "OKP"})
#: Claims every accepted token carries (besides the configured principal claim).
_REQUIRED = ("exp", "iat", "iss", "aud")
#: Keys fetched longer ago than this are no longer used even while the issuer cannot be reached.
MAX_STALE_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """The identity provider whose JWTs the service accepts (module docstring).

    ``jwks_url``: where its signing keys are (default: discovered from the issuer's
    ``/.well-known/openid-configuration``). ``principal_claim`` names the principal; ``groups_claim``
    (a list of strings, or one string) the group principals whose grants the caller gets too. Keys are
    fetched again every ``jwks_cache_seconds``; a token with a key id not among them makes one fetch at
    most every ``refresh_cooldown_seconds`` (a flood of made-up ids cannot hammer the issuer); after a
    failed fetch the next waits ``fetch_retry_seconds``; each fetch gives up after
    ``fetch_timeout_seconds``.
    """

    issuer: str
    audience: str
    jwks_url: str | None = None
    principal_claim: str = "sub"
    groups_claim: str | None = None
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    leeway_seconds: float = 30.0
    jwks_cache_seconds: float = 300.0
    refresh_cooldown_seconds: float = 30.0
    fetch_retry_seconds: float = 5.0
    fetch_timeout_seconds: float = 5.0

    def __post_init__(self) -> None:
        _http_url("--oidc-issuer", self.issuer)
        if self.jwks_url is not None:
            _http_url("--oidc-jwks-url", self.jwks_url)
        if not self.audience.strip():
            raise ValidationError("--oidc-audience must not be empty", option="--oidc-audience")
        if not self.principal_claim.strip():
            raise ValidationError("--oidc-principal-claim must not be empty", option="--oidc-principal-claim")
        if self.groups_claim is not None and not self.groups_claim.strip():
            raise ValidationError("--oidc-groups-claim must not be empty", option="--oidc-groups-claim")
        if not self.algorithms:
            raise ValidationError("--oidc-algorithms names no algorithm", option="--oidc-algorithms")
        for alg in self.algorithms:
            if alg not in ASYMMETRIC_ALGORITHMS:
                raise ValidationError(
                    f"--oidc-algorithms: {alg!r} is not allowed; only public-key signatures "
                    f"({', '.join(sorted(ASYMMETRIC_ALGORITHMS))}), never none or an HMAC",
                    option="--oidc-algorithms",
                )
        if not 0 <= self.leeway_seconds <= 300:
            raise ValidationError(
                f"the OIDC leeway must be 0..300 seconds, got {self.leeway_seconds}", option="leeway_seconds"
            )
        for name in ("jwks_cache_seconds", "fetch_timeout_seconds"):
            if not getattr(self, name) > 0:
                raise ValidationError(f"OIDC {name} must be positive", option=name)
        for name in ("refresh_cooldown_seconds", "fetch_retry_seconds"):
            if not getattr(self, name) >= 0:
                raise ValidationError(f"OIDC {name} must not be negative", option=name)

    @property
    def created_by(self) -> str:
        """What the principals this issuer signs in are recorded as created by."""
        return f"oidc:{self.issuer}"


def _quoted(value: object) -> str:
    """``value`` JSON-quoted, as ``service.auth.log_text``: a client's text never forges a log line."""
    return json.dumps(str(value))


def is_static_token(token: str) -> bool:
    """Whether ``token`` is one of our static tokens; anything else can only be a JWT (a JWT starts
    with its base64url header, ``eyJ``, never with ``pmt_``)."""
    return token.startswith(TOKEN_PREFIX)


def _http_url(flag: str, url: str) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"{flag} must be an http(s) URL, got {url!r}", option=flag)


class TokenRefusedError(NotAuthenticatedError):
    """The JWT is not valid (401); the message says why and never contains the token."""


class IdentityProviderUnavailableError(OverloadedError):
    """The issuer's keys could not be fetched and none usable are known: 503 with ``Retry-After``
    (a dependency is down; the token was not judged, so sending it again later is safe)."""

    dependency = "oidc"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a verified JWT says the caller is: ``principal`` (``user:...``), the ``groups``
    (``group:...``) its groups claim lists, and when the token expires (``exp``, epoch seconds)."""

    principal: str
    groups: tuple[str, ...]
    expires_at: float


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The issuer's documents are read where configured, never where a redirect points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _get_json(url: str, timeout: float) -> Any:
    opener = urllib.request.build_opener(_NoRedirect())
    with opener.open(
        urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=timeout
    ) as r:
        return json.load(r)


@dataclass(frozen=True, slots=True)
class _KeySet:
    keys: Mapping[str, PyJWK]
    fetched_at: float  # monotonic


class JwksKeys:
    """The issuer's signing keys by key id, fetched with PyJWT's ``PyJWKClient`` and cached here.

    The cache is ours rather than ``PyJWKClient``'s because of what happens while the issuer is down:
    its cache forgets an expired key set and fetches on every call (each one waiting for the timeout,
    one at a time); here the last keys stay usable for ``MAX_STALE_SECONDS``, a failed fetch is not
    tried again for ``fetch_retry_seconds``, and an unknown key id fetches at most once per
    ``refresh_cooldown_seconds``. One fetch at a time (others wait for it, at most its timeout)."""

    def __init__(self, settings: OidcSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._client: PyJWKClient | None = (
            None if settings.jwks_url is None else self._new_client(settings.jwks_url)
        )
        self._set: _KeySet | None = None
        self._tried_at: float | None = None
        self._failure: str | None = None  # why the last fetch failed (None: it did not)
        self._lock = threading.Lock()

    def _new_client(self, url: str) -> PyJWKClient:
        return PyJWKClient(url, cache_jwk_set=False, timeout=self.settings.fetch_timeout_seconds)

    def key(self, kid: str) -> PyJWK:
        """The signing key ``kid``.

        Raises:
            TokenRefusedError: the issuer's keys (fetched now, or less than ``refresh_cooldown_seconds``
                ago) have no key ``kid``.
            IdentityProviderUnavailableError: no usable keys (or, for an unknown ``kid``, the fetch
                that would tell failed).
        """
        found = self._fresh(kid)
        if found is not None:
            return found
        timeout = self.settings.fetch_timeout_seconds
        if not self._lock.acquire(timeout=timeout):
            raise IdentityProviderUnavailableError(
                f"the keys of {self.settings.issuer} are being fetched; retry shortly",
                retry_after=max(1, math.ceil(timeout)),
            )
        try:
            found = self._fresh(kid)  # fetched by another request while this one waited
            if found is not None:
                return found
            now = self._clock()
            current = self._set
            fresh = current is not None and now - current.fetched_at < self.settings.jwks_cache_seconds
            if self._tried_at is None:
                wait = 0.0
            elif self._failure is not None:
                wait = self.settings.fetch_retry_seconds
            elif fresh:
                wait = self.settings.refresh_cooldown_seconds  # only an unknown kid brings us here
            else:
                wait = 0.0
            if self._tried_at is None or now - self._tried_at >= wait:
                self._fetch(now)
            return self._pick(kid)
        finally:
            self._lock.release()

    def _fresh(self, kid: str) -> PyJWK | None:
        current = self._set
        if current is None or self._clock() - current.fetched_at >= self.settings.jwks_cache_seconds:
            return None
        return current.keys.get(kid)

    def _pick(self, kid: str) -> PyJWK:
        current = self._set
        usable = current is not None and self._clock() - current.fetched_at < MAX_STALE_SECONDS
        retry = max(1, math.ceil(self.settings.fetch_retry_seconds))
        if current is None or not usable:
            raise IdentityProviderUnavailableError(
                f"the signing keys of {self.settings.issuer} could not be fetched ({self._failure}); "
                "retry shortly",
                retry_after=retry,
            )
        found = current.keys.get(kid)
        if found is not None:
            return found
        if self._failure is not None:
            # A key the issuer may have just published: we cannot tell it from a made-up id.
            raise IdentityProviderUnavailableError(
                f"key id {kid!r} is not among the known keys of {self.settings.issuer} and its keys "
                f"could not be fetched again ({self._failure}); retry shortly",
                retry_after=retry,
            )
        raise TokenRefusedError(f"key id {kid!r} is not in the issuer's JWKS")

    def _fetch(self, now: float) -> None:
        self._tried_at = now
        try:
            if self._client is None:
                self._client = self._new_client(self._discover())
            keys = self._usable(self._client.get_jwk_set())
        except (jwt.PyJWTError, OSError, ValueError) as e:  # PyJWKClient's errors, urllib's, bad JSON
            self._failure = f"{type(e).__name__}: {e}"
            log.warning("could not fetch the signing keys of %s: %s", self.settings.issuer, self._failure)
            return
        self._failure = None
        self._set = _KeySet(keys, self._clock())

    def _discover(self) -> str:
        """The issuer's ``jwks_uri`` (OpenID Connect Discovery 1.0, section 4: the document's ``issuer``
        must be the configured one)."""
        url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = _get_json(url, self.settings.fetch_timeout_seconds)
        if not isinstance(document, dict):
            raise ValueError(f"{url} is not a JSON object")
        if document.get("issuer") != self.settings.issuer:
            raise ValueError(f"{url} names issuer {document.get('issuer')!r}, not {self.settings.issuer!r}")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise ValueError(f"{url} names no jwks_uri")
        try:
            _http_url("jwks_uri", jwks_uri)
        except ValidationError as e:
            raise ValueError(e.message) from None
        return jwks_uri

    def _usable(self, jwk_set: jwt.PyJWKSet) -> dict[str, PyJWK]:
        """The set's signing keys by id: public keys (no shared secrets) for signatures, with an id and
        an allowed algorithm; the first of a repeated id."""
        keys: dict[str, PyJWK] = {}
        for key in jwk_set.keys:
            if (
                key.key_id
                and key.key_type in _KEY_TYPES
                and key.public_key_use in ("sig", None)
                and key.algorithm_name in self.settings.algorithms
            ):
                keys.setdefault(key.key_id, key)
        if not keys:
            raise ValueError("the JWKS has no usable signing key")
        return keys


class OidcVerifier:
    """Verifies bearer JWTs of one issuer and signs their principals in (module docstring)."""

    def __init__(self, settings: OidcSettings, *, keys: JwksKeys | None = None) -> None:
        self.settings = settings
        self.keys = keys or JwksKeys(settings)

    def verify(self, token: str) -> Identity:
        """Who ``token`` says the caller is.

        Raises:
            TokenRefusedError: the token is not valid (the message says why).
            IdentityProviderUnavailableError: the issuer's keys could not be fetched.
        """
        s = self.settings
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRefusedError(f"token over {MAX_TOKEN_CHARS} characters")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise TokenRefusedError(f"not a JWT ({e})") from None
        alg = header.get("alg")
        if alg not in s.algorithms:
            raise TokenRefusedError(f"algorithm {alg!r} is not allowed")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRefusedError("the header names no key id (kid)")
        key = self.keys.key(kid)
        if key.algorithm_name != alg:  # PyJWT checks this too; the key, not the token, says how to verify
            raise TokenRefusedError(f"algorithm {alg!r} is not key {kid!r}'s ({key.algorithm_name})")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(s.algorithms),
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.leeway_seconds,
                options={
                    "require": [*_REQUIRED, s.principal_claim],
                    "verify_signature": True,
                    "verify_exp": True,
                    "verify_nbf": True,
                    "verify_iat": True,
                    "verify_aud": True,
                    "verify_iss": True,
                },
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefusedError("expired (exp)") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefusedError("not yet valid (nbf or iat)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefusedError(f"audience is not {s.audience!r}") from None
        except jwt.InvalidIssuerError:
            raise TokenRefusedError(f"issuer is not {s.issuer!r}") from None
        except jwt.InvalidSignatureError:
            raise TokenRefusedError("bad signature") from None
        except jwt.MissingRequiredClaimError as e:
            raise TokenRefusedError(f"no {e.claim!r} claim") from None
        except jwt.PyJWTError as e:
            raise TokenRefusedError(f"invalid ({type(e).__name__}: {e})") from None
        exp, iat, clock = claims["exp"], claims["iat"], time.time()
        # Ours, whatever PyJWT's version does: RFC 7519 leaves a future ``iat`` to the application.
        if not isinstance(iat, int | float) or iat > clock + s.leeway_seconds:
            raise TokenRefusedError("not yet valid (iat)")
        if not isinstance(exp, int | float) or exp <= clock - s.leeway_seconds:
            raise TokenRefusedError("expired (exp)")
        try:
            principal = user_principal(claims[s.principal_claim])
        except ValidationError as e:
            raise TokenRefusedError(
                f"claim {s.principal_claim!r} cannot name a principal: {e.message}"
            ) from None
        return Identity(principal, self._groups(claims), float(exp))

    def _groups(self, claims: Mapping[str, Any]) -> tuple[str, ...]:
        """The group principals the groups claim names (values that cannot name one are skipped:
        fewer grants, never more)."""
        if self.settings.groups_claim is None:
            return ()
        raw = claims.get(self.settings.groups_claim)
        values = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        groups: list[str] = []
        for value in values[:MAX_GROUPS]:
            try:
                groups.append(group_principal(value))
            except ValidationError:
                continue
        return tuple(groups)

    def sign_in(self, token: str, principals: Principals) -> Access | None:
        """The access of the caller ``token`` proves, its principal created on first sight (no grants);
        None (401) for a refused token or a principal of another issuer, the reason logged.

        Raises:
            IdentityProviderUnavailableError: the issuer's keys could not be fetched (503).
        """
        try:
            identity = self.verify(token)
            return principals.sign_in(
                identity.principal,
                groups=identity.groups,
                created_by=self.settings.created_by,
                valid_until=identity.expires_at,
            )
        except (TokenRefusedError, PrincipalAlreadyExistsError) as e:
            # The reason, JSON-quoted (parts of it come from the token's header or claims), never the token.
            auth_log.warning("bearer JWT refused: %s", _quoted(e.message))
        return None
