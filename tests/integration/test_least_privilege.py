"""The whole chain under least privilege (#39), every step a process as a user runs it, on Lakekeeper with
OpenFGA authorization (fixture ``authz_lakehouse``: the stand-ins with authorization on, Apache's Iceberg
REST server behind ``/catalog``, moto with IAM enforced):

1. ``lakeflow stack bootstrap`` as the admin gives each job its own principal and only its grants, and
   writes one env file per job;
2. the ingestion (``make run``'s job) as ``lf-ingest`` registers and writes the raw table;
3. the compaction as ``lf-compact`` (``select`` on the raw table, ``create`` in the namespace):
   ``compact``, ``query``, ``status``, ``maintain`` work, and nothing is written into the raw table;
4. every forbidden operation is refused in one line naming the principal and what to grant or what it
   cannot see: ``lf-other`` (no grant) and ``lf-ingest`` reading the compacted table.
No secret shows in any output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.envs import INGEST_PY
from tests.support.lakehouse import TARGET, AuthorizedLakehouse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
JOB = ROOT / "jobs" / "sensor_ingest.py"
NUM_RECORDS = 300


def _run(cmd: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def _raw_keys(lake: AuthorizedLakehouse, location: str) -> list[str]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    s3 = lake.admin_s3.client("s3")
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", []))


def _refusal(done: subprocess.CompletedProcess) -> str:
    """The command's refusal: exit 2, its last line (progress may come before it), no traceback."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_three_principals_each_with_only_its_grants_run_the_chain(
        authz_lakehouse: AuthorizedLakehouse, tmp_path: Path) -> None:
    lake, jobs = authz_lakehouse, tmp_path / "jobs"
    secrets, outputs = lake.client_secrets, {}
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "OAUTH_", "LAKEFLOW_", "FLINK_",
                                 "STACK_", "COMPACT_", "TABLE", "NAMESPACE"))}
    s3, warehouse = lake.admin_s3, lake.standin.warehouse
    stack = {**base, "LAKEFLOW_ENV_FILE": os.devnull, "LAKEFLOW_HOME": str(tmp_path / "admin"),
             "STACK_LAKEKEEPER_URL": lake.url, "STACK_OAUTH_TOKEN_URL": lake.oauth.token_url,
             "STACK_OAUTH_CLIENT_ID": "admin", "STACK_OAUTH_CLIENT_SECRET": secrets["admin"],
             "STACK_INGEST_CLIENT_ID": "lf-ingest", "STACK_INGEST_CLIENT_SECRET": secrets["lf-ingest"],
             "STACK_COMPACT_CLIENT_ID": "lf-compact", "STACK_COMPACT_CLIENT_SECRET": secrets["lf-compact"],
             "STACK_WAREHOUSE": "lakeflow", "STACK_BUCKET": warehouse.bucket, "STACK_KEY_PREFIX": "warehouse",
             "STACK_S3_ENDPOINT": s3.endpoint, "STACK_S3_REGION": s3.region, "STACK_S3_ACCESS_KEY_ID": s3.access_key,
             "STACK_S3_SECRET_ACCESS_KEY": s3.secret_key, "NAMESPACE": "iot"}
    (tmp_path / "empty-stack.env").touch()
    done = _run([LAKEFLOW, "stack", "bootstrap", "--env-file", str(tmp_path / "empty-stack.env"), "--wait", "10",
                 "--write-env-dir", str(jobs)], stack)
    outputs["bootstrap"] = done.stdout + done.stderr
    assert done.returncode == 0, outputs["bootstrap"]

    def as_job(job: str, **more: str) -> dict[str, str]:
        return {**base, "LAKEFLOW_ENV_FILE": str(jobs / f"{job}.env"), "LAKEFLOW_HOME": str(tmp_path / job), **more}

    # 2. the ingestion as lf-ingest: the job `make run` runs
    ingest = as_job("ingest", NUM_SENSORS="3", NUM_RECORDS=str(NUM_RECORDS), BATCH_SIZE="100",
                    BATCH_INTERVAL_MS="300", LAKEFLOW_JAR=str(ROOT / "build" / "lakeflow-flink.jar"))
    done = _run([INGEST_PY, str(JOB), "--parallelism", "1"], ingest)
    outputs["ingest"] = done.stdout + done.stderr
    assert done.returncode == 0, outputs["ingest"][-4000:]
    raw = warehouse.tables[(("iot",), "sensor-readings")]
    assert lake.authz.assignments(lake.generic_table("sensor-readings"))[0] == {
        "type": "ownership", "user": "oidc~lf-ingest"}
    written = _raw_keys(lake, raw.location)
    assert written

    # 3. the compaction as lf-compact: select on the raw table, create in the namespace
    compact = as_job("compact")
    answers = {}
    for name, args in (("compact", ["compact", "--engine", "arrow"]),
                       ("query", ["query", "--format", "json", "SELECT count(*) AS n FROM readings"]),
                       ("status", ["status", "--json"]), ("maintain", ["maintain"])):
        answers[name] = done = _run([LAKEFLOW, *args], compact)
        outputs[name] = done.stdout + done.stderr
        assert done.returncode == 0, f"{name}: {outputs[name][-3000:]}"
    assert json.loads(answers["query"].stdout) == [{"n": NUM_RECORDS}]
    status = json.loads(answers["status"].stdout)  # one stream: its row
    assert (status["table"], status["rows"]) == (f"iot.{TARGET}", NUM_RECORDS)
    assert lake.authz.assignments(lake.table(TARGET))[0] == {"type": "ownership", "user": "oidc~lf-compact"}
    assert _raw_keys(lake, raw.location) == written, "the compaction wrote nothing into the raw table"

    # 4. what each may not do: one line naming the principal and the privilege, or what it cannot see
    other = dict(line.split("=", 1) for line in (jobs / "compact.env").read_text().splitlines() if "=" in line)
    other.update(OAUTH_CLIENT_ID="lf-other", OAUTH_CLIENT_SECRET=secrets["lf-other"])
    (tmp_path / "other.env").write_text("".join(f"{k}={v}\n" for k, v in other.items()))
    as_other = {**base, "LAKEFLOW_ENV_FILE": str(tmp_path / "other.env"), "LAKEFLOW_HOME": str(tmp_path / "other")}
    refusals = {
        "other compact": (as_other, ["compact"], "does not exist or is not visible to lf-other"),
        "other query": (as_other, ["query", "SELECT 1"], "visible to lf-other"),
        "other register": (as_other, ["register", "--table", "mine"], "is not visible to lf-other"),
        "other status": (as_other, ["status"], "is not visible to lf-other"),
        "ingest query": (ingest, ["query", "SELECT 1"],
                         f"lf-ingest may not read table iot.{TARGET}: grant it select on it"),
        "ingest compact": (ingest, ["compact", "--engine", "arrow"],
                           f"lf-ingest may not read table iot.{TARGET}: grant it select on it"),
    }
    for name, (env, args, expected) in refusals.items():
        done = _run([LAKEFLOW, *args], env)
        outputs[name] = done.stdout + done.stderr
        assert expected in _refusal(done), (name, done.stderr)

    leaks = [where for where, text in outputs.items() if any(s in text for s in lake.secrets())]
    assert not leaks, f"a secret in {leaks}"
