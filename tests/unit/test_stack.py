"""The local stack: compose file + Keycloak realm consistency, and ``lakeflow stack bootstrap``
against a Lakekeeper management stand-in and an OAuth2 token stand-in on 127.0.0.1.

Unit tests: they start no process. The real-process tests: tests/integration/test_stack.py."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

import pytest
import requests
import yaml
from dotenv import dotenv_values

from lakeflow.catalog.base import CatalogError
from lakeflow.cli.main import main
from lakeflow.settings import SettingsError, load_settings
from lakeflow.stack import (
    BootstrapResult,
    LakekeeperAdmin,
    StackConfig,
    bootstrap_stack,
    env_lines,
    load_stack_config,
    open_session,
    wait_healthy,
)
from tests.standins.management import ManagementStandin
from tests.standins.oauth import OAuthStandin
from tests.support.fixtures_servers import free_port

ROOT = Path(__file__).resolve().parents[2]


DEPLOY = ROOT / "deploy"


STACK_ENV = DEPLOY / "stack.env"


_VAR = re.compile(r"\$\{(\w+)(?::?[-?][^}]*)?\}")


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {k: v for k, v in dotenv_values(STACK_ENV).items() if v is not None}


@pytest.fixture(scope="module")
def compose_text() -> str:
    return (DEPLOY / "docker-compose.yml").read_text()


def interpolate(value, replace):
    """Apply ``replace`` to every string value of a compose model (compose interpolates values,
    not comments or keys)."""
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, list):
        return [interpolate(v, replace) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, replace) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def compose(compose_text: str, stack_env: dict[str, str]) -> dict:
    """The compose model with ``${VAR}`` resolved from deploy/stack.env, as
    ``docker compose --env-file deploy/stack.env`` resolves it."""
    return interpolate(yaml.safe_load(compose_text),
                       lambda s: _VAR.sub(lambda m: stack_env[m.group(1)], s))


@pytest.fixture(scope="module")
def realm() -> dict:
    return json.loads((DEPLOY / "keycloak" / "iceberg-realm.json").read_text())


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    return dict(e.split("=", 1) for e in env) if isinstance(env, list) else dict(env)


def published(service: dict) -> dict[int, tuple[str, int]]:
    """container port -> (host address, host port)."""
    out = {}
    for spec in service.get("ports", []):
        host, port, container = str(spec).split(":")
        out[int(container)] = (host, int(port))
    return out


def test_compose_variables_all_come_from_stack_env(compose_text, stack_env):
    used: set[str] = set()
    interpolate(yaml.safe_load(compose_text), lambda s: used.update(_VAR.findall(s)))
    assert used, "the compose file takes its credentials from deploy/stack.env"
    assert used <= set(stack_env), f"undefined in deploy/stack.env: {sorted(used - set(stack_env))}"
    # no literal credential: every password / key / secret value is an interpolation
    for name, service in yaml.safe_load(compose_text)["services"].items():
        for key, value in env_of(service).items():
            if re.search(r"PASSWORD|SECRET|ENCRYPTION_KEY", key):
                assert str(value).startswith("${"), f"{name}.{key} is a literal"


def test_compose_services_images_and_dependencies(compose):
    services = compose["services"]
    assert set(services) == {"db", "minio", "minio-bucket", "keycloak", "migrate", "lakekeeper"}
    for name, service in services.items():
        image = service["image"]
        assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), f"{name}: pin {image}"
        for target, dep in (service.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown {target}"
            if dep["condition"] == "service_healthy":
                assert "healthcheck" in services[target], f"{target} has no healthcheck"
            else:
                assert dep["condition"] == "service_completed_successfully"
                assert services[target].get("restart") == "no", f"{target} is a one-shot"
        if service.get("restart") != "no":
            assert "healthcheck" in service, f"{name}: a long-running service needs a healthcheck"
        for host, _ in published(service).values():
            assert host == "127.0.0.1", f"{name} publishes beyond 127.0.0.1"
    assert services["lakekeeper"]["image"] == services["migrate"]["image"] \
        == "quay.io/lakekeeper/catalog:v0.13.3"
    assert services["migrate"]["entrypoint"][-1] == "migrate"
    assert services["lakekeeper"]["command"] == ["serve"]
    assert int(services["db"]["image"].split(":")[1].split("-")[0]) >= 15
    assert services["keycloak"]["image"].split(":")[1].startswith("26.")
    assert "--import-realm" in services["keycloak"]["command"]
    assert services["lakekeeper"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_lakekeeper_reaches_postgres_and_keycloak_as_configured(compose, realm, stack_env):
    services = compose["services"]
    lk, db = env_of(services["lakekeeper"]), env_of(services["db"])
    assert env_of(services["migrate"]).items() <= lk.items(), "migrate and serve share the database"
    for key in ("LAKEKEEPER__PG_DATABASE_URL_READ", "LAKEKEEPER__PG_DATABASE_URL_WRITE"):
        url = urlparse(lk[key])
        assert (url.scheme, url.hostname, url.port) == ("postgresql", "db", 5432)
        assert (url.username, url.password, url.path) == (
            db["POSTGRES_USER"], db["POSTGRES_PASSWORD"], "/" + db["POSTGRES_DB"])
    assert lk["LAKEKEEPER__PG_ENCRYPTION_KEY"] == stack_env["STACK_PG_ENCRYPTION_KEY"] != ""

    provider = urlparse(lk["LAKEKEEPER__OPENID_PROVIDER_URI"])
    assert provider.hostname in services and provider.hostname == "keycloak"
    assert provider.port == 8080 and provider.path == f"/realms/{realm['realm']}"
    host_issuer = urlparse(lk["LAKEKEEPER__OPENID_ADDITIONAL_ISSUERS"])
    kc_host, kc_port = published(services["keycloak"])[8080]
    assert (host_issuer.hostname, host_issuer.port) == ("localhost", kc_port)
    assert host_issuer.path == provider.path
    assert lk["LAKEKEEPER__OPENID_AUDIENCE"] == "lakekeeper"
    mount = next(v for v in services["keycloak"]["volumes"] if "import" in v)
    source, target = mount.split(":")[:2]
    assert (DEPLOY / source).resolve() == (DEPLOY / "keycloak" / "iceberg-realm.json")
    assert target.startswith("/opt/keycloak/data/import/") and target.endswith(".json")


def test_realm_has_confidential_client_and_audience_scope(compose, realm, stack_env):
    assert realm["realm"] == "iceberg" and realm["enabled"]
    scopes = {s["name"]: s for s in realm["clientScopes"]}
    client = next(c for c in realm["clients"] if c["clientId"] == stack_env["STACK_OAUTH_CLIENT_ID"])
    assert client["publicClient"] is False and client["serviceAccountsEnabled"] is True
    assert client["clientAuthenticatorType"] == "client-secret"
    assert not (client["standardFlowEnabled"] or client["directAccessGrantsEnabled"])
    # the secret is a placeholder Keycloak fills from its environment at import
    placeholder = re.fullmatch(r"\$\{(\w+)\}", client["secret"])
    assert placeholder, "no literal client secret in the realm file"
    kc_env = env_of(compose["services"]["keycloak"])
    assert kc_env[placeholder.group(1)] == stack_env["STACK_OAUTH_CLIENT_SECRET"]

    audience_scope = scopes[stack_env["STACK_OAUTH_SCOPE"]]
    mapper = next(m for m in audience_scope["protocolMappers"]
                  if m["protocolMapper"] == "oidc-audience-mapper")
    lk_env = env_of(compose["services"]["lakekeeper"])
    assert mapper["config"]["included.custom.audience"] == lk_env["LAKEKEEPER__OPENID_AUDIENCE"]
    assert mapper["config"]["access.token.claim"] == "true"
    assert stack_env["STACK_OAUTH_SCOPE"] in client["optionalClientScopes"] + client["defaultClientScopes"]
    # a realm file listing clientScopes gets none of Keycloak's built-ins: `sub` must be declared
    assert any(m["protocolMapper"] == "oidc-sub-mapper"
               for name in client["defaultClientScopes"] for m in scopes[name]["protocolMappers"])
    referenced = set(client["defaultClientScopes"] + client["optionalClientScopes"]
                     + realm["defaultDefaultClientScopes"] + realm["defaultOptionalClientScopes"])
    assert referenced <= set(scopes)


def test_stack_env_points_the_bootstrap_at_the_compose_services(compose, realm):
    config = load_stack_config({}, STACK_ENV)
    services = compose["services"]
    assert urlparse(config.lakekeeper).port == published(services["lakekeeper"])[8181][1]
    token = urlparse(config.token_url)
    assert (token.hostname, token.port) == ("localhost", published(services["keycloak"])[8080][1])
    assert token.path == f"/realms/{realm['realm']}/protocol/openid-connect/token"
    endpoint = urlparse(config.s3_endpoint)
    assert endpoint.hostname == "minio" and endpoint.hostname in services
    assert urlparse(config.s3_public_endpoint).port == published(services["minio"])[endpoint.port][1]
    assert services["minio-bucket"]["command"][-1] == f"stack/{config.bucket}"
    assert env_of(services["minio"])["MINIO_ROOT_USER"] == config.access_key_id.reveal()
    assert config.flavor == "s3-compat" and config.sts_enabled and config.path_style


@pytest.fixture
def lakekeeper() -> Iterator[ManagementStandin]:
    standin = ManagementStandin()
    server = standin.serve()
    yield standin
    server.shutdown()
    assert standin.violations == [], "requests or responses off the wire contract"


def stack_config(url: str, **overrides: str) -> StackConfig:
    env = {"STACK_LAKEKEEPER_URL": url, "STACK_WAREHOUSE": "lakeflow", "STACK_BUCKET": "lakeflow",
           "STACK_KEY_PREFIX": "warehouse", "STACK_S3_ENDPOINT": "http://minio:9000",
           "STACK_S3_PUBLIC_ENDPOINT": "http://localhost:9000", "STACK_S3_ACCESS_KEY_ID": "ak",
           "STACK_S3_SECRET_ACCESS_KEY": "sk-never-printed", "NAMESPACE": "iot.raw", **overrides}
    return load_stack_config(env, None)


def run_bootstrap(config: StackConfig) -> tuple[BootstrapResult, list[str]]:
    lines: list[str] = []
    with open_session(config) as session:
        return bootstrap_stack(LakekeeperAdmin(config.lakekeeper, session), config, lines.append), lines


def test_bootstrap_twice_is_idempotent(lakekeeper):
    config = stack_config(lakekeeper.url)
    first, said = run_bootstrap(config)
    assert first.bootstrapped and first.warehouse_created
    assert first.namespaces_created == (("iot",), ("iot", "raw"))
    assert said == ["server: bootstrapped", f"warehouse lakeflow: created ({first.warehouse_id})",
                    "namespace iot: created", "namespace iot.raw: created"]
    created = [c.body for c in lakekeeper.calls if c.path.endswith("/namespaces")]
    assert created == [{"namespace": ["iot"], "properties": {}},
                       {"namespace": ["iot", "raw"], "properties": {}}], "parents first"
    profile = next(c.body for c in lakekeeper.calls
                   if c.method == "POST" and c.path == "/management/v1/warehouse")["storage-profile"]
    assert profile == {"type": "s3", "bucket": "lakeflow", "key-prefix": "warehouse",
                       "region": "us-east-1", "path-style-access": True, "flavor": "s3-compat",
                       "sts-enabled": True, "endpoint": "http://minio:9000"}

    second, said = run_bootstrap(config)
    assert second == BootstrapResult(first.warehouse_id, False, False, ())
    # no drift reported: the server stores the endpoint as http://minio:9000/ (with its trailing '/')
    assert lakekeeper.warehouses[first.warehouse_id] and said == [
        "server: already bootstrapped", f"warehouse lakeflow: exists ({first.warehouse_id})",
        "namespace iot: exists", "namespace iot.raw: exists"]
    assert [c.status for c in lakekeeper.calls if c.path == "/management/v1/bootstrap"] == [204], \
        "a server /management/v1/info calls bootstrapped is not bootstrapped again"
    assert [c.path for c in lakekeeper.calls].count("/management/v1/info") == 2
    assert sum(c.method == "POST" and c.path == "/management/v1/warehouse"
               for c in lakekeeper.calls) == 1, "an existing warehouse is looked up, not recreated"
    assert list(lakekeeper.warehouses) == [first.warehouse_id]


def test_a_pipelines_namespaces_are_created_once_each_parents_first(lakekeeper):
    config = stack_config(lakekeeper.url, NAMESPACE="plant")
    with open_session(config) as session:
        result = bootstrap_stack(LakekeeperAdmin(config.lakekeeper, session), config, lambda line: None,
                                 [("plant",), ("plant", "north"), ("lab",), ("plant", "north")])
    assert result.namespaces_created == (("plant",), ("plant", "north"), ("lab",))
    created = [c.body["namespace"] for c in lakekeeper.calls if c.path.endswith("/namespaces")]
    assert created == [["plant"], ["plant", "north"], ["lab"]]


def test_existing_warehouse_with_other_storage_is_kept_and_reported(lakekeeper):
    run_bootstrap(stack_config(lakekeeper.url, NAMESPACE="iot"))
    result, said = run_bootstrap(stack_config(lakekeeper.url, NAMESPACE="iot",
                                              STACK_KEY_PREFIX="elsewhere"))
    assert not result.warehouse_created
    assert any("key-prefix='warehouse', configured 'elsewhere'; left as it is" in s for s in said)


def test_aws_with_sts_needs_a_role_and_sends_it(lakekeeper):
    """Lakekeeper refuses an AWS profile with STS but no role (400 Invalidsts-role-arn): lakeflow
    says so first, naming the settings, and sends the role it is given."""
    with pytest.raises(SettingsError, match="STACK_STS_ROLE_ARN") as caught:
        stack_config(lakekeeper.url, STACK_S3_FLAVOR="aws")
    assert "STACK_ASSUME_ROLE_ARN" in str(caught.value)
    assert stack_config(lakekeeper.url, STACK_S3_FLAVOR="aws", STACK_STS_ENABLED="false").storage_profile()
    role = "arn:aws:iam::123456789012:role/lakekeeper-sts"
    result, _ = run_bootstrap(stack_config(lakekeeper.url, STACK_S3_FLAVOR="aws", STACK_STS_ROLE_ARN=role,
                                           NAMESPACE="iot"))
    profile = lakekeeper.warehouses[result.warehouse_id].profile
    assert (profile["flavor"], profile["sts-role-arn"], "assume-role-arn" in profile) == ("aws", role, False)
    assumed = stack_config(lakekeeper.url, STACK_S3_FLAVOR="aws", STACK_ASSUME_ROLE_ARN=role).storage_profile()
    assert (assumed["assume-role-arn"], "sts-role-arn" in assumed) == (role, False)


def test_the_stand_in_refuses_aws_with_sts_and_no_role_as_lakekeeper_does(lakekeeper):
    body = {"warehouse-name": "aws", "storage-profile": {"type": "s3", "bucket": "b", "region": "us-east-1",
                                                         "flavor": "aws", "sts-enabled": True}}
    answer = requests.post(f"{lakekeeper.url}/management/v1/warehouse", json=body, timeout=10)
    assert (answer.status_code, answer.json()["error"]["type"]) == (400, "Invalidsts-role-arn")


def test_name_taken_on_create_is_not_an_error(lakekeeper):
    config = stack_config(lakekeeper.url)
    run_bootstrap(config)
    with open_session(config) as session:
        assert LakekeeperAdmin(lakekeeper.url, session).create_warehouse(config) is None  # 409


def test_server_errors_carry_type_and_error_id_not_secrets(lakekeeper):
    run_bootstrap(stack_config(lakekeeper.url, NAMESPACE="iot"))
    overlapping = stack_config(lakekeeper.url, STACK_WAREHOUSE="other", NAMESPACE="iot")
    with pytest.raises(CatalogError) as caught:
        run_bootstrap(overlapping)
    err = caught.value
    assert (err.code, err.type) == (400, "CreateWarehouseStorageProfileOverlap")
    assert re.fullmatch(r"[0-9a-f-]{36}", err.error_id)
    assert "sk-never-printed" not in str(err) and "sk-never-printed" not in repr(overlapping)

    with open_session(overlapping) as session, pytest.raises(CatalogError) as caught:
        LakekeeperAdmin(lakekeeper.url, session).create_namespace("lakeflow", ["iot"])
    assert (caught.value.code, caught.value.type) == (400, "WarehouseIdIsNotUUID")


def test_wait_healthy_waits_for_a_starting_server_and_names_a_dead_one():
    starting = ManagementStandin(unhealthy_for_s=1.0)
    server = starting.serve()
    try:
        wait_healthy(starting.url, 10, print, interval_s=0.1)
    finally:
        server.shutdown()
    health = [c.status for c in starting.calls if c.path == "/health"]
    assert health[-1] == 200 and 503 in health and starting.violations == []
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(CatalogError, match=rf"{dead} is not healthy after 1 s \(last: ConnectionError\)"):
        wait_healthy(dead, 1, print, interval_s=0.1)


def test_settings_errors_name_every_variable():
    with pytest.raises(SettingsError) as caught:
        load_stack_config({"STACK_OAUTH_TOKEN_URL": "http://localhost:8080/t", "STACK_S3_FLAVOR": "minio2",
                           "STACK_STS_ENABLED": "yes", "NAMESPACE": "iot..raw",
                           "STACK_WAREHOUSE": "a/b", "STACK_S3_ENDPOINT": "minio:9000"}, None)
    text = str(caught.value)
    for name in ("STACK_OAUTH_CLIENT_SECRET", "STACK_S3_FLAVOR", "STACK_STS_ENABLED", "NAMESPACE",
                 "STACK_WAREHOUSE", "STACK_S3_ENDPOINT", "STACK_BUCKET", "STACK_S3_ACCESS_KEY_ID"):
        assert name in text


def test_a_bad_stack_url_is_shown_without_its_password():
    with pytest.raises(SettingsError) as caught:
        load_stack_config({"STACK_LAKEKEEPER_URL": "ftp://admin:pa55w0rd@lk:8181",
                           "STACK_S3_ENDPOINT": "minio:9000?secret_key=pa55w0rd"}, None)
    text = str(caught.value)
    assert "pa55w0rd" not in text
    assert "STACK_LAKEKEEPER_URL='ftp://admin:***@lk:8181'" in text
    assert "STACK_S3_ENDPOINT='minio:9000?secret_key=***'" in text


@pytest.fixture
def oauth() -> Iterator[OAuthStandin]:
    standin = OAuthStandin(client_secret="stand-in-client-secret").start()
    yield standin
    standin.stop()


@pytest.fixture
def secured(oauth) -> Iterator[ManagementStandin]:
    standin = ManagementStandin(accept=oauth.is_valid)
    server = standin.serve()
    yield standin
    server.shutdown()
    assert standin.violations == []


def write_stack_env(path: Path, lakekeeper_url: str, oauth: OAuthStandin, **extra: str) -> Path:
    values = {**dotenv_values(STACK_ENV), "STACK_LAKEKEEPER_URL": lakekeeper_url,
              "STACK_OAUTH_TOKEN_URL": oauth.token_url, "STACK_OAUTH_CLIENT_SECRET": oauth.client_secret,
              **extra}
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path


@pytest.fixture
def clean_env(monkeypatch):
    """The CLI reads os.environ: only the stack file should configure it."""
    for key in list(os.environ):
        if key.startswith(("STACK_", "OAUTH_")) or key in ("NAMESPACE", "TOKEN", "LAKEKEEPER", "WAREHOUSE_ID"):
            monkeypatch.delenv(key)


def test_cli_bootstraps_with_client_credentials_and_writes_env_local(
        tmp_path, secured, oauth, clean_env, capsys):
    stack_file = write_stack_env(tmp_path / "stack.env", secured.url, oauth)
    env_local = tmp_path / ".env.local"
    env_local.write_text("TOKEN=old-static-token\nNUM_SENSORS=7\n")
    env_local.chmod(0o600)
    argv = ["stack", "bootstrap", "--env-file", str(stack_file), "--wait", "5",
            "--write-env", str(env_local)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    warehouse_id = next(iter(secured.warehouses))
    assert f"WAREHOUSE_ID={warehouse_id}" in out and "OAUTH_CLIENT_SECRET=***" in out
    assert oauth.client_secret not in out
    assert oauth.scopes == ["lakekeeper"], "one token, asked for the lakekeeper scope"

    assert stat.S_IMODE(env_local.stat().st_mode) == 0o600
    settings = load_settings({}, env_local)
    assert settings.catalog == "lakekeeper" and settings.warehouse == warehouse_id
    assert settings.lakekeeper == secured.url and settings.token is None
    assert settings.oauth_client_secret.reveal() == oauth.client_secret
    assert settings.oauth_scope == "lakekeeper" and settings.s3_endpoint == "http://localhost:9000"
    assert settings.num_sensors == 7, "other lines of .env.local are kept"

    assert main(argv) == 0, "a second run is fine"
    assert "server: already bootstrapped" in capsys.readouterr().out


def test_cli_reports_a_rejected_token_and_a_wrong_secret(tmp_path, secured, oauth, clean_env, capsys):
    oauth_env = write_stack_env(tmp_path / "stack.env", secured.url, oauth)
    secured.accept = lambda token: False  # e.g. a token without aud=lakekeeper
    assert main(["stack", "bootstrap", "--env-file", str(oauth_env), "--wait", "5"]) == 2
    err = capsys.readouterr().err
    assert "401 AuthenticationFailed" in err and "aud" in err and "docs/oauth.md" in err

    wrong = write_stack_env(tmp_path / "wrong.env", secured.url, oauth,
                            STACK_OAUTH_CLIENT_SECRET="not-the-secret")
    assert main(["stack", "bootstrap", "--env-file", str(wrong), "--wait", "5"]) == 2
    err = capsys.readouterr().err
    assert "invalid_client" in err and "not-the-secret" not in err


def test_env_lines_without_oauth_leave_auth_alone(lakekeeper):
    config = stack_config(lakekeeper.url, NAMESPACE="iot")
    result, _ = run_bootstrap(config)
    assert env_lines(config, result) == {"LAKEKEEPER": lakekeeper.url, "WAREHOUSE_ID": result.warehouse_id,
                                         "S3_ENDPOINT": "http://localhost:9000", "NAMESPACE": "iot"}
