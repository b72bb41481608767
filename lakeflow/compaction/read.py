"""Spark side, reading: the new part files → rows, each with the problem that disqualifies it (if any).

Each part file is one JSON array of readings; Spark's ``multiLine`` JSON reader explodes the array
into rows under an explicit schema (no inference). A file that does not parse as an array of
objects comes back as a single row of nulls carrying ``_corrupt_record``: the file is malformed.
A record with a missing, null or mistyped field fails the schema on its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional, Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakeflow.compaction.schema import CORRUPT, NAMES, TIME, spark_read_schema
from lakeflow.compaction.storage import FileEntry, Storage

log = logging.getLogger(__name__)
FILE = "_file"
PROBLEM = "_problem"
CORRUPT_FILE = "malformed"


@dataclass(frozen=True)
class FileSummary:
    """What Spark found in one part file."""

    uri: str                 # as Spark names it (``Storage.spark_path``)
    rows: int                # rows read (for a malformed file: 1, the corrupt row)
    bad_rows: int            # rows failing the schema
    malformed: bool          # the file is not a JSON array of objects
    min_ms: Optional[int]    # time range of its good rows
    max_ms: Optional[int]


def _problem() -> Column:
    """Null for a good row; ``malformed`` for an unparseable file; else which fields are wrong."""
    missing = [F.when(F.col(n).isNull(), F.lit(n)) for n in NAMES]
    all_null = F.lit(True)
    for n in NAMES:
        all_null = all_null & F.col(n).isNull()
    return (F.when(all_null & F.col(CORRUPT).isNotNull(), F.lit(CORRUPT_FILE))
             .when(F.concat_ws("", *missing) != "",
                   F.concat(F.lit("missing, null or mistyped: "), F.concat_ws(", ", *missing))))


def read_parts(spark: SparkSession, raw: Storage, parts: Sequence[FileEntry]) -> DataFrame:
    """The rows of ``parts`` with their source file and problem; cached (several passes follow).

    Spark lists the raw folder once (one recursive listing, skipping ``_``/``.`` names) and
    prunes it to ``parts`` by file path before reading: far cheaper than handing it thousands of
    paths, each of which it would stat (in a Spark job of its own beyond 32 paths).
    """
    wanted = [raw.spark_path(p.rel) for p in parts]
    df = (spark.read.schema(spark_read_schema())
          .option("multiLine", True).option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", CORRUPT).option("recursiveFileLookup", True)
          .json(raw.hadoop_uri())
          .where(F.col("_metadata.file_path").isin(wanted))
          .select(*NAMES, CORRUPT, F.col("_metadata.file_path").alias(FILE)))
    return df.withColumn(PROBLEM, _problem()).persist(StorageLevel.MEMORY_AND_DISK)


def summarize(rows: DataFrame) -> list[FileSummary]:
    """One summary per file that produced rows (files without rows — ``[]`` or empty — are absent)."""
    good = F.col(PROBLEM).isNull()
    out = (rows.groupBy(FILE)
           .agg(F.count(F.lit(1)).alias("rows"),
                F.sum(F.when(F.col(PROBLEM).isNotNull() & (F.col(PROBLEM) != CORRUPT_FILE), 1)
                       .otherwise(0)).alias("bad"),
                F.max(F.col(PROBLEM) == CORRUPT_FILE).alias("malformed"),
                F.min(F.when(good, F.col(TIME))).alias("lo"),
                F.max(F.when(good, F.col(TIME))).alias("hi"))
           .collect())
    return [FileSummary(uri=r[FILE], rows=r["rows"], bad_rows=int(r["bad"]), malformed=bool(r["malformed"]),
                        min_ms=r["lo"], max_ms=r["hi"]) for r in out]


def good_rows(rows: DataFrame, quarantined_uris: Sequence[str]) -> DataFrame:
    """Rows passing the schema, from files that were not quarantined."""
    keep = F.col(PROBLEM).isNull()
    if quarantined_uris:
        keep = keep & ~F.col(FILE).isin(list(quarantined_uris))
    return rows.filter(keep).select(*NAMES)


def write_bad_records(rows: DataFrame, quarantined_uris: Sequence[str], uri: str) -> None:
    """Rows failing the schema (from files otherwise compacted) → JSON lines: file, reason, record."""
    bad = F.col(PROBLEM).isNotNull() & (F.col(PROBLEM) != CORRUPT_FILE)
    if quarantined_uris:
        bad = bad & ~F.col(FILE).isin(list(quarantined_uris))
    (rows.filter(bad)
     .select(F.col(FILE).alias("file"), F.col(PROBLEM).alias("reason"),
             F.to_json(F.struct(*NAMES)).alias("record"))
     .coalesce(1).write.mode("errorifexists").json(uri))
