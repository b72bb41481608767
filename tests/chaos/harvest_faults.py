"""``harvest-garbage``: the lineage harvester against a JobManager (the REST stub replaying a real
cluster's answers) whose answers for three jobs are truncated, garbage and huge.

``lakeflow harvest`` runs as its own process: it must not crash (no traceback), must report exactly
the three bad jobs with a reason and harvest the others; a garbage job list is refused with one
clear line and exit code 2.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lakeflow.lineage.flink_rest import MAX_BODY_BYTES
from tests.chaos.common import Result, lakeflow, progress, tail, timed
from tests.standins.flink_rest import Answer, FlinkRestStub
from tests.support.harvest_scenario import RECORDING


def harvest_garbage(workdir: Path) -> Result:
    result = Result("harvest-garbage", zeros=("crashed", "unreported", "wrongly_failed"))
    with timed(result):
        scenario = json.loads((RECORDING / "scenario.json").read_text())
        job_ids = [j for ids in scenario["job_ids"].values() for j in ids]
        stub = FlinkRestStub().start()
        try:
            stub.load_recording(RECORDING)
            truncated, garbage, huge = job_ids[:3]
            recorded = json.loads((RECORDING / json.loads((RECORDING / "index.json").read_text())
                                   [f"/jobs/{truncated}"]["file"]).read_text())
            stub.route(f"/jobs/{truncated}", Answer(200, recorded, truncate=True))
            stub.route(f"/jobs/{garbage}", Answer(200, b"\x00\x1f<html>502 proxy error</html>{{"))
            stub.route(f"/jobs/{huge}", Answer(huge_bytes=MAX_BODY_BYTES + 8 * 1024 * 1024))
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LAKEFLOW_HOME": str(workdir / "home")}
            out = workdir / "harvest.json"
            done = lakeflow(env, "harvest", "--rest-url", stub.url, "--output", str(out), "--max-retries", "1",
                            "--timeout", "10", timeout=300)
            progress(result.name, f"harvest exit {done.returncode}: {tail(done.stderr, 4)}")
            crashed = int("Traceback" in done.stderr or done.returncode not in (0, 1) or not out.exists())
            doc = json.loads(out.read_text()) if out.exists() else {"jobs": [], "failed_jobs": []}
            failed = {f["job_id"]: f.get("error", "") for f in doc.get("failed_jobs", [])}
            harvested = {j["job_id"] for j in doc.get("jobs", [])}
            bad = {truncated, garbage, huge}
            result.check(done.returncode == 1, f"exit code {done.returncode}, expected 1 (some jobs failed)")
            result.check(all(failed.get(j) for j in bad & set(failed)), "a failed job carries no reason")
            result.check(harvested == set(job_ids) - bad, f"harvested {sorted(harvested)}")

            stub.route("/jobs/overview", Answer(200, b"not json at all"))
            listing = lakeflow(env, "harvest", "--rest-url", stub.url, "--output", str(workdir / "none.json"),
                               "--max-retries", "0", timeout=120)
            refused = listing.returncode == 2 and "not JSON" in listing.stderr and "Traceback" not in listing.stderr
            result.check(refused, f"garbage job list: exit {listing.returncode}: {tail(listing.stderr, 2)}")
            result.counts.update(jobs=len(job_ids), bad=len(bad), reported=len(bad & set(failed)),
                                 harvested=len(harvested), crashed=crashed + int("Traceback" in listing.stderr),
                                 unreported=len(bad - set(failed)), wrongly_failed=len(set(failed) - bad))
        finally:
            stub.stop()
    return result
