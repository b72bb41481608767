"""The JobManager client against a stub on a real socket: retries, timeouts, bad answers, auth."""

import base64
import json
import time

import pytest

from lakeflow.cli.main import main
from lakeflow.lineage.flink_rest import MAX_BODY_BYTES, Auth, Connection, FlinkRestClient, FlinkRestError
from lakeflow.secret import Secret
from tests.standins.flink_rest import Answer

OVERVIEW = {"jobs": []}
CONFIG = {"flink-version": "2.3.0", "flink-revision": "abc"}


def client(stub, **kw) -> FlinkRestClient:
    kw.setdefault("max_retries", 3)
    kw.setdefault("backoff_s", 0.01)
    return FlinkRestClient(Connection(stub.url, **kw))


def test_5xx_and_429_are_retried_until_an_answer(flink_rest_stub):
    flink_rest_stub.route("/jobs/overview", Answer(503, {"errors": ["busy"]}), Answer(502, b"bad gateway"),
                          Answer(429, {"errors": ["slow down"]}, headers=(("Retry-After", "0"),)), Answer(200, OVERVIEW))
    assert client(flink_rest_stub).jobs() == ()
    assert flink_rest_stub.count("/jobs/overview") == 4


def test_persistent_5xx_fails_after_the_retries_with_the_servers_reason(flink_rest_stub):
    flink_rest_stub.route("/config", Answer(500, {"errors": ["java.lang.IllegalStateException: broken\n\tat x"]}))
    with pytest.raises(FlinkRestError, match=r"HTTP 500: java.lang.IllegalStateException: broken") as err:
        client(flink_rest_stub, max_retries=2).cluster_config()
    assert err.value.status == 500
    assert flink_rest_stub.count("/config") == 3  # 1 + 2 retries


def test_a_slow_answer_times_out_is_retried_and_then_succeeds(flink_rest_stub):
    # libcurl's low-speed check gives up a stalled read after the timeout in whole seconds (1 s), checked
    # from its first timer tick on: 1.5 s here, well before the answer comes
    flink_rest_stub.route("/config", Answer(200, CONFIG, delay_s=2.5), Answer(200, CONFIG))
    t0 = time.monotonic()
    assert client(flink_rest_stub, timeout_s=0.5).cluster_config().flink_version == "2.3.0"
    assert time.monotonic() - t0 < 5
    assert flink_rest_stub.count("/config") == 2


def test_connection_refused_is_a_clear_error():
    from tests.support.fixtures_servers import free_port

    c = FlinkRestClient(Connection(f"http://127.0.0.1:{free_port()}", max_retries=1, backoff_s=0.01))
    with pytest.raises(FlinkRestError, match=r"GET http://127\.0\.0\.1:\d+/v1/config: ConnectionError"):
        c.cluster_config()


@pytest.mark.parametrize("answer, message", [
    (Answer(200, b"<html>proxy login</html>"), "answer is not JSON"),
    (Answer(200, {"no": "jobs"}), None),
    (Answer(200, {"jobs": [{"jid": "x"}]}), r"/v1/jobs/overview: field 'jobs.0.name' missing \(and 1 more\)$"),
    (Answer(200, {"jobs": "nope"}), r"/v1/jobs/overview: field 'jobs': Input should be a valid list \(got str\)$"),
    (Answer(200, ["jobs"]), r"/v1/jobs/overview: the answer: Input should be a valid dictionary .* \(got list\)$"),
    (Answer(200, json.dumps({"jobs": [{"jid": "a", "name": "n", "state": "RUNNING"}] * 50}).encode(), truncate=True),
     "reading the answer failed|not JSON"),
])
def test_garbage_and_truncated_answers_are_clear_errors(flink_rest_stub, answer, message):
    flink_rest_stub.route("/jobs/overview", answer)
    c = client(flink_rest_stub, max_retries=0)
    if message is None:
        assert c.jobs() == ()
    else:
        with pytest.raises(FlinkRestError, match=message):
            c.jobs()


def test_a_huge_answer_is_refused_not_buffered(flink_rest_stub):
    flink_rest_stub.route("/jobs/overview", Answer(huge_bytes=MAX_BODY_BYTES + 10 * 1024 * 1024))
    with pytest.raises(FlinkRestError, match="larger than 64 MiB refused"):
        client(flink_rest_stub, max_retries=0).jobs()


def test_bearer_and_basic_auth_are_sent_and_never_shown(flink_rest_stub):
    flink_rest_stub.route("/config", Answer(200, CONFIG))
    client(flink_rest_stub, auth=Auth(token=Secret("t0k3n"))).cluster_config()
    client(flink_rest_stub, auth=Auth(username="ann", password=Secret("pw"))).cluster_config()
    (_, bearer), (_, basic) = flink_rest_stub.requests
    assert bearer["Authorization"] == "Bearer t0k3n"
    assert basic["Authorization"] == "Basic " + base64.b64encode(b"ann:pw").decode()
    assert "t0k3n" not in repr(Auth(token=Secret("t0k3n")))
    with pytest.raises(ValueError, match="not both"):
        Auth(token=Secret("a"), username="u", password=Secret("p"))


def test_checkpoint_endpoints_answer_none_when_checkpointing_is_off(flink_rest_stub):
    off = Answer(404, {"errors": ["RestHandlerException: Checkpointing is not enabled for this job (j)."]})
    flink_rest_stub.route("/jobs/j/checkpoints", off)
    flink_rest_stub.route("/jobs/j/checkpoints/config", off)
    c = client(flink_rest_stub)
    assert c.checkpoints("j") is None and c.checkpoint_config("j") is None
    assert flink_rest_stub.count("/jobs/j/checkpoints") == 1  # a 404 is not retried


def test_one_unreadable_job_is_reported_and_the_others_are_harvested(recorded_jobmanager, recorded_scenario,
                                                                     tmp_path, capsys):
    broken = recorded_scenario["job_ids"]["harvest-batch"][0]
    recorded_jobmanager.route(f"/jobs/{broken}", Answer(500, {"errors": ["boom"]}))
    out = tmp_path / "h.json"
    code = main(["harvest", "--rest-url", recorded_jobmanager.url, "--output", str(out), "--max-retries", "1"])
    doc = json.loads(out.read_text())
    assert code == 1
    assert [f["job_id"] for f in doc["failed_jobs"]] == [broken]
    assert "HTTP 500: boom" in doc["failed_jobs"][0]["error"]
    assert len(doc["jobs"]) == 6 and broken not in {j["job_id"] for j in doc["jobs"]}
    assert f"failed {broken}" in capsys.readouterr().err


def test_the_plan_is_fetched_separately_when_job_details_leave_it_out(flink_rest_stub):
    detail = {"jid": "j", "name": "n", "state": "FINISHED", "vertices": []}
    plan = {"plan": {"jid": "j", "nodes": [{"id": "v", "description": "Source: KafkaSource-t<br/>", "inputs": []}]}}
    flink_rest_stub.route("/jobs/j", Answer(200, detail))
    flink_rest_stub.route("/jobs/j/plan", Answer(200, plan))
    job = client(flink_rest_stub).job("j")
    assert [n.description for n in job.plan] == ["Source: KafkaSource-t<br/>"]


def test_a_trickling_answer_fails_at_the_overall_deadline(flink_rest_stub):
    # one byte every 0.1 s never trips the 2 s read timeout (libcurl's low-speed limit: under a
    # byte a second for 2 s, so not before the deadline): ~4 s for the whole answer
    flink_rest_stub.route("/config", Answer(200, {**CONFIG, "pad": "x" * 20}, trickle_s=0.1))
    c = client(flink_rest_stub, timeout_s=2, deadline_s=1.5, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(FlinkRestError, match=r"GET http://.*/v1/config: answer not complete within its deadline"):
        c.cluster_config()
    assert time.monotonic() - t0 < 2.5


def test_a_silent_server_fails_at_the_overall_deadline_before_its_read_timeout(flink_rest_stub):
    # no byte for 4 s: the 3 s read timeout would give up at ~3 s; the 1 s deadline ends it first
    flink_rest_stub.route("/config", Answer(200, CONFIG, delay_s=4))
    c = client(flink_rest_stub, timeout_s=3, deadline_s=1, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(FlinkRestError, match=r"answer not complete within its deadline \(0 bytes received\)"):
        c.cluster_config()
    assert time.monotonic() - t0 < 2.5


@pytest.fixture
def proxy_environment(monkeypatch):
    """A clean proxy environment to set: urllib reads either case of each variable."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_the_environments_proxy_carries_the_requests(flink_rest_stub, proxy_environment):
    # the stub, as a proxy, sees absolute URLs; the proxy's login goes to the proxy only, never into a message
    proxy_environment.setenv("http_proxy", flink_rest_stub.url.replace("http://", "http://ann:pr0xy-pw@"))
    c = FlinkRestClient(Connection("http://flink.example:8081", max_retries=0))
    with pytest.raises(FlinkRestError, match=r"HTTP 404") as err:
        c.cluster_config()
    with pytest.raises(FlinkRestError, match=r"HTTP 404"):
        c.jobs()
    assert [p for p, _ in flink_rest_stub.requests] == ["http://flink.example:8081/v1/config",
                                                        "http://flink.example:8081/v1/jobs/overview"]
    login = "Basic " + base64.b64encode(b"ann:pr0xy-pw").decode()
    assert [h["Proxy-Authorization"] for _, h in flink_rest_stub.requests] == [login, login]
    assert "pr0xy-pw" not in str(err.value)


def test_no_proxy_sends_the_requests_straight_to_the_jobmanager(flink_rest_stub, proxy_environment):
    from tests.support.fixtures_servers import free_port

    proxy_environment.setenv("http_proxy", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    proxy_environment.setenv("no_proxy", "127.0.0.1")
    flink_rest_stub.route("/config", Answer(200, CONFIG))
    assert client(flink_rest_stub, max_retries=0).cluster_config().flink_version == "2.3.0"
