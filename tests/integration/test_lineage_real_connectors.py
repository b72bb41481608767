"""Lineage of real jobs (#22, #35), scored as a user sees it: real Kafka (KRaft broker from Maven Central,
flink-sql-connector-kafka), PostgreSQL (Debian) through flink-connector-jdbc and its JDBC catalog,
filesystem sinks, the real SQL Gateway with a file catalog store and a persistent catalog (Flink's
``test-filesystem`` catalog, a stand-in for a Hive Metastore), ``flink run`` DataStream and PyFlink jobs.

One cluster (lakeflow's lineage listener configured as on a cluster lakeflow did not start), one
broker, one database for all the jobs: tables of persistent catalogs, temporary tables and tables of
the in-memory ``default_catalog`` of gateway sessions, tables defined inside a PyFlink program
(job-local), DataStream connectors; filesystem sinks in a streaming, a batch and a cancelled job.
The ground truth below is written by hand: every dataset each job really reads and writes, its
table kind, and whether REST + the gateway can tell it. The harvest is scored twice — REST +
gateway alone, then with the listener's events merged — printed by connector and table kind, and
fails below the targets: precision 100 % both ways; without the listener, every edge REST + the
gateway can resolve; with it, every edge of a SQL table (but a Kafka topic-pattern's, which names
no topic) and Kafka + JDBC recall ≥ 95 %. Then a harvest as another Unix user than the cluster's
reads the same events (their group's read permission, the folder's set-group-id bit).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest
import requests

from lakeflow.cli.main import main
from lakeflow.lineage import native
from lakeflow.lineage.config import from_mapping
from lakeflow.lineage.datasets import DatasetId, from_location
from lakeflow.lineage.harvest import harvest
from lakeflow.runtime import jars
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from tests.support.envs import INGEST_PY
from tests.support.fixtures_servers import free_port
from tests.support.fixtures_sql_gateway import RealSqlGateway, catalog_jar_set
from tests.support.kafka_broker import KafkaBroker
from tests.support.postgres_server import PostgresServer
from tests.unit.test_openlineage import assert_valid

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LISTENER_JAR = ROOT / "build" / "lakeflow-flink.jar"
JOBS = ROOT / "tests" / "harvest_jobs" / "connectors.py"
TOPICS = ("orders", "orders_enriched", "alerts", "audit", "bad_orders", "clicks", "clicks_copy", "ds_orders",
          "temp_out")
ORDERS = [json.dumps({"id": i, "customer_id": i % 3 + 1, "amount": 60.0 * i}) for i in range(1, 6)]
SLOTS = 24
JAAS_SECRET = "jaas-" + os.urandom(8).hex()  # a Kafka table's sasl.jaas.config holds it: no event may
HARVEST_USER, LINEAGE_GROUP = "lakeflow-harvest", "lakeflow-lineage"  # the other user, the store's group
KINDS = ("catalog", "temporary", "in-memory", "job-local", "datastream")
T = TypeVar("T")


@dataclass(frozen=True)
class Edge:
    job: str
    role: str  # source / sink
    dataset: DatasetId


@dataclass(frozen=True)
class Truth:
    kind: str  # of the table: one of KINDS
    rest: bool  # REST + the gateway can resolve it
    sql: bool  # a SQL table's edge the listener must name (not a DataStream's, not a topic-pattern's)


@dataclass(frozen=True)
class Stack:
    cluster: FlinkCluster
    gateway: RealSqlGateway
    kafka: KafkaBroker
    postgres: PostgresServer
    store: Path  # the listener's lineage store
    files: Path  # filesystem sinks write under here
    job_ids: dict[str, str]


def ground_truth(stack: Stack) -> dict[Edge, Truth]:
    """Every true edge of the jobs: its table kind, whether REST + the gateway can resolve it."""
    kafka = lambda topic: DatasetId(f"kafka://{stack.kafka.bootstrap}", topic)  # noqa: E731
    pg = lambda table: DatasetId(f"postgres://{stack.postgres.host}", f"shop.public.{table}")  # noqa: E731
    fs = lambda name: from_location(str(stack.files / name))  # noqa: E731
    cat, tmp, mem, local, ds = KINDS
    # job: [(role, dataset, kind, REST + gateway can tell)]
    edges: dict[str, list[tuple[str, DatasetId, str, bool]]] = {
        "kafka-to-kafka": [("source", kafka("orders"), cat, True), ("sink", kafka("orders_enriched"), cat, True)],
        "kafka-to-jdbc-table": [("source", kafka("orders"), cat, True), ("sink", pg("orders_copy"), cat, True)],
        "kafka-to-jdbc-catalog": [("source", kafka("orders"), cat, True), ("sink", pg("alerts"), cat, True)],
        "lookup-join": [("source", kafka("orders"), cat, True), ("source", pg("customers"), cat, True),
                        ("sink", kafka("alerts"), cat, True)],
        "kafka-to-filesystem": [("source", kafka("orders"), cat, True), ("sink", fs("archive"), cat, False)],
        "statement-set": [("source", kafka("orders"), cat, True), ("sink", kafka("audit"), cat, True),
                          ("sink", pg("orders_copy"), cat, True)],
        "view": [("source", kafka("orders"), cat, True), ("sink", kafka("alerts"), cat, True)],
        "batch-jdbc": [("source", pg("customers"), cat, True), ("sink", pg("customers_copy"), cat, True)],
        "failed": [("source", kafka("bad_orders"), cat, True), ("sink", pg("alerts"), cat, True)],
        "cancelled": [("source", kafka("clicks"), cat, True), ("sink", kafka("clicks_copy"), cat, True)],
        "cancelled-filesystem": [("source", kafka("clicks"), cat, True), ("sink", fs("clicks-archive"), cat, False)],
        "session-table": [("source", kafka("orders"), tmp, False), ("sink", pg("orders_copy"), cat, True)],
        "datagen-to-kafka": [("sink", kafka("audit"), cat, True)],
        "temporary-kafka": [("source", kafka("orders"), tmp, False), ("source", kafka("clicks"), tmp, False),
                            ("sink", kafka("temp_out"), tmp, False)],
        "temporary-batch-filesystem": [("source", pg("customers"), tmp, False),
                                       ("sink", fs("temp-customers"), tmp, False)],
        "in-memory-tables": [("source", kafka("orders"), mem, False), ("sink", fs("mem-archive"), mem, False),
                             ("sink", pg("orders_mem"), mem, False)],
        "kafka-pattern": [("source", kafka("ds_orders"), tmp, False)],  # topic-pattern 'ds_.*'
        "local-kafka-to-jdbc": [("source", kafka("orders"), local, False), ("sink", pg("orders_local"), local, False)],
        "local-batch-filesystem": [("source", pg("customers"), local, False),
                                   ("sink", fs("local-customers"), local, False)],
        "ds-kafka-to-kafka": [("source", kafka("orders"), ds, False), ("sink", kafka("ds_orders"), ds, False)],
        "ds-file-sink": [("sink", fs("ds-numbers"), ds, False)],
        "ds-named-like-kafka": [],
    }
    return {Edge(job, role, d): Truth(kind, rest, kind != ds and job != "kafka-pattern")
            for job, items in edges.items() for role, d, kind, rest in items}


def sql_setup(stack_kafka: KafkaBroker, postgres: PostgresServer, files: Path) -> list[str]:
    """The persistent catalogs and their tables, as a user creates them through the gateway."""
    jdbc = f"'username' = '{postgres.user}', 'password' = '{postgres.password}'"

    def kafka_table(name: str, topic: str, extra: str = "") -> str:
        return (f"CREATE TABLE lake.streams.{name} (id BIGINT, customer_id BIGINT, amount DOUBLE{extra}) WITH ("
                f"'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = "
                f"'{stack_kafka.bootstrap}', 'properties.group.id' = 'lineage-{name}', "
                "'scan.startup.mode' = 'earliest-offset', 'format' = 'json')")

    def filesystem_table(name: str, folder: str) -> str:
        return (f"CREATE TABLE lake.streams.{name} (id BIGINT, amount DOUBLE) WITH ("
                f"'connector' = 'filesystem', 'path' = '{files / folder}', 'format' = 'json')")

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
        filesystem_table("archive", "archive"),
        filesystem_table("clicks_archive", "clicks-archive"),
    ]


# {bootstrap}, {jdbc_url}, {jdbc} (user and password options), {files}, {jaas} are filled in by _submit
KAFKA = ("'connector' = 'kafka', 'properties.bootstrap.servers' = '{bootstrap}', "
         "'scan.startup.mode' = 'earliest-offset', 'format' = 'json'")
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
    "cancelled-filesystem": ["INSERT INTO lake.streams.clicks_archive SELECT id, amount FROM lake.streams.clicks"],
    "session-table": ["CREATE TEMPORARY TABLE session_orders (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                      f"{KAFKA}, 'topic' = 'orders', 'properties.group.id' = 'lineage-session')",
                      "INSERT INTO lake.streams.orders_pg SELECT * FROM session_orders"],
    "datagen-to-kafka": ["CREATE TEMPORARY TABLE numbers (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                         "'connector' = 'datagen', 'rows-per-second' = '1')",
                         "INSERT INTO lake.streams.audit SELECT * FROM numbers"],
    # a topic list, a secret in sasl.jaas.config (unused on a PLAINTEXT listener), a temporary sink
    "temporary-kafka": ["CREATE TEMPORARY TABLE temp_in (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                        f"{KAFKA}, 'topic' = 'orders;clicks', 'properties.group.id' = 'lineage-temp', "
                        "'properties.sasl.jaas.config' = 'org.apache.kafka.common.security.plain.PlainLoginModule "
                        "required username=\"svc\" password=\"{jaas}\";')",
                        "CREATE TEMPORARY TABLE temp_out (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                        f"{KAFKA}, 'topic' = 'temp_out')",
                        "INSERT INTO temp_out SELECT * FROM temp_in"],
    # the identifier default_catalog.default_database.archive is another path in local-batch-filesystem
    "temporary-batch-filesystem": ["SET 'execution.runtime-mode' = 'batch'",
                                   "CREATE TEMPORARY TABLE customers_tmp (id BIGINT, name STRING) WITH ("
                                   "'connector' = 'jdbc', 'url' = '{jdbc_url}', 'table-name' = 'customers', {jdbc})",
                                   "CREATE TEMPORARY TABLE archive (id BIGINT, name STRING) WITH ("
                                   "'connector' = 'filesystem', 'path' = '{files}/temp-customers', 'format' = 'json')",
                                   "INSERT INTO archive SELECT * FROM customers_tmp"],
    # tables of the session's in-memory default_catalog (not temporary)
    "in-memory-tables": ["CREATE TABLE mem_orders (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                         f"{KAFKA}, 'topic' = 'orders', 'properties.group.id' = 'lineage-mem')",
                         "CREATE TABLE mem_archive (id BIGINT, amount DOUBLE) WITH ('connector' = 'filesystem', "
                         "'path' = '{files}/mem-archive', 'format' = 'json')",
                         "CREATE TABLE mem_pg (id BIGINT, customer_id BIGINT, amount DOUBLE) WITH ("
                         "'connector' = 'jdbc', 'url' = '{jdbc_url}', 'table-name' = 'orders_mem', {jdbc})",
                         "EXECUTE STATEMENT SET BEGIN INSERT INTO mem_archive SELECT id, amount FROM mem_orders; "
                         "INSERT INTO mem_pg SELECT * FROM mem_orders; END"],
    "kafka-pattern": ["CREATE TEMPORARY TABLE ds_topics (line STRING) WITH ('connector' = 'kafka', "
                      "'topic-pattern' = 'ds_.*', 'properties.bootstrap.servers' = '{bootstrap}', "
                      "'properties.group.id' = 'lineage-pattern', 'scan.startup.mode' = 'earliest-offset', "
                      "'format' = 'raw')",
                      "CREATE TEMPORARY TABLE nowhere (line STRING) WITH ('connector' = 'blackhole')",
                      "INSERT INTO nowhere SELECT * FROM ds_topics"],
}
POSTGRES_SETUP = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, name TEXT, vip BOOLEAN);
INSERT INTO customers VALUES (1, 'ann', true), (2, 'bob', false), (3, 'cy', true);
CREATE TABLE customers_copy (id BIGINT, name TEXT);
CREATE TABLE alerts (id BIGINT, amount DOUBLE PRECISION);
CREATE TABLE orders_copy (id BIGINT, customer_id BIGINT, amount DOUBLE PRECISION);
CREATE TABLE orders_mem (id BIGINT, customer_id BIGINT, amount DOUBLE PRECISION);
CREATE TABLE orders_local (id BIGINT, customer_id BIGINT, amount DOUBLE PRECISION);
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


def _other_user() -> None:
    """The harvest's Unix user, in the group that owns the lineage store (created once, as root)."""
    if subprocess.run(["getent", "group", LINEAGE_GROUP], capture_output=True).returncode != 0:
        subprocess.run(["groupadd", "--system", LINEAGE_GROUP], check=True, capture_output=True)
    if subprocess.run(["id", HARVEST_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--groups",
                        LINEAGE_GROUP, HARVEST_USER], check=True, capture_output=True)


@pytest.fixture(scope="module")
def lineage_store() -> Iterator[Path]:
    """The listener's store as docs/harvest.md sets it up: a folder of the lineage group, which reads
    it (``rwxr-s---``: new files take the folder's group); outside the tests' private temp folders,
    so that another user can reach it."""
    store = Path(tempfile.mkdtemp(prefix="lakeflow-lineage-"))
    if os.geteuid() == 0:
        _other_user()
        shutil.chown(store, group=LINEAGE_GROUP)
        store.chmod(0o2750)
    try:
        yield store
    finally:
        shutil.rmtree(store, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(kafka_broker: KafkaBroker, postgres_server: PostgresServer, lineage_store: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The cluster (connectors and lakeflow's listener in lib/), its gateway and all the jobs submitted."""
    assert LISTENER_JAR.is_file(), f"{LISTENER_JAR} missing: make jar"
    work = tmp_path_factory.mktemp("lineage-real")
    store, files = lineage_store, work / "files"
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
        values = {"bootstrap": kafka_broker.bootstrap, "jdbc_url": postgres_server.jdbc_url("shop"),
                  "jdbc": f"'username' = '{postgres_server.user}', 'password' = '{postgres_server.password}'",
                  "files": str(files), "jaas": JAAS_SECRET}
        secrets_env = {"LINEAGE_JDBC_USER": postgres_server.user, "LINEAGE_JDBC_PASSWORD": postgres_server.password}
        with ThreadPoolExecutor(max_workers=4) as pool:  # the flink run client beside the gateway's submissions
            client = pool.submit(cluster.flink, ["run", "-pyclientexec", INGEST_PY, "-pyexec", INGEST_PY,
                                                 "-py", str(JOBS), kafka_broker.bootstrap, str(files / "ds-numbers"),
                                                 str(files), postgres_server.jdbc_url("shop")],
                                 env=secrets_env, timeout=300)
            job_ids = dict(pool.map(lambda job: (job[0], _submit(gateway, *job, values)), JOBS_SQL.items()))
            done = client.result()
        timings["jobs"] = time.monotonic() - started
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        _wait_states(cluster.rest_url, {"failed": {"FAILED"}, "batch-jdbc": {"FINISHED"},
                                        "temporary-batch-filesystem": {"FINISHED"},
                                        "local-batch-filesystem": {"FINISHED"},
                                        "cancelled": {"RUNNING"}, "cancelled-filesystem": {"RUNNING"}})
        for name in ("cancelled", "cancelled-filesystem"):
            requests.patch(f"{cluster.rest_url}/v1/jobs/{job_ids[name]}?mode=cancel", timeout=10)
        _wait_states(cluster.rest_url, {"cancelled": {"CANCELED"}, "cancelled-filesystem": {"CANCELED"}})
        time.sleep(1)  # the listener writes on the JobManager's I/O threads
        print(f"\nsetup: {', '.join(f'{k} {v:.1f}s' for k, v in timings.items())}")
        plans = {j["name"]: [n["description"] for n in requests.get(f"{cluster.rest_url}/v1/jobs/{j['jid']}",
                                                                    timeout=10).json()["plan"]["nodes"]]
                 for j in _jobs(cluster.rest_url).values()}
        (work / "plans.json").write_text(json.dumps(dict(sorted(plans.items())), indent=1) + "\n")
        (work / "listener.json").write_text(_recorded(store, {kafka_broker.bootstrap: "k:9092",
                                                              postgres_server.host: "db:5432", str(files): "/files"}))
        print(f"plans: {work / 'plans.json'}, listener: {work / 'listener.json'} (their copies: "
              "tests/fixtures/harvest/real-connectors-{plans,listener}.json)")
        yield Stack(cluster, gateway, kafka_broker, postgres_server, store, files, job_ids)
    finally:
        cluster.stop()


def _recorded(store: Path, replace: dict[str, str]) -> str:
    """The datasets of every job's START event (facets without their producer and schema URL), the
    test's addresses and folders replaced by fixed ones: a fixture the fast tests replay."""
    jobs = {}
    for path in sorted(store.glob("*-START.json")):
        event = json.loads(path.read_text())
        for d in event["inputs"] + event["outputs"]:
            for facet in d["facets"].values():
                facet.pop("_producer", None), facet.pop("_schemaURL", None)
        jobs[event["job"]["name"]] = {"inputs": event["inputs"], "outputs": event["outputs"]}
    text = json.dumps(dict(sorted(jobs.items())), indent=1) + "\n"
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


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


def _submit(gateway: RealSqlGateway, name: str, statements: list[str], values: dict[str, str]) -> str:
    """Run one job's statements in a session of its own; the id of the job they submit."""
    session = gateway.open_session()
    gateway.run(session, f"SET 'pipeline.name' = '{name}'")
    for statement in statements:
        for key, value in values.items():
            statement = statement.replace("{" + key + "}", value)
        result = gateway.run(session, statement)
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
    names = set(_jobs(stack.cluster.rest_url))
    edges = {Edge(j.name, role, d) for j in graph.jobs if j.name in names
             for role, datasets in (("source", j.inputs), ("sink", j.outputs)) for d in datasets}
    return edges, {j.name: list(j.unresolved) for j in graph.jobs if j.name in names and j.unresolved}


def score(found: set[Edge], truth: dict[Edge, Truth]) -> dict[str, float]:
    true = found & set(truth)
    kafka_jdbc = {e for e in truth if e.dataset.platform in ("kafka", "postgres")}
    resolvable = {e for e, t in truth.items() if t.rest}
    return {"precision": len(true) / len(found) if found else 1.0,
            "recall": len(true) / len(truth),
            "recall_resolvable": len(true & resolvable) / len(resolvable),
            "recall_kafka_jdbc": len(true & kafka_jdbc) / len(kafka_jdbc),
            "found": len(found), "true": len(true), "truth": len(truth), "resolvable": len(resolvable)}


CONNECTORS = {"kafka": "Kafka", "postgres": "JDBC", "file": "filesystem"}


def breakdown(found: dict[bool, set[Edge]], truth: dict[Edge, Truth]) -> str:
    """Precision and recall by connector and by table kind, without and with the listener (a table)."""
    groups: list[tuple[str, Callable[[Edge], bool]]] = [("all", lambda e: True)]
    groups += [(f"connector {name}", lambda e, p=p: e.dataset.platform == p) for p, name in CONNECTORS.items()]
    groups += [(f"kind {kind}", lambda e, k=kind: e in truth and truth[e].kind == k) for kind in KINDS]
    lines = ["| edges | truth | without: found | precision | recall | with: found | precision | recall |",
             "|---|---|---|---|---|---|---|---|"]
    for label, member in groups:
        true = {e for e in truth if member(e)}
        cells = [label, str(len(true))]
        for with_listener in (False, True):
            got = {e for e in found[with_listener] if member(e)}
            hits = got & true
            precision = f"{len(hits) / len(got):.0%}" if got else "—"
            cells += [str(len(got)), precision, f"{len(hits) / len(true):.0%} ({len(hits)})" if true else "—"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_the_harvest_scores_on_real_connectors(stack):
    truth = ground_truth(stack)
    states = {name: j["state"] for name, j in _jobs(stack.cluster.rest_url).items()}
    assert set(states) == {e.job for e in truth} | {"ds-named-like-kafka"}, states
    ended = {"failed": "FAILED", "cancelled": "CANCELED", "cancelled-filesystem": "CANCELED",
             "batch-jdbc": "FINISHED", "temporary-batch-filesystem": "FINISHED",
             "local-batch-filesystem": "FINISHED", "ds-file-sink": "FINISHED"}
    assert {name: states[name] for name in ended} == ended
    assert {state for name, state in states.items() if name not in ended} <= {"RUNNING", "FINISHED"}, states
    found, unresolved, table = {}, {}, {}
    for with_listener in (False, True):
        found[with_listener], unresolved[with_listener] = harvested(stack, with_listener)
        table[with_listener] = score(found[with_listener], truth)
        print(f"\nlistener={with_listener}: {table[with_listener]}")
    print("\n" + breakdown(found, truth))
    for with_listener in (False, True):
        false_edges = sorted(found[with_listener] - set(truth), key=str)
        assert not false_edges, f"false edges (listener={with_listener}): {false_edges}"
    missed = sorted((e for e, t in truth.items() if t.rest and e not in found[False]), key=str)
    assert not missed, f"missed resolvable edges without the listener: {missed}; unresolved: {unresolved[False]}"
    missed = sorted((e for e, t in truth.items() if (t.rest or t.sql) and e not in found[True]), key=str)
    assert not missed, f"missed SQL edges with the listener: {missed}; unresolved: {unresolved[True]}"
    without, with_ = table[False], table[True]
    assert without["precision"] == with_["precision"] == 1.0
    assert with_["recall_kafka_jdbc"] >= 0.95, with_
    # what stays unresolved with the listener, once per operator: a pattern, and what no lineage names
    reasons = unresolved[True]
    assert set(reasons) == {"kafka-pattern", "ds-file-sink", "ds-named-like-kafka"}, reasons
    assert len(reasons["kafka-pattern"]) == 1 and "topic-pattern 'ds_.*'" in reasons["kafka-pattern"][0]
    assert len(reasons["ds-named-like-kafka"]) == len(reasons["ds-file-sink"]) == 2, reasons  # a source, a sink
    # the listener's events: START of every job, the end of each ended one, valid, and no secret
    # option of any table (passwords, sasl.jaas.config)
    texts = [p.read_text() for p in stack.store.glob("*.json")]
    assert not [t for t in texts if stack.postgres.password in t or JAAS_SECRET in t]
    events = [json.loads(t) for t in texts]
    assert_valid(events)
    kinds: dict[str, set[str]] = {}
    for e in events:
        kinds.setdefault(e["job"]["name"], set()).add(e["eventType"])
    ends = {"FAILED": "FAIL", "CANCELED": "ABORT", "FINISHED": "COMPLETE"}
    assert {name: kinds.get(name) for name in states} == {
        name: {"START", ends[state]} if state in ends else {"START"} for name, state in states.items()}


def _edges_of(doc: dict, names: set[str]) -> set[tuple[str, str, str]]:
    return {(j["name"], role, d) for j in doc["jobs"] if j["name"] in names
            for role, key in (("source", "inputs"), ("sink", "outputs")) for d in j[key]}


def _python_path_for_others(spare: Path) -> str:
    """The PYTHONPATH another user imports lakeflow and its packages from: the checkout's when every folder
    above it lets others through, else (a checkout in a private folder, e.g. under ``mktemp -d``) links to
    the same files in ``spare`` (0755), copies where links cannot be made."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    if all(p.stat().st_mode & stat.S_IXOTH for p in (ROOT, *ROOT.parents, purelib, *purelib.parents)):
        return f"{purelib}:{ROOT}"

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    spare.chmod(0o755)
    shutil.copytree(purelib, spare / "site-packages", symlinks=True, copy_function=link)
    shutil.copytree(ROOT / "lakeflow", spare / "source" / "lakeflow", copy_function=link)
    return f"{spare / 'site-packages'}:{spare / 'source'}"


@pytest.mark.skipif(os.geteuid() != 0, reason="creates a Unix user (useradd) and harvests as it (runuser): root only")
def test_a_harvest_as_another_user_reads_the_listener_events(stack, tmp_path):
    """The cluster runs as root; the harvest as ``lakeflow-harvest``, of the store's group only.
    The checkout's virtualenv interpreter lives under /root, which that user cannot enter: it runs
    Debian's python3.11 on the same packages (the wheels are CPython 3.11's)."""
    events = sorted(stack.store.glob("*.json"))
    assert events
    for path in events:
        info = path.stat()
        assert (stat.S_IMODE(info.st_mode), grp.getgrgid(info.st_gid).gr_name) == (0o640, LINEAGE_GROUP), path
    python = shutil.which("python3.11", path="/usr/bin:/usr/local/bin")
    if python is None:
        pytest.skip("no python3.11 outside /root for the other user")
    user = pwd.getpwnam(HARVEST_USER)
    assert user.pw_uid != os.geteuid() and LINEAGE_GROUP in {g.gr_name for g in grp.getgrall()
                                                             if HARVEST_USER in g.gr_mem}
    home = Path(tempfile.mkdtemp(prefix="lakeflow-harvest-home-"))
    code = Path(tempfile.mkdtemp(prefix="lakeflow-harvest-code-"))
    try:
        shutil.chown(home, user=HARVEST_USER)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LAKEFLOW_HOME": str(home),
               "LAKEFLOW_ENV_FILE": str(home / "none.env"), "PYTHONPATH": _python_path_for_others(code)}
        done = subprocess.run(["runuser", "-u", HARVEST_USER, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                               python, "-m", "lakeflow.cli", "harvest", "--rest-url", stack.cluster.rest_url,
                               "--sql-gateway-url", stack.gateway.url, "--lineage-dir", str(stack.store),
                               "--format", "json"], capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(code, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "unreadable" not in done.stderr and "Permission denied" not in done.stderr, done.stderr[-3000:]
    names = set(_jobs(stack.cluster.rest_url))
    root = tmp_path / "root.json"
    assert main(["harvest", "--rest-url", stack.cluster.rest_url, "--sql-gateway-url", stack.gateway.url,
                 "--lineage-dir", str(stack.store), "--format", "json", "--output", str(root)]) == 0
    expected = _edges_of(json.loads(root.read_text()), names)
    assert _edges_of(json.loads(done.stdout), names) == expected
    truth = {(e.job, e.role, str(e.dataset)) for e, t in ground_truth(stack).items() if t.sql}
    assert truth <= expected  # the listener's edges, read by the other user too
