"""A bad payload fails one job, not the harvest: NaN, 1e400, nesting deeper than the decoder goes
and wrongly shaped values, served by the JobManager stub for one job among three."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lakeflow.lineage.config import from_mapping
from lakeflow.lineage.flink_rest import (
    parse_checkpoint_config,
    parse_checkpoints,
    parse_cluster_config,
    parse_exceptions,
    parse_job,
    parse_job_config,
    parse_overview,
    parse_vertex_metrics,
    strict_json,
)
from lakeflow.lineage.harvest import harvest
from tests.standins.flink_rest import Answer

JOBS = ("good-1", "bad", "good-2")


def detail(jid: str, state: str = "FINISHED", start: str = "1700000000000", read: str = "7",
           operator: str = "Source: s") -> bytes:
    """A job's details as text, so that the numbers can be anything a server might write."""
    return (f'{{"jid": "{jid}", "name": "job-{jid}", "state": "{state}", "job-type": "STREAMING", '
            f'"start-time": {start}, "end-time": -1, "timestamps": {{}}, '
            f'"vertices": [{{"id": "v1", "name": "Source: s", "parallelism": 1, "status": "{state}", '
            f'"metrics": {{"read-records": {read}}}}}], '
            f'"plan": {{"nodes": [{{"id": "v1", "description": {json.dumps(operator)}, "inputs": []}}]}}}}').encode()


@pytest.fixture
def jobmanager(flink_rest_stub):
    flink_rest_stub.route("/config", Answer(200, {"flink-version": "2.3.0"}))
    flink_rest_stub.route("/jobs/overview", Answer(200, {"jobs": [
        {"jid": j, "name": f"job-{j}", "state": "FINISHED", "start-time": 1} for j in JOBS]}))
    for j in JOBS:
        flink_rest_stub.route(f"/jobs/{j}", Answer(200, detail(j)))
        flink_rest_stub.route(f"/jobs/{j}/config", Answer(200, {"execution-config": {"user-config": {}}}))
        flink_rest_stub.route(f"/jobs/{j}/checkpoints/config", Answer(200, {"mode": "EXACTLY_ONCE", "interval": 1000}))
    return flink_rest_stub


def run(stub):
    return harvest(from_mapping({"connection": {"rest_api_url": stub.url, "max_retries": 0}}))


DEEP = b"[" * 100_000 + b"]" * 100_000
NOT_JSON = r"/v1/jobs/bad: answer is not JSON .*; "
EXCEPTIONS = b'{"exceptionHistory": {"entries": [{"stacktrace": "E", "concurrentExceptions": [{"stacktrace": 5}]}]}}'


@pytest.mark.parametrize("routes, reason", [
    ({"/jobs/bad": detail("bad", start="NaN")}, NOT_JSON + r"NaN is not a JSON number\)"),
    ({"/jobs/bad": detail("bad", start="-Infinity")}, NOT_JSON + r"-Infinity is not a JSON number\)"),
    ({"/jobs/bad": detail("bad", start="1e400")}, NOT_JSON + r"1e400 does not fit a float\)"),
    ({"/jobs/bad": detail("bad", read='{"x": 1}')},
     r"^GET http://[^ ]+/v1/jobs/bad: field 'vertices.0.metrics.read-records': Input should be a valid integer "
     r"\(got dict\)$"),
    ({"/jobs/bad": detail("bad", read='"12 records"')},  # only "NaN" stands for 0, nothing else
     r"^GET http://[^ ]+/v1/jobs/bad: field 'vertices.0.metrics.read-records': Input should be a valid integer, "
     r"unable to parse string as an integer \(got str\)$"),
    ({"/jobs/bad/config": b'{"execution-config": {"user-config": {"x": ' + DEEP + b"}}}"},
     r"/v1/jobs/bad/config: answer is not JSON .*; nested too deeply\)"),
    ({"/jobs/bad": detail("bad", state="FAILED"), "/jobs/bad/exceptions": EXCEPTIONS},
     r"^GET http://[^ ]+/v1/jobs/bad/exceptions: field 'exceptionHistory.entries.0.concurrentExceptions.0."
     r"stacktrace': Input should be a valid string \(got int\)$"),
    ({"/jobs/bad": detail("bad", operator="Sink: LakeflowSink[s3://[bucket/t]")},
     r"^unusable answer \(ValueError: Invalid IPv6 URL\)$"),  # the plan's location: the per-job guard
], ids=["nan", "infinity", "1e400", "shape", "counter", "deep", "exceptions", "plan"])
def test_a_bad_payload_fails_its_job_and_the_others_are_harvested(jobmanager, routes, reason):
    for path, body in routes.items():
        jobmanager.route(path, Answer(200, body))
    result = run(jobmanager)
    assert list(result.report.jobs_failed) == ["bad"]
    assert re.search(reason, result.report.jobs_failed["bad"])
    assert result.report.jobs_processed == 2
    assert sorted(j.job_id for j in result.graph.jobs) == ["good-1", "good-2"]
    assert "job-bad" in result.protected_names  # unreadable: not removed as stale


@pytest.mark.parametrize("value", ['"NaN"', '"1e400"', "[]"])
def test_an_unusable_metric_of_a_live_job_leaves_it_without_live_metrics(jobmanager, value):
    jobmanager.route("/jobs/overview", Answer(200, {"jobs": [
        {"jid": "live", "name": "job-live", "state": "RUNNING", "start-time": 1}]}))
    jobmanager.route("/jobs/live", Answer(200, detail("live", state="RUNNING")))
    jobmanager.route("/jobs/live/config", Answer(200, {"execution-config": {"user-config": {}}}))
    jobmanager.route("/jobs/live/checkpoints/config", Answer(200, {"mode": "EXACTLY_ONCE", "interval": 1000}))
    jobmanager.route("/jobs/live/checkpoints", Answer(200, {"counts": {"completed": 1}}))
    jobmanager.route("/jobs/live/vertices/v1/subtasks/metrics?get=numRecordsIn,numRecordsOut,numBytesIn,numBytesOut"
                     "&agg=sum", Answer(200, f'[{{"id": "numRecordsIn", "sum": {value}}}]'.encode()))
    result = run(jobmanager)
    assert result.report.jobs_failed == {} and result.report.jobs_processed == 1
    (live,) = result.graph.runs
    assert live.io.records_in == 7  # the job details' counters, not the unusable live metric


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": 1e400}', "[" * 5000 + "]" * 5000])
def test_strict_json_refuses_what_json_does_not_allow(text):
    with pytest.raises(ValueError):
        strict_json(text)
    assert strict_json('{"a": [1.5e300, -2, "NaN"]}') == {"a": [1.5e300, -2, "NaN"]}


RECORDING = Path(__file__).parents[1] / "fixtures" / "harvest" / "cluster"
PARSERS = {"/config": parse_cluster_config, "/jobs/overview": parse_overview, "": parse_job,
           "/config#job": parse_job_config, "/checkpoints": parse_checkpoints,
           "/checkpoints/config": parse_checkpoint_config, "/exceptions": parse_exceptions,
           "/subtasks/metrics": parse_vertex_metrics}


def parser_of(path: str):
    if path in ("/config", "/jobs/overview"):
        return PARSERS[path]
    tail = re.sub(r"^/jobs/[0-9a-f]{32}", "", path.split("?")[0])
    return PARSERS["/config#job" if tail == "/config" else re.sub(r"^/vertices/[0-9a-f]{32}", "", tail)]


def test_every_recorded_flink_2_3_answer_validates_with_the_fields_flink_added():
    index = json.loads((RECORDING / "index.json").read_text())
    ok = {path: json.loads((RECORDING / e["file"]).read_text()) for path, e in index.items() if e["status"] == 200}
    parsed = {path: parser_of(path)(body) for path, body in ok.items()}
    assert len(parsed) == 36  # of 38: the batch job's two checkpoint answers are 404s
    assert parsed["/config"].flink_version == "2.3.0"
    jobs = {path: body for path, body in ok.items() if re.fullmatch(r"/jobs/[0-9a-f]{32}", path)}
    assert len(jobs) == 7
    for path, body in jobs.items():
        detail = parsed[path]
        assert (detail.jid, detail.name, len(detail.vertices)) == (path[6:], body["name"], len(body["vertices"]))
        assert {"status-counts", "isStoppable", "now"} <= set(body)  # not modelled: ignored, as Flink adds fields
    assert all(isinstance(t, int) for d in jobs for t in parsed[d].timestamps.values())
    assert "accumulated-busy-time" in json.dumps(list(jobs.values()))  # "NaN" there, not read


def test_a_not_measured_counter_is_zero(jobmanager):
    jobmanager.route("/jobs/bad", Answer(200, detail("bad", read='"NaN"')))
    result = run(jobmanager)
    assert result.report.jobs_failed == {}
    assert {r.run_id: r.io.records_in for r in result.graph.runs} == {"good-1": 7, "bad": 0, "good-2": 7}


def test_a_mistyped_job_parameter_is_named_but_its_value_is_not_shown(jobmanager):
    config = {"execution-config": {"user-config": {"db.password": {"value": "s3cr3t-value"}}}}
    jobmanager.route("/jobs/bad/config", Answer(200, config))
    error = run(jobmanager).report.jobs_failed["bad"]
    assert error.endswith("/v1/jobs/bad/config: field 'execution-config.user-config.db.password': "
                          "Input should be a valid string (got dict)")
    assert "s3cr3t" not in error
