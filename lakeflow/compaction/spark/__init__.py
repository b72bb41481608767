"""The ``spark`` engine: a Spark session (``session``) reads the part files (``read``) and writes
Parquet (``write``); :class:`~lakeflow.compaction.spark.engine.SparkEngine` strings them together.
The only modules of :mod:`lakeflow.compaction` that import pyspark."""
