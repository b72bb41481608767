"""The JVMs' class-data-sharing archives: where they are, and the options that map them.

Java 17 can map the classes an earlier JVM loaded from an archive instead of loading and verifying
them again (AppCDS, dynamic archive). There is one archive per engine version and Java installation,
under ``build/jars/cds/`` (``$LAKEFLOW_JARS_DIR``): the Spark driver's (``make spark-cds``,
:mod:`lakeflow.compaction.spark.cds`; a driver JVM PySpark starts for lakeflow gets ``-XX:SharedArchiveFile``
(:func:`spark_archive_options`) unless its arguments set driver Java options of their own) and the local Flink
job's (``make flink-cds``, :mod:`lakeflow.ingest.cds`; PyFlink's gateway JVM, which hosts the MiniCluster
of ``make run``, gets it through ``JVM_ARGS``: :func:`flink_jvm_args`). A missing, stale or damaged archive
costs only the speed-up: the JVM ignores it, with its CDS log off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from lakeflow.runtime.jars import jars_dir

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # CDS's own warnings (signed jars skipped, a mismatch)


def java() -> Path | None:
    """The ``java`` PySpark's launcher runs (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where the Spark driver's archive for this pyspark installation (its jars: the archive's class
    path) and this Java lives (None without a ``java``): each environment holding pyspark gets its own."""
    import pyspark

    return _archive("spark", pyspark.__version__, Path(pyspark.__file__).parent)


def flink_archive_path() -> Path | None:
    """Where the local Flink job's archive for this pyflink installation and this Java lives (None
    without a ``java``)."""
    import pyflink.version

    return _archive("flink", pyflink.version.__version__, Path(pyflink.version.__file__).parent)


def _archive(engine: str, version: str, package: Path) -> Path | None:
    binary = java()
    if binary is None:
        return None
    release = binary.parent.parent / "release"
    ident = str(binary) + str(package) + (release.read_text(errors="replace") if release.exists() else "")
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return jars_dir() / "cds" / f"{engine}-{version}-java-{digest}.jsa"


def flink_jvm_args() -> str | None:
    """``JVM_ARGS`` for PyFlink's gateway JVM that map the local Flink job's archive (None: there is none)."""
    return _mapped(flink_archive_path())


def spark_archive_options() -> str | None:
    """The Spark driver JVM's options that map its archive (None: there is none)."""
    return _mapped(archive_path())


def _mapped(archive: Path | None) -> str | None:
    return f"-XX:SharedArchiveFile={archive} {QUIET}" if archive is not None and archive.exists() else None


def build(target: Path | None, record: Callable[[str], None]) -> Path:
    """Build the archive ``target`` (replacing one there): ``record`` runs a JVM with the Java options it is
    given (``-XX:ArchiveClassesAtExit`` of a temporary file, CDS's log off) and returns once that JVM has
    exited, the archive written; it then moves into place. Its path."""
    if target is None:
        raise RuntimeError("no java: set JAVA_HOME or put java on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        record(f"-XX:ArchiveClassesAtExit={partial} {QUIET}")
        if not partial.exists():
            raise RuntimeError(f"the JVM wrote no archive ({partial})")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target
