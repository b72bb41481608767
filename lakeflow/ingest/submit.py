"""The ``flink run`` commands of the ingestion job, aimed at the cluster of ``lakeflow flink up``.

``make package`` prints the packaged one (``lakeflow flink-command``): the ingestion job's
environment travels with the job (``-pyarch build/ingestion-env.tar.gz#env``, lakeflow installed
inside, its Python for the client and the TaskManagers), so the cluster's hosts need no Python
packages. ``lakeflow demo`` runs the one of this checkout (the ingestion environment ``.venv-flink``
and ``-pyfs build/lakeflow.zip``). The cluster's ``FLINK_CONF_DIR`` comes from the settings
(``$LAKEFLOW_HOME/cluster/conf``), the same place ``lakeflow flink up`` writes it, so the Makefile
never decides where lakeflow's state is. Only paths go on the command line; settings and secrets
reach the job from the environment.
"""

from __future__ import annotations

import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "sensor_ingest.py"
PACKAGE_ZIP = REPO / "build" / "lakeflow.zip"  # the lakeflow package for -pyfs (make package)
ENV_ARCHIVE = REPO / "build" / "ingestion-env.tar.gz"  # the ingestion job's environment (make package)
ENV_DIR = "env"  # the folder -pyarch unpacks the archive into, on the client and every TaskManager


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


def packaged_flink_run_command(archive: Path = ENV_ARCHIVE) -> list[str]:
    """``flink run`` of ``jobs/sensor_ingest.py`` carrying its environment: ``archive`` (venv-pack'ed,
    lakeflow inside) unpacked as ``env/`` next to the client's and each TaskManager's Python process,
    whose interpreter is ``env/bin/python``."""
    from lakeflow.runtime.homes import flink_home

    py = f"{ENV_DIR}/bin/python"
    return [
        str(flink_home() / "bin" / "flink"),
        "run",
        "-pyarch",
        f"{archive}#{ENV_DIR}",
        "-pyclientexec",
        py,
        "-pyexec",
        py,
        "-py",
        str(JOB),
    ]


def submit_env(home: Path, jar: Path) -> dict[str, str]:
    """The variables ``flink run`` needs besides the job's settings: the helpers jar and the cluster's conf."""
    return {"LAKEFLOW_JAR": str(jar.resolve()), "FLINK_CONF_DIR": str(cluster_conf_dir(home))}


def printed(home: Path, jar: Path) -> str:
    """The packaged command as a shell line (what ``make package`` prints)."""
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in submit_env(home, jar).items())
    return f"{variables} \\\n  {shlex.join(packaged_flink_run_command())}"
