"""Flink's native lineage (FLIP-314): the ingestion job's source and sink declare their datasets,
lakeflow's ``JobStatusChangedListener`` pushes each job's run events into the lineage store (and
to an OpenLineage HTTP endpoint), and ``lakeflow harvest`` merges them with what it pulls, by job id.

Unit tests: they start no process. The real-process tests: tests/integration/test_native_lineage.py."""

from __future__ import annotations

import json
import os
import stat
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from lakeflow.cli.main import main
from lakeflow.lineage import native
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage.config import from_mapping
from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.lineage.flink_rest import PlanNode
from lakeflow.lineage.plan import job_references
from lakeflow.lineage.resolve import Resolver
from lakeflow.lineage.store import JOB_NAMESPACE, read_events, write
from lakeflow.lineage.stored_runs import read_runs
from tests.unit.test_harvest_gateway import _catalog_answers, gateway  # noqa: F401 (a fixture)
from tests.unit.test_openlineage import assert_valid

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


# --- SQL tables the listener names by what they are (#35) ---------------------------------------

def _table(ds: DatasetId, identifier: str, kind: str = "catalog", connector: str = "", **extra) -> dict:
    """A dataset of a SQL table as lakeflow's listener writes it (OpenLineageListener.tableDataset)."""
    facet = {"_producer": ol.PRODUCER, "_schemaURL": f"{ol.FACETS_URL}/LakeflowFlinkTableDatasetFacet.json"
             "#/$defs/LakeflowFlinkTableDatasetFacet", "identifier": identifier, "kind": kind, "connector": connector,
             **extra}
    scope = "flink-catalog" if kind == "catalog" else "flink-job"
    links = {"_producer": ol.PRODUCER, "_schemaURL": "https://openlineage.io/spec/facets/1-0-1/SymlinksDatasetFacet"
             ".json#/$defs/SymlinksDatasetFacet", "identifiers": [{"namespace": scope, "name": identifier,
                                                                    "type": "TABLE"}]}
    return {"namespace": ds.namespace, "name": ds.name, "facets": {"symlinks": links, native.FLINK_TABLE: facet}}


def _start(store: Path, job_id: str, name: str, inputs=(), outputs=()) -> dict:
    """The listener's START event of one job, its datasets as raw JSON."""
    event = {"eventType": "START", "eventTime": "2026-11-20T08:00:00.000Z", "producer": ol.PRODUCER,
             "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
             "run": {"runId": str(uuid.UUID(job_id)), "facets": {}},
             "job": {"namespace": JOB_NAMESPACE, "name": name, "facets": {}},
             "inputs": list(inputs), "outputs": list(outputs)}
    write(store, event)
    return event


def _job(doc: dict, job_id: str) -> dict:
    return {k: v for k, v in _jobs(doc)[job_id].items() if k in ("inputs", "outputs", "unresolved", "skipped",
                                                                 "evidence")}


def test_the_events_validate(tmp_path):
    table = _table(DatasetId("kafka://k:9092", "orders.*"), "c.d.t", "temporary", "kafka", topicPattern="orders.*")
    assert_valid([_start(tmp_path, uuid.uuid4().hex, "j", [table], [_table(DatasetId("", "c.d.u"), "c.d.u")])])


def test_an_identifier_the_plan_could_not_name_is_resolved_through_the_gateway(
        recorded_jobmanager, recorded_gateway, recorded_scenario, tmp_path):
    """Flink's own name of a filesystem sink (``""`` / its identifier, no facet: a listener that does
    not know the connector) is the table the gateway shows: its path, in place of the plan's reason."""
    jid = recorded_scenario["job_ids"]["harvest-sql-filesystem"][0]
    store = tmp_path / "lineage"
    _start(store, jid, "harvest-sql-filesystem", outputs=[{"namespace": "", "name": "lake.iot.archive"}])
    job = _job(_harvest(recorded_jobmanager, tmp_path, store, "--sql-gateway-url", recorded_gateway.url), jid)
    archive = f"file://{recorded_scenario['archive']}"
    assert (job["outputs"], job["unresolved"], job["evidence"]) == ([archive], [], {archive: "plan"})
    job = _job(_harvest(recorded_jobmanager, tmp_path, store), jid)  # without a gateway: why, for each
    assert job["outputs"] == [] and len(job["unresolved"]) == 3, job
    assert "catalog table lake.iot.archive: platform unknown (give --sql-gateway-url" in " ".join(job["unresolved"])


def test_temporary_and_job_local_tables_are_named_by_the_listener(recorded_jobmanager, recorded_gateway,
                                                                  recorded_scenario, tmp_path):
    """Tables no other session can look up: the listener's names stand, the plan's reasons for those
    operators are gone, and the gateway is asked nothing (each statement would fail: HTTP 500)."""
    failed, finished = recorded_scenario["job_ids"]["harvest-resubmitted"]
    store, topic, path = tmp_path / "lineage", DatasetId("kafka://k:9092", "src"), from_location("/data/sink")
    for jid in (failed, finished):
        _start(store, jid, "harvest-resubmitted",
               inputs=[_table(topic, "default_catalog.default_database.src", "temporary", "kafka")],
               outputs=[_table(path, "default_catalog.default_database.sink", "in-memory", "filesystem")])
    doc = _harvest(recorded_jobmanager, tmp_path, store, "--sql-gateway-url", recorded_gateway.url,
                   "--job-name-allow", "^harvest-resubmitted$")
    assert _job(doc, finished) == {"inputs": [str(topic)], "outputs": [str(path)], "unresolved": [], "skipped": [],
                                   "evidence": {str(topic): "native", str(path): "native"}}
    assert recorded_gateway.statements == []


def test_what_the_listener_cannot_name_is_said_once(recorded_jobmanager, recorded_gateway, recorded_scenario,
                                                    tmp_path):
    """A datagen table is skipped, a topic-pattern and a session's table of an unknown connector are
    unresolved with the reason: one reason per operator, the plan's replaced."""
    jid = recorded_scenario["job_ids"]["harvest-batch"][0]
    store = tmp_path / "lineage"
    _start(store, jid, "harvest-batch",
           inputs=[_table(DatasetId("", "default_catalog.default_database.numbers"),
                          "default_catalog.default_database.numbers", "temporary", "datagen"),
                   _table(DatasetId("kafka://k:9092", "orders-.*"), "default_catalog.default_database.pattern",
                          "temporary", "kafka", topicPattern="orders-.*")],
           outputs=[_table(DatasetId("", "default_catalog.default_database.nowhere"),
                           "default_catalog.default_database.nowhere", "anonymous", "hudi")])
    doc = _harvest(recorded_jobmanager, tmp_path, store, "--sql-gateway-url", recorded_gateway.url,
                   "--job-name-allow", "^harvest-batch$")
    assert recorded_gateway.statements == []  # the listener settled each table
    job = _job(doc, jid)
    assert job == {"inputs": [], "outputs": [], "evidence": {},
                   "skipped": ["default_catalog.default_database.numbers: connector 'datagen' is not a dataset"],
                   "unresolved": [
                       "anonymous table default_catalog.default_database.nowhere: lakeflow's listener names no "
                       "dataset of connector 'hudi', and no other session can look the table up",
                       "temporary table default_catalog.default_database.pattern: Kafka topic-pattern 'orders-.*' "
                       "names no topic"]}


def test_the_listener_wins_and_the_gateway_is_not_asked(recorded_jobmanager, recorded_gateway, recorded_scenario,
                                                        tmp_path):
    """A catalog table the listener named (the table the job was planned with): its dataset stands,
    the gateway's or another, and the gateway is asked only about the job's other table."""
    jid = recorded_scenario["job_ids"]["harvest-sql-print"][0]
    gateway = ("--sql-gateway-url", recorded_gateway.url, "--job-name-allow", "^harvest-sql-print$")
    for i, path in enumerate((from_location(recorded_scenario["archive"]), from_location("/data/moved"))):
        store = tmp_path / f"lineage-{i}"
        _start(store, jid, "harvest-sql-print", inputs=[_table(path, "lake.iot.archive", connector="filesystem")])
        job = _job(_harvest(recorded_jobmanager, tmp_path, store, *gateway), jid)
        assert (job["inputs"], job["evidence"]) == ([str(path)], {str(path): "native"})
    assert sorted(set(recorded_gateway.statements)) == [
        "DESCRIBE CATALOG EXTENDED `lake`", "SHOW CREATE TABLE `lake`.`iot`.`console`"]


def test_one_identifier_of_two_jobs_is_two_datasets(recorded_jobmanager, recorded_scenario, tmp_path):
    """A temporary table's identifier names different tables in different jobs: never an alias."""
    ids = recorded_scenario["job_ids"]
    store, first, second = tmp_path / "lineage", from_location("/data/a"), from_location("/data/b")
    name = "default_catalog.default_database.archive"
    _start(store, ids["harvest-batch"][0], "harvest-batch", outputs=[_table(first, name, "temporary", "filesystem")])
    _start(store, ids["harvest-sql-filesystem"][0], "harvest-sql-filesystem",
           outputs=[_table(second, name, "temporary", "filesystem")])
    doc = _harvest(recorded_jobmanager, tmp_path, store)
    jobs = _jobs(doc)
    assert jobs[ids["harvest-batch"][0]]["outputs"] == [str(first)]
    assert jobs[ids["harvest-sql-filesystem"][0]]["outputs"] == [str(second)]
    assert {d["name"]: d["aliases"] for d in doc["datasets"]}[str(first)] == []


def test_operators_named_only_are_dropped_as_far_as_the_listener_names_their_datasets(
        recorded_jobmanager, recorded_scenario, tmp_path, caplog):
    """A DataStream job: Flink's lineage names the datasets, not the operators. The plan's name-only
    reasons of a role go when the listener names as many datasets of that role; a facet that is not
    the listener's shape leaves its dataset a plain one."""
    jid = recorded_scenario["job_ids"]["harvest-kafka-named"][0]  # 1 source, 2 sinks merely named
    store, topic = tmp_path / "lineage", DatasetId("kafka://k:9092", "orders")
    odd = {"namespace": "kafka://k:9092", "name": "audit", "facets": {native.FLINK_TABLE: {"kind": 3}}}
    _start(store, jid, "harvest-kafka-named", inputs=[{"namespace": topic.namespace, "name": topic.name}],
           outputs=[odd])
    job = _job(_harvest(recorded_jobmanager, tmp_path, store), jid)
    audit = "kafka://k:9092/audit"
    assert (job["inputs"], job["outputs"]) == ([str(topic)], [audit])
    assert [r.split("'")[1] for r in job["unresolved"]] == ["KafkaSink-payments", "Sink: KafkaSink-audit"]
    assert "a lakeflow_flink_table facet left out" in caplog.text


def test_event_files_are_readable_by_the_group_whatever_the_umask(tmp_path):
    """As the listener writes them (lakeflow.lineage.file-mode, default 0640): a harvest of the
    folder's group, running as another user, reads the compaction's events too."""
    old = os.umask(0o077)
    try:
        path = ol.write_event(tmp_path, ol.run_event("START", run_id=str(uuid.uuid4()), job_namespace="lakeflow",
                                                     job_name="compact"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_the_real_connector_jobs_resolve_exactly_with_the_listener(gateway):
    """The plans and the listener's START datasets of the jobs of tests/integration/test_lineage_real_connectors.py
    (recorded there, addresses replaced by k:9092, db:5432 and /files), merged against answers shaped
    like its gateway's: every edge of a SQL table, the DataStream Kafka edges, and reasons only for
    what nothing names (a topic-pattern, a FileSink, operators merely named like Kafka)."""
    fixtures = Path(__file__).parents[1] / "fixtures" / "harvest"
    plans = json.loads((fixtures / "real-connectors-plans.json").read_text())
    pushed = json.loads((fixtures / "real-connectors-listener.json").read_text())
    assert set(pushed) == set(plans)
    _, client = gateway(_catalog_answers())
    resolver = Resolver(from_mapping({"connection": {"rest_api_url": "http://x"}}), client)
    got, reasons = {}, {}
    for job, descriptions in plans.items():
        pulled = resolver.resolve(job_references([PlanNode(f"v{i}", d, 1, ()) for i, d in enumerate(descriptions)]), {})
        event = {"eventType": "START", "eventTime": "2026-11-28T08:00:00Z", "run": {"runId": str(uuid.uuid4())},
                 "job": {"namespace": JOB_NAMESPACE, "name": job}, **pushed[job]}
        (run,) = native.runs([event])
        resolutions = native.combine(pulled, run, resolver)
        got[job] = tuple(sorted(str(r.dataset) for r in resolutions if r.dataset and r.reference.role == role)
                         for role in ("source", "sink"))
        reasons[job] = len([r for r in resolutions if r.unresolved])
    k = lambda topic: f"kafka://k:9092/{topic}"  # noqa: E731
    pg = lambda table: f"postgres://db:5432/shop.public.{table}"  # noqa: E731
    fs = lambda folder: f"file:///files/{folder}"  # noqa: E731
    assert got == {
        "batch-jdbc": ([pg("customers")], [pg("customers_copy")]),
        "cancelled": ([k("clicks")], [k("clicks_copy")]),
        "cancelled-filesystem": ([k("clicks")], [fs("clicks-archive")]),
        "datagen-to-kafka": ([], [k("audit")]),
        "ds-file-sink": ([], []),
        "ds-kafka-to-kafka": ([k("orders")], [k("ds_orders")]),
        "ds-named-like-kafka": ([], []),
        "failed": ([k("bad_orders")], [pg("alerts")]),
        "in-memory-tables": ([k("orders")], [fs("mem-archive"), pg("orders_mem")]),
        "kafka-pattern": ([], []),
        "kafka-to-filesystem": ([k("orders")], [fs("archive")]),
        "kafka-to-jdbc-catalog": ([k("orders")], [pg("alerts")]),
        "kafka-to-jdbc-table": ([k("orders")], [pg("orders_copy")]),
        "kafka-to-kafka": ([k("orders")], [k("orders_enriched")]),
        "local-batch-filesystem": ([pg("customers")], [fs("local-customers")]),
        "local-kafka-to-jdbc": ([k("orders")], [pg("orders_local")]),
        "lookup-join": ([k("orders"), pg("customers")], [k("alerts")]),
        "session-table": ([k("orders")], [pg("orders_copy")]),
        "statement-set": ([k("orders")], [k("audit"), pg("orders_copy")]),
        "temporary-batch-filesystem": ([pg("customers")], [fs("temp-customers")]),
        "temporary-kafka": ([k("clicks"), k("orders")], [k("temp_out")]),
        "view": ([k("orders")], [k("alerts")]),
    }
    assert {job: n for job, n in reasons.items() if n} == {"ds-file-sink": 2, "ds-named-like-kafka": 2,
                                                          "kafka-pattern": 1}
