"""``make soak``: the pipeline of ``make bench-freshness`` for ``SOAK_MINUTES`` (60) on S3, under a schedule of
faults; at the end nothing lost, nothing twice, no leftovers, and nothing growing. Not CI.

**The pipeline** (bench/always_on.py): a Kafka 4.1.1 broker; the console producer at ``SOAK_RATE`` (500)
messages/s, each carrying its send time as the event time; the packaged ingestion job (``SOURCE=kafka``,
checkpoints every ``CHECKPOINT_S``) on a standalone cluster set up as ``lakeflow flink up`` sets it up
(keyless S3A, the raw table's refreshing AWS profile); ``lakeflow compact --every COMPACT_EVERY_S
--maintain-every SOAK_MAINTAIN_EVERY_S --delete-source`` with ``COMPACT_EXPIRE_OLDER_THAN=10m`` and
``COMPACT_LEFTOVER_MIN_AGE`` = the safe age (``SOAK_SAFE_AGE_S``, 180: the job here is never down
longer). **Storage** is S3 — moto with signatures and IAM enforced, behind ``tests/standins/s3_expiry_proxy.py``,
which refuses an expired session token as AWS does — because the faults worth having need it: the
Lakekeeper stand-in (tests/support/lakehouse.py: generic tables, and Apache Iceberg's REST server behind
``/catalog``) vends STS credentials scoped to each table that expire every ``SOAK_CREDENTIAL_S`` (180) s,
and Flink's S3 writer leaves multipart uploads open when killed.

**The faults**, after a warm-up (a tenth of the run, at least 2 min) and until a cool-down (the safe
age + the maintenance period + 2 min: the last leftovers get old enough to be cleared), in turn, evenly
spaced: the TaskManager SIGKILLed (a new one started); the compactor SIGKILLed between writing its data
files and committing them (its ``[write]`` line); the Kafka broker restarted (down 10 s); the Iceberg
REST server restarted (down 10 s); the Lakekeeper stand-in restarted (down 10 s); the compactor
crashing right after its commit (``LAKEFLOW_COMPACT_CRASH_AT=after-commit``; restarted). Credentials
expire throughout; maintenance runs on its own period.

**At the end** (the producer stopped, the pipeline drained): every message once in the Iceberg table
(its number column scanned once), 0 lost and 0 duplicated; 0 open multipart uploads and 0 hidden
in-progress objects of the raw table older than the safe age; and the **trends**, sampled every 30 s:
RSS and open files of the JobManager, the TaskManager and the compactor (the JVMs pre-touch their heap,
so that their RSS shows what grows beside it) and the JVMs' heap in use (Flink's REST API), the table's
data files, the raw table's files, and the compaction's run time per run. A trend's growth is the median
of its last quarter over the median of its first quarter after the warm-up, and for a process a fault
restarted (the compactor, the TaskManager) after its last start plus a minute (≤ 1.10 for RSS). Written under
``build/soak/``: ``summary.json`` (messages, lost, duplicated, leftovers, each trend's growth), ``report.md``,
``trends.png`` and ``latency.png`` (per-message latency with the faults marked; the end-to-end lag metric
beside the probe's figure). Exit 1 when a promise is broken.

Knobs (environment or flags): ``SOAK_MINUTES`` (60), ``SOAK_RATE`` (500), ``CHECKPOINT_S`` (10),
``COMPACT_EVERY_S`` (30), ``SOAK_MAINTAIN_EVERY_S`` (240), ``SOAK_SAFE_AGE_S`` (180), ``SOAK_CREDENTIAL_S``
(180). Needs ``make package``, Kafka's and the Iceberg REST server's jars (fetched on first use).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.always_on import (  # noqa: E402
    Compactor,
    Messages,
    MetricSampler,
    PartProbe,
    Producer,
    SnapshotProbe,
    Tracker,
    agreement,
    latency_plot,
    open_fds,
    rss_mib,
    s3_parts,
    summary,
    wait_for,
)
from bench.bench_freshness import TOPIC, goal_s, knob, submit  # noqa: E402
from lakeflow.runtime.flink_cluster import FlinkCluster  # noqa: E402
from lakeflow.runtime.ports import free_ports  # noqa: E402
from lakeflow.secret import is_secret_key  # noqa: E402
from tests.chaos.common import local_env, moto_server  # noqa: E402
from tests.chaos.tm_kill import HEARTBEATS, JAR, _require_package, _strict_account  # noqa: E402
from tests.standins.lakekeeper import S3Account  # noqa: E402
from tests.standins.s3_expiry_proxy import run_expiry_proxy  # noqa: E402
from tests.support.fixtures_lakekeeper import NAMESPACE, WAREHOUSE_NAME, env_for  # noqa: E402
from tests.support.fixtures_servers import MotoServer  # noqa: E402
from tests.support.iceberg_rest import ensure_server_jars, run_iceberg_rest  # noqa: E402
from tests.support.kafka_broker import run_kafka  # noqa: E402
from tests.support.lakehouse import LakekeeperWithIceberg, catalog_key  # noqa: E402

OUT = ROOT / "build" / "soak"
SAMPLE_S = 30.0
DOWN_S = 10.0  # how long a restarted server stays down
RSS_GOAL = 1.10
# The JVMs touch their whole heap at start: their RSS then grows only with what is not heap (a JVM's RSS
# otherwise climbs for an hour as G1 first touches regions of a heap whose size -Xmx fixes); the heap in use
# is sampled beside it.
# (env.java.opts.all would replace the distribution's --add-opens flags; these two are added to them.)
PRE_TOUCH = {"env.java.opts.jobmanager": "-XX:+AlwaysPreTouch", "env.java.opts.taskmanager": "-XX:+AlwaysPreTouch"}
FAULTS = ("tm-kill", "compactor-kill-before-commit", "kafka-restart", "iceberg-rest-restart",
          "lakekeeper-restart", "compactor-crash-after-commit")
# A fault that restarts a process starts its memory afresh: that process's trends are measured from its
# last start plus a warm-up (RESTART_WARM_S), not across the restart (a fresh compactor is ~40-80 MiB
# and grows back to its working size: a trend across it measures the recovery, not a leak).
RESTARTS = {"tm-kill": "taskmanager", "compactor-kill-before-commit": "compactor",
            "compactor-crash-after-commit": "compactor"}
RESTART_WARM_S = 60.0


@dataclass
class Sample:
    at_s: float
    values: dict[str, float] = field(default_factory=dict)


class IcebergRest:
    """Apache's Iceberg REST server, restartable on its port (its SQLite catalog survives)."""

    def __init__(self, moto: MotoServer, key: tuple[str, str], warehouse: str, log_dir: Path, prefix: str) -> None:
        self.args = (moto, *key, warehouse, log_dir)
        self.prefix = prefix
        self.port: int | None = None
        self._cm: Any = None

    def start(self) -> str:
        self._cm = run_iceberg_rest(*self.args, prefix=self.prefix, port=self.port)
        server = self._cm.__enter__()
        self.port = int(server.url.rsplit(":", 1)[1])
        return server.url

    def stop(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None

    def restart(self, down_s: float) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


class Soak:
    """The running pipeline and the faults it takes."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.faults: list[tuple[float, str, str]] = []  # (when, which, outcome)
        self.samples: list[Sample] = []
        self.lock = threading.Lock()

    def log(self, message: str) -> None:
        print(f"  {datetime.now(timezone.utc).strftime('%H:%M:%S')} {message}", flush=True)

    # -- faults ------------------------------------------------------------------------------------

    def inject(self, which: str) -> str:
        if which == "tm-kill":
            pid = self.cluster.kill_taskmanager()
            self.cluster.start_taskmanager()
            return f"TaskManager {pid} SIGKILLed, a new one started"
        if which == "compactor-kill-before-commit":
            killed = self.compactor.kill_when(r"\[write\] data/\S+ \(\d+ rows", 3 * self.args.compact_every_s)
            self.compactor.start()
            return "SIGKILLed between its data files and its commit" if killed else "no run wrote files in time"
        if which == "kafka-restart":
            self.broker.restart(DOWN_S)
            return f"broker down {DOWN_S:g} s, restarted"
        if which == "iceberg-rest-restart":
            self.iceberg.restart(DOWN_S)
            return f"Iceberg REST server down {DOWN_S:g} s, restarted"
        if which == "lakekeeper-restart":
            self.standin.restart(DOWN_S)
            return f"Lakekeeper stand-in down {DOWN_S:g} s, restarted"
        if which == "compactor-crash-after-commit":
            self.compactor.stop()
            self.compactor.start(LAKEFLOW_COMPACT_CRASH_AT="after-commit")
            assert self.compactor.proc is not None
            code = self.compactor.proc.wait(timeout=4 * self.args.compact_every_s + 120)
            self.compactor.start()
            return f"crashed after its commit (exit {code}), restarted"
        raise ValueError(which)

    # -- sampling ----------------------------------------------------------------------------------

    def sample(self) -> None:
        jm, tm = self.cluster.jobmanager_pids(), self.cluster.taskmanager_pids()
        pids = {"jobmanager": jm[0] if jm else None, "taskmanager": tm[0] if tm else None,
                "compactor": self.compactor.pid}
        values = {}
        for name, pid in pids.items():
            values[f"{name}_rss_mib"] = rss_mib(pid)
            values[f"{name}_fds"] = open_fds(pid)
        for name, used in heap_used_mib(self.cluster.rest_url).items():
            values[f"{name}_heap_used_mib"] = used
        values["table_data_files"] = float(self.snapshots.data_files)
        values["raw_files"] = float(self.raw_files())
        with self.lock:
            self.samples.append(Sample(time.time(), values))

    def raw_files(self) -> int:
        return sum(1 for _ in self.parts.listing())


def heap_used_mib(rest: str) -> dict[str, float]:
    """The JobManager's and the TaskManager's heap in use (MiB), from Flink's REST API (nan: unanswered)."""
    import requests

    def used(path: str) -> float:
        try:
            answer = requests.get(f"{rest}{path}/metrics", params={"get": "Status.JVM.Memory.Heap.Used"}, timeout=5)
            return float(answer.json()[0]["value"]) / 2**20
        except (requests.RequestException, ValueError, KeyError, IndexError):
            return float("nan")

    try:
        managers = requests.get(f"{rest}/taskmanagers", timeout=5).json()["taskmanagers"]
    except (requests.RequestException, ValueError, KeyError):
        managers = []
    return {"jobmanager": used("/jobmanager"),
            "taskmanager": used(f"/taskmanagers/{managers[0]['id']}") if managers else float("nan")}


def trend(values: list[float]) -> float | None:
    """Median of the last quarter over the median of the first quarter (nan-free; None when too few)."""
    data = [v for v in values if not np.isnan(v)]
    if len(data) < 8:
        return None
    q = len(data) // 4
    first, last = float(np.median(data[:q])), float(np.median(data[-q:]))
    return round(last / first, 3) if first else None


def leftovers(s3: Any, location: str, min_age_s: float) -> dict[str, int]:
    """Open multipart uploads and hidden objects under the raw table older than ``min_age_s``, and all."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/") + "/"
    now = datetime.now(timezone.utc)
    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    hidden = [o for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
              for o in page.get("Contents", [])
              if any(p.startswith((".", "_")) for p in o["Key"][len(prefix):].split("/"))
              and not o["Key"][len(prefix):].startswith("_dead_letters/")]
    return {"open_uploads": len(uploads),
            "open_uploads_old": sum((now - u["Initiated"]).total_seconds() >= min_age_s for u in uploads),
            "hidden_objects": len(hidden),
            "hidden_objects_old": sum((now - o["LastModified"]).total_seconds() >= min_age_s for o in hidden)}


def scan_table(table: Any, index: str, count: int) -> tuple[int, int]:
    """(lost, duplicated) among messages 0 … count-1, from one scan of the table's number column."""
    numbers = table.scan(selected_fields=(index,)).to_arrow().column(0).to_numpy()
    seen = np.bincount(numbers[(numbers >= 0) & (numbers < count)].astype(np.int64), minlength=count)
    return int((seen == 0).sum()), int(np.maximum(seen - 1, 0).sum())


def trends_plot(path: Path, samples: list[Sample], runs: list[tuple[float, float]], t0: float, warm_s: float,
                faults: list[tuple[float, str, str]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("RSS (MiB)", ("jobmanager_rss_mib", "taskmanager_rss_mib", "compactor_rss_mib")),
              ("JVM heap in use (MiB)", ("jobmanager_heap_used_mib", "taskmanager_heap_used_mib")),
              ("open file descriptors", ("jobmanager_fds", "taskmanager_fds", "compactor_fds")),
              ("files", ("table_data_files", "raw_files"))]
    fig, axes = plt.subplots(len(panels) + 1, 1, figsize=(12, 15), sharex=True)
    minutes = [(s.at_s - t0) / 60 for s in samples]
    for axis, (label, keys) in zip(axes, panels, strict=False):
        for key in keys:
            axis.plot(minutes, [s.values.get(key, np.nan) for s in samples], label=key, marker=".")
        axis.set_ylabel(label)
        axis.legend(loc="upper left", fontsize=8)
    axes[-1].plot([(at - t0) / 60 for at, _ in runs], [d for _, d in runs], marker=".", linestyle="none",
                  label="compaction run time (s)")
    axes[-1].set_ylabel("run time (s)")
    axes[-1].set_xlabel("minutes")
    axes[-1].legend(loc="upper left", fontsize=8)
    for axis in axes:
        axis.axvline(warm_s / 60, color="green", alpha=0.5)
        for at, _, _ in faults:
            axis.axvline((at - t0) / 60, color="grey", alpha=0.25)
    fig.suptitle("make soak: trends (green: end of warm-up; grey: faults)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=knob("SOAK_MINUTES", 60))
    parser.add_argument("--rate", type=float, default=knob("SOAK_RATE", 500))
    parser.add_argument("--checkpoint-s", type=float, default=knob("CHECKPOINT_S", 10))
    parser.add_argument("--compact-every-s", type=float, default=knob("COMPACT_EVERY_S", 30))
    parser.add_argument("--maintain-every-s", type=float, default=knob("SOAK_MAINTAIN_EVERY_S", 240))
    parser.add_argument("--safe-age-s", type=float, default=knob("SOAK_SAFE_AGE_S", 180))
    parser.add_argument("--credential-s", type=int, default=int(knob("SOAK_CREDENTIAL_S", 180)))
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (build/soak/work)")
    args = parser.parse_args()
    _require_package()
    ensure_server_jars()

    from lakeflow.compaction.commit import iceberg_catalog
    from lakeflow.compaction.config import CompactOptions, load_config
    from lakeflow.ingest.storage import cluster_storage
    from lakeflow.schema import declared_schema
    from lakeflow.settings import load_settings

    work = OUT / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    soak = Soak(args, work)
    total_s = args.minutes * 60
    warm_s = max(120.0, total_s / 10)
    cool_s = args.safe_age_s + args.maintain_every_s + 120
    window = (warm_s, max(warm_s + 60, total_s - cool_s))
    n_faults = max(len(FAULTS), int((window[1] - window[0]) // 150))
    schedule = [window[0] + (window[1] - window[0]) * (i + 0.5) / n_faults for i in range(n_faults)]
    order = [FAULTS[i % len(FAULTS)] for i in range(n_faults)]
    random.Random(args.seed).shuffle(order)
    tracker = Tracker(int(args.rate * total_s * 1.05) + 10_000)
    started = time.monotonic()
    print(f"soak: {args.minutes:g} min on S3 at {args.rate:g} messages/s; C = {args.checkpoint_s:g} s, P = "
          f"{args.compact_every_s:g} s, maintenance every {args.maintain_every_s:g} s, safe age {args.safe_age_s:g} s, "
          f"credentials expire after {args.credential_s} s; {n_faults} faults between minute {window[0] / 60:.1f} and "
          f"{window[1] / 60:.1f}", flush=True)

    with contextlib.ExitStack() as stack:
        moto = stack.enter_context(moto_server(work / "moto", strict_bootstrap_calls=3))
        admin = _strict_account(moto)                                   # sees everything: inspection only
        proxy = stack.enter_context(run_expiry_proxy(moto.url))
        account = S3Account(proxy.url, moto.region, admin.access_key, admin.secret_key)
        standin = soak.standin = LakekeeperWithIceberg(account).start()
        stack.callback(standin.stop)
        standin.vend_upload_listing = True                            # maintain may list the open uploads
        wh = standin.add_warehouse(WAREHOUSE_NAME)
        wh.sts_validity_s = args.credential_s
        standin.create_namespace(NAMESPACE)
        key = catalog_key(admin, wh.bucket, wh.key_prefix)
        iceberg = soak.iceberg = IcebergRest(MotoServer(moto.url, moto.region), key, wh.base, work / "iceberg-rest",
                                             wh.id)
        standin.iceberg_url = iceberg.start()
        stack.callback(iceberg.stop)
        home = work / "home"
        catalog_env = env_for(standin, LAKEFLOW_HOME=str(home))
        settings = load_settings(catalog_env)
        messages = Messages(declared_schema(settings))
        storage = cluster_storage(settings, home / "aws")               # as `lakeflow flink up`: the raw table
        location = storage.handle.location
        broker = soak.broker = stack.enter_context(run_kafka(work / "kafka"))
        broker.create_topic(TOPIC, partitions=2)
        rest_port, rpc_port, metrics_port = free_ports(3)
        cluster = soak.cluster = FlinkCluster(work / "cluster", rest_port=rest_port, rpc_port=rpc_port,
                                              conf={**HEARTBEATS, **storage.conf, **PRE_TOUCH},
                                              secret_variable=is_secret_key)
        cluster.start()
        stack.callback(cluster.stop)
        job = {**cluster.env(), **local_env(home), **catalog_env, "SOURCE": "kafka",
               "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap, "KAFKA_TOPIC": TOPIC, "KAFKA_GROUP_ID": "soak",
               "BATCH_INTERVAL_MS": str(int(args.checkpoint_s * 1000)), "NUM_RECORDS": "-1", "LAKEFLOW_JAR": str(JAR)}
        job.pop("PYTHONPATH", None)
        flink_run, job_id = submit(cluster, job, work / "flink-run.log")
        stack.callback(lambda: flink_run.poll() is None and flink_run.kill())
        compact_env = {**local_env(home), **catalog_env, "COMPACT_EXPIRE_OLDER_THAN": "10m",
                       "COMPACT_LEFTOVER_MIN_AGE": f"{args.safe_age_s:g}s", "COMPACT_DELETE_MIN_AGE": "5m"}
        compactor = soak.compactor = Compactor(compact_env, args.compact_every_s, metrics_port, work,
                                               ("--maintain-every", f"{args.maintain_every_s:g}s", "--delete-source"))
        compactor.start()
        stack.callback(compactor.stop)
        config = load_config(CompactOptions(), compact_env)
        catalog = iceberg_catalog(config.settings)
        ident = (*config.namespace, config.target_table)

        def load_table() -> Any:
            from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

            try:
                return catalog.load_table(ident)
            except (NoSuchTableError, NoSuchNamespaceError):
                return None

        soak.parts = PartProbe(s3_parts(admin.client("s3"), location), messages, tracker, period_s=2.0)
        soak.snapshots = SnapshotProbe(load_table, messages, tracker, period_s=2.0)
        metric = MetricSampler(metrics_port, config.target_name, period_s=5.0)
        pollers = [soak.parts, soak.snapshots, metric]
        for p in pollers:
            p.start()
            stack.callback(p.stop)
        soak.log(f"set up in {time.monotonic() - started:.0f} s (raw table {location}); producing")
        producer = Producer(broker, TOPIC, messages, tracker, args.rate, work / "producer.log").start()
        t0 = time.time()
        next_sample = 0.0
        while (elapsed := time.time() - t0) < total_s:
            if schedule and elapsed >= schedule[0]:
                schedule.pop(0)
                which = order.pop(0)
                at = time.time()
                try:
                    outcome = soak.inject(which)
                except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is reported
                    outcome = f"FAILED to inject: {type(exc).__name__}: {exc}"[:300]
                soak.faults.append((at, which, outcome))
                soak.log(f"fault {len(soak.faults)}/{n_faults} {which}: {outcome}")
            if elapsed >= next_sample:
                soak.sample()
                next_sample += SAMPLE_S
                s = soak.samples[-1].values
                soak.log(f"sent {tracker.count:,}, in part files {tracker.count - tracker.lost('part'):,}, in the table "
                         f"{tracker.count - tracker.lost('table'):,}; RSS JM {s['jobmanager_rss_mib']:.0f} TM "
                         f"{s['taskmanager_rss_mib']:.0f} compactor {s['compactor_rss_mib']:.0f} MiB; data files "
                         f"{s['table_data_files']:.0f}, raw files {s['raw_files']:.0f}")
            time.sleep(1.0)
        code = producer.stop()
        soak.log(f"{tracker.count:,} messages sent (producer exit {code}); draining")
        drain = goal_s(args.checkpoint_s, args.compact_every_s) + 2 * args.compact_every_s + 120
        with contextlib.suppress(TimeoutError):
            wait_for(lambda: tracker.lost("table") == 0, drain, "every message in the table")
        soak.sample()
        table = load_table()
        lost, duplicated = scan_table(table, messages.index, tracker.count)
        left = leftovers(admin.client("s3"), location, args.safe_age_s)
        failures = len(__import__("requests").get(f"{cluster.rest_url}/v1/jobs/{job_id}/exceptions", timeout=10)
                       .json().get("exceptionHistory", {}).get("entries", []))
        refused = proxy.refused
        credential_calls = len(standin.calls("GET", "/credentials"))

    runs = [(r.at_s, r.duration_s) for r in compactor.runs if r.result == "ok"]
    started_at = {process: max([t0 + warm_s, *(at + RESTART_WARM_S for at, which, _ in soak.faults
                                               if RESTARTS.get(which) == process)])
                  for process in set(RESTARTS.values())}
    keys = sorted(soak.samples[0].values) if soak.samples else []
    trends = {k: trend([s.values.get(k, np.nan) for s in soak.samples
                        if s.at_s >= started_at.get(k.split("_")[0], t0 + warm_s)]) for k in keys}
    trends["compaction_run_s"] = trend([d for at, d in runs if at - t0 >= warm_s])
    rss_ok = all(trends[k] is None or trends[k] <= RSS_GOAL for k in trends if k.endswith("_rss_mib"))
    table_lat = summary(tracker.latencies("table"))
    result = {
        "minutes": args.minutes, "rate": args.rate, "storage": "s3 (moto, IAM enforced, expiring STS credentials)",
        "messages": tracker.count, "lost": lost, "duplicated": duplicated,
        "probe": {"lost": tracker.lost("table"), "duplicated": tracker.duplicated["table"],
                  "part_file_duplicated": tracker.duplicated["part"], "unexpected": tracker.unexpected},
        "leftovers": left, "safe_age_s": args.safe_age_s,
        "faults": [{"at_min": round((at - t0) / 60, 1), "fault": which, "outcome": outcome}
                   for at, which, outcome in soak.faults],
        "job_failures_seen": failures, "expired_tokens_refused": refused, "credential_calls": credential_calls,
        "compaction": {"runs": len(compactor.runs), "ok": len(runs), "kills": compactor.kills,
                       "results": {r: sum(x.result == r for x in compactor.runs) for r in {x.result for x in compactor.runs}},
                       "stage_mean_s": compactor.stage_means()},
        "latency_table": table_lat, "metric_agreement": agreement(metric.samples, soak.snapshots, args.checkpoint_s),
        "trends": trends, "rss_goal": RSS_GOAL,
        "probe_errors": {p.name: p.errors_seen() for p in pollers if p.errors},
        "load_average": os.getloadavg()[0],
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(result, indent=1) + "\n")
    trends_plot(OUT / "trends.png", soak.samples, runs, t0, warm_s, soak.faults)
    latency_plot(OUT / "latency.png", f"make soak: {args.rate:g} msg/s on S3 under faults", tracker, soak.snapshots,
                 goal_s(args.checkpoint_s, args.compact_every_s), metric.samples,
                 [(at, which) for at, which, _ in soak.faults])
    leftovers_ok = left["open_uploads_old"] == 0 and left["hidden_objects_old"] == 0
    ok = lost == 0 and duplicated == 0 and leftovers_ok and rss_ok
    lines = [
        f"# make soak — {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M')} UTC", "",
        f"{args.minutes:g} min on S3 (moto with IAM, STS credentials expiring every {args.credential_s} s), "
        f"{args.rate:g} messages/s, C = {args.checkpoint_s:g} s, P = {args.compact_every_s:g} s, maintenance every "
        f"{args.maintain_every_s:g} s, safe age {args.safe_age_s:g} s; load average at the end "
        f"{result['load_average']:.1f}.", "",
        f"**{'PASSED' if ok else 'FAILED'}**: {tracker.count:,} messages, lost {lost}, duplicated {duplicated}; "
        f"leftovers older than the safe age: {left['open_uploads_old']} open uploads, {left['hidden_objects_old']} "
        f"hidden objects (in all: {left['open_uploads']}, {left['hidden_objects']}).", "",
        f"Sent → visible in Iceberg under faults: p50 {table_lat['p50_s']} s, p95 {table_lat['p95_s']} s, "
        f"p99 {table_lat['p99_s']} s, max {table_lat['max_s']} s. The job's failures seen: {failures}; expired tokens "
        f"refused by the proxy: {refused}; `/credentials` calls: {credential_calls}.", "",
        f"`lakeflow_end_to_end_lag_seconds` against the probe's own figure: {result['metric_agreement']}.", "",
        "## Faults", "", "| minute | fault | outcome |", "|---|---|---|",
        *[f"| {f['at_min']} | {f['fault']} | {f['outcome']} |" for f in result["faults"]], "",
        "## Trends after the warm-up (median of the last quarter / of the first)", "",
        "| series | growth |", "|---|---|",
        *[f"| {k} | {v if v is not None else '-'}{' (goal ≤ 1.10)' if k.endswith('_rss_mib') else ''} |"
          for k, v in trends.items()], "",
        f"Compaction: {len(compactor.runs)} runs ({result['compaction']['results']}), {compactor.kills} killed; "
        "mean seconds per stage: " + ", ".join(f"{k} {v}" for k, v in result["compaction"]["stage_mean_s"].items()),
        "", "![trends](trends.png)", "", "![latency](latency.png)", "",
    ]
    (OUT / "report.md").write_text("\n".join(lines))
    print("\n".join(lines[4:7]), flush=True)
    print("  trends: " + ", ".join(f"{k} {v}" for k, v in trends.items()), flush=True)
    print(f"  wrote {OUT}/summary.json, report.md, trends.png, latency.png ({time.monotonic() - started:.0f} s)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
