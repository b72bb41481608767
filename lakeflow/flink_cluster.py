"""A standalone Flink cluster from the distribution inside the apache-flink wheel.

Everything private to one directory: its own ``FLINK_CONF_DIR`` (copied from ``pyflink/conf``),
REST on localhost at a chosen port, its own RPC port, pid and log directories — so a stop never
touches another cluster on the machine. Used by ``make cluster-up`` / ``cluster-down`` and tests.
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

log = logging.getLogger(__name__)


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
        """Environment for the distribution's scripts and ``flink`` CLI aimed at this cluster."""
        venv_bin = str(Path(sys.executable).parent)
        return {**os.environ, **self._env, "FLINK_CONF_DIR": str(self.conf_dir), "FLINK_LOG_DIR": str(self.log_dir),
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
        path = self.conf_dir / "config.yaml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump({k: merged[k] for k in sorted(merged)}, f, default_flow_style=False, width=10_000)
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

    def stop(self) -> None:
        """Stop this cluster's processes (and only them)."""
        if self.conf_dir.exists():
            self._script("stop-cluster.sh", check=False)
        for pid in self._pids():  # whatever the scripts left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

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

    def _script(self, name: str, *args: str, check: bool = True) -> None:
        proc = subprocess.run([str(flink_home() / "bin" / name), *args], env=self.env(),
                              capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{name} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")

    def running(self) -> bool:
        return bool(self._pids())

    def _pids(self, kind: str = "") -> list[int]:
        pids = []
        for f in sorted(self.pid_dir.glob(f"*{kind}.pid" if kind else "*.pid")) if self.pid_dir.exists() else []:
            for line in f.read_text().split():
                if line.strip().isdigit() and _alive(int(line)):
                    pids.append(int(line))
        return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
