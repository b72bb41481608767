"""``tm-kill``: the ingestion job on a standalone Flink cluster, its TaskManager SIGKILLed at random
moments of a bounded run (and restarted each time); afterwards every committed reading is counted
by (``run_id``, ``seq``): nothing lost, nothing twice, every visible part file one whole JSON array.

The job is submitted as users submit it (``flink run -py jobs/sensor_ingest.py`` with the packaged
jar and ``lakeflow.zip``), on the embedded local catalog. Between kills the scenario waits until the
JobManager has noticed the loss and the job runs again, then waits a random 0.5–3 s.

``tm-kill-s3``: the same on S3 (a Lakekeeper stand-in whose warehouse is on moto with IAM enforced,
the cluster set up as ``lakeflow flink up`` does): the objects are read from moto, and the
multipart uploads the killed writers left open are counted (``open_uploads``).

Both then make a maintenance pass over the raw table and count again: ``lakeflow maintain`` on
``file://``; on S3 its leftovers step with the raw table's vended credentials (the stand-in serves
no Iceberg catalog for the rest of ``maintain``), the stand-in vending ``s3:ListBucketMultipartUploads``
as a deployment must for it. Promised: nothing hidden and no open upload left after it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

import requests

from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from lakeflow.runtime.homes import flink_home
from tests.chaos.common import LAKEFLOW, REPO, Result, local_env, moto_server, progress, tail, timed
from tests.support.fixtures_lakekeeper import env_for, start_lakekeeper
from tests.support.fixtures_servers import free_port
from tests.standins.lakekeeper import S3Account
from tests.support.sink_layout import files_under
from tests.support.envs import INGEST_PY

JOB = REPO / "jobs" / "sensor_ingest.py"
JAR, PACKAGE = REPO / "build" / "lakeflow-flink.jar", REPO / "build" / "lakeflow.zip"
ENDED = ("FINISHED", "FAILED", "CANCELED")
# Notice a dead TaskManager within seconds rather than the default 50 s.
HEARTBEATS = {"heartbeat.interval": 1000, "heartbeat.timeout": 8000}


def _job(rest: str, job_id: str) -> dict:
    return requests.get(f"{rest}/v1/jobs/{job_id}", timeout=10).json()


def _running(job: dict) -> bool:
    return job.get("state") == "RUNNING" and all(v.get("status") == "RUNNING" for v in job.get("vertices", []))


def _wait(rest: str, job_id: str, until, timeout: float, what: str) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            job = _job(rest, job_id)
            if until(job) or job.get("state") in ENDED:
                return job
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the job did not get {what} within {timeout:.0f} s")


def _submitted(rest: str, proc: subprocess.Popen, timeout: float = 180) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            jobs = requests.get(f"{rest}/v1/jobs/overview", timeout=5).json().get("jobs", [])
            if jobs:
                return jobs[0]["jid"]
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.5)
    raise RuntimeError("the job was not submitted (flink run ended or took too long)")


def count_parts(entries: Iterable[tuple[str, Callable[[], bytes]]], records: int) -> dict[str, int]:
    """Read every visible part file of ``entries`` (path under the location, how to read it):
    (run_id, seq) pairs, files that are not one JSON array, hidden leftovers (a ``.``/``_`` name in
    the path, never read; those named ``.…`` counted)."""
    keys: list[tuple[str, int]] = []
    partial = files = hidden = 0
    for name, read in sorted(entries, key=lambda e: e[0]):
        if _hidden(name):
            hidden += name.rsplit("/", 1)[-1].startswith(".")  # in progress until their checkpoint commits them
            continue
        files += 1
        try:
            content = json.loads(read())
            if not isinstance(content, list):
                raise ValueError("not an array")
        except ValueError:
            partial += 1
            continue
        keys += [(r["run_id"], int(r["seq"])) for r in content]
    unique = set(keys)
    run_ids = {k[0] for k in unique}
    expected = {(r, s) for r in run_ids for s in range(records)} if len(run_ids) == 1 else set()
    return {"files": files, "committed": len(keys), "runs": len(run_ids),
            "lost": len(expected - unique) if len(run_ids) == 1 else records,
            "duplicated": len(keys) - len(unique), "partial": partial, "unexpected": len(unique - expected),
            "hidden_leftovers": hidden}


def _hidden(rel: str) -> bool:
    return any(part.startswith((".", "_")) for part in rel.split("/"))


def count_committed(table_dir: Path, records: int) -> dict[str, int]:
    """:func:`count_parts` over the files under a local table directory (its hour buckets)."""
    return count_parts([(rel, p.read_bytes) for rel, p in files_under(table_dir).items()], records)


def count_committed_s3(s3, location: str, records: int) -> dict[str, int]:
    """:func:`count_parts` over the objects under an ``s3://bucket/prefix`` location, read from S3
    (``s3``: a boto3 client allowed to list and read there), plus ``open_uploads``: multipart
    uploads under the prefix never completed nor aborted (what a killed writer had open)."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/") + "/"
    entries = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            entries.append((key[len(prefix):], lambda key=key: s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
    counts = count_parts(entries, records)
    # hidden objects of any kind: the recoverable writer's "_…_tmp_…" pieces, ".…inprogress…" names
    counts["hidden_leftovers"] = sum(1 for name, _ in entries if _hidden(name))
    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    counts["open_uploads"] = len(uploads)
    return counts


def _kill_during_run(result: Result, cluster: FlinkCluster, env: dict[str, str], workdir: Path, *,
                     kills: int, rnd: random.Random) -> tuple[str, int, int]:
    """``flink run`` of the packaged job on ``cluster``; its TaskManager SIGKILLed ``kills`` times
    while the job runs (a new one started each time). Checks the run ended well; (job id, kills)."""
    env.pop("PYTHONPATH", None)  # lakeflow reaches the cluster as users ship it: -pyfs lakeflow.zip
    py = INGEST_PY
    log = workdir / "flink-run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), "run", "-pyclientexec", py,
                                 "-pyexec", py, "-pyfs", str(PACKAGE), "-py", str(JOB), "--parallelism", "2"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    try:
        rest = cluster.rest_url
        job_id = _submitted(rest, proc)
        done = 0
        while done < kills:
            job = _wait(rest, job_id, _running, 240, "running")
            if job.get("state") in ENDED:
                result.problems.append(f"the job ended ({job.get('state')}) after {done} kills: "
                                       "raise NUM_RECORDS for this scenario")
                break
            time.sleep(rnd.uniform(0.5, 3.0))
            pid = cluster.kill_taskmanager()
            done += 1
            cluster.start_taskmanager()
            progress(result.name, f"kill {done}/{kills}: TaskManager {pid} SIGKILLed, a new one started")
            _wait(rest, job_id, lambda j: not _running(j), 60, "noticed the lost TaskManager")
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    final = _job(rest, job_id)
    failures = requests.get(f"{rest}/v1/jobs/{job_id}/exceptions", timeout=10).json()
    result.check(code == 0, f"flink run exited {code}: {tail(log.read_text(), 4)}")
    result.check(final.get("state") == "FINISHED", f"job state {final.get('state')}")
    result.check(done == kills, f"only {done} of {kills} kills happened")
    return job_id, done, len(failures.get("exceptionHistory", {}).get("entries", []))


def _check_counts(result: Result, counts: dict[str, int], records: int, done: int, failures_seen: int) -> None:
    result.counts.update(kills=done, records=records, committed=counts["committed"], lost=counts["lost"],
                         duplicated=counts["duplicated"], partial=counts["partial"], files=counts["files"],
                         failures_seen=failures_seen, hidden_leftovers=counts["hidden_leftovers"])
    result.check(counts["runs"] == 1 and counts["unexpected"] == 0,
                 f"{counts['runs']} run ids, {counts['unexpected']} readings outside 0..{records - 1}")


def _job_env(cluster: FlinkCluster, home: Path, records: int, batch: int, interval_ms: int,
             **extra: str) -> dict[str, str]:
    return {**cluster.env(), **local_env(home, NUM_SENSORS="5", NUM_RECORDS=str(records), BATCH_SIZE=str(batch),
                                         BATCH_INTERVAL_MS=str(interval_ms)), "LAKEFLOW_JAR": str(JAR), **extra}


def _require_package() -> None:
    if not (JAR.is_file() and PACKAGE.is_file()):
        raise RuntimeError(f"{JAR.name} / {PACKAGE.name} missing: run `make package` first")


def tm_kill(workdir: Path, *, kills: int = 10, records: int = 7500, batch: int = 150, interval_ms: int = 1000,
            seed: Optional[int] = None, s3: bool = False) -> Result:
    """``tm-kill`` on the embedded local catalog (``file://``), or with ``s3`` ``tm-kill-s3``."""
    if s3:
        return tm_kill_s3(workdir, kills=kills, records=records, batch=batch, interval_ms=interval_ms, seed=seed)
    result = Result("tm-kill", zeros=("lost", "duplicated", "partial", "hidden_after_maintain"))
    rnd = random.Random(seed)
    with timed(result):
        _require_package()
        cluster = FlinkCluster(workdir / "cluster", rest_port=free_port(), rpc_port=free_port(), conf=HEARTBEATS, secret_variable=is_secret_key)
        cluster.start()
        try:
            home = workdir / "home"
            env = _job_env(cluster, home, records, batch, interval_ms)
            _, done, failures_seen = _kill_during_run(result, cluster, env, workdir, kills=kills, rnd=rnd)
            table = home / "warehouse" / "iot" / "sensor-readings"
            counts = count_committed(table, records)
            _check_counts(result, counts, records, done, failures_seen)
            maintain_local(result, env, workdir, table, records, counts)
        finally:
            cluster.stop()
    return result


def maintain_local(result: Result, env: dict[str, str], workdir: Path, table: Path, records: int,
                   before: dict[str, int]) -> None:
    """``lakeflow maintain --leftover-min-age 0s`` on the ``file://`` raw table at ``table`` (the job's
    environment ``env``: its one stream), then count again: ``leftovers_removed`` (by it),
    ``hidden_after_maintain``, and the committed part files as they were."""
    maintained = subprocess.run([LAKEFLOW, "maintain", "--json", "--leftover-min-age", "0s"], env=env,
                                cwd=workdir, capture_output=True, text=True, timeout=300)
    result.check(maintained.returncode == 0, f"lakeflow maintain exited {maintained.returncode}: "
                                             f"{tail(maintained.stderr, 4)}")
    try:
        removed = json.loads(maintained.stdout).get("in_progress_removed")
    except ValueError:
        removed = None
    after = count_committed(table, records)
    result.counts.update(leftovers_removed=removed, hidden_after_maintain=after["hidden_leftovers"])
    result.check(after["committed"] == before["committed"] and after["files"] == before["files"],
                 "maintenance changed the committed part files")


def _maintenance_pass(result: Result, account: S3Account, catalog_env: dict[str, str], location: str,
                      records: int, before: dict[str, int]) -> None:
    """``lakeflow maintain``'s leftovers step on the raw table (vended credentials), then count again."""
    from lakeflow.compaction.config import MaintainOptions
    from lakeflow.compaction.maintain import MaintainReport, clear_leftovers
    from lakeflow.compaction.source import open_raw
    from lakeflow.settings import load_settings
    from lakeflow.streams import load_pipeline

    settings = load_settings(catalog_env)
    raw = open_raw(settings, load_pipeline(settings).streams()[0])
    report = MaintainReport(table=location)
    clear_leftovers(raw.storage, MaintainOptions(leftover_min_age_s=0), report)
    after = count_committed_s3(account.client("s3"), location, records)
    result.counts.update(uploads_aborted=report.uploads_aborted, open_uploads_after_maintain=after["open_uploads"])
    result.check(not report.uploads_unlisted, report.uploads_unlisted)
    result.check(after["committed"] == before["committed"] and after["files"] == before["files"],
                 "maintenance changed the committed part files")


# moto with IAM enforced: its first calls (unauthenticated) create Lakekeeper's own IAM user.
_STRICT_BOOTSTRAP_CALLS = 3


def _strict_account(moto) -> S3Account:
    """Lakekeeper's storage credential on an IAM-enforcing moto (as the ``moto_strict`` fixture)."""
    iam = moto.client("iam")
    iam.create_user(UserName="lakekeeper")
    iam.put_user_policy(UserName="lakekeeper", PolicyName="all", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="lakekeeper")["AccessKey"]
    return S3Account(moto.url, moto.region, key["AccessKeyId"], key["SecretAccessKey"])


def tm_kill_s3(workdir: Path, *, kills: int = 10, records: int = 7500, batch: int = 150, interval_ms: int = 1000,
               seed: Optional[int] = None) -> Result:
    """``tm-kill`` on S3: a Lakekeeper stand-in whose warehouse is on moto with IAM enforced, the
    cluster set up as ``lakeflow flink up`` sets it up (keyless ``fs.s3a.*``, the table's
    refreshing AWS profile in the daemons' environment); the objects counted from moto, and the
    multipart uploads left open."""
    from lakeflow.ingest.storage import cluster_storage
    from lakeflow.settings import load_settings

    result = Result("tm-kill-s3", zeros=("lost", "duplicated", "partial", "hidden_leftovers",
                                         "open_uploads_after_maintain"))
    rnd = random.Random(seed)
    with timed(result):
        _require_package()
        with moto_server(workdir / "moto", strict_bootstrap_calls=_STRICT_BOOTSTRAP_CALLS) as moto:
            account = _strict_account(moto)
            lakekeeper = start_lakekeeper(account)
            lakekeeper.vend_upload_listing = True
            cluster = None
            try:
                home = workdir / "home"
                catalog_env = env_for(lakekeeper, LAKEFLOW_HOME=str(home))
                storage = cluster_storage(load_settings(catalog_env), home / "aws")  # as `lakeflow flink up`
                location = storage.handle.location
                progress(result.name, f"table at {location}; each table through its own filesystem")
                cluster = FlinkCluster(workdir / "cluster", rest_port=free_port(), rpc_port=free_port(),
                                       conf={**HEARTBEATS, **storage.conf}, secret_variable=is_secret_key)
                cluster.start()
                env = _job_env(cluster, home, records, batch, interval_ms, **catalog_env)
                _, done, failures_seen = _kill_during_run(result, cluster, env, workdir, kills=kills, rnd=rnd)
                counts = count_committed_s3(account.client("s3"), location, records)
                _check_counts(result, counts, records, done, failures_seen)
                result.counts.update(open_uploads=counts["open_uploads"],
                                     credential_calls=len(lakekeeper.calls("GET", "/credentials")))
                _maintenance_pass(result, account, catalog_env, location, records, counts)
                output = (workdir / "flink-run.log").read_text()
                result.check(f"→ {location}" in output and "s3a://" not in output,
                             "the run's output does not name the table's s3:// location")
                leaked = [s for s in (lakekeeper.token, *lakekeeper.vended_secrets) if s in output]
                result.check(not leaked, "a secret appeared in the output of flink run")
            finally:
                if cluster is not None:
                    cluster.stop()
                lakekeeper.stop()
    return result
