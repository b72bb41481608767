"""Spark side, reading: the new part files → rows, and what each file held.

Each part file is one JSON array of readings; Spark's ``multiLine`` JSON reader explodes the array
into rows under an explicit schema (no inference). Spark lists the raw folder once (recursively,
skipping ``_``/``.`` names) and prunes the listing to this run's files by path — far cheaper than
handing it thousands of paths, each of which it would stat in a job of its own.

What the reader does with bad input (PERMISSIVE mode, no corrupt-record column — keeping the
whole document per row made parsing ~25 % slower): a file that is not a JSON array of objects
comes back as a single row of nulls; a record with a missing or mistyped field keeps its other
values and has nulls where those were. The rows are cached: the summary and the write read them.
"""

from __future__ import annotations

import re
from typing import Sequence

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakeflow.compaction.engine import FileSummary
from lakeflow.compaction.schema import FIELDS, NAMES, TIME
from lakeflow.compaction.storage import FileEntry, Storage

FILE = "_file"


def read_schema() -> StructType:
    return StructType.fromDDL(", ".join(f"{n} {t}" for n, t in FIELDS))


def read_parts(spark: SparkSession, raw: Storage, parts: Sequence[FileEntry]) -> DataFrame:
    """The rows of ``parts`` with their source file; cached (several passes follow)."""
    wanted = ", ".join(_sql_string(raw.spark_path(p.rel)) for p in parts)
    # One SQL expression: Column.isin() would make a JVM call per path (seconds for 10,000 files).
    return (spark.read.schema(read_schema()).option("multiLine", True).option("mode", "PERMISSIVE")
            .option("recursiveFileLookup", True).json(_listing_root(raw))
            .where(F.expr(f"_metadata.file_path IN ({wanted})"))
            .select(*NAMES, F.col("_metadata.file_path").alias(FILE))
            .persist(StorageLevel.MEMORY_AND_DISK))


def _listing_root(raw: Storage) -> str:
    """What Spark lists: the raw folder, or on S3 its entries not named ``.…``/``_…`` (a glob, as Spark
    skips them below). S3A probes a folder given by name with HEAD on its key (``…/<table>``, no
    slash), outside what credentials scoped to ``<table>/`` may read (AccessDenied on AWS); a glob lists
    ``<table>/`` instead."""
    root = raw.hadoop_uri()
    if raw.is_local:
        return root
    return re.sub(r"([\\{}\[\]*?])", r"\\\1", root) + "/[!._]*"


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _missing() -> list[Column]:
    return [F.when(F.col(n).isNull(), F.lit(n)) for n in NAMES]


def _bad() -> Column:
    """Some field is missing, null or mistyped (Spark leaves a mistyped field null)."""
    out = F.col(NAMES[0]).isNull()
    for n in NAMES[1:]:
        out = out | F.col(n).isNull()
    return out


def summarize(rows: DataFrame) -> dict[str, FileSummary]:
    """Per file that produced rows (by Spark's name for it), what it held. Files holding ``[]``, or
    nothing, are absent; a file that did not parse as an array of objects is a single row of nulls."""
    all_null = F.col(NAMES[0]).isNull()
    for n in NAMES[1:]:
        all_null = all_null & F.col(n).isNull()
    good = ~_bad()
    out = (rows.groupBy(FILE)
           .agg(F.count(F.lit(1)).alias("rows"), F.sum(_bad().cast("int")).alias("bad"),
                F.sum(all_null.cast("int")).alias("all_null"),
                F.min(F.when(good, F.col(TIME))).alias("lo"), F.max(F.when(good, F.col(TIME))).alias("hi"))
           .collect())
    return {r[FILE]: FileSummary(rows=r["rows"], bad_rows=int(r["bad"]), malformed=r["rows"] == 1 and r["all_null"] == 1,
                                 min_ms=r["lo"], max_ms=r["hi"]) for r in out}


def good_rows(rows: DataFrame) -> DataFrame:
    """Rows with every field present and well typed."""
    return rows.filter(~_bad()).select(*NAMES)


def write_bad_records(rows: DataFrame, quarantined_uris: Sequence[str], uri: str) -> None:
    """Records failing the schema (from files not quarantined whole) → JSON lines under ``uri``:
    ``{"file", "reason", "record"}`` — the record as parsed, its mistyped fields absent."""
    reason = F.concat(F.lit("missing, null or mistyped: "), F.concat_ws(", ", *_missing()))
    (rows.filter(_bad() & ~F.col(FILE).isin(list(quarantined_uris)))
     .select(F.col(FILE).alias("file"), reason.alias("reason"), F.to_json(F.struct(*NAMES)).alias("record"))
     .coalesce(1).write.mode("errorifexists").json(uri))
