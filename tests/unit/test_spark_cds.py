"""The Spark driver's class-data-sharing archive (lakeflow.compaction.spark.cds): a driver JVM PySpark
starts through lakeflow maps it (seen in the JVM's /proc/<pid>/maps) and compiles with C1 alone, only
when nothing else sets the driver's Java options.

Unit tests: they start no process. The real-process tests: tests/integration/test_spark_cds.py."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from lakeflow.compaction.spark import session
from lakeflow.runtime import class_archive


@pytest.fixture
def archive_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file where the archive is looked for (what it holds is the JVM's business): no JVM started."""
    monkeypatch.setenv("LAKEFLOW_JARS_DIR", str(tmp_path))
    path = class_archive.archive_path()
    assert path is not None, "no java"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    return path


def test_driver_java_options_of_the_caller_win(archive_file: Path) -> None:
    options = f"-XX:SharedArchiveFile={archive_file} {class_archive.QUIET} {session.DRIVER_JIT}"
    assert session.with_driver_java_options("") == shlex.join(["--driver-java-options", options, "pyspark-shell"])
    added = shlex.split(session.with_driver_java_options("--master 'local[2]' pyspark-shell"))
    assert added == ["--driver-java-options", options, "--master", "local[2]", "pyspark-shell"]
    for own in ("--driver-java-options -Dx=1 pyspark-shell", "--conf spark.driver.extraJavaOptions=-Dx=1 pyspark-shell"):
        assert session.with_driver_java_options(own) == own


def test_no_archive_only_the_jit_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEFLOW_JARS_DIR", str(tmp_path))
    assert session.with_driver_java_options("pyspark-shell") == shlex.join(
        ["--driver-java-options", session.DRIVER_JIT, "pyspark-shell"])
