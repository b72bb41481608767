"""The ``arrow`` engine: pyarrow and numpy in the driver, no JVM (``read``: part files → an Arrow
table; ``engine``: :class:`~lakeflow.compaction.arrow.engine.ArrowEngine`, de-duplicating, sorting and
writing Parquet)."""
