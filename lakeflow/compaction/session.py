"""The Spark session of a compaction run, and each table's storage settings as Spark options.

Credentials never travel on the spark-submit command line: the driver reads them from the
catalog (vended) and sets them here, programmatically. The raw table's ``fs.s3a.*`` settings go
into the session (reads, listing); the target table's are given to its own reads and writes as
options, with S3A's FileSystem cache bypassed so each table is accessed with its own credentials.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

from pyspark.sql import SparkSession

from lakeflow.credentials import S3ASettings

log = logging.getLogger(__name__)

SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",                        # days are UTC days
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",  # Iceberg timestamptz, not INT96
    "spark.sql.parquet.compression.codec": "zstd",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",  # no _SUCCESS files
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",   # no .crc side files
    # S3A 3.5 buffers uploads on local disk through fs.file.impl, which must then be a checksummed
    # LocalFileSystem (ClassCastException with RawLocalFileSystem): buffer in memory instead.
    "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
    "spark.ui.showConsoleProgress": "false",                    # the job logs its own progress
    "spark.log.level": "WARN",
}
# For a run on S3: Lakekeeper's locations are s3:// URIs; with the scheme bound to S3A Spark reads and
# writes them as they are, with the same fs.s3a.* settings (lakeflow itself hands Spark s3a:// URIs).
S3_SESSION_CONF = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}


def spark_session(app_name: str, raw_s3a: Optional[S3ASettings], *, s3: bool = False) -> SparkSession:
    """The session (master and resources come from spark-submit), with the raw table's S3A settings.
    For S3 (``raw_s3a``, or ``s3`` for an S3 target), a JVM PySpark launches gets S3A's jars."""
    if (raw_s3a is not None or s3) and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not yet launched
        from lakeflow.jars import with_s3a_jars  # hadoop-aws + AWS SDK v2, fetched into build/jars/ if need be

        os.environ["PYSPARK_SUBMIT_ARGS"] = with_s3a_jars(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    builder = SparkSession.builder.appName(app_name)
    if not _launched_with_master():
        builder = builder.master("local[*]")
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    if raw_s3a is not None or s3:
        for key, value in S3_SESSION_CONF.items():
            builder = builder.config(key, value)
    if raw_s3a is not None:
        for key, value in raw_s3a.spark().items():
            builder = builder.config(key, value)
        log.info("[spark] raw table storage: %s", raw_s3a.redacted())
    spark = builder.getOrCreate()
    conf = spark.sparkContext.getConf()
    for key, value in tuning(spark.sparkContext.defaultParallelism, local_raw=raw_s3a is None).items():
        if not conf.contains(key):  # spark-submit --conf wins
            spark.conf.set(key, value)
    return spark


def _launched_with_master() -> bool:
    """Whether spark-submit started this driver, or PySpark's launcher will be given a master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


def tuning(parallelism: int, *, local_raw: bool) -> dict[str, str]:
    """Defaults for many small inputs and modest outputs (each overridable with --conf).

    - shuffle partitions: twice the cores, not 200 (200 shuffle blocks per map task otherwise);
    - open cost: Spark counts 4 MB per file when packing files into tasks, right for S3/HDFS
      latency; opening a local file costs about as much as reading 128 KB, so local part files of a
      few KB go ~1,600 to a task instead of 32 (10,000 files: 11 tasks instead of 313).
    """
    out = {"spark.sql.shuffle.partitions": str(2 * parallelism)}
    if local_raw:
        out["spark.sql.files.openCostInBytes"] = str(128 * 1024)
    return out


def table_options(s3a: Optional[S3ASettings]) -> dict[str, str]:
    """Read/write options giving one table's S3A settings to Spark (empty for local tables)."""
    if s3a is None:
        return {}
    # the FileSystem cache is per scheme: bypass it for s3:// (bound to S3A above) as for s3a://
    return {**s3a.hadoop, "fs.s3a.impl.disable.cache": "true", "fs.s3.impl.disable.cache": "true"}


@contextmanager
def spark_progress(spark: SparkSession, name: str, every_s: float = 10.0) -> Iterator[None]:
    """While the block runs, log the running Spark stages' task progress every ``every_s`` seconds."""
    done = threading.Event()

    def watch() -> None:
        tracker = spark.sparkContext.statusTracker()
        while not done.wait(every_s):
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    log.info("[%s] Spark stage %d: %d/%d tasks done, %d running", name, stage_id,
                             info.numCompletedTasks, info.numTasks, info.numActiveTasks)

    thread = threading.Thread(target=watch, name=f"progress-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
