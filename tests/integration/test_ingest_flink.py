"""The ingestion job on real Flink: a bounded run on a local MiniCluster (``python
jobs/sensor_ingest.py``, what ``make run`` does) and ``flink run`` of the packaged job on a
standalone cluster from the wheel; then every committed file is checked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from lakeflow.ingest.job import PARAM_SCHEMA_DIGEST, PARAM_SCHEMA_TITLE
from lakeflow.ingest.sensors import DailyCycle, PerDevice, parse_hint
from lakeflow.lineage import datasets
from lakeflow.schema import load_schema
from lakeflow.schema.records import RecordContract
from tests.support.fixtures_flink import packaged_job_args
from tests.support.sink_layout import assert_sink_path, files_under
from tests.support.envs import INGEST_PY

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "sensor_ingest.py"
NUM_SENSORS, NUM_RECORDS = 5, 1_000

pytestmark = pytest.mark.slow


def job_env(home: Path, **extra: str) -> dict[str, str]:
    """Embedded local catalog under ``home``; no ``.env.local``, no Lakekeeper from the caller."""
    env = {k: v for k, v in os.environ.items() if k not in ("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "FLINK_LOG_DIR")}
    return {**env, "LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": os.devnull,
            "NUM_SENSORS": str(NUM_SENSORS), "NUM_RECORDS": str(NUM_RECORDS),
            "BATCH_SIZE": "250", "BATCH_INTERVAL_MS": "400", **extra}


@dataclass(frozen=True)
class Run:
    home: Path
    stdout: str
    stderr: str
    started: float  # epoch seconds

    @property
    def table_dir(self) -> Path:
        return self.home / "warehouse" / "iot" / "sensor-readings"


def check_committed(run: Run, records: int = NUM_RECORDS, clean: bool = True) -> list[dict]:
    """Every committed file is one JSON array of records of the default schema (each fits its record
    contract, fields in declared order), in the hour bucket it was written in; all ``records`` readings of one run, ``seq`` unique and complete;
    after a ``clean`` run (no failure) nothing is left in progress."""
    files = files_under(run.table_dir)
    names = [rel for rel in files if not rel.rsplit("/", 1)[-1].startswith(".")]
    hidden = [rel for rel in files if rel not in names]
    assert names and not (clean and hidden), f"uncommitted files left: {hidden}"
    readings: list[dict] = []
    for name in names:
        assert_sink_path(name, run.started)
        content = json.loads(files[name].read_text())
        assert isinstance(content, list) and content, f"{name} is not a non-empty JSON array"
        readings += content
    assert len(readings) == records
    assert sorted(r["seq"] for r in readings) == list(range(records))
    assert len({r["run_id"] for r in readings}) == 1
    uuid.UUID(readings[0]["run_id"])
    schema = load_schema()
    contract = RecordContract(schema.contract())
    for r in readings:
        assert list(r) == list(schema.names)
        contract.check(r)
    assert f"Wrote {len(names)} files, {records} readings" in run.stdout
    assert run.table_dir.as_uri() in run.stdout
    return readings


def test_readings_follow_the_sensor_model(local_run: Run) -> None:
    """The default sensor as its schema file's hints make it."""
    rules = load_schema().rules
    hints = {name: parse_hint(r.generate, name) for name, r in rules.items() if r.generate is not None}
    for r in check_committed(local_run):
        device = r["seq"] % NUM_SENSORS
        assert r["sensor_id"] == f"sensor-{device + 1:03d}"
        for name, hint in hints.items():
            if isinstance(hint, PerDevice):
                assert r[name] == hint.values[device]
            elif isinstance(hint, DailyCycle):
                assert abs(r[name] - hint.base(device)) <= abs(hint.amplitude) + hint.noise / 2 + 0.01, (name, r)
                assert (hint.min or -1e9) <= r[name] <= (hint.max or 1e9)
        assert abs(r["timestamp_ms"] / 1000 - local_run.started) < 600


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``python jobs/sensor_ingest.py`` (a bounded run on a local MiniCluster), run once."""
    home = tmp_path_factory.mktemp("ingest-local")
    started = time.time()
    proc = subprocess.run([INGEST_PY, str(JOB), "--parallelism", "2"], env=job_env(home),
                          cwd=home, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Run(home, proc.stdout, proc.stderr, started)


def test_local_run_commits_every_reading_once(local_run: Run) -> None:
    check_committed(local_run)
    assert "committed" in local_run.stderr  # progress lines while it ran
    assert (local_run.home / "log").is_dir()  # FLINK_LOG_DIR under LAKEFLOW_HOME


def packaged_job_env(home: Path, **extra: str) -> dict[str, str]:
    return {**job_env(home, **extra), "LAKEFLOW_JAR": str(ROOT / "build" / "lakeflow-flink.jar")}


@pytest.fixture(scope="module")
def cluster_run(flink_cluster, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``make package``, then ``flink run`` of the packaged job against the standalone cluster."""
    home = tmp_path_factory.mktemp("ingest-cluster")
    started = time.time()
    subprocess.run(["make", "-s", "package"], cwd=ROOT, check=True, capture_output=True, timeout=3000)
    proc = flink_cluster.flink(packaged_job_args(), env=packaged_job_env(home), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return Run(home, proc.stdout, proc.stderr, started)


def test_flink_run_on_a_standalone_cluster(cluster_run: Run) -> None:
    check_committed(cluster_run)


def test_flink_run_declares_the_table_to_the_job_manager(cluster_run: Run, flink_cluster) -> None:
    job_id = re.search(r"submitted Flink job ([0-9a-f]{32})", cluster_run.stdout + cluster_run.stderr).group(1)
    config = requests.get(f"{flink_cluster.rest_url}/v1/jobs/{job_id}/config", timeout=10).json()
    params = config["execution-config"]["user-config"]
    location = cluster_run.table_dir.as_uri()
    assert params[datasets.PARAM_LOCATION] == location
    assert (params[datasets.PARAM_CATALOG], params[datasets.PARAM_NAMESPACE], params[datasets.PARAM_TABLE]) \
        == ("local", "iot", "sensor-readings")
    readings = json.loads(next(cluster_run.table_dir.glob("*/part-*.json")).read_text())
    assert params[datasets.PARAM_RUN_ID] == readings[0]["run_id"]
    assert (params[PARAM_SCHEMA_TITLE], params[PARAM_SCHEMA_DIGEST]) == ("sensor-reading", load_schema().digest)
    job = requests.get(f"{flink_cluster.rest_url}/v1/jobs/{job_id}", timeout=10).json()
    assert job["state"] == "FINISHED"
    assert any(f"{datasets.SINK_NAME_PREFIX}[{location}]" in v["name"] for v in job["vertices"])


def test_a_taskmanager_crash_loses_and_duplicates_nothing(cluster_run: Run, flink_cluster,
                                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    """SIGKILL the TaskManager mid-run: the job restarts from its last checkpoint, ``seq``
    continues from there, ``run_id`` stays — every reading exactly once. (``cluster_run``
    has packaged the job.)"""
    from lakeflow.runtime.homes import flink_home

    home, records = tmp_path_factory.mktemp("ingest-recovery"), 3_000
    env = {**flink_cluster.env(), **packaged_job_env(home, NUM_RECORDS=str(records), BATCH_SIZE="150")}
    proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), *packaged_job_args()], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run = Run(home, "", "", time.time())
    try:
        deadline = time.monotonic() + 180
        while len(list(run.table_dir.glob("*/part-*.json"))) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "no commits before the crash"
            time.sleep(0.1)
        flink_cluster.kill_taskmanager()
        flink_cluster.start_taskmanager()
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
        wait_for_slots(flink_cluster)
    assert proc.returncode == 0, out[-3000:]
    check_committed(Run(home, out, "", run.started), records=records, clean=False)
    job_id = re.search(r"submitted Flink job ([0-9a-f]{32})", out).group(1)
    history = requests.get(f"{flink_cluster.rest_url}/v1/jobs/{job_id}/exceptions", timeout=10).json()
    assert history["exceptionHistory"]["entries"], "the job did not notice the crash"


def wait_for_slots(cluster, timeout: float = 120) -> None:
    """Until the restarted TaskManager has registered (the cluster is shared by the session)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if requests.get(f"{cluster.rest_url}/v1/overview", timeout=5).json().get("slots-total", 0) >= 1:
            return
        time.sleep(0.5)
    raise TimeoutError("the TaskManager did not come back")


def test_s3_location_without_the_plugin_fails_before_flink_starts(lakekeeper, tmp_path: Path) -> None:
    from tests.support.fixtures_lakekeeper import env_for

    env = {**os.environ, **env_for(lakekeeper), "LAKEFLOW_HOME": str(tmp_path),
           "FLINK_PLUGINS_DIR": str(tmp_path / "no-plugins"), "NUM_RECORDS": "10"}
    proc = subprocess.run([INGEST_PY, str(JOB)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "no flink-s3-fs-hadoop plugin" in proc.stderr and "make flink-plugins" in proc.stderr
    assert "s3://" in proc.stderr and lakekeeper.token not in proc.stdout + proc.stderr
    assert not (tmp_path / "log").exists()  # no JVM was started
