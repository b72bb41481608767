"""The ``STACK_*`` settings of ``lakeflow stack bootstrap``: the server, its admin's client, the jobs'
clients, the warehouse and its storage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from lakeflow.settings.core import TOKEN_URL_EXAMPLE
from lakeflow.settings.env import EnvModel, Flag, Line, Namespace, Token, choices, load, overlay, parsed, url

DEFAULT_STACK_ENV = Path("deploy/stack.env")
_FLAVORS = ("s3-compat", "aws")
# The jobs that may run as their own principal: (job, what the docs call it, its variables' prefix).
JOBS = (("ingest", "ingestion", "STACK_INGEST_CLIENT_"), ("compact", "compaction", "STACK_COMPACT_CLIENT_"))


def _warehouse_name(raw: str) -> str:
    if "/" in raw:
        raise ValueError(raw)
    return raw


@dataclass(frozen=True)
class JobClient:
    """The OAuth2 client one job runs as (its secret is a :class:`~lakeflow.secret.Secret`)."""

    job: str  # "ingest" or "compact": its env file's name
    title: str  # "ingestion" or "compaction"
    client_id: str
    client_secret: Token


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
        description="The OAuth2 token endpoint of the admin and the jobs (unset: a Lakekeeper without authentication).",
    )
    client_id: Line | None = Field(
        None,
        alias="STACK_OAUTH_CLIENT_ID",
        examples=["lakeflow"],
        description="The admin's OAuth2 client id: it bootstraps a new server (becoming its admin); a "
        "server already bootstrapped with authorization must have it as its admin.",
    )
    client_secret: Token | None = Field(
        None, alias="STACK_OAUTH_CLIENT_SECRET", description="The admin's OAuth2 client secret."
    )
    scope: Line | None = Field(
        "lakekeeper", alias="STACK_OAUTH_SCOPE", description="Scope requested with every token (admin and jobs)."
    )
    ingest_client_id: Line | None = Field(
        None,
        alias="STACK_INGEST_CLIENT_ID",
        examples=["lakeflow-ingest"],
        description="The ingestion job's own OAuth2 client id (with STACK_COMPACT_CLIENT_*: one principal per "
        "job, each granted only what it needs, docs/lakekeeper.md#least-privilege; unset: every job runs as "
        "the admin's client).",
    )
    ingest_client_secret: Token | None = Field(
        None, alias="STACK_INGEST_CLIENT_SECRET", description="The ingestion job's OAuth2 client secret."
    )
    compact_client_id: Line | None = Field(
        None,
        alias="STACK_COMPACT_CLIENT_ID",
        examples=["lakeflow-compact"],
        description="The compaction job's own OAuth2 client id (with STACK_INGEST_CLIENT_*).",
    )
    compact_client_secret: Token | None = Field(
        None, alias="STACK_COMPACT_CLIENT_SECRET", description="The compaction job's OAuth2 client secret."
    )
    managed_access: Flag = Field(
        False,
        alias="STACK_MANAGED_ACCESS",
        description="Turn managed access on for the streams' namespaces: owners (the ingestion, of its raw "
        "tables) cannot pass grants on; only admins grant (true/false).",
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

    @property
    def jobs(self) -> tuple[JobClient, ...]:
        """The jobs' own clients (none: every job runs as the admin's client)."""
        found = []
        for job, title, _ in JOBS:
            client_id, secret = getattr(self, f"{job}_client_id"), getattr(self, f"{job}_client_secret")
            if client_id and secret:
                found.append(JobClient(job, title, client_id, secret))
        return tuple(found)

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
    problems += _job_problems(values)
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


def _job_problems(values: Mapping[str, str]) -> list[str]:
    """The jobs' clients: both jobs or neither, each with its secret, behind the token endpoint, and
    each its own client (not the admin's, not the other job's)."""
    given = [prefix + part for _, _, prefix in JOBS for part in ("ID", "SECRET") if values.get(prefix + part)]
    if not given:
        return []
    problems = []
    missing = [prefix + part for _, _, prefix in JOBS for part in ("ID", "SECRET") if not values.get(prefix + part)]
    if missing:
        problems.append(
            f"{', '.join(missing)} missing beside {', '.join(given)}: one principal per job needs the "
            "ingestion's and the compaction's client id and secret (or none of them)"
        )
    if not values.get("STACK_OAUTH_TOKEN_URL"):
        problems.append(f"{', '.join(given)} need STACK_OAUTH_TOKEN_URL (the jobs' token endpoint)")
    ids = {
        name: values.get(name)
        for name in ("STACK_OAUTH_CLIENT_ID", "STACK_INGEST_CLIENT_ID", "STACK_COMPACT_CLIENT_ID")
        if values.get(name)
    }
    names = list(ids)
    for i, name in enumerate(names):
        same = [other for other in names[i + 1 :] if ids[other] == ids[name]]
        if same:
            problems.append(f"{name} and {', '.join(same)} are the same client: each job needs its own principal")
    return problems
