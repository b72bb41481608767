"""SOURCE=kafka (#26): the settings, and the ingestion job reading a real Kafka 4.1.1 broker
(``kafka_broker`` session fixture) with Flink's own Kafka connector on a local MiniCluster.

Unit tests: they start no process. The real-process tests: tests/integration/test_ingest_kafka.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakeflow.ingest.kafka import DEAD_LETTERS, KafkaInput, dead_letter_location
from lakeflow.readings import is_committed_part
from lakeflow.settings import SettingsError, load_settings

PASSWORD = "s3cr3t-kafka-pw"


KAFKA = {"SOURCE": "kafka", "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092", "KAFKA_TOPIC": "readings"}


def test_kafka_settings_defaults_map_to_the_source() -> None:
    source = KafkaInput.from_settings(load_settings(KAFKA, env_file=Path(os.devnull)))
    assert source is not None
    assert source.namespace == "kafka://127.0.0.1:9092"
    assert (source.bootstrap_servers, source.group_id) == ("127.0.0.1:9092", "lakeflow-ingest")
    assert (source.starting_offsets, source.offset_reset, source.stop_at_latest) == ("committed", "earliest", False)
    assert source.client_properties() == {"security.protocol": "PLAINTEXT"}
    assert KafkaInput.from_settings(load_settings({}, env_file=Path(os.devnull))) is None  # synthetic by default


@pytest.mark.parametrize(("env", "offsets"), [
    ({"KAFKA_STARTING_OFFSETS": "earliest", "KAFKA_STOP_AT": "latest"}, ("earliest", "earliest", True)),
    ({"KAFKA_STARTING_OFFSETS": "latest"}, ("latest", "earliest", False)),
    ({"KAFKA_OFFSET_RESET": "latest"}, ("committed", "latest", False)),
])
def test_starting_and_stopping_offsets(env: dict[str, str], offsets: tuple[str, str, bool]) -> None:
    source = KafkaInput.from_settings(load_settings({**KAFKA, **env}, env_file=Path(os.devnull)))
    assert source is not None
    assert (source.starting_offsets, source.offset_reset, source.stop_at_latest) == offsets


def test_sasl_ssl_password_reaches_only_the_connector(tmp_path: Path) -> None:
    store = tmp_path / "truststore.p12"
    env = {**KAFKA, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
           "KAFKA_SASL_USERNAME": 'ingest"er', "KAFKA_SASL_PASSWORD": PASSWORD,
           "KAFKA_SSL_TRUSTSTORE_LOCATION": str(store), "KAFKA_SSL_TRUSTSTORE_PASSWORD": "store-pw-123"}
    settings = load_settings(env, env_file=Path(os.devnull))
    source = KafkaInput.from_settings(settings)
    assert source is not None
    options = source.client_properties()
    assert options["sasl.jaas.config"] == (
        "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="ingest\\"er" password="{PASSWORD}";')
    assert options["sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["ssl.truststore.location"] == str(store)
    assert options["ssl.truststore.password"] == "store-pw-123"
    for shown in (repr(source), str(source), repr(settings), str(settings.describe())):
        assert PASSWORD not in shown and "store-pw-123" not in shown


@pytest.mark.parametrize(("env", "problems"), [
    ({"SOURCE": "kafka"}, ["KAFKA_BOOTSTRAP_SERVERS is missing", "KAFKA_TOPIC is missing"]),
    ({**KAFKA, "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN"},
     ["KAFKA_SASL_USERNAME is missing", "KAFKA_SASL_PASSWORD is missing"]),
    ({**KAFKA, "KAFKA_SASL_PASSWORD": PASSWORD}, ["KAFKA_SASL_PASSWORD set, but KAFKA_SECURITY_PROTOCOL=PLAINTEXT"]),
    ({**KAFKA, "KAFKA_SSL_TRUSTSTORE_LOCATION": "/tmp/x.p12"}, ["does not use TLS"]),
    ({**KAFKA, "KAFKA_BOOTSTRAP_SERVERS": "localhost"}, ["KAFKA_BOOTSTRAP_SERVERS='localhost': expected host:port"]),
    ({**KAFKA, "KAFKA_TOPIC": "a/b"}, ["KAFKA_TOPIC='a/b': expected a Kafka topic name"]),
    ({**KAFKA, "KAFKA_STARTING_OFFSETS": "newest"}, ["KAFKA_STARTING_OFFSETS='newest': expected one of committed"]),
    ({**KAFKA, "SOURCE": "mqtt"}, ["SOURCE='mqtt': expected one of synthetic, kafka"]),
    ({**KAFKA, "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "u",
      "KAFKA_SASL_PASSWORD": f"{PASSWORD} x"}, ["KAFKA_SASL_PASSWORD: expected one token"]),
])
def test_kafka_settings_errors_name_the_variable_and_hide_the_password(env: dict[str, str],
                                                                       problems: list[str]) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(env, env_file=Path(os.devnull))
    for problem in problems:
        assert problem in str(caught.value)
    assert PASSWORD not in str(caught.value)


def test_dead_letters_sit_next_to_the_readings_where_the_compaction_skips_them() -> None:
    assert dead_letter_location("s3://bucket/wh/table/") == f"s3://bucket/wh/table/{DEAD_LETTERS}"
    assert not is_committed_part(f"{DEAD_LETTERS}/2026-11-26--13/part-1-0.json")
    assert is_committed_part("2026-11-26--13/part-1-0.json")


def test_the_harvest_resolves_the_declared_topic_and_both_sinks(tmp_path: Path) -> None:
    from lakeflow.catalog.base import TableIdent
    from lakeflow.ingest.job import IngestJob, TableWrite
    from lakeflow.lineage.config import from_mapping
    from lakeflow.lineage.datasets import DatasetId, from_location
    from lakeflow.lineage.flink_rest import PlanNode
    from lakeflow.lineage.plan import SINK, SOURCE, job_references
    from lakeflow.lineage.resolve import DECLARED, Resolver
    from lakeflow.schema import load_schema
    from lakeflow.streams import Stream

    location = (tmp_path / "warehouse" / "iot" / "sensor-readings").as_uri()
    source = KafkaInput.from_settings(load_settings({**KAFKA, "KAFKA_BOOTSTRAP_SERVERS": "broker-1:9093,broker-2:9093"},
                                                    env_file=Path(os.devnull)))
    stream = Stream("sensor-readings", "sensor-readings", ("iot",), "sensor-readings", "sensor-readings-compacted",
                    load_schema(), ("readings",))
    table = TableWrite(stream, TableIdent("local", ("iot",), "sensor-readings"), location)
    job = IngestJob((table,), "local", tmp_path.as_uri(), "r1", 5, -1, 10, 1000, tmp_path, kafka=source)
    plan = [PlanNode("v1", "Source: KafkaSource-readings<br/>ValidateReadings", 2, ()),
            PlanNode("v2", f"{table.sink_name}: Writer", 2, ("v1",)),
            PlanNode("v3", f"LakeflowSink[{dead_letter_location(location)}]: Writer", 2, ("v1",))]
    resolved = Resolver(from_mapping({"connection": {"rest_api_url": "http://x"}})).resolve(
        job_references(plan), job.job_parameters())
    assert {(r.reference.role, r.dataset, r.evidence) for r in resolved} == {
        (SOURCE, DatasetId("kafka://broker-1:9093", "readings"), DECLARED),
        (SINK, from_location(location), DECLARED),
        (SINK, from_location(dead_letter_location(location)), DECLARED),
    }
    assert not [r for r in resolved if r.unresolved]


def test_the_harvest_resolves_a_fleet_jobs_topics_and_every_tables_sinks(tmp_path: Path) -> None:
    """One job for two streams: its parameters declare both topics, its sinks name both tables (and
    their dead letters); the source operator's name is no topic to guess from."""
    from lakeflow.catalog.base import TableIdent
    from lakeflow.ingest.job import IngestJob, TableWrite
    from lakeflow.lineage.config import from_mapping
    from lakeflow.lineage.datasets import DatasetId, from_location
    from lakeflow.lineage.flink_rest import PlanNode
    from lakeflow.lineage.plan import SINK, SOURCE, job_references
    from lakeflow.lineage.resolve import DECLARED, Resolver
    from lakeflow.schema import load_schema
    from lakeflow.streams import Stream

    source = KafkaInput.from_settings(load_settings({**KAFKA, "KAFKA_BOOTSTRAP_SERVERS": "broker-1:9093"},
                                                    env_file=Path(os.devnull)))
    tables = tuple(
        TableWrite(Stream(n, n, ("plant",), n, f"{n}-compacted", load_schema(), (f"plant.{n}",)),
                   TableIdent("local", ("plant",), n), (tmp_path / "warehouse" / "plant" / n).as_uri())
        for n in ("vibration", "meters_hall1"))
    job = IngestJob(tables, "local", tmp_path.as_uri(), "r1", 5, -1, 10, 1000, tmp_path, kafka=source)
    plan = [PlanNode("v1", "Source: KafkaSource[2 topics]<br/>ValidateReadings", 2, ())]
    for i, table in enumerate(tables):
        plan += [PlanNode(f"s{i}", f"{table.sink_name}: Writer", 2, ("v1",)),
                 PlanNode(f"d{i}", f"LakeflowSink[{table.dead_letters}]: Writer", 2, ("v1",))]
    resolved = Resolver(from_mapping({"connection": {"rest_api_url": "http://x"}})).resolve(
        job_references(plan), job.job_parameters())
    assert {(r.reference.role, r.dataset, r.evidence) for r in resolved} == {
        (SOURCE, DatasetId("kafka://broker-1:9093", "plant.vibration"), DECLARED),
        (SOURCE, DatasetId("kafka://broker-1:9093", "plant.meters_hall1"), DECLARED),
        *((SINK, from_location(t.location), DECLARED) for t in tables),
        *((SINK, from_location(t.dead_letters), DECLARED) for t in tables),
    }
    assert not [r for r in resolved if r.unresolved]
