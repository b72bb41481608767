"""The JVM helpers (:mod:`lakeflow.ingest.helpers_jar`) added to the job, and the sink: a ``FileSink`` whose part files are each one JSON array, committed on every checkpoint,
wrapped so that Flink's native lineage (FLIP-314) names the table it writes (``LineageFileSink``)."""

from __future__ import annotations

from collections.abc import Sequence

from py4j.java_gateway import JavaObject
from pyflink.common.serialization import BulkWriterFactory
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import Sink
from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, OutputFileConfig
from pyflink.java_gateway import get_gateway
from pyflink.util.java_utils import to_jarray

from lakeflow.ingest.helpers_jar import jar_path
from lakeflow.lineage import datasets
from lakeflow.readings import BUCKET_JAVA_FORMAT, BUCKET_ZONE, PART_PREFIX, PART_SUFFIX


def add_jvm_helpers(env: StreamExecutionEnvironment) -> None:
    """Ship the jar with the job and make its classes visible to this client."""
    env.add_jars(jar_path().as_uri())


def _part_files(location: str) -> FileSink:
    jvm = get_gateway().jvm
    return (
        FileSink.for_bulk_format(location, BulkWriterFactory(jvm.lakeflow.flink.JsonArrayWriterFactory()))
        .with_bucket_assigner(BucketAssigner.date_time_bucket_assigner(BUCKET_JAVA_FORMAT, BUCKET_ZONE))
        .with_output_file_config(
            OutputFileConfig.builder().with_part_prefix(PART_PREFIX).with_part_suffix(PART_SUFFIX).build()
        )
        .build()
    )


def json_array_sink(location: str, table: JavaObject) -> Sink:
    """Part files ``<location>/<bucket>/part-<uuid of the subtask's writer>-<n>.json``, the bucket the UTC
    hour the subtask wrote the readings in (:data:`lakeflow.readings.BUCKET_FORMAT`), one JSON
    array each, rolled and committed on every checkpoint, exactly once. A checkpoint in which a
    subtask received no reading leaves no file for it. ``table`` (a :func:`table_lineage`: the
    location itself, not a bucket) is what the sink declares to Flink's native lineage."""
    sink = _part_files(location)
    return Sink(get_gateway().jvm.lakeflow.flink.LineageFileSink(sink.get_java_function(), table))


def dead_letter_sink(location: str) -> FileSink:
    """The dead letters' part files at ``location``: laid out, committed and exactly once as
    :func:`json_array_sink`'s, one dead-letter JSON object per line."""
    return _part_files(location)


def table_lineage(job_parameters: dict[str, str], fields: Sequence[tuple[str, str]]) -> JavaObject:
    """The table as a FLIP-314 dataset (``TableLineage``): its location, its catalog identity from
    the job parameters (:meth:`IngestJob.job_parameters`) and its declared fields' ``(name, Flink SQL
    type)`` (:func:`lakeflow.ingest.flink_types.sql_fields`: ``ROW<…>``, ``ARRAY<…>``, ``DECIMAL(9, 2)``…)."""
    gateway = get_gateway()
    string = gateway.jvm.String
    p = job_parameters
    return gateway.jvm.lakeflow.flink.TableLineage(
        p[datasets.PARAM_LOCATION],
        p[datasets.PARAM_CATALOG],
        p[datasets.PARAM_CATALOG_URI],
        p[datasets.PARAM_WAREHOUSE],
        p[datasets.PARAM_NAMESPACE],
        p[datasets.PARAM_TABLE],
        to_jarray(string, [name for name, _ in fields]),
        to_jarray(string, [kind for _, kind in fields]),
    )
