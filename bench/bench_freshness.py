"""``make bench-freshness``: how long a message takes from its producer to a query of the Iceberg table.

A real Kafka 4.1.1 broker (one KRaft node) and a 2-partition topic; a producer (Kafka's console producer,
one JVM) sending ``FRESHNESS_RATE`` messages a second, each carrying its send time as the event time
(messages of the declared schema: bench/always_on.py); the packaged ingestion job (``SOURCE=kafka``,
parallelism 2, checkpoints every ``CHECKPOINT_S``) on a standalone Flink cluster; ``lakeflow compact
--every COMPACT_EVERY_S`` as a service (engine ``auto``), on the embedded local catalog (``file://``). For
``FRESHNESS_MINUTES`` the probes time every message: *sent → in a committed part file* (the raw table
polled every 0.5 s) and *sent → visible in the Iceberg table* (the timestamp of the compaction snapshot
that added it; each new snapshot's added data files are read, never the table). After the producer stops,
the pipeline drains (up to 2·C + P + 60 s).

Printed: p50 / p95 / p99 / max of both stages beside the goal, **p99 ≤ 2·C + P + 5 s** (55 s at the
defaults: a message waits up to a checkpoint interval for its part file, which a checkpoint commits, up
to P for the next run, plus the run), messages, lost (never visible) and duplicated; whether the
compactor's ``lakeflow_end_to_end_lag_seconds`` (scraped every 2 s) and ``lakeflow status``'s
``end_to_end_lag_s`` (every 60 s) agree with the probe's own figure — now minus the newest send time
visible in the table — within one checkpoint interval; the compaction runs' durations and where their
time goes (the service's stage lines). Written: ``build/bench/freshness.json`` (``messages``, ``lost``,
``duplicated``, ``p50_s`` … ``max_s``, ``goal_s``, the part-file stage under ``part_file``, the agreement,
the runs) and ``build/bench/freshness.png`` (latency per message over time; the metric beside the
probe's figure). Exit 1 when the goal is missed, a message is lost or duplicated, or the metric disagrees.

Knobs (environment, or the flags of the same name): ``FRESHNESS_MINUTES`` (10), ``FRESHNESS_RATE``
(2000 messages/s), ``CHECKPOINT_S`` (10), ``COMPACT_EVERY_S`` (30). Needs ``make package`` (the Makefile
target builds it). Not a test: figures vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.always_on import (  # noqa: E402
    Compactor,
    Messages,
    MetricSampler,
    PartProbe,
    Producer,
    SnapshotProbe,
    StatusSampler,
    Tracker,
    agreement,
    checkpoints_completed,
    latency_plot,
    local_parts,
    summary,
    wait_for,
)
from lakeflow.runtime.flink_cluster import FlinkCluster  # noqa: E402
from lakeflow.runtime.ports import free_ports  # noqa: E402
from lakeflow.secret import is_secret_key  # noqa: E402
from tests.chaos.common import local_env  # noqa: E402
from tests.chaos.tm_kill import HEARTBEATS, _require_package  # noqa: E402
from tests.support.kafka_broker import run_kafka  # noqa: E402

OUT = ROOT / "build" / "bench"
TOPIC = "readings"


def knob(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


def goal_s(checkpoint_s: float, every_s: float) -> float:
    return 2 * checkpoint_s + every_s + 5


def submit(cluster: FlinkCluster, env: dict[str, str], log: Path):
    """``flink run`` of the packaged job (as tests/chaos/tm_kill.py submits it); (process, job id) once
    the job runs."""
    import subprocess

    from lakeflow.runtime.homes import flink_home
    from tests.chaos.tm_kill import JOB, PACKAGE, _running, _submitted, _wait
    from tests.support.envs import INGEST_PY

    with open(log, "w") as out:
        proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), "run", "-pyclientexec", INGEST_PY, "-pyexec",
                                 INGEST_PY, "-pyfs", str(PACKAGE), "-py", str(JOB), "--parallelism", "2"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
    job_id = _submitted(cluster.rest_url, proc)
    _wait(cluster.rest_url, job_id, _running, 300, "running")
    return proc, job_id


def job_env(cluster: FlinkCluster, home: Path, broker_bootstrap: str, checkpoint_s: float) -> dict[str, str]:
    """The ingestion job's environment: the local catalog under ``home``, SOURCE=kafka, unbounded."""
    from tests.chaos.tm_kill import JAR

    env = {**cluster.env(), **local_env(home), "SOURCE": "kafka", "KAFKA_BOOTSTRAP_SERVERS": broker_bootstrap,
           "KAFKA_TOPIC": TOPIC, "KAFKA_GROUP_ID": "bench-freshness", "BATCH_INTERVAL_MS": str(int(checkpoint_s * 1000)),
           "NUM_RECORDS": "-1", "LAKEFLOW_JAR": str(JAR)}
    env.pop("PYTHONPATH", None)  # lakeflow reaches the cluster as users ship it: -pyfs lakeflow.zip
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=knob("FRESHNESS_MINUTES", 10))
    parser.add_argument("--rate", type=float, default=knob("FRESHNESS_RATE", 2000))
    parser.add_argument("--checkpoint-s", type=float, default=knob("CHECKPOINT_S", 10))
    parser.add_argument("--compact-every-s", type=float, default=knob("COMPACT_EVERY_S", 30))
    parser.add_argument("--keep", action="store_true", help="keep the work folder (build/bench/freshness-work)")
    args = parser.parse_args()
    _require_package()

    from lakeflow.compaction.commit import iceberg_catalog
    from lakeflow.compaction.config import CompactOptions, load_config
    from lakeflow.schema import declared_schema
    from lakeflow.settings import load_settings

    work = OUT / "freshness-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home = work / "home"
    goal = goal_s(args.checkpoint_s, args.compact_every_s)
    tracker = Tracker(int(args.rate * args.minutes * 60 * 1.05) + 10_000)
    compact_env = local_env(home)
    settings = load_settings(compact_env)
    messages = Messages(declared_schema(settings))
    config = load_config(CompactOptions(local=True), compact_env)
    catalog = iceberg_catalog(config.settings)
    ident = (*config.namespace, config.target_table)

    def load_table():
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return catalog.load_table(ident)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    print(f"freshness: {args.rate:g} messages/s for {args.minutes:g} min; checkpoints every {args.checkpoint_s:g} s "
          f"(C), compaction every {args.compact_every_s:g} s (P); goal p99 ≤ 2·C + P + 5 = {goal:g} s; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    started = time.monotonic()
    with run_kafka(work / "kafka") as broker:
        broker.create_topic(TOPIC, partitions=2)
        rest_port, rpc_port, metrics_port = free_ports(3)
        cluster = FlinkCluster(work / "cluster", rest_port=rest_port, rpc_port=rpc_port, conf=HEARTBEATS,
                               secret_variable=is_secret_key)
        cluster.start()
        flink_run = compactor = producer = None
        samplers = []
        try:
            flink_run, job_id = submit(cluster, job_env(cluster, home, broker.bootstrap, args.checkpoint_s),
                                       work / "flink-run.log")
            compactor = Compactor(compact_env, args.compact_every_s, metrics_port, work)
            compactor.start()
            parts = PartProbe(local_parts(Path(settings.home) / "warehouse" / "iot" / "sensor-readings"), messages,
                              tracker)
            snapshots = SnapshotProbe(load_table, messages, tracker)
            metric, status = MetricSampler(metrics_port, config.target_name), StatusSampler(compact_env)
            samplers = [parts, snapshots, metric, status]
            for s in samplers:
                s.start()
            print(f"  set up in {time.monotonic() - started:.0f} s; producing", flush=True)
            producer = Producer(broker, TOPIC, messages, tracker, args.rate, work / "producer.log").start()
            time.sleep(args.minutes * 60)
            code = producer.stop()
            sent = tracker.count
            print(f"  {sent:,} messages sent (producer exit {code}); draining", flush=True)
            drain = goal + args.checkpoint_s + 60
            try:
                wait_for(lambda: tracker.lost("table") == 0, drain, "every message visible in the table", 1.0)
            except TimeoutError as exc:
                print(f"  {exc}", flush=True)
            checkpoints = checkpoints_completed(cluster.rest_url, job_id)
        finally:
            for s in samplers:
                s.stop()
            if compactor is not None:
                compactor.stop()
            if flink_run is not None and flink_run.poll() is None:
                flink_run.kill()
            cluster.stop()

    part, table = summary(tracker.latencies("part")), summary(tracker.latencies("table"))
    metric_agrees = agreement(metric.samples, snapshots, args.checkpoint_s)
    status_agrees = agreement(status.samples, snapshots, args.checkpoint_s)
    runs = [r for r in compactor.runs if r.result == "ok"]
    durations = sorted(r.duration_s for r in runs)
    result = {
        "messages": tracker.count, "lost": tracker.lost("table"), "duplicated": tracker.duplicated["table"],
        **table, "goal_s": goal,
        "part_file": {"lost": tracker.lost("part"), "duplicated": tracker.duplicated["part"], **part},
        "rate": args.rate, "minutes": args.minutes, "checkpoint_s": args.checkpoint_s,
        "compact_every_s": args.compact_every_s, "checkpoints": checkpoints,
        "metric_agreement": metric_agrees,
        "status_agreement": status_agrees,
        "compaction_runs": len(compactor.runs), "compaction_commits": len(snapshots.commits),
        "compaction_run_s": {"p50": durations[len(durations) // 2] if durations else None,
                             "max": durations[-1] if durations else None},
        "compaction_stage_mean_s": compactor.stage_means(),
        "probe_errors": {s.name: s.errors_seen() for s in samplers if s.errors},
        "load_average": os.getloadavg()[0],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "freshness.json").write_text(json.dumps(result, indent=1) + "\n")
    latency_plot(OUT / "freshness.png", f"make bench-freshness: {args.rate:g} msg/s, C = {args.checkpoint_s:g} s, "
                 f"P = {args.compact_every_s:g} s", tracker, snapshots, goal, metric.samples)

    def row(name: str, s: dict, lost: int, dup: int) -> str:
        cells = "".join(f"{s[k]:>9.1f}" if s[k] is not None else f"{'-':>9}" for k in ("p50_s", "p95_s", "p99_s", "max_s"))
        return f"  {name:<30}{cells}{lost:>8,}{dup:>12,}"

    print(f"  {'stage':<30}{'p50 s':>9}{'p95 s':>9}{'p99 s':>9}{'max s':>9}{'lost':>8}{'duplicated':>12}")
    print(row("sent → committed part file", part, result["part_file"]["lost"], result["part_file"]["duplicated"]))
    print(row("sent → visible in Iceberg", table, result["lost"], result["duplicated"]))
    met = table["p99_s"] is not None and table["p99_s"] <= goal
    print(f"  goal p99 ≤ {goal:g} s: {'met' if met else 'MISSED'} ({tracker.count:,} messages, "
          f"{checkpoints} checkpoints, {len(snapshots.commits)} compaction commits)")
    agree = True
    for name, a in (("lakeflow_end_to_end_lag_seconds", metric_agrees), ("lakeflow status end_to_end_lag_s", status_agrees)):
        ok = a["samples"] > 0 and a["max_diff_s"] <= args.checkpoint_s
        agree &= ok
        print(f"  {name} vs the probe: {a['samples']} samples, max |diff| {a['max_diff_s']} s, mean {a['mean_diff_s']} s "
              f"(tolerance C = {args.checkpoint_s:g} s): {'agrees' if ok else 'DISAGREES'}")
    print(f"  compaction: {len(compactor.runs)} runs, ok {len(runs)}; run time p50 {result['compaction_run_s']['p50']} s, "
          f"max {result['compaction_run_s']['max']} s; per stage (mean s): "
          + ", ".join(f"{k} {v}" for k, v in result["compaction_stage_mean_s"].items()))
    print(f"  wrote {OUT / 'freshness.json'} and {OUT / 'freshness.png'} ({time.monotonic() - started:.0f} s in all)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if met and agree and result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
