"""The ingestion job writing S3 for real: Flink's flink-s3-fs-hadoop plugin (S3A of Hadoop 3.3.4, AWS
SDK v1) and its recoverable writer, against moto with IAM enforced, through a Lakekeeper stand-in
that vends STS credentials scoped to the table's prefix.

Three routes, each a bounded run of the real job: (a) ``python jobs/sensor_ingest.py`` on its
in-process MiniCluster (``make run``; vended keys given to that JVM's filesystems), (b) ``flink
run`` of the packaged job against a standalone cluster started with the table's storage settings
(:func:`lakeflow.ingest.storage.cluster_storage`), and (c) ``lakeflow flink up``'s
cluster, whose TaskManagers write the table through its own filesystem (``lakeflow-s3``), which
re-vends the table's credentials while the job runs on credentials that really expire (``tests/standins/s3_expiry_proxy.py`` refuses expired session tokens). After each:
every reading (run_id, seq) exactly once in committed objects that are each one JSON array, in
the hour buckets of the run (``tests/support/sink_layout.py``), no hidden or in-progress object, no multipart upload left open, the location named as ``s3://``, no
secret in the output. A cluster that cannot write the table is refused before submission.

The unit tests (no process): tests/unit/test_ingest_s3.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from botocore.exceptions import ClientError

from lakeflow.catalog.lakekeeper import LakekeeperCatalog
from lakeflow.credentials import to_s3a
from lakeflow.ingest.storage import cluster_storage
from lakeflow.lineage import datasets
from lakeflow.schema import load_schema
from lakeflow.schema.records import RecordContract
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.runtime.homes import flink_home
from lakeflow.secret import is_secret_key
from tests.support.envs import INGEST_PY, bare_venv
from tests.support.fixtures_flink import packaged_job_args
from tests.support.fixtures_lakekeeper import env_for, settings_for
from tests.support.fixtures_servers import free_port
from tests.support.sink_layout import assert_sink_path

ROOT = Path(__file__).resolve().parents[2]


JOB = ROOT / "jobs" / "sensor_ingest.py"


LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")


NUM_SENSORS, NUM_RECORDS = 5, 2_000


SDK_BUFFER_S = 15  # the AWS SDK for Java re-runs a credential process this long before Expiration


@pytest.fixture(scope="module")
def packaged() -> None:
    """``make package`` (build/lakeflow-flink.jar, the jobs' environment archives), once for the module."""
    subprocess.run(["make", "-s", "package"], cwd=ROOT, check=True, capture_output=True, timeout=3000)


def job_env(lakekeeper, home: Path, **extra: str) -> dict[str, str]:
    """The job's environment: the stand-in's catalog settings, no AWS or lakeflow settings of the caller."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "OAUTH_", "LAKEFLOW_", "FLINK_"))}
    return {**base, **env_for(lakekeeper, LAKEFLOW_HOME=str(home)), "NUM_SENSORS": str(NUM_SENSORS),
            "NUM_RECORDS": str(NUM_RECORDS), "BATCH_SIZE": "250", "BATCH_INTERVAL_MS": "400",
            "LAKEFLOW_JAR": str(ROOT / "build" / "lakeflow-flink.jar"), **extra}


def table_location(lakekeeper) -> str:
    settings = settings_for(lakekeeper)
    return LakekeeperCatalog.from_settings(settings).load(settings.namespace, settings.table, vended=False).location


@dataclass
class Watch:
    """Reads every object under a location as soon as it is listed, while a run goes on: what was
    ever visible must already be a whole JSON array (the recoverable writer publishes a part file
    only when the checkpoint that rolled it completes)."""

    s3: object
    location: str
    seen: dict[str, bytes] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.bucket, _, prefix = self.location.removeprefix("s3://").partition("/")
        self.prefix = prefix.strip("/") + "/"
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self.poll()

    def poll(self) -> None:
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix).get("Contents", [])
        for obj in listed:
            name = obj["Key"][len(self.prefix):]
            if name not in self.seen:
                self.seen[name] = self.s3.get_object(Bucket=self.bucket, Key=obj["Key"])["Body"].read()
                try:
                    assert isinstance(json.loads(self.seen[name]), list)
                except (ValueError, AssertionError):
                    self.incomplete.append(name)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def check_table(lakekeeper, location: str, output: str, started: float, records: int = NUM_RECORDS) -> list[dict]:
    """The committed objects of a run ``started`` then and what it printed (see the module's docstring)."""
    s3 = lakekeeper.warehouse.s3.client("s3")  # Lakekeeper's own storage credential: sees everything
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    names = [k.removeprefix(prefix + "/") for k in keys]
    assert names, "nothing committed"
    for name in names:
        assert_sink_path(name, started)
    readings: list[dict] = []
    for key in keys:
        content = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        assert isinstance(content, list) and content, f"{key} is not a non-empty JSON array"
        readings += content
    assert sorted(r["seq"] for r in readings) == list(range(records))  # each reading exactly once
    assert len({r["run_id"] for r in readings}) == 1
    uuid.UUID(readings[0]["run_id"])
    schema = load_schema()
    contract = RecordContract(schema.contract())
    for r in readings:
        assert list(r) == list(schema.names)
        contract.check(r)
    assert s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix + "/").get("Uploads", []) == []
    # outside the table nothing else was written (no directory marker, no temporary object)
    everything = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert sorted(everything) == sorted(keys)
    assert f"Wrote {len(keys)} files, {records} readings" in output and f"→ {location}" in output
    assert location.startswith("s3://") and "s3a://" not in output
    return readings


def assert_no_secret(lakekeeper, texts: dict[str, str]) -> None:
    secrets = [lakekeeper.token, *lakekeeper.vended_secrets, *lakekeeper.vended_access_keys]
    leaks = [where for where, text in texts.items() if any(s in text for s in secrets)]
    assert not leaks, f"a secret in {leaks}"


def assert_scoped(lakekeeper, location: str) -> None:
    """The credentials vended for the table write its prefix only."""
    settings = settings_for(lakekeeper)
    handle = LakekeeperCatalog.from_settings(settings).load(settings.namespace, settings.table, vended=True)
    import boto3

    s3 = boto3.client("s3", **to_s3a(handle.storage).boto3())
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    for key in ("outside-the-table.json", f"{prefix}-sibling/part.json", "warehouse/other-table/part.json"):
        with pytest.raises(ClientError, match="AccessDenied"):
            s3.put_object(Bucket=bucket, Key=key, Body=b"[]")


@pytest.mark.slow
def test_make_run_writes_s3_exactly_once(make_lakekeeper, moto_strict, packaged, tmp_path: Path):
    lakekeeper = make_lakekeeper(s3=moto_strict)
    started = time.time()
    proc = subprocess.Popen([INGEST_PY, str(JOB), "--parallelism", "2"], env=job_env(lakekeeper, tmp_path),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    location = None
    deadline = time.monotonic() + 60
    while location is None and time.monotonic() < deadline:  # registered by the job itself
        try:
            location = table_location(lakekeeper)
        except Exception:
            time.sleep(0.2)
    watch = Watch(lakekeeper.warehouse.s3.client("s3"), location)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
        watch.stop()
    assert proc.returncode == 0, err[-4000:]
    watch.poll()
    assert not watch.incomplete, f"visible before they were whole JSON arrays: {watch.incomplete}"
    check_table(lakekeeper, location, out + err, started)
    assert "committed" in err  # progress lines, read from S3 while it ran
    assert_no_secret(lakekeeper, {"stdout": out, "stderr": err})
    assert_scoped(lakekeeper, location)


@pytest.mark.slow
def test_flink_run_on_a_cluster_holding_the_tables_settings(make_lakekeeper, moto_strict, make_flink_cluster,
                                                           packaged, tmp_path: Path):
    lakekeeper = make_lakekeeper(s3=moto_strict)
    settings = settings_for(lakekeeper, LAKEFLOW_HOME=str(tmp_path))
    storage = cluster_storage(settings, tmp_path / "aws")  # what `lakeflow flink up` starts with
    location = storage.handle.location
    # the daemons with a bare Python first on PATH: the job brings its environment (-pyarch)
    cluster = make_flink_cluster(conf=storage.conf, python=bare_venv(tmp_path))
    started = time.time()
    done = cluster.flink(packaged_job_args("--parallelism", "2"), env=job_env(lakekeeper, tmp_path), timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    check_table(lakekeeper, location, output, started)

    job_id = re.search(r"submitted Flink job ([0-9a-f]{32})", output).group(1)
    params = requests.get(f"{cluster.rest_url}/v1/jobs/{job_id}/config", timeout=10).json()[
        "execution-config"]["user-config"]
    assert params[datasets.PARAM_LOCATION] == location  # lineage keeps the user's s3:// URI
    job = requests.get(f"{cluster.rest_url}/v1/jobs/{job_id}", timeout=10).json()
    assert job["state"] == "FINISHED"
    assert any(f"{datasets.SINK_NAME_PREFIX}[{location}]" in v["name"] for v in job["vertices"])
    logs = "".join(p.read_text(errors="replace") for p in cluster.log_dir.glob("*"))
    assert_no_secret(lakekeeper, {"flink run": output, "cluster logs": logs})


@pytest.mark.slow
def test_flink_run_to_a_cluster_without_the_tables_settings_is_refused(make_lakekeeper, moto_strict, flink_cluster,
                                                                        packaged, tmp_path: Path):
    """The plain cluster of `make cluster-up` points S3A at AWS with no credentials: the job would
    fail at every restart. It is refused before submission, naming the fix."""
    lakekeeper = make_lakekeeper(s3=moto_strict)
    started = time.monotonic()
    done = flink_cluster.flink(packaged_job_args("--parallelism", "2"), env=job_env(lakekeeper, tmp_path), timeout=180)
    output = done.stdout + done.stderr
    assert done.returncode == 31, output[-2000:]  # flink run: the program aborted (ProgramAbortException)
    assert f"the Flink cluster at {flink_cluster.rest_url}" in output and "cannot write s3://" in output
    assert "lakeflow flink up" in output and "Job has been submitted" not in output
    assert time.monotonic() - started < 120
    assert_no_secret(lakekeeper, {"flink run": output})


@pytest.mark.slow
def test_cluster_up_keeps_writing_past_the_credentials_expiry(make_lakekeeper, s3_expiring, packaged, tmp_path: Path):
    """STS credentials that really expire LIFETIME s after they are issued (the proxy in front of moto
    refuses an expired session token, as S3 does), handed out again unchanged for half of it (as
    Lakekeeper caches them): the table's own filesystem in the TaskManager (``lakeflow-s3``) re-runs
    ``lakeflow credential-process`` halfway through the time its credentials have left, past the
    cache's half-life, gets new ones — counted at the stand-in — and never sends an expired token."""
    lifetime = 2 * SDK_BUFFER_S + 6
    lakekeeper = make_lakekeeper(s3=s3_expiring.account)
    lakekeeper.warehouse.sts_validity_s = lifetime
    home, rest_port = tmp_path / "cluster", free_port()
    env = job_env(lakekeeper, tmp_path, NUM_RECORDS="6000", BATCH_SIZE="60", BATCH_INTERVAL_MS="400")
    cluster = FlinkCluster(home, secret_variable=is_secret_key)  # the one cluster-up starts: same home, so stop() finds its pids
    try:
        up = subprocess.run([LAKEFLOW, "flink", "up", "--home", str(home), "--rest-port", str(rest_port),
                             "--rpc-port", str(free_port())], env=env, capture_output=True, text=True, timeout=240)
        assert up.returncode == 0, up.stderr[-3000:]
        location = table_location(lakekeeper)
        calls = len(lakekeeper.calls("GET", "/credentials"))
        started = time.time()
        done = subprocess.run([str(flink_home() / "bin" / "flink"), *packaged_job_args("--parallelism", "2")],
                              env={**env, "FLINK_CONF_DIR": str(home / "conf")}, capture_output=True, text=True,
                              timeout=300)
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-4000:]
        assert time.time() - started > lifetime  # the run outlived the first credentials
        check_table(lakekeeper, location, output, started, records=6000)
        assert len(lakekeeper.calls("GET", "/credentials")) - calls >= 2  # minted, then re-minted mid-run
        assert s3_expiring.proxy.refused == 0, "an expired session token was sent"
        assert len(s3_expiring.proxy.expiries) >= 3  # the tokens it watched: the client's and the re-vended
    finally:
        cluster.stop()
    logs = "".join(p.read_text(errors="replace") for p in (home / "log").glob("*"))
    conf = (home / "conf" / "config.yaml").read_text()
    assert_no_secret(lakekeeper, {"cluster-up": up.stdout + up.stderr, "flink run": output, "cluster logs": logs,
                                  "config.yaml": conf})
    assert_scoped(lakekeeper, location)


def test_part_files_re_vend_before_the_credentials_expire(moto_server):
    from datetime import datetime, timedelta, timezone

    from lakeflow.credentials import S3ASettings
    from lakeflow.ingest.progress import PartFiles

    moto_server.client("s3").create_bucket(Bucket="refresh")

    def settings(seconds: float) -> S3ASettings:
        return S3ASettings({"fs.s3a.access.key": "a", "fs.s3a.secret.key": "b", "fs.s3a.endpoint": moto_server.url,
                            "fs.s3a.endpoint.region": "us-east-1", "fs.s3a.path.style.access": "true"},
                           expires_at=datetime.now(timezone.utc) + timedelta(seconds=seconds))

    vends: list[float] = []

    def refresh() -> S3ASettings:
        vends.append(time.monotonic())
        return settings(3600)

    files = PartFiles("s3://refresh/t", settings(0.6), refresh=refresh)  # refreshed halfway: after 0.3 s
    files.scan()
    assert vends == []
    time.sleep(0.4)
    files.scan()
    files.scan()
    assert len(vends) == 1  # the new credentials last an hour: refreshed 5 min before that

    def broken() -> S3ASettings:
        raise RuntimeError("catalog down")

    failing = PartFiles("s3://refresh/t", settings(0), refresh=broken)
    with pytest.raises(RuntimeError, match="catalog down"):
        failing.scan()
    failing.scan()  # retried only after PartFiles.RETRY: the old client lists meanwhile
