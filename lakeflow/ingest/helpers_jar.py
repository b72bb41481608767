"""Where the JVM helpers jar is (``build/lakeflow-flink.jar``, compiled from ``java/`` by ``make
jar``): without pyflink, so that ``lakeflow flink up`` and ``make package`` find it from the
compaction environment (``.venv``) too."""

from __future__ import annotations

from pathlib import Path

from lakeflow.ingest import IngestError

JAR_NAME = "lakeflow-flink.jar"


def jar_path() -> Path:
    """``$LAKEFLOW_JAR``, else ``build/lakeflow-flink.jar`` of the checkout (or the current directory)."""
    from lakeflow.settings.process import process_environment

    configured = process_environment("LAKEFLOW_JAR").jar
    if configured is not None:
        candidates = [configured]
    else:
        candidates = [Path(__file__).resolve().parents[2] / "build" / JAR_NAME, Path.cwd() / "build" / JAR_NAME]
    for jar in candidates:
        if jar.is_file():
            return jar.resolve()
    raise IngestError(
        f"the JVM helpers jar is missing (looked at {', '.join(map(str, candidates))}): "
        "run `make jar`, or set LAKEFLOW_JAR to its path"
    )
