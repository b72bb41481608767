"""Harvest configuration: a recipe file (YAML, DataHub's ``flink`` source layout) and CLI flags.

A recipe is either DataHub-shaped (``source: {type: flink, config: {...}}``) or the ``config``
mapping itself. ``${VAR}`` in a recipe is replaced from the environment (so secrets stay out of
the file). CLI flags win over the recipe. Unknown keys and wrong types are errors that name the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import Field

from lakeflow.errors import ConfigurationError
from lakeflow.lineage.flink_rest import Auth, Connection
from lakeflow.lineage.sql_gateway import MAX_ROWS
from lakeflow.secret import Secret
from lakeflow.settings.core import LocalState
from lakeflow.settings.env import Line, Password, Token, load

DEFAULT_STATES = ("RUNNING", "FINISHED", "FAILED", "CANCELED")
ALL_STATES = frozenset(
    {
        "INITIALIZING",
        "CREATED",
        "RUNNING",
        "FAILING",
        "FAILED",
        "CANCELLING",
        "CANCELED",
        "FINISHED",
        "RESTARTING",
        "SUSPENDED",
        "RECONCILING",
    }
)


class HarvestEnv(LocalState):
    """Lineage harvest (lakeflow harvest; docs/harvest.md).

    Credentials of the Flink JobManager REST API (and SQL Gateway) and of the lineage servers: read
    from the environment over .env.local, never from the command line. LAKEFLOW_HOME and
    LINEAGE_DIR (above) say where the compaction's run events are.
    """

    flink_api_token: Token | None = Field(
        None, alias="FLINK_API_TOKEN", description="Bearer token of the Flink REST API (or the basic auth below)."
    )
    flink_api_username: Line | None = Field(
        None, alias="FLINK_API_USERNAME", description="Basic-auth user of the Flink REST API."
    )
    flink_api_password: Password | None = Field(
        None, alias="FLINK_API_PASSWORD", description="Basic-auth password of the Flink REST API."
    )
    datahub_gms_token: Token | None = Field(
        None,
        alias="DATAHUB_GMS_TOKEN",
        description="Token for --datahub-gms (or name another source: --datahub-token env:VAR | file:PATH).",
    )
    openlineage_api_key: Token | None = Field(
        None,
        alias="OPENLINEAGE_API_KEY",
        description="API key (Bearer) for --openlineage-url of lakeflow harvest and of lakeflow flink up.",
    )

    @classmethod
    def load(cls, values: Mapping[str, str]) -> HarvestEnv:
        """From :func:`lakeflow.settings.environment`'s values; every error at once."""
        return load(cls, values, "harvest settings")

    def store(self, values: Mapping[str, str]) -> Path | None:
        """The lineage store to read by default: LINEAGE_DIR if set, else $LAKEFLOW_HOME/lineage if present."""
        return self.lineage_dir if "LINEAGE_DIR" in values or self.lineage_dir.is_dir() else None


class ConfigError(ConfigurationError, ValueError):
    """A recipe or flag value is wrong; the message names the key and what is expected."""


@dataclass(frozen=True)
class NamePattern:
    """Allow/deny regular expressions (``re.match``) on job names."""

    allow: tuple[str, ...] = (".*",)
    deny: tuple[str, ...] = ()
    ignore_case: bool = True

    def allowed(self, name: str) -> bool:
        flags = re.IGNORECASE if self.ignore_case else 0
        return any(re.match(p, name, flags) for p in self.allow) and not any(
            re.match(p, name, flags) for p in self.deny
        )


@dataclass(frozen=True)
class CatalogPlatform:
    """What a Flink catalog's tables are: ``platform`` (e.g. iceberg) and/or ``platform_instance``."""

    platform: str | None = None
    platform_instance: str | None = None


@dataclass(frozen=True)
class HarvestConfig:
    connection: Connection
    sql_gateway: Connection | None = None
    sql_gateway_operation_timeout_s: float = 60.0  # one statement, waiting and paging included
    sql_gateway_max_rows: int = MAX_ROWS  # result rows of one statement
    job_name_pattern: NamePattern = NamePattern()
    include_job_states: tuple[str, ...] = DEFAULT_STATES
    env: str = "PROD"
    platform_instance: str | None = None
    platform_instance_map: Mapping[str, str] = field(default_factory=dict)
    catalog_platform_map: Mapping[str, CatalogPlatform] = field(default_factory=dict)
    operator_granularity: str = "job"  # or "vertex"
    include_lineage: bool = True
    include_run_history: bool = True
    trust_operator_names: bool = False  # turn name-only evidence (KafkaSource-x) into edges
    max_workers: int = 10
    lineage_dir: Path | None = None  # compaction run events (OpenLineage) to merge
    state_file: Path | None = None
    remove_stale_metadata: bool = True
    fail_safe_threshold: float = 75.0


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: Any, where: str) -> Any:
    if isinstance(value, str):

        def sub(m: re.Match) -> str:
            if m.group(1) not in os.environ:
                raise ConfigError(f"{where}: environment variable {m.group(1)} is not set")
            return os.environ[m.group(1)]

        return _ENV.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: _expand(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    return value


class _Reader:
    """Typed access to one recipe mapping; every key read is marked, leftovers are errors."""

    def __init__(self, data: Any, where: str) -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
        self.data, self.where = dict(data), where
        self.seen: set[str] = set()

    def get(self, key: str, kind: type, default: Any = None) -> Any:
        self.seen.add(key)
        if key not in self.data or self.data[key] is None:
            return default
        value = self.data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"{self.where}.{key}: expected {kind.__name__}, got {value!r}")
        return value

    def sub(self, key: str) -> _Reader:
        self.seen.add(key)
        return _Reader(self.data.get(key), f"{self.where}.{key}")

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            raise ConfigError(f"{self.where}: unknown key(s) {', '.join(unknown)}")


def _strings(values: Any, where: str) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{where}: expected a list of strings, got {values!r}")
    return tuple(values)


def load_recipe(path: Path) -> HarvestConfig:
    """Read a recipe YAML file into a :class:`HarvestConfig`."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"recipe {path}: cannot read it: {exc}") from exc
    if isinstance(doc, Mapping) and "source" in doc:
        source = doc["source"] or {}
        if source.get("type", "flink") != "flink":
            raise ConfigError(f"recipe {path}: source.type must be 'flink', got {source.get('type')!r}")
        doc = source.get("config") or {}
    return from_mapping(_expand(doc, "config"))


def from_mapping(data: Any) -> HarvestConfig:
    """A :class:`HarvestConfig` from a recipe's ``config`` mapping."""
    r = _Reader(data, "config")
    c = r.sub("connection")
    rest = c.get("rest_api_url", str)
    if not rest:
        raise ConfigError("config.connection.rest_api_url: required (e.g. http://localhost:8081)")
    token, password = c.get("token", str), c.get("password", str)
    try:
        auth = Auth(
            token=Secret(token) if token else None,
            username=c.get("username", str),
            password=Secret(password) if password else None,
        )
    except ValueError as exc:
        raise ConfigError(f"config.connection: {exc}") from None
    conn = Connection(
        url=rest,
        auth=auth,
        verify_ssl=c.get("verify_ssl", bool, True),
        timeout_s=c.get("timeout_seconds", float, 30.0),
        max_retries=c.get("max_retries", int, 3),
        deadline_s=c.get("request_deadline_seconds", float, 120.0),
    )
    gateway_url = c.get("sql_gateway_url", str)
    op_timeout = c.get("sql_gateway_operation_timeout_seconds", float, 60.0)
    max_rows = c.get("sql_gateway_max_rows", int, MAX_ROWS)
    c.done()
    for key, value in (
        ("request_deadline_seconds", conn.deadline_s),
        ("sql_gateway_operation_timeout_seconds", op_timeout),
        ("sql_gateway_max_rows", max_rows),
    ):
        if value <= 0:
            raise ConfigError(f"config.connection.{key}: expected > 0, got {value}")

    p = r.sub("job_name_pattern")
    pattern = NamePattern(
        allow=_strings(p.get("allow", list, [".*"]), "config.job_name_pattern.allow"),
        deny=_strings(p.get("deny", list, []), "config.job_name_pattern.deny"),
        ignore_case=p.get("ignoreCase", bool, True),
    )
    p.done()
    for regex in pattern.allow + pattern.deny:
        try:
            re.compile(regex)
        except re.error as exc:
            raise ConfigError(f"config.job_name_pattern: {regex!r} is not a regular expression: {exc}") from None

    states = tuple(
        s.upper()
        for s in _strings(r.get("include_job_states", list, list(DEFAULT_STATES)), "config.include_job_states")
    )
    bad = sorted(set(states) - ALL_STATES)
    if bad:
        raise ConfigError(
            f"config.include_job_states: unknown state(s) {', '.join(bad)}; "
            f"expected some of {', '.join(sorted(ALL_STATES))}"
        )

    cmap = {}
    for name, detail in (r.get("catalog_platform_map", dict, {}) or {}).items():
        d = _Reader(detail, f"config.catalog_platform_map.{name}")
        cmap[str(name)] = CatalogPlatform(d.get("platform", str), d.get("platform_instance", str))
        d.done()
    pim = r.get("platform_instance_map", dict, {}) or {}
    granularity = r.get("operator_granularity", str, "job")
    if granularity not in ("job", "vertex"):
        raise ConfigError(f"config.operator_granularity: expected 'job' or 'vertex', got {granularity!r}")
    s = r.sub("stateful_ingestion")
    enabled = s.get("enabled", bool, False)
    state_file = s.get("state_file", str)
    if enabled and not state_file:
        raise ConfigError("config.stateful_ingestion.state_file: required when stateful ingestion is enabled")
    remove = s.get("remove_stale_metadata", bool, True)
    threshold = s.get("fail_safe_threshold", float, 75.0)
    s.done()
    if not 0 <= threshold <= 100:
        raise ConfigError(f"config.stateful_ingestion.fail_safe_threshold: expected 0–100, got {threshold}")
    lineage_dir = r.get("lineage_dir", str)
    workers = r.get("max_workers", int, 10)
    if workers < 1:
        raise ConfigError(f"config.max_workers: expected ≥ 1, got {workers}")
    cfg = HarvestConfig(
        connection=conn,
        sql_gateway=replace(conn, url=gateway_url) if gateway_url else None,
        sql_gateway_operation_timeout_s=op_timeout,
        sql_gateway_max_rows=max_rows,
        job_name_pattern=pattern,
        include_job_states=states,
        env=r.get("env", str, "PROD"),
        platform_instance=r.get("platform_instance", str),
        platform_instance_map={str(k): str(v) for k, v in pim.items()},
        catalog_platform_map=cmap,
        operator_granularity=granularity,
        include_lineage=r.get("include_lineage", bool, True),
        include_run_history=r.get("include_run_history", bool, True),
        trust_operator_names=r.get("trust_operator_names", bool, False),
        max_workers=workers,
        lineage_dir=Path(lineage_dir) if lineage_dir else None,
        state_file=Path(state_file) if enabled and state_file else None,
        remove_stale_metadata=remove,
        fail_safe_threshold=threshold,
    )
    r.done()
    return cfg
