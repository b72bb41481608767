"""The compaction on S3 with IAM enforced, each engine run as the product runs it: ``lakeflow compact
--engine arrow|spark`` against ``LAKEKEEPER`` = one URL serving both catalogs (the generic tables and,
at ``/catalog``, Apache Iceberg's REST server), everything on one moto server that checks every
signature, key and IAM policy — assembled by tests/support/lakehouse.py.

The raw table and the Iceberg table share the warehouse bucket, as in Lakekeeper; each set of
credentials is refused outside its own table. Spark runs in the job's process, launched by lakeflow
with the fetched hadoop-aws + AWS SDK v2 jars.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from botocore.exceptions import ClientError

from lakeflow.catalog import open_catalog
from lakeflow.compaction.commit import iceberg_catalog
from lakeflow.compaction.launch import spark_options, submit_env
from lakeflow.credentials import VendedConfig, to_s3a
from lakeflow.settings import load_settings
from tests.support.fixtures_compaction import REPO, json_array, readings
from tests.support.fixtures_lakekeeper import NAMESPACE
from tests.support.iceberg_rest import IcebergRestServer
from tests.support.lakehouse import LAKEFLOW, TARGET, LakekeeperWithIceberg, lakehouse_catalogs
from tests.standins.lakekeeper import S3Account, _prefix_policy

pytestmark = pytest.mark.slow

JOB_FLAGS = ["--delete-source", "--delete-min-age", "0s"]
DAY = 1763683200000


@dataclass
class Lakehouse:
    """Both catalogs at ``standin.url``, the raw table with this test's part files, and how to compact."""

    standin: LakekeeperWithIceberg
    iceberg: IcebergRestServer
    admin: S3Account            # Lakekeeper's own storage credential: for inspecting the bucket only
    env: dict
    location: str               # the raw table, s3://bucket/warehouse/<table id>
    vended: dict                # the raw table's vended storage config
    bucket: str
    prefix: str                 # the raw table's key prefix
    home: Path

    @property
    def s3(self):
        return self.admin.client("s3")

    @property
    def table_prefix(self) -> str:
        """The Iceberg table's key prefix (the REST server's warehouse is Lakekeeper's)."""
        return f"{self.standin.warehouse.key_prefix}/{NAMESPACE[0]}/{TARGET}"

    def keys(self) -> set[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}

    def compact(self, engine: str, report: Path, *extra: str) -> subprocess.CompletedProcess:
        """``lakeflow compact`` as a user runs it; exit 0 and no secret in what it printed."""
        return self.compact_with(self.env, engine, report, *extra)

    def compact_with(self, env: dict, engine: str, report: Path, *extra: str) -> subprocess.CompletedProcess:
        """``lakeflow compact`` in ``env``; exit 0 and no secret in what it printed."""
        cmd = [LAKEFLOW, "compact", "--engine", engine, "--report", str(report), *JOB_FLAGS, *extra]
        done = subprocess.run(cmd, env=env, cwd=self.home.parent, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            log = report.with_suffix(".log")
            log.write_text(done.stdout + done.stderr)
            lines = [l for l in done.stderr.splitlines() if not l.lstrip().startswith("at ")]
            pytest.fail(f"lakeflow compact exited {done.returncode} (all of it: {log}):\n" + "\n".join(lines[-60:]))
        self.assert_no_secret(done.stdout + done.stderr + " ".join(cmd))
        return done

    def lakeflow_plan(self, env: dict) -> str:
        """``lakeflow schema plan --json`` in ``env``: its output (exit 0)."""
        done = subprocess.run([LAKEFLOW, "schema", "plan", "--json"], env=env, cwd=self.home.parent,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        self.assert_no_secret(done.stdout + done.stderr)
        return done.stdout

    def secrets(self) -> list[str]:
        return [self.standin.token, self.iceberg.secret_key, self.admin.secret_key, *self.standin.vended_secrets]

    def assert_no_secret(self, text: str) -> None:
        for secret in self.secrets():
            assert secret not in text


@pytest.fixture
def lakehouse(moto_iam: S3Account, tmp_path: Path) -> Iterator[Lakehouse]:
    """The raw table (registered through lakeflow) with 120 readings in 6 committed part files (an
    hourly folder), a truncated one and an in-progress one, written with its vended credentials."""
    with lakehouse_catalogs(moto_iam, tmp_path) as catalogs:
        standin, server, env, home = catalogs.standin, catalogs.iceberg, catalogs.env, catalogs.home
        settings = load_settings(env)
        handle = open_catalog(settings).register(settings.namespace, settings.table)
        vended = open_catalog(settings).load(settings.namespace, settings.table, vended=True).storage.merged()
        wh = standin.warehouse
        assert handle.location.startswith(f"{wh.base}/") and vended.get("s3.session-token")
        bucket, prefix = handle.location.removeprefix("s3://").split("/", 1)

        writer = boto3.client("s3", **to_s3a(VendedConfig(handle.location, vended)).boto3())  # as Flink writes
        rows = readings("run-s3", 120, start_ms=DAY + 3_600_000, step_ms=30_000, seed=7)
        for n in range(0, 120, 20):
            writer.put_object(Bucket=bucket, Key=f"{prefix}/2025-11-21--01/part-s3-{n % 2}-{n // 20}.json",
                              Body=json_array(rows[n:n + 20]).encode())
        writer.put_object(Bucket=bucket, Key=f"{prefix}/part-s3-0-99.json", Body=b'[{"sensor_id": "x", ')
        writer.put_object(Bucket=bucket, Key=f"{prefix}/.part-s3-1-9.json.inprogress.0a1b", Body=b"[")
        yield Lakehouse(standin=standin, iceberg=server, admin=moto_iam, env=env, location=handle.location,
                        vended=vended, bucket=bucket, prefix=prefix, home=home)


def _client(props: dict, location: str):
    return boto3.client("s3", **to_s3a(VendedConfig(location, props)).boto3())


def _refused(call: Callable[[], Any]) -> None:
    with pytest.raises(ClientError) as err:
        call()
    assert err.value.response["Error"]["Code"] == "AccessDenied"


def check_compacted(lh: Lakehouse, engine: str, report: Path) -> pa.Table:
    """The run's report, what it left on S3, its Iceberg commit (read back through the catalog with the
    credentials vended for the Iceberg table); returns the Parquet file written."""
    r = json.loads(report.read_text())
    assert r["engine"] == engine
    assert (r["files_in"], r["files_compacted"], r["rows_out"]) == (7, 6, 120)
    assert r["files_out"] == (1 if engine == "arrow" else 2)  # spark: one per task (2 cores)
    assert r["quarantined"] == [{"file": "part-s3-0-99.json",
                                 "reason": "not a JSON array of record objects (malformed or truncated JSON)"}]

    bucket, prefix, table_prefix, keys = lh.bucket, lh.prefix, lh.table_prefix, lh.keys()
    files = sorted(k for k in keys if k.endswith(".parquet"))
    assert len(files) == r["files_out"] and all(f.startswith(f"{table_prefix}/data/ts_day=2025-11-21/{TARGET}__2025-11-21__")
                                                 for f in files)
    tables = [pq.read_table(io.BytesIO(lh.s3.get_object(Bucket=bucket, Key=f)["Body"].read())) for f in files]
    parquet, data = pa.concat_tables(tables), files[0]
    assert sorted(parquet.column("seq").to_pylist()) == list(range(120))
    copy = f"{table_prefix}/_lakeflow/quarantine/files/run={r['run_id']}/part-s3-0-99.json"  # the table's
    assert f"{prefix}/part-s3-0-99.json" in keys and {copy, f"{copy}.reason.json"} <= keys  # copied, left in raw
    assert not any(k.startswith(f"{prefix}/_") for k in keys)                      # nothing written into raw
    left = [k for k in keys if k.startswith(f"{prefix}/2025-11-21--01/") and not k.endswith("/")]
    assert left == []                                                              # --delete-source
    assert f"{prefix}/.part-s3-1-9.json.inprogress.0a1b" in keys                   # never touched
    ledger = f"{table_prefix}/_lakeflow/compaction/ledger-"                          # where only the compactor writes
    assert r["ledger"].startswith(f"s3://{bucket}/{ledger}") and r["ledger"][len(f"s3://{bucket}/"):] in keys
    assert not any(k.startswith(f"{prefix}/_lakeflow/") for k in keys)
    assert not any(k.startswith(f"{table_prefix}/data/_staging/") and not k.endswith("/") for k in keys)

    table = iceberg_catalog(load_settings(lh.env)).load_table((*NAMESPACE, TARGET))
    assert table.location() == f"s3://{bucket}/{table_prefix}"
    committed = table.scan().to_arrow()
    assert sorted(committed.column("seq").to_pylist()) == list(range(120))          # every reading, once
    assert len(table.metadata.snapshots) == 1 and table.properties["lakeflow.compaction.ledger"] == r["ledger"]
    props = table.io.properties                                                    # vended for the table by STS
    assert props["s3.access-key-id"] in lh.standin.vended_access_keys and props.get("s3.session-token")
    assert props["s3.access-key-id"] != lh.iceberg.access_key
    posts = [c.path.split("/namespaces/", 1)[-1] for c in lh.standin.calls("POST", "/catalog/v1/")]
    assert "iot/tables" in posts and f"iot/tables/{TARGET}" in posts        # created and committed at LAKEKEEPER

    # each table's credentials work only under that table: nothing else in the bucket is theirs
    raw_s3, table_s3 = _client(lh.vended, lh.location), _client(props, table.location())
    table_s3.head_object(Bucket=bucket, Key=data)
    raw_s3.head_object(Bucket=bucket, Key=f"{prefix}/.part-s3-1-9.json.inprogress.0a1b")
    _refused(lambda: raw_s3.put_object(Bucket=bucket, Key=f"{table_prefix}/data/forged.parquet", Body=b"x"))
    _refused(lambda: raw_s3.get_object(Bucket=bucket, Key=data))
    _refused(lambda: table_s3.put_object(Bucket=bucket, Key=f"{prefix}/part-forged-0-0.json", Body=b"[]"))
    _refused(lambda: table_s3.delete_object(Bucket=bucket, Key=f"{prefix}/.part-s3-1-9.json.inprogress.0a1b"))
    deleted = table_s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"{prefix}/.part-s3-1-9.json.inprogress.0a1b"}]})
    assert [e["Code"] for e in deleted.get("Errors", [])] == ["AccessDenied"] and not deleted.get("Deleted")
    for s3 in (raw_s3, table_s3):
        _refused(lambda: s3.put_object(Bucket=bucket, Key=f"{lh.standin.warehouse.key_prefix}/other/x", Body=b"x"))
        _refused(lambda: s3.put_object(Bucket=bucket, Key="outside.json", Body=b"x"))
    return parquet


def check_rerun_and_outputs(lh: Lakehouse, engine: str, tmp_path: Path, *extra: str) -> None:
    """A second run finds nothing new (the ledger read back from S3) and commits nothing; the report
    and the lineage events hold no secret."""
    again = tmp_path / "again.json"
    lh.compact(engine, again, *extra)
    r = json.loads(again.read_text())  # (the quarantined file stays in the raw table, consumed)
    assert (r["files_listed"], r["files_already_consumed"], r["rows_out"], r["snapshot_id"]) == (1, 1, 0, None)
    table = iceberg_catalog(load_settings(lh.env)).load_table((*NAMESPACE, TARGET))
    assert len(table.metadata.snapshots) == 1 and table.scan().to_arrow().num_rows == 120
    written = [p for p in (*lh.home.rglob("*"), *tmp_path.glob("*.json")) if p.is_file() and p.suffix != ".db"]
    assert any(p.parent.name == "lineage" for p in written)
    lh.assert_no_secret("".join(p.read_text(errors="replace") for p in written))


def test_arrow_engine_compacts_s3_with_vended_credentials(lakehouse: Lakehouse, tmp_path: Path) -> None:
    done = lakehouse.compact("arrow", tmp_path / "report.json")
    parquet = check_compacted(lakehouse, "arrow", tmp_path / "report.json")
    assert b"org.apache.spark.version" not in (parquet.schema.metadata or {})  # written by pyarrow
    assert "log4j" not in done.stderr and "starting the Spark session" not in done.stderr  # no JVM started
    check_rerun_and_outputs(lakehouse, "arrow", tmp_path)


def test_spark_engine_compacts_s3_in_its_executors_with_vended_credentials(lakehouse: Lakehouse, tmp_path: Path) -> None:
    done = lakehouse.compact("spark", tmp_path / "report.json")
    assert "starting the Spark session" in done.stderr
    parquet = check_compacted(lakehouse, "spark", tmp_path / "report.json")
    assert parquet.schema.field("seq").metadata[b"PARQUET:field_id"] == b"3"  # lakeflow's writer: field ids
    check_rerun_and_outputs(lakehouse, "spark", tmp_path)


def test_every_iceberg_command_takes_the_warehouse_uuid_or_its_name(lakehouse: Lakehouse, tmp_path: Path) -> None:
    """Lakekeeper's ``/catalog/v1/config`` resolves a warehouse by name only (``<name>`` or
    ``<project-id>/<name>``; a UUID is 404, as recorded from 0.13.3): compact, query, status and
    maintain work with WAREHOUSE_ID the UUID (looked up in the management API) or the name, and a
    warehouse that does not exist is one line and exit 2, no traceback."""
    wh = lakehouse.standin.warehouse
    assert lakehouse.env["WAREHOUSE_ID"] == wh.id
    config = requests.get(f"{lakehouse.standin.url}/catalog/v1/config", params={"warehouse": wh.id}, timeout=10,
                          headers={"Authorization": f"Bearer {lakehouse.standin.token}"})
    assert (config.status_code, config.json()["error"]["type"]) == (404, "NoSuchWarehouseException")
    lakehouse.compact("arrow", tmp_path / "report.json")
    by_name = {**lakehouse.env, "WAREHOUSE_ID": wh.name}
    for env in (lakehouse.env, by_name):
        for args in (["query", "--format", "csv", "SELECT count(*) AS n FROM readings"], ["status"],
                     ["maintain", "--dry-run"]):
            done = subprocess.run([LAKEFLOW, *args], env=env, cwd=lakehouse.home.parent, capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, f"{args} with WAREHOUSE_ID={env['WAREHOUSE_ID']}: {done.stderr[-3000:]}"
            lakehouse.assert_no_secret(done.stdout + done.stderr)
            if args[0] == "query":
                assert done.stdout.splitlines() == ["n", "120"]
    configs = [r.query.get("warehouse") for r in lakehouse.standin.calls("GET", "/catalog/v1/config")]
    assert f"{wh.project_id}/{wh.name}" in configs and wh.name in configs
    assert configs.count(wh.id) == 1  # this test's own: lakeflow never sends the UUID there
    unknown = {**lakehouse.env, "WAREHOUSE_ID": "00000000-1111-2222-3333-444444444444"}
    for args in (["compact"], ["query", "SELECT 1"], ["status"], ["maintain", "--dry-run"]):
        done = subprocess.run([LAKEFLOW, *args], env=unknown, cwd=lakehouse.home.parent, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "NoSuchWarehouseException" in done.stderr, (args, done.stderr)


def test_the_schema_evolves_through_the_iceberg_rest_catalog_on_s3(lakehouse: Lakehouse, tmp_path: Path) -> None:
    """A firmware update adds a field and renames one: `lakeflow schema plan` lists the changes, the next
    compaction applies them in its commit through the REST catalog (files on S3, IAM enforced), old and new
    records compact together; a refused change stops the run in one line, nothing committed."""
    from lakeflow.schema.declared import default_schema_text

    lakehouse.compact("arrow", tmp_path / "v1.json")
    doc = json.loads(default_schema_text())
    doc["properties"]["battery"] = {"type": "number", "x-iceberg-type": "float"}
    doc["properties"]["site"] = dict(doc["properties"].pop("location"), **{"x-renamed-from": "location"})
    doc["required"] = [r if r != "location" else "site" for r in doc["required"]]
    v2 = tmp_path / "v2.schema.json"
    v2.write_text(json.dumps(doc))
    env = {**lakehouse.env, "TABLE_SCHEMA": str(v2)}
    planned = json.loads(lakehouse.lakeflow_plan(env))
    assert [(c["action"], c["field"]) for c in planned["changes"]] == [("apply", "battery"), ("apply", "site")]

    settings = load_settings(lakehouse.env)
    vended = open_catalog(settings).load(settings.namespace, settings.table, vended=True).storage.merged()
    writer = _client(vended, lakehouse.location)
    new = [{**{k: v for k, v in r.items() if k != "location"}, "site": r["location"], "battery": 3.5}
           for r in readings("run-v2", 20, start_ms=DAY + 7_200_000, step_ms=30_000, seed=8)]
    old = [{**{k: v for k, v in r.items() if k != "location"}, "site": r["location"]}  # no battery yet
           for r in readings("run-v1", 20, start_ms=DAY + 7_300_000, step_ms=30_000, seed=9)]
    writer.put_object(Bucket=lakehouse.bucket, Key=f"{lakehouse.prefix}/2025-11-21--02/part-v2-0-0.json",
                      Body=json_array(new).encode())
    writer.put_object(Bucket=lakehouse.bucket, Key=f"{lakehouse.prefix}/2025-11-21--02/part-v1-0-0.json",
                      Body=json_array(old).encode())
    done = lakehouse.compact_with(env, "spark", tmp_path / "v2.json")
    assert "[schema] apply" in done.stderr
    table = iceberg_catalog(settings).load_table((*NAMESPACE, TARGET))
    ids = {f.name: f.field_id for f in table.schema().fields}
    assert ids["site"] == 8 and ids["battery"] > 9  # the renamed column kept location's id
    rows = table.scan().to_arrow().to_pylist()
    assert len(rows) == 120 + 40
    by_run = {r["run_id"]: r for r in rows}
    assert by_run["run-v2"]["battery"] == 3.5 and by_run["run-v1"]["battery"] is None
    assert by_run["run-s3"]["site"] is not None  # written before the rename, read by id

    doc["properties"]["seq"] = {"type": "string"}
    v3 = tmp_path / "v3.schema.json"
    v3.write_text(json.dumps(doc))
    def data_keys() -> set[str]:  # the raw files and the table's (the lease's files are the compactors' own)
        return {k for k in lakehouse.keys() if "/_lakeflow/" not in k}

    before = (table.metadata.current_snapshot_id, table.schema().schema_id, data_keys())
    refused = subprocess.run([LAKEFLOW, "compact"], env={**lakehouse.env, "TABLE_SCHEMA": str(v3)},
                             cwd=lakehouse.home.parent, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].startswith(
        "lakeflow compact: schema change refused, nothing committed: seq: long → string")
    table.refresh()
    assert (table.metadata.current_snapshot_id, table.schema().schema_id, data_keys()) == before


WRITES = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")


def vend_read_only(lh: Lakehouse) -> Callable[[], None]:
    """The raw table's vended credentials made read-only, as Lakekeeper vends them to a principal holding
    only ``select`` on it (the compaction's under least privilege): the stand-in's policy for the table's
    prefix (listing uploads included) without its write actions, put on the role it vends for the raw
    table (moto evaluates a role's own policy; the role is the one its vended keys assume). Returns how to
    give the writes back."""
    iam = lh.admin.client("iam")
    sts = boto3.client("sts", **to_s3a(VendedConfig(lh.location, lh.vended)).boto3())
    role = sts.get_caller_identity()["Arn"].split(":assumed-role/", 1)[1].split("/", 1)[0]  # the raw table's
    full = _prefix_policy(lh.bucket, lh.prefix, list_uploads=True)
    read = {**full, "Statement": [{**st, "Action": [a for a in st["Action"] if a not in WRITES]}
                                  for st in full["Statement"]]}

    def put(policy: dict) -> None:
        iam.put_role_policy(RoleName=role, PolicyName="table-prefix", PolicyDocument=json.dumps(policy))

    put(read)
    return lambda: put(full)


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_compaction_with_read_only_raw_credentials_writes_nothing_into_the_raw_table(
        lakehouse: Lakehouse, tmp_path: Path, engine: str) -> None:
    """Least privilege: the compaction's principal may only read the raw table. A batch with an empty
    file, a malformed one and a bad record compacts; its quarantine goes to the Iceberg table's
    ``_lakeflow/quarantine/`` and the raw table is as it was, key for key. ``lakeflow maintain``
    reports the raw table's leftovers it may not remove (exit 0) and keeps the quarantine; run with
    ``--raw-leftovers-only`` by a principal that may write there, it removes them."""
    lh = lakehouse
    bad = readings("run-bad", 5, start_ms=DAY + 7_200_000, step_ms=30_000, seed=11)
    bad[1]["seq"] = "two"
    s3 = lh.s3
    s3.put_object(Bucket=lh.bucket, Key=f"{lh.prefix}/2025-11-21--02/part-s3-0-0.json", Body=json_array(bad).encode())
    s3.put_object(Bucket=lh.bucket, Key=f"{lh.prefix}/2025-11-21--02/part-s3-1-0.json", Body=b"")
    s3.create_multipart_upload(Bucket=lh.bucket, Key=f"{lh.prefix}/2025-11-21--02/part-s3-1-1.json")
    give_back = vend_read_only(lh)
    raw_s3 = _client(lh.vended, lh.location)
    _refused(lambda: raw_s3.put_object(Bucket=lh.bucket, Key=f"{lh.prefix}/part-probe-0-0.json", Body=b"[]"))

    def raw_keys() -> dict[str, tuple[int, str]]:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=lh.bucket, Prefix=f"{lh.prefix}/")
        return {o["Key"]: (o["Size"], o["ETag"]) for page in pages for o in page.get("Contents", [])}

    before = raw_keys()
    report = tmp_path / "report.json"
    done = subprocess.run([LAKEFLOW, "compact", "--engine", engine, "--report", str(report)], env=lh.env,
                          cwd=lh.home.parent, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    lh.assert_no_secret(done.stdout + done.stderr)
    assert raw_keys() == before                                                    # nothing written, nothing moved

    r = json.loads(report.read_text())
    assert (r["files_in"], r["files_quarantined"], r["rows_quarantined"], r["rows_out"]) == (9, 2, 1, 124)
    assert {q["file"] for q in r["quarantined"]} == {"part-s3-0-99.json", "2025-11-21--02/part-s3-1-0.json"}
    run = f"run={r['run_id']}"
    quarantine = f"{lh.table_prefix}/_lakeflow/quarantine"
    assert r["records_path"] == f"s3://{lh.bucket}/{quarantine}/records/{run}"
    assert r["quarantined_files_path"] == f"s3://{lh.bucket}/{quarantine}/files/{run}"
    kept = {k for k in lh.keys() if k.startswith(f"{quarantine}/")}
    files, records = f"{quarantine}/files/{run}", {k for k in kept if k.startswith(f"{quarantine}/records/{run}/")}
    assert len(records) == 1 and kept == {*records,
                    *(f"{files}/{q['file']}{suffix}" for q in r["quarantined"] for suffix in ("", ".reason.json"))}
    (record,) = s3.get_object(Bucket=lh.bucket, Key=records.pop())["Body"].read().decode().splitlines()
    assert json.loads(record)["reason"] == "field seq: expected an integer, got a string"
    assert s3.get_object(Bucket=lh.bucket, Key=f"{files}/part-s3-0-99.json")["Body"].read() == \
        s3.get_object(Bucket=lh.bucket, Key=f"{lh.prefix}/part-s3-0-99.json")["Body"].read()

    maintained = subprocess.run([LAKEFLOW, "maintain", "--json", "--leftover-min-age", "0s", "--orphan-min-age", "0s"],
                                env=lh.env, cwd=lh.home.parent, capture_output=True, text=True, timeout=300)
    assert maintained.returncode == 0, maintained.stderr[-4000:]
    lh.assert_no_secret(maintained.stdout + maintained.stderr)
    m = json.loads(maintained.stdout)
    assert (m["uploads_aborted"], m["in_progress_removed"], m["uploads_denied"], m["in_progress_denied"]) == (0, 0, 1, 1)
    assert m["leftovers_denied"].startswith("2 left: ") and "may not delete in the raw table" in m["leftovers_denied"]
    assert "`lakeflow maintain --raw-leftovers-only` as a principal with modify on it" in m["leftovers_denied"]
    assert raw_keys() == before
    assert {k for k in lh.keys() if k.startswith(f"{quarantine}/")} == kept       # no orphan of maintain's

    refused = subprocess.run([LAKEFLOW, "compact", "--engine", "arrow", "--delete-source", "--delete-min-age", "0s"],
                             env=lh.env, cwd=lh.home.parent, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-4000:]
    assert "the commit stands, but 7 compacted raw file(s) were not deleted" in refused.stderr.splitlines()[-1]
    assert raw_keys() == before                                                    # deleting raw files: modify

    give_back()                                                                    # the ingestion's principal
    cleared = subprocess.run([LAKEFLOW, "maintain", "--raw-leftovers-only", "--json", "--leftover-min-age", "0s"],
                             env=lh.env, cwd=lh.home.parent, capture_output=True, text=True, timeout=300)
    assert cleared.returncode == 0, cleared.stderr[-4000:]
    c = json.loads(cleared.stdout)
    assert (c["uploads_aborted"], c["in_progress_removed"], c["leftovers_denied"], c["raw_leftovers_only"]) == (
        1, 1, "", True)
    assert set(before) - set(raw_keys()) == {f"{lh.prefix}/.part-s3-1-9.json.inprogress.0a1b"}
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=lh.bucket, Prefix=f"{lh.prefix}/").get(
        "Uploads", [])] == []
