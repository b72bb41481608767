"""The compaction's stages on S3: real S3A code (hadoop-aws 3.3.1) with lakeflow's translated
``fs.s3a.*`` settings, reading raw files from moto and writing Parquet back, then the pyiceberg
commit and ledger on the same S3. The raw table and its vended STS credentials come from the
Lakekeeper stand-in through lakeflow's real client.

Limits (see RUNTIME-NOTES): that old SDK's signatures are rejected by moto's auth enforcement, so
moto runs with auth off here: the settings are exercised, the credentials' scoping is not.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lakeflow.catalog import open_catalog
from lakeflow.compaction import commands
from lakeflow.compaction.storage import Storage
from lakeflow.settings import load_settings
from tests.fixtures_compaction import REPO, readings
from tests.fixtures_lakekeeper import env_for

pytestmark = pytest.mark.slow

DAY = 1763683200000
DRIVER = REPO / "tests" / "compaction_jobs" / "s3_stages.py"
# hadoop-aws 3.3.1 cannot parse hadoop 3.5's "60s"-style defaults: plain numbers (RUNTIME-NOTES)
DURATIONS = {"spark.hadoop.fs.s3a.threads.keepalivetime": "60", "spark.hadoop.fs.s3a.multipart.purge.age": "86400",
             "spark.hadoop.fs.s3a.connection.establish.timeout": "5000",
             "spark.hadoop.fs.s3a.connection.timeout": "200000"}


def test_stages_read_and_write_s3_through_s3a(lakekeeper, moto_server, s3a_jars, tmp_path: Path) -> None:
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
    report = tmp_path / "report.json"
    cmd = [str(commands.spark_home() / "bin" / "spark-submit"), "--master", "local[2]",
           "--jars", ",".join(str(j) for j in s3a_jars), "--conf", "spark.ui.enabled=false",
           *[a for k, v in DURATIONS.items() for a in ("--conf", f"{k}={v}")],
           str(DRIVER), "--report", str(report), "--delete-source", "--move-quarantined"]
    done = subprocess.run(cmd, env=commands.submit_env(env), capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    for secret in (vended["s3.secret-access-key"], vended["s3.session-token"], "iceberg-secret-value",
                   lakekeeper.token):
        assert secret not in output and secret not in " ".join(cmd)

    r = json.loads(report.read_text())
    assert (r["files_in"], r["files_compacted"], r["rows_out"], r["files_out"]) == (7, 6, 120, 1)
    assert r["quarantined"] == [{"file": "part-s3-0-99.json",
                                 "reason": "not a JSON array of reading objects (malformed or truncated JSON)"}]

    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    (data,) = [k for k in keys if k.startswith("iceberg/") and k.endswith(".parquet")]
    assert "/data/ts_day=2025-11-21/sensor-readings-compacted__2025-11-21__20251121T010000000Z__" in data
    table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=data)["Body"].read()))
    assert b"org.apache.spark.version" in table.schema.metadata  # written by Spark, i.e. through S3A
    assert sorted(table.column("seq").to_pylist()) == list(range(120))
    assert f"{prefix}/_quarantine/part-s3-0-99.json" in keys                       # moved (S3: copy + delete)
    left = [k for k in keys if k.startswith(f"{prefix}/2025-11-21--01/") and not k.endswith("/")]
    assert left == []                                                              # --delete-source
    assert f"{prefix}/.part-s3-1-9.json.inprogress.0a1b" in keys                   # never touched
    assert r["ledger"].startswith(f"s3://{bucket}/{prefix}/_lakeflow/compaction/iot.sensor-readings-compacted/ledger-")

    from pyiceberg.catalog.sql import SqlCatalog
    catalog = SqlCatalog("s3test", uri=f"sqlite:///{tmp_path / 'home' / 'iceberg.db'}", warehouse=env["ICEBERG_WAREHOUSE"],
                         **{"s3.endpoint": moto_server.url, "s3.region": "us-east-1", "s3.access-key-id": "k",
                            "s3.secret-access-key": "s"})
    committed = catalog.load_table(("iot", "sensor-readings-compacted")).scan().to_arrow()
    assert sorted(committed.column("seq").to_pylist()) == list(range(120))
    assert Storage(handle.location, vended).exists(r["ledger"].split(f"{prefix}/", 1)[1])
