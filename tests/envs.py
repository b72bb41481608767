"""The job environments the tests run things in (docs/environments.md): this interpreter is the
development one (``.venv``: the compaction job's environment + test tools); the ingestion job and
anything importing pyflink runs with the ingestion environment's Python."""

from __future__ import annotations

from lakeflow.runtime.homes import ingestion_python

INGEST_PY = str(ingestion_python())  # .venv-flink/bin/python (make install)
