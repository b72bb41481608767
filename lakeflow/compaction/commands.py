"""``lakeflow compact``: spark-submit ``jobs/compact.py`` with the virtualenv's Python.

Only non-secret flags go on the spark-submit command line; the job reads settings and
credentials from the environment (inherited) and ``.env.local`` inside the driver.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from lakeflow.compaction.config import add_arguments, job_argv

JOB = Path(__file__).resolve().parents[2] / "jobs" / "compact.py"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow compact`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "compact", help="compact the raw table's JSON part files into an Iceberg table (spark-submit)",
        description="Run jobs/compact.py with spark-submit: new committed part files of NAMESPACE.TABLE "
                    "→ Parquet → one atomic Iceberg commit (with the ledger of consumed files). "
                    "Exit codes: 0 done, 2 error, 3 another run holds the lock.")
    add_arguments(p)
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration (repeatable; never credentials)")
    p.add_argument("--jars", default="", help="comma-separated extra jars (e.g. hadoop-aws for s3a://)")
    p.add_argument("--print-command", action="store_true", help="print the spark-submit command and exit")
    p.set_defaults(handler=_compact)


def spark_home() -> Path:
    """The installed pyspark package: a complete SPARK_HOME."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def submit_command(job_args: Sequence[str], *, master: str = "local[2]", spark_conf: Sequence[str] = (),
                   jars: str = "") -> list[str]:
    """The spark-submit command line for ``jobs/compact.py`` (non-secret values only)."""
    confs = {"spark.ui.enabled": "false"} if master.startswith("local") else {}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--spark-conf {item!r}: expected KEY=VALUE")
        confs[key] = value
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    for key, value in confs.items():
        cmd += ["--conf", f"{key}={value}"]
    if jars:
        cmd += ["--jars", jars]
    return [*cmd, str(JOB), *job_args]


def submit_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment spark-submit runs in: this Python for driver and workers, pyspark as SPARK_HOME."""
    env = dict(base)
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_HOME"] = str(spark_home())
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _compact(args: argparse.Namespace) -> int:
    if not JOB.is_file():
        print(f"lakeflow compact: {JOB} not found: run from a lakeflow checkout (pip install -e .)",
              file=sys.stderr)
        return 2
    cmd = submit_command(job_argv(args), master=args.master, spark_conf=args.spark_conf, jars=args.jars)
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    if args.print_command:
        return 0
    return subprocess.run(cmd, env=submit_env(os.environ)).returncode
