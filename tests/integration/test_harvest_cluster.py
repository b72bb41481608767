"""``lakeflow harvest`` against a real standalone Flink cluster running real jobs (submitted once
for the module): exact lineage, every run, the SQL Gateway path, stable output, one graph with
the compaction's run events."""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from lakeflow.cli.main import main
from lakeflow.lineage.datasets import catalog_alias, from_location
from lakeflow.lineage.openlineage import dataset, run_event, write_event
from tests.standins.sql_gateway import FlinkExecutor, SqlGatewayStandIn
from tests.support.harvest_scenario import expected_lineage, gateway_setup
from tests.unit.test_harvest_recorded import lineage
from tests.support.envs import INGEST_PY

pytestmark = pytest.mark.slow
OURS = ["--job-name-allow", "^harvest-"]  # the session cluster is shared with other tests


@pytest.fixture(scope="module")
def live_gateway(harvest_scenario):
    """The gateway stand-in answering from a real TableEnvironment holding the jobs' catalog."""
    standin = SqlGatewayStandIn(FlinkExecutor(gateway_setup(harvest_scenario.archive))).start()
    yield standin
    standin.stop()


def harvest(scenario, tmp_path: Path, *extra: str, fmt: str = "json", name: str = "out") -> str:
    out = tmp_path / f"{name}.{fmt}"
    assert main(["harvest", "--rest-url", scenario.rest_url, "--format", fmt, "--output", str(out), *OURS, *extra]) == 0
    return out.read_text()


def test_the_lakeflow_harvest_command_reads_exact_lineage_and_every_run(harvest_scenario, tmp_path):
    out = tmp_path / "h.json"
    proc = subprocess.run([str(Path(sys.executable).parent / "lakeflow"), "harvest", "--rest-url",
                           harvest_scenario.rest_url, "--output", str(out), *OURS],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "7 processed, 0 failed" in proc.stderr
    doc = json.loads(out.read_text())
    assert lineage(doc) == expected_lineage(str(harvest_scenario.archive), harvest_scenario.location, gateway=False)
    assert not [d for d in doc["datasets"] if d["namespace"].startswith("kafka")]  # no false Kafka edges
    assert doc["edges"] == [["flink:harvest-declared-sink", f"dataset:{from_location(harvest_scenario.location)}"]]

    runs = {r["run_id"]: r for r in doc["runs"]}
    ids = harvest_scenario.job_ids
    assert set(runs) == {jid for jids in ids.values() for jid in jids} and len(runs) == 7
    first, second = (runs[j] for j in ids["harvest-resubmitted"])
    assert (first["result"], second["result"]) == ("FAILURE", "SUCCESS")
    assert "NumberFormatException" in first["failure"] and second["failure"] is None
    live = runs[ids["harvest-sql-print"][0]]
    assert (live["state"], live["result"], live["end_ms"]) == ("RUNNING", None, None)
    assert runs[ids["harvest-batch"][0]]["type"] == "BATCH"
    for name in ("harvest-sql-filesystem", "harvest-kafka-named", "harvest-batch", "harvest-declared-sink"):
        r = runs[ids[name][0]]
        assert (r["result"], r["type"] in ("STREAMING", "BATCH")) == ("SUCCESS", True)
        assert 0 < r["start_ms"] <= r["end_ms"]


def test_sql_tables_resolve_through_the_gateway(harvest_scenario, live_gateway, tmp_path):
    doc = json.loads(harvest(harvest_scenario, tmp_path, "--sql-gateway-url", live_gateway.url))
    assert lineage(doc) == expected_lineage(str(harvest_scenario.archive), harvest_scenario.location, gateway=True)
    assert ["dataset:" + str(from_location(str(harvest_scenario.archive))), "flink:harvest-sql-print"] in doc["edges"]


def test_identical_harvests_are_identical_bytes(harvest_scenario, live_gateway, tmp_path):
    for fmt in ("datahub", "openlineage"):
        a = harvest(harvest_scenario, tmp_path, "--sql-gateway-url", live_gateway.url, fmt=fmt, name="a")
        b = harvest(harvest_scenario, tmp_path, "--sql-gateway-url", live_gateway.url, fmt=fmt, name="b")
        assert a == b, fmt


def test_flink_and_compaction_lineage_are_one_graph(harvest_scenario, tmp_path):
    raw = from_location(harvest_scenario.location)
    iceberg = from_location(str(tmp_path / "warehouse" / "iot" / "sensor_readings"))
    common = dict(run_id="0199b0a4-6f1c-7000-8000-00000000000a", job_namespace="lakeflow", job_name="compaction",
                  inputs=[dataset(raw, aliases=[catalog_alias(harvest_scenario.catalog_uri, "local", "iot",
                                                              "sensor-readings")])],
                  outputs=[dataset(iceberg)])
    store = tmp_path / "lineage"
    write_event(store, run_event("START", event_time=datetime(2026, 1, 1, tzinfo=timezone.utc), **common))
    write_event(store, run_event("COMPLETE", event_time=datetime(2026, 1, 1, 0, 5, tzinfo=timezone.utc), **common))
    doc = json.loads(harvest(harvest_scenario, tmp_path, "--lineage-dir", str(store)))
    graph: dict[str, set] = {}
    for a, b in doc["edges"]:
        graph.setdefault(a, set()).add(b)
    reached, todo = set(), ["flink:harvest-declared-sink"]
    while todo:
        node = todo.pop()
        if node not in reached:
            reached.add(node)
            todo.extend(graph.get(node, ()))
    assert {f"dataset:{raw}", "compaction:lakeflow.compaction", f"dataset:{iceberg}"} <= reached
    assert [d["aliases"] for d in doc["datasets"] if d["name"] == str(raw)] == [
        [str(catalog_alias(harvest_scenario.catalog_uri, "local", "iot", "sensor-readings"))]]


@pytest.fixture(scope="module")
def ingest_job(flink_cluster, tmp_path_factory):
    """lakeflow's own ingestion job (jobs/sensor_ingest.py), packaged and run bounded on the cluster."""
    root = Path(__file__).resolve().parents[2]
    home = tmp_path_factory.mktemp("harvest-ingest")
    subprocess.run(["make", "-s", "package"], cwd=root, check=True, capture_output=True, timeout=3000)
    env = {k: v for k, v in os.environ.items() if k not in ("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN")}
    env.update(LAKEFLOW_HOME=str(home), LAKEFLOW_ENV_FILE="/dev/null", NUM_SENSORS="2", NUM_RECORDS="40",
               BATCH_SIZE="20", BATCH_INTERVAL_MS="300", LAKEFLOW_JAR=str(root / "build" / "lakeflow-flink.jar"))
    py = INGEST_PY
    proc = flink_cluster.flink(["run", "-pyclientexec", py, "-pyexec", py, "-pyfs", str(root / "build" / "lakeflow.zip"),
                                "-py", str(root / "jobs" / "sensor_ingest.py")], env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return env, home / "warehouse" / "iot" / "sensor-readings"


def test_lakeflows_ingestion_job_declares_its_table(flink_cluster, ingest_job, tmp_path):
    _, table = ingest_job
    out = tmp_path / "h.json"
    assert main(["harvest", "--rest-url", flink_cluster.rest_url, "--output", str(out),
                 "--job-name-allow", "^lakeflow-ingest "]) == 0
    jobs = json.loads(out.read_text())["jobs"]
    assert jobs and all(j["state"] == "FINISHED" for j in jobs)
    mine = [j for j in jobs if j["outputs"] == [str(from_location(table.as_uri()))]]
    assert len(mine) == 1  # this run (other tests' runs write elsewhere)
    (job,) = mine
    assert job["inputs"] == [] and job["evidence"] == {str(from_location(table.as_uri())): "declared"}
    assert not [u for u in job["unresolved"] if "Kafka" in u]


def test_ingestion_and_the_real_compaction_are_one_lineage(flink_cluster, ingest_job, tmp_path):
    """sensors → Flink ingestion job → raw table → Spark compaction (real spark-submit) → Iceberg."""
    env, table = ingest_job
    home = Path(env["LAKEFLOW_HOME"])
    proc = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact"], cwd=home, capture_output=True, text=True,
                          env={**env, "NAMESPACE": "iot", "TABLE": "sensor-readings", "SPARK_LOCAL_IP": "127.0.0.1"},
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = tmp_path / "h.json"
    assert main(["harvest", "--rest-url", flink_cluster.rest_url, "--output", str(out), "--job-name-allow",
                 "^lakeflow-ingest ", "--lineage-dir", str(home / "lineage")]) == 0
    doc = json.loads(out.read_text())
    raw = f"dataset:{from_location(table.as_uri())}"
    (spark,) = [j for j in doc["jobs"] if j["engine"] == "compaction"]
    assert (spark["state"], spark["inputs"]) == ("COMPLETE", [raw[len("dataset:"):]])
    (iceberg,) = spark["outputs"]
    ingest = next(j["name"] for j in doc["jobs"] if j["outputs"] == [raw[len("dataset:"):]])
    edges = {tuple(e) for e in doc["edges"]}
    assert {(f"flink:{ingest}", raw), (raw, f"compaction:{spark['name']}"), (f"compaction:{spark['name']}", f"dataset:{iceberg}")} <= edges
