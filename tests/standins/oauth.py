"""An OAuth2 token endpoint stand-in (client-credentials grant) on 127.0.0.1.

``POST /token`` with ``grant_type=client_credentials`` and a client's id and secret (form body
or HTTP Basic) answers ``{"access_token", "token_type": "Bearer", "expires_in"}`` like Keycloak
(no refresh token). It knows one client at first (``client_id``/``client_secret``) and more with
``add_client``. A token is a short-lived (``ttl``) JWT signed with the stand-in's own key (HS256):
``sub`` and ``azp`` are the client id, ``aud`` is ``lakekeeper``, as an OpenID provider issues them
for the client-credentials grant. ``is_valid`` tells a Lakekeeper stand-in which tokens to accept,
``subject_of`` whom a valid one stands for; ``issue`` mints one without HTTP. ``token_requests``
counts the requests received.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from typing import Any, Callable, Optional
from urllib.parse import unquote_plus

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class OAuthStandin:
    """A token endpoint at ``.token_url`` for confidential clients (``client_id`` the first)."""

    def __init__(self, client_id: str = "lakeflow", client_secret: Optional[str] = None,
                 *, ttl: float = 300.0, delay: float = 0.0) -> None:
        self.client_id = client_id
        self.client_secret = client_secret or f"cs-{secrets.token_hex(16)}"
        self.clients = {client_id: self.client_secret}  # client id -> its secret
        self.ttl = ttl
        self.delay = delay  # seconds each token request takes (makes thread races visible)
        self.token_requests = 0
        self.scopes: list[Optional[str]] = []
        self.auth_methods: list[str] = []  # client_secret_post / client_secret_basic, per request
        self.issued: list[str] = []  # every access token handed out (also revoked and expired ones)
        self._issued: dict[str, tuple[str, float]] = {}  # token -> (client id, expiry: monotonic)
        self._signing_key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._server = make_server("127.0.0.1", 0, self, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self.token_url = f"{self.url}/token"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                                        name="oauth-standin")

    def start(self) -> OAuthStandin:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add_client(self, client_id: str, client_secret: Optional[str] = None) -> str:
        """Accept another client; returns its secret."""
        secret = client_secret or f"cs-{secrets.token_hex(16)}"
        with self._lock:
            self.clients[client_id] = secret
        return secret

    def issue(self, client_id: str) -> str:
        """A new access token for ``client_id`` (a client this endpoint knows)."""
        assert client_id in self.clients, f"unknown client {client_id!r}"
        now = time.time()
        claims = {"iss": self.url, "sub": client_id, "azp": client_id, "aud": "lakekeeper",
                  "iat": int(now), "exp": int(now + self.ttl), "jti": secrets.token_hex(8)}
        signed = f"{_b64(json.dumps({'alg': 'HS256', 'typ': 'JWT'}))}.{_b64(json.dumps(claims))}"
        signature = hmac.new(self._signing_key, signed.encode(), hashlib.sha256).digest()
        token = f"{signed}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"
        with self._lock:
            self._issued[token] = (client_id, time.monotonic() + self.ttl)
            self.issued.append(token)
        return token

    def is_valid(self, token: str) -> bool:
        """True for a token this endpoint issued that has not expired or been revoked."""
        return self.subject_of(token) is not None

    def subject_of(self, token: str) -> Optional[str]:
        """The client id a valid token was issued to (its ``sub``); None for any other token."""
        with self._lock:
            client_id, expiry = self._issued.get(token, (None, 0.0))
        return client_id if time.monotonic() < expiry else None

    def revoke_all(self) -> None:
        """Every token issued so far becomes invalid (as after a key rotation)."""
        with self._lock:
            self._issued.clear()

    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        with self._lock:
            self.token_requests += 1
        if request.method != "POST" or request.path != "/token":
            return _json(404, {"error": "not_found"})(environ, start_response)
        if self.delay:
            time.sleep(self.delay)
        form = request.form
        client_id, secret = form.get("client_id"), form.get("client_secret")
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            raw = base64.b64decode(auth[6:]).decode()
            client_id, _, secret = (unquote_plus(p) for p in raw.partition(":"))
        with self._lock:
            self.auth_methods.append("client_secret_basic" if auth.startswith("Basic ") else "client_secret_post")
        if form.get("grant_type") != "client_credentials":
            answer = _json(400, {"error": "unsupported_grant_type"})
        elif client_id not in self.clients or secret != self.clients[client_id]:
            answer = _json(401, {"error": "invalid_client",
                                 "error_description": "Invalid client or Invalid client credentials"})
        else:
            token = self.issue(client_id)
            with self._lock:
                self.scopes.append(form.get("scope"))
            answer = _json(200, {"access_token": token, "token_type": "Bearer",
                                 "expires_in": self.ttl, "scope": form.get("scope") or ""})
        return answer(environ, start_response)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _json(status: int, body: dict) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json",
                    headers={"Cache-Control": "no-store"})
