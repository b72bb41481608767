"""Flink's native lineage (FLIP-314): the ingestion job's source and sink declare their datasets,
lakeflow's ``JobStatusChangedListener`` pushes each job's run events into the lineage store (and
to an OpenLineage HTTP endpoint), and ``lakeflow harvest`` merges them with what it pulls, by job id.

Fast: the merge, on answers recorded from a real cluster. Slow: one standalone cluster with the
listener configured, ``flink run`` of the packaged ingestion job, events and harvest compared."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
import requests

from lakeflow.cli import main
from lakeflow.ingest import sensors
from lakeflow.lineage import native
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.lineage.spark import read_runs
from lakeflow.lineage.store import JOB_NAMESPACE, read_events
from tests.fixtures_flink import packaged_job_args
from tests.test_ingest_flink import packaged_job_env
from tests.test_openlineage import assert_valid

ROOT = Path(__file__).resolve().parents[1]
JAR = ROOT / "build" / "lakeflow-flink.jar"
SENSORS = DatasetId("lakeflow", "synthetic-sensors")
T0 = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)


# --- the merge, on the recorded cluster ---------------------------------------------------------

def _push(store: Path, job_id: str, name: str, *, outputs=(), inputs=(), end: str = "COMPLETE",
          error: str = "") -> None:
    """The events the listener writes for one job (START with the lineage, then its end)."""
    run_id, ns = str(uuid.UUID(job_id)), JOB_NAMESPACE
    ol.write_event(store, ol.run_event("START", run_id=run_id, job_namespace=ns, job_name=name, event_time=T0,
                                       inputs=inputs, outputs=outputs,
                                       job_facets={"jobType": ol.job_type("STREAMING", "FLINK")}))
    if end:
        facets = {"errorMessage": ol.error_message(error, "JAVA")} if error else {}
        ol.write_event(store, ol.run_event(end, run_id=run_id, job_namespace=ns, job_name=name,
                                           event_time=T0 + timedelta(minutes=5), run_facets=facets))


def _harvest(stub, tmp_path: Path, store: Path, *extra: str) -> dict:
    out = tmp_path / "h.json"
    assert main(["harvest", "--rest-url", stub.url, "--lineage-dir", str(store), "--format", "json",
                 "--output", str(out), *extra]) == 0
    return json.loads(out.read_text())


def _jobs(doc: dict) -> dict[str, dict]:
    jobs = [j for j in doc["jobs"] if j["engine"] == "flink"]
    assert len({j["job_id"] for j in jobs}) == len(jobs)  # a job seen twice is one job
    return {j["job_id"]: j for j in jobs}


def test_pushed_lineage_resolves_what_rest_cannot(recorded_jobmanager, recorded_scenario, tmp_path):
    """The SQL filesystem sink is unresolved from REST alone; its pushed event names it."""
    jid = recorded_scenario["job_ids"]["harvest-sql-filesystem"][0]
    store, table = tmp_path / "lineage", from_location("/data/iot/readings-archive")
    alias = catalog_alias("http://lakekeeper:8181", "wh-1", "iot", "readings-archive")
    _push(store, jid, "harvest-sql-filesystem", outputs=[ol.dataset(table, aliases=[alias])])
    before = _jobs(_harvest(recorded_jobmanager, tmp_path, tmp_path / "empty"))[jid]
    doc = _harvest(recorded_jobmanager, tmp_path, store)
    job = _jobs(doc)[jid]
    assert before["outputs"] == [] and job["outputs"] == [str(table)]
    assert job["evidence"] == {str(table): "native"}
    assert job["state"] == before["state"] == "FINISHED"  # the JobManager's word on the run
    assert {d["name"]: d["aliases"] for d in doc["datasets"]}[str(table)] == [str(alias)]
    assert ["flink:harvest-sql-filesystem", f"dataset:{table}"] in doc["edges"]
    assert next(r for r in doc["runs"] if r["run_id"] == jid)["outputs"] == [str(table)]


def test_pushed_and_pulled_datasets_are_one(recorded_jobmanager, recorded_scenario, tmp_path):
    """The declared sink (pulled) and the same table pushed natively: one dataset, the REST
    evidence kept; the pushed source is added, a SQL table Flink names by its identifier alone is not."""
    jid = recorded_scenario["job_ids"]["harvest-declared-sink"][0]
    table = from_location(recorded_scenario["location"])
    store = tmp_path / "lineage"
    sql_table = DatasetId("", "default_catalog.default_database.numbers")  # Flink's name without a connector's
    _push(store, jid, "harvest-declared-sink", inputs=[ol.dataset(SENSORS), ol.dataset(sql_table)],
          outputs=[ol.dataset(table)])
    doc = _harvest(recorded_jobmanager, tmp_path, store)
    job = _jobs(doc)[jid]
    assert job["outputs"] == [str(table)] and job["inputs"] == [str(SENSORS)]
    assert not [d for d in doc["datasets"] if not d["namespace"]]
    assert job["evidence"] == {str(table): "declared", str(SENSORS): "native"}


def test_a_kafka_sql_sink_named_by_its_table_is_left_to_the_plan(recorded_jobmanager, recorded_scenario, tmp_path):
    """flink-sql-connector-kafka 5.0.0-2.2's SQL sink reports ``kafka://host:port`` with the *table's*
    identifier as the topic (measured, tests/test_lineage_real_connectors.py): a pushed dataset
    naming a table of the job's plan (a catalog table, or the Sink V2 writer's bare name in any
    catalog.database) is no dataset; a real topic is added."""
    batch = recorded_scenario["job_ids"]["harvest-batch"][0]  # its plan: Sink V2 writer 'nowhere'
    prints = recorded_scenario["job_ids"]["harvest-sql-print"][0]  # its plan: lake.iot.archive → lake.iot.console
    store, topic = tmp_path / "lineage", DatasetId("kafka://k:9092", "payments")
    _push(store, batch, "harvest-batch", outputs=[ol.dataset(DatasetId("kafka://k:9092", "lake.iot.nowhere")),
                                                  ol.dataset(topic)])
    _push(store, prints, "harvest-sql-print", outputs=[ol.dataset(DatasetId("kafka://k:9092", "lake.iot.console"))])
    jobs = _jobs(_harvest(recorded_jobmanager, tmp_path, store))
    assert jobs[batch]["outputs"] == [str(topic)] and jobs[batch]["evidence"] == {str(topic): "native"}
    assert jobs[prints]["outputs"] == []


def test_jobs_the_cluster_forgot_come_from_their_events(recorded_jobmanager, tmp_path, capsys):
    store = tmp_path / "lineage"
    table = from_location("s3://bucket/warehouse/t")
    gone, failed, running = (uuid.uuid4().hex for _ in range(3))
    _push(store, gone, "nightly-load", inputs=[ol.dataset(SENSORS)], outputs=[ol.dataset(table)])
    _push(store, failed, "nightly-load", outputs=[ol.dataset(table)], end="FAIL",
          error="java.io.IOException: disk full")
    _push(store, running, "ignored-by-name", outputs=[ol.dataset(table)], end="")
    doc = _harvest(recorded_jobmanager, tmp_path, store, "--job-name-deny", "^ignored")
    jobs = _jobs(doc)
    assert running not in jobs
    assert (jobs[gone]["state"], jobs[failed]["state"]) == ("FINISHED", "FAILED")
    assert jobs[gone]["outputs"] == [str(table)] and jobs[gone]["inputs"] == [str(SENSORS)]
    runs = {r["run_id"]: r for r in doc["runs"]}
    assert (runs[gone]["result"], runs[failed]["result"]) == ("SUCCESS", "FAILURE")
    assert runs[failed]["failure"] == "java.io.IOException: disk full"
    assert runs[gone]["start_ms"] == int(T0.timestamp() * 1000) and runs[gone]["type"] == "STREAMING"
    assert "2 pushed Flink runs" in capsys.readouterr().err


def test_compaction_runs_are_not_flink_runs(tmp_path):
    store = tmp_path / "lineage"
    _push(store, uuid.uuid4().hex, "job", outputs=[ol.dataset(SENSORS)])
    ol.write_event(store, ol.run_event("START", run_id=str(uuid.uuid4()), job_namespace="lakeflow", job_name="compact",
                                       job_facets={"jobType": ol.job_type("BATCH", "SPARK")}))
    events = list(read_events(store))
    assert [r.name for r in read_runs(store)] == ["compact"]
    assert [(n.run.name, n.processing_type, n.run.event_type) for n in native.runs(events)] == [
        ("job", "STREAMING", "COMPLETE")]


# --- the real cluster -------------------------------------------------------------------------------

API_KEY = "ol-key-" + uuid.uuid4().hex


class _Endpoint:
    """An OpenLineage HTTP endpoint (the listener's ``lakeflow.lineage.url``) recording what is POSTed
    with ``Bearer API_KEY``: 401 without it, and 503 the first time it sees each event."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.refused: list[int] = []
        received, refused, seen = self.events, self.refused, set()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                    status = 401
                elif body not in seen:
                    seen.add(body)
                    status = 503
                else:
                    received.append(json.loads(body))
                    status = 201
                if status != 201:
                    refused.append(status)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1/lineage"


@pytest.fixture
def endpoint() -> Iterator[_Endpoint]:
    e = _Endpoint()
    yield e
    e.server.shutdown()


def _key(event: dict) -> str:
    return json.dumps(event, sort_keys=True)


def _settled(rest_url: str, timeout: float = 120.0) -> list[dict]:
    """The cluster's jobs once none is live."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = requests.get(f"{rest_url}/v1/jobs/overview", timeout=10).json()["jobs"]
        if all(j["state"] in ("FINISHED", "FAILED", "CANCELED") for j in jobs) or time.monotonic() > deadline:
            return jobs
        time.sleep(0.5)


@pytest.mark.slow
def test_the_listener_and_the_harvest_agree(make_flink_cluster, endpoint, tmp_path):
    """One cluster with the listener (its jar in lib/): a SQL job that ships no lakeflow jar runs
    as before, and the packaged ingestion job's events name its table; the harvest agrees."""
    store, home = tmp_path / "lineage", tmp_path / "home"
    cluster = make_flink_cluster(conf=native.listener_conf(store, endpoint.url), lib_jars=[JAR],
                                 env={"OPENLINEAGE_API_KEY": API_KEY})
    subprocess.run(["make", "-s", "package"], cwd=ROOT, check=True, capture_output=True, timeout=3000)
    other = cluster.flink(["run", "-py", str(ROOT / "tests" / "harvest_jobs" / "batch.py")], timeout=300)
    assert other.returncode == 0, other.stdout[-3000:] + other.stderr[-3000:]
    proc = cluster.flink(packaged_job_args(), env=packaged_job_env(home, NUM_RECORDS="200"), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    states = {j["name"]: j["state"] for j in _settled(cluster.rest_url)}
    assert states == {"harvest-batch": "FINISHED", "lakeflow-ingest iot.sensor-readings": "FINISHED"}
    time.sleep(1)  # the listener writes on the JobManager's I/O threads

    all_events = list(read_events(store))
    assert_valid(all_events)
    runs = {e["job"]["name"] for e in all_events}
    assert runs == set(states) and all(e["job"]["namespace"] == "flink" for e in all_events)
    events = [e for e in all_events if e["job"]["name"] == "lakeflow-ingest iot.sensor-readings"]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    assert [e["eventType"] for e in all_events if e["job"]["name"] == "harvest-batch"] == ["START", "COMPLETE"]
    deadline = time.monotonic() + 10  # a refused POST is sent again 0.5 s later
    while len(endpoint.events) < len(all_events) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sorted(endpoint.events, key=_key) == sorted(all_events, key=_key)  # the same events over HTTP,
    assert endpoint.refused == [503] * len(all_events)  # each sent with the key, and again after a 503
    logs = "".join(p.read_text(errors="replace") for p in cluster.log_dir.glob("*"))
    assert API_KEY not in logs + proc.stdout + proc.stderr
    start, end = events
    job_id = start["run"]["runId"].replace("-", "")
    assert f"submitted Flink job {job_id}" in proc.stdout + proc.stderr
    assert end["run"]["runId"] == start["run"]["runId"] and end["outputs"] == []
    assert start["job"]["namespace"] == "flink" and start["job"]["name"] == "lakeflow-ingest iot.sensor-readings"
    assert start["job"]["facets"]["jobType"]["integration"] == "FLINK"
    assert start["producer"] == ol.PRODUCER

    table_dir = home / "warehouse" / "iot" / "sensor-readings"
    assert sum(len(json.loads(f.read_text())) for f in table_dir.glob("*/part-*.json")) == 200  # the sink still writes
    table = from_location(table_dir.as_uri())
    (out,) = start["outputs"]
    assert DatasetId(out["namespace"], out["name"]) == table
    facets = out["facets"]
    assert {k: facets["lakeflow_table"][k] for k in ("catalog", "catalogUri", "warehouse", "namespace", "table")} \
        == {"catalog": "local", "catalogUri": home.as_uri(), "warehouse": "local", "namespace": "iot",
            "table": "sensor-readings"}
    alias = catalog_alias(home.as_uri(), "local", "iot", "sensor-readings")
    assert facets["symlinks"]["identifiers"] == [{"namespace": alias.namespace, "name": alias.name, "type": "TABLE"}]
    assert [f["name"] for f in facets["schema"]["fields"]] == [name for name, _ in sensors.FIELDS]
    assert [(f["name"], f["type"]) for f in facets["schema"]["fields"]][2:4] == [("seq", "BIGINT"),
                                                                                 ("timestamp_ms", "BIGINT")]
    (source,) = start["inputs"]
    assert DatasetId(source["namespace"], source["name"]) == SENSORS

    harvested = tmp_path / "harvest.json"
    assert main(["harvest", "--rest-url", cluster.rest_url, "--lineage-dir", str(store), "--format", "json",
                 "--output", str(harvested)]) == 0
    doc = json.loads(harvested.read_text())
    (job,) = [j for j in doc["jobs"] if j["name"] == "lakeflow-ingest iot.sensor-readings"]
    assert (job["job_id"], job["state"]) == (job_id, "FINISHED")
    assert job["outputs"] == [str(table)] and job["inputs"] == [str(SENSORS)]
    assert job["evidence"] == {str(table): "declared", str(SENSORS): "native"}  # REST and pushed name one table
    assert {d["name"]: d["aliases"] for d in doc["datasets"]}[str(table)] == [str(alias)]
    assert not [d for d in doc["datasets"] if not d["namespace"]]  # the SQL job's tables: Flink names no platform
