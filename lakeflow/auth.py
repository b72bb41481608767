"""Bearer tokens for Lakekeeper: a static token, or OAuth2 client credentials through authlib.

A :class:`TokenProvider` hands out the current token and forgets it when the server rejects it;
:class:`BearerAuth` puts it on each request and, on a 401, fetches a new token and retries once.
Tokens and client secrets stay inside :class:`~lakeflow.secret.Secret`: never in a repr, a log
line or an exception.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import requests
from requests.auth import AuthBase

from lakeflow.errors import LakeflowError
from lakeflow.http import HttpOptions, Origin, configure, origin
from lakeflow.secret import Secret
from lakeflow.settings import Settings

# A token is renewed this share of its lifetime before it expires (at most MAX_LEEWAY_S early):
# a 300 s token at 240 s, a 2 s token at 1.6 s. A fixed leeway larger than a short lifetime would
# make every call fetch a new token.
LEEWAY_FRACTION = 0.2
MAX_LEEWAY_S = 60.0


class AuthError(LakeflowError, RuntimeError):
    """No token could be obtained: the message names the token endpoint and its answer."""


class TokenProvider(Protocol):
    """Where bearer tokens come from."""

    def token(self) -> Secret:
        """The token to send now (fetched or renewed when needed)."""
        ...

    def invalidate(self, token: Secret) -> None:
        """Forget ``token`` (the server rejected it); the next :meth:`token` fetches a new one."""
        ...


class StaticToken:
    """A fixed bearer token (``TOKEN``). It cannot be renewed: a rejected token stays rejected."""

    def __init__(self, token: Secret) -> None:
        self._token = token

    def token(self) -> Secret:
        return self._token

    def invalidate(self, token: Secret) -> None:
        """Nothing to renew."""

    def __repr__(self) -> str:
        return "StaticToken(***)"


@dataclass(frozen=True)
class _Fetched:
    value: Secret
    renew_at: float  # monotonic clock


class OAuthClientCredentials:
    """OAuth2 client-credentials grant (authlib): fetched lazily, renewed before expiry.

    One fetch at a time: threads that need a token while it is being fetched wait for that
    fetch instead of starting their own.
    """

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: Secret,
        scope: str | None = None,
        *,
        options: HttpOptions = HttpOptions(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token_url = token_url
        self.client_id = client_id
        self.scope = scope
        self._clock = clock
        self._lock = threading.Lock()
        self._current: _Fetched | None = None
        from authlib.integrations.requests_client import OAuth2Session  # ~0.5 s of imports: only when used

        self._session = configure(
            OAuth2Session(
                client_id, client_secret.reveal(), scope=scope, token_endpoint_auth_method="client_secret_post"
            ),
            options,
        )

    def __repr__(self) -> str:
        return (
            f"OAuthClientCredentials(token_url={self.token_url!r}, client_id={self.client_id!r}, scope={self.scope!r})"
        )

    def token(self) -> Secret:
        current = self._current
        if current is not None and self._clock() < current.renew_at:
            return current.value
        with self._lock:
            current = self._current
            if current is None or self._clock() >= current.renew_at:
                current = self._current = self._fetch()
            return current.value

    def invalidate(self, token: Secret) -> None:
        with self._lock:
            if self._current is not None and self._current.value == token:
                self._current = None

    def _fetch(self) -> _Fetched:
        from authlib.integrations.requests_client import OAuthError

        started = self._clock()
        try:
            answer = self._session.fetch_token(self.token_url, grant_type="client_credentials")
        except OAuthError as exc:
            raise AuthError(
                f"token endpoint {self.token_url} refused client {self.client_id!r}: "
                f"{exc.error}" + (f" ({exc.description})" if exc.description else "")
            ) from None
        except requests.RequestException as exc:
            raise AuthError(f"token endpoint {self.token_url} failed: {exc}") from None
        if not answer.get("access_token"):
            raise AuthError(f"token endpoint {self.token_url} answered without an access_token")
        try:
            lifetime = float(answer["expires_in"])
        except (KeyError, TypeError, ValueError):
            lifetime = math.inf  # no expiry given: keep it until the server rejects it
        leeway = min(MAX_LEEWAY_S, lifetime * LEEWAY_FRACTION)
        return _Fetched(Secret(str(answer["access_token"])), started + lifetime - leeway)


class BearerAuth(AuthBase):
    """requests auth: ``Authorization: Bearer <token>``; on a 401 from the origin the request was
    made to (not one a redirect led to), renew the token and retry once."""

    def __init__(self, provider: TokenProvider) -> None:
        self.provider = provider

    def __repr__(self) -> str:
        return f"BearerAuth({self.provider!r})"

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        token = self.provider.token()
        request.headers["Authorization"] = f"Bearer {token.reveal()}"
        request.register_hook("response", partial(self._retry_on_401, origin(request.url or "")))
        return request

    def _retry_on_401(self, asked: Origin, response: requests.Response, **kwargs: Any) -> requests.Response:
        if response.status_code != 401 or origin(response.url) != asked:
            return response
        sent = Secret(str(response.request.headers.get("Authorization", "")).removeprefix("Bearer "))
        self.provider.invalidate(sent)
        fresh = self.provider.token()
        if fresh == sent:
            return response  # nothing new to try (a static token)
        retry = response.request.copy()
        retry.headers["Authorization"] = f"Bearer {fresh.reveal()}"
        response.close()
        answer = response.connection.send(retry, **kwargs)  # the adapter: no hooks, so once only
        answer.history.append(response)
        answer.request = retry
        return answer


def principal_name(settings: Settings) -> str:
    """Who the catalog sees, for messages: the OAuth client id, or a static token's subject (its JWT
    ``sub``, read without verifying it); "" when neither says."""
    if settings.oauth_token_url and settings.oauth_client_id and settings.oauth_client_secret:
        return settings.oauth_client_id
    if not settings.token:
        return ""
    parts = settings.token.reveal().split(".")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))) if len(parts) == 3 else {}
    except ValueError:
        return ""
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) else ""


def token_provider(settings: Settings, options: HttpOptions) -> TokenProvider | None:
    """The provider the settings describe: OAUTH_* → client credentials, TOKEN → static, or none."""
    if settings.oauth_token_url and settings.oauth_client_id and settings.oauth_client_secret:
        return OAuthClientCredentials(
            settings.oauth_token_url,
            settings.oauth_client_id,
            settings.oauth_client_secret,
            settings.oauth_scope,
            options=options,
        )
    if settings.token:
        return StaticToken(settings.token)
    return None
