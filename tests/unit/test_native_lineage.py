"""Flink's native lineage (FLIP-314): the ingestion job's source and sink declare their datasets,
lakeflow's ``JobStatusChangedListener`` pushes each job's run events into the lineage store (and
to an OpenLineage HTTP endpoint), and ``lakeflow harvest`` merges them with what it pulls, by job id.

Unit tests: they start no process. The real-process tests: tests/integration/test_native_lineage.py."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from lakeflow.cli.main import main
from lakeflow.lineage import native
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.lineage.spark import read_runs
from lakeflow.lineage.store import JOB_NAMESPACE, read_events

SENSORS = DatasetId("lakeflow", "synthetic-sensors")


T0 = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)


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
    identifier as the topic (measured, tests/integration/test_lineage_real_connectors.py): a pushed dataset
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
