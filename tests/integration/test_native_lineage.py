"""Flink's native lineage (FLIP-314): the ingestion job's source and sink declare their datasets,
lakeflow's ``JobStatusChangedListener`` pushes each job's run events into the lineage store (and
to an OpenLineage HTTP endpoint), and ``lakeflow harvest`` merges them with what it pulls, by job id.

Fast: the merge, on answers recorded from a real cluster. Slow: one standalone cluster with the
listener configured, ``flink run`` of the packaged ingestion job, events and harvest compared.

The unit tests (no process): tests/unit/test_native_lineage.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
import requests

from lakeflow.cli.main import main
from lakeflow.schema import load_schema
from lakeflow.lineage import native
from lakeflow.lineage import openlineage as ol
from lakeflow.lineage.config import from_mapping
from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.lineage.flink_rest import Connection
from lakeflow.lineage.plan import Reference, TableRef
from lakeflow.lineage.resolve import Resolver
from lakeflow.lineage.sql_gateway import SqlGatewayClient
from lakeflow.lineage.store import read_events
from tests.integration.test_ingest_flink import packaged_job_env
from tests.standins.sql_gateway import RecordedExecutor, SqlGatewayStandIn
from tests.support.envs import INGEST_PY
from tests.support.fixtures_flink import packaged_job_args
from tests.unit.test_harvest_gateway import ddl
from tests.unit.test_native_lineage import SENSORS  # noqa: F401 (fixtures, constants)
from tests.unit.test_openlineage import assert_valid

ROOT = Path(__file__).resolve().parents[2]


JAR = ROOT / "build" / "lakeflow-flink.jar"


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
    assert [f["name"] for f in facets["schema"]["fields"]] == list(load_schema().names)  # the declared fields
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


SECRET = "s3cr3t-" + uuid.uuid4().hex[:8]
TABLE_CASES = [  # (options, what the harvest names from the same options, as SHOW CREATE TABLE shows them)
    ({"connector": "kafka", "topic": "a;b", "properties.bootstrap.servers": "k1:9092,k2:9092",
      "properties.sasl.jaas.config": f'PlainLoginModule required username="u" password="{SECRET}";'},
     [("kafka://k1:9092", "a"), ("kafka://k1:9092", "b")]),
    ({"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": "k:9092",
      "properties.ssl.keystore.password": SECRET}, [("kafka://k:9092", "t")]),
    ({"connector": "filesystem", "path": "/data/x/"}, [("file", "/data/x")]),
    ({"connector": "filesystem", "path": "s3a://bucket/warehouse/t"}, [("s3://bucket", "warehouse/t")]),
    ({"connector": "filesystem", "path": f"s3://AKIA:{SECRET}@bucket/k"}, [("s3://bucket", "k")]),
    ({"connector": "filesystem", "path": "hdfs://nn:8020/p"}, [("hdfs://nn:8020", "p")]),
    ({"connector": "jdbc", "url": "jdbc:postgresql://DB/shop", "table-name": "orders", "password": SECRET},
     [("postgres://db:5432", "shop.public.orders")]),
    ({"connector": "jdbc", "url": f"jdbc:postgresql://db:6543/shop?user=u&password={SECRET}",
      "table-name": "sales.orders"}, [("postgres://db:6543", "shop.sales.orders")]),
    ({"connector": "jdbc", "url": f"jdbc:mysql://u:{SECRET}@db:3307/crm?useSSL=false", "table-name": "users"},
     [("mysql://db:3307", "crm.users")]),
    ({"connector": "jdbc", "url": f"jdbc:sqlserver://db;databaseName=shop;password={SECRET}", "table-name": "items"},
     [("mssql://db:1433", "shop.dbo.items")]),
    ({"connector": "jdbc", "url": "jdbc:oracle:thin:@db:1521/svc", "table-name": "T"}, [("oracle", "T")]),
    ({"connector": "jdbc", "url": "jdbc:postgresql://db/shop"}, [("postgres://db:5432", "shop.public.t")]),
    ({"connector": "jdbc", "url": "jdbc:h2:mem:x", "table-name": "t"}, []),
    ({"connector": "datagen", "rows-per-second": "1"}, []),
    ({"connector": "kafka", "topic-pattern": "orders-.*", "properties.bootstrap.servers": "k:9092"}, []),
]


TIMES = [1_764_700_000_000, 1_764_700_000_007, 1_764_700_000_120, 1_764_700_000_999]  # a whole second first


@pytest.mark.slow
def test_the_listener_names_a_table_as_the_harvest_does(tmp_path):
    """lakeflow.flink.SqlTableLineage (the listener, on PyFlink's JVM) and the harvest's resolver
    (the same options from SHOW CREATE TABLE) give each table the same datasets; no secret option,
    URL user, password or query reaches the listener's answer; a topic-pattern is one dataset named
    by the pattern, marked, which the harvest resolves to no topic. And the event files' permissions
    each ``lakeflow.lineage.file-mode`` gives (an invalid one: the default, 0640), and its event times:
    always three fractional digits, as lakeflow's Python events, so that a whole second sorts first."""
    cases = [{"identifier": "c.d.t", "kind": "temporary", "options": options} for options, _ in TABLE_CASES]
    modes = ["0640", "660", "0600", "nonsense", "1777"]  # lakeflow.lineage.file-mode values
    env = {**os.environ, "FLINK_LOG_DIR": str(tmp_path)}
    child = subprocess.run([INGEST_PY, "-m", "tests.support.sql_table_lineage_child"], cwd=ROOT, env=env, text=True,
                           input=json.dumps({"tables": cases, "modes": modes, "times": TIMES}), capture_output=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    assert SECRET not in child.stdout
    answer = json.loads(child.stdout)
    assert answer["modes"] == ["rw-r-----", "rw-rw----", "rw-------", "rw-r-----", "rw-r-----"]  # invalid: default
    python = [ol.run_event("START", run_id=str(uuid.uuid4()), job_namespace="flink", job_name="j",
                           event_time=datetime.fromtimestamp(ms / 1000, timezone.utc)).eventTime for ms in TIMES]
    assert answer["times"] == python and python[0].endswith(":40.000Z")
    named = answer["tables"]
    answers = {}
    for i, (options, _) in enumerate(TABLE_CASES):
        with_clause = ",\n".join(f"  '{k}' = '{v}'" for k, v in options.items())
        answers[f"SHOW CREATE TABLE `c{i}`.`d`.`t`"] = ddl(f"CREATE TABLE t (id BIGINT) WITH (\n{with_clause}\n)")
    standin = SqlGatewayStandIn(RecordedExecutor(answers)).start()
    try:
        resolver = Resolver(from_mapping({"connection": {"rest_api_url": "http://x"}}),
                            SqlGatewayClient(Connection(standin.url, max_retries=0)))
        for i, ((options, expected), listener) in enumerate(zip(TABLE_CASES, named, strict=True)):
            harvest = [(r.dataset.namespace, r.dataset.name) for r in
                       resolver.table(Reference("source", "table", "v", "op"), TableRef(f"c{i}", "d", "t"))
                       if r.dataset]
            pattern = options.get("topic-pattern")
            got = [tuple(d) for d in listener["datasets"]]
            assert (listener["connector"], listener["pattern"]) == (options["connector"], pattern)
            assert (got, harvest) == ([("kafka://k:9092", pattern)] if pattern else expected, expected), options
    finally:
        standin.stop()
