"""Settings: the environment and ``.env.local`` (the environment wins) → one frozen ``Settings``.

Every error names its variable and what is expected, and all of them are reported at once.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Mapping, Optional, TypeVar
from urllib.parse import urlparse

from lakeflow.secret import Secret, redact_url

T = TypeVar("T")

DEFAULT_LAKEKEEPER = "http://localhost:8181"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SECRET = re.compile(r"^[^\s\x00-\x1f\x7f]+$")  # one token: no spaces or control characters (header-safe)


class SettingsError(ValueError):
    """One or more variables are missing or malformed; the message names each of them."""


@dataclass(frozen=True)
class Settings:
    """Everything lakeflow reads from its environment. Build with :func:`load_settings`."""

    # catalog
    catalog: str  # "lakekeeper" or "local"
    lakekeeper: str
    warehouse: Optional[str]  # UUID or a warehouse name (resolved by the Lakekeeper client)
    project_id: Optional[str]
    token: Optional[Secret]
    oauth_token_url: Optional[str]
    oauth_client_id: Optional[str]
    oauth_client_secret: Optional[Secret]
    oauth_scope: Optional[str]
    s3_endpoint: Optional[str]  # override for the vended ``s3.endpoint``
    # table
    namespace: tuple[str, ...]
    table: str
    # local state: embedded catalog, warehouse, checkpoints; lineage events (compaction → harvest)
    home: Path
    # ingestion
    num_sensors: int
    num_records: int
    batch_size: int
    batch_interval_ms: int
    # HTTP
    http_timeout_s: float
    http_max_retries: int
    lineage_dir: Path

    @property
    def warehouse_dir(self) -> Path:
        """Root of the embedded local warehouse (``file://`` locations live under it)."""
        return self.home / "warehouse"

    @property
    def namespace_str(self) -> str:
        return ".".join(self.namespace)

    def describe(self) -> dict[str, str]:
        """Printable view of the settings; secrets are shown as ``***``."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = ".".join(value) if isinstance(value, tuple) else str(value)
        return out


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of a dotenv file (python-dotenv's parser; no interpolation of secrets)."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path, interpolate=False).items() if v is not None}


def load_settings(
    env: Optional[Mapping[str, str]] = None,
    env_file: Optional[Path] = None,
    *,
    local: Optional[bool] = None,
) -> Settings:
    """Build ``Settings`` from ``env`` (default ``os.environ``) over ``env_file``.

    ``env_file`` defaults to ``$LAKEFLOW_ENV_FILE`` or ``./.env.local``. The catalog is Lakekeeper
    when LAKEKEEPER or WAREHOUSE_ID is set, else the embedded local catalog; ``local`` forces it.
    """
    environ = dict(os.environ if env is None else env)
    path = env_file or Path(environ.get("LAKEFLOW_ENV_FILE") or ".env.local")
    values = {**read_env_file(path), **{k: v for k, v in environ.items() if v != ""}}
    errors: list[str] = []

    def get(name: str, default: Optional[str] = None) -> Optional[str]:
        v = values.get(name)
        return v.strip() if v is not None and v.strip() != "" else default

    def parse(name: str, default: str, conv: Callable[[str], T], expected: str) -> T:
        raw = get(name, default)
        try:
            return conv(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            errors.append(f"{name}={raw!r}: expected {expected}")
            return conv(default)

    def positive_int(raw: str) -> int:
        n = int(raw)
        if n <= 0:
            raise ValueError(raw)
        return n

    def non_negative_int(raw: str) -> int:
        n = int(raw)
        if n < 0:
            raise ValueError(raw)
        return n

    def positive_float(raw: str) -> float:
        x = float(raw)
        if not x > 0 or x == float("inf"):
            raise ValueError(raw)
        return x

    def records(raw: str) -> int:
        n = int(raw)
        if n < -1 or n == 0:
            raise ValueError(raw)
        return n

    lakekeeper_set = get("LAKEKEEPER") is not None or get("WAREHOUSE_ID") is not None
    catalog = "local" if local or (local is None and not lakekeeper_set) else "lakekeeper"

    lakekeeper = (get("LAKEKEEPER", DEFAULT_LAKEKEEPER) or "").rstrip("/")
    errors += url_errors("LAKEKEEPER", lakekeeper, DEFAULT_LAKEKEEPER, base=True)

    warehouse = get("WAREHOUSE_ID")
    token = get("TOKEN")
    oauth = {k: get(k) for k in ("OAUTH_TOKEN_URL", "OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET")}
    if catalog == "lakekeeper":
        if warehouse is None:
            errors.append("WAREHOUSE_ID is missing: expected the warehouse UUID (or its name)")
        elif not is_uuid(warehouse) and not _NAME.match(warehouse):
            errors.append(f"WAREHOUSE_ID={warehouse!r}: expected a UUID or a warehouse name")
        some_oauth = [k for k, v in oauth.items() if v]
        if token and some_oauth:
            errors.append("TOKEN and OAUTH_* are both set: expected one way to authenticate")
        elif some_oauth and len(some_oauth) < 3:
            missing = sorted(set(oauth) - set(some_oauth))
            errors.append(f"{', '.join(missing)} missing: OAuth2 client credentials need "
                          "OAUTH_TOKEN_URL, OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET")
        if oauth["OAUTH_TOKEN_URL"]:
            errors += url_errors("OAUTH_TOKEN_URL", oauth["OAUTH_TOKEN_URL"],
                                 "https://keycloak.example/realms/iceberg/protocol/openid-connect/token")
        for name, value in (("TOKEN", token), ("OAUTH_CLIENT_SECRET", oauth["OAUTH_CLIENT_SECRET"])):
            if value and not _SECRET.match(value):
                errors.append(f"{name}: expected one token without spaces or control characters "
                              "(the value is not shown)")
        for name in ("OAUTH_CLIENT_ID", "OAUTH_SCOPE", "PROJECT_ID"):
            value = get(name)
            if value and _CONTROL.search(value):
                errors.append(f"{name}={value!r}: expected one line without control characters")

    s3_endpoint = get("S3_ENDPOINT")
    if s3_endpoint:
        errors += url_errors("S3_ENDPOINT", s3_endpoint, "http://localhost:9000", base=True)

    namespace_raw = get("NAMESPACE", "iot") or "iot"
    namespace = tuple(namespace_raw.split("."))
    if not all(_NAME.match(level) for level in namespace):
        errors.append(f"NAMESPACE={namespace_raw!r}: expected dot-separated levels of letters, "
                      "digits, '_' or '-' (no '..', '/', '+' or spaces)")
    table = get("TABLE", "sensor-readings") or ""
    if not _NAME.match(table):
        errors.append(f"TABLE={table!r}: expected letters, digits, '_' or '-' (at most 128)")

    home = Path(get("LAKEFLOW_HOME", ".lakeflow") or ".lakeflow").expanduser().resolve()

    settings = Settings(
        catalog=catalog,
        lakekeeper=lakekeeper,
        warehouse=warehouse,
        project_id=get("PROJECT_ID"),
        token=Secret(token) if token else None,
        oauth_token_url=oauth["OAUTH_TOKEN_URL"],
        oauth_client_id=oauth["OAUTH_CLIENT_ID"],
        oauth_client_secret=Secret(oauth["OAUTH_CLIENT_SECRET"]) if oauth["OAUTH_CLIENT_SECRET"] else None,
        oauth_scope=get("OAUTH_SCOPE", "lakekeeper"),
        s3_endpoint=s3_endpoint,
        namespace=namespace,
        table=table,
        home=home,
        num_sensors=parse("NUM_SENSORS", "5", positive_int, "a positive integer"),
        num_records=parse("NUM_RECORDS", "-1", records, "a positive integer, or -1 to stream forever"),
        batch_size=parse("BATCH_SIZE", "10", positive_int, "a positive integer (records per batch)"),
        batch_interval_ms=parse("BATCH_INTERVAL_MS", "15000", positive_int,
                                "a positive integer (milliseconds between batches)"),
        http_timeout_s=parse("HTTP_TIMEOUT_S", "30", positive_float, "a positive number of seconds"),
        http_max_retries=parse("HTTP_MAX_RETRIES", "5", non_negative_int,
                               "a whole number of retries (0 or more)"),
        lineage_dir=Path(get("LINEAGE_DIR") or home / "lineage").expanduser().resolve(),
    )
    if errors:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(errors))
    return settings


def url_errors(name: str, value: str, example: str, *, base: bool = False) -> list[str]:
    """What is wrong with an http(s) URL variable (nothing: ``[]``). The URL is shown with its
    password as ``***``; one with credentials in it is refused; a ``base`` URL (one lakeflow
    appends paths to) has no query."""
    url = redact_url(value)
    shown = f"{name}={url!r}"
    try:
        parsed = urlparse(value)
        parsed.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError:
        return [f"{shown}: expected an http(s) URL like {example}"]
    if "@" in parsed.netloc:
        return [f"{name}: credentials inside the URL are not allowed ({url}); use TOKEN or OAUTH_* "
                "for Lakekeeper, vended credentials for S3"]
    if parsed.scheme not in ("http", "https") or not parsed.hostname or _CONTROL.search(value):
        return [f"{shown}: expected an http(s) URL like {example}"]
    if base and (parsed.query or parsed.fragment):
        return [f"{shown}: expected a base URL without '?' or '#', like {example}"]
    return []


def is_uuid(value: str) -> bool:
    """True when ``value`` is a UUID (a warehouse id rather than a warehouse name)."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
