"""The ``flink run`` command of the packaged ingestion job, aimed at the cluster of ``lakeflow flink up``.

``make package`` prints it (``python -m lakeflow.ingest.submit``) and ``lakeflow demo`` runs it: the
cluster's ``FLINK_CONF_DIR`` comes from the settings (``$LAKEFLOW_HOME/cluster/conf``), the same
place ``lakeflow flink up`` writes it, so the Makefile never decides where lakeflow's state is.
Only paths go on the command line; settings and secrets reach the job from the environment.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "sensor_ingest.py"
PACKAGE_ZIP = REPO / "build" / "lakeflow.zip"  # the lakeflow package for -pyfs (make package)


def cluster_conf_dir(home: Path) -> Path:
    """``FLINK_CONF_DIR`` of the cluster ``lakeflow flink up`` starts under ``home`` ($LAKEFLOW_HOME)."""
    return (home / "cluster" / "conf").resolve()


def flink_run_command(python: str | None = None) -> list[str]:
    """``flink run`` of ``jobs/sensor_ingest.py`` with the zipped package; ``python`` (default the
    ingestion environment's) is both the client's and the TaskManagers' Python."""
    from lakeflow.runtime.homes import flink_home, ingestion_python

    py = python or str(ingestion_python())
    return [
        str(flink_home() / "bin" / "flink"),
        "run",
        "-pyclientexec",
        py,
        "-pyexec",
        py,
        "-pyfs",
        str(PACKAGE_ZIP),
        "-py",
        str(JOB),
    ]


def submit_env(home: Path, jar: Path) -> dict[str, str]:
    """The variables ``flink run`` needs besides the job's settings: the helpers jar and the cluster's conf."""
    return {"LAKEFLOW_JAR": str(jar.resolve()), "FLINK_CONF_DIR": str(cluster_conf_dir(home))}


def printed(home: Path, jar: Path) -> str:
    """The command as a shell line (what ``make package`` prints)."""
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in submit_env(home, jar).items())
    return f"{variables} \\\n  {shlex.join(flink_run_command())}"


def main() -> int:
    from lakeflow.settings import SettingsError, load_settings

    try:
        home = load_settings(local=True).home
    except SettingsError as exc:
        print(f"make package: {exc}", file=sys.stderr)
        return 2
    from lakeflow.ingest.sink import JAR_NAME

    print(printed(home, REPO / "build" / JAR_NAME))
    return 0


if __name__ == "__main__":
    sys.exit(main())
