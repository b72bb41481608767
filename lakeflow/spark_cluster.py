"""A standalone Spark cluster (one master, one worker) from the distribution inside the pyspark wheel.

Both daemons run ``bin/spark-class`` on 127.0.0.1 with everything private to one directory: a
properties file (``conf/``), logs (``log/``), pid files (``pid/``) and the worker's executor
directories (``work/``). A pid counts only while ``/proc/<pid>/cmdline`` shows a Spark daemon
started with this directory's properties file, so a stop never touches another cluster nor a
process that took over a stale pid file's number. The daemons — and so the executors the worker
launches — start without the caller's secret variables; a job's storage credentials reach the
executors in the Hadoop configuration its driver sets. Used by ``make spark-up`` / ``spark-down``
and tests.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import requests

from lakeflow.http import free_ports
from lakeflow.runtime.homes import spark_home
from lakeflow.runtime.processes import all_pids, cmdline, kill_first, parent, stop_all
from lakeflow.secret import is_secret_key
from lakeflow.settings.core import LocalState
from lakeflow.settings.env import load_only
from lakeflow.settings.process import ProcessEnvironment

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
HOST = "127.0.0.1"
SPARK_UP_VARIABLES = ("SPARK_MASTER_PORT", "SPARK_MASTER_WEBUI_PORT", "SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY")
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
PROPERTIES = {
    "spark.master.rest.enabled": "false",  # no REST submission server (unauthenticated, fixed port 6066)
    "spark.worker.cleanup.enabled": "true",  # finished applications' executor folders (logs) go
    "spark.worker.cleanup.appDataTtl": "86400",  # after a day
}


def default_master() -> str:
    """The master of ``make spark-up``: ``spark://127.0.0.1:$SPARK_MASTER_PORT`` (default 7077)."""
    port = load_only(ProcessEnvironment, ["SPARK_MASTER_PORT"], "process settings").spark_master_port
    return f"spark://{HOST}:{port}"


class SparkCluster:
    """One master and one worker (``cores`` cores, ``memory`` for its executors) under ``home``.
    Web UIs bind to 127.0.0.1 on ``webui_port`` (master) and a free port (worker); 0: a free port.
    ``python`` (default this environment's) is first on the daemons' PATH and their PYSPARK_PYTHON:
    a job shipping its environment (``--archives``) does not use it."""

    def __init__(
        self,
        home: Path,
        port: int = 7077,
        webui_port: int = 0,
        cores: int = 2,
        memory: str = "1g",
        python: Path | None = None,
    ) -> None:
        self.home = Path(home).resolve()
        self.python = Path(python or sys.executable)
        self.port = port
        self.cores = cores
        self.memory = memory
        self.conf_file = self.home / "conf" / "spark-defaults.conf"
        self.log_dir = self.home / "log"
        self.pid_dir = self.home / "pid"
        self.work_dir = self.home / "work"
        self._webui_port = webui_port

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``: the port the running master was given, else the configured one."""
        return f"spark://{HOST}:{self._daemon_arg(MASTER_CLASS, '--port') or self.port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI (its JSON state at ``/json/``): the port the running master was given."""
        return f"http://{HOST}:{self._daemon_arg(MASTER_CLASS, '--webui-port') or self._webui_port}"

    def daemon_env(self) -> dict[str, str]:
        """The daemons' environment: the caller's without its secret variables, Spark bound to
        127.0.0.1, :attr:`python` for PySpark, the daemons' heaps bounded."""
        env = {k: v for k, v in os.environ.items() if not is_secret_key(k)}
        return {
            **env,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.conf_file.parent),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": str(self.python),
            "PATH": f"{self.python.parent}{os.pathsep}{env.get('PATH', '')}",
        }

    def start(self, timeout: float = 90.0) -> None:
        """Start the master and the worker; return once the worker has registered with the master."""
        for d in (self.conf_file.parent, self.log_dir, self.pid_dir, self.work_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.conf_file.write_text("".join(f"{k} {v}\n" for k, v in PROPERTIES.items()))
        webui = self._webui_port or free_ports(1)[0]
        master = self._launch(
            "master", MASTER_CLASS, "--host", HOST, "--port", str(self.port), "--webui-port", str(webui)
        )
        worker = self._launch(
            "worker",
            WORKER_CLASS,
            "--host",
            HOST,
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(free_ports(1)[0]),
            "--work-dir",
            str(self.work_dir),
            self.master_url,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= 1:
                log.info("Spark cluster up at %s (web UI %s)", self.master_url, self.webui_url)
                return
            if master.poll() is not None or worker.poll() is not None:
                break  # a daemon died (a port taken?): its log says why
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"Spark cluster did not come up within {timeout:.0f}s; logs in {self.log_dir}")

    def alive_workers(self) -> int:
        """Workers the master counts alive (its web UI's JSON); 0 when it does not answer."""
        try:
            return int(requests.get(f"{self.webui_url}/json/", timeout=2).json().get("aliveworkers", 0))
        except (requests.RequestException, ValueError):
            return 0

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop this cluster's executors, worker and master, and only them: SIGTERM, SIGKILL after
        ``timeout`` seconds; then remove the pid files."""
        stop_all(self.executor_pids() + self.daemon_pids(), lambda pid: bool(cmdline(pid)), timeout)
        for f in self.pid_dir.glob("*.pid") if self.pid_dir.exists() else ():
            f.unlink()

    def running(self) -> bool:
        return bool(self.daemon_pids())

    def executor_pids(self) -> list[int]:
        """The executor JVMs this cluster's worker has launched (children of its process)."""
        workers = set(self.daemon_pids("worker"))
        return [pid for pid in all_pids() if parent(pid) in workers and EXECUTOR_CLASS in cmdline(pid)]

    def kill_executor(self) -> int:
        """SIGKILL an executor JVM (fault injection); returns its pid."""
        return kill_first(self.executor_pids(), "executor")

    def _launch(self, name: str, main_class: str, *args: str) -> subprocess.Popen:
        if self.daemon_pids(name):
            raise RuntimeError(f"the {name} of {self.home} is already running")
        cmd = [str(spark_home() / "bin" / "spark-class"), main_class, *args, "--properties-file", str(self.conf_file)]
        with open(self.log_dir / f"{name}.out", "ab") as out:  # spark-class execs the JVM: same pid
            proc = subprocess.Popen(
                cmd,
                env=self.daemon_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        (self.pid_dir / f"{name}.pid").write_text(f"{proc.pid}\n")
        return proc

    def daemon_pids(self, name: str = "") -> list[int]:
        """The live daemons of this cluster named by its pid files (``name``: master or worker)."""
        pids = []
        for f in sorted(self.pid_dir.glob(f"{name or '*'}.pid")) if self.pid_dir.exists() else []:
            pids += [int(word) for word in f.read_text().split() if word.isdigit() and self._ours(int(word))]
        return pids

    def _ours(self, pid: int) -> bool:
        """Whether ``pid`` runs a Spark daemon started with this cluster's properties file."""
        argv = cmdline(pid)
        return (MASTER_CLASS in argv or WORKER_CLASS in argv) and str(self.conf_file) in argv

    def _daemon_arg(self, main_class: str, option: str) -> str | None:
        """The value of ``option`` on the command line of this cluster's running ``main_class``."""
        for pid in self.daemon_pids():
            argv = cmdline(pid)
            if main_class in argv and option in argv[:-1]:
                return argv[argv.index(option) + 1]
        return None


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
            help="private directory for conf/, log/, pid/, work/ (default $LAKEFLOW_HOME/spark-cluster)",
        )
        p.set_defaults(handler=_spark)


def _spark(args: argparse.Namespace) -> int:
    home = args.home or load_only(LocalState, ["LAKEFLOW_HOME"], "settings").home / "spark-cluster"
    if args.spark_command == "up":
        env = load_only(ProcessEnvironment, SPARK_UP_VARIABLES, "process settings")
        cluster = SparkCluster(
            home,
            port=env.spark_master_port if args.port is None else args.port,
            webui_port=env.spark_master_webui_port if args.webui_port is None else args.webui_port,
            cores=env.spark_worker_cores if args.cores is None else args.cores,
            memory=env.spark_worker_memory if args.memory is None else args.memory,
        )
        if cluster.running():
            print(f"already running: {cluster.master_url}")
            return 0
        cluster.start()
        print(f"Spark cluster up: {cluster.master_url}  (web UI {cluster.webui_url}, logs {cluster.log_dir})")
        print(f"Next: lakeflow compact --engine spark --master {cluster.master_url}   (make spark-down to stop it)")
        return 0
    cluster = SparkCluster(home)
    if args.spark_command == "down":
        cluster.stop()
        print("Spark cluster stopped")
        return 0
    print(f"running at {cluster.master_url} (web UI {cluster.webui_url})" if cluster.running() else "not running")
    return 0 if cluster.running() else 1
