"""Harvest configuration: a recipe file (YAML, DataHub's ``flink`` source layout) and CLI flags.

A recipe is either DataHub-shaped (``source: {type: flink, config: {...}}``) or the ``config``
mapping itself. ``${VAR}`` in a recipe is replaced from the environment (so secrets stay out of
the file). CLI flags win over the recipe: they are set into it before it is validated, once, by
the pydantic models below (unknown keys forbidden, each default declared once); every error is one
line naming the recipe key (or the flag that set it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from lakeflow.errors import ConfigurationError
from lakeflow.lineage.flink_rest import Auth, Connection
from lakeflow.lineage.sql_gateway import MAX_ROWS
from lakeflow.settings.core import LocalState
from lakeflow.settings.env import Invalid, Line, Password, Token, load

DEFAULT_STATES = ("RUNNING", "FINISHED", "FAILED", "CANCELED")
CONNECTION = Connection("")  # the defaults of a connection the recipe does not set
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


class _Recipe(BaseModel):
    """A mapping of the recipe: unknown keys are errors; a key set to null takes its default."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        return {k: v for k, v in data.items() if v is not None} if isinstance(data, Mapping) else data


class ConnectionRecipe(_Recipe):
    """``connection``: how to reach the JobManager's REST API (and the SQL Gateway's)."""

    rest_api_url: StrictStr = Field(min_length=1, description="JobManager REST API, e.g. http://localhost:8081")
    sql_gateway_url: StrictStr | None = Field(None, description="SQL Gateway REST API: resolves catalog tables")
    token: Token | None = Field(None, description="bearer token (or username + password)")
    username: StrictStr | None = None
    password: Password | None = None
    timeout_seconds: StrictFloat = Field(CONNECTION.timeout_s, gt=0, description="each read")
    request_deadline_seconds: StrictFloat = Field(CONNECTION.deadline_s, gt=0, description="a whole answer")
    max_retries: StrictInt = Field(CONNECTION.max_retries, ge=0, description="retries after the first attempt")
    verify_ssl: StrictBool = CONNECTION.verify_ssl
    sql_gateway_operation_timeout_seconds: StrictFloat = Field(60.0, gt=0, description="one statement, paging included")
    sql_gateway_max_rows: StrictInt = Field(MAX_ROWS, gt=0, description="result rows of one statement")

    @model_validator(mode="after")
    def _one_auth(self) -> ConnectionRecipe:
        self.auth()  # raises ValueError on token and password, or a user without a password
        return self

    def auth(self) -> Auth:
        return Auth(token=self.token or None, username=self.username, password=self.password or None)

    def connection(self) -> Connection:
        return Connection(
            url=self.rest_api_url,
            auth=self.auth(),
            verify_ssl=self.verify_ssl,
            timeout_s=self.timeout_seconds,
            max_retries=self.max_retries,
            deadline_s=self.request_deadline_seconds,
        )


class NamePattern(_Recipe):
    """``job_name_pattern``: allow/deny regular expressions (``re.match``) on job names."""

    allow: tuple[StrictStr, ...] = (".*",)
    deny: tuple[StrictStr, ...] = ()
    ignore_case: StrictBool = Field(True, alias="ignoreCase")

    @field_validator("allow", "deny")
    @classmethod
    def _regular_expressions(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for regex in patterns:
            try:
                re.compile(regex)
            except re.error as exc:
                raise ValueError(f"{regex!r} is not a regular expression: {exc}") from None
        return patterns

    def allowed(self, name: str) -> bool:
        flags = re.IGNORECASE if self.ignore_case else 0
        return any(re.match(p, name, flags) for p in self.allow) and not any(
            re.match(p, name, flags) for p in self.deny
        )


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class CatalogPlatform:
    """What a Flink catalog's tables are: ``platform`` (e.g. iceberg) and/or ``platform_instance``."""

    platform: StrictStr | None = None
    platform_instance: StrictStr | None = None


class StatefulIngestion(_Recipe):
    """``stateful_ingestion``: remove the entities a harvest no longer emits (``state_file`` keeps them)."""

    enabled: StrictBool = False
    state_file: StrictStr | None = None
    remove_stale_metadata: StrictBool = True
    fail_safe_threshold: StrictFloat = Field(75.0, ge=0, le=100, description="max % of entities removed at once")

    @model_validator(mode="after")
    def _state_file_when_enabled(self) -> StatefulIngestion:
        if self.enabled and not self.state_file:
            raise ValueError("state_file: required when stateful ingestion is enabled")
        return self


class FlinkRecipe(_Recipe):
    """A recipe's ``config`` mapping (DataHub's ``flink`` source, plus lakeflow's keys)."""

    connection: ConnectionRecipe = Field(default_factory=dict, validate_default=True)
    job_name_pattern: NamePattern = NamePattern()
    include_job_states: tuple[StrictStr, ...] = DEFAULT_STATES
    env: StrictStr = "PROD"
    platform_instance: StrictStr | None = None
    platform_instance_map: dict[StrictStr, StrictStr] = {}
    catalog_platform_map: dict[StrictStr, CatalogPlatform] = {}
    operator_granularity: Literal["job", "vertex"] = "job"
    include_lineage: StrictBool = True
    include_run_history: StrictBool = True
    trust_operator_names: StrictBool = False  # turn name-only evidence (KafkaSource-x) into edges
    max_workers: StrictInt = Field(10, ge=1, description="parallel job fetches")
    lineage_dir: StrictStr | None = None  # compaction run events (OpenLineage) to merge
    stateful_ingestion: StatefulIngestion = StatefulIngestion()

    @field_validator("include_job_states")
    @classmethod
    def _known_states(cls, states: tuple[str, ...]) -> tuple[str, ...]:
        upper = tuple(s.upper() for s in states)
        bad = sorted(set(upper) - ALL_STATES)
        if bad:
            raise ValueError(f"unknown state(s) {', '.join(bad)}; expected some of {', '.join(sorted(ALL_STATES))}")
        return upper

    def config(self) -> HarvestConfig:
        c, s = self.connection, self.stateful_ingestion
        conn = c.connection()
        return HarvestConfig(
            connection=conn,
            sql_gateway=replace(conn, url=c.sql_gateway_url) if c.sql_gateway_url else None,
            sql_gateway_operation_timeout_s=c.sql_gateway_operation_timeout_seconds,
            sql_gateway_max_rows=c.sql_gateway_max_rows,
            job_name_pattern=self.job_name_pattern,
            include_job_states=self.include_job_states,
            env=self.env,
            platform_instance=self.platform_instance,
            platform_instance_map=dict(self.platform_instance_map),
            catalog_platform_map=dict(self.catalog_platform_map),
            operator_granularity=self.operator_granularity,
            include_lineage=self.include_lineage,
            include_run_history=self.include_run_history,
            trust_operator_names=self.trust_operator_names,
            max_workers=self.max_workers,
            lineage_dir=Path(self.lineage_dir) if self.lineage_dir else None,
            state_file=Path(s.state_file) if s.enabled and s.state_file else None,
            remove_stale_metadata=s.remove_stale_metadata,
            fail_safe_threshold=s.fail_safe_threshold,
        )


@dataclass(frozen=True)
class HarvestConfig:
    """What a harvest reads and how: a validated :class:`FlinkRecipe` (:func:`from_mapping`)."""

    connection: Connection
    sql_gateway: Connection | None
    sql_gateway_operation_timeout_s: float
    sql_gateway_max_rows: int
    job_name_pattern: NamePattern
    include_job_states: tuple[str, ...]
    env: str
    platform_instance: str | None
    platform_instance_map: Mapping[str, str]
    catalog_platform_map: Mapping[str, CatalogPlatform]
    operator_granularity: str
    include_lineage: bool
    include_run_history: bool
    trust_operator_names: bool
    max_workers: int
    lineage_dir: Path | None
    state_file: Path | None
    remove_stale_metadata: bool
    fail_safe_threshold: float


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_KEYS = frozenset({"token", "password"})
_EXPECTED = {
    "int_type": "int",
    "int_parsing": "int",
    "int_from_float": "int",
    "float_type": "float",
    "float_parsing": "float",
    "bool_type": "bool",
    "bool_parsing": "bool",
    "string_type": "str",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dataclass_type": "a mapping",
    "dataclass_args_type": "a mapping",
}


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


def read_recipe(path: Path) -> Any:
    """A recipe YAML file's ``config`` mapping, ``${VAR}`` replaced (validated by :func:`from_mapping`)."""
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
    return _expand(doc, "config")


def load_recipe(path: Path) -> HarvestConfig:
    """Read a recipe YAML file into a :class:`HarvestConfig`."""
    return from_mapping(read_recipe(path))


def from_mapping(data: Any, flags: Mapping[tuple[str, ...], str] | None = None) -> HarvestConfig:
    """A :class:`HarvestConfig` from a recipe's ``config`` mapping; ``flags`` name the recipe keys
    (paths) a command-line flag set, so that an error names the flag."""
    try:
        return FlinkRecipe.model_validate({} if data is None else data).config()
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, flags or {})) from None


def _one_line(exc: ValidationError, flags: Mapping[tuple[str, ...], str]) -> str:
    """pydantic's errors as one line: ``config.<key>: expected …, got …`` each (unknown keys
    gathered per mapping), a secret's value never shown."""
    unknown: dict[str, list[str]] = {}
    messages: list[str] = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"])
        if error["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            unknown.setdefault(".".join(("config", *loc[:-1])), []).append(loc[-1])
            continue
        name = flags.get(loc) or ".".join(("config", *loc))
        messages.append(f"{name}: {_expected(error, secret=bool(loc) and loc[-1] in _SECRET_KEYS)}")
    messages += [f"{where}: unknown key(s) {', '.join(sorted(keys))}" for where, keys in unknown.items()]
    return "; ".join(messages)


def _expected(error: Any, *, secret: bool) -> str:
    ctx = error.get("ctx") or {}
    kind = error["type"]
    got = "" if secret else f", got {error.get('input')!r}"
    if kind == "value_error":
        cause = ctx.get("error")
        return cause.expected if isinstance(cause, Invalid) else str(cause)
    if kind == "missing":
        return "required"
    if kind == "string_too_short":
        return "required (not empty)"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        sign = {"greater_than": ">", "greater_than_equal": "≥", "less_than": "<", "less_than_equal": "≤"}[kind]
        bound = next(iter(ctx.values()))
        return f"expected {sign} {int(bound) if float(bound).is_integer() else bound}{got}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}{got}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}{got}"
    return f"{error['msg']}{got}"
