"""The Spark driver JVM's class-data-sharing archive: where it is, and the driver options that map it.

Java 17 can map the classes an earlier JVM loaded from an archive instead of loading and verifying
them again (AppCDS, dynamic archive). There is one archive per pyspark version and Java
installation, under ``build/jars/cds/`` (``$LAKEFLOW_JARS_DIR``); ``make spark-cds`` builds it
(:mod:`lakeflow.compaction.spark.cds`). A driver JVM PySpark starts gets ``-XX:SharedArchiveFile``
(:func:`with_class_archive`) unless its arguments set driver Java options of their own. A missing,
stale or damaged archive costs only the speed-up: the JVM ignores it, with its CDS log off.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
from pathlib import Path

from lakeflow.runtime.jars import jars_dir

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # CDS's own warnings (signed jars skipped, a mismatch)


def java() -> Path | None:
    """The ``java`` PySpark's launcher runs (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where the archive for this pyspark installation (its jars: the archive's class path) and this
    Java lives (None without a ``java``): each environment holding pyspark gets its own."""
    import pyspark

    binary = java()
    if binary is None:
        return None
    release = binary.parent.parent / "release"
    ident = (
        str(binary)
        + str(Path(pyspark.__file__).parent)
        + (release.read_text(errors="replace") if release.exists() else "")
    )
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return jars_dir() / "cds" / f"spark-{pyspark.__version__}-java-{digest}.jsa"


def with_class_archive(submit_args: str) -> str:
    """``PYSPARK_SUBMIT_ARGS`` whose driver JVM maps the archive, when there is one and the arguments
    set no driver Java options of their own."""
    archive = archive_path()
    if archive is None or not archive.exists():
        return submit_args
    if "--driver-java-options" in submit_args or "spark.driver.extraJavaOptions" in submit_args:
        return submit_args
    args = shlex.split(submit_args) or ["pyspark-shell"]
    return shlex.join(["--driver-java-options", f"-XX:SharedArchiveFile={archive} {QUIET}", *args])
