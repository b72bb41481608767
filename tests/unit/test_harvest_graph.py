"""The graph: one dataset per physical dataset across engines, runs per job id."""

from lakeflow.lineage.datasets import DatasetId, catalog_alias, from_location
from lakeflow.lineage.flink_rest import parse_job
from lakeflow.lineage.graph import FlinkJob, SparkRun, build
from lakeflow.lineage.plan import Reference, TableRef
from lakeflow.lineage.resolve import Resolution

ICEBERG_LOCATION = from_location("s3a://lake/warehouse/iot/readings_compacted")
ALIAS = catalog_alias("http://lakekeeper:8181/catalog", "wh", "iot", "readings_compacted")


def flink_job(jid: str, name: str, start: int, state: str = "FINISHED") -> FlinkJob:
    detail = parse_job({"jid": jid, "name": name, "state": state, "start-time": start, "end-time": start + 10,
                        "vertices": [], "plan": {"nodes": []}})
    ref = Reference("source", "table", "v", "TableSourceScan(...)", table=TableRef("ice", "iot", "readings_compacted"))
    return FlinkJob(detail, None, None, None, None, None,
                    (Resolution(ref, DatasetId("iceberg", "iot.readings_compacted"), aliases=(ALIAS,)),))


def compaction() -> SparkRun:
    raw = from_location("s3://lake/warehouse/iot/readings")
    return SparkRun("r1", "lakeflow", "compaction", "COMPLETE", 1, 2, (raw,), (ICEBERG_LOCATION,),
                    {ICEBERG_LOCATION: (ALIAS,)}, {})


def test_a_catalog_table_and_its_location_are_one_dataset():
    g = build([flink_job("a" * 32, "reader", 5)], [compaction()], vertex_granularity=False, rest_url="http://jm")
    reader = next(j for j in g.jobs if j.name == "reader")
    assert reader.inputs == (ICEBERG_LOCATION,)  # the Iceberg REST identity folded into its location
    ds = next(d for d in g.datasets if d.id == ICEBERG_LOCATION)
    assert set(ds.aliases) == {ALIAS, DatasetId("iceberg", "iot.readings_compacted")}
    assert ("spark:lakeflow.compaction", f"dataset:{ICEBERG_LOCATION}") in g.edges()
    assert (f"dataset:{ICEBERG_LOCATION}", "flink:reader") in g.edges()


def test_one_flow_per_name_one_run_per_job_id_and_the_newest_defines_the_flow():
    g = build([flink_job("b" * 32, "n", 10, "FAILED"), flink_job("c" * 32, "n", 20)], [],
              vertex_granularity=False, rest_url="http://jm")
    assert [f.name for f in g.flows] == ["n"]
    assert dict(g.flows[0].properties)["flink_job_id"] == "c" * 32
    assert sorted((r.run_id, r.result) for r in g.runs) == [("b" * 32, "FAILURE"), ("c" * 32, "SUCCESS")]
