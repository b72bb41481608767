"""The Spark session of a compaction run. Spark schedules the tasks; the executors read and write the
tables' files through pyarrow's file systems with the tables' vended credentials (broadcast with the
job, never on a command line), so the session needs no S3A settings of its own.
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from py4j.protocol import Py4JError
from pyspark import SparkContext
from pyspark.sql import SparkSession

from lakeflow.compaction.launch import submit_env
from lakeflow.runtime.class_archive import spark_archive_options
from lakeflow.runtime.memory import total_bytes

log = logging.getLogger(__name__)

SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",  # days are UTC days
    "spark.ui.showConsoleProgress": "false",  # the job logs its own progress
    "spark.log.level": "WARN",
    "spark.python.daemon.module": "lakeflow.compaction.spark.daemon",  # workers fork with the task's imports done
}
# The driver schedules tasks and passes their results on; the Python workers do the work. C2's compiler threads
# took most of a core through the session's first seconds (a 10M-reading run: 12.5 s with C1 alone, 13.6 s).
DRIVER_JIT = "-XX:TieredStopAtLevel=1"


def launch_early(spark_options: Sequence[str] = ()) -> None:
    """Start the driver's JVM (PySpark's gateway) in a thread, while the run plans (a run that knows it will
    compact with Spark); :func:`spark_session` then finds it started, or waits for it. Under spark-submit
    the JVM runs already: nothing to do."""
    _prepare_launch(spark_options)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        threading.Thread(target=SparkContext._ensure_initialized, name="spark-jvm", daemon=True).start()


def _prepare_launch(spark_options: Sequence[str]) -> None:
    """The environment a JVM PySpark launches reads: ``spark_options`` (spark-submit's; its launcher reads
    them, this Python and SPARK_HOME from the environment only), the driver's memory and the class archive
    (:mod:`~lakeflow.compaction.spark.cds`) when there is one. Idempotent."""
    if spark_options and "PYSPARK_GATEWAY_PORT" not in os.environ:
        os.environ.update(submit_env(os.environ, spark_options))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the Python workers parse: this environment's
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not yet launched: PySpark starts the JVM here
        submit_args = with_driver_memory(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
        os.environ["PYSPARK_SUBMIT_ARGS"] = with_driver_java_options(submit_args)


_pass_session: SparkSession | None = None  # the session this pass's runs share; stop_session ends it
_stopping: threading.Thread | None = None  # the pass's session stopping in the background


def spark_session(app_name: str, spark_options: Sequence[str] = ()) -> SparkSession:
    """The session (master and resources come from spark-submit; see :func:`_prepare_launch`)."""
    _prepare_launch(spark_options)
    builder = SparkSession.builder.appName(app_name)
    if not _launched_with_master():
        builder = builder.master("local[*]")
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    global _pass_session
    _pass_session = builder.getOrCreate()
    return _pass_session


def stop_session(wait: bool = True) -> None:
    """Stop the session a pass's runs shared (:func:`spark_session`'s), if one was started; without ``wait``
    in the background (the pass's last run, its Spark work done, goes on to its commit meanwhile: stopping
    takes ~1 s, most of it PySpark's accumulator server polling for its end), which a later call waits for."""
    global _pass_session, _stopping
    session, _pass_session = _pass_session, None
    if session is not None:
        _stopping = threading.Thread(target=_stop, args=(session,), name="spark-stop")
        _stopping.start()
    if wait and _stopping is not None:
        _stopping.join()
        _stopping = None


def _stop(session: SparkSession) -> None:
    try:
        session.stop()
    except (OSError, Py4JError) as exc:  # its JVM is gone already (the driver's gateway ended): nothing to stop
        log.debug("the pass's Spark session was gone already: %s", type(exc).__name__)


def with_driver_memory(submit_args: str) -> str:
    """``submit_args`` with ``--driver-memory`` unless they set it: a quarter of this machine's (or its
    container's) memory, 1 to 8 GiB. In local mode the driver is the executor too; Spark's default, 1 GiB, spills the
    persisted rows of a batch of a few million readings to disk."""
    if "--driver-memory" in submit_args or "spark.driver.memory" in submit_args or not submit_args:
        return submit_args
    gib = max(1, min(8, total_bytes() // 4 >> 30))
    return f"--driver-memory {gib}g {submit_args}"


def with_driver_java_options(submit_args: str) -> str:
    """``submit_args`` whose driver JVM compiles with C1 alone (:data:`DRIVER_JIT`) and maps the class archive
    (:mod:`~lakeflow.compaction.spark.cds`) when there is one, unless they set driver Java options of their own."""
    if "--driver-java-options" in submit_args or "spark.driver.extraJavaOptions" in submit_args:
        return submit_args
    options = " ".join(o for o in (spark_archive_options(), DRIVER_JIT) if o)
    return shlex.join(["--driver-java-options", options, *(shlex.split(submit_args) or ["pyspark-shell"])])


def _launched_with_master() -> bool:
    """Whether spark-submit started this driver, or PySpark's launcher will be given a master."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


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
