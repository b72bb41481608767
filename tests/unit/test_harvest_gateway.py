"""The SQL Gateway client against the stand-in: what the real gateway (tests/integration/test_sql_gateway_real.py)
cannot be made to do — long paging, slow pages, malformed pages, a nextResultUri leading elsewhere,
the row cap — and resolution by catalog type for catalogs the tests cannot run (jdbc, iceberg, hive)."""

import threading

import pytest

from lakeflow.lineage.config import CatalogPlatform, from_mapping
from lakeflow.lineage.datasets import DatasetId, from_location
from lakeflow.lineage.flink_rest import Connection, FlinkRestError
from lakeflow.lineage.plan import Reference, TableRef
from lakeflow.lineage.resolve import Resolver
from lakeflow.lineage.sql_gateway import SingleFlight, SqlGatewayClient, with_options
from tests.standins.sql_gateway import RecordedExecutor, SqlGatewayStandIn

VARCHAR = {"type": "VARCHAR", "nullable": True}


def info(*rows):
    return {"columns": [{"name": "info name", "logicalType": VARCHAR, "comment": None},
                        {"name": "info value", "logicalType": VARCHAR, "comment": None}], "rows": [list(r) for r in rows]}


def ddl(text):
    return {"columns": [{"name": "result", "logicalType": VARCHAR, "comment": None}], "rows": [[text]]}


@pytest.fixture
def gateway():
    standins = []

    def start(answers, **kw):
        standin = SqlGatewayStandIn(RecordedExecutor(answers), **kw).start()
        standins.append(standin)
        return standin, SqlGatewayClient(Connection(standin.url, max_retries=1, backoff_s=0.01), operation_timeout_s=5)

    yield start
    for s in standins:
        s.stop()


def test_statements_page_through_results_after_not_ready(gateway):
    rows = [[f"k{i}", f"v{i}"] for i in range(7)]
    standin, client = gateway({"DESCRIBE CATALOG EXTENDED `c`": info(*rows)}, page_size=3, not_ready=2)
    assert client.catalog_info("c") == {f"k{i}": f"v{i}" for i in range(7)}
    client.close()
    assert standin.closed and not standin.sessions  # the session was closed


def test_a_failed_statement_names_the_statement_and_the_reason(gateway):
    _, client = gateway({"SHOW CREATE TABLE `c`.`d`.`t`": {
        "error": "org.apache.flink.table.api.ValidationException: Table `c`.`d`.`t` does not exist."}})
    with pytest.raises(FlinkRestError, match=r"^SHOW CREATE TABLE `c`.`d`.`t`: org.apache.flink.table.api."
                                             r"ValidationException: Table `c`.`d`.`t` does not exist.$"):
        client.table_options(TableRef("c", "d", "t"))


def test_lookups_are_single_flight_under_threads(gateway):
    standin, client = gateway({"DESCRIBE CATALOG EXTENDED `pg`": info(("type", "jdbc"))}, not_ready=3)
    results, barrier = [], threading.Barrier(8)

    def ask():
        barrier.wait()
        results.append(client.catalog_info("pg"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [{"type": "jdbc"}] * 8
    assert standin.statements == ["DESCRIBE CATALOG EXTENDED `pg`"]


def test_single_flight_caches_failures_too():
    calls = []
    cache: SingleFlight[int] = SingleFlight()

    def load():
        calls.append(1)
        raise FlinkRestError("nope")

    for _ in range(3):
        with pytest.raises(FlinkRestError, match="^nope$"):
            cache.get("k", load)
    assert len(calls) == 1


def test_with_options_reads_escaped_values():
    text = ("CREATE TABLE `c`.`d`.`t` (\n  `a` BIGINT COMMENT 'it''s'\n)\nWITH (\n  'connector' = 'kafka',\n"
            "  'topic' = 'or''ders',\n  'properties.bootstrap.servers' = 'b1:9092,b2:9092'\n)\n")
    assert with_options(text) == {"connector": "kafka", "topic": "or'ders", "properties.bootstrap.servers": "b1:9092,b2:9092"}


def resolve(client, table, catalog_map=None):
    cfg = from_mapping({"connection": {"rest_api_url": "http://x"}})
    if catalog_map:
        from dataclasses import replace
        cfg = replace(cfg, catalog_platform_map=catalog_map)
    ref = Reference("source", "table", "v", f"TableSourceScan {table}", table=table)
    return Resolver(cfg, client).resolve([ref], {})[0]


def test_platforms_resolve_by_catalog_type_then_table_ddl(gateway):
    _, client = gateway({
        "DESCRIBE CATALOG EXTENDED `pg`": info(("type", "jdbc"), ("option:base-url", "jdbc:postgresql://db:5432")),
        "DESCRIBE CATALOG EXTENDED `ice`": info(("type", "iceberg"), ("option:uri", "http://lk:8181/catalog"),
                                                ("option:warehouse", "wh")),
        "DESCRIBE CATALOG EXTENDED `hive`": info(("type", "hive")),
        "SHOW CREATE TABLE `hive`.`db`.`events`": ddl(
            "CREATE TABLE x (a INT) WITH (\n  'connector' = 'kafka',\n  'topic' = 'events',\n"
            "  'properties.bootstrap.servers' = 'k1:9092'\n)\n"),
        "SHOW CREATE TABLE `hive`.`db`.`files`": ddl(
            "CREATE TABLE x (a INT) WITH (\n  'connector' = 'filesystem',\n  'path' = 's3a://bucket/raw/files'\n)\n"),
        "SHOW CREATE TABLE `hive`.`db`.`gen`": ddl("CREATE TABLE x (a INT) WITH (\n  'connector' = 'datagen'\n)\n"),
    })
    pg = resolve(client, TableRef("pg", "mydb", "public.users"))
    assert pg.dataset == DatasetId("postgres://db:5432", "mydb.public.users")
    assert pg.dataset.datahub_urn() == "urn:li:dataset:(urn:li:dataPlatform:postgres,mydb.public.users,PROD)"
    ice = resolve(client, TableRef("ice", "lake", "events"))
    assert ice.dataset == DatasetId("iceberg", "lake.events")
    assert ice.aliases == (DatasetId("http://lk:8181/catalog/wh", "lake.events"),)
    assert resolve(client, TableRef("hive", "db", "events")).dataset == DatasetId("kafka://k1:9092", "events")
    files = resolve(client, TableRef("hive", "db", "files"))
    assert files.dataset == from_location("s3://bucket/raw/files")  # its path, not "hdfs db.files"
    gen = resolve(client, TableRef("hive", "db", "gen"))
    assert gen.dataset is None and gen.skipped == "hive.db.gen: connector 'datagen' is not a dataset"


def test_catalog_platform_map_wins_over_the_gateway(gateway):
    standin, client = gateway({})
    r = resolve(client, TableRef("ice", "lake", "t"), {"ice": CatalogPlatform("iceberg", "prod-lake")})
    assert (r.dataset, r.platform_instance) == (DatasetId("iceberg", "lake.t"), "prod-lake")
    assert standin.statements == []


@pytest.mark.parametrize("uri", ["@127.0.0.1:{port}/v1/steal", "http://127.0.0.1:{port}/v1/steal",
                                 "//127.0.0.1:{port}/v1/steal", "v1/steal", "/v1/steal\\x"])
def test_a_next_result_uri_leaving_the_gateway_fails_that_statement_only(uri):
    from lakeflow.lineage.flink_rest import Auth
    from lakeflow.secret import Secret
    from tests.standins.http_stub import FixedServer

    other = FixedServer(200, body=b'{"resultType": "EOS"}').start()
    uri = uri.format(port=other.server.server_address[1])
    standin = SqlGatewayStandIn(RecordedExecutor({"DESCRIBE CATALOG EXTENDED `c`": info(("type", "x")),
                                                  "SHOW CREATE TABLE `c`.`d`.`t`": ddl("CREATE TABLE t")}),
                                not_ready=0, next_result_uri=uri).start()
    try:
        conn = Connection(standin.url, auth=Auth(username="ann", password=Secret("gateway-pw")), max_retries=0)
        client = SqlGatewayClient(conn, operation_timeout_s=5)
        with pytest.raises(FlinkRestError) as err:
            client.execute("DESCRIBE CATALOG EXTENDED `c`")
        assert str(err.value) == (f"DESCRIBE CATALOG EXTENDED `c`: nextResultUri {uri!r} refused: "
                                  "expected a path on the gateway")
        r = resolve(client, TableRef("c", "d", "t"))  # the lookup fails, resolution goes on
        assert r.dataset is None and "SQL Gateway lookup failed" in r.unresolved and "refused" in r.unresolved
        client.close()
        assert other.received == []
    finally:
        standin.stop()
        other.stop()


def test_paging_stops_at_the_row_cap(gateway):
    rows = [[f"k{i}", "v"] for i in range(40)]
    standin, _ = gateway({"DESCRIBE CATALOG EXTENDED `c`": info(*rows)}, page_size=3, not_ready=0)
    client = SqlGatewayClient(Connection(standin.url, max_retries=0), operation_timeout_s=5, max_rows=10)
    with pytest.raises(FlinkRestError, match=r"^DESCRIBE CATALOG EXTENDED `c`: more than 10 result rows: refused$"):
        client.execute("DESCRIBE CATALOG EXTENDED `c`")
    assert SqlGatewayClient(Connection(standin.url), max_rows=40).execute("DESCRIBE CATALOG EXTENDED `c`").rows \
        == tuple(tuple(r) for r in rows)


def test_paging_has_an_overall_deadline(gateway):
    import time

    rows = [[f"k{i}", "v"] for i in range(20)]
    standin, _ = gateway({"DESCRIBE CATALOG EXTENDED `c`": info(*rows)}, page_size=1, not_ready=0, page_delay_s=0.2)
    client = SqlGatewayClient(Connection(standin.url, max_retries=0), operation_timeout_s=1)
    t0 = time.monotonic()
    with pytest.raises(FlinkRestError, match=r"^DESCRIBE CATALOG EXTENDED `c`: not done after 1s$"):
        client.execute("DESCRIBE CATALOG EXTENDED `c`")
    assert time.monotonic() - t0 < 2


def test_deadlines_and_the_row_cap_come_from_the_recipe():
    from lakeflow.lineage.config import ConfigError

    cfg = from_mapping({"connection": {"rest_api_url": "http://jm", "sql_gateway_url": "http://gw",
                                       "request_deadline_seconds": 10, "sql_gateway_max_rows": 50,
                                       "sql_gateway_operation_timeout_seconds": 5}})
    assert (cfg.connection.deadline_s, cfg.sql_gateway.deadline_s) == (10.0, 10.0)
    assert (cfg.sql_gateway_max_rows, cfg.sql_gateway_operation_timeout_s) == (50, 5.0)
    defaults = from_mapping({"connection": {"rest_api_url": "http://jm"}})
    assert (defaults.connection.deadline_s, defaults.sql_gateway_max_rows) == (120.0, 10_000)
    for key in ("request_deadline_seconds", "sql_gateway_max_rows"):
        with pytest.raises(ConfigError, match=rf"^config.connection.{key}: expected > 0, got 0"):
            from_mapping({"connection": {"rest_api_url": "http://jm", key: 0}})


@pytest.mark.parametrize("answers", [
    {"DESCRIBE CATALOG EXTENDED `c`": info(("type",)), "SHOW CREATE TABLE `c`.`d`.`t`": ddl("x") | {"rows": [5]}},
    {"DESCRIBE CATALOG EXTENDED `c`": info(("type", "x")) | {"rows": ["type"]},
     "SHOW CREATE TABLE `c`.`d`.`t`": ddl("x") | {"rows": [[]]}},
])
def test_malformed_result_pages_leave_the_table_unresolved(gateway, answers):
    _, client = gateway(answers)
    r = resolve(client, TableRef("c", "d", "t"))
    assert r.dataset is None
    assert r.unresolved.startswith("catalog table c.d.t: SQL Gateway lookup failed: ")
    assert r.unresolved.endswith(("SHOW CREATE TABLE `c`.`d`.`t`: SQL Gateway: malformed result page",
                                  "SHOW CREATE TABLE c.d.t returned nothing"))
    with pytest.raises(FlinkRestError, match="malformed result page"):
        client.catalog_info("c")


# --- the real connectors' shapes (issue #22): exact plan strings → datasets ------------------------

KAFKA_ORDERS = ("CREATE TABLE `lake`.`streams`.`orders` (\n  `id` BIGINT\n) WITH (\n  'connector' = 'kafka',\n"
                "  'topic' = 'orders',\n  'properties.bootstrap.servers' = '127.0.0.1:39092,127.0.0.1:39093',\n"
                "  'format' = 'json'\n)\n")
LAKE_CATALOG = info(("name", "lake"), ("type", "test-filesystem"))
CATALOGS = {
    "SHOW CATALOGS": {"columns": [{"name": "catalog name", "logicalType": VARCHAR, "comment": None}],
                      "rows": [["default_catalog"], ["lake"], ["pg"]]},
    "SHOW DATABASES IN `default_catalog`": {"columns": [{"name": "database name", "logicalType": VARCHAR}],
                                            "rows": [["default_database"]]},
    "SHOW DATABASES IN `lake`": {"columns": [{"name": "database name", "logicalType": VARCHAR}],
                                 "rows": [["streams"], ["archive"]]},
    "SHOW DATABASES IN `pg`": {"columns": [{"name": "database name", "logicalType": VARCHAR}], "rows": [["shop"]]},
    "SHOW TABLES IN `default_catalog`.`default_database`": {"columns": [{"name": "table name", "logicalType": VARCHAR}],
                                                            "rows": []},
    "SHOW TABLES IN `lake`.`streams`": {"columns": [{"name": "table name", "logicalType": VARCHAR}],
                                        "rows": [["orders"], ["orders_enriched"], ["alerts"]]},
    "SHOW TABLES IN `lake`.`archive`": {"columns": [{"name": "table name", "logicalType": VARCHAR}],
                                        "rows": [["orders_enriched"], ["old"]]},
    "SHOW TABLES IN `pg`.`shop`": {"columns": [{"name": "table name", "logicalType": VARCHAR}],
                                   "rows": [["public.alerts"], ["public.customers"]]},
}
REAL_SHAPES = {
    **CATALOGS,
    "DESCRIBE CATALOG EXTENDED `lake`": LAKE_CATALOG,
    "DESCRIBE CATALOG EXTENDED `pg`": info(("type", "jdbc"), ("option:base-url", "jdbc:postgresql://127.0.0.1:5544"),
                                          ("option:default-database", "shop")),
    "SHOW CREATE TABLE `lake`.`streams`.`orders`": ddl(KAFKA_ORDERS),
    "SHOW CREATE TABLE `lake`.`streams`.`gen`": ddl("CREATE TABLE g (id BIGINT) WITH (\n  'connector' = 'datagen'\n)"),
    "SHOW CREATE TABLE `lake`.`streams`.`alerts`": ddl(
        "CREATE TABLE a (id BIGINT) WITH (\n  'connector' = 'upsert-kafka',\n  'topic' = 'alerts',\n"
        "  'properties.bootstrap.servers' = 'broker:9092'\n)"),
    "SHOW CREATE TABLE `lake`.`streams`.`enriched_pg`": ddl(
        "CREATE TABLE e (id BIGINT) WITH (\n  'connector' = 'jdbc',\n"
        "  'url' = 'jdbc:postgresql://127.0.0.1:5544/shop',\n  'table-name' = 'orders_enriched',\n"
        "  'username' = 'app',\n  'password' = 'pa55'\n)"),
    "SHOW CREATE TABLE `lake`.`streams`.`sales_pg`": ddl(
        "CREATE TABLE e (id BIGINT) WITH (\n  'connector' = 'jdbc',\n"
        "  'url' = 'jdbc:postgresql://db/shop?sslmode=disable',\n  'table-name' = 'sales.orders'\n)"),
    "SHOW CREATE TABLE `lake`.`streams`.`users_my`": ddl(
        "CREATE TABLE u (id BIGINT) WITH (\n  'connector' = 'jdbc',\n  'url' = 'jdbc:mysql://db/crm',\n"
        "  'table-name' = 'users'\n)"),
    "SHOW CREATE TABLE `lake`.`streams`.`multi`": ddl(
        "CREATE TABLE m (id BIGINT) WITH (\n  'connector' = 'kafka',\n  'topic' = 'a;b',\n"
        "  'properties.bootstrap.servers' = 'k:9092'\n)"),
    "SHOW CREATE TABLE `lake`.`streams`.`pattern`": ddl(
        "CREATE TABLE p (id BIGINT) WITH (\n  'connector' = 'kafka',\n  'topic-pattern' = 'orders-.*',\n"
        "  'properties.bootstrap.servers' = 'k:9092'\n)"),
}


def plan_lineage(client, *descriptions: str):
    """The resolutions of a job whose plan nodes have these descriptions, as (role, dataset or
    reason, evidence) tuples."""
    from lakeflow.lineage.flink_rest import PlanNode
    from lakeflow.lineage.plan import job_references

    cfg = from_mapping({"connection": {"rest_api_url": "http://x"}})
    nodes = [PlanNode(f"v{i}", d, 1, ()) for i, d in enumerate(descriptions)]
    return [(r.reference.role, r.dataset or r.skipped or r.unresolved, r.evidence)
            for r in Resolver(cfg, client).resolve(job_references(nodes), {})]


def test_kafka_sql_source_and_sink_resolve_through_the_gateway(gateway):
    _, client = gateway(REAL_SHAPES)
    assert plan_lineage(client, "Source: KafkaSource-lake.streams.orders<br/>+- Calc(select=[id])<br/>",
                        "alerts[3]: Writer<br/>", "alerts[3]: Committer<br/>") == [
        ("sink", DatasetId("kafka://broker:9092", "alerts"), "unique-table-name"),
        ("source", DatasetId("kafka://127.0.0.1:39092", "orders"), "plan")]


def test_an_operator_named_like_kafka_never_makes_an_edge(gateway):
    standin, client = gateway(REAL_SHAPES)
    got = plan_lineage(client, "Source: KafkaSource-lake.streams.gen<br/>", "Source: KafkaSource-orders<br/>",
                       "Source: KafkaSource-lake.streams.missing<br/>")
    assert [(role, evidence) for role, _, evidence in got] == [("source", "name-only")] * 3
    assert all(isinstance(reason, str) for _, reason, _ in got)
    assert any("catalog table lake.streams.gen has connector 'datagen'" in reason for _, reason, _ in got)
    assert "SHOW CREATE TABLE `lake`.`streams`.`orders`" not in standin.statements  # a bare name is not looked up


def test_a_sink_v2_table_name_in_several_catalogs_or_none_stays_unresolved(gateway):
    _, client = gateway(REAL_SHAPES)
    (ambiguous,), (unknown,) = plan_lineage(client, "orders_enriched[3]: Writer<br/>"), plan_lineage(
        client, "session_only[3]: Writer<br/>")
    assert ambiguous == ("sink", "table sink 'orders_enriched': the plan names no catalog or database (Sink V2 "
                         "writer), and 2 catalog tables have that name: lake.archive.orders_enriched, "
                         "lake.streams.orders_enriched", "plan")
    assert unknown == ("sink", "table sink 'session_only': the plan names no catalog or database (Sink V2 writer), "
                       "and no catalog the gateway shows has a table of that name (a session or job-local table?)",
                       "plan")


def test_jdbc_tables_are_named_from_the_url_schema_and_table_name(gateway):
    _, client = gateway(REAL_SHAPES)
    got = plan_lineage(client, "Sink(table=[lake.streams.enriched_pg], fields=[id])",
                       "TableSourceScan(table=[[lake, streams, sales_pg]], fields=[id])",
                       "TableSourceScan(table=[[lake, streams, users_my]], fields=[id])")
    assert got == [("sink", DatasetId("postgres://127.0.0.1:5544", "shop.public.orders_enriched"), "plan"),
                   ("source", DatasetId("postgres://db:5432", "shop.sales.orders"), "plan"),
                   ("source", DatasetId("mysql://db:3306", "crm.users"), "plan")]
    assert "pa55" not in repr(got)


def test_jdbc_catalog_tables_and_lookup_joins(gateway):
    _, client = gateway(REAL_SHAPES)
    got = plan_lineage(
        client,
        "[1]:TableSourceScan(table=[[lake, streams, orders]], fields=[id, customer_id])<br/>"
        "+- [2]:LookupJoin(table=[pg.shop.public.customers], joinType=[InnerJoin], lookup=[id=customer_id], "
        "select=[id, customer_id, name])<br/>   +- [3]:Sink(table=[pg.shop.public.alerts], fields=[id, name])<br/>")
    assert got == [("sink", DatasetId("postgres://127.0.0.1:5544", "shop.public.alerts"), "plan"),
                   ("source", DatasetId("postgres://127.0.0.1:5544", "shop.public.customers"), "plan"),
                   ("source", DatasetId("kafka://127.0.0.1:39092", "orders"), "plan")]


def test_kafka_topic_lists_are_every_topic_and_patterns_no_topic(gateway):
    _, client = gateway(REAL_SHAPES)
    got = plan_lineage(client, "TableSourceScan(table=[[lake, streams, multi]], fields=[id])",
                       "TableSourceScan(table=[[lake, streams, pattern]], fields=[id])")
    assert got == [("source", DatasetId("kafka://k:9092", "a"), "plan"),
                   ("source", DatasetId("kafka://k:9092", "b"), "plan"),
                   ("source", "catalog table lake.streams.pattern: Kafka table, but its topic-pattern 'orders-.*' "
                              "names no topic", "plan")]


# --- the plans Flink 2.3.0 showed for the real-connector jobs (recorded by
# tests/integration/test_lineage_real_connectors.py), resolved against answers shaped like its gateway's -----

def _catalog_answers() -> dict:
    def listing(column: str, *names: str) -> dict:
        return {"columns": [{"name": column, "logicalType": VARCHAR, "comment": None}], "rows": [[n] for n in names]}

    def kafka(table: str, topic: str) -> dict:
        return ddl(f"CREATE TABLE `lake`.`streams`.`{table}` (\n  `id` BIGINT\n) WITH (\n  'connector' = 'kafka',\n"
                   f"  'topic' = '{topic}',\n  'properties.bootstrap.servers' = 'k:9092',\n  'format' = 'json'\n)\n")

    topics = ("alerts", "audit", "bad_orders", "clicks", "clicks_copy", "orders", "orders_enriched")
    return {
        "SHOW CATALOGS": listing("catalog name", "default_catalog", "lake", "pg"),
        "SHOW DATABASES IN `default_catalog`": listing("database name", "default_database"),
        "SHOW DATABASES IN `lake`": listing("database name", "streams"),
        "SHOW DATABASES IN `pg`": listing("database name", "postgres", "shop"),
        "SHOW TABLES IN `default_catalog`.`default_database`": listing("table name"),
        "SHOW TABLES IN `lake`.`streams`": listing("table name", *sorted((*topics, "archive", "clicks_archive",
                                                                        "orders_pg"))),
        "SHOW TABLES IN `pg`.`postgres`": listing("table name"),
        "SHOW TABLES IN `pg`.`shop`": listing("table name", "public.alerts", "public.customers",
                                              "public.customers_copy", "public.orders_copy"),
        "DESCRIBE CATALOG EXTENDED `lake`": info(("name", "lake"), ("type", "test-filesystem")),
        "DESCRIBE CATALOG EXTENDED `pg`": info(("name", "pg"), ("type", "jdbc"),
                                              ("option:base-url", "jdbc:postgresql://db:5432"),
                                              ("option:default-database", "shop")),
        **{f"SHOW CREATE TABLE `lake`.`streams`.`{t}`": kafka(t, t) for t in topics},
        "SHOW CREATE TABLE `lake`.`streams`.`orders_pg`": ddl(
            "CREATE TABLE `lake`.`streams`.`orders_pg` (\n  `id` BIGINT\n) WITH (\n  'connector' = 'jdbc',\n"
            "  'url' = 'jdbc:postgresql://db:5432/shop',\n  'table-name' = 'orders_copy',\n"
            "  'username' = 'lakeflow',\n  'password' = 'pa55'\n)\n"),
    }


def test_the_real_connector_plans_resolve_exactly(gateway):
    import json
    from pathlib import Path

    from lakeflow.lineage.flink_rest import PlanNode
    from lakeflow.lineage.plan import job_references

    plans = json.loads((Path(__file__).parents[1] / "fixtures" / "harvest" / "real-connectors-plans.json").read_text())
    _, client = gateway(_catalog_answers())
    resolver = Resolver(from_mapping({"connection": {"rest_api_url": "http://x"}}), client)
    got = {}
    for job, descriptions in plans.items():
        nodes = [PlanNode(f"v{i}", d, 1, ()) for i, d in enumerate(descriptions)]
        resolutions = resolver.resolve(job_references(nodes), {})
        got[job] = {role: sorted(str(r.dataset) for r in resolutions if r.dataset and r.reference.role == role)
                    for role in ("source", "sink")}
    k = lambda topic: f"kafka://k:9092/{topic}"  # noqa: E731
    pg = lambda table: f"postgres://db:5432/shop.public.{table}"  # noqa: E731
    nothing = {"source": [], "sink": []}
    assert got == {
        "batch-jdbc": {"source": [pg("customers")], "sink": [pg("customers_copy")]},
        "cancelled": {"source": [k("clicks")], "sink": [k("clicks_copy")]},
        "cancelled-filesystem": {"source": [k("clicks")], "sink": []},
        "datagen-to-kafka": {"source": [], "sink": [k("audit")]},
        "ds-file-sink": nothing,
        "ds-kafka-to-kafka": nothing,
        "ds-named-like-kafka": nothing,
        "failed": {"source": [k("bad_orders")], "sink": [pg("alerts")]},
        "in-memory-tables": nothing,  # tables of the submitting session: see test_native_lineage.py
        "kafka-pattern": nothing,
        "kafka-to-filesystem": {"source": [k("orders")], "sink": []},
        "kafka-to-jdbc-catalog": {"source": [k("orders")], "sink": [pg("alerts")]},
        "kafka-to-jdbc-table": {"source": [k("orders")], "sink": [pg("orders_copy")]},
        "kafka-to-kafka": {"source": [k("orders")], "sink": [k("orders_enriched")]},
        "local-batch-filesystem": nothing,
        "local-kafka-to-jdbc": nothing,
        "lookup-join": {"source": sorted([k("orders"), pg("customers")]), "sink": [k("alerts")]},
        "session-table": {"source": [], "sink": [pg("orders_copy")]},
        "statement-set": {"source": [k("orders")], "sink": sorted([k("audit"), pg("orders_copy")])},
        "temporary-batch-filesystem": nothing,
        "temporary-kafka": nothing,
        "view": {"source": [k("orders")], "sink": [k("alerts")]},
    }


@pytest.mark.parametrize("url, table_name, dataset", [
    ("jdbc:postgresql://db/shop", "orders", DatasetId("postgres://db:5432", "shop.public.orders")),
    ("jdbc:postgresql://db:6543/shop?sslmode=require", "sales.orders", DatasetId("postgres://db:6543", "shop.sales.orders")),
    ("jdbc:mysql://db:3307/crm?useSSL=false", "users", DatasetId("mysql://db:3307", "crm.users")),
    ("jdbc:sqlserver://db;databaseName=shop;encrypt=true", "items", DatasetId("mssql://db:1433", "shop.dbo.items")),
])
def test_jdbc_urls_by_scheme(gateway, url, table_name, dataset):
    _, client = gateway({"SHOW CREATE TABLE `lake`.`streams`.`t`": ddl(
        f"CREATE TABLE t (id BIGINT) WITH (\n  'connector' = 'jdbc',\n  'url' = '{url}',\n"
        f"  'table-name' = '{table_name}'\n)")})
    assert resolve(client, TableRef("lake", "streams", "t")).dataset == dataset
