"""Stateful stale-entity removal over the recorded cluster: vanished jobs go, restarting jobs and
referenced datasets stay, and the fail-safe keeps an accidental config change from wiping all."""

import json

import pytest

from lakeflow.cli.main import main
from lakeflow.lineage import state
from tests.standins.flink_rest import Answer

FLOW = "urn:li:dataFlow:(flink,{},PROD)"
TASK = "urn:li:dataJob:(urn:li:dataFlow:(flink,{0},PROD),{0})"


def run(stub, tmp_path, *extra):
    out = tmp_path / "out.json"
    code = main(["harvest", "--rest-url", stub.url, "--output", str(out), "--state-file", str(tmp_path / "state.json"),
                 *extra])
    return code, json.loads(out.read_text())


def entities(tmp_path):
    return state.load(tmp_path / "state.json")


def without(stub, *names, restarting=()):
    overview = json.loads(json.dumps(stub.routes["/jobs/overview"][0].body))
    overview["jobs"] = [j for j in overview["jobs"] if j["name"] not in names]
    for j in overview["jobs"]:
        if j["name"] in restarting:
            j["state"] = "RESTARTING"
    stub.route("/jobs/overview", Answer(200, overview))


def test_first_run_records_owned_entities_only(recorded_jobmanager, recorded_scenario, tmp_path):
    code, doc = run(recorded_jobmanager, tmp_path)
    assert code == 0 and doc["removed"] == []
    owned = entities(tmp_path)
    assert len(owned) == 12  # 6 flows + 6 tasks; datasets are referenced, never owned
    assert not [u for u in owned if u.startswith("urn:li:dataset:")]


def test_a_vanished_job_is_removed_but_a_restarting_one_is_kept(recorded_jobmanager, tmp_path):
    run(recorded_jobmanager, tmp_path)
    without(recorded_jobmanager, "harvest-batch", restarting=("harvest-declared-sink",))
    code, doc = run(recorded_jobmanager, tmp_path)
    assert doc["removed"] == sorted([FLOW.format("harvest-batch"), TASK.format("harvest-batch")])
    assert FLOW.format("harvest-declared-sink") in entities(tmp_path)  # filtered for its state, still there
    assert FLOW.format("harvest-batch") not in entities(tmp_path)
    mcps = json.loads(_datahub(recorded_jobmanager, tmp_path))
    assert not [m for m in mcps if m["aspectName"] == "status" and json.loads(m["aspect"]["value"])["removed"]]


def test_the_declared_sinks_dataset_is_never_removed(recorded_jobmanager, tmp_path):
    run(recorded_jobmanager, tmp_path)
    without(recorded_jobmanager, "harvest-declared-sink")
    _, doc = run(recorded_jobmanager, tmp_path)
    assert doc["removed"] == sorted([FLOW.format("harvest-declared-sink"), TASK.format("harvest-declared-sink")])


def test_fail_safe_threshold_blocks_mass_removal_and_keeps_the_state(recorded_jobmanager, tmp_path, capsys):
    run(recorded_jobmanager, tmp_path)
    before = (tmp_path / "state.json").read_bytes()
    _, doc = run(recorded_jobmanager, tmp_path, "--job-name-allow", "^harvest-batch$")
    assert doc["removed"] == []
    assert "stale-entity removal skipped: 10 of 12 entities" in capsys.readouterr().err
    assert (tmp_path / "state.json").read_bytes() == before
    _, doc = run(recorded_jobmanager, tmp_path, "--job-name-allow", "^harvest-batch$", "--fail-safe-threshold", "90")
    assert len(doc["removed"]) == 10


def test_removals_become_status_removed_proposals(recorded_jobmanager, tmp_path):
    run(recorded_jobmanager, tmp_path)
    without(recorded_jobmanager, "harvest-batch")
    mcps = json.loads(_datahub(recorded_jobmanager, tmp_path))
    removed = [m["entityUrn"] for m in mcps if m["aspectName"] == "status" and json.loads(m["aspect"]["value"])["removed"]]
    assert removed == sorted([FLOW.format("harvest-batch"), TASK.format("harvest-batch")])


def test_an_unreadable_state_file_is_an_error_not_a_fresh_start(recorded_jobmanager, tmp_path, capsys):
    (tmp_path / "state.json").write_text("{not json")
    code = main(["harvest", "--rest-url", recorded_jobmanager.url, "--output", str(tmp_path / "o"),
                 "--state-file", str(tmp_path / "state.json")])
    assert code == 2 and "unreadable" in capsys.readouterr().err


def _datahub(stub, tmp_path) -> str:
    out = tmp_path / "mcps.json"
    assert main(["harvest", "--rest-url", stub.url, "--format", "datahub", "--output", str(out),
                 "--state-file", str(tmp_path / "state.json")]) == 0
    return out.read_text()


@pytest.mark.parametrize("previous, current, protected, threshold, removed", [
    ({"a": "flink:x"}, {"a": "flink:x"}, (), 75, ()),
    ({"a": "flink:x", "b": "flink:y"}, {"a": "flink:x"}, (), 75, ("b",)),
    ({"a": "flink:x", "b": "flink:y"}, {"a": "flink:x"}, ("y",), 75, ()),
    ({"a": "flink:x", "b": "flink:y"}, {}, (), 75, ()),  # 100 % > 75 %: fail-safe
])
def test_check(previous, current, protected, threshold, removed):
    assert state.check(previous, current, protected, threshold).removed == removed
