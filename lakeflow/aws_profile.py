"""Refreshing storage credentials for long-running jobs: an AWS profile whose ``credential_process``
re-vends from Lakekeeper.

Vended STS credentials last an hour at most, and S3A keeps the credentials it started with. Instead
of static keys, Flink and Spark get S3A's *profile* credentials provider and an AWS profile whose
``credential_process`` runs ``lakeflow credential-process``; the AWS SDK re-runs the process when
the credentials near their ``Expiration`` (boto3: 15 min before, SDK v1/v2: 15 s before).

:func:`write_profile` writes two private files (directory 0700, files 0600):

- ``<dir>/credentials``: an AWS shared-credentials file (``[name]`` sections, the one layout SDK v1,
  SDK v2 and boto3 all read) with the profile's ``credential_process``;
- ``<dir>/<name>.env``: the catalog settings the process needs (LAKEKEEPER, WAREHOUSE_ID, TOKEN or
  OAUTH_*), read through ``LAKEFLOW_ENV_FILE`` — they hold the catalog secret, nothing else does.

:func:`refreshing` turns a table's S3A settings into the keyless, profile-provider form, and
:meth:`AwsProfile.env` is what every TaskManager / executor needs in its environment.
"""

from __future__ import annotations

import configparser
import io
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakeflow.credentials import S3ASettings
from lakeflow.errors import ConfigurationError
from lakeflow.runtime.files import write_private

if TYPE_CHECKING:
    from lakeflow.settings import Settings

# S3A's profile provider. Hadoop 3.3.x (flink-s3-fs-hadoop, hadoop-aws 3.3) uses AWS SDK v1;
# Hadoop 3.4+ uses SDK v2 and maps the v1 name to the v2 class itself, so v1 is the portable choice.
PROVIDERS = {
    "v1": "com.amazonaws.auth.profile.ProfileCredentialsProvider",
    "v2": "software.amazon.awssdk.auth.credentials.ProfileCredentialsProvider",
}
CREDENTIAL_KEYS = frozenset({"fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token"})
# AWS SDK for Java v1 reads at most this many bytes of a credential_process's output.
SDK_V1_OUTPUT_LIMIT = 1024


class ProfileError(ConfigurationError, ValueError):
    """The refreshing route cannot be set up as asked; the message says why."""


@dataclass(frozen=True)
class AwsProfile:
    """A written profile: its name, the shared-credentials file holding it, and its env file."""

    name: str
    credentials_file: Path
    env_file: Path
    command: str  # the credential_process line

    def env(self) -> dict[str, str]:
        """Environment for a process whose AWS SDK should use this profile (v1, v2 and boto3)."""
        path = str(self.credentials_file)
        return {
            "AWS_PROFILE": self.name,
            "AWS_SHARED_CREDENTIALS_FILE": path,  # boto3, SDK v2
            "AWS_CREDENTIAL_PROFILES_FILE": path,
        }  # SDK v1


def profile_name(namespace: Sequence[str], table: str) -> str:
    """``lakeflow.<namespace levels>.<table>``: one profile per table."""
    return ".".join(("lakeflow", *namespace, table))


def lakeflow_command(env_file: Path | None = None) -> list[str]:
    """This environment's ``lakeflow`` (``env LAKEFLOW_ENV_FILE=… <venv>/bin/lakeflow`` with ``env_file``)."""
    script = Path(sys.executable).with_name("lakeflow")
    program = [str(script)] if script.is_file() else [sys.executable, "-m", "lakeflow.cli"]
    if env_file is None:
        return program
    return [shutil.which("env") or "/usr/bin/env", f"LAKEFLOW_ENV_FILE={env_file}", *program]


def credential_process(env_file: Path, namespace: Sequence[str], table: str) -> str:
    """The ``credential_process`` line: ``env LAKEFLOW_ENV_FILE=… <venv>/bin/lakeflow credential-process …``.

    Quoted for both readers: boto3 splits it like a shell, the Java SDKs run it with ``sh -c``.
    """
    argv = [*lakeflow_command(env_file), "credential-process", "--namespace", ".".join(namespace), "--table", table]
    return shlex.join(argv)


def catalog_command(directory: Path, catalog_settings: Mapping[str, str]) -> str:
    """A shell command running ``lakeflow`` with the catalog settings of ``<directory>/lakeflow-catalog.env``
    (written private, 0600): what a TaskManager's per-table filesystems run with ``credential-process
    --namespace NS --table T`` appended (``lakeflow.flink.fs``, java/)."""
    directory = Path(directory).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    env_file = directory / "lakeflow-catalog.env"
    write_private(env_file, catalog_env(catalog_settings))
    return shlex.join(lakeflow_command(env_file))


def catalog_env(settings_values: Mapping[str, str]) -> str:
    """A dotenv file body (single-quoted values) from ``{variable: value}``."""
    lines = [
        "# Catalog settings for `lakeflow credential-process` (written by `lakeflow aws-profile`).",
        "# Holds the catalog credential: keep it private (mode 0600).",
    ]
    for key, value in settings_values.items():
        if "\n" in value or "\r" in value:
            raise ProfileError(f"{key}: a value spanning lines cannot go into an env file")
        lines.append(f"{key}='" + value.replace("\\", "\\\\").replace("'", "\\'") + "'")
    return "\n".join(lines) + "\n"


def write_profile(
    directory: Path, namespace: Sequence[str], table: str, catalog_settings: Mapping[str, str]
) -> AwsProfile:
    """Write (or replace) the table's profile in ``<directory>/credentials`` and its env file.

    Other profiles in the credentials file are kept. Both files are created 0600 and replaced
    atomically, so a TaskManager refreshing at that moment reads the old or the new file.
    """
    directory = Path(directory).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = profile_name(namespace, table)
    env_file = directory / f"{name}.env"
    write_private(env_file, catalog_env(catalog_settings))
    command = credential_process(env_file, namespace, table)

    credentials_file = directory / "credentials"
    profiles = configparser.ConfigParser(interpolation=None)
    if credentials_file.exists():
        profiles.read(credentials_file)
    profiles[name] = {"credential_process": command}
    text = io.StringIO()
    profiles.write(text)
    write_private(credentials_file, text.getvalue())
    return AwsProfile(name=name, credentials_file=credentials_file, env_file=env_file, command=command)


def refreshing(s3a: S3ASettings, sdk: str = "v1") -> S3ASettings:
    """The table's S3A settings without static keys, reading credentials through the profile provider."""
    if sdk not in PROVIDERS:
        raise ProfileError(f"unknown AWS SDK {sdk!r}: expected one of {', '.join(PROVIDERS)}")
    hadoop = {k: v for k, v in s3a.hadoop.items() if k not in CREDENTIAL_KEYS}
    hadoop["fs.s3a.aws.credentials.provider"] = PROVIDERS[sdk]
    return S3ASettings(hadoop=hadoop, expires_at=None)


def engine_settings(s3a: S3ASettings, profile: AwsProfile, engine: str) -> dict[str, str]:
    """Configuration for one engine: ``flink`` (fs.s3a.* plus the TaskManager environment on
    Kubernetes/YARN), ``spark`` (spark.hadoop.fs.s3a.* plus spark.executorEnv.*) or ``env``."""
    if engine == "flink":
        return {**s3a.flink(), **{f"containerized.taskmanager.env.{k}": v for k, v in profile.env().items()}}
    if engine == "spark":
        return {**s3a.spark(), **{f"spark.executorEnv.{k}": v for k, v in profile.env().items()}}
    if engine == "env":
        return profile.env()
    raise ProfileError(f"unknown format {engine!r}: expected flink, spark or env")


def catalog_settings(settings: Settings, warehouse_id: str) -> dict[str, str]:
    """The variables ``lakeflow credential-process`` needs to reach the catalog (secrets revealed:
    they go into the private env file only)."""
    out = {
        "LAKEKEEPER": settings.lakekeeper,
        "WAREHOUSE_ID": warehouse_id,
        "HTTP_TIMEOUT_S": str(settings.http_timeout_s),
        "HTTP_MAX_RETRIES": str(settings.http_max_retries),
    }
    if settings.project_id:
        out["PROJECT_ID"] = settings.project_id
    if settings.oauth_token_url and settings.oauth_client_id and settings.oauth_client_secret:
        out.update(
            {
                "OAUTH_TOKEN_URL": settings.oauth_token_url,
                "OAUTH_CLIENT_ID": settings.oauth_client_id,
                "OAUTH_CLIENT_SECRET": settings.oauth_client_secret.reveal(),
                "OAUTH_SCOPE": settings.oauth_scope or "",
            }
        )
    elif settings.token:
        out["TOKEN"] = settings.token.reveal()
    return out


def renewal_note(settings: Settings) -> str | None:
    """The warning for a catalog login the credential process cannot renew (a static TOKEN), else None."""
    if settings.token and not settings.oauth_client_secret:
        return "note: a static TOKEN cannot be renewed; a job running past its expiry needs OAUTH_* client credentials"
    return None
