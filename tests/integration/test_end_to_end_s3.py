"""One scenario end to end on S3 with IAM enforced, every step a process as a user runs it, against
``LAKEKEEPER`` = the Lakekeeper stand-in with Apache Iceberg's REST server at ``/catalog``, all on one
moto that checks every signature, key and IAM policy (tests/support/lakehouse.py):

1. ``lakeflow register`` — the raw generic table, its s3:// location from the stand-in;
2. ``flink run`` of the packaged ingestion job (bounded NUM_RECORDS) on a standalone cluster started
   with the table's settings (keyless ``fs.s3a.*`` + the table's refreshing AWS profile, as
   ``lakeflow flink up``), writing with STS credentials scoped to the table's prefix;
3. ``lakeflow compact --engine arrow`` — committing to the Iceberg REST server with credentials
   vended for the Iceberg table;
4. ``lakeflow harvest`` — the finished job from the JobManager's REST API plus the run events the
   compaction wrote into the lineage store (``$LAKEFLOW_HOME/lineage``, found by default).

Then: the Iceberg table (read with pyiceberg through the REST catalog) holds the readings Flink
committed, each once; the harvest is one connected chain Flink job → raw table → compaction →
Iceberg table whose datasets are the tables' s3:// locations (never s3a://); no secret in any output.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from lakeflow.compaction.commit import iceberg_catalog
from lakeflow.ingest.storage import cluster_storage
from lakeflow.lineage.datasets import PARAM_RUN_ID, catalog_alias, from_location
from lakeflow.schema import load_schema
from lakeflow.settings import load_settings
from tests.support.fixtures_flink import packaged_job_args
from tests.support.fixtures_lakekeeper import NAMESPACE
from tests.support.lakehouse import TARGET, Catalogs, lakehouse_catalogs
from tests.support.sink_layout import assert_sink_path

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NUM_SENSORS, NUM_RECORDS = 3, 300
TABLE = "sensor-readings"   # env_for's TABLE


def committed_readings(catalogs: Catalogs, location: str) -> tuple[list[str], list[dict]]:
    """The raw table's objects (read with Lakekeeper's own credential), by path under the location,
    and the readings in them."""
    s3 = catalogs.admin.client("s3")
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])]
    readings: list[dict] = []
    for key in keys:
        readings += json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    return [k.removeprefix(prefix + "/") for k in keys], readings


def chain(doc: dict, start: str) -> list[str]:
    """The nodes reached from ``start`` along the harvest's edges, in order (one path, no branch)."""
    succ: dict[str, list[str]] = {}
    for a, b in doc["edges"]:
        succ.setdefault(a, []).append(b)
    path = [start]
    while succ.get(path[-1]):
        (nxt,) = succ[path[-1]]
        assert nxt not in path, f"a cycle at {nxt}"
        path.append(nxt)
    return path


def test_register_ingest_compact_harvest_is_one_lineage_on_s3(moto_iam, make_flink_cluster, tmp_path: Path):
    started = time.monotonic()
    subprocess.run(["make", "-s", "package"], cwd=ROOT, check=True, capture_output=True, timeout=3000)
    with lakehouse_catalogs(moto_iam, tmp_path) as catalogs:
        env, outputs = catalogs.env, {}

        # 1. lakeflow register: the raw table's location
        done = catalogs.lakeflow("register")
        location = done.stdout.strip()
        wh = catalogs.standin.warehouse
        assert location.startswith(f"{wh.base}/") and "created" in done.stderr
        outputs["register"] = done.stdout + done.stderr

        # 2. flink run of the packaged job on a cluster holding the table's settings
        storage = cluster_storage(load_settings(env), tmp_path / "aws")  # what `lakeflow flink up` does
        assert storage.handle.location == location and "lakeflow.fs.credential-command" in storage.conf
        cluster = make_flink_cluster(conf=storage.conf)
        job_env = {**{k: v for k, v in env.items() if not k.startswith("FLINK_")},
                   "NUM_SENSORS": str(NUM_SENSORS), "NUM_RECORDS": str(NUM_RECORDS), "BATCH_SIZE": "50",
                   "BATCH_INTERVAL_MS": "300", "LAKEFLOW_JAR": str(ROOT / "build" / "lakeflow-flink.jar")}
        ingest_started = time.time()
        done = cluster.flink(packaged_job_args("--parallelism", "2"), env=job_env, timeout=300)
        outputs["flink run"] = done.stdout + done.stderr
        assert done.returncode == 0, outputs["flink run"][-4000:]
        job_id = re.search(r"submitted Flink job ([0-9a-f]{32})", outputs["flink run"]).group(1)
        keys, readings = committed_readings(catalogs, location)
        assert keys
        for key in keys:
            assert_sink_path(key, ingest_started)
        assert sorted(r["seq"] for r in readings) == list(range(NUM_RECORDS))  # each reading once
        (run_id,) = {r["run_id"] for r in readings}
        assert f"Wrote {len(keys)} files, {NUM_RECORDS} readings" in outputs["flink run"]

        # 3. lakeflow compact (arrow engine) into the Iceberg table at LAKEKEEPER/catalog
        report = tmp_path / "compact.json"
        done = catalogs.lakeflow("compact", "--engine", "arrow", "--report", str(report),
                                 log=tmp_path / "compact.log")
        outputs["compact"] = done.stdout + done.stderr
        r = json.loads(report.read_text())
        assert (r["engine"], r["files_compacted"], r["rows_in"], r["rows_out"], r["quarantined"]) == (
            "arrow", len(keys), NUM_RECORDS, NUM_RECORDS, [])

        table = iceberg_catalog(load_settings(env)).load_table((*NAMESPACE, TARGET))
        iceberg_location = table.location()
        assert iceberg_location == f"{wh.base}/{NAMESPACE[0]}/{TARGET}"
        rows = table.scan().to_arrow().select(list(load_schema().names)).to_pylist()
        assert len(rows) == NUM_RECORDS
        assert sorted((x["run_id"], x["seq"]) for x in rows) == [(run_id, n) for n in range(NUM_RECORDS)]
        by_key = {(x["run_id"], x["seq"]): x for x in readings}
        assert all(by_key[(x["run_id"], x["seq"])] == x for x in rows)  # the readings themselves, unchanged

        # 4. lakeflow harvest: the cluster + the lineage store the compaction wrote ($LAKEFLOW_HOME/lineage)
        harvested = tmp_path / "lineage.json"
        done = catalogs.lakeflow("harvest", "--rest-url", cluster.rest_url, "--format", "json",
                                 "--output", str(harvested))
        outputs["harvest"] = done.stdout + done.stderr
        assert "1 processed, 0 failed" in done.stderr
        outputs["lineage.json"] = harvested.read_text()
        doc = json.loads(outputs["lineage.json"])

        raw, iceberg = from_location(location), from_location(iceberg_location)
        bucket = location.removeprefix("s3://").split("/", 1)[0]
        (flink,) = [j for j in doc["jobs"] if j["engine"] == "flink"]
        (spark,) = [j for j in doc["jobs"] if j["engine"] == "compaction"]
        assert (flink["job_id"], flink["state"], flink["inputs"], flink["outputs"]) == (
            job_id, "FINISHED", [], [str(raw)])
        assert (spark["state"], spark["inputs"], spark["outputs"]) == ("COMPLETE", [str(raw)], [str(iceberg)])
        datasets = {d["name"]: d for d in doc["datasets"]}
        assert set(datasets) == {str(raw), str(iceberg)}
        assert (datasets[str(raw)]["namespace"], datasets[str(raw)]["path"]) == (
            f"s3://{bucket}", location.removeprefix(f"s3://{bucket}/"))
        assert (datasets[str(iceberg)]["namespace"], datasets[str(iceberg)]["path"]) == (
            f"s3://{bucket}", f"{wh.key_prefix}/{NAMESPACE[0]}/{TARGET}")
        path = chain(doc, f"flink:{flink['name']}")
        assert path == [f"flink:{flink['name']}", f"dataset:{raw}", f"compaction:{spark['name']}", f"dataset:{iceberg}"]
        assert len(doc["edges"]) == 3                                   # nothing beside the chain
        assert datasets[str(raw)]["aliases"] == [str(catalog_alias(env["LAKEKEEPER"], wh.id, "iot", TABLE))]
        assert datasets[str(iceberg)]["aliases"] == [
            str(catalog_alias(f"{env['LAKEKEEPER']}/catalog", wh.id, "iot", TARGET))]
        runs = {x["engine"]: x for x in doc["runs"]}
        assert len(runs) == len(doc["runs"]) == 2
        assert (runs["flink"]["run_id"], runs["flink"]["result"], runs["flink"]["records_out"]) == (
            job_id, "SUCCESS", NUM_RECORDS)
        assert (runs["compaction"]["run_id"], runs["compaction"]["result"], runs["compaction"]["records_in"],
                runs["compaction"]["records_out"]) == (r["run_id"], "SUCCESS", NUM_RECORDS, NUM_RECORDS)
        (flow,) = [f for f in doc["flows"] if f["engine"] == "flink"]
        assert flow["properties"][f"param.{PARAM_RUN_ID}"] == run_id      # the run_id in every reading
        assert "s3a://" not in outputs["lineage.json"]
        print("\nlineage: " + " → ".join(path))

        page = tmp_path / "lineage.html"                                 # the picture of the same harvest
        catalogs.lakeflow("harvest", "--rest-url", cluster.rest_url, "--format", "html", "--output", str(page))
        outputs["lineage.html"] = page.read_text()
        for name in (str(raw), str(iceberg), flink["name"], spark["name"]):
            assert name in outputs["lineage.html"]
        assert "s3a://" not in outputs["lineage.html"]

        outputs["cluster logs"] = "".join(p.read_text(errors="replace") for p in cluster.log_dir.glob("*"))
        outputs["config.yaml"] = (cluster.conf_dir / "config.yaml").read_text()
        outputs["lineage store"] = "".join(p.read_text() for p in sorted((catalogs.home / "lineage").rglob("*"))
                                           if p.is_file())
        outputs["compact report"] = report.read_text()
        assert outputs["lineage store"] and outputs["cluster logs"] and catalogs.standin.vended_secrets
        secrets = [*catalogs.secrets(), *catalogs.standin.vended_access_keys, catalogs.iceberg.access_key]
        leaks = [where for where, text in outputs.items() if any(s in text for s in secrets)]
        assert not leaks, f"a secret in {leaks}"
    print(f"end to end: {time.monotonic() - started:.1f} s")
