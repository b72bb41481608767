"""A Lakekeeper stand-in: a real HTTP server on 127.0.0.1 speaking Lakekeeper's wire format.

It serves the generic-table API (``/lakekeeper/v1``) and warehouse-name resolution
(``GET /catalog/v1/config``); warehouses and namespaces are set up in Python (``add_warehouse``,
``create_namespace``; the management API has its own stand-in, ``tests/standins/management.py``).
Every request to ``/lakekeeper/v1`` and every answer it gives there is validated against
Lakekeeper's OpenAPI document (``tests/contracts/``) with openapi-core; violations are collected
in ``.violations`` (the ``lakekeeper`` fixture fails the test when any are left). Vended credentials come from a real
STS (moto's server): AssumeRole of a role whose policy allows only the table prefix.

Fault knobs (``.faults``): N× 503 with Retry-After, 429, connection reset (before or after the
server acted), plain-text errors, slow answers, answers that trickle in or are padded past any
sensible size (valid JSON either way); and auth (``.revoke``, ``.accept``). With ``.authz`` set (a
``tests.standins.authz.Authorizer``) every call is authorized as Lakekeeper with OpenFGA does it:
what the principal cannot see is 404, what it may not do 403, and the credentials a load vends are
read-only with ``select`` and read-write with ``modify`` (that module's docstring has the model);
it then also answers the Iceberg REST namespace calls (list, load with the namespace's id, create).
Wire facts it follows: ``docs/lakekeeper.md`` and ``lakekeeper-api/NOTES.md``.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import re
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import boto3
from botocore.config import Config
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

SPEC = Path(__file__).parents[1] / "contracts" / "lakekeeper-generic-table-open-api.yaml"
FORMAT_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
DEFAULT_PROJECT = "00000000-0000-0000-0000-000000000000"
GZIP_MIN_BYTES = 32  # Lakekeeper (tower-http) leaves shorter answers uncompressed
# What Lakekeeper 0.13.3's /catalog/v1/config lists (recorded-0.13.3, exchange 40-compare-config-by-name).
ICEBERG_ENDPOINTS = [
    "GET /v1/config", "GET /v1/{prefix}/namespaces", "HEAD /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces", "GET /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}", "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables", "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials", "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics", "POST /v1/{prefix}/transactions/commit",
    "POST /v1/{prefix}/namespaces/{namespace}/views", "GET /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}", "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}", "POST /v1/{prefix}/views/rename",
]
_CREATED = itertools.count()  # creation order: Lakekeeper lists tables in it
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


@lru_cache(maxsize=1)
def _openapi():
    from openapi_core import OpenAPI

    return OpenAPI.from_file_path(str(SPEC))


# -- state ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class S3Account:
    """An S3 + STS endpoint and the storage credential Lakekeeper itself holds for it."""

    endpoint: str
    region: str = "us-east-1"
    access_key: str = "bootstrap"
    secret_key: str = "bootstrap"

    def client(self, service: str, **kwargs: Any):
        return boto3.client(service, endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key, **kwargs)


@dataclass
class Table:
    id: str
    namespace: tuple[str, ...]
    name: str
    format: str
    location: str
    doc: Optional[str] = None
    properties: dict[str, str] = field(default_factory=dict)
    created: int = field(default_factory=lambda: next(_CREATED))

    def wire(self) -> dict[str, Any]:
        """As Lakekeeper answers it: ``doc`` and ``properties`` only when set."""
        out: dict[str, Any] = {"name": self.name, "format": self.format,
                               "base-location": self.location, "protected": False}
        if self.properties:
            out["properties"] = dict(self.properties)
        if self.doc is not None:
            out["doc"] = self.doc
        return out


@dataclass
class Warehouse:
    id: str
    name: str
    s3: S3Account
    bucket: str
    key_prefix: str
    vended_endpoint: str  # what Lakekeeper vends as s3.endpoint (its own view, e.g. http://minio:9000)
    sts_enabled: bool = True
    sts_validity_s: int = 3600  # AssumeRole DurationSeconds (under 900: moto only, see _vend)
    # Credentials are cached and handed out unchanged for half their lifetime (as Lakekeeper does).
    # Set, this models the end of that window: every credential is handed out with this much left
    # (half of a lifetime twice as long, STS accepting none under 900 s) and the next call gets new
    # ones. None: fresh STS credentials, cached for half their lifetime.
    vended_lifetime_s: Optional[float] = None
    path_style: bool = True
    namespaces: set[tuple[str, ...]] = field(default_factory=set)
    namespace_ids: dict[tuple[str, ...], str] = field(default_factory=dict)
    tables: dict[tuple[tuple[str, ...], str], Table] = field(default_factory=dict)
    idempotency: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    in_flight: set[str] = field(default_factory=set)
    roles: dict[tuple[str, str], str] = field(default_factory=dict)  # (table id, access) -> role ARN
    iceberg_tables: set[tuple[tuple[str, ...], str]] = field(default_factory=set)  # names taken
    # (table id, access) -> (when minted, its storage credential): handed out again for half its lifetime
    vended: dict[tuple[str, str], tuple[float, dict[str, Any]]] = field(default_factory=dict)
    project_id: str = DEFAULT_PROJECT
    soft_delete: bool = False  # delete-profile soft: Iceberg clients are told not to delete files

    @property
    def base(self) -> str:
        return f"s3://{self.bucket}/{self.key_prefix}".rstrip("/")


@dataclass(frozen=True)
class Recorded:
    """One request the stand-in received (Authorization redacted) and the status it answered."""

    method: str
    path: str  # decoded (U+001F between namespace levels)
    raw: str  # as sent, percent-encoded, with the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any
    status: int


@dataclass
class Fault:
    kind: str  # "status" | "plain" | "reset" | "delay" | "trickle" | "pad"
    times: int = 1
    status: int = 503
    retry_after: Optional[str] = None
    text: str = ""
    after: bool = False  # reset: after the server acted (the answer is lost, the change is made)
    seconds: float = 0.0  # delay; trickle: the pause between two bytes
    pad: int = 0  # pad: spaces appended to the JSON answer
    method: Optional[str] = None
    path_contains: Optional[str] = None

    def matches(self, method: str, path: str) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path_contains is None or self.path_contains in path))


class Faults:
    """Queued faults; each applies to the next ``times`` matching requests to ``/lakekeeper/v1``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[Fault] = []
        self.bogus_credentials = False  # vend keys that S3 does not know

    def unavailable(self, times: int = 1, retry_after: Optional[str] = "1", **match: str) -> None:
        """503 (maintenance) with ``Retry-After``."""
        self._add(Fault("status", times, 503, retry_after, **match))

    def throttle(self, times: int = 1, retry_after: Optional[str] = None, **match: str) -> None:
        """429 Too Many Requests (JSON error body)."""
        self._add(Fault("status", times, 429, retry_after, **match))

    def plain_text(self, status: int = 422, text: str = "Failed to deserialize the JSON body "
                   "into the target type: missing field `name`", times: int = 1, **match: str) -> None:
        """A plain-text error, as Lakekeeper answers malformed bodies or query values."""
        self._add(Fault("plain", times, status, text=text, **match))

    def reset(self, times: int = 1, after: bool = False, **match: str) -> None:
        """Reset the connection instead of answering (``after``: once the request took effect)."""
        self._add(Fault("reset", times, after=after, **match))

    def delay(self, seconds: float, times: int = 1, **match: str) -> None:
        """Answer ``seconds`` late; a mutation is "in progress" meanwhile and takes effect at the end."""
        self._add(Fault("delay", times, seconds=seconds, **match))

    def trickle(self, seconds_per_byte: float, times: int = 1, **match: str) -> None:
        """Send the (valid) answer's body one byte every ``seconds_per_byte``."""
        self._add(Fault("trickle", times, seconds=seconds_per_byte, **match))

    def oversize(self, pad: int, times: int = 1, **match: str) -> None:
        """Append ``pad`` spaces to the (valid) JSON answer: still JSON, just huge."""
        self._add(Fault("pad", times, pad=pad, **match))

    def pending(self) -> int:
        """How many injected faults have not been served yet."""
        with self._lock:
            return sum(f.times for f in self._queue)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
        self.bogus_credentials = False

    def take(self, method: str, path: str) -> Optional[Fault]:
        with self._lock:
            for fault in self._queue:
                if fault.matches(method, path):
                    fault.times -= 1
                    if fault.times <= 0:
                        self._queue.remove(fault)
                    return fault
        return None

    def _add(self, fault: Fault) -> None:
        with self._lock:
            self._queue.append(fault)


class ApiError(Exception):
    """An error answer; ``stack`` is the context Lakekeeper puts before the ``Error ID`` line."""

    def __init__(self, code: int, type: str, message: str, stack: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code, self.type, self.message, self.stack = code, type, message, stack


class _ResetConnection(ConnectionResetError):
    """Raised after the socket was reset on purpose: werkzeug treats it as a dropped connection."""


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


# -- the server ----------------------------------------------------------------------------------

ROUTES = Map([
    Rule("/catalog/v1/config", endpoint="config", methods=["GET"]),
    Rule("/management/v1/warehouse/<warehouse_id>", endpoint="get_warehouse", methods=["GET"]),
    Rule("/lakekeeper/v1/<prefix>/generic-tables/rename", endpoint="rename", methods=["POST"]),
    Rule("/lakekeeper/v1/<prefix>/namespaces/<namespace>/generic-tables", endpoint="tables",
         methods=["GET", "POST"]),
    Rule("/lakekeeper/v1/<prefix>/namespaces/<namespace>/generic-tables/<table>", endpoint="table",
         methods=["GET", "DELETE"]),
    Rule("/lakekeeper/v1/<prefix>/namespaces/<namespace>/generic-tables/<table>/credentials",
         endpoint="credentials", methods=["GET"]),
], strict_slashes=False)
# With authorization on, also Lakekeeper's own answers to the Iceberg REST namespace calls (their
# ids, what the principal may see); without, the stand-in serves no Iceberg REST catalog at all.
AUTHZ_ROUTES = Map([
    *(rule.empty() for rule in ROUTES.iter_rules()),
    Rule("/catalog/v1/<prefix>/namespaces", endpoint="namespaces", methods=["GET", "POST"]),
    Rule("/catalog/v1/<prefix>/namespaces/<namespace>", endpoint="namespace_route", methods=["GET"]),
], strict_slashes=False)


class LakekeeperStandin:
    """The server, its state and its knobs. Start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(self, s3: S3Account, *, token: Optional[str] = None, page_size: int = 100) -> None:
        self.s3 = s3
        self.token = token or f"standin-{uuid.uuid4().hex}"
        self.page_size = page_size
        self.faults = Faults()
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.purged: list[str] = []  # table locations whose data a drop deleted
        self.vended_secrets: list[str] = []  # every secret key and session token handed out
        self.vended_access_keys: list[str] = []  # every access key id handed out
        # Vend s3:ListBucketMultipartUploads on the bucket too: a deployment whose STS policy lets
        # `lakeflow maintain` find the open uploads it aborts (the policy of lakekeeper-api/NOTES.md,
        # the default here, does not). Set before a table's first vend (its role is made then).
        self.vend_upload_listing = False
        self.warehouses: dict[str, Warehouse] = {}
        self.warehouse: Optional[Warehouse] = None  # the first one added: what the fixtures use
        self.authz: Any = None  # a tests.standins.authz.Authorizer: authorization on
        self._validator: Optional[Callable[[str], bool]] = lambda t: t == self.token
        self._revoked: set[str] = set()
        self._lock = threading.RLock()
        self._server = make_server("127.0.0.1", 0, self, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                                        name="lakekeeper-standin")

    # -- lifecycle and set-up ------------------------------------------------------------------

    def start(self) -> LakekeeperStandin:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def restart(self, down_s: float = 0.0) -> None:
        """Stop serving, wait ``down_s``, serve again on the same port with the same state (as a
        restarted Lakekeeper keeps its database): ``make soak``'s restart."""
        port = self._server.server_port
        self.stop()
        self._thread.join()
        time.sleep(down_s)
        self._server = make_server("127.0.0.1", port, self, threaded=True, request_handler=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                                        name="lakekeeper-standin")
        self._thread.start()

    def add_warehouse(self, name: str, *, bucket: Optional[str] = None, key_prefix: str = "warehouse",
                      s3: Optional[S3Account] = None, vended_endpoint: Optional[str] = None,
                      create_bucket: bool = True, warehouse_id: Optional[str] = None,
                      sts_enabled: bool = True, soft_delete: bool = False) -> Warehouse:
        """A warehouse on ``s3`` (default: the stand-in's account) with a fresh bucket."""
        s3 = s3 or self.s3
        bucket = bucket or f"lk-{uuid.uuid4().hex[:12]}"
        if create_bucket:
            s3.client("s3").create_bucket(Bucket=bucket)
        wh = Warehouse(warehouse_id or str(uuid.uuid4()), name, s3, bucket, key_prefix.strip("/"),
                       vended_endpoint or s3.endpoint, sts_enabled=sts_enabled, soft_delete=soft_delete)
        with self._lock:
            self.warehouses[wh.id] = wh
            self.warehouse = self.warehouse or wh
        if self.authz is not None:
            self.authz.add_warehouse(wh.id)
        return wh

    @property
    def warehouse_id(self) -> str:
        assert self.warehouse is not None, "no warehouse added"
        return self.warehouse.id

    @property
    def warehouse_name(self) -> str:
        assert self.warehouse is not None, "no warehouse added"
        return self.warehouse.name

    def create_namespace(self, levels: tuple[str, ...], warehouse: Optional[Warehouse] = None,
                         owner: Optional[str] = None) -> str:
        """Create a namespace (and its parents) in ``warehouse`` (default: the first one), owned by
        principal ``owner`` when authorization is on; returns its id."""
        warehouse = warehouse or self.warehouse
        assert warehouse is not None, "no warehouse added"
        with self._lock:
            for i in range(1, len(levels) + 1):
                level = tuple(levels[:i])
                if level in warehouse.namespaces:
                    continue
                warehouse.namespaces.add(level)
                warehouse.namespace_ids[level] = str(uuid.uuid4())
                if self.authz is not None:
                    parent = (namespace_object(warehouse.namespace_ids[level[:-1]]) if len(level) > 1
                              else warehouse_object(warehouse.id))
                    self.authz.add_child(namespace_object(warehouse.namespace_ids[level]), parent, owner)
            return warehouse.namespace_ids[tuple(levels)]

    # -- auth knobs ----------------------------------------------------------------------------

    def accept(self, validator: Optional[Callable[[str], bool]]) -> None:
        """Which bearer tokens are valid (e.g. an OAuth stand-in's ``is_valid``); None: auth off."""
        self._validator = validator

    def revoke(self, token: str) -> None:
        """From now on ``token`` is answered 401 AuthenticationFailed (an expired token)."""
        self._revoked.add(token)

    # -- observation ---------------------------------------------------------------------------

    def calls(self, method: Optional[str] = None, contains: str = "") -> list[Recorded]:
        """Recorded requests, filtered by method and a path fragment."""
        return [r for r in list(self.requests)
                if (method is None or r.method == method) and contains in r.path]

    # -- WSGI ----------------------------------------------------------------------------------

    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        body = request.get_data(cache=True)
        contract = request.path.startswith("/lakekeeper/v1/")
        if contract:
            self._check_request(request)
        fault = self.faults.take(request.method, request.path) if contract else None
        if fault and fault.kind == "reset" and not fault.after:
            self._record(request, body, 0)
            self._reset(environ)
        if fault and fault.kind in ("status", "plain"):
            response = self._fault_response(fault)
        else:
            if fault and fault.kind == "delay":
                environ["standin.delay"] = fault.seconds
            response = self._dispatch(request)
        self._record(request, body, response.status_code)
        # Injected 5xx and plain-text answers are off-spec on purpose: real server behaviour
        # that the OpenAPI document omits.
        # So is the plain-text 422 the server answers a body that does not deserialize.
        off_spec = (fault is not None and (fault.kind == "plain" or (fault.kind == "status" and fault.status >= 500))
                    or (response.status_code == 422 and response.mimetype == "text/plain"))
        if contract and not off_spec:
            self._check_response(request, response)
        if fault and fault.kind == "reset":  # after=True: the change is made, the answer lost
            self._reset(environ)
        if fault and fault.kind in ("trickle", "pad"):
            _reshape(response, fault)
            response.headers["x-request-id"] = str(uuid.uuid4())
        else:
            as_lakekeeper_sends(request, response)
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        try:
            request.environ["standin.principal"] = self._authenticate(request)
            routes = ROUTES if self.authz is None else AUTHZ_ROUTES
            endpoint, args = routes.bind_to_environ(request.environ).match()
            status, payload, headers = getattr(self, f"_{endpoint}")(request, **args)
            time.sleep(request.environ.pop("standin.delay", 0))  # a slow read: answered late
        except ApiError as exc:
            return _error(exc.code, exc.type, exc.message, exc.stack)
        except _NotDeserialized as exc:
            return Response(f"Failed to deserialize the JSON body into the target type: {exc}", status=422,
                            content_type="text/plain; charset=utf-8")
        except HTTPException as exc:
            return _error(exc.code or 500, type(exc).__name__, exc.description or "")
        if status == 204:
            return Response(status=204, headers=headers)
        return Response(json.dumps(payload), status=status, content_type="application/json",
                        headers=headers)

    def _authenticate(self, request: Request) -> Optional[str]:
        """The caller's principal with authorization on (None otherwise); 401 for a bad token."""
        header = request.headers.get("Authorization")
        if self.authz is not None:
            if header and header.removeprefix("Bearer ").strip() in self._revoked:
                raise ApiError(401, "AuthenticationFailed", "Authentication failed")
            return self.authz.principal(request)
        if self._validator is None:
            return None
        if not header:
            raise ApiError(401, "MissingAuthorizationHeader", "Missing Authorization Header")
        token = header.removeprefix("Bearer ").strip()
        if token in self._revoked or not self._validator(token):
            raise ApiError(401, "AuthenticationFailed", "Authentication failed")
        return None

    # -- contract checks -----------------------------------------------------------------------

    def _check_request(self, request: Request) -> None:
        from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest
        from openapi_core.validation.request.exceptions import SecurityValidationError

        result = _openapi().unmarshal_request(WerkzeugOpenAPIRequest(request))
        for error in result.errors:
            if isinstance(error, SecurityValidationError):
                continue  # the stand-in answers a missing/bad token with Lakekeeper's 401
            if _page_size_ok(error, request):
                continue
            self.violations.append(f"request {request.method} {request.path}: {_explain(error)}")

    def _check_response(self, request: Request, response: Response) -> None:
        from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse

        result = _openapi().unmarshal_response(WerkzeugOpenAPIRequest(request),
                                               WerkzeugOpenAPIResponse(response))
        for error in result.errors:
            self.violations.append(f"response {response.status_code} to {request.method} "
                                   f"{request.path}: {_explain(error)}")

    # -- faults --------------------------------------------------------------------------------

    def _fault_response(self, fault: Fault) -> Response:
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        if fault.kind == "plain":
            return Response(fault.text, status=fault.status, content_type="text/plain; charset=utf-8")
        kind = {503: "ServiceUnavailable", 429: "TooManyRequests"}.get(fault.status, "InjectedFault")
        return _error(fault.status, kind, f"injected {fault.status}", headers=headers)

    def _reset(self, environ: dict) -> None:
        sock: socket.socket = environ["werkzeug.socket"]
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)  # the peer sees the connection drop; the final close sends RST
        raise _ResetConnection("connection reset by the stand-in")

    def _record(self, request: Request, body: bytes, status: int) -> None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if "authorization" in headers:
            headers["authorization"] = "Bearer ***"
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.full_path
        self.requests.append(Recorded(request.method, request.path, raw, dict(request.args.items()),
                                      headers, parsed, status))

    # -- routes: warehouse name -> id (Iceberg REST config; outside the generic-table contract)

    def _config(self, request: Request) -> tuple[int, Any, dict]:
        arg = request.args.get("warehouse")
        if not arg:
            raise ApiError(400, "GetConfigNoWarehouseProvided", "No warehouse specified. Please "
                           "specify the 'warehouse' parameter in the GET /config request.")
        if self.authz is not None:  # a principal becomes a user on its first config call
            self.authz.ensure_user(request.environ["standin.principal"])
        project, _, name = arg.rpartition("/")  # <name> or <project-id>/<name>: never the id
        wh = next((w for w in self.warehouses.values()
                   if w.name == name and project in ("", w.project_id)), None)
        if wh is None or not self._can(request, "can_get_config", warehouse_object(wh.id)):
            raise ApiError(404, "NoSuchWarehouseException", f"A warehouse '{arg}' does not exist")
        defaults = {"rest-page-size": str(self.page_size), "prefix": wh.id}
        if wh.soft_delete:
            defaults["s3.delete-enabled"] = "false"
        return 200, {"defaults": defaults,
                     "overrides": {"idempotency-key-lifetime": "PT30M", "uri": f"{self.url}/catalog"},
                     "endpoints": ICEBERG_ENDPOINTS}, {}

    def _get_warehouse(self, request: Request, warehouse_id: str) -> tuple[int, Any, dict]:
        """``GET /management/v1/warehouse/{id}``: the warehouse as the management API shows it."""
        return 200, _warehouse_view(self._visible_warehouse(request, warehouse_id, "can_get_metadata")), {}

    # -- routes: namespaces (Iceberg REST; with authorization on) -------------------------------

    def _namespaces(self, request: Request, prefix: str) -> tuple[int, Any, dict]:
        if request.method == "GET":
            wh = self._visible_warehouse(request, prefix, "can_list_namespaces")
            parent = tuple(request.args["parent"].split("\x1f")) if request.args.get("parent") else ()
            with self._lock:
                children = sorted(n for n in wh.namespaces if len(n) == len(parent) + 1 and n[:-1] == parent)
            listed = [list(n) for n in children if self._sees_namespace(request, wh, n, "can_include_in_list")]
            return 200, {"namespaces": listed}, {}
        wh = self._visible_warehouse(request, prefix, "can_get_metadata")
        body = request.get_json(silent=True) or {}
        levels = tuple(body.get("namespace") or ())
        nested = len(levels) > 1  # created in the parent namespace, else in the warehouse
        if nested:
            self._namespace(prefix, "\x1f".join(levels[:-1]))  # the parent exists
        self._require(request, "can_create_namespace",
                      namespace_object(wh.namespace_ids[levels[:-1]]) if nested else warehouse_object(wh.id),
                      forbidden("namespace" if nested else "warehouse", "can_create_namespace", wh.id, levels[:-1]))
        if levels in wh.namespaces:
            raise ApiError(409, "AlreadyExistsException", f"Namespace name '{'.'.join(levels)}' already exist in "
                           f"warehouse '{wh.id}'", ("Error creating Namespace in catalog",))
        namespace_id = self.create_namespace(levels, wh, owner=request.environ["standin.principal"])
        properties = {**(body.get("properties") or {}), "location": wh.base, "namespace_id": namespace_id}
        return 200, {"namespace": list(levels), "properties": properties}, {}

    def _namespace_route(self, request: Request, prefix: str, namespace: str) -> tuple[int, Any, dict]:
        """Load a namespace (its id is a property), or ``HEAD``: does it exist."""
        wh, levels = self._warehouse(prefix), self._visible_namespace(request, prefix, namespace)
        if request.method == "HEAD":
            return 204, None, {}
        properties = {"namespace_id": wh.namespace_ids[levels], "location": wh.base}
        return 200, {"namespace": list(levels), "properties": properties}, {}

    # -- routes: generic tables ----------------------------------------------------------------

    def _tables(self, request: Request, prefix: str, namespace: str) -> tuple[int, Any, dict]:
        wh, ns = self._warehouse(prefix), self._visible_namespace(request, prefix, namespace)
        if request.method == "GET":
            return self._list(request, wh, ns)
        if not self._sees_namespace(request, wh, ns, "can_create_generic_table"):
            raise forbidden("namespace", "can_create_generic_table", wh.id, ns)
        return self._idempotent(request, wh, lambda: self._create(request, wh, ns),
                                replay=lambda: self._replayed_create(request, wh, ns))

    def _list(self, request: Request, wh: Warehouse, ns: tuple[str, ...]) -> tuple[int, Any, dict]:
        size = int(request.args.get("pageSize") or self.page_size)
        token = request.args.get("pageToken")
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("offset:")) if token else 0
        except ValueError:
            raise ApiError(400, "InvalidPageToken", f"Invalid page token {token!r}") from None
        with self._lock:
            tables = sorted((t for (n, _), t in wh.tables.items() if n == ns), key=lambda t: t.created)
        tables = [t for t in tables if self._can(request, "can_include_in_list", _generic(wh, t))]
        page = tables[start:start + size]
        payload: dict[str, Any] = {"identifiers": [
            {"namespace": list(ns), "name": t.name, "format": t.format, "id": t.id} for t in page]}
        if page:  # a token whenever the page had rows: the client stops at an empty page
            payload["next-page-token"] = base64.urlsafe_b64encode(
                f"offset:{start + len(page)}".encode()).decode()
        return 200, payload, {}

    def _create(self, request: Request, wh: Warehouse, ns: tuple[str, ...]) -> tuple[int, Any, dict]:
        body = _create_body(request)
        name, fmt = body["name"], body["format"]
        if not name:
            raise ApiError(400, "BadRequestException", "Table name must not be empty")
        if not FORMAT_RE.match(fmt):
            raise ApiError(400, "InvalidFormat", "Generic table format must start with a lowercase letter, "
                           "contain only lowercase letters, digits, '_' or '-', and be at most 64 characters.")
        with self._lock:
            if (ns, name) in wh.tables or (ns, name) in wh.iceberg_tables:
                raise ApiError(409, "GenericTableAlreadyExists", "Generic table already exists",
                               ("Error creating generic table",))
            table_id = str(uuid.uuid4())
            location = (body.get("base-location") or f"{wh.base}/{table_id}").rstrip("/")
            if not (location + "/").startswith(wh.base + "/"):
                raise ApiError(400, "InvalidLocation", f"Provided location {location} is not a valid "
                               f"sublocation of the storage profile {wh.base}.")
            for other in wh.tables.values():
                a, b = location + "/", other.location + "/"
                if a.startswith(b) or b.startswith(a):
                    raise ApiError(409, "LocationAlreadyTaken",
                                   f"Location '{location}' is already taken by another table or view.",
                                   ("Error creating tabular in catalog", "Error creating generic table"))
            table = Table(table_id, ns, name, fmt, location, body.get("doc"),
                          dict(body.get("properties") or {}))
            wh.tables[(ns, name)] = table
            if self.authz is not None:  # its creator owns it
                self.authz.add_child(_generic(wh, table), namespace_object(wh.namespace_ids[ns]),
                                     request.environ["standin.principal"])
        return 200, {"table": table.wire()}, {}

    def _replayed_create(self, request: Request, wh: Warehouse, ns: tuple[str, ...]) -> tuple[int, Any, dict]:
        """A create replayed with a used ``Idempotency-Key``: Lakekeeper answers a load (without
        keys) of the table the *new* body names — 404 when there is none."""
        return 200, self._load(wh, self._find(wh, ns, _create_body(request)["name"]), vended=False), {}

    def _table(self, request: Request, prefix: str, namespace: str, table: str) -> tuple[int, Any, dict]:
        wh, ns = self._warehouse(prefix), self._namespace(prefix, namespace)
        if request.method == "DELETE":
            return self._idempotent(request, wh, lambda: self._drop(request, wh, ns, table))
        found = self._visible_table(request, wh, ns, table)
        access = self._storage_access(request, wh, found)
        if access is None:  # describe only: metadata and location, no storage access
            return 200, {"table": found.wire()}, {}
        mode = request.headers.get("X-Iceberg-Access-Delegation", "vended-credentials")
        return 200, self._load(wh, found, vended=mode != "client-managed", access=access), {}

    def _load(self, wh: Warehouse, table: Table, *, vended: bool, access: str = "write") -> dict[str, Any]:
        """A load answer: the storage settings in ``config`` (with ``region``) and one credential
        entry, with STS keys (``access``: "read" or "write") when ``vended`` and the warehouse
        vends, key-less otherwise."""
        cred = self._vend(wh, table, access) if vended and wh.sts_enabled else {"prefix": table.location,
                                                                                 "config": self._config_keys(wh)}
        config = {**{k: v for k, v in cred["config"].items() if "expir" not in k}, "region": wh.s3.region}
        return {"table": table.wire(), "config": config, "storage-credentials": [cred]}

    def _credentials(self, request: Request, prefix: str, namespace: str, table: str) -> tuple[int, Any, dict]:
        wh, ns = self._warehouse(prefix), self._namespace(prefix, namespace)
        found = self._visible_table(request, wh, ns, table)
        access = self._storage_access(request, wh, found)
        if access is None:  # no data access: Lakekeeper answers as if the table did not exist
            raise _no_such_generic_table()
        cred = self._vend(wh, found, access) if wh.sts_enabled else {"prefix": found.location, "config": {}}
        return 200, {"storage-credentials": [cred]}, {}

    def _drop(self, request: Request, wh: Warehouse, ns: tuple[str, ...], name: str) -> tuple[int, Any, dict]:
        purge = request.args.get("purgeRequested", "true").lower() != "false"  # default: purge
        with self._lock:
            table = self._visible_table(request, wh, ns, name)
            self._require(request, "can_drop", _generic(wh, table), forbidden("generic table", "can_drop", wh.id, ns,
                                                                              name))
            del wh.tables[(ns, name)]
            if self.authz is not None:
                self.authz.remove(_generic(wh, table))
        if purge:
            self._purge(wh, table.location)
        return 204, None, {}

    def _rename(self, request: Request, prefix: str) -> tuple[int, Any, dict]:
        wh = self._warehouse(prefix)

        def rename() -> tuple[int, Any, dict]:
            body = request.get_json(silent=True) or {}
            src, dst = body.get("source") or {}, body.get("destination") or {}
            src_ns, dst_ns = tuple(src.get("namespace") or ()), tuple(dst.get("namespace") or ())
            with self._lock:
                if self.authz is not None:  # as Lakekeeper: the destination first, then the source
                    self._namespace(prefix, "\x1f".join(src_ns))
                    self._visible_namespace(request, prefix, "\x1f".join(dst_ns))
                    if not self._sees_namespace(request, wh, dst_ns, "can_create_generic_table"):
                        raise forbidden("namespace", "can_create_generic_table", wh.id, dst_ns)
                table = self._visible_table(request, wh, src_ns, str(src.get("name")))
                self._require(request, "can_rename", _generic(wh, table),
                              forbidden("generic table", "can_rename", wh.id, src_ns, table.name))
                if dst_ns not in wh.namespaces:
                    raise ApiError(404, "NoSuchNamespaceException", f"Namespace {'.'.join(dst_ns)} does not exist")
                if (dst_ns, dst.get("name")) in wh.tables:
                    raise ApiError(409, "GenericTableAlreadyExists", f"{dst.get('name')} already exists")
                del wh.tables[(src_ns, table.name)]
                table.namespace, table.name = dst_ns, str(dst["name"])
                wh.tables[(dst_ns, table.name)] = table
            return 204, None, {}

        return self._idempotent(request, wh, rename)

    # -- helpers -------------------------------------------------------------------------------

    def _idempotent(self, request: Request, wh: Warehouse, act: Callable[[], tuple[int, Any, dict]],
                    replay: Optional[Callable[[], tuple[int, Any, dict]]] = None) -> tuple[int, Any, dict]:
        """Run a mutation once per ``Idempotency-Key``: a replay gets ``replay()``'s answer, or the
        first success back."""
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return act()
        with self._lock:
            if key in wh.idempotency:
                if replay is not None:
                    return replay()
                status, raw = wh.idempotency[key]
                return status, json.loads(raw) if raw else None, {}
            if key in wh.in_flight:
                raise ApiError(409, "RequestInProgress", "A request with this idempotency key is in progress")
            wh.in_flight.add(key)
        try:
            time.sleep(request.environ.pop("standin.delay", 0))  # a slow mutation: in flight meanwhile
            status, payload, headers = act()
            with self._lock:
                wh.idempotency[key] = (status, json.dumps(payload).encode() if payload is not None else b"")
            return status, payload, headers
        finally:
            with self._lock:
                wh.in_flight.discard(key)

    def _warehouse(self, prefix: str) -> Warehouse:
        if not UUID_RE.match(prefix):
            raise ApiError(400, "WarehouseIdIsNotUUID", "Provided WarehouseId is not a valid UUID. Got: {s}")
        wh = self.warehouses.get(prefix.lower())
        if wh is None:
            raise _no_such_warehouse(prefix)
        return wh

    def _namespace(self, prefix: str, segment: str) -> tuple[str, ...]:
        levels = tuple(segment.split("\x1f"))
        wh = self._warehouse(prefix)
        if levels not in wh.namespaces:
            raise _no_such_namespace(wh, levels)
        return levels

    def _find(self, wh: Warehouse, ns: tuple[str, ...], name: str) -> Table:
        table = wh.tables.get((ns, name))
        if table is None:
            raise _no_such_generic_table()
        return table

    # -- authorization (each a no-op with authorization off) -----------------------------------

    def _can(self, request: Request, action: str, obj: str) -> bool:
        return self.authz is None or self.authz.allowed(request.environ["standin.principal"], action, obj)

    def _require(self, request: Request, action: str, obj: str, refusal: ApiError) -> None:
        if not self._can(request, action, obj):
            raise refusal

    def _visible_warehouse(self, request: Request, prefix: str, action: str) -> Warehouse:
        """The warehouse, 404 as if it did not exist unless the principal holds ``action`` on it."""
        wh = self._warehouse(prefix)
        if not self._can(request, action, warehouse_object(wh.id)):
            raise _no_such_warehouse(prefix)
        return wh

    def _visible_namespace(self, request: Request, prefix: str, segment: str) -> tuple[str, ...]:
        levels = self._namespace(prefix, segment)
        wh = self._warehouse(prefix)
        if not self._sees_namespace(request, wh, levels, "can_get_metadata"):
            raise _no_such_namespace(wh, levels)
        return levels

    def _sees_namespace(self, request: Request, wh: Warehouse, levels: tuple[str, ...], action: str) -> bool:
        """Whether the principal holds ``action`` on the namespace (always, authorization off)."""
        return self.authz is None or self._can(request, action, namespace_object(wh.namespace_ids[levels]))

    def _visible_table(self, request: Request, wh: Warehouse, ns: tuple[str, ...], name: str) -> Table:
        table = self._find(wh, ns, name)
        if not self._can(request, "can_get_metadata", _generic(wh, table)):
            raise _no_such_generic_table()
        return table

    def _storage_access(self, request: Request, wh: Warehouse, table: Table) -> Optional[str]:
        """"write", "read" or None: the credentials the principal's privileges on ``table`` allow."""
        if self.authz is None:
            return "write"
        return self.authz.storage_access(request.environ["standin.principal"], _generic(wh, table))

    def _config_keys(self, wh: Warehouse) -> dict[str, str]:
        return {"s3.region": wh.s3.region, "client.region": wh.s3.region,
                "s3.endpoint": wh.vended_endpoint.rstrip("/") + "/",
                "s3.path-style-access": "true" if wh.path_style else "false"}

    def _vend(self, wh: Warehouse, table: Table, access: str = "write") -> dict[str, Any]:
        """The table's storage credential: STS credentials allowed only under its prefix (to read,
        or to read, write and delete), handed out again unchanged until half their lifetime has
        passed (as Lakekeeper caches them)."""
        with self._lock:
            minted = wh.vended.get((table.id, access))
            if minted is not None and wh.vended_lifetime_s is None and not self.faults.bogus_credentials:
                issued, cred = minted
                expires = int(cred["config"]["expiration-time"]) / 1000
                if time.time() < issued + (expires - issued) / 2:
                    return json.loads(json.dumps(cred))
            issued, cred = time.time(), self._mint(wh, table, access)
            if not self.faults.bogus_credentials:
                wh.vended[(table.id, access)] = (issued, cred)
            return json.loads(json.dumps(cred))

    def _mint(self, wh: Warehouse, table: Table, access: str) -> dict[str, Any]:
        """New credentials from STS AssumeRole, allowed only under the table's prefix."""
        key = table.location.removeprefix(f"s3://{wh.bucket}/")
        policy = json.dumps(_prefix_policy(wh.bucket, key, list_uploads=self.vend_upload_listing,
                                           write=access == "write"))
        role_arn = wh.roles.get((table.id, access))
        if role_arn is None:
            # moto evaluates a role's own policy but not an AssumeRole session policy, so the
            # table scope lives in a role per table and access (a real STS honours the session
            # policy too).
            iam = wh.s3.client("iam")
            suffix = "" if access == "write" else f"-{access}"
            role_arn = iam.create_role(RoleName=f"lakekeeper-{table.id.replace('-', '')}{suffix}",
                                       AssumeRolePolicyDocument=json.dumps(_TRUST))["Role"]["Arn"]
            iam.put_role_policy(RoleName=role_arn.rsplit("/", 1)[1], PolicyName="table-prefix",
                                PolicyDocument=policy)
            wh.roles[(table.id, access)] = role_arn
        # botocore itself refuses DurationSeconds < 900; moto takes seconds-long sessions (their
        # expiry is enforced by tests/standins/s3_expiry_proxy.py, moto ignores it).
        sts = wh.s3.client("sts", config=Config(parameter_validation=wh.sts_validity_s >= 900))
        creds = sts.assume_role(
            RoleArn=role_arn, RoleSessionName="lakekeeper-standin", Policy=policy,
            DurationSeconds=wh.sts_validity_s)["Credentials"]
        expires = creds["Expiration"].timestamp()
        if wh.vended_lifetime_s is not None:
            expires = min(expires, time.time() + wh.vended_lifetime_s)
        expires_ms = str(int(expires * 1000))
        self.vended_secrets += [creds["SecretAccessKey"], creds["SessionToken"]]
        self.vended_access_keys.append(creds["AccessKeyId"])
        config = {**self._config_keys(wh),
                  "s3.access-key-id": creds["AccessKeyId"],
                  "s3.secret-access-key": creds["SecretAccessKey"],
                  "s3.session-token": creds["SessionToken"],
                  "expiration-time": expires_ms,
                  "s3.session-token-expires-at-ms": expires_ms}
        if self.faults.bogus_credentials:
            config["s3.access-key-id"] = "AKIABOGUSBOGUSBOGUS0"
        return {"prefix": table.location, "config": config}

    def _purge(self, wh: Warehouse, location: str) -> None:
        s3 = wh.s3.client("s3")
        key = location.removeprefix(f"s3://{wh.bucket}/") + "/"
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=wh.bucket, Prefix=key):
            for obj in page.get("Contents", []):
                s3.delete_object(Bucket=wh.bucket, Key=obj["Key"])
        self.purged.append(location)


_TRUST = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}


def _prefix_policy(bucket: str, key: str, *, list_uploads: bool = False, write: bool = True) -> dict[str, Any]:
    """Lakekeeper's STS policy: objects under ``{key}/`` only (read, or read, write and delete),
    listing only that prefix (with ``list_uploads``, also the open multipart uploads, granted on
    the whole bucket)."""
    uploads = [{"Effect": "Allow", "Action": ["s3:ListBucketMultipartUploads"],
                "Resource": [f"arn:aws:s3:::{bucket}"]}] if list_uploads else []
    objects = (["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts"] if write else ["s3:GetObject"])
    return {"Version": "2012-10-17", "Statement": [*uploads,
        {"Effect": "Allow", "Action": objects, "Resource": [f"arn:aws:s3:::{bucket}/{key}/*"]},
        {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [f"arn:aws:s3:::{bucket}"],
         "Condition": {"StringLike": {"s3:prefix": [key, f"{key}/*"]}}},
        {"Effect": "Allow", "Action": ["s3:GetBucketLocation"], "Resource": [f"arn:aws:s3:::{bucket}"]},
    ]}


def warehouse_object(warehouse_id: str) -> str:
    return f"warehouse:{warehouse_id}"


def namespace_object(namespace_id: str) -> str:
    return f"namespace:{namespace_id}"


def table_object(warehouse_id: str, table_id: str, *, generic: bool) -> str:
    return f"lakekeeper_{'generic_table' if generic else 'table'}:{warehouse_id}/{table_id}"


def forbidden(kind: str, action: str, warehouse_id: str, namespace: tuple[str, ...] = (), name: str = "") -> ApiError:
    """403 for a visible object whose ``action`` is not allowed, in Lakekeeper's words."""
    dotted = ".".join([*namespace, name] if name else namespace)
    where = {"warehouse": f"warehouse `{warehouse_id}`",
             "namespace": f"namespace with name '{dotted}' in warehouse `{warehouse_id}`",
             "table": f"table '{dotted}' in warehouse `{warehouse_id}`",
             "generic table": f"generic table '{dotted}' in warehouse `{warehouse_id}`"}[kind]
    kind_type = "".join(word.title() for word in kind.split())
    return ApiError(403, f"{kind_type}ActionForbidden", f"{kind.capitalize()} action `{action}` forbidden on {where}")


def _generic(wh: Warehouse, table: Table) -> str:
    """A generic table's OpenFGA object."""
    return table_object(wh.id, table.id, generic=True)


def _no_such_warehouse(prefix: str) -> ApiError:
    return ApiError(404, "NoSuchWarehouseException", f"A warehouse with id '{prefix}' does not exist",
                    ("Warehouse not found or access denied",))


def _no_such_namespace(wh: Warehouse, levels: tuple[str, ...]) -> ApiError:
    return ApiError(404, "NoSuchNamespaceException", f"Namespace with name '{'.'.join(levels)}' does not "
                    f"exist in warehouse '{wh.id}'", ("Namespace not found or access denied",))


def _no_such_generic_table() -> ApiError:
    return ApiError(404, "NoSuchGenericTableException", "Error getting tabular from catalog")


class _NotDeserialized(ValueError):
    """A body that is not the request type: Lakekeeper (axum) answers 422 in plain text."""


def _create_body(request: Request) -> dict[str, Any]:
    """The CreateGenericTableRequest in the body; ``_NotDeserialized`` names what is missing, as serde does."""
    raw = request.get_data(as_text=True)
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise _NotDeserialized(f"{exc}") from None
    if not isinstance(body, dict):
        raise _NotDeserialized(f"invalid type: expected struct CreateGenericTableRequest at line 1 column {len(raw)}")
    for name in ("name", "format"):
        if not isinstance(body.get(name), str):
            raise _NotDeserialized(f"missing field `{name}` at line 1 column {len(raw)}")
    return body


def _warehouse_view(wh: Warehouse) -> dict[str, Any]:
    profile = {"type": "s3", "bucket": wh.bucket, "key-prefix": wh.key_prefix, "endpoint": wh.vended_endpoint,
               "region": wh.s3.region, "path-style-access": wh.path_style, "sts-enabled": wh.sts_enabled,
               "sts-token-validity-seconds": wh.sts_validity_s}
    delete = {"type": "soft", "expiration-seconds": 3600} if wh.soft_delete else None
    return warehouse_view(wh.id, wh.name, wh.project_id, profile, delete)


def warehouse_view(warehouse_id: str, name: str, project_id: str, profile: dict[str, Any],
                   delete_profile: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """GetWarehouseResponse as Lakekeeper 0.13.3 answers it: the S3 profile normalized (every
    field, null when unset; the endpoint with a trailing '/')."""
    normalized = {"type": "s3", "bucket": None, "key-prefix": None, "assume-role-arn": None, "endpoint": None,
                  "region": None, "path-style-access": None, "sts-role-arn": None, "sts-endpoint": None,
                  "sts-enabled": False, "sts-token-validity-seconds": 3600, "sts-session-tags": {},
                  "flavor": "s3-compat", "allow-alternative-protocols": None, "remote-signing-url-style": "auto",
                  "push-s3-delete-disabled": True, "aws-kms-key-arn": None, "remote-signing-enabled": True,
                  "legacy-md5-behavior": None, "storage-layout": None, **profile}
    if normalized["endpoint"]:
        normalized["endpoint"] = normalized["endpoint"].rstrip("/") + "/"
    return {"id": warehouse_id, "warehouse-id": warehouse_id, "name": name, "project-id": project_id,
            "storage-profile": normalized,
            "storage-credential-type": {"type": "s3", "credential-type": "access-key"},
            "delete-profile": delete_profile or {"type": "hard"}, "status": "active", "protected": False,
            "managed-by": "self-managed", "allowed-format-versions": [1, 2, 3], "updated-at": None}


def as_lakekeeper_sends(request: Request, response: Response) -> None:
    """An answer's headers and encoding as Lakekeeper's layers send them: ``x-request-id`` always;
    JSON gzip-compressed when the client accepts it (and not tiny), with ``vary``; a 204 bare."""
    response.headers["x-request-id"] = str(uuid.uuid4())
    if response.status_code == 204:
        response.headers.pop("Content-Type", None)
        return
    if response.mimetype != "application/json":
        return
    response.headers["vary"] = "accept-encoding"
    data = response.get_data()
    if "gzip" in request.headers.get("Accept-Encoding", "") and len(data) >= GZIP_MIN_BYTES:
        response.set_data(gzip.compress(data))
        response.headers["Content-Encoding"] = "gzip"


def _reshape(response: Response, fault: Fault) -> None:
    """The checked answer's body sent slowly (trickle) or padded with spaces (pad)."""
    data = response.get_data() + b" " * fault.pad

    def trickle():
        for i in range(len(data)):
            time.sleep(fault.seconds)
            yield data[i:i + 1]

    response.response = trickle() if fault.kind == "trickle" else [data]
    response.headers["Content-Length"] = str(len(data))


def _error(code: int, kind: str, message: str, stack: tuple[str, ...] = (),
           headers: Optional[dict] = None) -> Response:
    body = {"error": {"message": message, "type": kind, "code": code,
                      "stack": [*stack, f"Error ID: {uuid.uuid4()}"]}}
    return Response(json.dumps(body), status=code, content_type="application/json", headers=headers or {})


def _explain(error: Exception) -> str:
    detail = error.__cause__
    extra = getattr(detail, "schema_errors", None)
    if extra:
        return f"{error}: " + "; ".join(getattr(e, "message", str(e)) for e in extra)
    return f"{error}: {detail}" if detail else repr(error)


def _page_size_ok(error: Exception, request: Request) -> bool:
    """openapi-core 0.19 cannot cast query values for ``type: [integer, "null"]`` (pageSize)."""
    return (getattr(error, "name", None) == "pageSize"
            and (request.args.get("pageSize") or "").isdigit())
