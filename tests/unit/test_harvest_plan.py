"""Plan parsing: HTML decoding, chain splitting, every match, name-only evidence."""

from lakeflow.lineage.flink_rest import PlanNode
from lakeflow.lineage.plan import TableRef, identifiers, job_references, operators, references


def node(description: str, nid: str = "v1", inputs: tuple = ()) -> PlanNode:
    return PlanNode(nid, description, 1, inputs)


def test_operators_decode_html_and_split_the_chain():
    desc = ("[1]:TableSourceScan(table=[[c, d, t]], fields=[a])<br/>+- [2]:Calc(select=[a], where=[(a &gt; 0)])"
            "<br/>   +- [3]:Sink(table=[c.d.out], fields=[a])<br/>")
    assert operators(desc) == ["TableSourceScan(table=[[c, d, t]], fields=[a])", "Calc(select=[a], where=[(a > 0)])",
                               "Sink(table=[c.d.out], fields=[a])"]


def test_a_chained_kafka_sink_name_does_not_swallow_the_html():
    # DataHub's regex turned "KafkaSink-x<br/>" into a dataset named "x<br/"
    refs = references(node("Source: KafkaSource-in<br/>+- KafkaSink-x<br/>"))
    assert {(r.role, r.value) for r in refs} == {("source", "in"), ("sink", "x")}
    assert all(r.kind == "kafka" and r.name_only for r in refs)


def test_every_match_in_every_operator_is_found():
    refs = job_references([node("Source: KafkaSource-a<br/>+- KafkaSink-b<br/>   +- Sink: KafkaSink-c<br/>"),
                           node("[4]:TableSourceScan(table=[[cat, db, t1]], fields=[x])<br/>+- "
                                "[5]:LookupJoin(table=[cat.db.dim], joinType=[InnerJoin])<br/>", "v2")])
    assert [(r.role, r.kind, r.value or str(r.table)) for r in refs] == [
        ("sink", "kafka", "b"), ("sink", "kafka", "c"), ("source", "kafka", "a"),
        ("source", "table", "cat.db.dim"), ("source", "table", "cat.db.t1")]


def test_sql_sinks_in_both_bracket_styles_and_quoted_names():
    nested = references(node("Sink(table=[[c, d, t]], fields=[a])"))
    dotted = references(node("[3]:Sink(table=[`my-cat`.`db`.`we.ird``name`], fields=[a])"))
    assert nested[0].table == TableRef("c", "d", "t")
    assert dotted[0].table == TableRef("my-cat", "db", "we.ird`name")
    assert identifiers("default_catalog, default_database, src, project=[a], metadata=[") [:3] == [
        "default_catalog", "default_database", "src"]


def test_table_scans_with_pushed_down_projections_keep_the_table():
    refs = references(node("TableSourceScan(table=[[default_catalog, default_database, src, project=[a], "
                           "metadata=[]]], fields=[a])"))
    assert refs[0].table == TableRef("default_catalog", "default_database", "src")


def test_sink_v2_writer_names_only_the_table():
    refs = job_references([node("nowhere[3]: Writer<br/>"), node("nowhere[3]: Committer<br/>", "v2")])
    assert [(r.kind, r.table, r.vertex_id) for r in refs] == [("table-writer", TableRef(None, None, "nowhere"), "v1")]


def test_declared_sink_name_carries_its_location():
    refs = job_references([node("LakeflowSink[s3://b/wh/iot/t]: Writer<br/>+- LakeflowSink[s3://b/wh/iot/t]: Committer<br/>")])
    assert [(r.kind, r.value, r.name_only) for r in refs] == [("declared", "s3://b/wh/iot/t", False)]


def test_filesystem_sql_sink_and_its_discarding_tail_are_one_unnamed_sink():
    refs = job_references([node("end: Writer<br/>", "v2"),
                           node("[1]:TableSourceScan(table=[[c, d, src]], fields=[a])<br/>+- StreamingFileWriter<br/>")])
    assert [(r.role, r.kind) for r in refs] == [("sink", "filesystem"), ("source", "table")]


def test_datastream_sources_and_writers_without_connector_evidence_are_name_only():
    refs = job_references([node("Source: SensorSource<br/>"), node("Sink: Writer<br/>+- Sink: Committer<br/>", "v2")])
    assert [(r.role, r.kind, r.value, r.name_only) for r in refs] == [
        ("sink", "writer", "Sink", True), ("source", "operator", "SensorSource", True)]


# --- the shapes Flink 2.3 shows with the real Kafka and JDBC connectors (issue #22) ----------------

def test_a_jdbc_catalog_table_keeps_its_dotted_table_part():
    sink = references(node("[4]:Sink(table=[pg.shop.public.alerts], fields=[id, msg])"))
    lookup = references(node("[2]:LookupJoin(table=[pg.shop.public.customers], joinType=[InnerJoin], "
                             "lookup=[id=customer_id], select=[order_id, customer_id, id, name])"))
    scan = references(node("[1]:TableSourceScan(table=[[pg, shop, public.customers, project=[id]]], fields=[id])"))
    assert [(r.role, r.kind, r.table) for r in sink + lookup + scan] == [
        ("sink", "table", TableRef("pg", "shop", "public.alerts")),
        ("source", "table", TableRef("pg", "shop", "public.customers")),
        ("source", "table", TableRef("pg", "shop", "public.customers"))]


def test_a_quoted_dotted_table_part_is_one_name():
    assert references(node("Sink(table=[`c`.`d`.`a.b`], fields=[x])"))[0].table == TableRef("c", "d", "a.b")


def test_the_kafka_sql_source_names_its_catalog_table():
    refs = references(node("Source: KafkaSource-lake.streams.orders<br/>+- Calc(select=[id])<br/>"))
    assert [(r.role, r.kind, r.table, r.value, r.name_only) for r in refs] == [
        ("source", "kafka", TableRef("lake", "streams", "orders"), "lake.streams.orders", True)]


def test_a_datastream_kafka_name_is_no_table():
    refs = references(node("Source: KafkaSource-orders<br/>"))
    assert [(r.kind, r.table, r.value) for r in refs] == [("kafka", None, "orders")]


def test_the_kafka_sql_sink_is_a_bare_table_writer_and_committer():
    refs = job_references([node("Calc(select=[id])<br/>+- orders_enriched[5]: Writer<br/>"),
                           node("orders_enriched[5]: Committer<br/>", "v2")])
    assert [(r.role, r.kind, r.table) for r in refs] == [
        ("sink", "table-writer", TableRef(None, None, "orders_enriched"))]


def test_the_filesystem_batch_sink_names_nothing():
    refs = job_references([node("[1]:TableSourceScan(table=[[lake, streams, src]], fields=[a])<br/>"
                                "+- Sink: Filesystem<br/>")])
    assert [(r.role, r.kind, r.table) for r in refs] == [
        ("sink", "filesystem", None), ("source", "table", TableRef("lake", "streams", "src"))]


def test_a_statement_sets_branches_are_stripped_from_its_writers():
    # two Kafka sinks of one statement set, as Flink 2.3 draws the tree (":- " and ":  +- " branches)
    refs = job_references([node("TableSourceScan(table=[[lake, streams, orders]], fields=[id])<br/>"
                                ":- audit[17]: Writer<br/>:  +- audit[17]: Committer<br/>"
                                "+- Sink(table=[lake.streams.orders_pg], fields=[id])<br/>")])
    assert [(r.role, r.kind, str(r.table)) for r in refs] == [
        ("sink", "table", "lake.streams.orders_pg"), ("sink", "table-writer", "audit"),
        ("source", "table", "lake.streams.orders")]
