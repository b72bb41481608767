"""lakeflow: IoT sensor data streamed by Flink into a Lakekeeper catalog, compacted by Spark into
Iceberg, with the lineage of both harvested into one graph."""

__version__ = "0.1.0"
