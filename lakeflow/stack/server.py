"""The Lakekeeper calls ``lakeflow stack bootstrap`` makes (management and catalog API), over one
``requests`` session per principal; the session, and the wait for ``/health``."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from pydantic import ValidationError

from lakeflow.catalog.errors import CatalogError, error_from
from lakeflow.catalog.wire import ListGenericTablesResponse, Payload
from lakeflow.stack.config import JobClient, StackConfig

if TYPE_CHECKING:  # requests is imported where it is used: `lakeflow --help` stays fast
    import requests

Report = Callable[[str], None]
P = TypeVar("P", bound=Payload)

# The 409s that mean "already there": Lakekeeper 0.13's types (AlreadyExistsException,
# WarehouseAlreadyExists) and the names other releases give the same answers.
_NAMESPACE_EXISTS = ("AlreadyExistsException", "NamespaceAlreadyExists")
_WAREHOUSE_EXISTS = ("WarehouseAlreadyExists", "WarehouseNameAlreadyExists")
ALLOW_ALL = "allow-all"  # /management/v1/info's authz-backend without authorization


class ServerInfo(Payload):
    """``GET /management/v1/info``: what the bootstrap needs of it."""

    bootstrapped: bool
    authz_backend: str


class Principal(Payload):
    """``GET /management/v1/whoami``: the caller's principal id, e.g. ``oidc~<sub>``."""

    id: str


class Assignment(Payload):
    """One tuple of ``GET …/permissions/<object>/assignments``: a relation of a user or a role."""

    type: str
    user: str | None = None
    role: str | None = None


class Assignments(Payload):
    assignments: list[Assignment]


class NamespaceAnswer(Payload):
    """``GET /catalog/v1/{prefix}/namespaces/{namespace}``: Lakekeeper puts its id in the properties."""

    properties: dict[str, str] = {}


class LakekeeperAdmin:
    """The management and catalog calls the bootstrap makes as one principal (one ``requests`` session)."""

    def __init__(self, base_url: str, session: requests.Session) -> None:
        self.base = base_url.rstrip("/")
        self.session = session

    def _call(
        self,
        method: str,
        path: str,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """One request; a 401 that is not an authorization refusal (``Unauthorized``, the permission
        endpoints' "not allowed") is an authentication failure, raised."""
        import requests

        from lakeflow.auth import AuthError

        try:
            resp = self.session.request(method, self.base + path, json=json, params=params)
        except AuthError as exc:
            raise CatalogError(str(exc)) from None
        except requests.RequestException as exc:
            raise CatalogError(f"{method} {self.base}{path} failed: {type(exc).__name__}") from exc
        if resp.status_code == 401:
            error = self._error(resp, f"{method} {path}")
            if error.type != "Unauthorized":
                raise self._error(
                    resp,
                    f"{method} {path}: not authenticated (set STACK_OAUTH_*; a "
                    "token's aud must hold Lakekeeper's audience and its iss be "
                    "an accepted issuer: docs/oauth.md)",
                )
        return resp

    @staticmethod
    def _error(resp: requests.Response, what: str) -> CatalogError:
        return error_from(resp.status_code, resp.content, what=what, reason=resp.reason)

    def _parsed(self, model: type[P], resp: requests.Response, what: str) -> P:
        if resp.status_code != 200:
            raise self._error(resp, what)
        try:
            return model.model_validate_json(resp.content)
        except ValidationError as exc:
            raise CatalogError(f"{what}: unexpected answer from Lakekeeper ({exc.errors()[0]['msg']})") from None

    # -- the server ------------------------------------------------------------------------

    def info(self) -> ServerInfo:
        """Whether the server is bootstrapped, and its authorization backend."""
        return self._parsed(ServerInfo, self._call("GET", "/management/v1/info"), "server info")

    def bootstrap(self) -> bool:
        """Accept the terms of use (the caller becomes the server's admin); False when the server
        was already bootstrapped."""
        resp = self._call("POST", "/management/v1/bootstrap", json={"accept-terms-of-use": True})
        if resp.status_code == 204:
            return True
        error = self._error(resp, "bootstrap")
        if resp.status_code == 400 and error.type == "CatalogAlreadyBootstrapped":
            return False
        raise error

    def whoami(self) -> str | None:
        """The caller's principal id; None when it is no user of this server yet (404 ``UserNotFound``)."""
        resp = self._call("GET", "/management/v1/whoami")
        if resp.status_code == 404 and self._error(resp, "whoami").type == "UserNotFound":
            return None
        return self._parsed(Principal, resp, "whoami").id

    def is_server_admin(self) -> bool:
        """Whether the caller is the server's admin or operator (directly or through a role): only they
        may read the server's assignments (else 401 ``Unauthorized`` / 403)."""
        resp = self._call("GET", "/management/v1/permissions/server/assignments")
        if resp.status_code in (401, 403):
            return False
        self._parsed(Assignments, resp, "read the server's assignments")
        return True

    def log_in(self, warehouse: str) -> None:
        """``GET /catalog/v1/config?warehouse=…``, which makes the caller a user of the server (also
        when it sees no warehouse yet: 404 ``NoSuchWarehouseException``)."""
        resp = self._call("GET", "/catalog/v1/config", params={"warehouse": warehouse})
        if resp.status_code == 200:
            return
        error = self._error(resp, f"log in (GET /catalog/v1/config?warehouse={warehouse})")
        if not (resp.status_code == 404 and error.type == "NoSuchWarehouseException"):
            raise error

    # -- the warehouse, its namespaces and tables -------------------------------------------

    def find_warehouse(self, name: str) -> dict | None:
        """The warehouse called ``name`` (GetWarehouseResponse), or None."""
        resp = self._call("GET", "/management/v1/warehouse")
        if resp.status_code != 200:
            raise self._error(resp, "list warehouses")
        return next((w for w in resp.json()["warehouses"] if w["name"] == name), None)

    def create_warehouse(self, config: StackConfig) -> str | None:
        """Create the warehouse; its id, or None when the name is taken (409)."""
        body = {
            "warehouse-name": config.warehouse,
            "storage-profile": config.storage_profile(),
            "storage-credential": config.storage_credential(),
        }
        resp = self._call("POST", "/management/v1/warehouse", json=body)
        if resp.status_code == 201:
            return str(resp.json()["warehouse-id"])
        error = self._error(resp, f"create warehouse {config.warehouse}")
        if resp.status_code == 409 and error.type in _WAREHOUSE_EXISTS:
            return None
        raise error

    def create_namespace(self, prefix: str, levels: Sequence[str]) -> bool:
        """Create one namespace (its parent must exist); False when it already exists."""
        resp = self._call(
            "POST",
            f"/catalog/v1/{quote(prefix, safe='')}/namespaces",
            json={"namespace": list(levels), "properties": {}},
        )
        if resp.status_code == 200:
            return True
        error = self._error(resp, f"create namespace {'.'.join(levels)}")
        if resp.status_code == 409 and error.type in _NAMESPACE_EXISTS:
            return False
        raise error

    def namespace_id(self, prefix: str, levels: Sequence[str]) -> str:
        """The namespace's id (the ``namespace_id`` property Lakekeeper answers a load with)."""
        from lakeflow.catalog.lakekeeper import encode_namespace

        what = f"load namespace {'.'.join(levels)}"
        path = f"/catalog/v1/{quote(prefix, safe='')}/namespaces/{encode_namespace(levels)}"
        found = self._parsed(NamespaceAnswer, self._call("GET", path), what).properties.get("namespace_id")
        if not found:
            raise CatalogError(f"{what}: Lakekeeper's answer holds no namespace_id")
        return found

    def generic_tables(self, prefix: str, levels: Sequence[str]) -> dict[str, str]:
        """The namespace's generic tables: name → id (every page)."""
        from lakeflow.catalog.lakekeeper import encode_namespace

        what = f"list the generic tables of {'.'.join(levels)}"
        path = f"/lakekeeper/v1/{quote(prefix, safe='')}/namespaces/{encode_namespace(levels)}/generic-tables"
        tables: dict[str, str] = {}
        token: str | None = None
        seen: set[str] = set()
        while True:
            page = self._parsed(
                ListGenericTablesResponse, self._call("GET", path, params={"pageToken": token} if token else None), what
            )
            tables.update({i.name: i.id for i in page.identifiers if i.id})
            token = page.next_page_token
            if not token:
                return tables
            if token in seen:
                raise CatalogError(f"{what}: the server repeated page token {token!r}")
            seen.add(token)

    # -- permissions (an authorization backend: OpenFGA) -----------------------------------

    def assignments(self, path: str, what: str) -> list[Assignment]:
        """The tuples on one object (``path``: ``/management/v1/permissions/<object>/assignments``)."""
        return self._parsed(Assignments, self._call("GET", path), f"read the assignments of {what}").assignments

    def write_assignments(self, path: str, writes: Sequence[Mapping[str, str]], what: str) -> None:
        """Write ``writes`` in one batch (an existing tuple fails it all: 409 ``TupleAlreadyExistsError``)."""
        resp = self._call("POST", path, json={"writes": list(writes)})
        if resp.status_code != 204:
            raise self._error(resp, f"grant on {what}")

    def set_managed_access(self, namespace_id: str, what: str) -> None:
        """Managed access on: owners cannot pass grants on (only admins grant)."""
        path = f"/management/v1/permissions/namespace/{quote(namespace_id, safe='')}/managed-access"
        resp = self._call("POST", path, json={"managed-access": True})
        if resp.status_code not in (200, 204):
            raise self._error(resp, f"managed access on {what}")


def wait_healthy(base_url: str, timeout_s: float, report: Report, interval_s: float = 1.0) -> None:
    """Poll ``GET /health`` until it answers 200; a ``CatalogError`` after ``timeout_s``."""
    import requests

    url = base_url.rstrip("/") + "/health"
    start = time.monotonic()
    next_note, last = start + 10, "no answer"
    while True:
        try:
            resp = requests.get(url, timeout=2)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}"
        except requests.RequestException as exc:
            last = type(exc).__name__
        now = time.monotonic()
        if now - start >= timeout_s:
            raise CatalogError(
                f"Lakekeeper at {base_url} is not healthy after {timeout_s:.0f} s "
                f"(last: {last}); is the stack up? (docker compose ps)"
            )
        if now >= next_note:
            report(f"waiting for Lakekeeper at {url} ({now - start:.0f} s, last: {last})")
            next_note = now + 10
        time.sleep(interval_s)


def open_session(config: StackConfig, job: JobClient | None = None) -> requests.Session:
    """A session (lakeflow.http) as the admin, or as ``job``'s client: OAuth2 client credentials
    when a token endpoint is configured."""
    from lakeflow.auth import BearerAuth, OAuthClientCredentials
    from lakeflow.http import HttpOptions, new_session

    options = HttpOptions(max_retries=3)
    client_id, secret = (job.client_id, job.client_secret) if job else (config.client_id, config.client_secret)
    if not (config.token_url and client_id and secret):
        return new_session(options)
    provider = OAuthClientCredentials(config.token_url, client_id, secret, config.scope, options=options)
    return new_session(options, BearerAuth(provider))
