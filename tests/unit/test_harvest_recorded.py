"""``lakeflow harvest`` end to end on answers recorded from the real cluster scenario (replayed by
the REST stub and the SQL Gateway stand-in over real sockets): lineage, runs, outputs, stability."""

import json
from pathlib import Path

import pytest

from lakeflow.cli.main import main
from lakeflow.lineage.datasets import catalog_alias, from_location
from lakeflow.lineage.openlineage import dataset, run_event, write_event
from tests.standins.datahub_gms import GmsStandIn
from tests.standins.flink_rest import Answer
from tests.support.harvest_scenario import expected_lineage


def harvest(stub, tmp_path: Path, *extra: str, fmt: str = "json", name: str = "out") -> tuple[int, str]:
    out = tmp_path / f"{name}.{fmt}"
    code = main(["harvest", "--rest-url", stub.url, "--format", fmt, "--output", str(out), *extra])
    return code, out.read_text()


def lineage(doc: dict) -> dict[str, dict]:
    """name → lineage, asserting every run of a name has the same lineage."""
    out: dict[str, dict] = {}
    for j in doc["jobs"]:
        item = {k: j[k] for k in ("inputs", "outputs", "unresolved", "skipped")}
        assert out.setdefault(j["name"], item) == item
    return out


@pytest.mark.parametrize("with_gateway", [False, True])
def test_lineage_is_exact(recorded_jobmanager, recorded_gateway, recorded_scenario, tmp_path, with_gateway):
    extra = ["--sql-gateway-url", recorded_gateway.url] if with_gateway else []
    code, text = harvest(recorded_jobmanager, tmp_path, *extra)
    doc = json.loads(text)
    assert code == 0
    assert lineage(doc) == expected_lineage(recorded_scenario["archive"], recorded_scenario["location"], with_gateway)
    assert not [d for d in doc["datasets"] if d["namespace"].startswith("kafka")]  # names are not evidence
    raw = str(from_location(recorded_scenario["location"]))
    assert ["flink:harvest-declared-sink", f"dataset:{raw}"] in doc["edges"]


def test_every_run_is_a_run_with_its_result(recorded_jobmanager, recorded_scenario, tmp_path):
    runs = {r["run_id"]: r for r in json.loads(harvest(recorded_jobmanager, tmp_path)[1])["runs"]}
    ids = recorded_scenario["job_ids"]
    assert set(runs) == {jid for jids in ids.values() for jid in jids}
    failed, finished = (runs[j] for j in ids["harvest-resubmitted"])  # one name, two runs
    assert (failed["result"], finished["result"]) == ("FAILURE", "SUCCESS")
    assert failed["failure"].startswith("java.lang.NumberFormatException: For input string:")
    assert failed["flow"] == finished["flow"] == "harvest-resubmitted"
    live = runs[ids["harvest-sql-print"][0]]
    assert (live["state"], live["result"], live["end_ms"]) == ("RUNNING", None, None)
    assert live["records_in"] == 50  # the live vertex metrics: the archive's 50 rows read
    assert runs[ids["harvest-batch"][0]]["type"] == "BATCH"
    assert runs[ids["harvest-declared-sink"][0]]["type"] == "STREAMING"
    assert all(r["start_ms"] and r["restarts"] == 0 for r in runs.values())


def test_output_is_byte_for_byte_stable(recorded_jobmanager, recorded_gateway, tmp_path):
    for fmt in ("json", "datahub", "openlineage"):
        base = ["--sql-gateway-url", recorded_gateway.url]
        first = harvest(recorded_jobmanager, tmp_path, *base, fmt=fmt, name="a")[1]
        again = harvest(recorded_jobmanager, tmp_path, *base, "--max-workers", "1", fmt=fmt, name="b")[1]
        assert first == again, fmt


def test_datahub_proposals(recorded_jobmanager, recorded_scenario, tmp_path):
    text = harvest(recorded_jobmanager, tmp_path, fmt="datahub")[1]
    mcps = json.loads(text)
    assert text == "[\n" + ",\n".join(json.dumps(m, sort_keys=True) for m in mcps) + "\n]\n"  # one MCP a line
    by = {}
    for m in mcps:
        assert m["changeType"] == "UPSERT" and m["aspect"]["contentType"] == "application/json"
        by.setdefault((m["entityType"], m["aspectName"]), []).append((m["entityUrn"], json.loads(m["aspect"]["value"])))
    flows = sorted(urn for urn, _ in by[("dataFlow", "dataFlowInfo")])
    assert "urn:li:dataFlow:(flink,harvest-resubmitted,PROD)" in flows and len(flows) == 6
    dpis = by[("dataProcessInstance", "dataProcessInstanceProperties")]
    assert len(dpis) == 7 and len({urn for urn, _ in dpis}) == 7  # one per job id, not per name
    parents = {v["parentTemplate"] for _, v in by[("dataProcessInstance", "dataProcessInstanceRelationships")]}
    assert "urn:li:dataJob:(urn:li:dataFlow:(flink,harvest-resubmitted,PROD),harvest-resubmitted)" in parents
    events = [v for _, v in by[("dataProcessInstance", "dataProcessInstanceRunEvent")]]
    assert sorted(e.get("result", {}).get("type", e["status"]) for e in events) == sorted(
        ["STARTED"] * 7 + ["SUCCESS"] * 5 + ["FAILURE"])  # the running job has a start only
    raw = from_location(recorded_scenario["location"]).datahub_urn()
    io = dict(by[("dataJob", "dataJobInputOutput")])
    assert io["urn:li:dataJob:(urn:li:dataFlow:(flink,harvest-declared-sink,PROD),harvest-declared-sink)"][
        "outputDatasets"] == [raw]
    assert [urn for urn, _ in by[("dataset", "datasetKey")]] == [raw]


def test_openlineage_events(recorded_jobmanager, recorded_scenario, tmp_path):
    events = [json.loads(line) for line in harvest(recorded_jobmanager, tmp_path, fmt="openlineage")[1].splitlines()]
    assert sorted(e["eventType"] for e in events) == sorted(["START"] * 7 + ["COMPLETE"] * 5 + ["FAIL"])
    fail = next(e for e in events if e["eventType"] == "FAIL")
    assert fail["run"]["facets"]["errorMessage"]["message"].startswith("java.lang.NumberFormatException")
    declared = next(e for e in events if e["job"]["name"] == "harvest-declared-sink")
    out = declared["outputs"][0]
    assert (out["namespace"], out["name"]) == ("file", recorded_scenario["location"][len("file://"):])
    alias = catalog_alias(recorded_scenario["catalog_uri"], "local", "iot", "sensor-readings")
    assert out["facets"]["symlinks"]["identifiers"] == [{"namespace": alias.namespace, "name": alias.name, "type": "TABLE"}]


def test_vertex_granularity_links_vertices(recorded_jobmanager, recorded_scenario, tmp_path):
    mcps = json.loads(harvest(recorded_jobmanager, tmp_path, "--operator-granularity", "vertex",
                              "--job-name-allow", "^harvest-declared", fmt="datahub")[1])
    io = {m["entityUrn"]: json.loads(m["aspect"]["value"]) for m in mcps if m["aspectName"] == "dataJobInputOutput"}
    assert len(io) == 2  # the source vertex and the sink vertex
    (src_urn, src), (sink_urn, sink) = sorted(io.items(), key=lambda kv: bool(kv[1]["outputDatasets"]))
    assert sink["inputDatajobs"] == [src_urn] and src["inputDatajobs"] == []
    assert sink["outputDatasets"] == [from_location(recorded_scenario["location"]).datahub_urn()]


def test_filters_by_name_and_state(recorded_jobmanager, tmp_path, capsys):
    doc = json.loads(harvest(recorded_jobmanager, tmp_path, "--job-name-deny", ".*print", "--include-job-states",
                             "FINISHED,FAILED")[1])
    assert sorted({j["name"] for j in doc["jobs"]}) == ["harvest-batch", "harvest-declared-sink", "harvest-kafka-named",
                                                        "harvest-resubmitted", "harvest-sql-filesystem"]
    assert "7 seen, 1 filtered by name, 0 filtered by state, 6 processed, 0 failed" in capsys.readouterr().err


def test_trusting_operator_names_is_an_explicit_choice(recorded_jobmanager, tmp_path):
    doc = json.loads(harvest(recorded_jobmanager, tmp_path, "--trust-operator-names", "--job-name-allow", ".*kafka")[1])
    (job,) = doc["jobs"]
    assert (job["inputs"], job["outputs"]) == (["kafka/orders"], ["kafka/audit", "kafka/payments"])
    assert set(job["evidence"].values()) == {"name-only"}


def test_compaction_runs_join_the_flink_graph(recorded_jobmanager, recorded_scenario, tmp_path):
    raw_location = recorded_scenario["location"]
    iceberg = "file:///tmp/lakeflow-harvest-recording/warehouse/iot/sensor_readings_compacted"
    store = tmp_path / "lineage"
    ice_alias = catalog_alias("sqlite:///tmp/catalog.db", "default", "iot", "sensor_readings")
    raw_alias = catalog_alias(recorded_scenario["catalog_uri"], "local", "iot", "sensor-readings")
    common = dict(run_id="0199b0a4-6f1c-7000-8000-000000000001", job_namespace="lakeflow", job_name="compaction",
                  inputs=[dataset(from_location(raw_location), aliases=[raw_alias])],
                  outputs=[dataset(from_location(iceberg), aliases=[ice_alias])])
    from datetime import datetime, timezone
    write_event(store, run_event("START", event_time=datetime(2026, 11, 22, 1, tzinfo=timezone.utc), **common))
    write_event(store, run_event("COMPLETE", event_time=datetime(2026, 11, 22, 1, 1, tzinfo=timezone.utc), **common))
    doc = json.loads(harvest(recorded_jobmanager, tmp_path, "--lineage-dir", str(store))[1])
    edges = {tuple(e) for e in doc["edges"]}
    raw, ice = f"dataset:{from_location(raw_location)}", f"dataset:{from_location(iceberg)}"
    # sensors → Flink job → raw table → compaction → Iceberg table: one connected chain
    assert {("flink:harvest-declared-sink", raw), (raw, "compaction:lakeflow.compaction"),
            ("compaction:lakeflow.compaction", ice)} <= edges
    spark_run = next(r for r in doc["runs"] if r["engine"] == "compaction")
    assert (spark_run["result"], spark_run["end_ms"] - spark_run["start_ms"]) == ("SUCCESS", 60000)
    raw_ds = next(d for d in doc["datasets"] if d["name"] == str(from_location(raw_location)))
    assert raw_ds["aliases"] == [str(raw_alias)]  # one dataset, the catalog identity as its alias
    events = [json.loads(line) for line in harvest(recorded_jobmanager, tmp_path, "--lineage-dir", str(store),
                                                   fmt="openlineage")[1].splitlines()]
    spark = [(e["eventType"], e["job"]["namespace"], e["job"]["name"]) for e in events
             if e["run"]["runId"] == common["run_id"]]
    assert spark == [("START", "lakeflow", "compaction"), ("COMPLETE", "lakeflow", "compaction")]


def test_datahub_proposals_go_to_gms_over_rest(recorded_jobmanager, tmp_path, monkeypatch, capsys):
    gms = GmsStandIn(token="gms-secret", fail_first=1).start()
    try:
        monkeypatch.setenv("MY_GMS_TOKEN", "gms-secret")
        code, text = harvest(recorded_jobmanager, tmp_path, "--datahub-gms", gms.url, "--datahub-token",
                             "env:MY_GMS_TOKEN", fmt="datahub")
        assert code == 0
        assert gms.proposals == json.loads(text)  # a 503 was retried; everything arrived once
        assert "gms-secret" not in capsys.readouterr().err
        assert main(["harvest", "--rest-url", recorded_jobmanager.url, "--datahub-gms", gms.url,
                     "--datahub-token", "gms-secret", "--output", str(tmp_path / "x")]) == 2
        assert "expected env:VAR or file:PATH" in capsys.readouterr().err
    finally:
        gms.stop()


def test_restarting_jobs_are_live_and_not_filtered_into_oblivion(recorded_jobmanager, recorded_scenario, tmp_path):
    jid = recorded_scenario["job_ids"]["harvest-declared-sink"][0]
    overview_path = "/jobs/overview"
    overview = _body(recorded_jobmanager, overview_path)
    for j in overview["jobs"]:
        if j["jid"] == jid:
            j["state"] = "RESTARTING"
    recorded_jobmanager.route(overview_path, Answer(200, overview))
    detail = _body(recorded_jobmanager, f"/jobs/{jid}")
    detail["state"] = "RESTARTING"
    recorded_jobmanager.route(f"/jobs/{jid}", Answer(200, detail))
    doc = json.loads(harvest(recorded_jobmanager, tmp_path, "--include-job-states", "RUNNING,RESTARTING")[1])
    run = next(r for r in doc["runs"] if r["run_id"] == jid)
    assert (run["state"], run["result"], run["end_ms"]) == ("RESTARTING", None, None)


def _body(stub, path):
    return json.loads(json.dumps(stub.routes[path][0].body))
