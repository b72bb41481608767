"""The JVM of a local run (``make run``): PyFlink's gateway, which hosts the job's MiniCluster.

:func:`configure` gives it what makes it start sooner: the class archive of an earlier run mapped
(:func:`lakeflow.runtime.class_archive.flink_jvm_args`; ``make flink-cds`` builds it with
:func:`build_archive`), and no Beam loopback server for Python workers (no record passes through Python:
a Python function would get a worker process of its own). The JVM still starts only once the job's
checks have passed (a refused job starts none). Under ``flink run`` the CLI's JVM is the gateway:
nothing here applies.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lakeflow.runtime import class_archive

JOB = Path(__file__).resolve().parents[2] / "jobs" / "sensor_ingest.py"
PYFLINK_WORKER_MODE = "_python_worker_execution_mode"  # PyFlink's: "process" starts no loopback server
WARM_UP = {"NUM_RECORDS": "40", "NUM_SENSORS": "4", "BATCH_SIZE": "10", "BATCH_INTERVAL_MS": "500"}


def configure() -> None:
    """Set the gateway JVM's options for a local run (the caller's ``JVM_ARGS`` win): before it starts."""
    if "PYFLINK_GATEWAY_PORT" in os.environ:  # under `flink run`
        return
    os.environ.setdefault(PYFLINK_WORKER_MODE, "process")
    archive = class_archive.flink_jvm_args()
    if archive is not None:
        os.environ.setdefault("JVM_ARGS", archive)


def build_archive(timeout_s: float = 300.0) -> Path:
    """Run a small local job with ``-XX:ArchiveClassesAtExit``, wait for its JVM to exit (it writes the
    archive on its way out) and move the archive into place; its path."""
    keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "LAKEFLOW_JARS_DIR", "TMPDIR")
    deadline = time.monotonic() + timeout_s

    def record(java_options: str) -> None:
        with tempfile.TemporaryDirectory() as home:
            env = {k: v for k, v in os.environ.items() if k in keep} | WARM_UP
            env |= {"LAKEFLOW_HOME": home, "LAKEFLOW_ENV_FILE": os.devnull, "FLINK_LOG_DIR": f"{home}/log"}
            env["JVM_ARGS"] = java_options
            subprocess.run(
                [sys.executable, str(JOB), "--local"],
                env=env,
                check=True,
                timeout=timeout_s,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            option = java_options.split()[0].encode()
            while _running_with(option):  # the gateway JVM outlives the job's Python by its dump
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the JVM of {option.decode()} did not exit within {timeout_s:.0f} s")
                time.sleep(0.2)

    return class_archive.build(class_archive.flink_archive_path(), record)


def _running_with(option: bytes) -> bool:
    """Whether a process started with ``option`` on its command line is still running."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if option in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False
