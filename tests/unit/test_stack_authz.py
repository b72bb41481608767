"""``lakeflow stack bootstrap`` on a Lakekeeper with authorization: only as the admin, one principal
per job, exactly the grants each job needs, one env file per job.

Against a small fake on 127.0.0.1 (werkzeug, threads of the test process) built from the answers of
the real Lakekeeper 0.13.3 with OpenFGA (/work/shared/lakekeeper-api/recorded-authz-0.13.3, each
answer's exchange number beside it): its own token endpoint (client credentials; ``sub`` the client id
unless told, as a Keycloak service account's UUID), the management and catalog calls the bootstrap
makes, grants as tuples (409 ``TupleAlreadyExistsError`` for an existing one, the whole batch failing).
The authorization-enabled stand-in's test is tests/integration/test_stack_authz.py.
"""

from __future__ import annotations

import json
import secrets
import stat
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional
from urllib.parse import unquote

import pytest
from dotenv import dotenv_values
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from lakeflow.cli.main import main
from lakeflow.settings import SettingsError
from lakeflow.stack import Grant, load_stack_config, missing
from lakeflow.stack.server import Assignment
from tests.unit.test_stack import STACK_ENV, clean_env  # noqa: F401 (fixture)

DEFAULT_PROJECT = "00000000-0000-0000-0000-000000000000"
SEP = "\x1f"


def _json(payload: object, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, content_type="application/json")


def _error(code: int, type_: str, message: str) -> Response:
    return _json({"error": {"message": message, "type": type_, "code": code,
                            "stack": [f"Error ID: {uuid.uuid4()}"]}}, status=code)


@dataclass
class Call:
    principal: Optional[str]
    method: str
    path: str
    body: object
    status: int


@dataclass
class AuthzLakekeeper:
    """Lakekeeper 0.13.3 with OpenFGA as recorded, for the calls of ``lakeflow stack bootstrap``."""

    clients: dict[str, tuple[str, str]]  # client id -> (secret, sub)
    authz: str = "openfga"
    bootstrapped_by: Optional[str] = None  # a principal id: the server is bootstrapped already
    race_by: Optional[str] = None  # this principal bootstraps the server just before the next caller does
    before_write: Optional[Callable[["AuthzLakekeeper"], None]] = None  # runs before the next grant is written
    users: set[str] = field(default_factory=set)
    admin: Optional[str] = None
    warehouses: dict[str, str] = field(default_factory=dict)  # id -> name
    namespaces: dict[tuple[str, ...], str] = field(default_factory=dict)  # levels -> id
    tables: dict[tuple[tuple[str, ...], str], str] = field(default_factory=dict)  # (levels, name) -> id
    tuples: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # object path -> {(relation, user)}
    managed: set[str] = field(default_factory=set)  # namespace ids with managed access
    calls: list[Call] = field(default_factory=list)
    url: str = ""

    def __post_init__(self) -> None:
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        if self.bootstrapped_by:
            self.admin = self.bootstrapped_by
            self.users.add(self.bootstrapped_by)

    # --- plumbing ----------------------------------------------------------------------------
    def __call__(self, environ, start_response):
        request = Request(environ)
        with self._lock:
            principal = self._tokens.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
            response = self._route(request, principal)
            body = request.get_json(silent=True) if request.path != "/token" else None
            self.calls.append(Call(principal, request.method, request.path, body, response.status_code))
        return response(environ, start_response)

    def serve(self):
        server = make_server("127.0.0.1", 0, self, threaded=True, request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{server.server_port}"
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return server

    def writes(self) -> list[Call]:
        """Every call that changed something (POST, DELETE) but the token requests."""
        return [c for c in self.calls if c.method in ("POST", "DELETE") and c.path != "/token"]

    def holds(self, path: str) -> set[tuple[str, str]]:
        return self.tuples.get(path, set())

    # --- routes ------------------------------------------------------------------------------
    def _route(self, request: Request, p: Optional[str]) -> Response:  # noqa: C901 (one table of routes)
        path, method = request.path, request.method
        if path == "/health":
            return _json({"health": "ok"})
        if path == "/token" and method == "POST":
            client = self.clients.get(request.form.get("client_id", ""))
            if client is None or client[0] != request.form.get("client_secret"):
                return _json({"error": "invalid_client"}, status=401)
            token = secrets.token_hex(8)
            self._tokens[token] = f"oidc~{client[1]}"
            return _json({"access_token": token, "token_type": "Bearer", "expires_in": 300})
        if p is None:
            return _error(401, "MissingAuthorizationHeader", "Missing Authorization Header")
        parts = [unquote(x) for x in path.strip("/").split("/")]
        if path == "/management/v1/info":  # exchange 1
            return _json({"version": "0.13.3", "bootstrapped": self.admin is not None,
                          "default-project-id": DEFAULT_PROJECT, "authz-backend": self.authz})
        if path == "/management/v1/bootstrap":  # exchanges 3, 4 (and 2: any principal may bootstrap)
            if self.race_by and self.admin is None:
                self.admin, self.race_by = self.race_by, None
                self.users.add(self.admin)
            if self.admin is not None:
                return _error(400, "CatalogAlreadyBootstrapped", "Catalog is not open for bootstrap")
            self.admin = p
            self.users.add(p)
            return Response(status=204)
        if path == "/management/v1/whoami":  # exchanges 5, 66
            if p not in self.users:
                return _error(404, "UserNotFound", f"User with id {p} not found.")
            return _json({"name": p.split("~", 1)[1], "email": None, "id": p, "user-type": "human"})
        if path == "/management/v1/permissions/server/assignments":  # exchange 17
            if p != self.admin:  # not recorded: the permission endpoints' refusal (exchange 244)
                return _error(401, "Unauthorized", "Unauthorized for action `can_read_assignments` on `server`")
            return _json({"assignments": [{"type": "admin", "user": self.admin}]})
        if path == "/catalog/v1/config":  # exchanges 67 (404, the user is made all the same), 246
            self.users.add(p)
            name = request.args.get("warehouse", "")
            found = [i for i, n in self.warehouses.items() if n == name and self._sees_warehouse(p)]
            if not found:
                return _error(404, "NoSuchWarehouseException", f"A warehouse '{name}' does not exist")
            return _json({"overrides": {"uri": f"{self.url}/catalog"}, "defaults": {"prefix": found[0]}})
        if path == "/management/v1/warehouse" and method == "GET":  # exchanges 69, 336
            if not self._allowed(p):
                return _error(403, "ProjectActionForbidden", "Project action `can_list_warehouses` forbidden")
            return _json({"warehouses": [{"id": i, "warehouse-id": i, "name": n, "project-id": DEFAULT_PROJECT,
                                          "storage-profile": {"type": "s3", "bucket": "lakeflow",
                                                              "key-prefix": "warehouse"}}
                                         for i, n in self.warehouses.items()]})
        if path == "/management/v1/warehouse" and method == "POST":  # exchange 7
            if not self._allowed(p):
                return _error(403, "ProjectActionForbidden", "Project action `can_create_warehouse` forbidden")
            wid = str(uuid.uuid4())
            self.warehouses[wid] = request.get_json()["warehouse-name"]
            return _json({"id": wid, "warehouse-id": wid, "name": self.warehouses[wid]}, status=201)
        if parts[:2] == ["catalog", "v1"] and parts[3:4] == ["namespaces"]:
            return self._namespaces(request, p, parts[4:])
        if parts[:2] == ["lakekeeper", "v1"] and parts[3:4] == ["namespaces"]:
            return self._generic_tables(request, p, tuple(parts[4].split(SEP)), parts[6:])
        if parts[:3] == ["management", "v1", "permissions"] and self.authz != "allow-all":
            return self._permissions(request, p, "/" + "/".join(path.strip("/").split("/")))
        return _error(404, "NotFound", path)

    def _namespaces(self, request: Request, p: str, rest: list[str]) -> Response:
        if request.method == "POST":  # exchanges 8, 250
            if not self._allowed(p):
                return _error(403, "WarehouseActionForbidden", "Warehouse action `can_create_namespace` forbidden")
            levels = tuple(request.get_json()["namespace"])
            if levels in self.namespaces:
                return _error(409, "AlreadyExistsException", "Namespace already exists")
            self.namespaces[levels] = str(uuid.uuid4())
            return _json({"namespace": list(levels), "properties": {"namespace_id": self.namespaces[levels]}})
        levels = tuple(rest[0].split(SEP))  # GET …/namespaces/{ns}: exchange 14
        if not self._allowed(p) or levels not in self.namespaces:
            return _error(404, "NoSuchNamespaceException", "Namespace does not exist")
        return _json({"namespace": list(levels), "properties": {"namespace_id": self.namespaces[levels],
                                                                "location": "s3://lakeflow/warehouse"}})

    def _generic_tables(self, request: Request, p: str, levels: tuple[str, ...], rest: list[str]) -> Response:
        ns_path = f"/management/v1/permissions/namespace/{self.namespaces.get(levels)}/assignments"
        may_create = self._allowed(p) or any(t in self.holds(ns_path) for t in (("create", p), ("ownership", p)))
        if not rest and request.method == "GET":  # exchange 25
            if not may_create:
                return _error(404, "NoSuchNamespaceException", "Namespace does not exist")
            return _json({"identifiers": [{"namespace": list(ns), "name": n, "format": "dataset", "id": i}
                                          for (ns, n), i in self.tables.items() if ns == levels]})
        if not rest:  # POST: exchanges 21, 23, 9
            name = request.get_json()["name"]
            if not may_create:
                return _error(404, "NoSuchNamespaceException", "Namespace does not exist")
            if (levels, name) in self.tables:
                return _error(409, "GenericTableAlreadyExists", "Generic table already exists")
            table_id = str(uuid.uuid4())
            self.tables[(levels, name)] = table_id
            self.tuples.setdefault(self.table_path(table_id), set()).add(("ownership", p))
            return _json({"table": {"name": name, "format": "dataset", "base-location": f"s3://lakeflow/{table_id}"}})
        table_id = self.tables.get((levels, rest[0]))  # GET one: exchanges 22, 10, 258 (describe: no credentials)
        if table_id is None or not (may_create or any(u == p for _, u in self.holds(self.table_path(table_id)))):
            return _error(404, "NoSuchGenericTableException", "Generic table does not exist")
        return _json({"table": {"name": rest[0], "format": "dataset", "base-location": f"s3://lakeflow/{table_id}"},
                      "config": {}})

    def _permissions(self, request: Request, p: str, path: str) -> Response:
        if not self._allowed(p):  # exchanges 189-192, 244
            return _error(401, "Unauthorized", "Unauthorized for action `can_grant_…`")
        if path.endswith("/managed-access"):  # exchange 193
            self.managed.add(path.split("/")[-2])
            return Response(status=200)
        held = self.tuples.setdefault(path, set())
        if request.method == "GET":  # exchanges 15, 20, 27, 36
            return _json({"assignments": [{"type": r, "user": u} for r, u in sorted(held)]})
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook(self)
        writes = {(w["type"], w["user"]) for w in request.get_json().get("writes", [])}
        if writes & held:  # exchange 317: the whole batch fails
            return _error(409, "TupleAlreadyExistsError", "Cannot write a tuple which already exists")
        held |= writes
        return Response(status=204)

    def table_path(self, table_id: str) -> str:
        wid = next(iter(self.warehouses))
        return f"/management/v1/permissions/warehouse/{wid}/generic-table/{table_id}/assignments"

    def namespace_path(self, levels: tuple[str, ...]) -> str:
        return f"/management/v1/permissions/namespace/{self.namespaces[levels]}/assignments"

    def _allowed(self, p: str) -> bool:
        """The admin; everyone without authorization."""
        return p == self.admin or self.authz == "allow-all"

    def _sees_warehouse(self, p: str) -> bool:
        return self._allowed(p) or any(u == p for held in self.tuples.values() for _, u in held)


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args: object, **kwargs: object) -> None:
        pass


# --- the planning ---------------------------------------------------------------------------------

INGEST, COMPACT = "oidc~lf-ingest", "oidc~lf-compact"


def assignments(*pairs: tuple[str, str]) -> list[Assignment]:
    return [Assignment(type=t, user=u) for t, u in pairs]


def test_missing_grants_are_those_no_tuple_holds():
    on_namespace = [Grant("create", INGEST, "ingestion"), Grant("create", COMPACT, "compaction")]
    # exchange 15: a new namespace, only its owner; exchange 20: the ingestion granted create
    assert missing(on_namespace, assignments(("ownership", "oidc~admin"))) == on_namespace
    assert missing(on_namespace, assignments(("ownership", "oidc~admin"), ("create", INGEST))) == on_namespace[1:]
    on_table = [Grant("modify", INGEST, "ingestion"), Grant("select", COMPACT, "compaction")]
    # exchange 27: the ingestion registered it (owner); exchange 36: the compaction granted select
    assert missing(on_table, assignments(("ownership", INGEST))) == on_table[1:]
    assert missing(on_table, assignments(("ownership", INGEST), ("select", COMPACT))) == []


def test_a_stronger_relation_holds_a_grant_and_another_principals_does_not():
    select = Grant("select", COMPACT, "compaction")
    assert missing([select], assignments(("modify", COMPACT))) == []
    assert missing([select], assignments(("ownership", COMPACT))) == []
    assert missing([select], assignments(("select", INGEST), ("ownership", "oidc~admin"))) == [select]
    modify = Grant("modify", INGEST, "ingestion")
    assert missing([modify], assignments(("select", INGEST))) == [modify], "select does not hold modify"
    assert missing([modify, modify], []) == [modify], "each grant once"
    roles = [Assignment(type="select", role="01a23333-7862-7381-8ba8-3e2d10181f31")]  # exchange 321
    assert missing([select], roles) == [select], "a role's grant is not the principal's"


# --- settings ---------------------------------------------------------------------------------------

BASE = {"STACK_WAREHOUSE": "lakeflow", "STACK_BUCKET": "lakeflow", "STACK_S3_ACCESS_KEY_ID": "ak",
        "STACK_S3_SECRET_ACCESS_KEY": "sk", "STACK_OAUTH_TOKEN_URL": "http://127.0.0.1:1/token",
        "STACK_OAUTH_CLIENT_ID": "admin", "STACK_OAUTH_CLIENT_SECRET": "admin-secret-never-shown"}
JOBS = {"STACK_INGEST_CLIENT_ID": "lf-ingest", "STACK_INGEST_CLIENT_SECRET": "ingest-secret-never-shown",
        "STACK_COMPACT_CLIENT_ID": "lf-compact", "STACK_COMPACT_CLIENT_SECRET": "compact-secret-never-shown"}


def test_job_clients_come_in_pairs_of_their_own_behind_the_token_endpoint():
    config = load_stack_config({**BASE, **JOBS}, None)
    assert [(j.job, j.client_id) for j in config.jobs] == [("ingest", "lf-ingest"), ("compact", "lf-compact")]
    assert not load_stack_config(BASE, None).jobs and not load_stack_config(BASE, None).managed_access
    assert "never-shown" not in repr(config)

    with pytest.raises(SettingsError) as caught:
        load_stack_config({**BASE, "STACK_INGEST_CLIENT_ID": "lf-ingest"}, None)
    text = str(caught.value)
    for name in ("STACK_INGEST_CLIENT_SECRET", "STACK_COMPACT_CLIENT_ID", "STACK_COMPACT_CLIENT_SECRET"):
        assert name in text.split(" missing beside ")[0]

    no_idp = {k: v for k, v in BASE.items() if not k.startswith("STACK_OAUTH_")}
    with pytest.raises(SettingsError, match="need STACK_OAUTH_TOKEN_URL"):
        load_stack_config({**no_idp, **JOBS}, None)

    with pytest.raises(SettingsError) as caught:
        load_stack_config({**BASE, **JOBS, "STACK_COMPACT_CLIENT_ID": "admin"}, None)
    assert "STACK_OAUTH_CLIENT_ID and STACK_COMPACT_CLIENT_ID are the same client" in str(caught.value)
    assert "never-shown" not in str(caught.value)


# --- the command --------------------------------------------------------------------------------------

CLIENTS = {"admin": ("admin-secret-never-shown", "admin"), "lf-ingest": ("ingest-secret-never-shown", "lf-ingest"),
           "lf-compact": ("compact-secret-never-shown", "lf-compact"), "lf-other": ("other-secret", "lf-other")}


@pytest.fixture
def serve() -> Iterator[Callable[..., AuthzLakekeeper]]:
    servers = []

    def start(**kwargs) -> AuthzLakekeeper:
        fake = AuthzLakekeeper(clients={**CLIENTS, **kwargs.pop("clients", {})}, **kwargs)
        servers.append(fake.serve())
        return fake

    yield start
    for server in servers:
        server.shutdown()


def stack_file(path: Path, fake: AuthzLakekeeper, **extra: str) -> Path:
    values = {**dotenv_values(STACK_ENV), "STACK_LAKEKEEPER_URL": fake.url, "STACK_OAUTH_TOKEN_URL": f"{fake.url}/token",
              "STACK_OAUTH_CLIENT_ID": "admin", "STACK_OAUTH_CLIENT_SECRET": "admin-secret-never-shown",
              "NAMESPACE": "iot", **extra}
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items() if v is not None))
    return path


def bootstrap(stack: Path, *flags: str) -> int:
    return main(["stack", "bootstrap", "--env-file", str(stack), "--wait", "5", *flags])


def test_a_new_server_is_bootstrapped_by_the_admin_and_each_job_gets_exactly_its_grants(
        tmp_path, serve, clean_env, capsys):
    fake = serve()
    stack = stack_file(tmp_path / "stack.env", fake, **JOBS)
    jobs = tmp_path / "jobs"
    assert bootstrap(stack, "--write-env-dir", str(jobs)) == 0
    out = capsys.readouterr().out
    assert fake.admin == "oidc~admin"
    assert [c.principal for c in fake.calls if c.path == "/management/v1/bootstrap"] == ["oidc~admin"]

    # the ingestion registered (owns) the raw table; the compaction may read it; both may create in iot
    table_id = fake.tables[(("iot",), "sensor-readings")]
    assert fake.holds(fake.table_path(table_id)) == {("ownership", INGEST), ("select", COMPACT)}
    assert fake.holds(fake.namespace_path(("iot",))) == {("create", INGEST), ("create", COMPACT)}
    registered = [c for c in fake.calls if c.method == "POST" and c.path.endswith("/generic-tables")]
    assert [c.principal for c in registered] == [INGEST]
    granted = [c.principal for c in fake.calls if "/permissions/" in c.path]
    assert set(granted) == {"oidc~admin"}, "only the admin grants"
    for line in (f"grant create on namespace iot to the ingestion {INGEST}: made",
                 f"grant create on namespace iot to the compaction {COMPACT}: made",
                 f"grant modify on table iot.sensor-readings to the ingestion {INGEST}: found (it holds ownership)",
                 f"grant select on table iot.sensor-readings to the compaction {COMPACT}: made"):
        assert line in out
    assert not fake.managed

    # one file per job, private, each with its own client and never the admin's
    for job, client in (("ingest", "lf-ingest"), ("compact", "lf-compact")):
        path = jobs / f"{job}.env"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        lines = dotenv_values(path)
        assert (lines["OAUTH_CLIENT_ID"], lines["OAUTH_CLIENT_SECRET"]) == (client, CLIENTS[client][0])
        assert lines["WAREHOUSE_ID"] == next(iter(fake.warehouses)) and lines["LAKEKEEPER"] == fake.url
        assert "admin-secret-never-shown" not in path.read_text()
    assert not any(s in out for s, _ in CLIENTS.values()), "no secret printed"

    # a second run finds every grant: nothing is written
    before = len(fake.writes())
    assert bootstrap(stack, "--write-env-dir", str(jobs)) == 0
    again = capsys.readouterr().out
    assert "server: already bootstrapped" in again and ": made" not in again
    assert [c.path for c in fake.writes()[before:] if c.status < 400] == [], "a bootstrapped stack is left as it is"
    assert {c.status for c in fake.writes()[before:]} == {409}, "the namespaces: found existing"


def test_a_server_bootstrapped_by_another_principal_is_refused_before_anything_changes(
        tmp_path, serve, clean_env, capsys):
    fake = serve(bootstrapped_by="oidc~lf-other")  # exchange 2: any principal with a token may bootstrap
    fake.users.add("oidc~admin")  # a user of the server, not its admin: the server's assignments refused
    stack = stack_file(tmp_path / "stack.env", fake, **JOBS)
    assert bootstrap(stack, "--write-env-dir", str(tmp_path / "jobs")) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith("lakeflow stack: STACK_OAUTH_CLIENT_ID admin (oidc~admin) is not the admin")
    assert "nothing was changed" in err and "never-shown" not in err + captured.out
    assert fake.writes() == [] and not (tmp_path / "jobs").exists()

    # a principal that is no user of the server yet (whoami 404) is refused the same way
    fresh = serve(bootstrapped_by="oidc~lf-other")
    assert bootstrap(stack_file(tmp_path / "fresh.env", fresh)) == 2
    assert "admin (no user of this server yet) is not the admin" in capsys.readouterr().err
    assert fresh.writes() == []


def test_the_bootstrap_race_lost_is_a_refusal(tmp_path, serve, clean_env, capsys):
    """Another principal bootstraps the server between lakeflow's info call and its own bootstrap."""
    fake = serve(race_by="oidc~lf-other")
    assert bootstrap(stack_file(tmp_path / "stack.env", fake)) == 2
    captured = capsys.readouterr()
    assert "server: bootstrapped meanwhile by another principal" in captured.out
    assert "STACK_OAUTH_CLIENT_ID admin (no user of this server yet) is not the admin" in captured.err
    assert [c.path for c in fake.writes()] == ["/management/v1/bootstrap"]


def test_a_job_principal_is_whatever_the_idp_puts_in_sub(tmp_path, serve, clean_env, capsys):
    """Keycloak's service accounts: ``sub`` is a UUID, not the client id; whoami tells."""
    sub = str(uuid.uuid4())
    fake = serve(clients={"lf-ingest": ("ingest-secret-never-shown", sub)})
    assert bootstrap(stack_file(tmp_path / "stack.env", fake, **JOBS), "--write-env-dir", str(tmp_path)) == 0
    assert ("create", f"oidc~{sub}") in fake.holds(fake.namespace_path(("iot",)))
    assert f"ingestion: client lf-ingest is principal oidc~{sub}" in capsys.readouterr().out


def test_grants_a_concurrent_run_made_are_found_not_rewritten(tmp_path, serve, clean_env, capsys):
    """409 TupleAlreadyExistsError fails the whole batch (exchange 317): lakeflow reads again and
    writes only what is still missing."""
    def sneak(fake: AuthzLakekeeper) -> None:
        fake.tuples[fake.namespace_path(("iot",))].add(("create", INGEST))

    fake = serve(before_write=sneak)
    assert bootstrap(stack_file(tmp_path / "stack.env", fake, **JOBS), "--write-env-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert fake.holds(fake.namespace_path(("iot",))) == {("create", INGEST), ("create", COMPACT)}
    assert f"grant create on namespace iot to the ingestion {INGEST}: found" in out
    statuses = [c.status for c in fake.calls if c.method == "POST" and c.path == fake.namespace_path(("iot",))]
    assert statuses == [409, 204]


def test_a_pipelines_streams_and_managed_access(tmp_path, serve, clean_env, capsys, monkeypatch):
    schema = Path(__file__).resolve().parents[2] / "lakeflow" / "schema" / "sensor-reading.schema.json"
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(f'[[streams]]\nname = "north"\nnamespace = "plant.north"\ntable = "north-raw"\n'
                        f'schema = "{schema}"\n\n'
                        f'[[streams]]\nname = "lab"\nnamespace = "lab"\ntable = "lab-raw"\nschema = "{schema}"\n')
    monkeypatch.setenv("PIPELINE", str(pipeline))
    fake = serve()
    stack = stack_file(tmp_path / "stack.env", fake, STACK_MANAGED_ACCESS="true", **JOBS)
    assert bootstrap(stack, "--write-env-dir", str(tmp_path / "jobs")) == 0
    out = capsys.readouterr().out
    for levels, table in ((("plant", "north"), "north-raw"), (("lab",), "lab-raw")):
        assert fake.holds(fake.namespace_path(levels)) == {("create", INGEST), ("create", COMPACT)}
        assert fake.holds(fake.table_path(fake.tables[(levels, table)])) == {("ownership", INGEST),
                                                                             ("select", COMPACT)}
    assert fake.holds(fake.namespace_path(("plant",))) == set(), "a parent namespace gets no grant"
    assert fake.managed == {fake.namespaces[("plant", "north")], fake.namespaces[("lab",)]}
    assert "namespace plant.north: managed access on" in out


def test_a_table_the_admin_registered_gets_modify_for_the_ingestion(tmp_path, serve, clean_env, capsys):
    fake = serve()
    stack = stack_file(tmp_path / "stack.env", fake)
    assert bootstrap(stack) == 0  # without job principals: the admin registers nothing without a pipeline
    fake.tables[(("iot",), "sensor-readings")] = table_id = str(uuid.uuid4())  # as an admin's registration
    fake.tuples[fake.table_path(table_id)] = {("ownership", "oidc~admin")}
    assert bootstrap(stack_file(stack, fake, **JOBS), "--write-env-dir", str(tmp_path)) == 0
    assert fake.holds(fake.table_path(table_id)) == {("ownership", "oidc~admin"), ("modify", INGEST),
                                                     ("select", COMPACT)}
    assert f"grant modify on table iot.sensor-readings to the ingestion {INGEST}: made" in capsys.readouterr().out


def test_without_authorization_jobs_get_their_files_and_no_grants(tmp_path, serve, clean_env, capsys):
    fake = serve(authz="allow-all")
    assert bootstrap(stack_file(tmp_path / "stack.env", fake, **JOBS), "--write-env-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "authorization: allow-all (every principal may do everything): no grants to make" in out
    assert not any("/permissions/" in c.path for c in fake.calls)
    assert [c.principal for c in fake.writes() if c.path.endswith("/generic-tables")] == [INGEST]
    assert dotenv_values(tmp_path / "compact.env")["OAUTH_CLIENT_ID"] == "lf-compact"


def test_the_file_flags_fit_the_principals(tmp_path, serve, clean_env, capsys):
    fake = serve()
    with_jobs = stack_file(tmp_path / "jobs.env", fake, **JOBS)
    assert bootstrap(with_jobs, "--write-env", str(tmp_path / ".env.local")) == 2
    err = capsys.readouterr().err
    assert "--write-env-dir DIR (the admin's client is written nowhere)" in err and err.count("\n") == 1
    assert bootstrap(stack_file(tmp_path / "admin.env", fake), "--write-env-dir", str(tmp_path)) == 2
    assert "needs STACK_INGEST_CLIENT_* and STACK_COMPACT_CLIENT_*" in capsys.readouterr().err
    assert fake.calls == [], "refused before asking the server anything"


def test_a_topic_patterns_tables_found_now_get_their_grants(tmp_path, serve, clean_env, capsys, monkeypatch):
    """A pattern's raw tables appear as the ingestion finds their topics: those registered by now get the
    compaction's select (the namespace's create covers the rest for the ingestion); a rerun grants the newer."""
    schema = Path(__file__).resolve().parents[2] / "lakeflow" / "schema" / "sensor-reading.schema.json"
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(f'[[streams]]\nname = "plants"\nnamespace = "plants"\ntopic-pattern = "plant-(.+)"\n'
                        f'table = "plant-{{1}}-raw"\nschema = "{schema}"\n')
    monkeypatch.setenv("PIPELINE", str(pipeline))
    fake = serve()
    stack = stack_file(tmp_path / "stack.env", fake, **JOBS)
    assert bootstrap(stack, "--write-env-dir", str(tmp_path)) == 0
    assert fake.holds(fake.namespace_path(("plants",))) == {("create", INGEST), ("create", COMPACT)}
    assert not fake.tables, "nothing to register before a topic is found"

    for name in ("plant-a-raw", "unrelated"):  # the ingestion registered one, someone else another table
        fake.tables[(("plants",), name)] = table_id = str(uuid.uuid4())
        fake.tuples[fake.table_path(table_id)] = {("ownership", INGEST)}
    assert bootstrap(stack, "--write-env-dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "table plants.plant-a-raw (stream plants's topic pattern): exists" in out
    assert fake.holds(fake.table_path(fake.tables[(("plants",), "plant-a-raw")])) == {("ownership", INGEST),
                                                                                        ("select", COMPACT)}
    assert fake.holds(fake.table_path(fake.tables[(("plants",), "unrelated")])) == {("ownership", INGEST)}
