"""The harvester's real-cluster scenario: submit the test jobs, wait for them, record the answers.

Used by the module-scoped fixture in ``fixtures_harvest.py`` and, to refresh the recorded
fixtures the fast tests replay, as a script::

    .venv/bin/python -m tests.support.harvest_scenario record   # starts its own cluster, ~1 min
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.secret import is_secret_key
from tests.support.envs import INGEST_PY

JOBS_DIR = Path(__file__).parents[1] / "harvest_jobs"
RECORDING = Path(__file__).parents[1] / "fixtures" / "harvest" / "cluster"
GATEWAY_RECORDING = Path(__file__).parents[1] / "fixtures" / "harvest" / "gateway.json"
# name → (runs, state each run settles in); sql-print keeps running until cancelled.
EXPECTED = {
    "harvest-sql-filesystem": ("FINISHED",),
    "harvest-sql-print": ("RUNNING",),
    "harvest-kafka-named": ("FINISHED",),
    "harvest-resubmitted": ("FAILED", "FINISHED"),
    "harvest-batch": ("FINISHED",),
    "harvest-declared-sink": ("FINISHED",),
}


@dataclass(frozen=True)
class Scenario:
    rest_url: str
    archive: Path  # the SQL filesystem table's directory
    location: str  # the declared sink's location (file:// URI)
    catalog_uri: str
    job_ids: dict[str, tuple[str, ...]]  # name → job ids, oldest first


def submit(cluster: FlinkCluster, work: Path) -> Scenario:
    """Submit every job from one ``flink run -py`` client, then wait until each has settled."""
    archive, warehouse = work / "archive", work / "warehouse"
    archive.mkdir(parents=True, exist_ok=True)
    location = (warehouse / "iot" / "sensor-readings").as_uri()
    catalog_uri = (work / "catalog").as_uri()
    py = INGEST_PY
    proc = cluster.flink(["run", "-d", "-pyclientexec", py, "-pyexec", py, "-pyfs", str(JOBS_DIR),
                          "-py", str(JOBS_DIR / "submit_all.py"), str(archive), location, catalog_uri], timeout=300)
    submitted = proc.stdout.count("Job has been submitted")
    expected = sum(len(v) for v in EXPECTED.values())
    if proc.returncode != 0 or submitted != expected:
        raise RuntimeError(f"flink run submitted {submitted}/{expected} jobs (exit {proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return Scenario(cluster.rest_url, archive, location, catalog_uri, wait_settled(cluster.rest_url))


def wait_settled(rest_url: str, timeout: float = 180.0) -> dict[str, tuple[str, ...]]:
    """Wait until every expected job is in its expected state; job ids by name, oldest first."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = requests.get(f"{rest_url}/v1/jobs/overview", timeout=10).json()["jobs"]
        ours = sorted((j for j in jobs if j["name"] in EXPECTED), key=lambda j: (j["name"], j["start-time"]))
        states = {name: sorted(j["state"] for j in ours if j["name"] == name) for name in EXPECTED}
        if all(states[n] == sorted(s) for n, s in EXPECTED.items()):
            return {n: tuple(j["jid"] for j in ours if j["name"] == n) for n in EXPECTED}
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs did not settle within {timeout:.0f}s: {states}")
        time.sleep(0.5)


def cancel_running(rest_url: str, job_ids: dict[str, tuple[str, ...]]) -> None:
    """Cancel the scenario's jobs that are still running (the session cluster is shared)."""
    for jids in job_ids.values():
        for jid in jids:
            requests.patch(f"{rest_url}/v1/jobs/{jid}?mode=cancel", timeout=10)


def gateway_setup(archive: Path) -> list[str]:
    """What the SQL Gateway stand-in's catalog holds: the SQL jobs' ``lake`` catalog."""
    sys.path.insert(0, str(JOBS_DIR))
    try:
        import lake_catalog
    finally:
        sys.path.remove(str(JOBS_DIR))
    return lake_catalog.ddl(str(archive))


def record(rest_url: str, job_ids: dict[str, tuple[str, ...]], out: Path) -> None:
    """Save the JobManager's answers for every request the harvester makes (index.json + bodies)."""
    from lakeflow.lineage.flink_rest import VERTEX_METRICS

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    index: dict[str, dict] = {}

    def save(path: str) -> dict:
        response = requests.get(f"{rest_url}/v1{path}", timeout=10)
        name = f"{len(index):03d}.json"
        body = response.json()
        (out / name).write_text(json.dumps(body, indent=1, sort_keys=True) + "\n")
        index[path] = {"file": name, "status": response.status_code}
        return body

    save("/config")
    overview = save("/jobs/overview")
    ours = {jid for jids in job_ids.values() for jid in jids}
    overview["jobs"] = [j for j in overview["jobs"] if j["jid"] in ours]
    (out / index["/jobs/overview"]["file"]).write_text(json.dumps(overview, indent=1, sort_keys=True) + "\n")
    for jid in sorted(ours):
        detail = save(f"/jobs/{jid}")
        for suffix in ("/config", "/checkpoints", "/checkpoints/config", "/exceptions"):
            save(f"/jobs/{jid}{suffix}")
        if detail["state"] == "RUNNING":
            for v in detail["vertices"]:
                save(f"/jobs/{jid}/vertices/{v['id']}/subtasks/metrics?get={','.join(VERTEX_METRICS)}&agg=sum")
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")


# what the harvester asks the gateway about the scenario (Sink V2 writers: every catalog's tables)
GATEWAY_STATEMENTS = [
    "DESCRIBE CATALOG EXTENDED `lake`", "DESCRIBE CATALOG EXTENDED `default_catalog`",
    "SHOW CREATE TABLE `lake`.`iot`.`readings`", "SHOW CREATE TABLE `lake`.`iot`.`archive`",
    "SHOW CREATE TABLE `lake`.`iot`.`console`",
    "SHOW CREATE TABLE `default_catalog`.`default_database`.`src`",
    "SHOW CREATE TABLE `default_catalog`.`default_database`.`numbers`",
    "SHOW CATALOGS", "SHOW DATABASES IN `default_catalog`", "SHOW DATABASES IN `lake`",
    "SHOW TABLES IN `default_catalog`.`default_database`", "SHOW TABLES IN `lake`.`default`",
    "SHOW TABLES IN `lake`.`iot`"]


def record_gateway(archive: Path, statements: list[str], out: Path) -> None:
    """Run the statements on a real TableEnvironment holding the ``lake`` catalog; save the answers."""
    from tests.standins.sql_gateway import FlinkExecutor, StatementError

    executor = FlinkExecutor(gateway_setup(archive))
    answers: dict[str, dict] = {}
    for statement in statements:
        try:
            columns, rows = executor(statement)
            answers[statement] = {"columns": columns, "rows": rows}
        except StatementError as exc:
            answers[statement] = {"error": str(exc)}
    out.write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")


def main() -> int:
    """Start a cluster, run the scenario, record its answers into tests/fixtures/harvest/."""
    from tests.support.fixtures_servers import free_port

    work = Path("/tmp/lakeflow-harvest-recording")
    if work.exists():
        shutil.rmtree(work)
    cluster = FlinkCluster(work / "cluster", rest_port=free_port(), rpc_port=free_port(), secret_variable=is_secret_key)
    cluster.start()
    try:
        scenario = submit(cluster, work)
        time.sleep(3)  # let the running job's metrics settle
        record(cluster.rest_url, scenario.job_ids, RECORDING)
        (RECORDING / "scenario.json").write_text(json.dumps(
            {"archive": str(scenario.archive), "location": scenario.location, "catalog_uri": scenario.catalog_uri,
             "job_ids": scenario.job_ids}, indent=1, sort_keys=True) + "\n")
        record_gateway(scenario.archive, GATEWAY_STATEMENTS, GATEWAY_RECORDING)
        cancel_running(cluster.rest_url, scenario.job_ids)
    finally:
        cluster.stop()
    print(f"recorded {RECORDING} and {GATEWAY_RECORDING}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        sys.exit("usage: python -m tests.support.harvest_scenario record")
    sys.exit(main())


def expected_lineage(archive: str, location: str, gateway: bool) -> dict[str, dict]:
    """The exact lineage of every scenario job: inputs, outputs, skipped and unresolved."""
    def catalog(table: str) -> str:
        return f"catalog table {table}: platform unknown (give --sql-gateway-url or a catalog_platform_map entry)"

    def missing(table: str) -> str:
        quoted = ".".join(f"`{p}`" for p in table.split("."))
        return (f"catalog table {table}: SQL Gateway lookup failed: SHOW CREATE TABLE {quoted}: org.apache.flink."
                f"table.api.ValidationException: Could not execute SHOW CREATE TABLE. Table with identifier "
                f"{quoted} does not exist.")

    def writer(table: str) -> str:
        plain = f"table sink '{table}': the plan names no catalog or database (Sink V2 writer)"
        return plain + (", and no catalog the gateway shows has a table of that name (a session or job-local "
                        "table?)" if gateway else "")

    unknown = missing if gateway else catalog
    fs_sink = "filesystem table sink (StreamingFileWriter): the plan names neither the table nor its path"
    archive_uri = f"file://{archive}"
    return {
        "harvest-sql-filesystem": dict(
            inputs=[], outputs=[], unresolved=[fs_sink] if gateway else [catalog("lake.iot.readings"), fs_sink],
            skipped=["lake.iot.readings: connector 'datagen' is not a dataset"] if gateway else []),
        "harvest-sql-print": dict(
            inputs=[archive_uri] if gateway else [], outputs=[],
            unresolved=[] if gateway else [catalog("lake.iot.archive"), catalog("lake.iot.console")],
            skipped=["lake.iot.console: connector 'print' is not a dataset"] if gateway else []),
        "harvest-kafka-named": dict(inputs=[], outputs=[], skipped=[], unresolved=[
            f"name-only: operator '{op}' is named like a Kafka {role} of topic '{topic}', but nothing else shows "
            "a Kafka connector" for op, role, topic in (("KafkaSink-payments", "sink", "payments"),
                                                        ("Sink: KafkaSink-audit", "sink", "audit"),
                                                        ("Source: KafkaSource-orders", "source", "orders"))]),
        "harvest-resubmitted": dict(inputs=[], outputs=[], skipped=[], unresolved=[
            unknown("default_catalog.default_database.src"),
            writer("sink")]),
        "harvest-batch": dict(inputs=[], outputs=[], skipped=[], unresolved=[
            unknown("default_catalog.default_database.numbers"),
            writer("nowhere")]),
        "harvest-declared-sink": dict(inputs=[], outputs=[location], skipped=[],
                                      unresolved=["source 'SensorSource': no connector evidence in the plan"]),
    }
