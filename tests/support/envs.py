"""The job environments the tests run things in (docs/environments.md): this interpreter is the
development one (``.venv``: the compaction job's environment + test tools); the ingestion job and
anything importing pyflink runs with the ingestion environment's Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lakeflow.runtime.homes import ingestion_python

INGEST_PY = str(ingestion_python())  # .venv-flink/bin/python (make install)


def bare_venv(folder: Path) -> Path:
    """A Python 3.11 venv without packages under ``folder`` (what a cluster's host has); its python."""
    venv = folder / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return venv / "bin" / "python"
