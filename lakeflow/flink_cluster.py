"""A standalone Flink cluster from the distribution inside the apache-flink wheel.

Everything private to one directory: its own ``FLINK_CONF_DIR`` (copied from ``pyflink/conf``),
REST on localhost at a chosen port, its own RPC port, pid and log directories — so a stop never
touches another cluster on the machine, nor a process that took over a stale pid file's number
(a pid counts only while ``/proc/<pid>/cmdline`` shows a Flink daemon of this conf dir). The
daemons start without the caller's secret variables (TOKEN, OAUTH_CLIENT_SECRET, …). Used by
``make cluster-up`` / ``cluster-down`` and tests.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import requests
import yaml

from lakeflow.secret import is_secret_key, write_private

log = logging.getLogger(__name__)

# The main classes of the JobManager and TaskManager JVMs the distribution's scripts start.
DAEMON_CLASSES = ("org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
                  "org.apache.flink.runtime.taskexecutor.TaskManagerRunner")
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL (as the distribution's stop scripts wait)


def flink_home() -> Path:
    """The Flink distribution inside the installed apache-flink wheel (``…/pyflink``)."""
    import pyflink

    return Path(pyflink.__file__).resolve().parent


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class FlinkCluster:
    """One JobManager + one TaskManager under ``home`` (conf/, log/, pid/); ``conf`` goes into their
    config.yaml, ``env`` into the environment they start with (e.g. an AWS profile's variables)."""

    def __init__(self, home: Path, rest_port: int = 8081, rpc_port: int = 6123, slots: int = 2,
                 conf: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None) -> None:
        self.home = Path(home).resolve()
        self._env = dict(env or {})
        self.rest_port = rest_port
        self.conf_dir = self.home / "conf"
        self.log_dir = self.home / "log"
        self.pid_dir = self.home / "pid"
        self._conf = {
            "rest.port": rest_port,
            "rest.address": "localhost",
            "rest.bind-address": "localhost",
            "jobmanager.rpc.address": "localhost",
            "jobmanager.rpc.port": rpc_port,
            "jobmanager.bind-host": "localhost",
            "taskmanager.bind-host": "localhost",
            "taskmanager.host": "localhost",
            "taskmanager.numberOfTaskSlots": slots,
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.memory.process.size": "1728m",
            "env.pid.dir": str(self.pid_dir),
            "env.log.dir": str(self.log_dir),
            "python.executable": sys.executable,
            "python.client.executable": sys.executable,
            **dict(conf or {}),
        }

    @property
    def rest_url(self) -> str:
        return f"http://localhost:{self.rest_port}"

    def env(self) -> dict[str, str]:
        """Environment for the ``flink`` CLI aimed at this cluster (the job it submits may need the
        caller's secrets: they stay in)."""
        return self._env_over(os.environ)

    def daemon_env(self) -> dict[str, str]:
        """Environment the daemons start with: :meth:`env` without the caller's secret variables
        (the ``env`` given to the cluster is kept whole)."""
        return self._env_over({k: v for k, v in os.environ.items() if not is_secret_key(k)})

    def _env_over(self, base: Mapping[str, str]) -> dict[str, str]:
        venv_bin = str(Path(sys.executable).parent)
        return {**base, **self._env, "FLINK_CONF_DIR": str(self.conf_dir), "FLINK_LOG_DIR": str(self.log_dir),
                "FLINK_PID_DIR": str(self.pid_dir), "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}"}

    def write_conf(self) -> None:
        """Copy the wheel's conf/ and write our settings into config.yaml (mode 0600: a caller's
        ``conf`` may hold secrets; ``lakeflow ingest cluster-up`` puts none there)."""
        src = flink_home() / "conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.name != "config.yaml":
                shutil.copy(f, self.conf_dir / f.name)
        base = _flatten(yaml.safe_load((src / "config.yaml").read_text()) or {})
        merged = {**base, **self._conf}
        write_private(self.conf_dir / "config.yaml", yaml.safe_dump(
            {k: merged[k] for k in sorted(merged)}, default_flow_style=False, width=10_000))
        for d in (self.log_dir, self.pid_dir):
            d.mkdir(parents=True, exist_ok=True)

    def start(self, timeout: float = 90.0) -> None:
        """Start the JobManager and a TaskManager; return once a TaskManager has registered."""
        self.write_conf()
        self._script("start-cluster.sh")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                overview = requests.get(f"{self.rest_url}/v1/overview", timeout=2).json()
                if overview.get("slots-total", 0) >= 1:
                    log.info("Flink cluster up at %s (%s slots)", self.rest_url, overview.get("slots-total"))
                    return
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"Flink cluster did not come up within {timeout:.0f}s; logs in {self.log_dir}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop this cluster's daemons, and only them: SIGTERM, SIGKILL after ``timeout`` seconds;
        then remove the pid files (a pid in them that is not ours is left alone)."""
        pids = self._pids()
        _signal(pids, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            time.sleep(0.2)
            pids = [pid for pid in pids if self._ours(pid)]
        _signal(pids, signal.SIGKILL)
        for f in self.pid_dir.glob("*.pid") if self.pid_dir.exists() else ():
            f.unlink()

    def taskmanager_pids(self) -> list[int]:
        return self._pids("taskexecutor")

    def kill_taskmanager(self) -> int:
        """SIGKILL the TaskManager (fault injection); returns its pid. See ``start_taskmanager``."""
        pids = self.taskmanager_pids()
        if not pids:
            raise RuntimeError("no TaskManager running")
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]

    def start_taskmanager(self) -> None:
        self._script("taskmanager.sh", "start")

    def flink(self, args: Sequence[str], env: Optional[Mapping[str, str]] = None,
              timeout: Optional[float] = None) -> subprocess.CompletedProcess:
        """Run the ``flink`` CLI against this cluster (output captured)."""
        return subprocess.run([str(flink_home() / "bin" / "flink"), *args], env={**self.env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout)

    def _script(self, name: str, *args: str) -> None:
        proc = subprocess.run([str(flink_home() / "bin" / name), *args], env=self.daemon_env(),
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{name} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")

    def running(self) -> bool:
        return bool(self._pids())

    def _pids(self, kind: str = "") -> list[int]:
        """The live daemons of this cluster named by its pid files (``kind``: e.g. ``taskexecutor``)."""
        pids = []
        for f in sorted(self.pid_dir.glob(f"*{kind}.pid" if kind else "*.pid")) if self.pid_dir.exists() else []:
            pids += [int(word) for word in f.read_text().split() if word.isdigit() and self._ours(int(word))]
        return pids

    def _ours(self, pid: int) -> bool:
        """Whether ``pid`` runs a Flink daemon started with this cluster's conf dir (Linux ``/proc``)."""
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone, or not ours to read
            return False
        return any(c in argv for c in DAEMON_CLASSES) and str(self.conf_dir) in argv


def _signal(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m lakeflow.flink_cluster up|down|status`` (what ``make cluster-up/down`` run)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lakeflow.flink_cluster",
                                     description="A local standalone Flink cluster from the apache-flink wheel.")
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("LAKEFLOW_HOME", ".lakeflow")) / "cluster",
                        help="private directory for conf/, log/, pid/ (default $LAKEFLOW_HOME/cluster)")
    parser.add_argument("--rest-port", type=int, default=int(os.environ.get("FLINK_REST_PORT", "8081")),
                        help="REST/web UI port on localhost (default $FLINK_REST_PORT or 8081)")
    parser.add_argument("--rpc-port", type=int, default=int(os.environ.get("FLINK_RPC_PORT", "6123")),
                        help="JobManager RPC port (default $FLINK_RPC_PORT or 6123)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cluster = FlinkCluster(args.home, rest_port=args.rest_port, rpc_port=args.rpc_port)
    if args.action == "up":
        if cluster.running():
            print(f"already running: {cluster.rest_url}")
            return 0
        cluster.start()
        print(f"Flink cluster up: {cluster.rest_url}  (FLINK_CONF_DIR={cluster.conf_dir}, logs {cluster.log_dir})")
    elif args.action == "down":
        cluster.stop()
        print("Flink cluster stopped")
    else:
        print(f"running at {cluster.rest_url}" if cluster.running() else "not running")
        return 0 if cluster.running() else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
