"""``lakeflow compact``: run ``jobs/compact.py`` with the virtualenv's Python.

The job is a PySpark driver that starts Spark only when its engine is ``spark``
(:mod:`lakeflow.compaction.engine`): here, run in this process, through PySpark's own launcher
given the spark-submit options in ``PYSPARK_SUBMIT_ARGS``; on a cluster through ``spark-submit
--archives build/compaction-env.tar.gz#env jobs/compact.py`` (``--print-command``): the compaction
job's environment, lakeflow inside, travels with the job (``make package``), its Python runs the
executors' Python workers, and the unpacked ``build/envs/compaction`` the driver. Small batches (the
``arrow`` engine) start no JVM at all. Only non-secret flags go on either command line; the job reads
settings and credentials from the environment (inherited) and ``.env.local`` inside the driver.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import shlex
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from lakeflow.compaction.config import CompactEnv, MetricsExport, add_arguments, job_argv, metrics_export, schedule
from lakeflow.runtime.homes import spark_home

EXIT_ERROR = 2  # as lakeflow.compaction.run's (not imported here: it loads pyiceberg)
REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "jobs" / "compact.py"
ENV_ARCHIVE = REPO / "build" / "compaction-env.tar.gz"  # the compaction job's environment (make package)
DRIVER_ENV = REPO / "build" / "envs" / "compaction"  # the same environment unpacked: the driver's (client mode)
ENV_DIR = "env"  # the folder --archives unpacks the archive into, in each executor's working directory


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow compact`` to the ``lakeflow`` parser."""
    p = subparsers.add_parser(
        "compact",
        help="compact the raw table's JSON part files into an Iceberg table (PySpark job)",
        description="Run jobs/compact.py: new committed part files of NAMESPACE.TABLE → Parquet → one "
        "atomic Iceberg commit (with the ledger of consumed files). Spark (--master, "
        "--spark-conf, --jars) starts only for the spark engine. "
        "Exit codes: 0 done, 2 error, 3 another run (on any host) holds the table's lease.",
    )
    add_arguments(p)
    p.add_argument(
        "--master",
        help="Spark master (default local[2]; with --print-command the cluster of "
        "make spark-up, spark://127.0.0.1:$SPARK_MASTER_PORT)",
    )
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration (repeatable; never credentials)",
    )
    p.add_argument("--jars", default="", help="comma-separated extra jars (e.g. hadoop-aws for s3a://)")
    p.add_argument(
        "--print-command",
        action="store_true",
        help="print the spark-submit command for a cluster (the job's environment as --archives "
        "build/compaction-env.tar.gz of make package) and exit",
    )
    p.add_argument(
        "--every",
        metavar="DURATION",
        help="continuous mode: run every DURATION (60s, 5m …) until SIGTERM / Ctrl+C, which lets the "
        "run in progress finish; one line per run",
    )
    p.add_argument("--maintain-every", metavar="DURATION", help=CompactEnv.help("maintain_every_s"))
    p.add_argument("--metrics-port", type=int, metavar="PORT", help=CompactEnv.help("metrics_port"))
    p.add_argument("--metrics-textfile", metavar="PATH", help=CompactEnv.help("metrics_textfile"))
    p.add_argument("--pushgateway", metavar="URL", help=CompactEnv.help("pushgateway_url"))
    p.set_defaults(handler=_compact)


def spark_options(master: str | None = None, spark_conf: Sequence[str] = (), jars: str = "") -> list[str]:
    """spark-submit's options (non-secret values only; master local[2] unless given). The driver's
    web UI is off (the job logs its progress): its Environment page would list the S3A settings the
    driver sets, credentials masked only as far as ``spark.redaction.regex`` matches them."""
    confs = {"spark.ui.enabled": "false"}
    for item in spark_conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--spark-conf {item!r}: expected KEY=VALUE")
        confs[key] = value
    out = ["--master", master or "local[2]"]
    for key, value in confs.items():
        out += ["--conf", f"{key}={value}"]
    if jars:
        out += ["--jars", jars]
    return out


def submit_command(job_args: Sequence[str], options: Sequence[str]) -> list[str]:
    """The spark-submit command line for ``jobs/compact.py`` (a cluster's way to run it)."""
    return [str(spark_home() / "bin" / "spark-submit"), *options, str(JOB), *job_args]


def cluster_options(options: Sequence[str]) -> list[str]:
    """``options`` for a spark-submit of ``jobs/compact.py`` on a cluster whose hosts have no Python
    packages: the compaction job's environment as ``--archives`` (``env/bin/python`` for the
    executors' Python workers) and its unpacked copy's Python for the driver."""
    return [
        *options,
        "--archives",
        f"{ENV_ARCHIVE}#{ENV_DIR}",
        "--conf",
        f"spark.pyspark.python=./{ENV_DIR}/bin/python",
        "--conf",
        f"spark.pyspark.driver.python={DRIVER_ENV / 'bin' / 'python'}",
    ]


def run_job(job_args: Sequence[str], options: Sequence[str]) -> int:
    """Run ``jobs/compact.py`` in this process, as ``python jobs/compact.py`` would (no second
    interpreter to start); Spark, when needed, finds its options in the environment."""
    os.environ.update(submit_env(os.environ, options))
    sys.argv = [str(JOB), *job_args]
    try:
        runpy.run_path(str(JOB), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


def submit_env(base: Mapping[str, str], options: Sequence[str] = ()) -> dict[str, str]:
    """The environment the job runs in: this Python for driver and workers, pyspark as SPARK_HOME,
    and ``options`` for PySpark's launcher (``PYSPARK_SUBMIT_ARGS``) when given."""
    env = dict(base)
    if options:
        env["PYSPARK_SUBMIT_ARGS"] = shlex.join([*options, "pyspark-shell"])
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_HOME"] = str(spark_home())
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _compact(args: argparse.Namespace) -> int:
    if not JOB.is_file():
        print(f"lakeflow compact: {JOB} not found: run from a lakeflow checkout (pip install -e .)", file=sys.stderr)
        return 2
    every = schedule(args)
    if args.print_command:
        from lakeflow.spark_cluster import default_master

        options = cluster_options(spark_options(args.master or default_master(), args.spark_conf, args.jars))
        if not ENV_ARCHIVE.is_file():
            print(f"lakeflow compact: {ENV_ARCHIVE} is not built yet: make package", file=sys.stderr)
        print(shlex.join(submit_command(job_argv(args), options)))
        return 0
    options = spark_options(args.master, args.spark_conf, args.jars)
    job_args = job_argv(args)
    export = metrics_export(args)
    if every is not None:
        from lakeflow.compaction.continuous import run_forever
        from lakeflow.compaction.metrics import MetricsPortUnavailable

        if not getattr(args, "verbose", False):  # one line per run; the stages' progress with lakeflow -v
            logging.getLogger().setLevel(logging.WARNING)
        try:
            return run_forever(
                every,
                job_args,
                lambda argv: run_job(argv, options),
                args.report.resolve() if args.report else None,
                export.port,
            )
        except MetricsPortUnavailable as exc:
            print(f"lakeflow compact: {exc}", file=sys.stderr)
            return EXIT_ERROR
    print(
        f"$ {shlex.join([str(JOB), *job_args])}  (Spark if needed: {shlex.join(options)})", file=sys.stderr, flush=True
    )
    if export.textfile is None and export.pushgateway is None:
        return run_job(job_args, options)
    return run_exporting(job_args, options, args.report.resolve() if args.report else None, export)


def run_exporting(job_args: Sequence[str], options: Sequence[str], report: Path | None, export: MetricsExport) -> int:
    """One run, its figures then exported as metrics (:func:`lakeflow.compaction.metrics.export_once`)."""
    import time

    from lakeflow.compaction.metrics import CompactorMetrics, export_once, read_report

    with tempfile.TemporaryDirectory(prefix="lakeflow-compact-") as tmp:
        path = report or Path(tmp) / "report.json"
        started = time.monotonic()
        code = run_job([*job_args, *([] if report else ["--report", str(path)])], options)
        metrics = CompactorMetrics()
        metrics.record(read_report(path), code, time.monotonic() - started)
    try:
        export_once(metrics, export.textfile, export.pushgateway)
    except OSError as exc:  # the run's outcome stands; the export's failure is its own error
        print(f"compact: exporting the run's metrics failed: {exc}", file=sys.stderr)
        return code or EXIT_ERROR
    return code
