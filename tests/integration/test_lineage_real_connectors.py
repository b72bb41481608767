"""Lineage of real jobs (#22), scored as a user sees it: real Kafka (KRaft broker from Maven Central,
flink-sql-connector-kafka), PostgreSQL (Debian) through flink-connector-jdbc and its JDBC catalog,
filesystem sinks, the real SQL Gateway with a file catalog store and a persistent catalog (Flink's
``test-filesystem`` catalog, a stand-in for a Hive Metastore), ``flink run`` DataStream jobs.

One cluster (lakeflow's lineage listener configured), one broker, one database for all fifteen
jobs. The ground truth below is written by hand: every dataset each job really reads and writes,
and whether REST + the gateway can tell it (a filesystem SQL sink, a session table and DataStream
operators cannot). The harvest is scored twice — REST + gateway alone, then with the listener's
events merged — and fails below the targets: precision 100 % both ways, recall 100 % of the edges
REST + gateway can resolve, recall of Kafka and JDBC edges ≥ 95 % with the listener.
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest
import requests

from lakeflow.runtime import jars
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from lakeflow.lineage import native
from lakeflow.lineage.config import from_mapping
from lakeflow.lineage.datasets import DatasetId, from_location
from lakeflow.lineage.harvest import harvest
from tests.support.fixtures_servers import free_port
from tests.support.fixtures_sql_gateway import RealSqlGateway, catalog_jar_set
from tests.support.kafka_broker import KafkaBroker
from tests.support.postgres_server import PostgresServer
from tests.support.envs import INGEST_PY

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LISTENER_JAR = ROOT / "build" / "lakeflow-flink.jar"
JOBS = ROOT / "tests" / "harvest_jobs" / "connectors.py"
TOPICS = ("orders", "orders_enriched", "alerts", "audit", "bad_orders", "clicks", "clicks_copy", "ds_orders")
ORDERS = [json.dumps({"id": i, "customer_id": i % 3 + 1, "amount": 60.0 * i}) for i in range(1, 6)]
SLOTS = 16
T = TypeVar("T")


@dataclass(frozen=True)
class Edge:
    job: str
    role: str  # source / sink
    dataset: DatasetId


@dataclass(frozen=True)
class Stack:
    cluster: FlinkCluster
    gateway: RealSqlGateway
    kafka: KafkaBroker
    postgres: PostgresServer
    store: Path  # the listener's lineage store
    files: Path  # filesystem sinks write under here
    job_ids: dict[str, str]


def ground_truth(stack: Stack) -> dict[Edge, bool]:
    """Every true edge of the jobs, and whether REST + the gateway can resolve it."""
    kafka = lambda topic: DatasetId(f"kafka://{stack.kafka.bootstrap}", topic)  # noqa: E731
    pg = lambda table: DatasetId(f"postgres://{stack.postgres.host}", f"shop.public.{table}")  # noqa: E731
    fs = lambda name: from_location(str(stack.files / name))  # noqa: E731
    edges = {
        "kafka-to-kafka": ([kafka("orders")], [kafka("orders_enriched")], ()),
        "kafka-to-jdbc-table": ([kafka("orders")], [pg("orders_copy")], ()),
        "kafka-to-jdbc-catalog": ([kafka("orders")], [pg("alerts")], ()),
        "lookup-join": ([kafka("orders"), pg("customers")], [kafka("alerts")], ()),
        "kafka-to-filesystem": ([kafka("orders")], [fs("archive")], [fs("archive")]),
        "statement-set": ([kafka("orders")], [kafka("audit"), pg("orders_copy")], ()),
        "view": ([kafka("orders")], [kafka("alerts")], ()),
        "batch-jdbc": ([pg("customers")], [pg("customers_copy")], ()),
        "failed": ([kafka("bad_orders")], [pg("alerts")], ()),
        "cancelled": ([kafka("clicks")], [kafka("clicks_copy")], ()),
        "session-table": ([kafka("orders")], [pg("orders_copy")], [kafka("orders")]),
        "datagen-to-kafka": ([], [kafka("audit")], ()),
        "ds-kafka-to-kafka": ([kafka("orders")], [kafka("ds_orders")], [kafka("orders"), kafka("ds_orders")]),
        "ds-file-sink": ([], [fs("ds-numbers")], [fs("ds-numbers")]),
        "ds-named-like-kafka": ([], [], ()),
    }
    truth = {}
    for job, (inputs, outputs, beyond_rest) in edges.items():
        for role, datasets in (("source", inputs), ("sink", outputs)):
            for d in datasets:
                truth[Edge(job, role, d)] = d not in beyond_rest
    return truth


def sql_setup(stack_kafka: KafkaBroker, postgres: PostgresServer, files: Path) -> list[str]:
    """The persistent catalogs and their tables, as a user creates them through the gateway."""
    jdbc = f"'username' = '{postgres.user}', 'password' = '{postgres.password}'"

    def kafka_table(name: str, topic: str, extra: str = "") -> str:
        return (f"CREATE TABLE lake.streams.{name} (id BIGINT, customer_id BIGINT, amount DOUBLE{extra}) WITH ("
                f"'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = "
                f"'{stack_kafka.bootstrap}', 'properties.group.id' = 'lineage-{name}', "
                "'scan.startup.mode' = 'earliest-offset', 'format' = 'json')")

    return [
        f"CREATE CATALOG pg WITH ('type' = 'jdbc', 'base-url' = 'jdbc:postgresql://{postgres.host}', "
        f"'default-database' = 'shop', {jdbc})",
        kafka_table("orders", "orders", ", proc AS PROCTIME()"),
        kafka_table("orders_enriched", "orders_enriched"),
        kafka_table("alerts", "alerts"),
        kafka_table("audit", "audit"),
        kafka_table("bad_orders", "bad_orders"),
        kafka_table("clicks", "clicks"),
        kafka_table("clicks_copy", "clicks_copy"),
        "CREATE TABLE lake.streams.orders_pg (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
        f"'connector' = 'jdbc', 'url' = '{postgres.jdbc_url('shop')}', 'table-name' = 'orders_copy', {jdbc})",
        "CREATE TABLE lake.streams.archive (id BIGINT, amount DOUBLE) WITH ("
        f"'connector' = 'filesystem', 'path' = '{files / 'archive'}', 'format' = 'json')",
    ]


JOBS_SQL = {
    "kafka-to-kafka": ["INSERT INTO lake.streams.orders_enriched SELECT id, customer_id, amount * 2 "
                       "FROM lake.streams.orders"],
    "kafka-to-jdbc-table": ["INSERT INTO lake.streams.orders_pg SELECT id, customer_id, amount "
                            "FROM lake.streams.orders"],
    "kafka-to-jdbc-catalog": ["INSERT INTO pg.shop.`public.alerts` SELECT id, amount FROM lake.streams.orders "
                              "WHERE amount > 200"],
    "lookup-join": ["INSERT INTO lake.streams.alerts SELECT o.id, o.customer_id, o.amount FROM lake.streams.orders "
                    "AS o JOIN pg.shop.`public.customers` FOR SYSTEM_TIME AS OF o.proc AS c "
                    "ON o.customer_id = c.id WHERE c.vip"],
    "kafka-to-filesystem": ["INSERT INTO lake.streams.archive SELECT id, amount FROM lake.streams.orders"],
    "statement-set": ["EXECUTE STATEMENT SET BEGIN "
                      "INSERT INTO lake.streams.audit SELECT id, customer_id, amount FROM lake.streams.orders; "
                      "INSERT INTO lake.streams.orders_pg SELECT id, customer_id, amount FROM lake.streams.orders; "
                      "END"],
    # the test-filesystem catalog keeps no views: a session's view (the plan shows its tables either way)
    "view": ["CREATE TEMPORARY VIEW big_orders AS SELECT id, customer_id, amount FROM lake.streams.orders "
             "WHERE amount > 100",
             "INSERT INTO lake.streams.alerts SELECT id, customer_id, amount FROM big_orders"],
    "batch-jdbc": ["SET 'execution.runtime-mode' = 'batch'",
                   "INSERT INTO pg.shop.`public.customers_copy` SELECT id, name FROM pg.shop.`public.customers`"],
    "failed": ["INSERT INTO pg.shop.`public.alerts` SELECT id, amount FROM lake.streams.bad_orders"],
    "cancelled": ["INSERT INTO lake.streams.clicks_copy SELECT * FROM lake.streams.clicks"],
    "session-table": ["CREATE TEMPORARY TABLE session_orders (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                      "'connector' = 'kafka', 'topic' = 'orders', 'properties.bootstrap.servers' = '{bootstrap}', "
                      "'properties.group.id' = 'lineage-session', 'scan.startup.mode' = 'earliest-offset', "
                      "'format' = 'json')",
                      "INSERT INTO lake.streams.orders_pg SELECT * FROM session_orders"],
    "datagen-to-kafka": ["CREATE TEMPORARY TABLE numbers (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                         "'connector' = 'datagen', 'rows-per-second' = '1')",
                         "INSERT INTO lake.streams.audit SELECT * FROM numbers"],
}
POSTGRES_SETUP = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, name TEXT, vip BOOLEAN);
INSERT INTO customers VALUES (1, 'ann', true), (2, 'bob', false), (3, 'cy', true);
CREATE TABLE customers_copy (id BIGINT, name TEXT);
CREATE TABLE alerts (id BIGINT, amount DOUBLE PRECISION);
CREATE TABLE orders_copy (id BIGINT, customer_id BIGINT, amount DOUBLE PRECISION);
"""


def _jobs(rest_url: str) -> dict[str, dict]:
    return {j["name"]: j for j in requests.get(f"{rest_url}/v1/jobs/overview", timeout=10).json()["jobs"]}


def _wait_states(rest_url: str, wanted: dict[str, set[str]], timeout: float = 180.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        states = {name: j["state"] for name, j in _jobs(rest_url).items()}
        if all(states.get(name) in ok for name, ok in wanted.items()):
            return states
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs not in the wanted states after {timeout:.0f}s: {states}")
        time.sleep(1)


@pytest.fixture(scope="module")
def stack(kafka_broker: KafkaBroker, postgres_server: PostgresServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The cluster (connectors and lakeflow's listener in lib/), its gateway and all the jobs submitted."""
    assert LISTENER_JAR.is_file(), f"{LISTENER_JAR} missing: make jar"
    work = tmp_path_factory.mktemp("lineage-real")
    store, files = work / "lineage", work / "files"
    connectors = jars.connector_jars()
    conf = {**native.listener_conf(store), "taskmanager.numberOfTaskSlots": SLOTS,
            "taskmanager.memory.process.size": "2048m", "restart-strategy.type": "none",
            "execution.checkpointing.interval": "2s"}
    cluster = FlinkCluster(work / "cluster", rest_port=free_port(), rpc_port=free_port(), conf=conf,
                           lib_jars=[LISTENER_JAR, *connectors], secret_variable=is_secret_key)
    timings: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:  # the data is written while the cluster starts
        data = pool.submit(_timed, timings, "data", _write_data, kafka_broker, postgres_server)
        _timed(timings, "cluster", cluster.start)
        data.result()
    try:
        (work / "catalog-store").mkdir()
        url = _timed(timings, "gateway", cluster.start_sql_gateway, free_port(),
                     jars=[*jars.fetch(catalog_jar_set()), *connectors, LISTENER_JAR],
                     conf={"table.catalog-store.kind": "file",
                           "table.catalog-store.file.path": str(work / "catalog-store")})
        gateway = RealSqlGateway(url, work)
        setup = gateway.open_session()
        gateway.create_catalog(setup, "lake", "streams")
        for statement in sql_setup(kafka_broker, postgres_server, files):
            gateway.run(setup, statement)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as pool:  # the flink run client beside the gateway's submissions
            datastream = pool.submit(cluster.flink, ["run", "-pyclientexec", INGEST_PY, "-pyexec", INGEST_PY,
                                                     "-py", str(JOBS), kafka_broker.bootstrap,
                                                     str(files / "ds-numbers")], timeout=300)
            job_ids = dict(pool.map(lambda job: (job[0], _submit(gateway, *job, kafka_broker.bootstrap)),
                                    JOBS_SQL.items()))
            done = datastream.result()
        timings["jobs"] = time.monotonic() - started
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        _wait_states(cluster.rest_url, {"failed": {"FAILED"}, "batch-jdbc": {"FINISHED"},
                                        "cancelled": {"RUNNING"}})
        requests.patch(f"{cluster.rest_url}/v1/jobs/{job_ids['cancelled']}?mode=cancel", timeout=10)
        _wait_states(cluster.rest_url, {"cancelled": {"CANCELED"}})
        time.sleep(1)  # the listener writes on the JobManager's I/O threads
        print(f"\nsetup: {', '.join(f'{k} {v:.1f}s' for k, v in timings.items())}")
        plans = {j["name"]: [n["description"] for n in requests.get(f"{cluster.rest_url}/v1/jobs/{j['jid']}",
                                                                    timeout=10).json()["plan"]["nodes"]]
                 for j in _jobs(cluster.rest_url).values()}
        (work / "plans.json").write_text(json.dumps(dict(sorted(plans.items())), indent=1) + "\n")
        print(f"plans: {work / 'plans.json'} (tests/fixtures/harvest/real-connectors-plans.json is a copy)")
        yield Stack(cluster, gateway, kafka_broker, postgres_server, store, files, job_ids)
    finally:
        cluster.stop()


def _timed(timings: dict[str, float], what: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    started = time.monotonic()
    try:
        return call(*args, **kwargs)
    finally:
        timings[what] = time.monotonic() - started


def _write_data(kafka: KafkaBroker, postgres: PostgresServer) -> None:
    """The topics (created in parallel: one JVM each) with their records, and the Postgres tables."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(kafka.create_topic, TOPICS))
    kafka.produce("orders", ORDERS)
    kafka.produce("clicks", ORDERS)
    kafka.produce("bad_orders", ["this is not JSON"])
    postgres.create_database("shop")
    postgres.sql(POSTGRES_SETUP, "shop")


def _submit(gateway: RealSqlGateway, name: str, statements: list[str], bootstrap: str) -> str:
    """Run one job's statements in a session of its own; the id of the job they submit."""
    session = gateway.open_session()
    gateway.run(session, f"SET 'pipeline.name' = '{name}'")
    for statement in statements:
        result = gateway.run(session, statement.replace("{bootstrap}", bootstrap))
    assert result.job_id, f"{name}: no job submitted"
    return result.job_id


def harvested(stack: Stack, with_listener: bool) -> tuple[set[Edge], dict[str, list[str]]]:
    """The harvest's edges of the test's jobs (REST + gateway, plus the listener's events), and
    each job's unresolved references."""
    recipe: dict = {"connection": {"rest_api_url": stack.cluster.rest_url, "sql_gateway_url": stack.gateway.url}}
    if with_listener:
        recipe["lineage_dir"] = str(stack.store)
    graph = harvest(from_mapping(recipe)).graph
    assert stack.postgres.password not in repr(graph)  # the JDBC tables' DDL holds it; no name or reason does
    names = {e.job for e in ground_truth(stack)} | set(JOBS_SQL)
    edges = {Edge(j.name, role, d) for j in graph.jobs if j.name in names
             for role, datasets in (("source", j.inputs), ("sink", j.outputs)) for d in datasets}
    return edges, {j.name: list(j.unresolved) for j in graph.jobs if j.name in names}


def score(found: set[Edge], truth: dict[Edge, bool]) -> dict[str, float]:
    true = found & set(truth)
    kafka_jdbc = {e for e in truth if e.dataset.platform in ("kafka", "postgres")}
    resolvable = {e for e, ok in truth.items() if ok}
    return {"precision": len(true) / len(found) if found else 1.0,
            "recall": len(true) / len(truth),
            "recall_resolvable": len(true & resolvable) / len(resolvable),
            "recall_kafka_jdbc": len(true & kafka_jdbc) / len(kafka_jdbc),
            "found": len(found), "true": len(true), "truth": len(truth), "resolvable": len(resolvable)}


def test_the_harvest_scores_on_real_connectors(stack):
    truth = ground_truth(stack)
    states = {name: j["state"] for name, j in _jobs(stack.cluster.rest_url).items()}
    assert set(states) == {e.job for e in truth} | {"ds-named-like-kafka"}, states
    ended = {"failed": "FAILED", "cancelled": "CANCELED", "batch-jdbc": "FINISHED", "ds-file-sink": "FINISHED"}
    assert {name: states[name] for name in ended} == ended
    assert {state for name, state in states.items() if name not in ended} <= {"RUNNING", "FINISHED"}, states
    table = {}
    for with_listener in (False, True):
        found, unresolved = harvested(stack, with_listener)
        table[with_listener] = score(found, truth)
        print(f"\nlistener={with_listener}: {table[with_listener]}")
        false_edges = sorted(found - set(truth), key=str)
        missed = sorted((e for e, ok in truth.items() if ok and e not in found), key=str)
        assert not false_edges, f"false edges (listener={with_listener}): {false_edges}"
        assert not missed, f"missed resolvable edges (listener={with_listener}): {missed}; unresolved: {unresolved}"
    without, with_ = table[False], table[True]
    assert without["precision"] == with_["precision"] == 1.0
    assert without["recall_resolvable"] == 1.0
    assert with_["recall_kafka_jdbc"] >= 0.95, with_
