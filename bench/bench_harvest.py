"""``make bench-harvest``: ``lakeflow harvest`` vs DataHub's ``flink`` source on the same JobManager,
in the same run: wall time and CPU time of each harvester process, and the two outputs' lineage
edges compared.

The JobManager is, by default, 1,000 jobs replayed from the answers recorded from real Flink 2.3
(:mod:`bench.flink_replay`: the recorded jobs again and again, with new ids and names), served by
the REST stub in a process of its own, so its CPU is nobody's. ``--real-cluster`` starts a local
Flink cluster and submits 25 real jobs instead.

DataHub (``acryl-datahub[flink]``) lives only in the benchmark's own virtualenv
(``build/bench-datahub-venv``, made by the Makefile). Both write DataHub MCPs to a file; each is
measured as a whole process (start-up included: that is what a scheduler pays): wall time, and the
CPU time (user + system) that ``wait4`` reports for it. CPU time is the robust figure on a shared
machine. Runs alternate between the two tools; medians of N runs. DataHub's ``file`` source then
reads lakeflow's MCP file back, to show the format is DataHub's.

Two cases on replayed JobManagers: ``--jobs`` (1,000; its target on CPU time: what a large harvest
costs) and then ``--small-jobs`` (6; its target on wall time: a small cluster's harvest is mostly
the process's start-up, what it imports before its first request); ``--small-jobs 0`` skips it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.machine import describe  # noqa: E402

from lakeflow.runtime.flink_cluster import FlinkCluster  # noqa: E402
from lakeflow.runtime.homes import ingestion_python  # noqa: E402
from lakeflow.secret import is_secret_key  # noqa: E402
from tests.support.fixtures_servers import free_port  # noqa: E402

REAL_JOBS = 25
TARGET_CPU = 0.15  # lakeflow's CPU time / DataHub's, at --jobs
TARGET_WALL = 0.25  # lakeflow's wall time / DataHub's, at --small-jobs (start-up included)


@dataclass(frozen=True)
class Measured:
    wall_s: float
    cpu_s: float  # user + system of the process (and of any children it waited for)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datahub-venv", type=Path, default=ROOT / "build" / "bench-datahub-venv")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "bench-harvest")
    parser.add_argument("--repeat", type=int, default=3, help="measured runs of each tool (medians reported)")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the replayed JobManager (default 1000)")
    parser.add_argument("--small-jobs", type=int, default=6, help="jobs of the second case, on wall time (0: none)")
    parser.add_argument("--real-cluster", action="store_true", help=f"a local Flink cluster with {REAL_JOBS} real jobs")
    parser.add_argument("--rest-url", help="use this cluster (already holding the jobs) instead")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the started cluster running")
    args = parser.parse_args()
    print(describe(), flush=True)  # what the figures below ran on
    datahub = args.datahub_venv / "bin" / "datahub"
    if not datahub.exists():
        sys.exit(f"{datahub} missing: run `make bench-harvest` (it builds the DataHub virtualenv)")
    if args.work.exists() and not args.rest_url:
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True, exist_ok=True)

    with ExitStack() as stack:
        if args.rest_url:
            rest_url, what = args.rest_url, f"the cluster at {args.rest_url}"
        elif args.real_cluster:
            rest_url, what = stack.enter_context(real_cluster(args.work, args.keep_cluster)), f"{REAL_JOBS} real jobs"
        else:
            rest_url, what = stack.enter_context(replay(args.jobs)), f"{args.jobs} jobs replayed"
        ours, theirs = alternate(datahub, rest_url, args.work, args.repeat)
        readable = datahub_reads(datahub, args.work)
    _, ratio_cpu = report(what, ours, theirs, args.datahub_venv)
    print(f"target ≤ {TARGET_CPU}× CPU: {'met' if ratio_cpu <= TARGET_CPU else 'NOT met'}")
    print(f"DataHub's file source reads lakeflow's MCP file: {readable}")
    compare(edges(args.work / "lakeflow-mcps.json"), edges(args.work / "datahub-mcps.json"))
    if args.small_jobs and not (args.rest_url or args.real_cluster):
        with replay(args.small_jobs) as rest_url:
            ours, theirs = alternate(datahub, rest_url, args.work, args.repeat)
        ratio_wall, _ = report(f"{args.small_jobs} jobs replayed", ours, theirs, args.datahub_venv)
        print(f"target ≤ {TARGET_WALL}× wall: {'met' if ratio_wall <= TARGET_WALL else 'NOT met'}")
    return 0


def alternate(datahub: Path, rest_url: str, work: Path, repeat: int) -> tuple[list[Measured], list[Measured]]:
    """``repeat`` runs of each tool on the JobManager at ``rest_url``, alternating, so that both see the same machine."""
    ours_cmd = [str(Path(sys.executable).parent / "lakeflow"), "harvest", "--rest-url", rest_url,
                "--format", "datahub", "--output", str(work / "lakeflow-mcps.json")]
    recipe = work / "datahub-recipe.yml"
    recipe.write_text(json.dumps({
        "source": {"type": "flink", "config": {"connection": {"rest_api_url": rest_url}}},
        "sink": {"type": "file", "config": {"filename": str(work / "datahub-mcps.json")}}}))
    ours, theirs = [], []
    for i in range(repeat):
        ours.append(measure(ours_cmd))
        theirs.append(measure([str(datahub), "ingest", "-c", str(recipe)]))
        print(f"run {i + 1}/{repeat}: lakeflow {ours[-1].wall_s:.2f} s wall, {ours[-1].cpu_s:.2f} s CPU; "
              f"datahub {theirs[-1].wall_s:.2f} s wall, {theirs[-1].cpu_s:.2f} s CPU", flush=True)
    return ours, theirs


def report(what: str, ours: list[Measured], theirs: list[Measured], venv: Path) -> tuple[float, float]:
    """Both tools' medians and their ratios printed; the (wall, CPU) ratios returned."""
    ours_wall, ours_cpu = (statistics.median(getattr(m, f) for m in ours) for f in ("wall_s", "cpu_s"))
    theirs_wall, theirs_cpu = (statistics.median(getattr(m, f) for m in theirs) for f in ("wall_s", "cpu_s"))
    print(f"\n{what}; medians of {len(ours)} runs, each tool a whole process")
    print(f"lakeflow harvest : {ours_wall:6.2f} s wall  {ours_cpu:6.2f} s CPU")
    print(f"datahub flink    : {theirs_wall:6.2f} s wall  {theirs_cpu:6.2f} s CPU  (acryl-datahub {dh_version(venv)})")
    print(f"ratio            : {ours_wall / theirs_wall:6.3f}× wall  {ours_cpu / theirs_cpu:6.3f}× CPU")
    return ours_wall / theirs_wall, ours_cpu / theirs_cpu


@contextmanager
def replay(jobs: int) -> Iterator[str]:
    """A JobManager of ``jobs`` replayed jobs in its own process (bench/flink_replay.py): its URL."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "flink_replay.py"), str(jobs)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url:
            sys.exit(f"bench/flink_replay.py did not start (exit {proc.wait(timeout=30)})")
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # it serves until its stdin closes
        proc.wait(timeout=30)


@contextmanager
def real_cluster(work: Path, keep: bool) -> Iterator[str]:
    """A local Flink cluster holding the benchmark's 25 finished jobs: its URL."""
    cluster = FlinkCluster(work / "cluster", rest_port=free_port(), rpc_port=free_port(), slots=4,
                           secret_variable=is_secret_key)
    print(f"starting a local Flink cluster ({cluster.rest_url}) …", flush=True)
    cluster.start()
    try:
        submit(cluster, work)
        yield cluster.rest_url
    finally:
        if keep:
            print(f"cluster kept running: --rest-url {cluster.rest_url}; stop it with "
                  f"lakeflow flink down --home {cluster.home}")
        else:
            cluster.stop()


def submit(cluster: FlinkCluster, work: Path) -> None:
    py = str(ingestion_python())
    t0 = time.monotonic()
    proc = cluster.flink(["run", "-d", "-pyclientexec", py, "-pyexec", py, "-pyfs", str(ROOT / "tests" / "harvest_jobs"),
                          "-py", str(ROOT / "bench" / "harvest_jobs.py"), str(work), (work / "catalog").as_uri()],
                         timeout=600)
    if proc.returncode != 0 or proc.stdout.count("Job has been submitted") != REAL_JOBS:
        sys.exit(f"submitting the {REAL_JOBS} jobs failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    import requests

    while True:
        jobs = requests.get(f"{cluster.rest_url}/v1/jobs/overview", timeout=10).json()["jobs"]
        done = [j for j in jobs if j["state"] in ("FINISHED", "FAILED", "CANCELED")]
        print(f"\r{len(jobs)} jobs submitted, {len(done)} finished ({time.monotonic() - t0:.0f} s)", end="", flush=True)
        if len(done) == REAL_JOBS:
            print()
            return
        if time.monotonic() - t0 > 600:
            sys.exit(f"\nthe jobs did not finish within 600 s: {[(j['name'], j['state']) for j in jobs]}")
        time.sleep(1)


def measure(cmd: list[str]) -> Measured:
    """Run ``cmd`` to its end: its wall time, and its CPU time as ``wait4`` reports it."""
    env = {**os.environ, "DATAHUB_TELEMETRY_ENABLED": "false", "DATAHUB_SUPPRESS_LOGGING_MANAGER": "1"}
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            out.seek(0)
            sys.exit(f"{' '.join(cmd[:2])} failed ({proc.returncode}):\n{out.read()[-4000:].decode(errors='replace')}")
    return Measured(wall, usage.ru_utime + usage.ru_stime)


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
    """Edge counts, then the edges only one tool found; a replayed job's edges once, its count of
    rounds beside (``harvest-batch-0042`` is ``harvest-batch-*``)."""
    print(f"\nlineage edges: lakeflow {len(ours)}, datahub {len(theirs)}, both {len(ours & theirs)}")
    for title, items in (("only lakeflow", ours - theirs), ("only datahub", theirs - ours)):
        rounds = Counter((d, arrow, re.sub(r"-\d{4}$", "-*", flow)) for d, arrow, flow in items)
        for (d, arrow, flow), count in sorted(rounds.items()):
            times = f" ({count} jobs)" if count > 1 else ""
            print(f"  {title:13}  {flow} {'reads' if arrow == '→' else 'writes'} {d}{times}")


def dh_version(venv: Path) -> str:
    found = list((venv / "lib").glob("python*/site-packages/acryl_datahub-*.dist-info"))
    return found[0].name.removesuffix(".dist-info").split("-")[1] if found else "?"


if __name__ == "__main__":
    sys.exit(main())
