"""The compaction on S3 (a moto server), with each engine: the raw table and its vended STS
credentials come from the Lakekeeper stand-in through lakeflow's real client; the job reads raw
files from moto, writes Parquet back, then commits with pyiceberg and writes the ledger on the
same S3. The Iceberg catalog is an embedded SQL catalog with its warehouse on S3 (the stand-in has
no Iceberg REST catalog): see tests/compaction_jobs/.

- spark: real S3A code (hadoop-aws 3.3.1) with lakeflow's translated ``fs.s3a.*`` settings, the
  job's stages under spark-submit. That old SDK's signatures are rejected by moto's auth
  enforcement (RUNTIME-NOTES), so moto runs with auth off: the settings are exercised, the
  credentials' scoping is not.
- arrow: ``lakeflow compact --engine arrow`` (pyarrow's S3 filesystem, no JVM).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakeflow.catalog import open_catalog
from lakeflow.compaction import commands
from lakeflow.settings import load_settings
from tests.fixtures_compaction import REPO, readings
from tests.fixtures_lakekeeper import env_for

pytestmark = pytest.mark.slow

DAY = 1763683200000
JOBS = REPO / "tests" / "compaction_jobs"
JOB_FLAGS = ["--delete-source", "--delete-min-age", "0s", "--move-quarantined"]


@dataclass
class S3Raw:
    """The raw table on moto with this test's part files, and the environment to compact it."""

    env: dict
    location: str
    vended: dict
    bucket: str
    prefix: str
    s3: object        # boto3 S3 client on moto
    home: Path
    report: Path
    secrets: tuple[str, ...]

    def run(self, cmd: list[str]) -> subprocess.CompletedProcess:
        done = subprocess.run(cmd, env=commands.submit_env(self.env), cwd=self.home.parent, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        for secret in self.secrets:
            assert secret not in done.stdout + done.stderr and secret not in " ".join(cmd)
        return done


@pytest.fixture
def s3_raw(lakekeeper, moto_server, tmp_path: Path) -> S3Raw:
    """120 readings in 6 committed part files (an hourly folder), a truncated one, an in-progress one."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("LAKEFLOW_", "COMPACT_", "OAUTH_"))},
           **env_for(lakekeeper), "LAKEFLOW_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    settings = load_settings(env)
    handle = open_catalog(settings).register(settings.namespace, settings.table)
    vended = open_catalog(settings).load(settings.namespace, settings.table, vended=True).storage.merged()
    assert handle.location.startswith("s3://") and vended.get("s3.session-token")

    bucket, prefix = handle.location.removeprefix("s3://").split("/", 1)
    s3 = moto_server.client("s3")
    rows = readings("run-s3", 120, start_ms=DAY + 3_600_000, step_ms=30_000, seed=7)
    for n in range(0, 120, 20):
        s3.put_object(Bucket=bucket, Key=f"{prefix}/2025-11-21--01/part-s3-{n % 2}-{n // 20}.json",
                      Body=json.dumps(rows[n:n + 20]).encode())
    s3.put_object(Bucket=bucket, Key=f"{prefix}/part-s3-0-99.json", Body=b'[{"sensor_id": "x", ')
    s3.put_object(Bucket=bucket, Key=f"{prefix}/.part-s3-1-9.json.inprogress.0a1b", Body=b"[")

    env.update({"ICEBERG_WAREHOUSE": f"s3://{bucket}/iceberg", "ICEBERG_S3_ENDPOINT": moto_server.url,
                "ICEBERG_S3_KEY": "iceberg-writer", "ICEBERG_S3_SECRET": "iceberg-secret-value"})
    return S3Raw(env=env, location=handle.location, vended=vended, bucket=bucket, prefix=prefix, s3=s3,
                 home=tmp_path / "home", report=tmp_path / "report.json",
                 secrets=(vended["s3.secret-access-key"], vended["s3.session-token"], "iceberg-secret-value",
                          lakekeeper.token))


def check_compacted(raw: S3Raw, engine: str, moto_url: str) -> pa.Table:
    """The run's report, the files it left on S3 and its Iceberg commit; the Parquet file written."""
    r = json.loads(raw.report.read_text())
    assert r["engine"] == engine
    assert (r["files_in"], r["files_compacted"], r["rows_out"], r["files_out"]) == (7, 6, 120, 1)
    assert r["quarantined"] == [{"file": "part-s3-0-99.json",
                                 "reason": "not a JSON array of reading objects (malformed or truncated JSON)"}]

    bucket, prefix, s3 = raw.bucket, raw.prefix, raw.s3
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    (data,) = [k for k in keys if k.startswith("iceberg/") and k.endswith(".parquet")]
    assert "/data/ts_day=2025-11-21/sensor-readings-compacted__2025-11-21__20251121T010000000Z__" in data
    table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=data)["Body"].read()))
    assert sorted(table.column("seq").to_pylist()) == list(range(120))
    assert f"{prefix}/_quarantine/part-s3-0-99.json" in keys                       # moved (S3: copy + delete)
    left = [k for k in keys if k.startswith(f"{prefix}/2025-11-21--01/") and not k.endswith("/")]
    assert left == []                                                              # --delete-source
    assert f"{prefix}/.part-s3-1-9.json.inprogress.0a1b" in keys                   # never touched
    ledger = "iceberg/iot/sensor-readings-compacted/_lakeflow/compaction/ledger-"   # where only the compactor writes
    assert r["ledger"].startswith(f"s3://{bucket}/{ledger}") and r["ledger"][len(f"s3://{bucket}/"):] in keys
    assert not any(k.startswith(f"{prefix}/_lakeflow/") for k in keys)

    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("s3test", uri=f"sqlite:///{raw.home / 'iceberg.db'}", warehouse=raw.env["ICEBERG_WAREHOUSE"],
                         **{"s3.endpoint": moto_url, "s3.region": "us-east-1", "s3.access-key-id": "k",
                            "s3.secret-access-key": "s"})
    committed = catalog.load_table(("iot", "sensor-readings-compacted")).scan().to_arrow()
    assert sorted(committed.column("seq").to_pylist()) == list(range(120))
    return table


def test_spark_engine_reads_and_writes_s3_through_s3a(s3_raw: S3Raw, moto_server, s3a_jars) -> None:
    cmd = [str(commands.spark_home() / "bin" / "spark-submit"), "--master", "local[2]",
           "--jars", ",".join(str(j) for j in s3a_jars), "--conf", "spark.ui.enabled=false",
           str(JOBS / "s3_stages.py"), "--engine", "spark", "--report", str(s3_raw.report), *JOB_FLAGS]
    s3_raw.run(cmd)
    table = check_compacted(s3_raw, "spark", moto_server.url)
    assert b"org.apache.spark.version" in table.schema.metadata  # written by Spark, i.e. through S3A


def test_arrow_engine_reads_and_writes_s3_with_pyarrow(s3_raw: S3Raw, moto_server) -> None:
    cmd = [sys.executable, str(JOBS / "s3_cli.py"), "compact", "--engine", "arrow", "--report", str(s3_raw.report),
           *JOB_FLAGS]
    done = s3_raw.run(cmd)
    table = check_compacted(s3_raw, "arrow", moto_server.url)
    assert b"org.apache.spark.version" not in (table.schema.metadata or {})  # written by pyarrow
    assert "log4j" not in done.stderr                                       # no JVM started
