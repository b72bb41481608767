"""The ingestion pipeline on Flink: ``SensorRecords`` (records of the declared schema, as JSON) →
``FileSink``, or, with SOURCE=kafka, Flink's ``KafkaSource`` → ``KafkaReadings`` (records that fit the
declared schema's contract → ``FileSink``, the rest → the dead-letter ``FileSink``).

Python only declares it; no record passes through Python. The job graph carries the table's
identity and schema (global job parameters, the sink's name and its native-lineage dataset) for the
lineage harvester.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence

from py4j.protocol import Py4JError, Py4JJavaError
from pyflink.common import Configuration, JobClient, WatermarkStrategy
from pyflink.common.typeinfo import Types
from pyflink.datastream import DataStream, StreamExecutionEnvironment
from pyflink.datastream.connectors import Source
from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import to_jarray

from lakeflow.ingest import IngestError, kafka, sensors
from lakeflow.ingest.flink_types import sql_fields
from lakeflow.ingest.job import IngestJob, TableWrite
from lakeflow.ingest.kafka import dead_letter_location
from lakeflow.ingest.progress import Outcome, PartFiles, ProgressWatcher
from lakeflow.ingest.sink import add_jvm_helpers, dead_letter_sink, json_array_sink, table_lineage
from lakeflow.lineage import datasets
from lakeflow.runtime import jars
from lakeflow.settings.process import process_environment

log = logging.getLogger(__name__)

POLL_S = 1.0  # how often the driver looks at the running job
RECORDS = Types.ROW_NAMED(["reading"], [Types.STRING()])  # SensorRecords.TYPE: one JSON document each


def submitted_by_flink_cli() -> bool:
    """True under ``flink run -py`` (the CLI's JVM hosts the gateway), False for a local run."""
    return "PYFLINK_GATEWAY_PORT" in os.environ


def create_environment(job: IngestJob, savepoint: str | None = None) -> StreamExecutionEnvironment:
    """A streaming environment configured for ``job`` (see :meth:`IngestJob.flink_configuration`),
    restoring the state of ``savepoint`` when given (a restart with a new topic's table)."""
    conf = Configuration()
    for key, value in job.flink_configuration(local=not submitted_by_flink_cli()).items():
        conf.set_string(key, value)
    if savepoint is not None:
        conf.set_string("execution.state-recovery.path", savepoint)
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
    """Add the job's operators to ``env``: per table, the records of its declared schema (``SensorRecords``)
    → its part files; or Kafka messages of every table's topics → routed and validated → each table's
    part files (+ its dead letters)."""
    if job.kafka:
        _build_kafka(env, job, job.kafka)
        return
    jvm = get_gateway().jvm
    string = jvm.String
    for table in job.tables:
        fields = sql_fields(table.schema)
        source = jvm.lakeflow.flink.SensorRecords.source(
            sensors.Generator(table.schema, job.num_sensors, job.run_id).spec(),
            job.num_sensors,
            job.count,
            job.rows_per_second,
            to_jarray(string, [name for name, _ in fields]),
            to_jarray(string, [sql_type for _, sql_type in fields]),
        )
        records = env.from_source(
            Source(source), WatermarkStrategy.no_watermarks(), "SensorRecords", type_info=RECORDS
        ).uid(f"sensor-ticks-{table.ident}")  # the uid of its state before the records were made in Java
        _sink(records, job, table)


def _sink(records: DataStream, job: IngestJob, table: TableWrite) -> None:
    """``table``'s part files, declaring the table to Flink's native lineage (its identity and declared fields)."""
    lineage = table_lineage(table.parameters(job.catalog, job.catalog_uri), sql_fields(table.schema))
    records.sink_to(json_array_sink(table.sink_location, lineage)).name(table.sink_name).uid(
        f"lakeflow-sink-{table.ident}"
    )


def _build_kafka(env: StreamExecutionEnvironment, job: IngestJob, source: kafka.KafkaInput) -> None:
    """Flink's ``KafkaSource`` on every table's topics (``KafkaMessages``: topic, partition, offset,
    payload; it names the topics to Flink's native lineage) → ``StreamRouter`` (each message to its
    topic's table, checked against that table's record contract, given as JSON) → each table's part
    files, its dead letters beside them."""
    gateway = get_gateway()
    string = gateway.jvm.String
    properties = gateway.jvm.java.util.HashMap()
    for key, value in source.client_properties().items():
        properties.put(key, value)
    topics = job.topics
    messages = env.from_source(
        Source(
            gateway.jvm.lakeflow.flink.KafkaMessages.source(
                source.bootstrap_servers,
                to_jarray(string, topics),
                source.group_id,
                source.starting_offsets,
                source.offset_reset,
                source.stop_at_latest,
                properties,
            )
        ),
        WatermarkStrategy.no_watermarks(),
        f"KafkaSource-{topics[0]}" if len(topics) == 1 else f"KafkaSource[{len(topics)} topics]",
    ).uid("kafka-source")
    table_of = {t: i for i, table in enumerate(job.tables) for t in table.stream.topics}
    router = gateway.jvm.lakeflow.flink.StreamRouter
    routed = router.route(
        messages._j_data_stream,
        to_jarray(string, list(topics)),
        to_jarray(gateway.jvm.int, [table_of[t] for t in topics]),
        to_jarray(string, [str(t.ident) for t in job.tables]),
        to_jarray(string, [t.schema.contract_json() for t in job.tables]),
        source.max_message_bytes,
    )
    for i, table in enumerate(job.tables):
        _sink(DataStream(router.readingsOf(routed, i)), job, table)
        DataStream(router.deadLettersOf(routed, i)).sink_to(
            dead_letter_sink(dead_letter_location(table.sink_location))
        ).name(
            f"{datasets.SINK_NAME_PREFIX}[{table.dead_letters}]"  # declared: the harvest shows it as an output
        ).uid(f"lakeflow-dead-letters-{table.ident}")


def execute(
    env: StreamExecutionEnvironment,
    job: IngestJob,
    files: Sequence[PartFiles],
    grown: Callable[[], bool] | None = None,
) -> Outcome:
    """Run the job until it ends (a bounded run ends by itself after its final checkpoint),
    logging each commit to ``files`` while it runs; what it committed. Ctrl+C cancels the job
    (logging what was committed) and raises KeyboardInterrupt; a failed job raises IngestError. ``files``:
    each table's part files, in ``job.tables``' order; the summaries in the same order. ``grown``, asked
    every ``KAFKA_DISCOVERY_INTERVAL``: whether the job should restart with more tables; then it stops
    with a savepoint (everything before it committed) and the outcome names it."""
    watcher = ProgressWatcher(files, poll_s=min(max(job.batch_interval_ms / 4000, 0.2), 2.0))
    tables = ", ".join(str(t.ident) for t in job.tables)
    if job.kafka:
        until = "the offsets present now" if job.bounded else "stopped (Ctrl+C)"
        log.info(
            "streaming readings from Kafka topics %s (%s, group %s) until %s → %s (dead letters beside each)",
            ", ".join(job.topics),
            job.kafka.bootstrap_servers,
            job.kafka.group_id,
            until,
            tables,
        )
    else:
        pace = f"{job.batch_size} readings every {job.batch_interval_ms} ms" if job.throttled else "unthrottled"
        total = f"{job.num_records} readings" if job.bounded else "until stopped (Ctrl+C)"
        log.info(
            "streaming %s from %d sensors (%s, run_id %s) per table → %s",
            total,
            job.num_sensors,
            pace,
            job.run_id,
            tables,
        )
    started = time.monotonic()
    client = env.execute_async(job.name)
    job_id = client.get_job_id()
    log.info("submitted Flink job %s", job_id)
    watcher.start()
    result = client.get_job_execution_result()
    savepoint = None
    discover_at = time.monotonic() + (job.kafka.discovery_s if job.kafka else 0)
    try:
        while not result.done():
            time.sleep(POLL_S)
            if grown is not None and job.kafka and not job.bounded and time.monotonic() >= discover_at:
                discover_at = time.monotonic() + job.kafka.discovery_s
                if grown():
                    log.info("a new topic of the pipeline's patterns: stopping Flink job %s with a savepoint", job_id)
                    savepoint = _stop_with_savepoint(client, job.savepoint_dir.as_uri())
                    break  # it ended with the savepoint: a cluster may have dropped its result by now
        if savepoint is None:
            result.result()
    except KeyboardInterrupt:
        log.info("stopping Flink job %s …", job_id)
        try:
            client.cancel().result()
        except Py4JError as exc:  # the JVM may have gone with the Ctrl+C
            log.warning("could not cancel Flink job %s: %s", job_id, type(exc).__name__)
        log.info("stopped; committed so far: %s", "; ".join(map(str, watcher.stop())))
        raise
    except Py4JJavaError as exc:
        watcher.stop()
        raise IngestError(
            f"Flink job {job_id} failed: {_root_cause(exc)} "
            f"(Flink logs in {process_environment('FLINK_LOG_DIR').flink_log_dir or 'the Flink log folder'})"
        ) from None
    summaries = watcher.stop()
    log.info("finished in %.1f s: %s", time.monotonic() - started, "; ".join(map(str, summaries)))
    return Outcome(summaries, savepoint)


def _stop_with_savepoint(client: JobClient, directory: str) -> str:
    """Stop the job with a savepoint in ``directory`` (Flink's canonical format); its path. (PyFlink's
    own ``stop_with_savepoint`` calls a signature Flink 2 no longer has.)"""
    formats = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType
    return str(client._j_job_client.stopWithSavepoint(False, directory, formats.CANONICAL).get())


def _root_cause(exc: Py4JJavaError) -> str:
    cause = exc.java_exception
    while cause.getCause() is not None and cause.getCause() != cause:
        cause = cause.getCause()
    return str(cause.toString())
