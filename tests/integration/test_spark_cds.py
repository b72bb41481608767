"""The Spark driver's class-data-sharing archive (lakeflow.compaction.spark.cds): a driver JVM PySpark
starts through lakeflow maps it (seen in the JVM's /proc/<pid>/maps) and compiles with C1 alone (its
command line), only when nothing else sets the driver's Java options.

The unit tests (no process): tests/unit/test_spark_cds.py.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lakeflow.compaction.spark import cds
from lakeflow.runtime import class_archive

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def archive() -> Path:
    """The archive ``make test`` built first (``make spark-cds``); built here when missing."""
    path = class_archive.archive_path()
    assert path is not None, "no java"
    if not path.exists():
        cds.build()
    return path


@pytest.mark.slow
def test_the_driver_jvm_maps_the_archive(archive: Path, tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import os, sys
        from pyspark import SparkContext
        from lakeflow.compaction.spark.session import spark_session
        spark = spark_session("cds-test", None)
        assert spark.range(5).count() == 5
        pid = SparkContext._gateway.proc.pid
        print(os.environ["PYSPARK_SUBMIT_ARGS"])
        print(sys.argv[1] in open(f"/proc/{pid}/maps").read())
        print(open(f"/proc/{pid}/cmdline").read().split("\\0").count("-XX:TieredStopAtLevel=1"))
        spark.stop()
    """)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYSPARK_")}
    proc = subprocess.run([sys.executable, "-c", script, str(archive)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**env, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    submit_args, mapped, jit = proc.stdout.strip().splitlines()[-3:]
    assert f"-XX:SharedArchiveFile={archive}" in shlex.split(submit_args)[1]
    assert mapped == "True"
    assert jit == "1"  # the driver compiles with C1 alone
    assert "cds" not in proc.stderr.lower()                             # its log stays off
