"""The ingestion job's source: the synthetic sensors, or a Kafka topic (:class:`KafkaSource`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import Field

from lakeflow.settings.env import Duration, EnvModel, LocalPath, PositiveInt, Token, _bounded, choices, parsed

SOURCES = ("synthetic", "kafka")
STARTING_OFFSETS = ("committed", "earliest", "latest")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
TRUST_STORE_TYPES = ("JKS", "PKCS12", "PEM")
_SERVER = re.compile(r"^[A-Za-z0-9_.-]+:[0-9]{1,5}$")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's legal topic names


def servers(raw: str) -> str:
    """``host:port[,host:port…]`` (spaces around commas dropped)."""
    hosts = [h.strip() for h in raw.split(",")]
    if not all(_SERVER.match(h) and 0 < int(h.rsplit(":", 1)[1]) < 65536 for h in hosts):
        raise ValueError(raw)
    return ",".join(hosts)


def topic(raw: str) -> str:
    if not _TOPIC.match(raw) or raw in (".", ".."):
        raise ValueError(raw)
    return raw


Servers = Annotated[str, parsed(servers, "host:port, or a comma-separated list of them")]
Topic = Annotated[str, parsed(topic, "a Kafka topic name: letters, digits, '.', '_' or '-' (at most 249)")]
GroupId = Annotated[str, parsed(_bounded(str, lambda g: bool(_TOPIC.match(g))), "letters, digits, '.', '_' or '-'")]


class KafkaSource(EnvModel):
    """Kafka source (SOURCE=kafka).

    The ingestion job reads readings as JSON messages from KAFKA_TOPIC with Flink's KafkaSource,
    commits its offsets to KAFKA_GROUP_ID on every checkpoint, and writes each message that is not
    a reading to the dead-letter folder _dead_letters/ of the raw table (docs/ingestion.md).
    """

    source: Annotated[str, choices(SOURCES)] = Field(
        "synthetic",
        alias="SOURCE",
        description="Where readings come from: synthetic (generated, NUM_SENSORS/NUM_RECORDS/BATCH_*) or "
        "kafka (KAFKA_*).",
    )
    kafka_bootstrap_servers: Servers | None = Field(
        None,
        alias="KAFKA_BOOTSTRAP_SERVERS",
        examples=["localhost:9092"],
        description="Kafka brokers, host:port[,host:port…] (required with SOURCE=kafka).",
    )
    kafka_topic: Topic | None = Field(
        None,
        alias="KAFKA_TOPIC",
        examples=["sensor-readings"],
        description="The topic holding the readings (required with SOURCE=kafka, unless PIPELINE names the topics).",
    )
    kafka_group_id: GroupId = Field(
        "lakeflow-ingest",
        alias="KAFKA_GROUP_ID",
        description="Consumer group the job commits its offsets to on every checkpoint.",
    )
    kafka_starting_offsets: Annotated[str, choices(STARTING_OFFSETS)] = Field(
        "committed",
        alias="KAFKA_STARTING_OFFSETS",
        description="Where a new job starts: committed (the group's offsets, else KAFKA_OFFSET_RESET), "
        "earliest or latest. A job recovering from a checkpoint resumes from the checkpoint.",
    )
    kafka_offset_reset: Annotated[str, choices(("earliest", "latest"))] = Field(
        "earliest",
        alias="KAFKA_OFFSET_RESET",
        description="With KAFKA_STARTING_OFFSETS=committed: where to start in a partition the group has "
        "no committed offset for.",
    )
    kafka_stop_at: Annotated[str, choices(("latest",))] | None = Field(
        None,
        alias="KAFKA_STOP_AT",
        examples=["latest"],
        description="latest: a bounded run that ends once the offsets present at its start are consumed "
        "(make run, the demo, tests); unset: read forever.",
    )
    kafka_discovery_s: Duration = Field(
        30.0,
        alias="KAFKA_DISCOVERY_INTERVAL",
        examples=["30s"],
        description="How often a job reading forever asks the broker for new topics of its pipeline's topic "
        "patterns; a new one restarts the job from a savepoint with that topic's table added (docs/pipelines.md).",
    )
    kafka_max_message_bytes: PositiveInt = Field(
        65536,
        alias="KAFKA_MAX_MESSAGE_BYTES",
        description="A larger message is no reading: it goes to the dead letters.",
    )
    kafka_security_protocol: Annotated[str, choices(SECURITY_PROTOCOLS)] = Field(
        "PLAINTEXT",
        alias="KAFKA_SECURITY_PROTOCOL",
        description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    )
    kafka_sasl_mechanism: Annotated[str, choices(SASL_MECHANISMS)] | None = Field(
        None,
        alias="KAFKA_SASL_MECHANISM",
        examples=["SCRAM-SHA-512"],
        description="With SASL_*: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
    )
    kafka_sasl_username: Token | None = Field(None, alias="KAFKA_SASL_USERNAME", description="With SASL_*: the user.")
    kafka_sasl_password: Token | None = Field(
        None, alias="KAFKA_SASL_PASSWORD", description="With SASL_*: the user's password (a secret, never shown)."
    )
    kafka_ssl_truststore_location: LocalPath | None = Field(
        None,
        alias="KAFKA_SSL_TRUSTSTORE_LOCATION",
        examples=["/etc/kafka/truststore.p12"],
        description="With SSL or SASL_SSL: the trust store of the brokers' CA, a path every TaskManager can "
        "read (unset: the JVM's default CAs).",
    )
    kafka_ssl_truststore_type: Annotated[str, choices(TRUST_STORE_TYPES)] = Field(
        "PKCS12", alias="KAFKA_SSL_TRUSTSTORE_TYPE", description="The trust store's format: JKS, PKCS12 or PEM."
    )
    kafka_ssl_truststore_password: Token | None = Field(
        None, alias="KAFKA_SSL_TRUSTSTORE_PASSWORD", description="The trust store's password, if it has one."
    )

    @property
    def kafka_sasl(self) -> bool:
        return self.kafka_security_protocol.startswith("SASL_")

    @property
    def kafka_tls(self) -> bool:
        return self.kafka_security_protocol.endswith("SSL")


def kafka_problems(values: Mapping[str, str]) -> list[str]:
    """What SOURCE=kafka needs beyond each variable's own check (none for other sources)."""
    if values.get("SOURCE") != "kafka":
        return []
    # A pipeline file (PIPELINE) names its streams' topics.
    required = ("KAFKA_BOOTSTRAP_SERVERS",) if values.get("PIPELINE") else REQUIRED
    problems = [f"{name} is missing: SOURCE=kafka needs it" for name in required if name not in values]
    protocol = values.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
    sasl = [name for name in SASL if name in values]
    if protocol.startswith("SASL_"):
        problems += [
            f"{name} is missing: KAFKA_SECURITY_PROTOCOL={protocol} needs it" for name in SASL if name not in values
        ]
    elif sasl:
        problems.append(f"{', '.join(sasl)} set, but KAFKA_SECURITY_PROTOCOL={protocol} does not use SASL")
    tls = [name for name in TRUST_STORE if name in values]
    if tls and not protocol.endswith("SSL"):
        problems.append(f"{', '.join(tls)} set, but KAFKA_SECURITY_PROTOCOL={protocol} does not use TLS")
    return problems


REQUIRED = ("KAFKA_BOOTSTRAP_SERVERS", "KAFKA_TOPIC")
SASL = ("KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD")
TRUST_STORE = ("KAFKA_SSL_TRUSTSTORE_LOCATION", "KAFKA_SSL_TRUSTSTORE_PASSWORD")
