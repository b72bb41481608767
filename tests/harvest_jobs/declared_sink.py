"""A DataStream job declaring its sink table the way lakeflow's ingestion job does: global job
parameters (PARAM_*) and a FileSink named ``LakeflowSink[<location>]``. Argument: location."""
import sys

from pyflink.common import Encoder, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink

location = sys.argv[1]
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.get_config().set_global_job_parameters({
    "lakeflow.catalog": "local",
    "lakeflow.catalog.uri": "file:///tmp/lakeflow-catalog",
    "lakeflow.warehouse": "local",
    "lakeflow.table.namespace": "iot",
    "lakeflow.table.name": "sensor-readings",
    "lakeflow.table.location": location,
    "lakeflow.table.format": "dataset",
})
sink = FileSink.for_row_format(location, Encoder.simple_string_encoder()).build()
(env.from_collection(["r1", "r2"], type_info=Types.STRING()).name("SensorSource")
    .sink_to(sink).name(f"LakeflowSink[{location}]"))
env.execute("harvest-declared-sink")
