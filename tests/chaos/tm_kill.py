"""``tm-kill``: the ingestion job on a standalone Flink cluster, its TaskManager SIGKILLed at random
moments of a bounded run (and restarted each time); afterwards every committed reading is counted
by (``run_id``, ``seq``): nothing lost, nothing twice, every visible part file one whole JSON array.

The job is submitted as users submit it (``flink run -py jobs/sensor_ingest.py`` with the packaged
jar and ``lakeflow.zip``), on the embedded local catalog. Between kills the scenario waits until the
JobManager has noticed the loss and the job runs again, then waits a random 0.5–3 s.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import requests

from lakeflow.flink_cluster import FlinkCluster, flink_home
from tests.chaos.common import REPO, Result, local_env, progress, tail, timed
from tests.fixtures_servers import free_port

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


def count_committed(table_dir: Path, records: int) -> dict[str, int]:
    """Read every visible part file: (run_id, seq) pairs, files that are not one JSON array."""
    keys: list[tuple[str, int]] = []
    partial = files = 0
    for path in sorted(table_dir.iterdir()) if table_dir.is_dir() else []:
        if path.name.startswith((".", "_")) or not path.is_file():
            continue  # in-progress files are hidden until their checkpoint commits them
        files += 1
        try:
            content = json.loads(path.read_text())
            if not isinstance(content, list):
                raise ValueError("not an array")
        except ValueError:
            partial += 1
            continue
        keys += [(r["run_id"], int(r["seq"])) for r in content]
    unique = set(keys)
    run_ids = {k[0] for k in unique}
    expected = {(r, s) for r in run_ids for s in range(records)} if len(run_ids) == 1 else set()
    hidden = sum(1 for p in table_dir.iterdir() if p.name.startswith(".")) if table_dir.is_dir() else 0
    return {"files": files, "committed": len(keys), "runs": len(run_ids),
            "lost": len(expected - unique) if len(run_ids) == 1 else records,
            "duplicated": len(keys) - len(unique), "partial": partial, "unexpected": len(unique - expected),
            "hidden_leftovers": hidden}


def tm_kill(workdir: Path, *, kills: int = 10, records: int = 7500, batch: int = 150, interval_ms: int = 1000,
            seed: Optional[int] = None) -> Result:
    result = Result("tm-kill", zeros=("lost", "duplicated", "partial"))
    rnd = random.Random(seed)
    with timed(result):
        if not (JAR.is_file() and PACKAGE.is_file()):
            raise RuntimeError(f"{JAR.name} / {PACKAGE.name} missing: run `make package` first")
        cluster = FlinkCluster(workdir / "cluster", rest_port=free_port(), rpc_port=free_port(), conf=HEARTBEATS)
        cluster.start()
        home = workdir / "home"
        env = {**cluster.env(), **local_env(home, NUM_SENSORS="5", NUM_RECORDS=str(records), BATCH_SIZE=str(batch),
                                            BATCH_INTERVAL_MS=str(interval_ms)), "LAKEFLOW_JAR": str(JAR)}
        env.pop("PYTHONPATH")  # lakeflow reaches the cluster as users ship it: -pyfs lakeflow.zip
        py = sys.executable
        log = workdir / "flink-run.log"
        try:
            with open(log, "w") as out:
                proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), "run", "-pyclientexec", py,
                                         "-pyexec", py, "-pyfs", str(PACKAGE), "-py", str(JOB), "--parallelism", "2"],
                                        env=env, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
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
            final = _job(rest, job_id)
            failures = requests.get(f"{rest}/v1/jobs/{job_id}/exceptions", timeout=10).json()
            result.check(code == 0, f"flink run exited {code}: {tail(log.read_text(), 4)}")
            result.check(final.get("state") == "FINISHED", f"job state {final.get('state')}")
            counts = count_committed(home / "warehouse" / "iot" / "sensor-readings", records)
            result.counts.update(kills=done, records=records, committed=counts["committed"], lost=counts["lost"],
                                 duplicated=counts["duplicated"], partial=counts["partial"], files=counts["files"],
                                 failures_seen=len(failures.get("exceptionHistory", {}).get("entries", [])),
                                 hidden_leftovers=counts["hidden_leftovers"])
            result.check(done == kills, f"only {done} of {kills} kills happened")
            result.check(counts["runs"] == 1 and counts["unexpected"] == 0,
                         f"{counts['runs']} run ids, {counts['unexpected']} readings outside 0..{records - 1}")
        finally:
            if "proc" in locals() and proc.poll() is None:
                proc.kill()
            cluster.stop()
    return result
