"""Each job ships with its own Python environment (docs/environments.md, issue #24).

Fast: the three lock files (envs/{ingestion,compaction,dev}/requirements.txt) pin every package
with hashes; the ingestion one pins apache-flink 2.3 and the pyarrow it forces (< 17), the
compaction one pyspark 4 and pyarrow >= 18; the installed environments hold exactly those
versions; a driver given a cluster master compacts with ``spark``, one on one machine keeps
``auto``; a bare Python (the clusters' below) has none of the jobs' packages.

Slow, as a cluster runs them: a Flink and a Spark cluster whose daemons have only a bare Python 3.11
venv first on PATH; the ``flink run`` of ``make package`` and the ``spark-submit`` of ``lakeflow
compact --print-command``, run as printed with that bare Python on PATH, deliver every reading
once into the Iceberg table (engine ``spark``: the executors did the work), and the executors'
Python is the shipped environment's, on pyarrow >= 18.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from lakeflow.compaction.config import CompactOptions, load_config
from lakeflow.compaction.engine import engine_for, submitted_master
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.runtime.spark_cluster import SparkCluster
from lakeflow.secret import is_secret_key
from tests.support.envs import INGEST_PY, bare_venv
from tests.support.fixtures_compaction import make_home
from tests.support.fixtures_servers import free_port

REPO = Path(__file__).resolve().parents[2]
LOCKS = {job: REPO / "envs" / job / "requirements.txt" for job in ("ingestion", "compaction", "dev")}
JOB_PACKAGES = ("lakeflow", "pyflink", "pyarrow", "pyspark")


def pins(job: str) -> dict[str, str]:
    """name → version of every requirement of ``job``'s lock file."""
    return {m.group(1).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", LOCKS[job].read_text(), re.MULTILINE)}


def major(version: str) -> int:
    return int(version.split(".")[0])


def test_every_lock_pins_each_package_with_its_hashes() -> None:
    for job, path in LOCKS.items():
        requirements = [line for line in path.read_text().splitlines() if line and not line.startswith((" ", "#"))]
        assert len(requirements) == len(pins(job)) > 10, job  # each one is name==version
        for block in re.split(r"\n(?=\S)", path.read_text().strip()):
            assert re.search(r"--hash=sha256:[0-9a-f]{64}", block), (job, block[:80])


def test_the_ingestion_lock_has_flinks_arrow_the_compaction_lock_the_new_one() -> None:
    ingestion, compaction, dev = pins("ingestion"), pins("compaction"), pins("dev")
    assert ingestion["apache-flink"].startswith("2.3.") and major(ingestion["pyarrow"]) < 17
    assert "pyspark" not in ingestion and "duckdb" not in ingestion
    assert major(compaction["pyspark"]) == 4 and major(compaction["pyarrow"]) >= 18
    assert compaction["pyiceberg"] == ingestion["pyiceberg"] == "0.12.0" and "duckdb" in compaction
    assert "apache-flink" not in compaction and "apache-beam" not in compaction
    assert {name: dev[name] for name in compaction} == compaction  # .venv = the compaction env + test tools
    assert {"pytest", "moto", "ruff", "mypy"} <= dev.keys()


def test_the_environments_hold_what_their_locks_pin() -> None:
    import pyarrow
    import pyspark

    assert (pyarrow.__version__, pyspark.__version__) == (pins("dev")["pyarrow"], pins("dev")["pyspark"])
    assert importlib.util.find_spec("pyflink") is None  # this run's environment is the compaction job's
    probe = subprocess.run([INGEST_PY, "-c", "import importlib.metadata as m, importlib.util as u, pyarrow, lakeflow; "
                            "print(pyarrow.__version__, m.version('apache-flink'), u.find_spec('pyspark') is None)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [pins("ingestion")["pyarrow"], pins("ingestion")["apache-flink"], "True"]


@pytest.mark.parametrize("master, engine", [
    ("spark://127.0.0.1:7077", "spark"), ("yarn", "spark"), ("k8s://https://10.0.0.1:6443", "spark"),
    ("mesos://10.0.0.1:5050", "spark"), ("local[2]", "auto"), ("local", "auto"), (None, "auto"),
])
def test_auto_on_a_cluster_master_is_spark(master: str | None, engine: str) -> None:
    assert engine_for("auto", master) == engine


def test_an_engine_asked_for_stays_on_a_cluster() -> None:
    assert engine_for("arrow", "spark://127.0.0.1:7077") == "arrow"
    assert engine_for("spark", "local[2]") == "spark"


def test_the_master_comes_from_pysparks_launcher_arguments() -> None:
    assert submitted_master({"PYSPARK_SUBMIT_ARGS": "--master spark://h:7077 --conf a=b pyspark-shell"}) \
        == "spark://h:7077"
    assert submitted_master({"PYSPARK_SUBMIT_ARGS": "--conf a=b pyspark-shell"}) is None
    assert submitted_master({}) is None


def test_the_run_config_compacts_with_spark_on_a_cluster_and_auto_on_one_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = make_home(tmp_path)
    for key in os.environ:
        if key not in home.env:
            monkeypatch.delenv(key)
    for key, value in home.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master spark://127.0.0.1:7077 pyspark-shell")
    assert load_config().engine == "spark"
    assert load_config(CompactOptions(engine="arrow")).engine == "arrow"
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master local[2] pyspark-shell")  # lakeflow compact's default
    assert load_config().engine == "auto"


# --- as a cluster runs them -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python 3.11 venv without packages (what a cluster host has)."""
    return bare_venv(tmp_path_factory.mktemp("bare"))


def bare_env(bare_python: Path, **extra: str) -> dict[str, str]:
    """The caller's environment with ``bare_python`` first on PATH and no way to lakeflow's
    environments (no virtualenv bin on PATH, no PYTHONPATH) nor to a catalog of the caller's."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if not d.startswith(str(REPO))]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")
           and not k.startswith(("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "OAUTH_", "COMPACT_", "LAKEFLOW_"))}
    return {**env, "PATH": os.pathsep.join([str(bare_python.parent), *path]), **extra}


def test_the_bare_python_has_none_of_the_jobs_packages(bare_python: Path, tmp_path: Path) -> None:
    for module in JOB_PACKAGES:
        proc = subprocess.run(["python", "-c", f"import {module}"], env=bare_env(bare_python), cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and f"No module named '{module}'" in proc.stderr, (module, proc.stderr)


@pytest.fixture(scope="module")
def packaged() -> None:
    """``make package``'s files: the helpers jar and both jobs' environment archives."""
    subprocess.run(["make", "-s", "build/lakeflow-flink.jar", "build/ingestion-env.tar.gz",
                    "build/compaction-env.tar.gz"], cwd=REPO, check=True, capture_output=True, timeout=3000)


@pytest.fixture(scope="module")
def clusters(bare_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FlinkCluster,
                                                                                            SparkCluster]]:
    """LAKEFLOW_HOME with the Flink cluster of ``lakeflow flink up`` (its cluster/) and a Spark one,
    their daemons started with only the bare Python first on PATH."""
    home = tmp_path_factory.mktemp("shipped") / "lakeflow-home"
    flink = FlinkCluster(home / "cluster", rest_port=free_port(), rpc_port=free_port(), python=bare_python,
                         secret_variable=is_secret_key)
    spark = SparkCluster(home / "spark-cluster", port=free_port(), cores=2, memory="1g", python=bare_python,
                         secret_variable=is_secret_key)
    with pytest.MonkeyPatch.context() as mp:
        for key in ("PYTHONPATH", "VIRTUAL_ENV"):
            mp.delenv(key, raising=False)
        mp.setenv("PATH", bare_env(bare_python)["PATH"])
        flink.start()
        try:
            spark.start()
        except BaseException:
            flink.stop()
            raise
    try:
        yield home, flink, spark
    finally:
        flink.stop()
        spark.stop()


def daemon_path(pid: int) -> str:
    env = dict(item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item)
    return env[b"PATH"].decode()


@pytest.mark.slow
def test_the_printed_commands_deliver_every_reading_once_on_bare_clusters(
        packaged: None, clusters: tuple[Path, FlinkCluster, SparkCluster], bare_python: Path, tmp_path: Path) -> None:
    home, flink, spark = clusters
    for pid in [*flink._pids(), *spark.daemon_pids()]:
        assert daemon_path(pid).split(os.pathsep)[0] == str(bare_python.parent)
    settings = {"LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": "/dev/null"}
    printed = subprocess.run([str(Path(sys.executable).parent / "lakeflow"), "flink-command"], env={**os.environ, **settings},
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert f"FLINK_CONF_DIR={flink.conf_dir} " in printed.stdout and "-pyarch" in printed.stdout
    records = 400
    ingest = subprocess.run(["bash", "-c", printed.stdout], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                            env=bare_env(bare_python, **settings, NUM_RECORDS=str(records), NUM_SENSORS="4",
                                         BATCH_SIZE="100", BATCH_INTERVAL_MS="300"))
    assert ingest.returncode == 0, (ingest.stdout + ingest.stderr)[-3000:]
    raw = home / "warehouse" / "iot" / "sensor-readings"
    written = [r for f in raw.rglob("part-*.json") for r in json.loads(f.read_text())]
    assert sorted(r["seq"] for r in written) == list(range(records)) and len({r["run_id"] for r in written}) == 1

    report = tmp_path / "report.json"
    submit = subprocess.run([str(Path(sys.executable).parent / "lakeflow"), "compact", "--print-command",
                             "--master", spark.master_url, "--report", str(report)],
                            env={**os.environ, **settings}, capture_output=True, text=True, timeout=60)
    assert submit.returncode == 0, submit.stderr
    assert "--engine" not in submit.stdout and "build/compaction-env.tar.gz#env" in submit.stdout
    compact = subprocess.run(["bash", "-c", submit.stdout], cwd=tmp_path, capture_output=True, text=True,
                             timeout=900, env=bare_env(bare_python, **settings, SPARK_LOCAL_IP="127.0.0.1"))
    assert compact.returncode == 0, (compact.stdout + compact.stderr)[-3000:]
    assert json.loads(report.read_text())["engine"] == "spark"  # a cluster master: the executors did the work
    query = subprocess.run([str(Path(sys.executable).parent / "lakeflow"), "query", "--format", "json",
                            "SELECT run_id, seq FROM readings"], env={**os.environ, **settings},
                           capture_output=True, text=True, timeout=120)
    assert query.returncode == 0, query.stderr
    keys = [(r["run_id"], r["seq"]) for r in json.loads(query.stdout)]
    assert sorted(keys) == sorted((r["run_id"], r["seq"]) for r in written) and len(set(keys)) == records

    # the executors' Python: the shipped environment's, with lakeflow and pyarrow >= 18 inside
    probe_cmd = submit.stdout.split(str(REPO / "jobs" / "compact.py"))[0] + str(REPO / "tests" / "support" / "executor_probe.py")
    probe = subprocess.run(["bash", "-c", probe_cmd], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env=bare_env(bare_python, SPARK_LOCAL_IP="127.0.0.1"))
    assert probe.returncode == 0, probe.stderr[-3000:]
    executors = json.loads(probe.stdout.strip().splitlines()[-1])
    assert len(executors) == 2
    for executable, arrow, lakeflow_file, native in executors:
        assert executable.endswith("/env/bin/python") and str(bare_python.parent) not in executable
        assert major(arrow) >= 18 and arrow == pins("compaction")["pyarrow"]
        assert "/env/lib/python3.11/site-packages/lakeflow/" in lakeflow_file
        if shutil.which("cargo"):  # built where cargo is, and shipped in the archive
            assert "/env/lib/python3.11/site-packages/lakeflow_native/" in native
