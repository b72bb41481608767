"""The standalone cluster's processes: stopped only when they are this cluster's own daemons, and
started without the caller's secret variables in their environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from tests.support.fixtures_servers import free_port

SECRET_ENV = {"TOKEN": "static-t0ken-Lq93", "OAUTH_CLIENT_SECRET": "client-s3cret-Mv21",
              "FLINK_API_PASSWORD": "flink-passw0rd-Jd66", "AWS_SECRET_ACCESS_KEY": "aws-s3cret-Wp08"}


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(e.split("=", 1) for e in raw.split("\0") if "=" in e)


def gone(pid: int) -> bool:
    """Exited: no process, or a zombie its new parent has not reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def test_a_stale_pid_file_does_not_get_another_process_killed(tmp_path):
    """The pid in a pid file left by a crashed cluster now belongs to an unrelated process: neither
    `down` nor `status` may take it for the cluster."""
    cluster = FlinkCluster(tmp_path / "cluster", secret_variable=is_secret_key)
    cluster.write_conf()
    other = subprocess.Popen(["sleep", "300"])
    try:
        for kind in ("standalonesession", "taskexecutor"):
            (cluster.pid_dir / f"flink-someone-{kind}.pid").write_text(f"{other.pid}\n")
        assert not cluster.running() and cluster.taskmanager_pids() == []
        down = subprocess.run([sys.executable, "-m", "lakeflow.cli", "flink", "down", "--home", str(cluster.home)],
                              capture_output=True, text=True, timeout=60)
        assert down.returncode == 0, down.stderr
        cluster.stop()
        assert other.poll() is None, "an unrelated process was killed"
    finally:
        other.kill()
        other.wait()


@pytest.mark.slow
def test_daemons_start_without_the_callers_secrets_and_keep_their_temporary_files_home(tmp_path, monkeypatch):
    """… in the cluster's own tmp/ (not the machine's /tmp), which a stop removes, also what a killed
    TaskManager left there (its working directory: the Python environments jobs ship, unpacked)."""
    for key, value in SECRET_ENV.items():
        monkeypatch.setenv(key, value)
    cluster = FlinkCluster(tmp_path / "cluster", rest_port=free_port(), rpc_port=free_port(), slots=1,
                           env={"AWS_PROFILE": "lakeflow.iot.t"}, secret_variable=is_secret_key)
    cluster.start()
    try:
        pids = cluster._pids()
        assert len(pids) == 2 and len(cluster.taskmanager_pids()) == 1
        for pid in pids:
            env = environ(pid)
            assert not set(SECRET_ENV) & set(env), f"pid {pid} inherited {sorted(set(SECRET_ENV) & set(env))}"
            assert env["AWS_PROFILE"] == "lakeflow.iot.t" and env["FLINK_CONF_DIR"] == str(cluster.conf_dir)
        assert "PATH" in env and env["HOME"] == os.environ["HOME"]
        assert [d.name.split(":")[0] for d in cluster.tmp_dir.glob("tm_*")] == ["tm_localhost"]
        cluster.kill_taskmanager()
    finally:
        cluster.stop()
    assert not cluster.running()
    assert all(gone(pid) for pid in pids)
    assert not cluster.tmp_dir.exists()


def test_stop_takes_a_flink_run_not_yet_naming_the_conf_dir_but_never_a_shell_that_exported_it(
        tmp_path: Path) -> None:
    """A ``flink run`` interrupted before its script execs the JVM names the cluster only in its
    environment (``FLINK_CONF_DIR``): stop() ends it; a shell holding the same variable is left alone."""
    from lakeflow.runtime.homes import flink_home

    cluster = FlinkCluster(tmp_path / "cluster", secret_variable=is_secret_key)
    cluster.write_conf()
    env = {**os.environ, "FLINK_CONF_DIR": str(cluster.conf_dir)}
    script = subprocess.Popen(["bash", "-c", "sleep 60; true", str(flink_home() / "bin" / "flink"), "run"], env=env)
    shell = subprocess.Popen(["bash", "-c", "sleep 60; true"], env=env)
    try:
        cluster.stop(timeout=5)
        assert script.wait(timeout=10) == -15
        assert shell.poll() is None
    finally:
        script.kill()
        shell.kill()
