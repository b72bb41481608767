"""The JVM helpers (``build/lakeflow-flink.jar``, compiled from ``java/`` by ``make jar``) and
the sink: a ``FileSink`` whose part files are each one JSON array, committed on every checkpoint."""

from __future__ import annotations

import os
from pathlib import Path

from pyflink.common.serialization import BulkWriterFactory
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import BucketAssigner, FileSink, OutputFileConfig
from pyflink.java_gateway import get_gateway

from lakeflow.ingest import IngestError

JAR_NAME = "lakeflow-flink.jar"
PART_PREFIX = "part"
PART_SUFFIX = ".json"


def jar_path() -> Path:
    """``$LAKEFLOW_JAR``, else ``build/lakeflow-flink.jar`` of the checkout (or the current directory)."""
    if os.environ.get("LAKEFLOW_JAR"):
        candidates = [Path(os.environ["LAKEFLOW_JAR"])]
    else:
        candidates = [Path(__file__).resolve().parents[2] / "build" / JAR_NAME, Path.cwd() / "build" / JAR_NAME]
    for jar in candidates:
        if jar.is_file():
            return jar.resolve()
    raise IngestError(f"the JVM helpers jar is missing (looked at {', '.join(map(str, candidates))}): "
                      "run `make jar`, or set LAKEFLOW_JAR to its path")


def add_jvm_helpers(env: StreamExecutionEnvironment) -> None:
    """Ship the jar with the job and make its classes visible to this client."""
    env.add_jars(jar_path().as_uri())


def json_array_sink(location: str) -> FileSink:
    """Part files ``part-<uuid of the subtask>-<n>.json`` directly under ``location`` (no time
    buckets), one JSON array each, rolled and committed on every checkpoint, exactly once.
    A checkpoint in which a subtask received no reading leaves no file for it."""
    factory = get_gateway().jvm.lakeflow.flink.JsonArrayWriterFactory()
    return (FileSink.for_bulk_format(location, BulkWriterFactory(factory))
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .with_output_file_config(OutputFileConfig.builder()
                                     .with_part_prefix(PART_PREFIX).with_part_suffix(PART_SUFFIX).build())
            .build())
