"""How the compaction job is launched: spark-submit's options and command line, and the environment
PySpark's launcher reads (only non-secret values on any command line; the job reads settings and
credentials from the environment and ``.env.local`` inside the driver)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from lakeflow.runtime.homes import spark_home
from lakeflow.settings import SettingsError

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "compact.py"
ENV_ARCHIVE = REPO / "build" / "compaction-env.tar.gz"  # the compaction job's environment (make package)
DRIVER_ENV = REPO / "build" / "envs" / "compaction"  # the same environment unpacked: the driver's (client mode)
ENV_DIR = "env"  # the folder --archives unpacks the archive into, in each executor's working directory


def spark_options(master: str | None = None, spark_conf: Sequence[str] = (), jars: str = "") -> list[str]:
    """spark-submit's options (non-secret values only; master local[2] unless given). The driver's
    web UI is off (the job logs its progress): its Environment page would list the S3A settings the
    driver sets, credentials masked only as far as ``spark.redaction.regex`` matches them."""
    confs = {"spark.ui.enabled": "false"}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"--spark-conf {item!r}: expected KEY=VALUE")
        confs[key] = value
    out = ["--master", master or "local[2]"]
    for key, value in confs.items():
        out += ["--conf", f"{key}={value}"]
    if jars:
        out += ["--jars", jars]
    return out


def submit_command(job_args: Sequence[str], options: Sequence[str]) -> list[str]:
    """The spark-submit command line for ``jobs/compact.py`` (a cluster's way to run it)."""
    return [str(spark_home() / "bin" / "spark-submit"), *options, str(JOB), *job_args]


def cluster_options(options: Sequence[str]) -> list[str]:
    """``options`` for a spark-submit of ``jobs/compact.py`` on a cluster whose hosts have no Python
    packages: the compaction job's environment as ``--archives`` (``env/bin/python`` for the
    executors' Python workers) and its unpacked copy's Python for the driver."""
    return [
        *options,
        "--archives",
        f"{ENV_ARCHIVE}#{ENV_DIR}",
        "--conf",
        f"spark.pyspark.python=./{ENV_DIR}/bin/python",
        "--conf",
        f"spark.pyspark.driver.python={DRIVER_ENV / 'bin' / 'python'}",
    ]


def submit_env(base: Mapping[str, str], options: Sequence[str] = ()) -> dict[str, str]:
    """The environment the job runs in: this Python for driver and workers, pyspark as SPARK_HOME,
    and ``options`` for PySpark's launcher (``PYSPARK_SUBMIT_ARGS``) when given."""
    env = dict(base)
    if options:
        env["PYSPARK_SUBMIT_ARGS"] = shlex.join([*options, "pyspark-shell"])
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_HOME"] = str(spark_home())
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
