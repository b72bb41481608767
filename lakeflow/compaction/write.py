"""Spark side, writing: de-duplicate, derive ``ts``, size the files, write Parquet into a staging folder.

Rows are de-duplicated on (run_id, seq) within the batch and against the rows the table already
holds in the batch's time range (two ingestion runs reusing ``seq`` values differ in ``run_id`` and
both survive). The output is range-partitioned by (day, time) into as many files as the target
file size asks for and sorted within each, so small inputs merge into few files that each cover
one day and a narrow, contiguous time range.

Shuffles are what cost here: one output file (up to the target size) takes a single shuffle.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeflow.compaction.naming import DataFileStats
from lakeflow.compaction.schema import DAY, KEY, NAMES, TIME, TS
from lakeflow.compaction.storage import Storage, hadoop_uri

ORDER = (DAY, TIME, *KEY)  # file layout: by day, then time; (run_id, seq) makes it total


def file_count(rows: int, target_bytes: int, bytes_per_row: float) -> int:
    """How many output files ``rows`` rows make at the target size (at least one)."""
    return max(1, math.ceil(rows * bytes_per_row / target_bytes))


def existing_keys(spark: SparkSession, data_files: Sequence[str],
                  options: Mapping[str, str]) -> Optional[DataFrame]:
    """The (run_id, seq) keys in the table's data files that may overlap the batch, or None."""
    if not data_files:
        return None
    return (spark.read.options(**options).parquet(*[hadoop_uri(u) for u in data_files])
            .select(*KEY))


def compacted(good: DataFrame, existing: Optional[DataFrame], files: int) -> DataFrame:
    """Good rows minus keys already in the table, de-duplicated on (run_id, seq), with ``ts`` and day,
    partitioned for ``files`` output files.

    One output file (the common case) means one partition: de-duplication then needs no shuffle
    of its own. More files: de-duplicate, then range-partition by (day, time).
    """
    rows = good if existing is None else good.join(existing, on=list(KEY), how="left_anti")
    rows = rows.repartition(1).dropDuplicates(list(KEY)) if files == 1 else rows.dropDuplicates(list(KEY))
    rows = (rows.withColumn(TS, F.timestamp_millis(F.col(TIME)))
            .withColumn(DAY, F.date_format(F.col(TS), "yyyy-MM-dd")))
    return rows if files == 1 else rows.repartitionByRange(files, *ORDER)


def write_staged(rows: DataFrame, uri: str, options: Mapping[str, str]) -> None:
    """Write each partition of ``rows``, sorted, as one Parquet file per day under ``uri``/ts_day=…/."""
    (rows.sortWithinPartitions(*ORDER).select(*NAMES, TS, DAY)
     .write.options(**options).mode("errorifexists").partitionBy(DAY).parquet(uri))


def staged_files(target: Storage, staging: str) -> list[DataFileStats]:
    """The Parquet files Spark wrote under ``staging``, with rows, size and time range from footers."""
    out = []
    for entry in target.list(staging):
        name = entry.rel.rsplit("/", 1)[-1]
        if not name.endswith(".parquet") or name.startswith((".", "_")):
            continue
        folder = entry.rel.rsplit("/", 2)[-2]
        if not folder.startswith(f"{DAY}="):
            raise RuntimeError(f"unexpected staged file {entry.rel}: expected it under {DAY}=YYYY-MM-DD/")
        meta = target.parquet_metadata(entry.rel)
        col = meta.schema.to_arrow_schema().get_field_index(TIME)
        lows, highs = [], []
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(col).statistics
            if meta.row_group(g).num_rows == 0:
                continue
            if stats is None or not stats.has_min_max:
                raise RuntimeError(f"{entry.rel}: no min/max statistics for {TIME}")
            lows.append(stats.min)
            highs.append(stats.max)
        if not lows:
            continue
        out.append(DataFileStats(rel=entry.rel, day=folder.split("=", 1)[1], rows=meta.num_rows,
                                 size=entry.size, min_ms=min(lows), max_ms=max(highs)))
    return out
