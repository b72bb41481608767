"""The compaction job on a real standalone Spark cluster (``lakeflow.runtime.spark_cluster``: a master and
a worker from the pyspark wheel), one cluster for the slow tests: ``lakeflow compact --master
spark://…`` on the embedded catalog; the spark-submit command ``--print-command`` prints, run as it
is (the job's environment ``--archives build/compaction-env.tar.gz``; the daemons have only a bare
Python on PATH) on moto S3 with IAM enforced; an executor JVM killed
mid-task (the ``executor-kill`` chaos scenario, one cycle) — every reading exactly once in the
Iceberg table each time. Fast: what ``--print-command`` prints by default.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import requests

from lakeflow.compaction.launch import ENV_ARCHIVE
from lakeflow.runtime.spark_cluster import SparkCluster
from lakeflow.secret import is_secret_key
from tests.support.envs import bare_venv
from tests.support.fixtures_servers import free_port
from tests.chaos.compaction_faults import DAY, table_keys
from tests.chaos.spark_faults import executor_kill
from tests.support.fixtures_compaction import REPO, make_home, readings, write_parts
from tests.support.lakehouse import LAKEFLOW
from tests.integration.test_compaction_s3 import JOB_FLAGS, Lakehouse, check_compacted, lakehouse  # noqa: F401 (fixture)


SECRET = "tok-spark-cluster-test"


def test_print_command_aims_at_the_spark_up_cluster_with_the_jobs_environment(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    env = {**home.env, "SPARK_MASTER_PORT": "17123", "TOKEN": SECRET}
    printed = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact", "--print-command", "--delete-source"],
                             env=env, cwd=home.home, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    command = shlex.split(printed.stdout)
    assert command[0].endswith("pyspark/bin/spark-submit") and command[1:3] == ["--master", "spark://127.0.0.1:17123"]
    assert command[command.index("--archives") + 1] == f"{REPO / 'build' / 'compaction-env.tar.gz'}#env"
    assert "spark.pyspark.python=./env/bin/python" in command and "spark.ui.enabled=false" in command
    assert f"spark.pyspark.driver.python={REPO / 'build' / 'envs' / 'compaction' / 'bin' / 'python'}" in command
    assert "--py-files" not in command  # lakeflow is inside the environment
    assert command[-2:] == [str(REPO / "jobs" / "compact.py"), "--delete-source"]
    assert SECRET not in printed.stdout + printed.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """One cluster for the module, started from an environment holding a secret variable, its daemons
    with a bare Python (no packages) first on PATH."""
    folder = tmp_path_factory.mktemp("spark-cluster")
    spark = SparkCluster(folder, port=free_port(), cores=2, memory="1g", python=bare_venv(folder),
                         secret_variable=is_secret_key)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOKEN", SECRET)
        spark.start()
    try:
        yield spark
    finally:
        spark.stop()
    assert not spark.running() and not spark.executor_pids()
    assert not spark.tmp_dir.exists()  # the scratch space of daemons and executors: gone with them


def completed_apps(cluster: SparkCluster) -> list[dict]:
    return requests.get(f"{cluster.webui_url}/json/", timeout=10).json()["completedapps"]


@pytest.mark.slow
def test_the_daemons_start_without_the_callers_secrets(cluster: SparkCluster) -> None:
    pids = cluster.daemon_pids()
    assert len(pids) == 2 and cluster.alive_workers() == 1
    for pid in pids:  # the worker's environment is its executors' too
        env = Path(f"/proc/{pid}/environ").read_bytes()
        assert b"SPARK_HOME=" in env and SECRET.encode() not in env
        assert f"SPARK_LOCAL_DIRS={cluster.tmp_dir}".encode() in env.split(b"\0")  # not the machine's /tmp


@pytest.mark.slow
def test_compact_on_the_cluster(cluster: SparkCluster, tmp_path: Path) -> None:
    home = make_home(tmp_path)
    rows = readings("run-a", 1200, start_ms=DAY, step_ms=10_000, seed=1)
    write_parts(home.raw, rows, 20)
    done = home.compact("--engine", "spark", "--master", cluster.master_url, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    keys = table_keys(home)
    assert len(keys) == len(set(keys)) and set(keys) == {(r["run_id"], r["seq"]) for r in rows}
    assert len(completed_apps(cluster)) == 1  # the run's Spark application ran on this cluster
    location = Path(home.iceberg_table("sensor-readings-compacted").location().removeprefix("file://"))
    assert list(location.rglob("*.parquet")) and not list(location.rglob("*.crc"))  # written by the executors' pyarrow


@pytest.mark.slow
def test_the_printed_spark_submit_command_runs_as_it_is_on_s3(cluster: SparkCluster, lakehouse: Lakehouse,
                                                              tmp_path: Path) -> None:
    """The documented route on moto S3 with IAM (tests/integration/test_compaction_s3.py's lakehouse): the
    printed command as it is (no S3A jars: the executors reach S3 through pyarrow); the executors get the
    job's environment and no secret."""
    subprocess.run(["make", "-s", "-C", str(REPO), str(ENV_ARCHIVE.relative_to(REPO))], check=True, timeout=3000)
    report = tmp_path / "report.json"
    printed = subprocess.run([LAKEFLOW, "compact", "--engine", "spark", "--master", cluster.master_url,
                              "--report", str(report), *JOB_FLAGS, "--print-command"],
                             env=lakehouse.env, cwd=lakehouse.home.parent, capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    command = printed.stdout.strip()
    argv = shlex.split(command)
    assert argv[argv.index("--master") + 1] == cluster.master_url
    assert argv[argv.index("--archives") + 1] == f"{ENV_ARCHIVE}#env"
    apps_before = set(cluster.work_dir.glob("app-*"))
    done = subprocess.run(["bash", "-c", command], env=lakehouse.env, cwd=lakehouse.home.parent, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    check_compacted(lakehouse, "spark", report)  # every reading once, each table's credentials its own
    (app,) = set(cluster.work_dir.glob("app-*")) - apps_before
    assert list(app.glob("*/env/bin/python")), "the executor did not get the job's environment"
    executor_files = [p for p in app.rglob("*") if p.is_file() and p.suffix not in (".jar", ".zip", ".gz")
                      and "env" not in p.relative_to(app).parts[1:2]]
    assert any("Running task" in p.read_text(errors="replace") for p in executor_files)
    # the executors' logs start with their launch command: the vended credentials are not there
    lakehouse.assert_no_secret(command + done.stdout + done.stderr
                               + "".join(p.read_text(errors="replace") for p in executor_files))


@pytest.mark.slow
def test_an_executor_killed_mid_task_is_replaced_and_the_run_commits_once(cluster: SparkCluster,
                                                                           tmp_path: Path) -> None:
    # 200 files: the first stage's task runs long enough on a fresh executor for the kill to land
    # in it (with 60 it sometimes finished between its "Running task" log line and the SIGKILL)
    result = executor_kill(tmp_path, kills=1, files=200, per_file=20, cluster=cluster)
    assert result.ok, result.line()
    assert result.counts["kills"] == 1 and result.counts["tasks_rerun"] >= 1
    assert result.counts["rows"] == 4000 * (1 + result.counts["retried_cycles"])  # a retried cycle adds a batch
