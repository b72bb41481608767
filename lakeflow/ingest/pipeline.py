"""The ingestion pipeline on Flink: ``SensorTicks`` source → SQL (a record of the declared schema →
JSON) → ``FileSink``, or, with SOURCE=kafka, Flink's ``KafkaSource`` → ``KafkaReadings`` (records that
fit the declared schema's contract → ``FileSink``, the rest → the dead-letter ``FileSink``).

Python only declares it; no record passes through Python. The job graph carries the table's
identity and schema (global job parameters, the sink's name and its native-lineage dataset) for the
lineage harvester.
"""

from __future__ import annotations

import logging
import os
import time

from py4j.java_gateway import JavaObject
from py4j.protocol import Py4JError, Py4JJavaError
from pyflink.common import Configuration, WatermarkStrategy
from pyflink.common.typeinfo import Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors import Source
from pyflink.java_gateway import get_gateway
from pyflink.table import StreamTableEnvironment

from lakeflow.ingest import IngestError, kafka, sensors
from lakeflow.ingest.flink_types import sql_fields
from lakeflow.ingest.job import IngestJob
from lakeflow.ingest.progress import PartFiles, ProgressWatcher, Summary
from lakeflow.ingest.sink import add_jvm_helpers, dead_letter_sink, json_array_sink, table_lineage
from lakeflow.lineage import datasets
from lakeflow.runtime import jars
from lakeflow.settings.process import process_environment

log = logging.getLogger(__name__)

TICKS = Types.ROW_NAMED(["seq", "timestamp_ms"], [Types.LONG(), Types.LONG()])


def submitted_by_flink_cli() -> bool:
    """True under ``flink run -py`` (the CLI's JVM hosts the gateway), False for a local run."""
    return "PYFLINK_GATEWAY_PORT" in os.environ


def create_environment(job: IngestJob) -> StreamExecutionEnvironment:
    """A streaming environment configured for ``job`` (see :meth:`IngestJob.flink_configuration`)."""
    conf = Configuration()
    for key, value in job.flink_configuration(local=not submitted_by_flink_cli()).items():
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    add_jvm_helpers(env)
    if job.kafka:
        try:
            connector = jars.fetch(jars.kafka_connector_set())
        except jars.JarsUnavailable as exc:
            raise IngestError(f"SOURCE=kafka needs Flink's Kafka connector: {exc}") from None
        env.add_jars(*(jar.as_uri() for jar in connector))
    env.get_config().set_global_job_parameters(job.job_parameters())
    return env


def build(env: StreamExecutionEnvironment, job: IngestJob) -> None:
    """Add the job's operators to ``env``: ticks → records of the declared schema → JSON → part files,
    or Kafka messages → validated records → part files (+ dead letters)."""
    if job.kafka:
        _build_kafka(env, job, job.kafka)
        return
    generator = sensors.Generator(job.schema, job.num_sensors, job.run_id)
    t_env = StreamTableEnvironment.create(env)
    for key, value in sensors.SESSION.items():
        t_env.get_config().set(key, value)
    jvm = get_gateway().jvm
    ticks = env.from_source(
        Source(jvm.lakeflow.flink.SensorTicks.source(job.count, job.rows_per_second)),
        WatermarkStrategy.no_watermarks(),
        "SensorTicks",
        type_info=TICKS,
    ).uid("sensor-ticks")
    t_env.create_temporary_view("ticks", t_env.from_data_stream(ticks))
    t_env.create_temporary_view("records", t_env.sql_query(generator.columns_sql("ticks")))
    json = t_env.to_data_stream(t_env.sql_query(generator.json_sql("records")))
    json.sink_to(json_array_sink(job.location, _table(job))).name(job.sink_name).uid("lakeflow-sink")


def _table(job: IngestJob) -> JavaObject:
    """The table the job writes, for Flink's native lineage: its identity and declared fields."""
    return table_lineage(job.job_parameters(), sql_fields(job.schema))


def _build_kafka(env: StreamExecutionEnvironment, job: IngestJob, source: kafka.KafkaInput) -> None:
    """Flink's ``KafkaSource`` (``KafkaMessages``: topic, partition, offset, payload; it names the
    topic to Flink's native lineage) → ``KafkaReadings`` (the declared schema's record contract, as
    JSON) → part files, dead letters beside them."""
    gateway = get_gateway()
    properties = gateway.jvm.java.util.HashMap()
    for key, value in source.client_properties().items():
        properties.put(key, value)
    messages = env.from_source(
        Source(
            gateway.jvm.lakeflow.flink.KafkaMessages.source(
                source.bootstrap_servers,
                source.topic,
                source.group_id,
                source.starting_offsets,
                source.offset_reset,
                source.stop_at_latest,
                properties,
            )
        ),
        WatermarkStrategy.no_watermarks(),
        f"KafkaSource-{source.topic}",
    ).uid("kafka-source")
    validator = gateway.jvm.lakeflow.flink.KafkaReadings
    validated = validator.validate(messages._j_data_stream, job.schema.contract_json(), source.max_message_bytes)
    DataStream(validated).sink_to(json_array_sink(job.location, _table(job))).name(job.sink_name).uid("lakeflow-sink")
    dead_letters = kafka.dead_letter_location(job.location)
    DataStream(validator.deadLetters(validated)).sink_to(dead_letter_sink(dead_letters)).name(
        f"{datasets.SINK_NAME_PREFIX}[{dead_letters}]"  # declared: the harvest shows it as an output
    ).uid("lakeflow-dead-letters")


def execute(env: StreamExecutionEnvironment, job: IngestJob, files: PartFiles) -> Summary:
    """Run the job until it ends (a bounded run ends by itself after its final checkpoint),
    logging each commit to ``files`` while it runs; what it committed. Ctrl+C cancels the job
    (logging what was committed) and raises KeyboardInterrupt; a failed job raises IngestError."""
    watcher = ProgressWatcher(files, poll_s=min(max(job.batch_interval_ms / 4000, 0.2), 2.0))
    if job.kafka:
        until = "the offsets present now" if job.bounded else "stopped (Ctrl+C)"
        log.info(
            "streaming readings from Kafka topic %s (%s, group %s) until %s → %s; dead letters → %s",
            job.kafka.topic,
            job.kafka.bootstrap_servers,
            job.kafka.group_id,
            until,
            job.location,
            kafka.dead_letter_location(job.location),
        )
    else:
        pace = f"{job.batch_size} readings every {job.batch_interval_ms} ms" if job.throttled else "unthrottled"
        total = f"{job.num_records} readings" if job.bounded else "until stopped (Ctrl+C)"
        log.info(
            "streaming %s of %s from %d sensors (%s, run_id %s) → %s",
            total,
            job.schema.title or job.schema.source,
            job.num_sensors,
            pace,
            job.run_id,
            job.location,
        )
    started = time.monotonic()
    client = env.execute_async(job.name)
    job_id = client.get_job_id()
    log.info("submitted Flink job %s", job_id)
    watcher.start()
    try:
        client.get_job_execution_result().result()
    except KeyboardInterrupt:
        log.info("stopping Flink job %s …", job_id)
        try:
            client.cancel().result()
        except Py4JError as exc:  # the JVM may have gone with the Ctrl+C
            log.warning("could not cancel Flink job %s: %s", job_id, type(exc).__name__)
        log.info("stopped; committed so far: %s", watcher.stop())
        raise
    except Py4JJavaError as exc:
        watcher.stop()
        raise IngestError(
            f"Flink job {job_id} failed: {_root_cause(exc)} "
            f"(Flink logs in {process_environment('FLINK_LOG_DIR').flink_log_dir or 'the Flink log folder'})"
        ) from None
    summary = watcher.stop()
    log.info("finished in %.1f s: %s", time.monotonic() - started, summary)
    return summary


def _root_cause(exc: Py4JJavaError) -> str:
    cause = exc.java_exception
    while cause.getCause() is not None and cause.getCause() != cause:
        cause = cause.getCause()
    return str(cause.toString())
