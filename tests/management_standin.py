"""A stand-in for the parts of Lakekeeper that ``lakeflow stack bootstrap`` calls, plus a token endpoint.

Real HTTP (werkzeug) on 127.0.0.1. Speaks Lakekeeper 0.13's wire format: ``/health``,
``POST /management/v1/bootstrap`` (204, then 400 ``CatalogAlreadyBootstrapped``),
``GET|POST /management/v1/warehouse`` (201 ``{"warehouse-id"}``, 409 ``WarehouseNameAlreadyExists``,
400 ``CreateWarehouseStorageProfileOverlap``), ``POST /catalog/v1/{prefix}/namespaces`` (200, 404
``NoSuchNamespaceException`` for a missing parent, 409 ``NamespaceAlreadyExists``, 400
``WarehouseIdIsNotUUID``), Iceberg error bodies with an error id, and plain-text 422 for bodies
that do not deserialize. Every request and response is validated against
``tests/management_openapi.yaml``; violations are kept in ``violations``.

With ``accept`` set (e.g. ``tests.oauth_standin.OAuthStandin.is_valid``) every call but
``/health`` needs ``Authorization: Bearer <token>`` that ``accept`` approves: 401
``MissingAuthorizationHeader`` without one, 401 ``AuthenticationFailed`` otherwise.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import unquote

from openapi_core import OpenAPI
from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

SPEC = Path(__file__).with_name("management_openapi.yaml")
NAMESPACE_SEP = "\x1f"


@dataclass
class Warehouse:
    id: str
    name: str
    profile: dict
    credential: dict  # kept like Lakekeeper does (encrypted there), never returned


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
    unhealthy_for_s: float = 0.0  # /health answers 503 for this long after start
    bootstrapped: bool = False
    warehouses: dict[str, Warehouse] = field(default_factory=dict)
    namespaces: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
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
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        spec_path = request.path.startswith(("/management/", "/catalog/")) or request.path == "/health"
        if spec_path:
            result = self._openapi.unmarshal_request(WerkzeugOpenAPIRequest(request))
            if result.errors:
                detail = "; ".join(str(e) for e in result.errors)
                self.violations.append(f"request {request.method} {request.path}: {detail}")
                # axum's Json extractor: plain text, 422
                return Response(f"Failed to deserialize the JSON body into the target type: {detail}",
                                status=422, content_type="text/plain; charset=utf-8")
        if request.path != "/health" and self.accept is not None:
            denied = self._authenticate(request)
            if denied is not None:
                return self._checked(request, denied)
        return self._checked(request, self._route(request))

    def _checked(self, request: Request, response: Response) -> Response:
        result = self._openapi.unmarshal_response(WerkzeugOpenAPIRequest(request),
                                                  WerkzeugOpenAPIResponse(response))
        if result.errors:
            detail = _details(result.errors)
            self.violations.append(f"response to {request.method} {request.path}: {detail}")
        return response

    def _route(self, request: Request) -> Response:
        path, method = request.path, request.method
        if path == "/health" and method == "GET":
            if time.monotonic() - self._started < self.unhealthy_for_s:
                return _json({"health": "unhealthy"}, status=503)
            return _json({"health": "ok"})
        if path == "/management/v1/bootstrap" and method == "POST":
            if self.bootstrapped:
                return _error(400, "CatalogAlreadyBootstrapped", "Catalog already bootstrapped")
            self.bootstrapped = True
            return Response(status=204)
        if path == "/management/v1/warehouse" and method == "GET":
            return _json({"warehouses": [_warehouse_view(w) for w in self.warehouses.values()]})
        if path == "/management/v1/warehouse" and method == "POST":
            return self._create_warehouse(request.get_json())
        parts = path.split("/")
        if len(parts) == 5 and parts[1:3] == ["catalog", "v1"] and parts[4] == "namespaces" \
                and method == "POST":
            return self._create_namespace(unquote(parts[3]), request.get_json())
        return Response(status=404)

    # --- the calls ---------------------------------------------------------------------------
    def _create_warehouse(self, body: dict) -> Response:
        name, profile = body["warehouse-name"], body["storage-profile"]
        if any(w.name == name for w in self.warehouses.values()):
            return _error(409, "WarehouseNameAlreadyExists",
                          f"Warehouse with this name ('{name}') already exists in the project.")
        for w in self.warehouses.values():
            if _overlaps(w.profile, profile):
                return _error(400, "CreateWarehouseStorageProfileOverlap",
                              f"Storage profile overlaps with existing warehouse {w.name}")
        warehouse = Warehouse(str(uuid.uuid4()), name, profile, body.get("storage-credential") or {})
        self.warehouses[warehouse.id] = warehouse
        self.namespaces[warehouse.id] = set()
        return _json({"warehouse-id": warehouse.id}, status=201)

    def _create_namespace(self, prefix: str, body: dict) -> Response:
        try:
            uuid.UUID(prefix)
        except ValueError:
            return _error(400, "WarehouseIdIsNotUUID", "Provided warehouse id is not a valid UUID")
        if prefix not in self.warehouses:
            return _error(404, "NoSuchWarehouseException", "Warehouse not found")
        levels = tuple(body["namespace"])
        existing = self.namespaces[prefix]
        if len(levels) > 1 and levels[:-1] not in existing:
            return _error(404, "NoSuchNamespaceException",
                          f"Parent namespace {NAMESPACE_SEP.join(levels[:-1])!r} not found")
        if levels in existing:
            return _error(409, "NamespaceAlreadyExists", "Namespace already exists")
        existing.add(levels)
        return _json({"namespace": list(levels), "properties": body.get("properties") or {}})

    # --- auth -------------------------------------------------------------------------------
    def _authenticate(self, request: Request) -> Optional[Response]:
        auth = request.headers.get("Authorization")
        if not auth:
            return _error(401, "MissingAuthorizationHeader", "Authorization header missing")
        if not self.accept(auth.removeprefix("Bearer ").strip()):
            return _error(401, "AuthenticationFailed", "Unauthorized")
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
    return {"id": w.id, "name": w.name, "project-id": "00000000-0000-0000-0000-000000000000",
            "storage-profile": w.profile, "delete-profile": {"type": "hard"}, "status": "active",
            "protected": False}


def _json(payload: object, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, content_type="application/json")


def _error(code: int, type_: str, message: str) -> Response:
    return _json({"error": {"message": message, "type": type_, "code": code,
                            "stack": [f"Error ID: {uuid.uuid4()}"]}}, status=code)
