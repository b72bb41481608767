"""lakeflow's own settings: catalog, authentication, storage, table, ingestion, local state, HTTP.

Each section is a model of its own (its docstring heads its part of ``.env.example``);
:class:`Settings` is all of them plus the catalog they select.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from lakeflow.settings.env import (
    EnvModel,
    Line,
    LocalPath,
    Name,
    Namespace,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Token,
    _bounded,
    is_uuid,
    load,
    name,
    overlay,
    parsed,
    url,
)
from lakeflow.settings.env import (
    env_file as default_env_file,
)
from lakeflow.settings.kafka import KafkaSource, kafka_problems

DEFAULT_LAKEKEEPER = "http://localhost:8181"
TOKEN_URL_EXAMPLE = "https://keycloak.example/realms/iceberg/protocol/openid-connect/token"
OAUTH = ("OAUTH_TOKEN_URL", "OAUTH_CLIENT_ID", "OAUTH_CLIENT_SECRET")

Records = Annotated[
    int, parsed(_bounded(int, lambda n: n > 0 or n == -1), "a positive integer, or -1 to stream forever")
]
Warehouse = Annotated[str, parsed(lambda v: v if is_uuid(v) else name(v), "a UUID or a warehouse name")]


class Catalog(EnvModel):
    """Lakekeeper catalog.

    With neither LAKEKEEPER nor WAREHOUSE_ID set, lakeflow uses its embedded local catalog and a
    file:// warehouse under LAKEFLOW_HOME: no service needed.
    """

    lakekeeper: Annotated[str, url(DEFAULT_LAKEKEEPER, base=True)] = Field(
        DEFAULT_LAKEKEEPER, alias="LAKEKEEPER", description="Base URL of Lakekeeper; setting it selects Lakekeeper."
    )
    warehouse: Warehouse | None = Field(
        None,
        alias="WAREHOUSE_ID",
        examples=["0196a3b8-41f6-7d52-9d2c-2b5f1f0c8a11"],
        description="Warehouse UUID (the URL prefix); a warehouse name is accepted too and resolved through "
        "GET /catalog/v1/config?warehouse=NAME. Setting it selects Lakekeeper.",
    )
    project_id: Line | None = Field(None, alias="PROJECT_ID", description="Lakekeeper project, sent as x-project-id.")


class Auth(EnvModel):
    """Authentication to Lakekeeper.

    TOKEN, or the OAUTH_* client-credentials variables (not both).
    """

    token: Token | None = Field(None, alias="TOKEN", description="Static bearer token.")
    oauth_token_url: Annotated[str, url(TOKEN_URL_EXAMPLE)] | None = Field(
        None,
        alias="OAUTH_TOKEN_URL",
        examples=[TOKEN_URL_EXAMPLE],
        description="OAuth2 token endpoint of the client-credentials grant (Keycloak, Entra ID, Okta…; docs/oauth.md).",
    )
    oauth_client_id: Line | None = Field(
        None, alias="OAUTH_CLIENT_ID", examples=["lakeflow"], description="OAuth2 client id."
    )
    oauth_client_secret: Token | None = Field(None, alias="OAUTH_CLIENT_SECRET", description="OAuth2 client secret.")
    oauth_scope: Line = Field("lakekeeper", alias="OAUTH_SCOPE", description="Scope requested with the token.")


class Storage(EnvModel):
    """Storage."""

    s3_endpoint: Annotated[str, url("http://localhost:9000", base=True)] | None = Field(
        None,
        alias="S3_ENDPOINT",
        examples=["http://localhost:9000"],
        description="Replaces the vended s3.endpoint: Lakekeeper vends the endpoint it uses itself "
        "(e.g. http://minio:9000), which a client on the host may not reach.",
    )


class Table(EnvModel):
    """Table.

    One stream into one table; a pipeline file (PIPELINE) declares many instead (docs/pipelines.md).
    """

    pipeline: LocalPath | None = Field(
        None,
        alias="PIPELINE",
        examples=["pipeline.toml"],
        description="A TOML file of streams (topics or a topic pattern, schema file, table each; docs/pipelines.md); "
        "then TABLE, TABLE_SCHEMA, KAFKA_TOPIC, EVENT_TIME_FIELD, KEY_FIELDS, PARTITION_BY and COMPACT_TABLE "
        "must be unset (NAMESPACE is the streams' default namespace).",
    )

    namespace: Namespace = Field(
        ("iot",), alias="NAMESPACE", description="Namespace, levels separated by '.' (iot, or iot.raw)."
    )
    table: Name = Field("sensor-readings", alias="TABLE", description="Table name.")


FieldList = Annotated[
    tuple[str, ...],
    parsed(
        lambda v: () if v.strip() == "none" else tuple(name(x.strip()) for x in v.split(",")),
        "field names separated by ',' (or none)",
    ),
]


class TableSchemaSettings(EnvModel):
    """Table schema.

    The records' declared schema (docs/schema.md) and the table's layout; each variable set overrides
    the schema file's x-lakeflow choice.
    """

    table_schema: LocalPath | None = Field(
        None,
        alias="TABLE_SCHEMA",
        examples=["docs/schemas/vibration-sensor.schema.json"],
        description="A JSON Schema file (draft 2020-12) of the records; unset: lakeflow's default sensor reading "
        "(lakeflow/schema/sensor-reading.schema.json).",
    )
    event_time_field: Name | None = Field(
        None,
        alias="EVENT_TIME_FIELD",
        description="The records' event time: a required top-level integer (epoch milliseconds) or date-time "
        "string (default: the schema file's).",
    )
    key_fields: FieldList | None = Field(
        None,
        alias="KEY_FIELDS",
        examples=["device_id,seq"],
        description="Top-level fields identifying a record, for de-duplication; none keeps every record "
        "(default: the schema file's).",
    )
    partition_by: Line | None = Field(
        None,
        alias="PARTITION_BY",
        examples=["day"],
        description="The Iceberg table's partitioning: year, month, day or hour of the event time, identity(FIELD), "
        "bucket[N](FIELD), comma-separated, or none (default: the schema file's, else day).",
    )


class Ingestion(EnvModel):
    """Ingestion job (make run / flink run of jobs/sensor_ingest.py)."""

    num_sensors: PositiveInt = Field(5, alias="NUM_SENSORS", description="Number of virtual sensors (sensor-001 …).")
    num_records: Records = Field(-1, alias="NUM_RECORDS", description="Total readings to emit; -1 streams forever.")
    batch_size: PositiveInt = Field(
        10, alias="BATCH_SIZE", description="Readings per batch, one batch every BATCH_INTERVAL_MS."
    )
    batch_interval_ms: PositiveInt = Field(
        15000,
        alias="BATCH_INTERVAL_MS",
        description="Milliseconds between batches (= checkpoint = file roll interval).",
    )


class LocalState(EnvModel):
    """Local state."""

    home: LocalPath = Field(
        Path(".lakeflow"), alias="LAKEFLOW_HOME", description="Embedded catalog, local warehouse, checkpoints, logs."
    )
    lineage_dir: LocalPath = Field(
        alias="LINEAGE_DIR",
        description="Where compaction run events (OpenLineage) are written and the harvester reads them "
        "(default $LAKEFLOW_HOME/lineage).",
    )

    @model_validator(mode="before")
    @classmethod
    def _lineage_under_home(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and not data.get("LINEAGE_DIR"):
            data = {**data, "LINEAGE_DIR": str(Path(data.get("LAKEFLOW_HOME") or ".lakeflow") / "lineage")}
        return data


class Http(EnvModel):
    """HTTP to Lakekeeper and the token endpoint."""

    http_timeout_s: PositiveFloat = Field(30.0, alias="HTTP_TIMEOUT_S", description="Timeout in seconds.")
    http_max_retries: NonNegativeInt = Field(
        5, alias="HTTP_MAX_RETRIES", description="Retries on 5xx, 429 and connection errors."
    )


SECTIONS: tuple[type[EnvModel], ...] = (
    Catalog,
    Auth,
    Storage,
    Table,
    TableSchemaSettings,
    Ingestion,
    KafkaSource,
    LocalState,
    Http,
)


class Settings(Http, LocalState, KafkaSource, Ingestion, TableSchemaSettings, Table, Storage, Auth, Catalog):
    """Everything lakeflow reads from its environment. Build with :func:`load_settings`."""

    catalog: Literal["lakekeeper", "local"] = "local"  # derived: see load_settings

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
        for key in type(self).model_fields:
            value = getattr(self, key)
            if value is not None:
                out[key] = ".".join(value) if isinstance(value, tuple) else str(value)
        return out


def load_settings(
    env: Mapping[str, str] | None = None,
    env_file: Path | None = None,
    *,
    local: bool | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Settings:
    """``Settings`` from ``overrides`` (e.g. a command's flags) over ``env`` (default ``os.environ``)
    over ``env_file`` (default ``$LAKEFLOW_ENV_FILE`` or ``./.env.local``). The catalog is Lakekeeper
    when LAKEKEEPER or WAREHOUSE_ID is set, else the embedded local catalog; ``local`` forces it."""
    environ = os.environ if env is None else env
    merged = {**overlay(environ, env_file or default_env_file(environ)), **(overrides or {})}
    values = {k: v for k, v in merged.items() if v}  # an override of "" unsets the variable
    chosen = "LAKEKEEPER" in values or "WAREHOUSE_ID" in values
    catalog = "local" if local or (local is None and not chosen) else "lakekeeper"
    return load(
        Settings,
        {**values, "catalog": catalog},
        "settings",
        [
            *(lakekeeper_problems(values) if catalog == "lakekeeper" else ()),
            *kafka_problems(values),
            *pipeline_problems(values),
        ],
    )


ONE_STREAM = (
    "TABLE",
    "TABLE_SCHEMA",
    "KAFKA_TOPIC",
    "EVENT_TIME_FIELD",
    "KEY_FIELDS",
    "PARTITION_BY",
    "COMPACT_TABLE",
)


def pipeline_problems(values: Mapping[str, str]) -> list[str]:
    """A pipeline file declares its streams: the variables of the one stream must not be set beside it."""
    if not values.get("PIPELINE"):
        return []
    both = [name for name in ONE_STREAM if name in values]
    return [f"{', '.join(both)} and PIPELINE are both set: the pipeline file declares its streams"] if both else []


def lakekeeper_problems(values: Mapping[str, str]) -> list[str]:
    """What the Lakekeeper catalog needs beyond each variable's own check."""
    problems = []
    if "WAREHOUSE_ID" not in values:
        problems.append("WAREHOUSE_ID is missing: expected the warehouse UUID (or its name)")
    oauth = [k for k in OAUTH if k in values]
    if "TOKEN" in values and oauth:
        problems.append("TOKEN and OAUTH_* are both set: expected one way to authenticate")
    elif oauth and len(oauth) < len(OAUTH):
        missing = sorted(set(OAUTH) - set(oauth))
        problems.append(
            f"{', '.join(missing)} missing: OAuth2 client credentials need "
            "OAUTH_TOKEN_URL, OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET"
        )
    return problems
