"""The compaction job on a standalone Spark cluster (``lakeflow.runtime.spark_cluster``) under faults.

- ``executor-kill``: each cycle adds a batch of raw part files and runs ``lakeflow compact
  --engine spark --master spark://…``; when the executor logs that it started a task of the
  cycle's chosen stage (the first, the second, …), its JVM is SIGKILLed. Spark must rerun the lost
  tasks on the executor the worker starts next, and the run commit once: every reading exactly
  once after every cycle, no run failed. On a loaded machine a run may end before its chosen stage
  is seen, or the task be done before the SIGKILL lands (no task lost): the cycle is then tried
  again with a new batch, up to ``ATTEMPTS`` times (``retried_cycles``); ``missed`` counts cycles
  whose kill never landed. Then ``lakeflow maintain``: no Parquet file the table does not reference is
  left under it (a killed task's attempt included), and the rows are unchanged.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from lakeflow.runtime.spark_cluster import SparkCluster
from lakeflow.secret import is_secret_key
from tests.chaos.common import Result, progress, tail, timed
from tests.chaos.compaction_faults import DAY, orphan_files, table_keys
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts
from tests.support.fixtures_servers import free_port

RUNNING_TASK = re.compile(r"Running task \S+ in stage (\d+)\.\d+")
LOST_TASK = re.compile(r"Lost task \S+ in stage \S+ .*ExecutorLostFailure")
ATTEMPTS = 3  # runs per cycle until the kill lands (a new batch each)


def running_stages(app_dir: Path) -> list[str]:
    """The stages an application's executors have started tasks of, in order (their stderr logs)."""
    stages: list[str] = []
    for log in sorted(app_dir.glob("*/stderr")):
        for match in RUNNING_TASK.finditer(log.read_text(errors="replace")):
            if match.group(1) not in stages:
                stages.append(match.group(1))
    return stages


def kill_executor_in_stage(cluster: SparkCluster, proc: subprocess.Popen, apps_before: set[Path], stage: int,
                           timeout: float = 300) -> Optional[tuple[str, bytes]]:
    """SIGKILL the executor once the run's application has started a task of its ``stage``-th
    stage (0: the first); what was hit and the executor's command line, or None when the run
    ended first."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        apps = set(cluster.work_dir.glob("app-*")) - apps_before
        stages = running_stages(apps.pop()) if apps else []
        if len(stages) > stage:
            argv = b" ".join(Path(f"/proc/{pid}/cmdline").read_bytes() for pid in cluster.executor_pids())
            return f"executor {cluster.kill_executor()} killed in stage {stages[stage]}", argv
        time.sleep(0.1)
    return None


def compact_on(cluster: SparkCluster, home: LakeflowHome, report: Path, log: Path) -> subprocess.Popen:
    """``lakeflow compact --engine spark`` on ``cluster``, its output into ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "compact", "--engine", "spark", "--master",
                                 cluster.master_url, "--report", str(report)], env=home.env, cwd=home.home,
                                text=True, stdout=out, stderr=subprocess.STDOUT)


def executor_kill(workdir: Path, *, kills: int = 3, files: int = 400, per_file: int = 25,
                  cluster: Optional[SparkCluster] = None) -> Result:
    """``kills`` cycles on ``cluster`` (or one started under ``workdir`` and stopped after)."""
    result = Result("executor-kill", zeros=("lost", "duplicated", "failed_runs", "missed", "uncommitted_after_maintain"))
    own = cluster is None
    with timed(result):
        if cluster is None:
            cluster = SparkCluster(workdir / "spark-cluster", port=free_port(), secret_variable=is_secret_key)
            cluster.start()
        try:
            home = make_home(workdir)
            expected: set[tuple[str, int]] = set()
            keys: list[tuple[str, int]] = []
            failed = missed = retried = retried_cycles = 0
            for cycle in range(kills):
                for attempt in range(ATTEMPTS):
                    run = cycle * ATTEMPTS + attempt
                    batch = readings(f"run-{run}", files * per_file, start_ms=DAY + run * 86_400_000, step_ms=500,
                                     seed=run)
                    write_parts(home.raw, batch, per_file, job=f"cycle{run:02d}")
                    expected |= {(r["run_id"], r["seq"]) for r in batch}
                    log = workdir / f"compact-{run}.log"
                    apps_before = set(cluster.work_dir.glob("app-*"))
                    proc = compact_on(cluster, home, workdir / f"report-{run}.json", log)
                    hit = kill_executor_in_stage(cluster, proc, apps_before, stage=cycle % 2)
                    code = proc.wait(timeout=600)
                    output = log.read_text(errors="replace")
                    lost_tasks = len(LOST_TASK.findall(output))
                    retried += lost_tasks
                    # the driver's spark.hadoop.* settings (S3 credentials on S3) reach executors over RPC
                    result.check(hit is None or b"spark.hadoop." not in hit[1],
                                 "spark.hadoop.* settings on the executor's command line")
                    if code != 0:
                        failed += 1
                        result.problems.append(f"cycle {cycle} attempt {attempt + 1}: exit {code}: {tail(output, 3)}")
                    keys = table_keys(home)
                    landed = hit is not None and lost_tasks > 0
                    progress(result.name, f"cycle {cycle + 1}/{kills} attempt {attempt + 1}: "
                                          f"{hit[0] if hit else 'no kill (the run ended first)'}; "
                                          f"{lost_tasks} tasks lost and rerun; exit {code}; rows {len(keys)}")
                    if landed:
                        break
                    retried_cycles += 1
                else:
                    missed += 1
            uncommitted = len(orphan_files(home))
            maintained = subprocess.run([sys.executable, "-m", "lakeflow.cli", "maintain", "--json", "--orphan-min-age",
                                         "0s"], env=home.env, cwd=home.home, capture_output=True, text=True, timeout=300)
            result.check(maintained.returncode == 0, f"lakeflow maintain exited {maintained.returncode}: "
                                                     f"{tail(maintained.stderr, 4)}")
            result.check(sorted(table_keys(home)) == sorted(keys), "maintenance changed the table's rows")
            result.counts.update(kills=kills - missed, tasks_rerun=retried, rows=len(keys),
                                 lost=len(expected - set(keys)), duplicated=len(keys) - len(set(keys)),
                                 failed_runs=failed, missed=missed, retried_cycles=retried_cycles,
                                 uncommitted_after_runs=uncommitted,
                                 uncommitted_after_maintain=len(orphan_files(home)))
        finally:
            if own:
                cluster.stop()
    return result
