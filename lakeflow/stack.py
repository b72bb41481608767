"""Bootstrap a Lakekeeper for lakeflow: accept the terms, create the warehouse, the namespace.

Idempotent: a server already bootstrapped (400 ``CatalogAlreadyBootstrapped``), a warehouse of
the same name (looked up, not recreated) and existing namespaces (409) are all fine, so it runs
on every ``make stack``. Configured by ``STACK_*`` variables (the environment over
``deploy/stack.env``, the local stack's development defaults); works against any Lakekeeper.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

from pydantic import Field, model_validator

from lakeflow.catalog.errors import CatalogError, error_from
from lakeflow.runtime.files import write_private
from lakeflow.settings.core import TOKEN_URL_EXAMPLE
from lakeflow.settings.env import EnvModel, Flag, Line, Namespace, Token, choices, load, overlay, parsed, url

if TYPE_CHECKING:  # requests is imported where it is used: `lakeflow --help` stays fast
    import requests

DEFAULT_STACK_ENV = Path("deploy/stack.env")
_FLAVORS = ("s3-compat", "aws")


def _warehouse_name(raw: str) -> str:
    if "/" in raw:
        raise ValueError(raw)
    return raw


# The 409s that mean "already there": Lakekeeper 0.13's types (AlreadyExistsException,
# WarehouseAlreadyExists) and the names other releases give the same answers.
_NAMESPACE_EXISTS = ("AlreadyExistsException", "NamespaceAlreadyExists")
_WAREHOUSE_EXISTS = ("WarehouseAlreadyExists", "WarehouseNameAlreadyExists")

Report = Callable[[str], None]


class StackConfig(EnvModel):
    """Local Lakekeeper stack: `make stack` / `lakeflow stack bootstrap` (docs/stack.md).

    Read from the environment over deploy/stack.env (the stack's development defaults), NOT from
    .env.local: set them in the environment to bootstrap another Lakekeeper. Compose alone also
    reads STACK_PG_PASSWORD, STACK_PG_ENCRYPTION_KEY and STACK_KEYCLOAK_ADMIN_PASSWORD there.
    """

    lakekeeper: Annotated[str, url("http://localhost:8181", base=True)] = Field(
        "http://localhost:8181", alias="STACK_LAKEKEEPER_URL", description="Lakekeeper as this host reaches it."
    )
    token_url: Annotated[str, url(TOKEN_URL_EXAMPLE)] | None = Field(
        None,
        alias="STACK_OAUTH_TOKEN_URL",
        examples=["http://localhost:8080/realms/iceberg/protocol/openid-connect/token"],
        description="The bootstrap's OAuth2 token endpoint (unset: a Lakekeeper without authentication).",
    )
    client_id: Line | None = Field(
        None, alias="STACK_OAUTH_CLIENT_ID", examples=["lakeflow"], description="The bootstrap's OAuth2 client id."
    )
    client_secret: Token | None = Field(
        None, alias="STACK_OAUTH_CLIENT_SECRET", description="The bootstrap's OAuth2 client secret."
    )
    scope: Line | None = Field(
        "lakekeeper", alias="STACK_OAUTH_SCOPE", description="Scope requested with the bootstrap's token."
    )
    warehouse: Annotated[str, parsed(_warehouse_name, "a warehouse name without '/'")] = Field(
        alias="STACK_WAREHOUSE",
        examples=["lakeflow"],
        description="the warehouse name to create (kept if it exists), e.g. lakeflow",
    )
    bucket: str = Field(alias="STACK_BUCKET", examples=["lakeflow"], description="the S3 bucket of the warehouse")
    key_prefix: str = Field(
        "", alias="STACK_KEY_PREFIX", examples=["warehouse"], description="Key prefix of the warehouse in the bucket."
    )
    s3_endpoint: Annotated[str, url("http://minio:9000", base=True)] | None = Field(
        None,
        alias="STACK_S3_ENDPOINT",
        examples=["http://minio:9000"],
        description="S3 endpoint as Lakekeeper reaches it (vended to clients).",
    )
    s3_public_endpoint: Annotated[str, url("http://localhost:9000", base=True)] | None = Field(
        None,
        alias="STACK_S3_PUBLIC_ENDPOINT",
        examples=["http://localhost:9000"],
        description="The same store as this host reaches it (written as S3_ENDPOINT).",
    )
    s3_region: str = Field("us-east-1", alias="STACK_S3_REGION", description="S3 region of the bucket.")
    path_style: Flag = Field(True, alias="STACK_S3_PATH_STYLE", description="Path-style S3 access (true/false).")
    flavor: Annotated[str, choices(_FLAVORS)] = Field(
        "s3-compat", alias="STACK_S3_FLAVOR", description="s3-compat (MinIO, SeaweedFS, …) or aws."
    )
    sts_enabled: Flag = Field(
        True, alias="STACK_STS_ENABLED", description="Lakekeeper vends STS credentials (true/false)."
    )
    sts_role_arn: Line | None = Field(
        None,
        alias="STACK_STS_ROLE_ARN",
        examples=["arn:aws:iam::123456789012:role/lakekeeper-sts"],
        description="The role Lakekeeper assumes to vend STS credentials (sts-role-arn). AWS with STS needs it "
        "or STACK_ASSUME_ROLE_ARN; S3-compatible stores whose STS wants a role ARN too.",
    )
    assume_role_arn: Line | None = Field(
        None,
        alias="STACK_ASSUME_ROLE_ARN",
        examples=["arn:aws:iam::123456789012:role/lakekeeper-storage"],
        description="A role Lakekeeper assumes for all its own storage access, vending included (assume-role-arn).",
    )
    access_key_id: Token = Field(
        alias="STACK_S3_ACCESS_KEY_ID", description="the S3 access key Lakekeeper uses (and assumes roles with)"
    )
    secret_access_key: Token = Field(
        alias="STACK_S3_SECRET_ACCESS_KEY", description="the S3 secret key Lakekeeper uses"
    )
    namespace: Namespace = Field(("iot",), alias="NAMESPACE", description="The namespace to create.")

    @model_validator(mode="before")
    @classmethod
    def _oauth_only_with_a_token_url(cls, data: Any) -> Any:
        """Without STACK_OAUTH_TOKEN_URL the client id, secret and scope are unused; the key
        prefix loses its slashes."""
        if not isinstance(data, Mapping):
            return data
        data = {**data, "STACK_KEY_PREFIX": str(data.get("STACK_KEY_PREFIX", "")).strip("/")}
        if not data.get("STACK_OAUTH_TOKEN_URL"):
            data = {k: v for k, v in data.items() if not k.startswith("STACK_OAUTH_")}
            data["STACK_OAUTH_SCOPE"] = None
        return data

    def storage_profile(self) -> dict[str, object]:
        """The ``storage-profile`` of ``POST /management/v1/warehouse`` (S3Profile)."""
        profile: dict[str, object] = {
            "type": "s3",
            "bucket": self.bucket,
            "key-prefix": self.key_prefix,
            "region": self.s3_region,
            "path-style-access": self.path_style,
            "flavor": self.flavor,
            "sts-enabled": self.sts_enabled,
        }
        if self.s3_endpoint:
            profile["endpoint"] = self.s3_endpoint
        if self.sts_role_arn:
            profile["sts-role-arn"] = self.sts_role_arn
        if self.assume_role_arn:
            profile["assume-role-arn"] = self.assume_role_arn
        return profile

    def storage_credential(self) -> dict[str, str]:
        """The ``storage-credential`` (S3 access key). Holds secrets: request bodies only."""
        return {
            "type": "s3",
            "credential-type": "access-key",
            "aws-access-key-id": self.access_key_id.reveal(),
            "aws-secret-access-key": self.secret_access_key.reveal(),
        }


def load_stack_config(env: Mapping[str, str], env_file: Path | None = DEFAULT_STACK_ENV) -> StackConfig:
    """``STACK_*`` (and ``NAMESPACE``) from ``env`` over ``env_file``; every error at once."""
    values = overlay(env, env_file)
    problems = []
    if values.get("STACK_OAUTH_TOKEN_URL") and not (
        values.get("STACK_OAUTH_CLIENT_ID") and values.get("STACK_OAUTH_CLIENT_SECRET")
    ):
        problems.append(
            "STACK_OAUTH_CLIENT_ID and STACK_OAUTH_CLIENT_SECRET are needed with "
            "STACK_OAUTH_TOKEN_URL (leave all three empty for a Lakekeeper without auth)"
        )
    sts_on = str(values.get("STACK_STS_ENABLED", "true")).lower() == "true"  # another value: its own error
    if (
        values.get("STACK_S3_FLAVOR") == "aws"
        and sts_on
        and not (values.get("STACK_STS_ROLE_ARN") or values.get("STACK_ASSUME_ROLE_ARN"))
    ):
        problems.append(
            "STACK_S3_FLAVOR=aws with STS on needs STACK_STS_ROLE_ARN (the role Lakekeeper assumes to vend "
            "credentials) or STACK_ASSUME_ROLE_ARN; or set STACK_STS_ENABLED=false"
        )
    where = f"environment over {env_file}" if env_file else "from the environment only"
    return load(StackConfig, values, f"stack settings ({where})", problems)


class LakekeeperAdmin:
    """The management and catalog calls the bootstrap makes, over one ``requests`` session."""

    def __init__(self, base_url: str, session: requests.Session) -> None:
        self.base = base_url.rstrip("/")
        self.session = session

    def _call(self, method: str, path: str, json: Mapping[str, Any] | None = None) -> requests.Response:
        import requests

        from lakeflow.auth import AuthError

        try:
            resp = self.session.request(method, self.base + path, json=json)
        except AuthError as exc:
            raise CatalogError(str(exc)) from None
        except requests.RequestException as exc:
            raise CatalogError(f"{method} {self.base}{path} failed: {type(exc).__name__}") from exc
        if resp.status_code == 401:
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

    def bootstrap(self) -> bool:
        """Accept the terms of use; False when the server was already bootstrapped."""
        resp = self._call("POST", "/management/v1/bootstrap", json={"accept-terms-of-use": True})
        if resp.status_code == 204:
            return True
        error = self._error(resp, "bootstrap")
        if resp.status_code == 400 and error.type == "CatalogAlreadyBootstrapped":
            return False
        raise error

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


@dataclass(frozen=True)
class BootstrapResult:
    warehouse_id: str
    bootstrapped: bool  # this run bootstrapped the server
    warehouse_created: bool
    namespaces_created: tuple[tuple[str, ...], ...]


def bootstrap_stack(
    admin: LakekeeperAdmin, config: StackConfig, report: Report, namespaces: Sequence[tuple[str, ...]] = ()
) -> BootstrapResult:
    """Bootstrap, ensure the warehouse, ensure the namespace and ``namespaces`` (a pipeline's streams';
    parents first, each once); report each step."""
    bootstrapped = admin.bootstrap()
    report("server: bootstrapped" if bootstrapped else "server: already bootstrapped")

    warehouse_id, created = _ensure_warehouse(admin, config, report)
    report(f"warehouse {config.warehouse}: {'created' if created else 'exists'} ({warehouse_id})")

    made: list[tuple[str, ...]] = []
    wanted = dict.fromkeys(ns[:depth] for ns in (config.namespace, *namespaces) for depth in range(1, len(ns) + 1))
    for levels in wanted:
        new = admin.create_namespace(warehouse_id, levels)
        report(f"namespace {'.'.join(levels)}: {'created' if new else 'exists'}")
        if new:
            made.append(levels)
    return BootstrapResult(warehouse_id, bootstrapped, created, tuple(made))


def _ensure_warehouse(admin: LakekeeperAdmin, config: StackConfig, report: Report) -> tuple[str, bool]:
    """The warehouse's id, and whether this call created it (an existing one is kept as it is)."""
    existing = admin.find_warehouse(config.warehouse)
    if existing is None:
        new_id = admin.create_warehouse(config)
        if new_id is not None:
            return new_id, True
        existing = admin.find_warehouse(config.warehouse)  # created meanwhile: 409
        if existing is None:
            raise CatalogError(
                f"warehouse {config.warehouse} exists (409) but is not listed: "
                "is it deactivated, or in another project?"
            )
    _report_drift(existing, config, report)
    return str(existing["id"]), False


def _report_drift(existing: Mapping, config: StackConfig, report: Report) -> None:
    """Say so when an existing warehouse's storage differs from the configured one (not changed)."""
    have = existing.get("storage-profile") or {}
    want = config.storage_profile()
    for key in ("bucket", "key-prefix", "endpoint", "sts-enabled", "sts-role-arn", "assume-role-arn"):
        if key in want and _normalized(key, have.get(key)) != _normalized(key, want[key]):
            report(
                f"warning: warehouse {config.warehouse} has {key}={have.get(key)!r}, "
                f"configured {want[key]!r}; left as it is"
            )


def _normalized(key: str, value: object) -> object:
    """A profile value as Lakekeeper compares it: it stores an endpoint with a trailing '/'."""
    return value.rstrip("/") if key == "endpoint" and isinstance(value, str) else value


def env_lines(config: StackConfig, result: BootstrapResult) -> dict[str, str]:
    """The ``.env.local`` entries that point lakeflow at this Lakekeeper (secrets included)."""
    lines = {"LAKEKEEPER": config.lakekeeper, "WAREHOUSE_ID": result.warehouse_id}
    if config.token_url and config.client_id and config.client_secret:
        lines.update(
            TOKEN="",
            OAUTH_TOKEN_URL=config.token_url,
            OAUTH_CLIENT_ID=config.client_id,
            OAUTH_CLIENT_SECRET=config.client_secret.reveal(),
            OAUTH_SCOPE=config.scope or "",
        )
    if config.s3_public_endpoint:
        lines["S3_ENDPOINT"] = config.s3_public_endpoint
    lines["NAMESPACE"] = ".".join(config.namespace)
    return lines


def write_env(path: Path, lines: Mapping[str, str]) -> None:
    """Set ``lines`` in the dotenv file ``path`` (other lines kept, python-dotenv's parser); the
    file is rewritten private (0600), as it holds secrets."""
    from dotenv.parser import parse_stream

    text = path.read_text() if path.exists() else ""
    out, found = [], set()
    for binding in parse_stream(io.StringIO(text)):
        if binding.key is not None and binding.key in lines:  # every occurrence, as set_key does
            out.append(f"{binding.key}={lines[binding.key]}\n")
            found.add(binding.key)
        else:
            out.append(binding.original.string)
    if out and not out[-1].endswith("\n"):
        out.append("\n")
    out += [f"{key}={value}\n" for key, value in lines.items() if key not in found]
    write_private(path, "".join(out))


def open_session(config: StackConfig) -> requests.Session:
    """A session for the bootstrap (lakeflow.http): OAuth2 client credentials when configured."""
    from lakeflow.auth import BearerAuth, OAuthClientCredentials
    from lakeflow.http import HttpOptions, new_session

    options = HttpOptions(max_retries=3)
    if not (config.token_url and config.client_id and config.client_secret):
        return new_session(options)
    provider = OAuthClientCredentials(
        config.token_url, config.client_id, config.client_secret, config.scope, options=options
    )
    return new_session(options, BearerAuth(provider))
