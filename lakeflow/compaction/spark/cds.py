"""A class-data-sharing archive for the Spark driver's JVM: a local Spark session starts faster.

Java 17 can map the classes an earlier JVM loaded from an archive instead of loading and verifying
them again (AppCDS, dynamic archive). ``python -m lakeflow.compaction.spark.cds`` (``make
spark-cds``, run by ``make test``) builds one per pyspark version and Java installation, under
``build/jars/cds/`` (``$LAKEFLOW_JARS_DIR``). It runs a small compaction through the Spark engine —
the classes a real run loads — with ``-XX:ArchiveClassesAtExit``, waits for that JVM to exit, and
renames the archive into place. A driver JVM PySpark starts afterwards gets
``-XX:SharedArchiveFile`` (:func:`with_class_archive`) unless its arguments set driver Java options
of their own. A missing, stale or damaged archive costs only the speed-up: the JVM ignores it,
with its CDS log off. A driver spark-submit starts (``--print-command``) is not given it.

Measured (local[2], 2 cores): an empty session 5.9 s → 3.5 s and its first job 2.9 s → 1.5 s; the
session of ``lakeflow compact --engine spark`` 6.4 s → 3.4–3.9 s.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # CDS's own warnings (signed jars skipped, a mismatch)


def java() -> Path | None:
    """The ``java`` PySpark's launcher runs (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where the archive for this pyspark and this Java lives (None without a ``java``)."""
    import pyspark

    from lakeflow.jars import jars_dir

    binary = java()
    if binary is None:
        return None
    release = binary.parent.parent / "release"
    ident = str(binary) + (release.read_text(errors="replace") if release.exists() else "")
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


def build(timeout_s: float = 300.0) -> Path:
    """Build the archive (replacing one there); returns its path."""
    target = archive_path()
    if target is None:
        raise RuntimeError("no java: set JAVA_HOME or put java on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    env = {
        **os.environ,
        "PYSPARK_SUBMIT_ARGS": shlex.join(
            ["--driver-java-options", f"-XX:ArchiveClassesAtExit={partial} {QUIET}", "pyspark-shell"]
        ),
    }
    env.pop("PYSPARK_GATEWAY_PORT", None)
    try:
        subprocess.run(
            [sys.executable, "-m", "lakeflow.compaction.spark.cds", "--warm-up"],
            env=env,
            check=True,
            timeout=timeout_s,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if not partial.exists():
            raise RuntimeError(f"the JVM wrote no archive ({partial})")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def warm_up() -> None:
    """A small compaction through the Spark engine (sink-layout JSON → Parquet), then wait for the
    JVM to exit: it writes the archive on its way out."""
    from pyspark import SparkContext

    from lakeflow.compaction.files import FileEntry, Storage
    from lakeflow.compaction.spark.engine import SparkEngine

    with tempfile.TemporaryDirectory() as tmp:
        raw, target = Path(tmp, "raw"), Path(tmp, "target")
        raw.mkdir()
        record = (
            '{"sensor_id":"s-%d","run_id":"cds","seq":%d,"timestamp_ms":%d,"temperature":20.5,'
            '"humidity":40.0,"pressure":1000.0,"location":"lab"}'
        )
        files = []
        for n in range(2):
            rows = [record % (i, i, 1763683200000 + i) for i in range(n * 3, n * 3 + 3)]
            path = raw / f"part-cds-0-{n}.json"
            path.write_text("[" + ",\n".join(rows) + "]\n")
            files.append(FileEntry(path.name, path.stat().st_size, None))
        (raw / "part-cds-0-2.json").write_text('[{"sensor_id": 1}, 2')  # the bad-record paths too
        files.append(FileEntry("part-cds-0-2.json", 20, None))
        engine = SparkEngine(Storage(raw.as_uri()), Storage(target.as_uri()), None, None, "lakeflow-cds")
        engine.read(files)
        engine.write_bad_records([], "bad")
        engine.write([], 1, "staging")
        gateway = SparkContext._gateway
        proc = gateway.proc if gateway is not None else None
        engine.close()
    if proc is not None:  # the JVM exits once its stdin closes (PySpark's gateway watches it)
        proc.stdin.close()
        proc.wait(timeout=240)


def main() -> int:
    """``--warm-up``: the archiving JVM's job; ``--force``: rebuild; else build unless there."""
    if sys.argv[1:] == ["--warm-up"]:
        warm_up()
        return 0
    path = archive_path()
    if path is not None and path.exists() and "--force" not in sys.argv[1:]:
        print(f"Spark driver class archive: {path} (there; --force rebuilds it)")
        return 0
    try:
        path = build()
    except (RuntimeError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        print(f"lakeflow spark-cds: {exc}\n{detail.decode(errors='replace')[-2000:]}", file=sys.stderr)
        return 1
    print(f"Spark driver class archive: {path} ({path.stat().st_size >> 20} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
