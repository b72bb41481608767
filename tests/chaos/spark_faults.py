"""The compaction job on a standalone Spark cluster (``lakeflow.runtime.spark_cluster``) under faults.

- ``executor-kill``: each cycle adds a batch of raw part files and runs ``lakeflow compact
  --engine spark --master spark://…``; when the executor logs that it started a task of the
  cycle's chosen stage, its JVM is SIGKILLed. Spark must rerun the lost tasks on the executor the
  worker starts next, and the run commit once: every reading exactly once after every cycle, no
  run failed.

  The cycles aim, in turn, at the two stages a batch of this size has (the Spark engine hands a small
  batch's key hashes to the driver: no aggregation stage, docs/compaction.md): stage 0, the tasks that
  parse and write the batch, and stage 1, the tasks that write again the data files holding a copy
  another task's file beats. Each batch has such copies: its readings span ``DAYS`` days (each task
  writes a data file per day) and a tenth of its first half is delivered again in part files committed
  after the rest (a producer's retry), which fall in the other task's share — so every run has
  stage 1, a task per data file holding a losing copy. A kill has landed when a task of the chosen
  stage ran again (a task attempt above 0 in the executors' logs: the driver's log does not name
  every lost task — at times only "Lost executor", its tasks rerun all the same).
  On a loaded machine the task may still finish before the SIGKILL lands (no task rerun): the
  cycle is then tried again with a new batch, up to ``ATTEMPTS`` times (``retried_cycles``);
  ``missed`` counts cycles whose kill never landed. Then ``lakeflow maintain``: no Parquet file
  the table does not reference is left under it (a killed task's attempt included), and the rows
  are unchanged.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from lakeflow.runtime.processes import cmdline
from lakeflow.runtime.spark_cluster import SparkCluster
from lakeflow.secret import is_secret_key
from tests.chaos.common import Result, progress, tail, timed
from tests.chaos.compaction_faults import DAY, orphan_files, table_keys
from tests.support.fixtures_compaction import LakeflowHome, make_home, readings, write_parts
from tests.support.fixtures_servers import free_port

# an executor's log line as it starts a task: task index.attempt, stage id.attempt
RUNNING_TASK = re.compile(r"Running task (\d+)\.(\d+) in stage (\d+)\.(\d+)")
ATTEMPTS = 3  # runs per cycle until the kill lands (a new batch each)
STAGES = {0: "write", 1: "rewrite"}  # the stages of a small batch with copies across tasks, by id
DAYS = 20  # days a batch's readings span: each task writes a data file per day
AGAIN_EVERY = 10  # every tenth reading of a batch's first half delivered again


def task_starts(app_dir: Path) -> list[tuple[int, int, int, int]]:
    """(stage id, stage attempt, task index, task attempt) of every task an application's executors
    started, in the order of their logs (each executor's stderr)."""
    starts: list[tuple[int, int, int, int]] = []
    for log in sorted(app_dir.glob("*/stderr")):
        starts += [(int(m.group(3)), int(m.group(4)), int(m.group(1)), int(m.group(2)))
                   for m in RUNNING_TASK.finditer(log.read_text(errors="replace"))]
    return starts


def running_stages(app_dir: Path) -> list[int]:
    """The stages an application's executors have started tasks of, in order."""
    return list(dict.fromkeys(stage for stage, *_ in task_starts(app_dir)))


def reruns(app_dir: Path, stage: Optional[int] = None) -> int:
    """Tasks (of ``stage``, or of any) an application's executors started again: a task attempt above 0,
    or a stage attempt above 0."""
    return sum(1 for s, s_attempt, _, attempt in task_starts(app_dir)
               if (stage is None or s == stage) and (attempt > 0 or s_attempt > 0))


def new_app(cluster: SparkCluster, apps_before: set[Path]) -> Optional[Path]:
    """The application started since ``apps_before`` was listed (None before it starts)."""
    apps = set(cluster.work_dir.glob("app-*")) - apps_before
    return apps.pop() if apps else None


def kill_executor_in_stage(cluster: SparkCluster, proc: subprocess.Popen, apps_before: set[Path], stage: int,
                           timeout: float = 300) -> Optional[tuple[int, int, bytes]]:
    """SIGKILL the executor once the run's application has started a task of stage ``stage``: (stage
    hit, executor pid, the executor's command line), or None when the run ended first. The executor's
    pid and command line are read while it waits, so that the SIGKILL follows the log line at once."""
    deadline = time.monotonic() + timeout
    executor: Optional[tuple[int, bytes]] = None
    while proc.poll() is None and time.monotonic() < deadline:
        app = new_app(cluster, apps_before)
        if app is not None:
            if executor is None or not cmdline(executor[0]):  # the application's own executor
                mine = [pid for pid in cluster.executor_pids() if app.name in cmdline(pid)]
                executor = (mine[0], Path(f"/proc/{mine[0]}/cmdline").read_bytes()) if mine else None
            if executor is not None and stage in running_stages(app):
                try:
                    os.kill(executor[0], signal.SIGKILL)
                except ProcessLookupError:
                    executor = None
                    continue
                return stage, executor[0], executor[1]
        time.sleep(0.05)
    return None


def batch_of(run: int, count: int, per_file: int, raw: Path) -> tuple[list[dict], int]:
    """Write run ``run``'s batch: ``count`` readings over ``DAYS`` days, then a tenth of its first half
    again in later part files; (the readings, how many were written again)."""
    batch = readings(f"run-{run}", count, start_ms=DAY + run * DAYS * 86_400_000,
                     step_ms=DAYS * 86_400_000 // count, seed=run)
    write_parts(raw, batch, per_file, job=f"cycle{run:02d}")
    again = batch[: count // 2: AGAIN_EVERY]
    write_parts(raw, again, per_file, job=f"cycle{run:02d}-again")
    return batch, len(again)


def compact_on(cluster: SparkCluster, home: LakeflowHome, report: Path, log: Path) -> subprocess.Popen:
    """``lakeflow compact --engine spark`` on ``cluster``, its output into ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "lakeflow.cli", "compact", "--engine", "spark", "--master",
                                 cluster.master_url, "--report", str(report)], env=home.env, cwd=home.home,
                                text=True, stdout=out, stderr=subprocess.STDOUT)


def executor_kill(workdir: Path, *, kills: int = 3, files: int = 400, per_file: int = 25,
                  cluster: Optional[SparkCluster] = None) -> Result:
    """``kills`` cycles on ``cluster`` (or one started under ``workdir`` and stopped after); cycle n
    aims at stage n % 2."""
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
            failed = missed = rerun = retried_cycles = again = 0
            landed_in = {name: 0 for name in STAGES.values()}
            for cycle in range(kills):
                stage = cycle % len(STAGES)
                for attempt in range(ATTEMPTS):
                    run = cycle * ATTEMPTS + attempt
                    batch, copies = batch_of(run, files * per_file, per_file, home.raw)
                    again += copies
                    expected |= {(r["run_id"], r["seq"]) for r in batch}
                    log = workdir / f"compact-{run}.log"
                    apps_before = set(cluster.work_dir.glob("app-*"))
                    proc = compact_on(cluster, home, workdir / f"report-{run}.json", log)
                    hit = kill_executor_in_stage(cluster, proc, apps_before, stage=stage)
                    code = proc.wait(timeout=600)
                    output = log.read_text(errors="replace")
                    app = new_app(cluster, apps_before)
                    seen = running_stages(app) if app is not None else []
                    again_in_stage = reruns(app, stage) if app is not None else 0
                    rerun += reruns(app) if app is not None else 0
                    # the driver's spark.hadoop.* settings (S3 credentials on S3) reach executors over RPC
                    result.check(hit is None or b"spark.hadoop." not in hit[2],
                                 "spark.hadoop.* settings on the executor's command line")
                    if code != 0:
                        failed += 1
                        result.problems.append(f"cycle {cycle + 1} attempt {attempt + 1}: exit {code}: "
                                               f"{tail(output, 3)}")
                    result.check(set(seen) <= set(STAGES), f"cycle {cycle + 1} attempt {attempt + 1}: stages {seen}, "
                                                           f"expected those of {sorted(STAGES)}")
                    keys = table_keys(home)
                    landed = hit is not None and again_in_stage > 0
                    what = (f"executor {hit[1]} killed in stage {hit[0]} ({STAGES[stage]})" if hit else
                            f"no kill in stage {stage} ({STAGES[stage]}): the run ended first, its stages {seen}")
                    progress(result.name, f"cycle {cycle + 1}/{kills} attempt {attempt + 1}: {what}; "
                                          f"{again_in_stage} of its tasks rerun; exit {code}; rows {len(keys)}")
                    if landed:
                        landed_in[STAGES[stage]] += 1
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
            result.counts.update(kills=kills - missed, **{f"in_{k}": v for k, v in landed_in.items()},
                                 tasks_rerun=rerun, rows=len(keys), delivered_again=again,
                                 lost=len(expected - set(keys)), duplicated=len(keys) - len(set(keys)),
                                 failed_runs=failed, missed=missed, retried_cycles=retried_cycles,
                                 uncommitted_after_runs=uncommitted,
                                 uncommitted_after_maintain=len(orphan_files(home)))
        finally:
            if own:
                cluster.stop()
    return result
