"""The Kafka source of the ingestion job: records of each stream's declared schema as JSON messages
on its topics.

Flink's own ``KafkaSource`` (``flink-sql-connector-kafka``, the ``kafka-connector`` jar set of
:mod:`lakeflow.runtime.jars`) reads every stream's topics as ``(topic, partition, offset, payload)``
rows (``KafkaMessages``, java/), commits the group's offsets on every checkpoint and names each topic
to Flink's native lineage (``kafka://<first server>`` + the topic); ``StreamRouter`` (java/) sends
each message to its topic's table and validates it on the JVM against that table's record contract
(:meth:`lakeflow.schema.TableSchema.contract_json`, a job parameter): records go on whole to the
table's part files, every other message to its dead letters (:data:`DEAD_LETTERS`) with its reason,
topic, partition, offset and payload. :func:`list_topics` asks the broker for a topic pattern's topics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakeflow.secret import Secret
from lakeflow.settings.kafka import KafkaSource

DEAD_LETTERS = "_dead_letters"  # the dead-letter folder under the table location (compaction skips "_" folders)
# The connector jar shades the Kafka client: its login modules live under this package.
SHADED = "org.apache.flink.kafka.shaded.org.apache.kafka.common.security"
LOGIN_MODULES = {
    "PLAIN": f"{SHADED}.plain.PlainLoginModule",
    "SCRAM-SHA-256": f"{SHADED}.scram.ScramLoginModule",
    "SCRAM-SHA-512": f"{SHADED}.scram.ScramLoginModule",
}


@dataclass(frozen=True)
class KafkaInput:
    """How one run reads its streams' topics (see :class:`lakeflow.settings.kafka.KafkaSource`)."""

    bootstrap_servers: str
    group_id: str
    starting_offsets: str  # committed | earliest | latest
    offset_reset: str  # earliest | latest: committed's fallback
    stop_at_latest: bool
    max_message_bytes: int
    discovery_s: float  # a job reading forever looks for new topics of its patterns this often
    security: dict[str, str | Secret] = field(default_factory=dict)  # Kafka client properties; secrets wrapped

    @classmethod
    def from_settings(cls, settings: KafkaSource) -> KafkaInput | None:
        """The Kafka input of ``settings``; None unless SOURCE=kafka."""
        if settings.source != "kafka":
            return None
        assert settings.kafka_bootstrap_servers  # load_settings checked SOURCE=kafka's needs
        security: dict[str, str | Secret] = {"security.protocol": settings.kafka_security_protocol}
        if settings.kafka_sasl:
            assert settings.kafka_sasl_mechanism and settings.kafka_sasl_username and settings.kafka_sasl_password
            security["sasl.mechanism"] = settings.kafka_sasl_mechanism
            security["sasl.jaas.config"] = Secret(
                f"{LOGIN_MODULES[settings.kafka_sasl_mechanism]} required "
                f"username={_quoted(settings.kafka_sasl_username.reveal())} "
                f"password={_quoted(settings.kafka_sasl_password.reveal())};"
            )
        if settings.kafka_tls and settings.kafka_ssl_truststore_location:
            security["ssl.truststore.location"] = str(settings.kafka_ssl_truststore_location)
            security["ssl.truststore.type"] = settings.kafka_ssl_truststore_type
            if settings.kafka_ssl_truststore_password:
                security["ssl.truststore.password"] = settings.kafka_ssl_truststore_password
        return cls(
            bootstrap_servers=settings.kafka_bootstrap_servers,
            group_id=settings.kafka_group_id,
            starting_offsets=settings.kafka_starting_offsets,
            offset_reset=settings.kafka_offset_reset,
            stop_at_latest=settings.kafka_stop_at == "latest",
            max_message_bytes=settings.kafka_max_message_bytes,
            discovery_s=settings.kafka_discovery_s,
            security=security,
        )

    @property
    def namespace(self) -> str:
        """OpenLineage's dataset namespace for the topic: ``kafka://<first bootstrap server>``."""
        return f"kafka://{self.bootstrap_servers.split(',')[0]}"

    def client_properties(self) -> dict[str, str]:
        """The Kafka client properties beyond servers, topics and group (security): secrets
        revealed, so hand them to Flink's ``KafkaSource`` only — never log them."""
        return {key: value.reveal() if isinstance(value, Secret) else value for key, value in self.security.items()}


def list_topics(source: KafkaInput) -> list[str]:
    """The broker's topics (``KafkaMessages.topics`` on the JVM: the connector's shaded Kafka client)."""
    from pyflink.java_gateway import get_gateway
    from pyflink.util.java_utils import add_jars_to_context_class_loader

    from lakeflow.ingest.helpers_jar import jar_path
    from lakeflow.runtime import jars

    add_jars_to_context_class_loader([jar.as_uri() for jar in (jar_path(), *jars.fetch(jars.kafka_connector_set()))])
    gateway = get_gateway()
    properties = gateway.jvm.java.util.HashMap()
    for key, value in source.client_properties().items():
        properties.put(key, value)
    return list(gateway.jvm.lakeflow.flink.KafkaMessages.topics(source.bootstrap_servers, properties))


def dead_letter_location(location: str) -> str:
    """Where the dead letters of the table at ``location`` go: ``<location>/_dead_letters``."""
    return f"{location.rstrip('/')}/{DEAD_LETTERS}"


def _quoted(value: str) -> str:
    """A JAAS option value: double-quoted, ``\\`` and ``"`` escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
