"""The PyFlink sensor-ingestion job's building blocks: sensor model, source, sink, pipeline.

Python only defines the pipeline; every record is generated, shaped into JSON and written on
the JVM (``SensorRecords`` source → ``FileSink`` with the JSON-array bulk writer).
"""

from lakeflow.errors import LakeflowError


class IngestError(LakeflowError, RuntimeError):
    """The ingestion job cannot run as configured, or failed; the message says what to do."""
