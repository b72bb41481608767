"""DataStream declaring its sink table as lakeflow's ingestion job does: the global job
parameters (PARAM_*) and a FileSink named ``LakeflowSink[<location>]``. Arguments: location,
catalog URI."""
import sys

from pyflink.common import Encoder, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

NAME = "harvest-declared-sink"


def parameters(location: str, catalog_uri: str, table: str = "sensor-readings") -> dict:
    # The literal names of lakeflow.lineage.datasets.PARAM_* (this file runs without lakeflow).
    return {"lakeflow.catalog": "local", "lakeflow.catalog.uri": catalog_uri, "lakeflow.warehouse": "local",
            "lakeflow.table.namespace": "iot", "lakeflow.table.name": table,
            "lakeflow.table.location": location, "lakeflow.table.format": "dataset",
            "lakeflow.run.id": "run-1"}


def submit(location: str, catalog_uri: str, name: str = NAME, table: str = "sensor-readings") -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.get_config().set_global_job_parameters(parameters(location, catalog_uri, table))
    sink = FileSink.for_row_format(location, Encoder.simple_string_encoder()).build()
    (env.from_collection(["r1", "r2"], type_info=Types.STRING()).name("SensorSource")
        .sink_to(sink).name(f"LakeflowSink[{location}]"))
    env.execute_async(name)


if __name__ == "__main__":
    submit(sys.argv[1], sys.argv[2])
