"""A standalone Flink cluster from the distribution inside the apache-flink wheel.

Everything private to one directory: its own ``FLINK_CONF_DIR`` (copied from ``pyflink/conf``),
REST on localhost at a chosen port, its own RPC port, pid and log directories, and its temporary
files (``io.tmp.dirs``: blobs, the TaskManagers' working directories with the Python environments
jobs ship, unpacked; removed at a stop, also a killed TaskManager's) — so a stop never
touches another cluster on the machine, nor a process that took over a stale pid file's number
(a pid counts only while ``/proc/<pid>/cmdline`` shows a Flink daemon of this conf dir). The
daemons start without the caller's secret variables (TOKEN, OAUTH_CLIENT_SECRET, …: those its
``secret_variable`` names, e.g. :func:`lakeflow.secret.is_secret_key`). Opt-in:
Flink's SQL Gateway (:meth:`FlinkCluster.start_sql_gateway`), REST on 127.0.0.1, submitting to
this cluster and stopped with it. Used by ``lakeflow flink up|down`` (``make cluster-up`` /
``cluster-down``) and tests.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import requests
import yaml

from lakeflow.runtime.files import write_private
from lakeflow.runtime.homes import flink_home, ingestion_python
from lakeflow.runtime.processes import all_pids, cmdline, environ, kill_first, stop_all

log = logging.getLogger(__name__)

# The main classes of the JobManager and TaskManager JVMs the distribution's scripts start.
DAEMON_CLASSES = (
    "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
    "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
)
SQL_GATEWAY_CLASS = "org.apache.flink.table.gateway.SqlGateway"
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL (as the distribution's stop scripts wait)
PID_GRACE_S = 15.0  # a daemon whose pid file is still missing this long after its start script is gone


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


# Flink's PythonEnvUtils logs the whole environment of every Python process it starts (`flink run
# -py`, the Python workers) at INFO: secrets a caller exported (OPENLINEAGE_API_KEY for the lineage
# listener, AWS keys …) would land in the logs. Its INFO lines say nothing else a user needs.
QUIET_ENV_DUMP = """
# lakeflow: PythonEnvUtils logs Python processes' whole environment (secrets included) at INFO
logger.lakeflow_python_env.name = org.apache.flink.client.python.PythonEnvUtils
logger.lakeflow_python_env.level = WARN
"""


PROMETHEUS_PLUGIN = "metrics-prometheus"  # the wheel's plugins/ folder holding flink-metrics-prometheus
PROMETHEUS_PORTS = 8  # the reporter's port range: the JobManager and up to 7 TaskManagers on one host


def prometheus_reporter(port: int) -> dict[str, str]:
    """config.yaml lines for Flink's Prometheus reporter (``flink-metrics-prometheus`` of the wheel's own
    Flink, in its ``plugins/metrics-prometheus/``): every process serves ``/metrics`` on the first
    free port of PORT … PORT+7 (the JobManager first), on every interface."""
    plugin = flink_home() / "plugins" / PROMETHEUS_PLUGIN
    if not any(plugin.glob("flink-metrics-prometheus-*.jar")):
        raise FileNotFoundError(f"{plugin}/flink-metrics-prometheus-*.jar not found: the apache-flink wheel ships it")
    return {
        "metrics.reporter.prom.factory.class": "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
        "metrics.reporter.prom.port": f"{port}-{port + PROMETHEUS_PORTS - 1}",
    }


class FlinkCluster:
    """One JobManager + one TaskManager under ``home`` (conf/, log/, pid/, tmp/); ``conf`` goes into their
    config.yaml, ``env`` into the environment they start with (e.g. an AWS profile's variables); the
    caller's variables that ``secret_variable`` names stay out of the daemons' environment.
    ``python`` (default the ingestion job's environment's) is first on their PATH and the default
    Python of jobs (``python.executable``); a job shipping its environment (``-pyarch``) does not use it."""

    def __init__(
        self,
        home: Path,
        rest_port: int = 8081,
        rpc_port: int = 6123,
        slots: int = 2,
        conf: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        lib_jars: Sequence[Path] = (),
        python: Path | None = None,
        *,
        secret_variable: Callable[[str], bool],
    ) -> None:
        self.home = Path(home).resolve()
        self.secret_variable = secret_variable
        self.python = Path(python or ingestion_python())
        self._env = dict(env or {})
        self.lib_jars = tuple(Path(j).resolve() for j in lib_jars)  # on every JVM's classpath (lib/)
        self.rest_port = rest_port
        self.conf_dir = self.home / "conf"
        self.log_dir = self.home / "log"
        self.pid_dir = self.home / "pid"
        self.tmp_dir = self.home / "tmp"
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
            "io.tmp.dirs": str(self.tmp_dir),
            "python.executable": str(self.python),
            "python.client.executable": str(self.python),
            **dict(conf or {}),
        }

    @property
    def rest_url(self) -> str:
        return f"http://localhost:{self.rest_port}"

    @property
    def sql_gateway_dir(self) -> Path:
        return self.home / "sql-gateway"

    def env(self) -> dict[str, str]:
        """Environment for the ``flink`` CLI aimed at this cluster (the job it submits may need the
        caller's secrets: they stay in)."""
        return self._env_over(os.environ)

    def daemon_env(self) -> dict[str, str]:
        """Environment the daemons start with: :meth:`env` without the caller's secret variables
        (the ``env`` given to the cluster is kept whole)."""
        return self._env_over({k: v for k, v in os.environ.items() if not self.secret_variable(k)})

    def _env_over(self, base: Mapping[str, str]) -> dict[str, str]:
        venv_bin = str(self.python.parent)
        lib = {"FLINK_LIB_DIR": str(self.lib_dir)} if self.lib_jars else {}
        return {
            **base,
            **self._env,
            "FLINK_CONF_DIR": str(self.conf_dir),
            "FLINK_LOG_DIR": str(self.log_dir),
            "FLINK_PID_DIR": str(self.pid_dir),
            "PATH": f"{venv_bin}:{os.environ.get('PATH', '')}",
            **lib,
        }

    @property
    def lib_dir(self) -> Path:
        """With ``lib_jars``: the daemons' and the CLI's ``FLINK_LIB_DIR``, the wheel's ``lib/`` jars
        and those (symbolic links). A listener named in ``conf`` (e.g. lakeflow's native-lineage
        ``JobStatusChangedListener``) must be loadable by every job, also one not shipping its jar."""
        return self.home / "lib"

    def write_conf(self) -> None:
        """Copy the wheel's conf/ (its log4j files told :data:`QUIET_ENV_DUMP`) and write our settings
        into config.yaml (mode 0600: a caller's ``conf`` may hold secrets; ``lakeflow flink up`` puts
        none there)."""
        src = flink_home() / "conf"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for f in src.iterdir():
            if f.name != "config.yaml":
                shutil.copy(f, self.conf_dir / f.name)
            if f.name.startswith("log4j") and f.name.endswith(".properties"):
                with open(self.conf_dir / f.name, "a") as props:
                    props.write(QUIET_ENV_DUMP)
        base = _flatten(yaml.safe_load((src / "config.yaml").read_text()) or {})
        merged = {**base, **self._conf}
        write_private(
            self.conf_dir / "config.yaml",
            yaml.safe_dump({k: merged[k] for k in sorted(merged)}, default_flow_style=False, width=10_000),
        )
        for d in (self.log_dir, self.pid_dir, self.tmp_dir):
            d.mkdir(parents=True, exist_ok=True)
        if self.lib_jars:
            shutil.rmtree(self.lib_dir, ignore_errors=True)
            self.lib_dir.mkdir(parents=True)
            for jar in [*sorted((flink_home() / "lib").glob("*.jar")), *self.lib_jars]:
                (self.lib_dir / jar.name).symlink_to(jar)

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

    def stop(self, timeout: float = STOP_TIMEOUT_S, kind: str = "") -> None:
        """Stop this cluster's daemons (its SQL Gateway included), and only them: SIGTERM, SIGKILL
        after ``timeout`` seconds; then remove the pid files (a pid in them that is not ours is left
        alone). ``kind`` stops one kind only (``sql-gateway``, ``taskexecutor``). Without ``kind``,
        also any other process naming this cluster's private conf dir (a daemon still starting, a
        script's helper JVM), and then the temporary files (:attr:`tmp_dir`)."""
        pids = self._pids(kind)
        if not kind:
            pids += [pid for pid in self._stragglers() if pid not in pids]
        stop_all(pids, lambda pid: self._ours(pid) or pid in self._stragglers(), timeout)
        for f in self.pid_dir.glob(f"*{kind}.pid") if self.pid_dir.exists() else ():
            f.unlink()
        if not kind:  # every daemon got SIGTERM, then SIGKILL
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def start_sql_gateway(
        self, port: int, conf: Mapping[str, Any] | None = None, jars: Sequence[Path] = (), timeout: float = 90.0
    ) -> str:
        """Start Flink's SQL Gateway for this running cluster (the wheel's ``bin/sql-gateway.sh``);
        return its REST URL, ``http://127.0.0.1:<port>``, once it answers.

        Its jar (:func:`lakeflow.runtime.jars.sql_gateway_jar`, fetched if need be) and any ``jars`` (e.g. a
        catalog's) go on the gateway's classpath only, through its own ``opt/`` and ``lib/`` folders
        under :attr:`sql_gateway_dir`; ``conf`` (e.g. ``table.catalog-store.*``) is added to a copy of
        the cluster's configuration, which also tells it where to submit jobs."""
        from lakeflow.runtime.jars import sql_gateway_jar

        gateway_jar = sql_gateway_jar()
        home, wheel = self.sql_gateway_dir, flink_home()
        opt, lib, conf_dir = home / "opt", home / "lib", home / "conf"
        for folder, links in (
            (opt, [gateway_jar, *wheel.glob("opt/flink-python-*.jar")]),
            (lib, [*wheel.glob("lib/*.jar"), *jars] if jars else []),
        ):
            shutil.rmtree(folder, ignore_errors=True)
            for jar in links:
                folder.mkdir(parents=True, exist_ok=True)
                (folder / Path(jar).name).symlink_to(Path(jar).resolve())
        shutil.copytree(self.conf_dir, conf_dir, dirs_exist_ok=True)
        settings = {
            **yaml.safe_load((self.conf_dir / "config.yaml").read_text()),
            "sql-gateway.endpoint.rest.address": "127.0.0.1",
            "sql-gateway.endpoint.rest.bind-address": "127.0.0.1",
            "sql-gateway.endpoint.rest.port": port,
            **dict(conf or {}),
        }
        write_private(
            conf_dir / "config.yaml",
            yaml.safe_dump({k: settings[k] for k in sorted(settings)}, default_flow_style=False, width=10_000),
        )
        env = {
            "FLINK_CONF_DIR": str(conf_dir),
            "FLINK_OPT_DIR": str(opt),
            **({"FLINK_LIB_DIR": str(lib)} if jars else {}),
        }
        self._script("sql-gateway.sh", "start", env=env)
        url = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/v1/info", timeout=2).ok:
                    log.info("SQL Gateway up at %s", url)
                    return url
            except requests.RequestException:
                pass
            if not self._pids("sql-gateway") and time.monotonic() - started > PID_GRACE_S:
                break  # its pid file may appear a moment after the script returns; then it died
            time.sleep(0.5)
        self.stop(kind="sql-gateway")
        raise TimeoutError(f"the SQL Gateway did not come up within {timeout:.0f}s; logs in {self.log_dir}")

    def sql_gateway_running(self) -> bool:
        return bool(self._pids("sql-gateway"))

    def taskmanager_pids(self) -> list[int]:
        return self._pids("taskexecutor")

    def jobmanager_pids(self) -> list[int]:
        return self._pids("standalonesession")

    def kill_taskmanager(self) -> int:
        """SIGKILL the TaskManager (fault injection); returns its pid. See ``start_taskmanager``."""
        return kill_first(self.taskmanager_pids(), "TaskManager")

    def start_taskmanager(self) -> None:
        self._script("taskmanager.sh", "start")

    def flink(
        self, args: Sequence[str], env: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        """Run the ``flink`` CLI against this cluster (output captured)."""
        return subprocess.run(
            [str(flink_home() / "bin" / "flink"), *args],
            env={**self.env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _script(self, name: str, *args: str, env: Mapping[str, str] | None = None) -> None:
        proc = subprocess.run(
            [str(flink_home() / "bin" / name), *args],
            env={**self.daemon_env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )
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

    def _stragglers(self) -> list[int]:
        """Processes other than this one whose command line names this cluster's conf dir, and the
        wheel's ``bin/flink`` scripts whose environment sets it as ``FLINK_CONF_DIR`` (a ``flink run``
        not yet exec'ing its JVM; never, say, a shell that exported it)."""
        confs = (str(self.conf_dir), str(self.sql_gateway_dir / "conf"))
        settings = {f"FLINK_CONF_DIR={conf}".encode() for conf in confs}
        script = str(flink_home() / "bin" / "flink")
        out = []
        for pid in all_pids():
            argv = cmdline(pid)
            if pid != os.getpid() and (
                any(a.endswith(conf) or f"{conf}/" in a for a in argv for conf in confs)
                or (script in argv and not settings.isdisjoint(environ(pid)))
            ):
                out.append(pid)
        return out

    def _ours(self, pid: int) -> bool:
        """Whether ``pid`` runs a Flink daemon started with this cluster's conf dir (Linux ``/proc``)."""
        argv = cmdline(pid)
        if SQL_GATEWAY_CLASS in argv:  # started without --configDir: its log4j setting names its conf dir
            return f"-Dlog4j.configurationFile=file:{self.sql_gateway_dir / 'conf'}/log4j.properties" in argv
        return any(c in argv for c in DAEMON_CLASSES) and str(self.conf_dir) in argv
