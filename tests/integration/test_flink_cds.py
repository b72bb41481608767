"""The local Flink job's class-data-sharing archive (lakeflow.ingest.client_jvm): the JVM of a local run
(``make run``) maps it (seen in the JVM's /proc/<pid>/maps), its CDS log stays off, and the job commits
its readings as without it.

The unit tests (no process): tests/unit/test_flink_cds.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.envs import INGEST_PY

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "sensor_ingest.py"


@pytest.fixture(scope="module")
def archive() -> Path:
    """The archive ``make test`` built first (``make run``'s); built here when missing."""
    where = subprocess.run(
        [INGEST_PY, "-c", "from lakeflow.runtime.class_archive import flink_archive_path; print(flink_archive_path())"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    ).stdout.strip()
    path = Path(where)
    if not path.exists():
        subprocess.run([INGEST_PY, "-m", "lakeflow.cli", "flink-cds"], check=True, cwd=ROOT, timeout=600)
    return path


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(c) for c in task.read_text().split()]
        except OSError:
            continue
    return out


@pytest.mark.slow
def test_a_local_runs_jvm_maps_the_archive(archive: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JVM_ARGS", "LAKEKEEPER", "FLINK_LOG_DIR")}
    env |= {"LAKEFLOW_HOME": str(tmp_path), "LAKEFLOW_ENV_FILE": os.devnull, "NUM_RECORDS": "40",
            "BATCH_SIZE": "10", "BATCH_INTERVAL_MS": "500"}
    proc = subprocess.Popen([INGEST_PY, str(JOB), "--local"], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    mapped = False  # (a JVM just started may not have mapped it yet: looked at until it has)
    deadline = time.monotonic() + 300
    while proc.poll() is None and not mapped and time.monotonic() < deadline:
        for child in _children(proc.pid):
            try:
                if b"PythonGatewayServer" in Path(f"/proc/{child}/cmdline").read_bytes():
                    mapped = str(archive) in Path(f"/proc/{child}/maps").read_text()
            except OSError:
                continue
        time.sleep(0.1)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert mapped, "the gateway JVM did not map the archive"
    assert "Wrote 4 files, 40 readings" in out or ", 40 readings" in out, out
    assert "cds" not in err.lower()  # its log stays off
