"""Vended storage credentials → Hadoop S3A settings, viewed three ways: Flink, Spark, boto3.

Lakekeeper hands out Iceberg-style ``s3.*`` keys (in ``config`` and in ``storage-credentials[]``);
Flink's ``flink-s3-fs-hadoop`` and Spark's ``s3a`` read ``fs.s3a.*``. One function translates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlparse

from lakeflow.secret import REDACTED, redact

TEMPORARY_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
S3A_SECRET_KEYS = frozenset({"fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token", "fs.s3a.encryption.key"})


@dataclass(frozen=True)
class StorageCredential:
    """One ``storage-credentials[]`` entry: the location prefix it covers and its config."""

    prefix: str
    config: Mapping[str, str] = field(repr=False)

    def __repr__(self) -> str:
        return f"StorageCredential(prefix={self.prefix!r}, config={redact(self.config)!r})"


@dataclass(frozen=True)
class VendedConfig:
    """A table's storage configuration as vended: ``config`` merged with the matching credential."""

    location: str
    config: Mapping[str, str] = field(default_factory=dict, repr=False)
    credentials: Sequence[StorageCredential] = ()

    def __repr__(self) -> str:
        return (
            f"VendedConfig(location={self.location!r}, config={redact(self.config)!r}, "
            f"credentials={list(self.credentials)!r})"
        )

    def merged(self) -> dict[str, str]:
        """``config`` overlaid with the credential whose prefix best matches the location."""
        best: StorageCredential | None = None
        for cred in self.credentials:
            matches = self.location.startswith(cred.prefix.rstrip("/")) or not cred.prefix
            if matches and (best is None or len(cred.prefix) > len(best.prefix)):
                best = cred
        if best is None and self.credentials:
            best = self.credentials[0]
        return {**self.config, **(best.config if best else {})}

    @property
    def expires_at(self) -> datetime | None:
        """When the vended credentials expire (``expiration-time`` / ``…-expires-at-ms``), if said."""
        return expiry_of(self.merged())

    @property
    def has_keys(self) -> bool:
        return "s3.access-key-id" in self.merged()


def parse_vended(
    location: str, config: Mapping[str, Any] | None, storage_credentials: Sequence[Mapping[str, Any]] | None
) -> VendedConfig:
    """Build a :class:`VendedConfig` from a Lakekeeper load/credentials response's parts."""
    creds = tuple(
        StorageCredential(
            prefix=str(c.get("prefix", "")), config={str(k): str(v) for k, v in (c.get("config") or {}).items()}
        )
        for c in (storage_credentials or ())
    )
    return VendedConfig(
        location=location, config={str(k): str(v) for k, v in (config or {}).items()}, credentials=creds
    )


def expiry_of(config: Mapping[str, str]) -> datetime | None:
    """The credential expiry in a vended config as an aware UTC datetime, or None."""
    for key in ("expiration-time", "s3.session-token-expires-at-ms"):
        raw = config.get(key)
        if raw:
            try:
                return datetime.fromtimestamp(int(raw) / 1000, tz=timezone.utc)
            except ValueError:
                try:
                    return datetime.fromisoformat(raw.replace("Z", "+00:00")).astimezone(timezone.utc)
                except ValueError:
                    continue
    return None


@dataclass(frozen=True)
class S3ASettings:
    """Hadoop S3A settings (``fs.s3a.*``) for one table, with views for each engine."""

    hadoop: Mapping[str, str] = field(repr=False)
    expires_at: datetime | None = None

    def __repr__(self) -> str:
        return f"S3ASettings(hadoop={self.redacted()!r}, expires_at={self.expires_at!r})"

    def redacted(self) -> dict[str, str]:
        return redact(self.hadoop, S3A_SECRET_KEYS)

    def flink(self) -> dict[str, str]:
        """Flink configuration keys: flink-s3-fs-hadoop forwards ``fs.s3a.*`` to S3A as is."""
        return dict(self.hadoop)

    def spark(self) -> dict[str, str]:
        """Spark conf: ``spark.hadoop.fs.s3a.*``."""
        return {f"spark.hadoop.{k}": v for k, v in self.hadoop.items()}

    def boto3(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3.client("s3", **kwargs)``."""
        h = self.hadoop
        kwargs: dict[str, Any] = {}
        for src, dst in (
            ("fs.s3a.access.key", "aws_access_key_id"),
            ("fs.s3a.secret.key", "aws_secret_access_key"),
            ("fs.s3a.session.token", "aws_session_token"),
            ("fs.s3a.endpoint", "endpoint_url"),
            ("fs.s3a.endpoint.region", "region_name"),
        ):
            if h.get(src):
                kwargs[dst] = h[src]
        if h.get("fs.s3a.path.style.access") == "true":
            from botocore.config import Config

            kwargs["config"] = Config(s3={"addressing_style": "path"})
        return kwargs

    def view(self, fmt: str) -> dict[str, str]:
        """``flink``, ``spark``, ``s3a`` or ``boto3`` as ``key -> str`` (for printing)."""
        if fmt == "flink":
            return self.flink()
        if fmt == "spark":
            return self.spark()
        if fmt == "s3a":
            return dict(self.hadoop)
        if fmt == "boto3":
            out = {k: str(v) for k, v in self.boto3().items() if k != "config"}
            if "config" in self.boto3():
                out["addressing_style"] = "path"
            return out
        raise ValueError(f"unknown format {fmt!r}: expected flink, spark, s3a or boto3")


def to_s3a(vended: VendedConfig, endpoint_override: str | None = None) -> S3ASettings:
    """Translate vended ``s3.*`` keys into ``fs.s3a.*`` (see the table in docs/lakekeeper.md).

    ``endpoint_override`` replaces ``s3.endpoint`` (a host-side client cannot reach the
    ``http://minio:9000`` Lakekeeper itself uses). An entry with no keys gives no credentials.
    """
    c = vended.merged()
    out: dict[str, str] = {"fs.s3a.directory.marker.retention": "keep"}
    if c.get("s3.access-key-id"):
        out["fs.s3a.access.key"] = c["s3.access-key-id"]
        out["fs.s3a.secret.key"] = c.get("s3.secret-access-key", "")
        if c.get("s3.session-token"):
            out["fs.s3a.session.token"] = c["s3.session-token"]
            out["fs.s3a.aws.credentials.provider"] = TEMPORARY_PROVIDER
        else:
            out["fs.s3a.aws.credentials.provider"] = SIMPLE_PROVIDER
    endpoint = endpoint_override or c.get("s3.endpoint") or c.get("client.endpoint")
    if endpoint:
        endpoint = endpoint.rstrip("/")
        out["fs.s3a.endpoint"] = endpoint
        if urlparse(endpoint).scheme == "http":
            out["fs.s3a.connection.ssl.enabled"] = "false"
    region = c.get("s3.region") or c.get("client.region")
    if region:
        out["fs.s3a.endpoint.region"] = region
    if c.get("s3.path-style-access"):
        out["fs.s3a.path.style.access"] = c["s3.path-style-access"].lower()
    sse = (c.get("s3.sse.type") or "").lower()
    if sse in ("kms", "aws:kms", "sse-kms"):
        out["fs.s3a.encryption.algorithm"] = "SSE-KMS"
        if c.get("s3.sse.key"):
            out["fs.s3a.encryption.key"] = c["s3.sse.key"]
    elif sse in ("s3", "aes256", "sse-s3"):
        out["fs.s3a.encryption.algorithm"] = "SSE-S3"
    return S3ASettings(hadoop=out, expires_at=expiry_of(c))


def show(config: Mapping[str, str], show_secrets: bool = False) -> list[str]:
    """``key=value`` lines, sorted, secrets as ``***`` unless ``show_secrets``."""
    shown = dict(config) if show_secrets else redact(config, S3A_SECRET_KEYS)
    return [f"{k}={v}" for k, v in sorted(shown.items())]


__all__ = [
    "REDACTED",
    "S3ASettings",
    "StorageCredential",
    "VendedConfig",
    "expiry_of",
    "parse_vended",
    "show",
    "to_s3a",
]
