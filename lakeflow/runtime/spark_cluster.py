"""A standalone Spark cluster (one master, one worker) from the distribution inside the pyspark wheel.

Both daemons run ``bin/spark-class`` on 127.0.0.1 with everything private to one directory: a
properties file (``conf/``), logs (``log/``), pid files (``pid/``), the worker's executor
directories (``work/``) and the daemons' and executors' scratch space (``tmp/``, SPARK_LOCAL_DIRS:
shuffle and block files; removed at a stop). A pid counts only while ``/proc/<pid>/cmdline`` shows a Spark daemon
started with this directory's properties file, so a stop never touches another cluster nor a
process that took over a stale pid file's number. The daemons — and so the executors the worker
launches — start without the caller's secret variables; a job's storage credentials reach the
executors in the Hadoop configuration its driver sets. Used by ``lakeflow spark up|down|status``
(``make spark-up`` / ``spark-down``) and tests.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests

from lakeflow.runtime.homes import spark_home
from lakeflow.runtime.ports import free_ports
from lakeflow.runtime.processes import all_pids, cmdline, kill_first, parent, stop_all

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
HOST = "127.0.0.1"
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
PROPERTIES = {
    "spark.master.rest.enabled": "false",  # no REST submission server (unauthenticated, fixed port 6066)
    "spark.worker.cleanup.enabled": "true",  # finished applications' executor folders (logs) go
    "spark.worker.cleanup.appDataTtl": "86400",  # after a day
}


class SparkCluster:
    """One master and ``workers`` workers (``cores`` cores each, ``memory`` for their executors) under
    ``home``. Web UIs bind to 127.0.0.1 on ``webui_port`` (master) and free ports (workers); 0: a free
    port. The caller's variables that ``secret_variable`` names stay out of the daemons' environment.
    ``python`` (default this environment's) is first on the daemons' PATH and their PYSPARK_PYTHON:
    a job shipping its environment (``--archives``) does not use it."""

    def __init__(
        self,
        home: Path,
        port: int = 7077,
        webui_port: int = 0,
        cores: int = 2,
        memory: str = "1g",
        workers: int = 1,
        python: Path | None = None,
        *,
        secret_variable: Callable[[str], bool],
    ) -> None:
        self.home = Path(home).resolve()
        self.secret_variable = secret_variable
        self.python = Path(python or sys.executable)
        self.port = port
        self.cores = cores
        self.workers = workers
        self.memory = memory
        self.conf_file = self.home / "conf" / "spark-defaults.conf"
        self.log_dir = self.home / "log"
        self.pid_dir = self.home / "pid"
        self.work_dir = self.home / "work"
        self.tmp_dir = self.home / "tmp"
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
        env = {k: v for k, v in os.environ.items() if not self.secret_variable(k)}
        return {
            **env,
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.conf_file.parent),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOCAL_DIRS": str(self.tmp_dir),
            "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": str(self.python),
            "PATH": f"{self.python.parent}{os.pathsep}{env.get('PATH', '')}",
        }

    def start(self, timeout: float = 90.0) -> None:
        """Start the master and the workers; return once they have registered with the master."""
        for d in (self.conf_file.parent, self.log_dir, self.pid_dir, self.work_dir, self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)
        self.conf_file.write_text("".join(f"{k} {v}\n" for k, v in PROPERTIES.items()))
        webui = self._webui_port or free_ports(1)[0]
        master = self._launch(
            "master", MASTER_CLASS, "--host", HOST, "--port", str(self.port), "--webui-port", str(webui)
        )
        workers = [
            self._launch(
                "worker" if n == 0 else f"worker-{n + 1}",
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
            for n in range(self.workers)
        ]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                log.info("Spark cluster up at %s (web UI %s)", self.master_url, self.webui_url)
                return
            if any(p.poll() is not None for p in (master, *workers)):
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
        ``timeout`` seconds; then remove the pid files and the scratch space (:attr:`tmp_dir`)."""
        stop_all(self.executor_pids() + self.daemon_pids(), lambda pid: bool(cmdline(pid)), timeout)
        for f in self.pid_dir.glob("*.pid") if self.pid_dir.exists() else ():
            f.unlink()
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

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
        """The live daemons of this cluster named by its pid files (``name``: master, or worker for all workers)."""
        pids = []
        for f in sorted(self.pid_dir.glob(f"{name}*.pid")) if self.pid_dir.exists() else []:
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
