"""The lakehouse of the S3 tests: one URL (``LAKEKEEPER``) serving both catalogs, everything on one
moto server that checks every signature, key and IAM policy (fixture ``moto_iam``).

- ``/lakekeeper/v1``: the Lakekeeper stand-in (generic tables), vending STS credentials of a role
  allowed only the raw table's prefix;
- ``/catalog``: Apache Iceberg's REST server (tests/support/iceberg_rest.py), reached through the stand-in,
  which plays Lakekeeper's part of an Iceberg load/create-table answer (:class:`LakekeeperWithIceberg`):
  the warehouse's storage profile (endpoint, region, path style) and STS credentials of a role allowed
  only the Iceberg table's location, instead of the server's own key pair (the catalog's storage
  credential, :func:`catalog_key`, which never leaves it — as Lakekeeper's never does).

:func:`lakehouse_catalogs` assembles both (warehouse ``lakeflow``, namespace ``iot``) and yields a
:class:`Catalogs`: the environment a user's shell would hold, and the secrets that must never show.
Used by tests/integration/test_compaction_s3.py and tests/integration/test_end_to_end_s3.py.

With authorization (Lakekeeper with OpenFGA, tests/standins/authz.py): :class:`LakekeeperServer`
puts the management stand-in and a Lakekeeper stand-in behind one URL; :func:`authorized_lakekeeper`
shares one authorizer between them, with Iceberg's REST server behind ``/catalog``; the fixture
``authz_lakehouse`` (:func:`authorized_lakehouse`, :class:`AuthorizedLakehouse`) is that server set
up by its admin on ``moto_iam``: principals ``admin``, ``lf-ingest``, ``lf-compact``, ``lf-other``
(OAuth clients of the OAuth stand-in), grants in Python (``grant``) or through the API (``call``),
and each principal's lakeflow environment (``env_for``). Used by tests/integration/test_lakekeeper_authz.py
and tests/integration/test_lakekeeper_authz_replay.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional
from urllib.parse import quote

import pytest
import requests
from botocore.exceptions import ClientError
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from tests.standins.authz import Authorizer
from tests.standins.lakekeeper import (
    ApiError,
    LakekeeperStandin,
    S3Account,
    Table,
    Warehouse,
    _error,
    as_lakekeeper_sends,
    forbidden,
    namespace_object,
    table_object,
    warehouse_object,
)
from tests.standins.management import ManagementStandin
from tests.standins.oauth import OAuthStandin
from tests.support.fixtures_lakekeeper import NAMESPACE, WAREHOUSE_NAME, env_for
from tests.support.fixtures_servers import MotoServer, run_moto
from tests.support.iceberg_rest import IcebergRestServer, ensure_server_jars, run_iceberg_rest

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
TARGET = "sensor-readings-compacted"   # the Iceberg table lakeflow compact creates (TABLE-compacted)
# load-table (GET …/tables/{t}) and create-table (POST …/tables) answers: LoadTableResult
_LOAD_OR_CREATE = re.compile(r"^/catalog/v1/[^/]+/namespaces/([^/]+)/tables(?:/([^/]+))?$")
# with authorization: the namespace calls the stand-in answers, the table calls it authorizes
_NAMESPACES = re.compile(r"^/catalog/v1/[^/]+/namespaces(?:/[^/]+)?$")
_TABLE_CALL = re.compile(r"^/catalog/v1/([^/]+)/namespaces/([^/]+)/tables(?:/([^/]+)(/credentials|/metrics)?)?$")
_OWN_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")


class LakekeeperWithIceberg(LakekeeperStandin):
    """The stand-in with an Iceberg REST catalog at ``/catalog``: Iceberg's REST server (metadata,
    commits, conflicts) behind Lakekeeper's front — the bearer token checked, and a table's storage
    access vended as Lakekeeper vends it (``_config_keys``, ``_vend``: STS, role per table location).

    With ``authz`` set, Lakekeeper's front authorizes every call first (:meth:`_authorized`): the
    namespace calls are the stand-in's own (a namespace it creates is created behind too); a table
    call is answered 404 ``NoSuchTableException`` when the principal cannot see the table, 403
    ``TableActionForbidden`` / ``NamespaceActionForbidden`` when it may not act (``can_commit``,
    ``can_drop``, ``can_create_table``, ``read_data``), and forwarded otherwise; loads vend read or
    read-write credentials (with or without the delegation header, unless ``client-managed``) or
    none (``describe`` alone), lists show only what the principal may see, and a table's creator
    owns it. The catalog behind serves warehouse ``iceberg_prefix`` when that is not the
    warehouse's id."""

    iceberg_url = ""
    iceberg_prefix = ""  # the REST server's prefix, when it is not the warehouse id

    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        # /catalog/v1/config is Lakekeeper's own (warehouse names resolved): answered by the stand-in
        if not (self.iceberg_url and request.path.startswith("/catalog/")) or request.path == "/catalog/v1/config":
            return super().__call__(environ, start_response)
        body = request.get_data(cache=True)
        if self.authz is not None:
            response = self._authorized(request, body)
        else:
            try:
                self._authenticate(request)
                response = self._forward(request, body)
            except ApiError as exc:
                response = _error(exc.code, exc.type, exc.message, exc.stack)
        self._record(request, body, response.status_code)
        return response(environ, start_response)

    def _forward(self, request: Request, body: bytes) -> Response:
        answer = self._behind(request, body)
        route = _LOAD_OR_CREATE.match(request.path)
        load = route is not None and request.method == "GET" and route.group(2) is not None
        create = route is not None and request.method == "POST" and route.group(2) is None
        if not (load or create) or answer.status_code != 200:
            return Response(answer.content, status=answer.status_code,
                            content_type=answer.headers.get("Content-Type", "application/json"))
        result = answer.json()
        assert self.warehouse is not None
        wh, meta = self.warehouse, result["metadata"]
        config = {k: v for k, v in (result.get("config") or {}).items() if k not in _OWN_KEYS}
        config.update(self._config_keys(wh))
        result.pop("storage-credentials", None)
        if "vended-credentials" in request.headers.get("X-Iceberg-Access-Delegation", ""):
            namespace = tuple(route.group(1).split("\x1f"))
            name = route.group(2) if load else json.loads(body)["name"]
            table = Table(meta["table-uuid"], namespace, name, "iceberg", meta["location"])
            cred = self._vend(wh, table)
            config.update({k: v for k, v in cred["config"].items() if "expir" not in k})
            result["storage-credentials"] = [cred]
            with self._lock:
                wh.iceberg_tables.add((namespace, table.name))
        result["config"] = config
        return Response(json.dumps(result), status=200, content_type="application/json")

    def _behind(self, request: Request, body: bytes, method: str = "", path: str = "") -> requests.Response:
        """Ask Iceberg's REST server (the request as sent, or ``method`` on ``path``)."""
        raw = path or request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.full_path
        if self.iceberg_prefix:
            raw = re.sub(r"^/catalog/v1/[^/]+/", f"/catalog/v1/{self.iceberg_prefix}/", raw)
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "authorization", "connection")}
        try:
            return requests.request(method or request.method, self.iceberg_url + raw, headers=headers,
                                    data=None if method else body, timeout=30)
        except requests.ConnectionError:  # the catalog behind is down (make soak restarts it): Lakekeeper's 503
            raise ApiError(503, "ServiceUnavailableException", "the Iceberg catalog is not reachable") from None

    # -- authorization on (Lakekeeper with OpenFGA) --------------------------------------------

    def _authorized(self, request: Request, body: bytes) -> Response:
        """A catalog call as Lakekeeper with OpenFGA answers it: authorized, then forwarded."""
        try:
            request.environ["standin.principal"] = self._authenticate(request)
            if _NAMESPACES.match(request.path):
                response = self._dispatch(request)  # the stand-in's own namespace calls
                if request.method == "POST" and response.status_code == 200:
                    self._behind(request, body)  # the catalog behind holds it too (or did: 409)
            else:
                route = _TABLE_CALL.match(request.path)
                if route is None:
                    raise ApiError(501, "NotImplemented", f"the stand-in does not authorize {request.method} "
                                   f"{request.path} (not modelled)")
                response = self._table_call(request, body, *route.groups())
        except ApiError as exc:
            response = _error(exc.code, exc.type, exc.message, exc.stack)
        as_lakekeeper_sends(request, response)
        return response

    def _table_call(self, request: Request, body: bytes, prefix: str, segment: str, name: Optional[str],
                    tail: Optional[str]) -> Response:
        wh, ns = self._warehouse(prefix), self._namespace(prefix, segment)
        if name is None:
            self._visible_namespace(request, prefix, segment)
            if request.method == "GET":
                return self._list_tables(request, wh, ns, body)
            if request.method != "POST":
                raise ApiError(405, "MethodNotAllowed", f"{request.method} is not allowed on {request.path}")
            self._require(request, "can_create_table", _ns_object(wh, ns),
                          forbidden("namespace", "can_create_table", wh.id, ns))
            return self._create_table(request, wh, ns, body)
        table, loaded = self._iceberg_table(request, wh, ns, name)
        obj = table_object(wh.id, table.id, generic=False)
        if tail == "/credentials":
            access = self.authz.storage_access(request.environ["standin.principal"], obj)
            if access is None:
                raise forbidden("table", "read_data", wh.id, ns, name)
            return _json({"storage-credentials": [self._iceberg_credential(wh, table, access)]})
        if tail == "/metrics":
            return self._relayed(self._behind(request, body))
        if request.method == "HEAD":
            return Response(status=204)
        if request.method == "GET":
            return _json(self._shaped(request, wh, table, loaded))
        if request.method == "POST":
            self._require(request, "can_commit", obj, forbidden("table", "can_commit", wh.id, ns, name))
            answer = self._behind(request, body)
            if answer.status_code != 200:
                return self._relayed(answer)
            return _json({**answer.json(), "config": None})  # Lakekeeper answers a commit so
        self._require(request, "can_drop", obj, forbidden("table", "can_drop", wh.id, ns, name))
        answer = self._behind(request, body)
        if answer.status_code == 204:
            self.authz.remove(obj)
            with self._lock:
                wh.iceberg_tables.discard((ns, name))
        return self._relayed(answer)

    def _iceberg_table(self, request: Request, wh: Warehouse, ns: tuple[str, ...], name: str) -> tuple[Table, dict]:
        """The table and its load answer from the catalog behind; 404 ``NoSuchTableException``
        when it does not exist or the principal cannot see it. A table first met here (created
        before authorization was on) is registered in its namespace without an owner."""
        path = f"/catalog/v1/{wh.id}/namespaces/{quote(chr(31).join(ns), safe='')}/tables/{quote(name, safe='')}"
        answer = self._behind(request, b"", "GET", path)
        if answer.status_code == 404:
            raise _no_such_table()
        if answer.status_code != 200:
            raise _rewrapped(answer)
        loaded = answer.json()
        table = Table(loaded["metadata"]["table-uuid"], ns, name, "iceberg", loaded["metadata"]["location"])
        obj = table_object(wh.id, table.id, generic=False)
        with self._lock:
            if not self.authz.holds(obj, "parent", _ns_object(wh, ns)):
                self.authz.add_child(obj, _ns_object(wh, ns))
                wh.iceberg_tables.add((ns, name))
        if not self._can(request, "can_get_metadata", obj):
            raise _no_such_table()
        return table, loaded

    def _list_tables(self, request: Request, wh: Warehouse, ns: tuple[str, ...], body: bytes) -> Response:
        answer = self._behind(request, body)
        if answer.status_code != 200:
            return self._relayed(answer)
        visible = []
        for ident in answer.json().get("identifiers") or []:
            try:
                self._iceberg_table(request, wh, ns, ident["name"])
            except ApiError as exc:
                if exc.code != 404:
                    raise
                continue  # not for this principal's eyes
            visible.append(ident)
        return _json({"identifiers": visible})

    def _create_table(self, request: Request, wh: Warehouse, ns: tuple[str, ...], body: bytes) -> Response:
        name = json.loads(body)["name"]
        answer = self._behind(request, body) if (ns, name) not in wh.tables else None
        if answer is None or answer.status_code == 409:  # the name is a generic or an Iceberg table's
            raise ApiError(409, "AlreadyExistsException", "Tabular with the same name already exists in the namespace",
                           ("Error creating tabular in catalog",))
        if answer.status_code != 200:
            return self._relayed(answer)
        created = answer.json()
        table = Table(created["metadata"]["table-uuid"], ns, name, "iceberg", created["metadata"]["location"])
        with self._lock:  # its creator owns it
            self.authz.add_child(table_object(wh.id, table.id, generic=False), _ns_object(wh, ns),
                                 request.environ["standin.principal"])
            wh.iceberg_tables.add((ns, table.name))
        return _json(self._shaped(request, wh, table, created))

    def _shaped(self, request: Request, wh: Warehouse, table: Table, answer: dict) -> dict:
        """A load or create answer as Lakekeeper gives it: the catalog's own key replaced by the
        principal's vended credentials (read or read-write), or no storage access at all."""
        result = {k: v for k, v in answer.items() if k not in ("config", "storage-credentials")}
        access = self.authz.storage_access(request.environ["standin.principal"],
                                           table_object(wh.id, table.id, generic=False))
        if access is None:  # describe only: metadata and location
            return result
        config = {**self._config_keys(wh), "region": wh.s3.region}
        if request.headers.get("X-Iceberg-Access-Delegation") != "client-managed" and wh.sts_enabled:
            cred = self._iceberg_credential(wh, table, access)
            config.update({k: v for k, v in cred["config"].items()
                           if "expir" not in k and k != "client.refresh-credentials-endpoint"})
            result["storage-credentials"] = [cred]
        return {**result, "config": config}

    def _iceberg_credential(self, wh: Warehouse, table: Table, access: str) -> dict[str, Any]:
        """The table's vended credential, with the endpoint that refreshes it (as Lakekeeper sends it)."""
        cred = self._vend(wh, table, access)
        encoded = "".join(c if c.isalnum() else f"%{ord(c):02X}" for c in table.name)
        cred["config"]["client.refresh-credentials-endpoint"] = (
            f"{self.url}/catalog/v1/{wh.id}/namespaces/{quote(chr(31).join(table.namespace), safe='')}"
            f"/tables/{encoded}/credentials")
        return cred

    @staticmethod
    def _relayed(answer: requests.Response) -> Response:
        """The catalog's answer; an error in Lakekeeper's error shape."""
        if answer.status_code >= 400:
            refusal = _rewrapped(answer)
            return _error(refusal.code, refusal.type, refusal.message, refusal.stack)
        return Response(answer.content, status=answer.status_code,
                        content_type=answer.headers.get("Content-Type", "application/json"))


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


def _ns_object(wh: Warehouse, ns: tuple[str, ...]) -> str:
    return namespace_object(wh.namespace_ids[ns])


def _json(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, content_type="application/json")


def _no_such_table() -> ApiError:
    return ApiError(404, "NoSuchTableException", "Error getting tabular from catalog")


def _rewrapped(answer: requests.Response) -> ApiError:
    """An error answer of Iceberg's REST server as the error Lakekeeper would raise."""
    try:
        error = answer.json()["error"]
        return ApiError(answer.status_code, error["type"], error["message"])
    except (ValueError, KeyError, TypeError):
        return ApiError(answer.status_code, "CatalogError", answer.text[:500])


def catalog_key(admin: S3Account, bucket: str, prefix: str) -> tuple[str, str]:
    """The Iceberg catalog's own storage credential: an IAM user allowed S3 under ``bucket/prefix/``."""
    iam, user = admin.client("iam"), f"iceberg-rest-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="warehouse", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": [f"arn:aws:s3:::{bucket}/{prefix}/*"]},
                       {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": [f"arn:aws:s3:::{bucket}"]}]}))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture(scope="module")
def moto_iam(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Account]:
    """moto with signatures and IAM policies enforced (as ``moto_strict``), DeleteObjects authorised per
    key as AWS does (tests/standins/moto_server.py); yields Lakekeeper's own storage credential (IAM user)."""
    with run_moto(tmp_path_factory.mktemp("moto-iam"), strict_bootstrap_calls=3) as moto:
        iam = moto.client("iam")                         # the 3 unauthenticated bootstrap calls
        iam.create_user(UserName="lakekeeper")
        iam.put_user_policy(UserName="lakekeeper", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="lakekeeper")["AccessKey"]
        yield S3Account(moto.url, moto.region, key["AccessKeyId"], key["SecretAccessKey"])


@dataclass
class Catalogs:
    """Both catalogs at ``standin.url`` (warehouse ``lakeflow``, namespace ``iot``) and lakeflow's
    environment pointing at them, as a user's shell holds it (``LAKEKEEPER``, ``WAREHOUSE_ID``,
    ``TOKEN``, ``LAKEFLOW_HOME``; no caller's AWS or lakeflow settings)."""

    standin: LakekeeperWithIceberg
    iceberg: IcebergRestServer
    admin: S3Account            # Lakekeeper's own storage credential: for inspecting the bucket only
    env: dict
    home: Path

    def secrets(self) -> list[str]:
        """The bearer token, every storage key's secret and every vended secret key and session token."""
        return [self.standin.token, self.iceberg.secret_key, self.admin.secret_key, *self.standin.vended_secrets]

    def assert_no_secret(self, text: str) -> None:
        for secret in self.secrets():
            assert secret not in text

    def lakeflow(self, *args: str, env: dict | None = None, log: Path | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess:
        """``lakeflow ARGS`` as a user runs it (cwd: LAKEFLOW_HOME's parent); fails the test with its
        output (kept in ``log``) unless it exits 0; no secret in what it printed."""
        cmd = [LAKEFLOW, *args]
        done = subprocess.run(cmd, env=env or self.env, cwd=self.home.parent, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            where = ""
            if log is not None:
                log.write_text(done.stdout + done.stderr)
                where = f" (all of it: {log})"
            lines = [line for line in done.stderr.splitlines() if not line.lstrip().startswith("at ")]
            pytest.fail(f"lakeflow {args[0]} exited {done.returncode}{where}:\n" + "\n".join(lines[-60:]))
        self.assert_no_secret(done.stdout + done.stderr + " ".join(cmd))
        return done


@contextmanager
def lakehouse_catalogs(s3: S3Account, tmp_path: Path) -> Iterator[Catalogs]:
    """The stand-in (a fresh warehouse bucket on ``s3``, namespace ``iot``) with Iceberg's REST server
    behind ``/catalog``, whose warehouse is Lakekeeper's and whose own key is scoped to it; LAKEFLOW_HOME
    is ``tmp_path/home``. The stand-in's OpenAPI contract is checked when the block ends."""
    ensure_server_jars()
    standin = LakekeeperWithIceberg(s3).start()
    try:
        wh = standin.add_warehouse(WAREHOUSE_NAME)
        standin.create_namespace(NAMESPACE)
        access_key, secret_key = catalog_key(s3, wh.bucket, wh.key_prefix)
        with run_iceberg_rest(MotoServer(s3.endpoint, s3.region), access_key, secret_key, wh.base,
                              tmp_path / "iceberg-rest", prefix=wh.id) as server:
            standin.iceberg_url = server.url
            home = tmp_path / "home"
            env = {**{k: v for k, v in os.environ.items()
                      if not k.startswith(("LAKEFLOW_", "COMPACT_", "OAUTH_", "AWS_", "LAKEKEEPER", "TOKEN"))},
                   **env_for(standin), "LAKEFLOW_HOME": str(home)}
            yield Catalogs(standin=standin, iceberg=server, admin=s3, env=env, home=home)
    finally:
        standin.stop()
    assert not standin.violations, "OpenAPI contract violations:\n" + "\n".join(standin.violations)


# -- with authorization (Lakekeeper with OpenFGA) -----------------------------------------------

PRINCIPALS = ("admin", "lf-ingest", "lf-compact", "lf-other")  # OAuth client ids: principals oidc~<id>


class LakekeeperServer:
    """The management stand-in and a Lakekeeper stand-in behind one URL, as one Lakekeeper serves
    them: ``/health`` and ``/management/v1`` are the management stand-in's, the rest the Lakekeeper
    stand-in's; a warehouse created through the management API exists for both."""

    def __init__(self, lakekeeper: LakekeeperStandin, management: ManagementStandin) -> None:
        self.lakekeeper, self.management = lakekeeper, management
        self._server = make_server("127.0.0.1", 0, self, threaded=True, request_handler=_QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        lakekeeper.url = self.url  # what its config answers as the catalog's uri
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True,
                                        name="lakekeeper-server")

    def start(self) -> LakekeeperServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __call__(self, environ: dict, start_response: Callable) -> Any:
        request = Request(environ)
        if request.path == "/health" or request.path.startswith("/management/"):
            answer = self.management(environ, start_response)
            self._sync()
            return answer
        return self.lakekeeper(environ, start_response)

    def _sync(self) -> None:
        for wh in list(self.management.warehouses.values()):
            if wh.id in self.lakekeeper.warehouses:
                continue
            profile, s3 = wh.profile, self.lakekeeper.s3
            try:
                s3.client("s3").head_bucket(Bucket=profile["bucket"])
                exists = True
            except ClientError:
                exists = False
            self.lakekeeper.add_warehouse(
                wh.name, warehouse_id=wh.id, bucket=profile["bucket"], key_prefix=profile.get("key-prefix") or "",
                vended_endpoint=profile.get("endpoint"), create_bucket=not exists,
                sts_enabled=bool(profile.get("sts-enabled")),
                soft_delete=(wh.delete_profile or {}).get("type") == "soft")


@contextmanager
def authorized_lakekeeper(s3: S3Account, oauth: OAuthStandin, warehouse: str, log_dir: Path,
                          catalog_keys: tuple[str, str]) -> Iterator[LakekeeperServer]:
    """Lakekeeper with OpenFGA authorization at one URL, not bootstrapped, no warehouse yet: the
    management stand-in and :class:`LakekeeperWithIceberg` sharing one
    :class:`~tests.standins.authz.Authorizer` whose principals are ``oauth``'s clients, with
    Iceberg's REST server behind ``/catalog`` for the warehouse to be created at ``warehouse``
    (``s3://bucket/prefix``), its own S3 key ``catalog_keys``. The OpenAPI contracts are checked
    when the block ends."""
    ensure_server_jars()
    authz = Authorizer(oauth.subject_of)
    standin = LakekeeperWithIceberg(s3)
    standin.authz = authz
    server = LakekeeperServer(standin, ManagementStandin(authz=authz)).start()
    try:
        with run_iceberg_rest(MotoServer(s3.endpoint, s3.region), *catalog_keys, warehouse, log_dir) as iceberg:
            standin.iceberg_url, standin.iceberg_prefix = iceberg.url, iceberg.prefix
            yield server
    finally:
        server.stop()
    violations = standin.violations + server.management.violations
    assert not violations, "OpenAPI contract violations:\n" + "\n".join(violations)


@dataclass
class AuthorizedLakehouse:
    """A lakehouse with authorization on, set up as an admin would: bootstrapped by ``admin``, who
    created warehouse ``lakeflow`` and namespace ``iot`` and owns them. Principals :data:`PRINCIPALS`
    (``oidc~<client id>``) each have an OAuth client; grants through the permission endpoints
    (:meth:`call`) or in Python (:meth:`grant`); :meth:`env_for` is a principal's lakeflow
    environment (its own ``LAKEFLOW_HOME``)."""

    server: LakekeeperServer
    oauth: OAuthStandin
    client_secrets: dict[str, str]  # client id -> secret
    admin_s3: S3Account  # Lakekeeper's own storage credential: for inspecting the bucket only
    home: Path

    @property
    def standin(self) -> LakekeeperWithIceberg:
        lakekeeper = self.server.lakekeeper
        assert isinstance(lakekeeper, LakekeeperWithIceberg)
        return lakekeeper

    @property
    def authz(self) -> Authorizer:
        return self.standin.authz

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def warehouse_id(self) -> str:
        return self.standin.warehouse_id

    def call(self, principal: str, method: str, path: str, body: Any = None, **headers: str) -> requests.Response:
        """``method path`` as ``principal`` (its own token), e.g. a grant through the permission API."""
        auth = {"Authorization": f"Bearer {self.oauth.issue(principal)}", **headers}
        return requests.request(method, self.url + path, json=body, headers=auth, timeout=30)

    def grant(self, principal: str, relation: str, obj: str) -> None:
        """Grant ``relation`` on OpenFGA object ``obj`` (:meth:`namespace`, :meth:`generic_table`, …)
        to client ``principal``, as an admin's grant through the API would."""
        self.authz.grant(f"oidc~{principal}", relation, obj)

    def warehouse(self) -> str:
        return warehouse_object(self.warehouse_id)

    def namespace(self, levels: tuple[str, ...] = NAMESPACE) -> str:
        return namespace_object(self.standin.warehouse.namespace_ids[levels])

    def generic_table(self, name: str, namespace: tuple[str, ...] = NAMESPACE) -> str:
        return table_object(self.warehouse_id, self.standin.warehouse.tables[(namespace, name)].id, generic=True)

    def table(self, name: str, namespace: tuple[str, ...] = NAMESPACE) -> str:
        """An Iceberg table's object (its id read as the admin, who owns the warehouse)."""
        path = f"/catalog/v1/{self.warehouse_id}/namespaces/{quote(chr(31).join(namespace), safe='')}/tables/{name}"
        answer = self.call("admin", "GET", path)
        assert answer.status_code == 200, answer.text
        return table_object(self.warehouse_id, answer.json()["metadata"]["table-uuid"], generic=False)

    def env_for(self, principal: str, **overrides: str) -> dict[str, str]:
        """The environment ``lakeflow`` runs in as ``principal``: LAKEKEEPER, WAREHOUSE_ID, the
        OAUTH_* client credentials, NAMESPACE, TABLE, its own LAKEFLOW_HOME; no caller's AWS or
        lakeflow settings."""
        own = {k: v for k, v in os.environ.items()
               if not k.startswith(("LAKEFLOW_", "COMPACT_", "OAUTH_", "AWS_", "LAKEKEEPER", "TOKEN"))}
        return {**own, **env_for(self.standin, TOKEN=None, OAUTH_TOKEN_URL=self.oauth.token_url,
                                 OAUTH_CLIENT_ID=principal, OAUTH_CLIENT_SECRET=self.client_secrets[principal],
                                 LAKEFLOW_HOME=str(self.home / principal), **overrides)}

    def secrets(self) -> list[str]:
        """Client secrets, access tokens, storage keys and every vended secret: what must never show."""
        return [*self.client_secrets.values(), *self.oauth.issued, self.admin_s3.secret_key,
                *self.standin.vended_secrets]


@contextmanager
def authorized_lakehouse(s3: S3Account, tmp_path: Path) -> Iterator[AuthorizedLakehouse]:
    """:func:`authorized_lakekeeper` on ``s3`` (a fresh bucket), set up by ``admin`` through the API."""
    oauth = OAuthStandin(client_id=PRINCIPALS[0]).start()
    secrets = {PRINCIPALS[0]: oauth.client_secret, **{p: oauth.add_client(p) for p in PRINCIPALS[1:]}}
    bucket, key_prefix = f"lk-{uuid.uuid4().hex[:12]}", "warehouse"
    try:
        with authorized_lakekeeper(s3, oauth, f"s3://{bucket}/{key_prefix}", tmp_path / "iceberg-rest",
                                   catalog_key(s3, bucket, key_prefix)) as server:
            lake = AuthorizedLakehouse(server, oauth, secrets, s3, tmp_path / "homes")
            profile = {"type": "s3", "bucket": bucket, "key-prefix": key_prefix, "region": s3.region,
                       "endpoint": s3.endpoint, "path-style-access": True, "flavor": "s3-compat", "sts-enabled": True}
            credential = {"type": "s3", "credential-type": "access-key", "aws-access-key-id": s3.access_key,
                          "aws-secret-access-key": s3.secret_key}
            for method, path, body, status in [
                ("POST", "/management/v1/bootstrap", {"accept-terms-of-use": True}, 204),
                ("POST", "/management/v1/warehouse", {"warehouse-name": WAREHOUSE_NAME, "storage-profile": profile,
                                                      "storage-credential": credential}, 201),
            ]:
                answer = lake.call("admin", method, path, body)
                assert answer.status_code == status, answer.text
            answer = lake.call("admin", "POST", f"/catalog/v1/{lake.warehouse_id}/namespaces",
                               {"namespace": list(NAMESPACE)})
            assert answer.status_code == 200, answer.text
            yield lake
    finally:
        oauth.stop()


@pytest.fixture
def authz_lakehouse(moto_iam: S3Account, tmp_path: Path) -> Iterator[AuthorizedLakehouse]:
    """A lakehouse with OpenFGA authorization on moto with IAM enforced (:class:`AuthorizedLakehouse`)."""
    with authorized_lakehouse(moto_iam, tmp_path) as lake:
        yield lake
