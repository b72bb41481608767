"""The ``spark`` engine: the batch as a persisted Spark DataFrame (see :mod:`~lakeflow.compaction.spark.read`
and :mod:`~lakeflow.compaction.spark.write`). The session starts with the engine."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from lakeflow.compaction.engine import FileSummary
from lakeflow.compaction.files import FileEntry, Storage
from lakeflow.compaction.report import stage
from lakeflow.compaction.spark.read import Parsed, good_rows, named_rows, read_parts, write_bad_records
from lakeflow.compaction.spark.session import spark_progress, spark_session, table_options
from lakeflow.compaction.spark.write import compacted, existing_keys, write_staged
from lakeflow.credentials import S3ASettings


class SparkEngine:
    """Spark reads the raw JSON (raw table's S3A settings in the session) and writes the Parquet
    (target table's S3A settings as write options)."""

    name = "spark"

    def __init__(
        self,
        raw: Storage,
        target: Storage,
        raw_s3a: S3ASettings | None,
        target_s3a: S3ASettings | None,
        app_name: str,
        spark_options: Sequence[str] = (),
    ) -> None:
        self.raw, self.target = raw, target
        self.options = table_options(target_s3a)
        with stage("spark", "starting the Spark session"):
            self.spark: SparkSession = spark_session(
                app_name, raw_s3a, s3=target_s3a is not None, spark_options=spark_options
            )
        self.parsed: Parsed | None = None

    @property
    def rows(self) -> DataFrame | None:
        """Every row read, with its file's name as Spark spells it (``_file``)."""
        if self.parsed is None:
            return None
        return named_rows(self.spark, self.parsed, self.raw, list(self.parsed.ids))

    def read(self, files: Sequence[FileEntry]) -> dict[str, FileSummary]:
        with spark_progress(self.spark, "read"):
            self.parsed = read_parts(self.spark, self.raw, files)
        return self.parsed.summaries

    def write_bad_records(self, quarantined: Sequence[str], rel: str) -> None:
        assert self.parsed is not None
        write_bad_records(self.spark, self.parsed, self.raw, quarantined, self.raw.hadoop_uri(rel))

    def write(self, existing: Sequence[str], files: int, staging: str) -> None:
        assert self.parsed is not None
        rows = compacted(good_rows(self.parsed.rows), existing_keys(self.spark, existing, self.options), files)
        with spark_progress(self.spark, "write"):
            write_staged(rows, self.target.hadoop_uri(staging), self.options)

    def close(self) -> None:
        self.spark.catalog.clearCache()
        self.spark.stop()
