"""Spark engine, writing: de-duplicate, derive ``ts``, partition, write Parquet into a staging folder.

Rows are de-duplicated on (run_id, seq) within the batch and against the rows the table already
holds in the batch's time range (two ingestion runs reusing ``seq`` values differ in ``run_id`` and
both survive). The output is range-partitioned by (day, time) into as many files as the target
file size asks for and sorted within each, so small inputs merge into few files that each cover
one day and a narrow, contiguous time range.

Duplicates are rare (a replayed checkpoint), and removing them is costly: ``dropDuplicates`` keeps
string columns, so Spark plans it as sort-based aggregation — a sort of every row, twice, on top of
the layout's own sort. So a hash aggregation of the keys alone first checks whether there are any;
only then are rows de-duplicated. One output file (the common case) is then one task reading the
persisted rows, sorting and writing — no shuffle of the rows at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from lakeflow.compaction.schema import DAY, TS
from lakeflow.compaction.spark.parse import FILE_ID
from lakeflow.readings import KEY, NAMES, TIME
from lakeflow.uris import hadoop_uri

ORDER = (DAY, TIME, *KEY)  # file layout: by day, then time; (run_id, seq) makes it total


def existing_keys(spark: SparkSession, data_files: Sequence[str], options: Mapping[str, str]) -> DataFrame | None:
    """The (run_id, seq) keys in the table's data files that may overlap the batch, or None."""
    if not data_files:
        return None
    return spark.read.options(**options).parquet(*[hadoop_uri(u) for u in data_files]).select(*KEY)


def compacted(good: DataFrame, existing: DataFrame | None, files: int) -> DataFrame:
    """Good rows (with ``FILE_ID``) minus keys already in the table, de-duplicated on (run_id, seq), with ``ts`` and day,
    partitioned for ``files`` output files.

    One output file means one partition (coalesced: no shuffle unless de-duplicating); more files:
    range-partitioned by (day, time).
    """
    rows = good if existing is None else good.join(existing, on=list(KEY), how="left_anti")
    if has_duplicates(rows):  # the reading of the lowest file id (the largest file) stays
        rank = F.row_number().over(Window.partitionBy(*KEY).orderBy(FILE_ID))
        rows = rows.withColumn("_rank", rank).where(F.col("_rank") == 1).drop("_rank")
    rows = rows.withColumn(TS, F.timestamp_millis(F.col(TIME))).withColumn(DAY, F.date_format(F.col(TS), "yyyy-MM-dd"))
    return rows.coalesce(1) if files == 1 else rows.repartitionByRange(files, *ORDER)


def has_duplicates(rows: DataFrame) -> bool:
    """Whether two rows share a (run_id, seq): a hash aggregation of the keys only."""
    return not rows.groupBy(*KEY).count().where(F.col("count") > 1).isEmpty()


def write_staged(rows: DataFrame, uri: str, options: Mapping[str, str]) -> None:
    """Write each partition of ``rows``, sorted, as one Parquet file per day under ``uri``/ts_day=…/."""
    (
        rows.sortWithinPartitions(*ORDER)
        .select(*NAMES, TS, DAY)
        .write.options(**options)
        .mode("errorifexists")
        .partitionBy(DAY)
        .parquet(uri)
    )
