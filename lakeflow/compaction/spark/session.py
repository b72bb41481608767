"""The Spark session of a compaction run, and each table's storage settings as Spark options.

Credentials never travel on the spark-submit command line: the driver reads them from the
catalog (vended) and sets them here, programmatically. The raw table's ``fs.s3a.*`` settings go
into the session (reads, listing); the target table's are given to its own reads and writes as
options, with S3A's FileSystem cache bypassed so each table is accessed with its own credentials.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import SparkSession

from lakeflow.compaction.launch import submit_env
from lakeflow.credentials import S3ASettings
from lakeflow.runtime.class_archive import with_class_archive
from lakeflow.runtime.memory import total_bytes

log = logging.getLogger(__name__)

SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",  # days are UTC days
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",  # Iceberg timestamptz, not INT96
    "spark.sql.parquet.compression.codec": "zstd",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",  # no _SUCCESS files
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",  # no .crc side files
    # S3A 3.5 buffers uploads on local disk through fs.file.impl, which must then be a checksummed
    # LocalFileSystem (ClassCastException with RawLocalFileSystem): buffer in memory instead.
    "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
    "spark.ui.showConsoleProgress": "false",  # the job logs its own progress
    "spark.log.level": "WARN",
}
# For a run on S3: Lakekeeper's locations are s3:// URIs; with the scheme bound to S3A Spark reads and
# writes them as they are, with the same fs.s3a.* settings (lakeflow itself hands Spark s3a:// URIs).
S3_SESSION_CONF = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}


def spark_session(
    app_name: str, raw_s3a: S3ASettings | None, *, s3: bool = False, spark_options: Sequence[str] = ()
) -> SparkSession:
    """The session (master and resources come from spark-submit), with the raw table's S3A settings.
    A JVM PySpark launches gets ``spark_options`` (spark-submit's; its launcher reads them, this
    Python and SPARK_HOME from the environment only), S3A's jars for S3 (``raw_s3a``, or ``s3`` for
    an S3 target) and the class archive (:mod:`~lakeflow.compaction.spark.cds`) when there is one."""
    if spark_options and "PYSPARK_GATEWAY_PORT" not in os.environ:
        os.environ.update(submit_env(os.environ, spark_options))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the Python workers parse: this environment's
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not yet launched: PySpark starts the JVM here
        os.environ["PYSPARK_SUBMIT_ARGS"] = with_driver_memory(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if (raw_s3a is not None or s3) and "PYSPARK_GATEWAY_PORT" not in os.environ:
        from lakeflow.runtime.jars import with_s3a_jars  # hadoop-aws + AWS SDK v2, fetched into build/jars/ if need be

        os.environ["PYSPARK_SUBMIT_ARGS"] = with_s3a_jars(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # the driver JVM maps the class archive if built (make spark-cds)
        os.environ["PYSPARK_SUBMIT_ARGS"] = with_class_archive(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
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
    parallelism, local_raw = spark.sparkContext.defaultParallelism, raw_s3a is None
    for key, value in {**tuning(parallelism, local_raw=local_raw), **listing(parallelism, local_raw=local_raw)}.items():
        if not conf.contains(key):  # spark-submit --conf wins
            spark.conf.set(key, value)
    return spark


def with_driver_memory(submit_args: str) -> str:
    """``submit_args`` with ``--driver-memory`` unless they set it: a quarter of this machine's (or its
    container's) memory, 1 to 8 GiB. In local mode the driver is the executor too; Spark's default, 1 GiB, spills the
    persisted rows of a batch of a few million readings to disk."""
    if "--driver-memory" in submit_args or "spark.driver.memory" in submit_args or not submit_args:
        return submit_args
    gib = max(1, min(8, total_bytes() // 4 >> 30))
    return f"--driver-memory {gib}g {submit_args}"


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


def listing(parallelism: int, *, local_raw: bool) -> dict[str, str]:
    """Spark is handed this run's files by name and looks each one up; past 32 names it does so in a
    job of up to 10,000 tasks. Local look-ups are cheap enough for the driver alone (10,000 files: a
    second, not a 10,000-task job); remote ones run in 4 tasks per core."""
    if local_raw:
        return {"spark.sql.sources.parallelPartitionDiscovery.threshold": str(2**31 - 1)}
    return {"spark.sql.sources.parallelPartitionDiscovery.parallelism": str(4 * parallelism)}


def table_options(s3a: S3ASettings | None) -> dict[str, str]:
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
                    log.info(
                        "[%s] Spark stage %d: %d/%d tasks done, %d running",
                        name,
                        stage_id,
                        info.numCompletedTasks,
                        info.numTasks,
                        info.numActiveTasks,
                    )

    thread = threading.Thread(target=watch, name=f"progress-{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
