"""The ``spark`` engine: the batch as a cached Spark DataFrame (see :mod:`~lakeflow.compaction.read`
and :mod:`~lakeflow.compaction.write`). The session starts with the first read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

from lakeflow.compaction.engine import FileSummary
from lakeflow.compaction.report import stage
from lakeflow.compaction.storage import FileEntry, Storage
from lakeflow.credentials import S3ASettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class SparkEngine:
    """Spark reads the raw JSON (raw table's S3A settings in the session) and writes the Parquet
    (target table's S3A settings as write options)."""

    name = "spark"

    def __init__(self, raw: Storage, target: Storage, raw_s3a: Optional[S3ASettings],
                 target_s3a: Optional[S3ASettings], app_name: str) -> None:
        from lakeflow.compaction.session import spark_session, table_options

        self.raw, self.target = raw, target
        self.options = table_options(target_s3a)
        with stage("spark", "starting the Spark session"):
            self.spark: "SparkSession" = spark_session(app_name, raw_s3a, s3=target_s3a is not None)
        self.rows: Optional["DataFrame"] = None

    def read(self, files: Sequence[FileEntry]) -> dict[str, FileSummary]:
        from lakeflow.compaction.read import read_parts, summarize
        from lakeflow.compaction.session import spark_progress

        with spark_progress(self.spark, "read"):
            self.rows = read_parts(self.spark, self.raw, files)
            by_uri = summarize(self.rows)
        rels = {self.raw.spark_path(f.rel): f.rel for f in files}
        return {rels[uri]: summary for uri, summary in by_uri.items()}

    def write_bad_records(self, quarantined: Sequence[str], rel: str) -> None:
        from lakeflow.compaction.read import write_bad_records

        assert self.rows is not None
        write_bad_records(self.rows, [self.raw.spark_path(r) for r in quarantined], self.raw.hadoop_uri(rel))

    def write(self, existing: Sequence[str], files: int, staging: str) -> None:
        from lakeflow.compaction.read import good_rows
        from lakeflow.compaction.session import spark_progress
        from lakeflow.compaction.write import compacted, existing_keys, write_staged

        assert self.rows is not None
        rows = compacted(good_rows(self.rows), existing_keys(self.spark, existing, self.options), files)
        with spark_progress(self.spark, "write"):
            write_staged(rows, self.target.hadoop_uri(staging), self.options)

    def close(self) -> None:
        if self.rows is not None:
            self.rows.unpersist()
        self.spark.stop()
