"""``lakeflow spark up|down|status``: the local standalone Spark cluster (``make spark-up`` /
``spark-down``) of :mod:`lakeflow.runtime.spark_cluster`, its ports and sizes from flags over
``SPARK_*`` variables."""

from __future__ import annotations

import argparse
from pathlib import Path

SPARK_UP_VARIABLES = ("SPARK_MASTER_PORT", "SPARK_MASTER_WEBUI_PORT", "SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``lakeflow spark up|down|status`` (what ``make spark-up/spark-down`` run)."""
    spark = subparsers.add_parser(
        "spark",
        help="a local standalone Spark cluster (make spark-up / spark-down)",
        description="A local standalone Spark cluster (master + one worker) from the "
        "pyspark wheel, on 127.0.0.1, for lakeflow compact --master.",
    )
    sub = spark.add_subparsers(dest="spark_command", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="start the master and one worker")
    up.add_argument(
        "--port",
        type=int,
        help="the master's port (default $SPARK_MASTER_PORT or 7077)",
    )
    up.add_argument(
        "--webui-port",
        type=int,
        help="the master's web UI port on 127.0.0.1 (default $SPARK_MASTER_WEBUI_PORT; 0: a free one)",
    )
    up.add_argument(
        "--cores",
        type=int,
        help="the worker's cores (default $SPARK_WORKER_CORES or 2)",
    )
    up.add_argument(
        "--memory",
        help="the worker's memory for executors (default $SPARK_WORKER_MEMORY or 1g)",
    )
    for p in (
        up,
        sub.add_parser("down", help="stop the cluster"),
        sub.add_parser("status", help="whether the cluster runs; exit 1 if not"),
    ):
        p.add_argument(
            "--home",
            type=Path,
            help="private directory for conf/, log/, pid/, work/, tmp/ (default $LAKEFLOW_HOME/spark-cluster)",
        )
        p.set_defaults(handler=_spark)


def default_master() -> str:
    """The master of ``make spark-up``: ``spark://127.0.0.1:$SPARK_MASTER_PORT`` (default 7077)."""
    from lakeflow.runtime.spark_cluster import HOST
    from lakeflow.settings.env import load_only
    from lakeflow.settings.process import ProcessEnvironment

    port = load_only(ProcessEnvironment, ["SPARK_MASTER_PORT"], "process settings").spark_master_port
    return f"spark://{HOST}:{port}"


def _spark(args: argparse.Namespace) -> int:
    from lakeflow.runtime.spark_cluster import SparkCluster
    from lakeflow.secret import is_secret_key
    from lakeflow.settings.core import LocalState
    from lakeflow.settings.env import load_only
    from lakeflow.settings.process import ProcessEnvironment

    home = args.home or load_only(LocalState, ["LAKEFLOW_HOME"], "settings").home / "spark-cluster"
    if args.spark_command == "up":
        env = load_only(ProcessEnvironment, SPARK_UP_VARIABLES, "process settings")
        cluster = SparkCluster(
            home,
            port=env.spark_master_port if args.port is None else args.port,
            webui_port=env.spark_master_webui_port if args.webui_port is None else args.webui_port,
            cores=env.spark_worker_cores if args.cores is None else args.cores,
            memory=env.spark_worker_memory if args.memory is None else args.memory,
            secret_variable=is_secret_key,
        )
        if cluster.running():
            print(f"already running: {cluster.master_url}")
            return 0
        cluster.start()
        print(f"Spark cluster up: {cluster.master_url}  (web UI {cluster.webui_url}, logs {cluster.log_dir})")
        print(f"Next: lakeflow compact --engine spark --master {cluster.master_url}   (make spark-down to stop it)")
        return 0
    cluster = SparkCluster(home, secret_variable=is_secret_key)
    if args.spark_command == "down":
        cluster.stop()
        print("Spark cluster stopped")
        return 0
    print(f"running at {cluster.master_url} (web UI {cluster.webui_url})" if cluster.running() else "not running")
    return 0 if cluster.running() else 1
