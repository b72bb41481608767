"""A stand-in for the parts of Lakekeeper that ``lakeflow stack bootstrap`` calls, plus a token endpoint.

Real HTTP (werkzeug) on 127.0.0.1. Answers as Lakekeeper 0.13.3 did (``recorded-0.13.3``):
``/health``, ``POST /management/v1/bootstrap`` (204, then 400 ``CatalogAlreadyBootstrapped``),
``GET|POST /management/v1/warehouse`` and ``GET /management/v1/warehouse/{id}`` (201 with the
whole warehouse, its profile normalized; 409 ``WarehouseAlreadyExists``; 400
``CreateWarehouseStorageProfileOverlap``, and ``Invalidsts-role-arn`` for an AWS profile with STS
but no role), ``GET /management/v1/info`` and ``project-list``, ``POST /catalog/v1/{prefix}/namespaces`` (200, 404
``NoSuchNamespaceException`` for a missing parent, 409 ``AlreadyExistsException``, 400
``WarehouseIdIsNotUUID``), Iceberg error bodies with an error id, plain-text 422 for bodies that
do not deserialize, gzip and ``x-request-id`` as the server sends them. Every request and response is validated against
``tests/standins/management_openapi.yaml``; violations are kept in ``violations``.

With ``accept`` set (e.g. ``tests.standins.oauth.OAuthStandin.is_valid``) every call but
``/health`` needs ``Authorization: Bearer <token>`` that ``accept`` approves: 401
``MissingAuthorizationHeader`` without one, 401 ``AuthenticationFailed`` otherwise.

With ``authz`` set (a ``tests.standins.authz.Authorizer``, which then also authenticates) it answers
as Lakekeeper with OpenFGA (``recorded-authz-0.13.3``): ``GET /management/v1/info`` says
``authz-backend: openfga``; any principal may bootstrap (and becomes server admin); ``whoami``,
``GET /management/v1/user``, the project and warehouse lists filtered to what the principal may
see (403 ``ProjectActionForbidden`` without ``can_list_warehouses``), creating a warehouse or a
namespace authorized (its creator owns it), and the permission and role endpoints (the
authorizer's). A route Lakekeeper does not have is a bare 404, as axum answers it.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import unquote

from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from openapi_core.templating.paths.exceptions import PathNotFound
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from tests.standins.lakekeeper import (
    DEFAULT_PROJECT,
    ApiError,
    as_lakekeeper_sends,
    forbidden,
    namespace_object,
    warehouse_object,
    warehouse_view,
)

SPEC = Path(__file__).with_name("management_openapi.yaml")
NAMESPACE_SEP = "\x1f"
LAKEKEEPER_VERSION = "0.13.3"


@dataclass
class Warehouse:
    id: str
    name: str
    profile: dict
    credential: dict  # kept like Lakekeeper does (encrypted there), never returned
    delete_profile: Optional[dict] = None


@dataclass
class Call:
    method: str
    path: str
    body: Optional[object]
    status: int


@dataclass
class ManagementStandin:
    """State and behaviour; ``serve()`` runs it on a free 127.0.0.1 port."""

    accept: Optional[Callable[[str], bool]] = None  # None: no auth (no OpenID provider)
    authz: Any = None  # a tests.standins.authz.Authorizer: authorization on (it authenticates too)
    unhealthy_for_s: float = 0.0  # /health answers 503 for this long after start
    bootstrapped: bool = False
    warehouses: dict[str, Warehouse] = field(default_factory=dict)
    namespaces: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    namespace_ids: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)  # (warehouse, levels)
    calls: list[Call] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self.server_id = str(uuid.uuid4())
        self._openapi = OpenAPI.from_file_path(str(SPEC))
        self._started = time.monotonic()
        self._lock = threading.Lock()

    # --- HTTP plumbing ---------------------------------------------------------------------
    def __call__(self, environ, start_response):
        request = Request(environ)
        with self._lock:
            response = self._dispatch(request)
        body = None
        if request.content_type == "application/json" and request.get_data():
            try:
                body = json.loads(request.get_data())
            except ValueError:
                body = request.get_data(as_text=True)
        self.calls.append(Call(request.method, request.path, body, response.status_code))
        as_lakekeeper_sends(request, response)
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        spec_path = request.path.startswith(("/management/", "/catalog/")) or request.path == "/health"
        if spec_path:
            result = self._openapi.unmarshal_request(WerkzeugOpenAPIRequest(request))
            if any(isinstance(e, PathNotFound) for e in result.errors):
                return Response(status=404)  # a route Lakekeeper does not have: axum's bare 404
            if result.errors:
                detail = "; ".join(str(e) for e in result.errors)
                self.violations.append(f"request {request.method} {request.path}: {detail}")
                # axum's Json extractor: plain text, 422
                return Response(f"Failed to deserialize the JSON body into the target type: {detail}",
                                status=422, content_type="text/plain; charset=utf-8")
        principal = None
        if request.path != "/health" and (self.accept is not None or self.authz is not None):
            try:
                principal = self._authenticate(request)
            except ApiError as exc:
                return self._checked(request, _error(exc.code, exc.type, exc.message, exc.stack))
        try:
            return self._checked(request, self._route(request, principal))
        except ApiError as exc:
            return self._checked(request, _error(exc.code, exc.type, exc.message, exc.stack))

    def _checked(self, request: Request, response: Response) -> Response:
        result = self._openapi.unmarshal_response(WerkzeugOpenAPIRequest(request),
                                                  WerkzeugOpenAPIResponse(response))
        if result.errors:
            detail = _details(result.errors)
            self.violations.append(f"response to {request.method} {request.path}: {detail}")
        return response

    def _route(self, request: Request, principal: Optional[str]) -> Response:
        path, method = request.path, request.method
        if path == "/health" and method == "GET":
            if time.monotonic() - self._started < self.unhealthy_for_s:
                return _json({"health": "unhealthy"}, status=503)
            pools = [{"name": n, "lastCheck": int(time.time() * 1000), "status": "ok"} for n in ("read_pool",
                                                                                                 "write_pool")]
            auth = [] if self.authz is None else [{"name": "openfga", "lastCheck": int(time.time() * 1000),
                                                   "status": "ok"}]
            return _json({"health": "ok", "services": {"auth": auth, "catalog": pools, "secrets": pools},
                          "maintenance_mode": "off"})
        if path == "/management/v1/info" and method == "GET":
            return _json(self._info())
        if path == "/management/v1/bootstrap" and method == "POST":
            if self.bootstrapped:
                return _error(400, "CatalogAlreadyBootstrapped", "Catalog is not open for bootstrap")
            self.bootstrapped = True
            if self.authz is not None:  # whoever bootstraps becomes the server's admin
                self.authz.bootstrap(principal, operator=bool(request.get_json().get("is-operator")))
            return Response(status=204)
        if path == "/management/v1/project-list" and method == "GET":
            project = f"project:{DEFAULT_PROJECT}"
            listed = self.authz is None or self.authz.allowed(principal, "can_include_in_list", project)
            return _json({"projects": [{"project-id": DEFAULT_PROJECT, "project-name": "Default Project"}]
                          if listed else []})
        if path == "/management/v1/warehouse" and method == "GET":
            return _json({"warehouses": [_warehouse_view(w) for w in self._listed_warehouses(principal)]})
        if path == "/management/v1/warehouse" and method == "POST":
            self._require_on_project(principal, "can_create_warehouse")
            return self._create_warehouse(request.get_json(), principal)
        parts = path.split("/")
        if len(parts) == 5 and parts[1:4] == ["management", "v1", "warehouse"] and method == "GET":
            return self._get_warehouse(parts[4], principal)
        if len(parts) == 5 and parts[1:3] == ["catalog", "v1"] and parts[4] == "namespaces" \
                and method == "POST":
            return self._create_namespace(unquote(parts[3]), request.get_json(), principal)
        if self.authz is None:
            return Response(status=404)
        return self._route_authz(request, principal)

    def _route_authz(self, request: Request, principal: str) -> Response:
        """The calls only a server with an authorizer has: users, permissions, roles."""
        if request.path == "/management/v1/whoami" and request.method == "GET":
            user = self.authz.users.get(principal)
            if user is None:
                return _error(404, "UserNotFound", f"User with id {principal} not found.")
            return _json({**user.view(), "is-instance-admin": False})
        if request.path == "/management/v1/user" and request.method == "GET":
            if not self.authz.allowed(principal, "can_list_users", self.authz.server):
                return _error(403, "ServerActionForbidden", f"Server action `can_list_users` forbidden on "
                              f"server `{self.authz.server_id}`")
            users = sorted(self.authz.users.values(), key=lambda u: u.created_at)
            listed: dict[str, Any] = {"users": [u.view() for u in users]}
            if users:  # Lakekeeper's token names the last one listed
                listed["next-page-token"] = base64.urlsafe_b64encode(f"1&{users[-1].id}".encode()).decode()
            return _json(listed)
        status, payload = self.authz.answer(request, principal)
        return _json(payload, status=status) if payload is not None else Response(status=status)

    def _info(self) -> dict:
        return {"version": LAKEKEEPER_VERSION, "lakekeeper-version": LAKEKEEPER_VERSION,
                "bootstrapped": self.bootstrapped,
                "server-id": self.authz.server_id if self.authz is not None else self.server_id,
                "default-project-id": DEFAULT_PROJECT,
                "authz-backend": "openfga" if self.authz is not None else "allow-all",
                "aws-system-identities-enabled": False, "azure-system-identities-enabled": False,
                "gcp-system-identities-enabled": False,
                "queues": ["tabular_expiration", "tabular_purge", "task_log_cleanup"],
                "license-status": {"issuer": None, "audience": "lakekeeper-core", "license-type": "Apache-2.0",
                                   "valid": True}}

    # --- authorization (each a no-op with authorization off) ---------------------------------
    def _require_on_project(self, principal: Optional[str], action: str) -> None:
        if self.authz is not None and not self.authz.allowed(principal, action, self.authz.project):
            raise ApiError(403, "ProjectActionForbidden", f"Project action `{action}` forbidden on project "
                           f"`{self.authz.project_id}`")

    def _listed_warehouses(self, principal: Optional[str]) -> list[Warehouse]:
        self._require_on_project(principal, "can_list_warehouses")
        return [w for w in self.warehouses.values()
                if self.authz is None or self.authz.allowed(principal, "can_include_in_list", warehouse_object(w.id))]

    # --- the calls ---------------------------------------------------------------------------
    def _create_warehouse(self, body: dict, principal: Optional[str]) -> Response:
        name, profile = body["warehouse-name"], body["storage-profile"]
        if any(w.name == name for w in self.warehouses.values()):
            return _error(409, "WarehouseAlreadyExists", f"A warehouse with the name '{name}' already exists in "
                          f"project with id '{DEFAULT_PROJECT}'", ("Error creating warehouse in catalog",))
        if profile.get("flavor") == "aws" and profile.get("sts-enabled") \
                and not (profile.get("sts-role-arn") or profile.get("assume-role-arn")):
            return _error(400, "Invalidsts-role-arn", "Either `sts-role-arn` or `assume-role-arn` is required "
                          "for Storage Profiles with AWS flavor if STS is enabled.")
        for w in self.warehouses.values():
            if _overlaps(w.profile, profile):
                return _error(400, "CreateWarehouseStorageProfileOverlap",
                              f"Storage profile overlaps with existing warehouse {w.name}")
        warehouse = Warehouse(str(uuid.uuid4()), name, profile, body.get("storage-credential") or {},
                              body.get("delete-profile"))
        self.warehouses[warehouse.id] = warehouse
        self.namespaces[warehouse.id] = set()
        if self.authz is not None:  # its creator owns it
            self.authz.add_warehouse(warehouse.id, owner=principal)
        return _json(_warehouse_view(warehouse), status=201)

    def _get_warehouse(self, warehouse_id: str, principal: Optional[str]) -> Response:
        warehouse = self.warehouses.get(warehouse_id)
        if warehouse is None or not (self.authz is None or self.authz.allowed(principal, "can_get_metadata",
                                                                              warehouse_object(warehouse_id))):
            return _error(404, "NoSuchWarehouseException", f"A warehouse with id '{warehouse_id}' does not exist",
                          ("Warehouse not found or access denied",))
        return _json(_warehouse_view(warehouse))

    def _create_namespace(self, prefix: str, body: dict, principal: Optional[str]) -> Response:
        try:
            uuid.UUID(prefix)
        except ValueError:
            return _error(400, "WarehouseIdIsNotUUID", "Provided WarehouseId is not a valid UUID. Got: {s}")
        visible = self.authz is None or self.authz.allowed(principal, "can_get_metadata", warehouse_object(prefix))
        if prefix not in self.warehouses or not visible:
            return _error(404, "NoSuchWarehouseException", f"A warehouse with id '{prefix}' does not exist",
                          ("Warehouse not found or access denied",))
        levels = tuple(body["namespace"])
        existing = self.namespaces[prefix]
        if len(levels) > 1 and levels[:-1] not in existing:
            return _error(404, "NoSuchNamespaceException", f"Namespace with name '{NAMESPACE_SEP.join(levels[:-1])}' "
                          f"does not exist in warehouse '{prefix}'", ("Namespace not found or access denied",))
        parent = (namespace_object(self.namespace_ids[(prefix, levels[:-1])]) if len(levels) > 1
                  else warehouse_object(prefix))
        if self.authz is not None and not self.authz.allowed(principal, "can_create_namespace", parent):
            raise forbidden("namespace" if len(levels) > 1 else "warehouse", "can_create_namespace", prefix,
                            levels[:-1])
        if levels in existing:
            return _error(409, "AlreadyExistsException", f"Namespace name '{NAMESPACE_SEP.join(levels)}' already "
                          f"exist in warehouse '{prefix}'", ("Error creating Namespace in catalog",))
        existing.add(levels)
        namespace_id = self.namespace_ids[(prefix, levels)] = str(uuid.uuid4())
        if self.authz is not None:  # its creator owns it
            self.authz.add_child(namespace_object(namespace_id), parent, principal)
        profile = self.warehouses[prefix].profile
        location = f"s3://{profile['bucket']}/{(profile.get('key-prefix') or '').strip('/')}".rstrip("/")
        properties = {**(body.get("properties") or {}), "namespace_id": namespace_id, "location": location}
        return _json({"namespace": list(levels), "properties": properties})

    # --- auth -------------------------------------------------------------------------------
    def _authenticate(self, request: Request) -> Optional[str]:
        """The caller's principal with authorization on (None otherwise); ApiError 401 for a bad token."""
        if self.authz is not None:
            return self.authz.principal(request)
        auth = request.headers.get("Authorization")
        if not auth:
            raise ApiError(401, "MissingAuthorizationHeader", "Missing Authorization Header")
        if not self.accept(auth.removeprefix("Bearer ").strip()):
            raise ApiError(401, "AuthenticationFailed", "Authentication failed")
        return None

    # --- lifecycle ---------------------------------------------------------------------------
    def serve(self):
        """Start serving on 127.0.0.1 (a free port); returns the server (``shutdown()`` it)."""
        server = make_server("127.0.0.1", 0, self, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{server.server_port}"
        self._started = time.monotonic()
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="management-standin", daemon=True).start()
        return server


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: object, **kwargs: object) -> None:
        pass


def _details(errors: list) -> str:
    """openapi-core's errors with their causes (the schema errors say what is wrong)."""
    return "; ".join(f"{e}: {e.__cause__}" if e.__cause__ else str(e) for e in errors)


def _overlaps(a: dict, b: dict) -> bool:
    """Two S3 profiles share storage: same bucket, and one key prefix contains the other."""
    keys = ((p.get("key-prefix") or "").strip("/") for p in (a, b))
    pa, pb = (f"{k}/" if k else "" for k in keys)
    return a["bucket"] == b["bucket"] and (pa.startswith(pb) or pb.startswith(pa))


def _warehouse_view(w: Warehouse) -> dict:
    return warehouse_view(w.id, w.name, DEFAULT_PROJECT, w.profile, w.delete_profile)


def _json(payload: object, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, content_type="application/json")


def _error(code: int, type_: str, message: str, stack: tuple[str, ...] = ()) -> Response:
    return _json({"error": {"message": message, "type": type_, "code": code,
                            "stack": [*stack, f"Error ID: {uuid.uuid4()}"]}}, status=code)
