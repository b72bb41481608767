"""lakeflow: IoT sensor data streamed by Flink into a Lakekeeper catalog, compacted into Iceberg
(pyarrow, or Apache Spark for large batches), with the lineage of both harvested into one graph."""

__version__ = "0.1.0"
