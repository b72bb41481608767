"""``make bench-harvest``: wall time of ``lakeflow harvest`` vs DataHub's ``flink`` source on the
same local cluster with 25 jobs, in the same run; and the two outputs' lineage edges compared.

DataHub (``acryl-datahub[flink]``) lives only in the benchmark's own virtualenv
(``build/bench-datahub-venv``, made by the Makefile). Both write DataHub MCPs to a file; each is
timed as a whole command (start-up included: that is what a scheduler pays), median of N runs.
DataHub's ``file`` source then reads lakeflow's MCP file back, to show the format is DataHub's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lakeflow.flink_cluster import FlinkCluster  # noqa: E402
from lakeflow.runtime.homes import ingestion_python  # noqa: E402
from tests.fixtures_servers import free_port  # noqa: E402

JOBS = 25
TARGET = 0.25


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datahub-venv", type=Path, default=ROOT / "build" / "bench-datahub-venv")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-harvest")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each tool (median reported)")
    parser.add_argument("--rest-url", help="use this cluster (already holding the jobs) instead of starting one")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the started cluster running")
    args = parser.parse_args()
    datahub = args.datahub_venv / "bin" / "datahub"
    if not datahub.exists():
        sys.exit(f"{datahub} missing: run `make bench-harvest` (it builds the DataHub virtualenv)")
    if args.work.exists() and not args.rest_url:
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True, exist_ok=True)

    cluster = FlinkCluster(args.work / "cluster", rest_port=free_port(), rpc_port=free_port(), slots=4)
    if args.rest_url:
        rest_url = args.rest_url
    else:
        print(f"starting a local Flink cluster ({cluster.rest_url}) …", flush=True)
        cluster.start()
        rest_url = cluster.rest_url
    try:
        if not args.rest_url:
            submit(cluster, args.work)
        ours = time_command([str(Path(sys.executable).parent / "lakeflow"), "harvest", "--rest-url", rest_url,
                             "--format", "datahub", "--output", str(args.work / "lakeflow-mcps.json")], args.repeat)
        recipe = args.work / "datahub-recipe.yml"
        recipe.write_text(json.dumps({
            "source": {"type": "flink", "config": {"connection": {"rest_api_url": rest_url}}},
            "sink": {"type": "file", "config": {"filename": str(args.work / "datahub-mcps.json")}}}))
        theirs = time_command([str(datahub), "ingest", "-c", str(recipe)], args.repeat)
        readable = datahub_reads(datahub, args.work)
    finally:
        if args.keep_cluster and not args.rest_url:
            print(f"cluster kept running: --rest-url {rest_url}; stop it with "
                  f"lakeflow flink down --home {cluster.home}")
        elif not args.rest_url:
            cluster.stop()

    ratio = ours / theirs
    print(f"\nlakeflow harvest : {ours:6.2f} s  (median of {args.repeat}, {JOBS} jobs)")
    print(f"datahub flink    : {theirs:6.2f} s  (median of {args.repeat}, acryl-datahub {dh_version(args.datahub_venv)})")
    print(f"ratio            : {ratio:6.3f}×  (target ≤ {TARGET}×: {'met' if ratio <= TARGET else 'NOT met'})")
    print(f"DataHub's file source reads lakeflow's MCP file: {readable}")
    compare(edges(args.work / "lakeflow-mcps.json"), edges(args.work / "datahub-mcps.json"))
    return 0


def submit(cluster: FlinkCluster, work: Path) -> None:
    py = str(ingestion_python())
    t0 = time.monotonic()
    proc = cluster.flink(["run", "-d", "-pyclientexec", py, "-pyexec", py, "-pyfs", str(ROOT / "tests" / "harvest_jobs"),
                          "-py", str(ROOT / "bench" / "harvest_jobs.py"), str(work), (work / "catalog").as_uri()],
                         timeout=600)
    if proc.returncode != 0 or proc.stdout.count("Job has been submitted") != JOBS:
        sys.exit(f"submitting the {JOBS} jobs failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    import requests

    while True:
        jobs = requests.get(f"{cluster.rest_url}/v1/jobs/overview", timeout=10).json()["jobs"]
        done = [j for j in jobs if j["state"] in ("FINISHED", "FAILED", "CANCELED")]
        print(f"\r{len(jobs)} jobs submitted, {len(done)} finished ({time.monotonic() - t0:.0f} s)", end="", flush=True)
        if len(done) == JOBS:
            print()
            return
        if time.monotonic() - t0 > 600:
            sys.exit(f"\nthe jobs did not finish within 600 s: {[(j['name'], j['state']) for j in jobs]}")
        time.sleep(1)


def time_command(cmd: list[str], repeat: int) -> float:
    env = {**os.environ, "DATAHUB_TELEMETRY_ENABLED": "false", "DATAHUB_SUPPRESS_LOGGING_MANAGER": "1"}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd[:2])} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return statistics.median(times)


def datahub_reads(datahub: Path, work: Path) -> str:
    recipe = work / "datahub-reads-lakeflow.yml"
    recipe.write_text(json.dumps({
        "source": {"type": "file", "config": {"path": str(work / "lakeflow-mcps.json")}},
        "sink": {"type": "file", "config": {"filename": str(work / "lakeflow-mcps-through-datahub.json")}}}))
    proc = subprocess.run([str(datahub), "ingest", "-c", str(recipe), "--strict-warnings"], capture_output=True, text=True,
                          env={**os.environ, "DATAHUB_TELEMETRY_ENABLED": "false"}, timeout=300)
    if proc.returncode != 0:
        return f"NO (exit {proc.returncode}): {proc.stdout[-800:]}"
    read = len(json.loads((work / "lakeflow-mcps-through-datahub.json").read_text()))
    return f"yes, {read} of {len(json.loads((work / 'lakeflow-mcps.json').read_text()))} records"


def edges(path: Path) -> set[tuple[str, str, str]]:
    """(dataset, direction, flow id) from every dataJobInputOutput aspect of an MCP file."""
    out = set()
    for m in json.loads(path.read_text()):
        if m.get("aspectName") != "dataJobInputOutput":
            continue
        aspect = m["aspect"].get("json") or json.loads(m["aspect"]["value"])
        flow = m["entityUrn"].split(",")[1]  # urn:li:dataJob:(urn:li:dataFlow:(flink,<flow>,ENV),<task>)
        out |= {(d, "→", flow) for d in aspect.get("inputDatasets", [])}
        out |= {(d, "←", flow) for d in aspect.get("outputDatasets", [])}
    return out


def compare(ours: set, theirs: set) -> None:
    print(f"\nlineage edges: lakeflow {len(ours)}, datahub {len(theirs)}, both {len(ours & theirs)}")
    for title, items in (("only lakeflow", ours - theirs), ("only datahub", theirs - ours)):
        for d, arrow, flow in sorted(items):
            print(f"  {title:13}  {flow} {'reads' if arrow == '→' else 'writes'} {d}")


def dh_version(venv: Path) -> str:
    found = list((venv / "lib").glob("python*/site-packages/acryl_datahub-*.dist-info"))
    return found[0].name.removesuffix(".dist-info").split("-")[1] if found else "?"


if __name__ == "__main__":
    sys.exit(main())
