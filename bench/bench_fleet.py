"""``make bench-fleet``: one pipeline of many streams against the one-stream job, at the same total rate (#41).

Everything runs as ``make bench-freshness`` runs it (bench/always_on.py: a real Kafka 4.1.1 broker, the
packaged ingestion job with ``SOURCE=kafka`` and parallelism 2 on a standalone Flink cluster, ``lakeflow
compact --every COMPACT_EVERY_S`` as a service, the embedded local catalog on ``file://``; each message
carries its send time as its event time and the probes time it to its committed part file and to the
Iceberg snapshot that made it visible), in phases, each on a fresh Flink cluster, compactor and
``LAKEFLOW_HOME``, the broker shared:

1. **one stream**, the baseline: the settings' one stream (``KAFKA_TOPIC``, the default sensor reading),
   ``FLEET_RATE`` messages/s for ``FLEET_MINUTES``;
2. **10 streams** (for the memory slope; only until its memory window has passed) and
3. **``FLEET_STREAMS`` streams** (50), the same total rate and duration: a pipeline file (``PIPELINE``;
   docs/pipelines.md) over five JSON Schemas of different shapes the bench writes (meter, door,
   vibration, tracker, hvac: each a string key field, an integer ``seq``, an epoch-ms event time),
   topics ``fleet<S>.<shape>.<nn>`` (2 partitions each, as the baseline's; the phases share the broker),
   tables ``<shape>_<nn>`` in namespace ``fleet``; by default five topic patterns
   (``'fleet50\\.meter\\.(\\d+)'`` → ``meter_{1}``…, the fleet's natural form), with ``FLEET_FORM=list``
   one ``[[streams]]`` per topic.

One producer JVM writes every topic of a phase (bench/FleetProducer.java, run from source: Kafka's
console producer takes one topic per JVM), round-robin over the streams, from a thread at the total
rate; the baseline uses it too. Probes poll every table of the phase from two threads (part files every
1 s, snapshots every 2 s: the snapshot's timestamp is the figure, not the poll).

Figures per phase, beside the targets (the issue's):

- **committed messages/s**: messages that reached a committed part file between 2·C after the first
  send and the last send, per second of that window; the fleet's ≥ 0.9× the baseline's;
- **freshness**: sent → visible in its Iceberg table, p99 per stream; every stream's ≤ 2·C + P + 5 s;
  0 lost, 0 duplicated;
- **memory per stream**: the TaskManager's RSS (its heap pre-touched, so RSS is not G1 touching pages for
  the first time: ``make soak``'s lesson) and its live heap after a full GC (``jcmd GC.run``), the
  compactor's RSS, medians over a window after warm-up (from 90 s after the first send, 60 s; earlier
  in short runs), at 1, 10 and ``FLEET_STREAMS`` streams; the slopes (least squares, MiB/stream): the
  TaskManager's RSS + live heap ≤ 20, the compactor's RSS ≤ 10;
- **idle pass**: once everything is compacted, each table's next run of the service (its whole run; the
  service collects once a tick, after its runs), summed — the streams' runs spread over the period, each due ``P``
  after its own last start — ≤ 2 s at ``FLEET_STREAMS`` tables; beside it, after the service stopped, one
  ``lakeflow compact`` process (start-up included), a pass in one process as the service runs it (its runs
  and the collections apart), ``lakeflow status --json``, and a cProfile of a warm pass (where it goes).

Also printed: CPU seconds per 1,000 messages of each process (TaskManager, JobManager, broker, producer,
compactor, the bench's probes), checkpoint durations, part files per checkpoint. Written:
``build/bench/fleet.json``. Exit 1 when a target is missed, a message lost or duplicated.

Knobs (environment, or the flags of the same name): ``FLEET_MINUTES`` (5), ``FLEET_RATE`` (2000 messages/s
in all), ``FLEET_STREAMS`` (50), ``FLEET_FORM`` (pattern | list), ``CHECKPOINT_S`` (10),
``COMPACT_EVERY_S`` (30). About 18 minutes at the defaults, 12 with ``FLEET_MINUTES=2``. Needs ``make package`` (the Makefile target
builds it). Not a test: figures vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pstats
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.always_on import (  # noqa: E402
    LAKEFLOW,
    Compactor,
    Messages,
    PartProbe,
    Poller,
    Producer,
    Run,
    SnapshotProbe,
    Tracker,
    checkpoints_completed,
    local_parts,
    rss_mib,
    summary,
    wait_for,
)
from bench.bench_freshness import goal_s, job_env, knob, submit  # noqa: E402
from lakeflow.runtime.flink_cluster import FlinkCluster  # noqa: E402
from lakeflow.runtime.kafka import KafkaBroker, java  # noqa: E402
from lakeflow.runtime.ports import free_ports  # noqa: E402
from lakeflow.secret import is_secret_key  # noqa: E402
from tests.chaos.common import local_env  # noqa: E402
from tests.chaos.tm_kill import HEARTBEATS, _require_package  # noqa: E402
from tests.support.kafka_broker import run_kafka  # noqa: E402

OUT = ROOT / "build" / "bench"
PRODUCER_SOURCE = ROOT / "bench" / "FleetProducer.java"
BASELINE_TOPIC = "readings"
NAMESPACE = "fleet"
PARTITIONS = 2  # per topic, as the one-stream bench's topic
# The variables of the settings' one stream: with PIPELINE they must be unset (docs/pipelines.md).
ONE_STREAM_VARIABLES = ("TABLE", "TABLE_SCHEMA", "KAFKA_TOPIC", "KEY_FIELDS", "EVENT_TIME_FIELD", "PARTITION_BY",
                        "COMPACT_TABLE")
# The TaskManager's heap touched at its start: its RSS then moves with what it holds beyond the heap, not
# with G1 reaching pages it had not used yet (make soak saw +50 % from that alone).
PRE_TOUCH = {"env.java.opts.taskmanager": "-XX:+AlwaysPreTouch"}
TM_TARGET_MIB, COMPACTOR_TARGET_MIB, IDLE_TARGET_S, THROUGHPUT_TARGET = 20.0, 10.0, 2.0, 0.9


def text_knob(name: str, default: str) -> str:
    return os.environ.get(name) or default


# --- the fleet's five shapes of record ------------------------------------------------------------

def _schema(title: str, key: str, time_field: str, properties: dict[str, Any], required: Sequence[str]) -> dict:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": title,
        "description": f"make bench-fleet's {title} stream (bench/bench_fleet.py).",
        "type": "object",
        "properties": {key: {"type": "string"}, "seq": {"type": "integer"}, time_field: {"type": "integer"},
                       **properties},
        "required": [key, "seq", time_field, *required],
        "x-lakeflow": {"event-time": time_field, "key": [key, "seq"], "partition-by": ["day"]},
    }


SHAPES: dict[str, dict] = {
    "meter": _schema("meter", "meter_id", "read_at", {
        "kwh": {"type": "number"}, "voltage": {"type": "number"}, "phase": {"type": "string"}}, ["kwh"]),
    "door": _schema("door", "door_id", "at_ms", {
        "open": {"type": "boolean"}, "badge": {"type": ["string", "null"]}}, ["open"]),
    "vibration": _schema("vibration", "device_id", "t_ms", {
        "accel": {"type": "array", "items": {"type": "number", "x-iceberg-type": "float"}, "maxItems": 3},
        "rms": {"type": "number"}, "temperature": {"type": "number"}}, ["accel"]),
    "tracker": _schema("tracker", "tracker_id", "fix_ms", {
        "pos": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"]},
        "speed": {"type": "number"}, "heading": {"type": "integer", "x-iceberg-type": "int"},
        "satellites": {"type": "integer"}}, ["pos"]),
    "hvac": _schema("hvac", "unit_id", "ts_ms", {
        "setpoint": {"type": "number"}, "temps": {"type": "object", "additionalProperties": {"type": "number"}},
        "mode": {"type": "string"}, "alarms": {"type": "array", "items": {"type": "string"}}}, ["setpoint"]),
}


@dataclass
class Lane:
    """One stream of a phase: its topic, raw and Iceberg tables, messages, tracker and probes."""

    topic: str
    namespace: str
    table: str
    iceberg_table: str
    messages: Messages
    tracker: Tracker
    parts: PartProbe | None = None
    snapshots: SnapshotProbe | None = None


def fleet_lanes(count: int, schemas: Path, capacity: int) -> list[Lane]:
    from lakeflow.schema import load_schema

    shapes, loaded = list(SHAPES), {name: load_schema(schemas / f"{name}.schema.json") for name in SHAPES}
    lanes = []
    for i in range(count):
        shape, j = shapes[i % len(shapes)], i // len(shapes)
        table = f"{shape}_{j:02d}"
        lanes.append(Lane(f"{topic_root(count)}.{shape}.{j:02d}", NAMESPACE, table, f"{table}-compacted", Messages(loaded[shape]),
                          Tracker(capacity)))
    return lanes


def topic_root(streams: int) -> str:
    """The phase's topics are ``fleet<S>.<shape>.<nn>``: the phases share the broker, and a phase's job must
    not match (a pattern, from the earliest offset) the topics an earlier phase filled."""
    return f"fleet{streams}"


def write_schemas(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, schema in SHAPES.items():
        (folder / f"{name}.schema.json").write_text(json.dumps(schema, indent=1) + "\n")


def write_pipeline(path: Path, lanes: Sequence[Lane], form: str) -> None:
    """The phase's pipeline file: a topic pattern per shape (``form`` pattern) or a stream per topic (list)."""
    lines = ["# make bench-fleet (bench/bench_fleet.py)", "[defaults]", f'namespace = "{NAMESPACE}"', ""]
    if form == "pattern":
        root = topic_root(len(lanes))
        for shape in dict.fromkeys(lane.table.rsplit("_", 1)[0] for lane in lanes):
            lines += ["[[streams]]", f'name = "{shape}"', f"topic-pattern = '{root}\\.{shape}\\.(\\d+)'",
                      f'schema = "schemas/{shape}.schema.json"', f'table = "{shape}_{{1}}"', ""]
    else:
        for lane in lanes:
            shape = lane.table.rsplit("_", 1)[0]
            lines += ["[[streams]]", f'name = "{lane.table}"', f'topics = ["{lane.topic}"]',
                      f'schema = "schemas/{shape}.schema.json"', f'table = "{lane.table}"', ""]
    path.write_text("\n".join(lines))


# --- one producer JVM for every topic -------------------------------------------------------------

def producer_cmd(broker: KafkaBroker, *args: str, heap: str = "256m") -> list[str]:
    return [java(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", broker.classpath,
            str(PRODUCER_SOURCE), *args]


def create_topics(broker: KafkaBroker, topics: Sequence[str]) -> None:
    done = subprocess.run(producer_cmd(broker, "create", broker.bootstrap, str(PARTITIONS), *topics, heap="128m"),
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"creating {len(topics)} topics failed: {done.stderr[-800:]}")


class FleetProducer(Producer):
    """bench/FleetProducer.java fed ``rate`` messages a second in all, round-robin over ``lanes`` (each
    lane's messages numbered 0, 1, … in its own tracker), in batches every 10 ms; a message's send time is
    when its batch is handed to the producer (as :class:`bench.always_on.Producer`, whose start and stop
    it keeps)."""

    def __init__(self, broker: KafkaBroker, lanes: Sequence[Lane], rate: float, log: Path) -> None:
        self.lanes, self.rate = list(lanes), rate
        self.log = open(log, "wb")  # noqa: SIM115 - open while the producer runs
        self.proc = subprocess.Popen(producer_cmd(broker, "produce", broker.bootstrap), stdin=subprocess.PIPE,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.bytes = 0
        self.first_s = self.last_s = float("nan")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fleet-producer")

    def _run(self) -> None:
        assert self.proc.stdin is not None
        lanes, count = self.lanes, len(self.lanes)
        heads = [0] * count
        limit = min(lane.tracker.capacity for lane in lanes) * count
        started, n = time.time(), 0
        while not self._stop.is_set() and n < limit:
            now = time.time()
            due = min(int((now - started) * self.rate), limit)
            if due > n:
                ms = int(now * 1000)
                before = list(heads)
                out = []
                for i in range(n, due):
                    s = i % count
                    out.append(f"{lanes[s].topic}\t{lanes[s].messages.line(heads[s], ms)}\n")
                    heads[s] += 1
                for s, lane in enumerate(lanes):
                    if heads[s] > before[s]:
                        lane.tracker.send(before[s], heads[s], ms / 1000)
                block = "".join(out).encode()
                self.bytes += len(block)
                self.proc.stdin.write(block)
                self.proc.stdin.flush()
                if n == 0:
                    self.first_s = ms / 1000
                self.last_s = ms / 1000
                n = due
            time.sleep(self.TICK_S)

    @property
    def sent(self) -> int:
        return sum(lane.tracker.count for lane in self.lanes)

class RoundRobin(Poller):
    """Polls every one of ``probes`` in turn from one thread every ``period_s`` (50 tables: 2 threads, not
    100); a probe's failure is counted and the others go on."""

    def __init__(self, probes: Sequence[Poller], period_s: float, name: str) -> None:
        super().__init__(period_s, name)
        self.probes = list(probes)

    def poll(self) -> None:
        for probe in self.probes:
            try:
                probe.poll()
            except Exception as exc:  # noqa: BLE001 - one table's poll failing: counted, the next poll retries
                self.errors += 1
                self.last_error = f"{probe.name}: {type(exc).__name__}: {exc}"[:300]


# --- processes: memory and CPU --------------------------------------------------------------------

CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process and its waited-for children (nan when gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / CLOCK_TICK
    except (OSError, TypeError, IndexError, ValueError):
        return float("nan")


def threads(pid: int | None) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return float(line.split()[1])
    except (OSError, TypeError):
        pass
    return float("nan")


class Sampler(Poller):
    """Every ``period_s``: (t, TaskManager RSS, compactor RSS) in MiB."""

    def __init__(self, pids: Callable[[], dict[str, int | None]], period_s: float = 5.0) -> None:
        super().__init__(period_s, "memory-sampler")
        self.pids = pids
        self.samples: list[tuple[float, float, float]] = []

    def poll(self) -> None:
        p = self.pids()
        self.samples.append((time.time(), rss_mib(p["taskmanager"]), rss_mib(p["compactor"])))

    def window(self, start: float, end: float) -> dict[str, float | None]:
        inside = [s for s in self.samples if start <= s[0] <= end]

        def med(i: int) -> float | None:
            values = [s[i] for s in inside if not math.isnan(s[i])]
            return round(float(np.median(values)), 1) if values else None

        def peak(i: int) -> float | None:
            values = [s[i] for s in self.samples if not math.isnan(s[i])]
            return round(max(values), 1) if values else None

        return {"tm_rss_mib": med(1), "compactor_rss_mib": med(2), "tm_rss_peak_mib": peak(1),
                "compactor_rss_peak_mib": peak(2), "samples": len(inside)}


def live_heap_mib(pid: int | None) -> dict[str, float | None]:
    """The JVM's heap in use right after a full GC (``jcmd GC.run``; ``GC.heap_info``) and its metaspace."""
    jcmd = shutil.which("jcmd", path=str(Path(java()).parent)) or shutil.which("jcmd")
    if pid is None or jcmd is None:
        return {"live_heap_mib": None, "metaspace_mib": None}
    subprocess.run([jcmd, str(pid), "GC.run"], capture_output=True, timeout=60)
    info = subprocess.run([jcmd, str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60).stdout
    heap = re.search(r"heap\s+total (\d+)K, used (\d+)K", info)
    meta = re.search(r"Metaspace\s+used (\d+)K", info)
    return {"live_heap_mib": round(int(heap[2]) / 1024, 1) if heap else None,
            "metaspace_mib": round(int(meta[1]) / 1024, 1) if meta else None}


def checkpoint_stats(rest: str, job_id: str) -> dict[str, Any]:
    got = requests.get(f"{rest}/v1/jobs/{job_id}/checkpoints", timeout=10).json()
    duration = got.get("summary", {}).get("end_to_end_duration", {})
    return {"completed": got["counts"]["completed"], "failed": got["counts"]["failed"],
            "duration_ms_p50": duration.get("p50"), "duration_ms_max": duration.get("max")}


# --- the service's runs ------------------------------------------------------------------------

def ticks(runs: Sequence[Run], gap_s: float = 1.0) -> list[list[Run]]:
    """The service's runs in ticks: a run of a stream the tick has run already, or starting more than
    ``gap_s`` after the previous one ended, begins the next tick. (Each stream is due ``P`` after its own
    last run started, so once runs took different times the streams' runs spread over the period.)"""
    out: list[list[Run]] = []
    for run in runs:
        start = run.at_s - run.duration_s
        if out and start - out[-1][-1].at_s <= gap_s and all(r.stream != run.stream for r in out[-1]):
            out[-1].append(run)
        else:
            out.append([run])
    return out


def idle_pass(compactor: Compactor, tables: int, after_s: float) -> dict[str, Any] | None:
    """Once every one of ``tables`` streams had a run starting after ``after_s`` that found nothing new: a
    pass over the idle tables as the service does it, each stream's first such run (its whole run, the
    collection after it included): their sum (a tick's cost when every stream is due), median, max, and
    the wall time from the first's start to the last's end (the streams' runs spread over the period)."""
    first: dict[str | None, Run] = {}
    for run in list(compactor.runs):
        if run.at_s - run.duration_s >= after_s and run.files == 0 and run.stream not in first:
            first[run.stream] = run
    if len(first) < tables:
        return None
    runs = list(first.values())
    each = sorted(r.duration_s for r in runs)
    return {"tables": len(runs), "sum_s": round(sum(each), 2), "run_s_p50": each[len(each) // 2],
            "run_s_max": each[-1], "ok": sum(r.result == "ok" for r in runs),
            "spread_s": round(max(r.at_s for r in runs) - min(r.at_s - r.duration_s for r in runs), 1)}


# --- a phase --------------------------------------------------------------------------------------

@dataclass
class Phase:
    name: str
    streams: int
    minutes: float
    form: str  # settings | pattern | list
    result: dict[str, Any] = field(default_factory=dict)


def run_phase(phase: Phase, broker: KafkaBroker, work: Path, schemas: Path, args: argparse.Namespace,
              profile_idle: bool) -> dict[str, Any]:
    from lakeflow.compaction.commit import iceberg_catalog
    from lakeflow.schema import declared_schema
    from lakeflow.settings import load_settings

    folder = work / phase.name
    folder.mkdir(parents=True)
    home = folder / "home"
    per_stream_rate = args.rate / phase.streams
    capacity = int(per_stream_rate * phase.minutes * 60 * 1.05) + 10_000
    base_env = {k: v for k, v in local_env(home).items() if k not in ONE_STREAM_VARIABLES}
    if phase.form == "settings":
        compact_env = local_env(home)
        settings = load_settings(compact_env)
        lanes = [Lane(BASELINE_TOPIC, ".".join(settings.namespace), settings.table, f"{settings.table}-compacted",
                      Messages(declared_schema(settings)), Tracker(capacity))]
    else:
        lanes = fleet_lanes(phase.streams, schemas, capacity)
        pipeline = folder / "pipeline.toml"
        shutil.copytree(schemas, folder / "schemas")
        write_pipeline(pipeline, lanes, phase.form)
        compact_env = {**base_env, "PIPELINE": str(pipeline)}
        settings = load_settings(compact_env)
    catalog = iceberg_catalog(settings)
    warehouse = Path(settings.home) / "warehouse"

    def loader(lane: Lane) -> Callable[[], Any]:
        def load() -> Any:
            from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

            try:
                return catalog.load_table((lane.namespace, lane.iceberg_table))
            except (NoSuchTableError, NoSuchNamespaceError):
                return None

        return load

    for lane in lanes:
        lane.parts = PartProbe(local_parts(warehouse.joinpath(*lane.namespace.split("."), lane.table)), lane.messages,
                               lane.tracker)
        lane.snapshots = SnapshotProbe(loader(lane), lane.messages, lane.tracker)
    create_topics(broker, [lane.topic for lane in lanes])

    goal = goal_s(args.checkpoint_s, args.compact_every_s)
    warm_s = min(90.0, phase.minutes * 60 / 2)
    window_s = min(60.0, phase.minutes * 60 - warm_s)
    print(f"[{phase.name}] {phase.streams} stream(s) ({phase.form}), {args.rate:g} messages/s in all "
          f"({per_stream_rate:g} per stream) for {phase.minutes:g} min", flush=True)
    started = time.monotonic()
    rest_port, rpc_port, metrics_port = free_ports(3)
    cluster = FlinkCluster(folder / "cluster", rest_port=rest_port, rpc_port=rpc_port,
                           conf={**HEARTBEATS, **PRE_TOUCH}, secret_variable=is_secret_key)
    cluster.start()
    flink_run = compactor = producer = None
    pollers: list[Poller] = []
    out: dict[str, Any] = {"streams": phase.streams, "form": phase.form, "minutes": phase.minutes}
    try:
        env = job_env(cluster, home, broker.bootstrap, args.checkpoint_s)
        env["KAFKA_GROUP_ID"] = f"bench-fleet-{phase.name}"
        if phase.form != "settings":
            env = {k: v for k, v in env.items() if k not in ONE_STREAM_VARIABLES}
            env["PIPELINE"] = compact_env["PIPELINE"]
        flink_run, job_id = submit(cluster, env, folder / "flink-run.log")
        compactor = Compactor(compact_env, args.compact_every_s, metrics_port, folder)
        compactor.start()

        def pids() -> dict[str, int | None]:
            tms = cluster.taskmanager_pids()
            return {"taskmanager": tms[0] if tms else None, "compactor": compactor.pid}

        sampler = Sampler(pids)
        pollers = [RoundRobin([lane.parts for lane in lanes], 1.0, "part-probes"),
                   RoundRobin([lane.snapshots for lane in lanes], 2.0, "snapshot-probes"), sampler]
        for p in pollers:
            p.start()
        jms = cluster.jobmanager_pids()
        procs = {"taskmanager": pids()["taskmanager"], "jobmanager": jms[0] if jms else None, "broker": broker.pid,
                 "compactor": compactor.pid, "bench (probes, feeder)": os.getpid()}
        print(f"  [{phase.name}] set up in {time.monotonic() - started:.0f} s; producing", flush=True)
        producer = FleetProducer(broker, lanes, args.rate, folder / "producer.log").start()
        procs["producer JVM"] = producer.proc.pid
        t0 = time.time()
        cpu0 = {name: cpu_s(pid) for name, pid in procs.items()}
        time.sleep(warm_s + window_s)
        heap = {**live_heap_mib(pids()["taskmanager"]), "tm_threads": threads(pids()["taskmanager"])}
        time.sleep(max(0.0, phase.minutes * 60 - (time.time() - t0)))
        cpu1 = {name: cpu_s(pid) for name, pid in procs.items()}
        t1 = time.time()
        code = producer.stop()
        sent = producer.sent
        print(f"  [{phase.name}] {sent:,} messages sent (producer exit {code}); draining", flush=True)
        drained_at = None
        try:
            wait_for(lambda: all(lane.tracker.lost("table") == 0 for lane in lanes), 2 * goal + 60,
                     "every message visible in its table", 1.0)
            drained_at = time.time()
        except TimeoutError as exc:
            print(f"  [{phase.name}] {exc}", flush=True)
        idle = None
        if drained_at is not None:
            try:
                wait_for(lambda: idle_pass(compactor, len(lanes), drained_at) is not None,
                         args.compact_every_s * 3 + 60, "an idle run of every stream", 1.0)
                idle = idle_pass(compactor, len(lanes), drained_at)
            except TimeoutError as exc:
                print(f"  [{phase.name}] {exc}", flush=True)
        checkpoints = checkpoint_stats(cluster.rest_url, job_id)
        checkpoints["completed_at_end"] = checkpoints_completed(cluster.rest_url, job_id)
    finally:
        for p in pollers:
            p.stop()
        if compactor is not None:
            compactor.stop()
        if flink_run is not None and flink_run.poll() is None:
            flink_run.kill()
        cluster.stop()
    t_first = producer.first_s
    start, end = t_first + 2 * args.checkpoint_s, t1
    parts_in_window = sum(int(((lane.tracker.stages["part"][: lane.tracker.count] >= start)
                               & (lane.tracker.stages["part"][: lane.tracker.count] <= end)).sum()) for lane in lanes)
    sent_in_window = sum(int(((lane.tracker.sent_s[: lane.tracker.count] >= start)
                              & (lane.tracker.sent_s[: lane.tracker.count] <= end)).sum()) for lane in lanes)
    per_stream = [summary(lane.tracker.latencies("table")) for lane in lanes]
    p99s = [s["p99_s"] for s in per_stream]
    all_table = np.concatenate([lane.tracker.latencies("table") for lane in lanes])
    all_part = np.concatenate([lane.tracker.latencies("part") for lane in lanes])
    worst = int(np.argmax([p if p is not None else math.inf for p in p99s])) if lanes else 0
    messages_in_window = max(sent_in_window, 1)
    part_files = sum(len(lane.parts.files) for lane in lanes if lane.parts)
    out.update({
        "rate": args.rate, "messages": sent, "bytes_per_message": round(producer.bytes / max(sent, 1), 1),
        "window_s": round(end - start, 1),
        "committed_per_s": round(parts_in_window / (end - start), 1),
        "offered_per_s": round(sent_in_window / (end - start), 1),
        "lost": sum(lane.tracker.lost("table") for lane in lanes),
        "duplicated": sum(lane.tracker.duplicated["table"] for lane in lanes),
        "unexpected": sum(lane.tracker.unexpected for lane in lanes),  # numbers never sent (another phase's)
        "lost_part": sum(lane.tracker.lost("part") for lane in lanes),
        "duplicated_part": sum(lane.tracker.duplicated["part"] for lane in lanes),
        "table": summary(all_table), "part_file": summary(all_part), "goal_s": goal,
        "worst_stream": {"table": lanes[worst].table, **per_stream[worst]},
        "streams_over_goal": sum(p is None or p > goal for p in p99s),
        "memory": {**sampler.window(t_first + warm_s, t_first + warm_s + window_s), **heap,
                   "window_s": [warm_s, warm_s + window_s]},
        "cpu_s_per_1000": {name: round((cpu1[name] - cpu0[name]) / messages_in_window * 1000, 3)
                           for name in procs if not math.isnan(cpu1[name] - cpu0[name])},
        "cpu_cores_busy": round(sum(cpu1[n] - cpu0[n] for n in procs if not math.isnan(cpu1[n] - cpu0[n]))
                                / (t1 - t0), 2),
        "checkpoints": checkpoints,
        "part_files": part_files,
        "part_files_per_checkpoint": round(part_files / max(checkpoints["completed"], 1), 1),
        "compaction_runs": len(compactor.runs), "compaction_errors": sum(r.result != "ok" for r in compactor.runs),
        "busy": _busy(compactor, t_first, t1),
        "idle_pass": idle,
        "probe_errors": {p.name: p.errors_seen() for p in pollers if p.errors},
        "load_average": round(os.getloadavg()[0], 1),
        "seconds": round(time.monotonic() - started),
    })
    if profile_idle and drained_at is not None:
        out["one_shot"] = one_shot_pass(compact_env, folder, len(lanes))
    print(f"  [{phase.name}] done in {out['seconds']} s: committed {out['committed_per_s']:g}/s of "
          f"{out['offered_per_s']:g} offered, p99 {out['table']['p99_s']} s (worst stream "
          f"{out['worst_stream']['table']} {out['worst_stream']['p99_s']} s), lost {out['lost']}, "
          f"duplicated {out['duplicated']}, idle pass {idle['sum_s'] if idle else '-'} s", flush=True)
    return out


def _busy(compactor: Compactor, t0: float, t1: float) -> dict[str, float | None]:
    """The service while messages flowed (from 30 s after the first send): its runs' times, the share of
    the time it was running (1: no room left in its period) and each stream's period (median of the gaps
    between its runs' starts; the medians' median and max over the streams)."""
    runs = [r for r in list(compactor.runs) if t0 + 30 <= r.at_s - r.duration_s and r.at_s <= t1]
    if not runs:
        return {"run_s_p50": None, "run_s_max": None, "utilisation": None, "period_s_p50": None, "period_s_max": None}
    each = sorted(r.duration_s for r in runs)
    starts: dict[str | None, list[float]] = {}
    for r in runs:
        starts.setdefault(r.stream, []).append(r.at_s - r.duration_s)
    periods = sorted(float(np.median(np.diff(v))) for v in starts.values() if len(v) > 1)
    return {"run_s_p50": each[len(each) // 2], "run_s_max": each[-1],
            "utilisation": round(sum(each) / (t1 - t0 - 30), 2),
            "period_s_p50": round(periods[len(periods) // 2], 1) if periods else None,
            "period_s_max": round(periods[-1], 1) if periods else None}


PROFILED_PASS = """
import cProfile, contextlib, gc, io, json, sys, time
from dataclasses import replace
from lakeflow.cli.compact import options_of, run_once, served_streams
from lakeflow.cli.main import build_parser, main
t = time.perf_counter(); first = main(["compact"]); cold = time.perf_counter() - t
t = time.perf_counter(); second = main(["compact"]); warm = time.perf_counter() - t
options = options_of(build_parser().parse_args(["compact"]))
runs = collections = 0.0
for stream in served_streams(options)():  # as the service: a run per stream, then one gc.collect() (continuous.py)
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        run_once(replace(options, stream=stream.name), ())
    runs += time.perf_counter() - t
t2 = time.perf_counter(); gc.collect(); collections += time.perf_counter() - t2
profile = cProfile.Profile()
profile.enable(); third = main(["compact"]); profile.disable()
profile.dump_stats(sys.argv[1])
print(json.dumps({"cold_in_process_s": round(cold, 2), "warm_s": round(warm, 2), "service_runs_s": round(runs, 2),
                  "service_gc_s": round(collections, 2), "objects": len(gc.get_objects()), "exit": [first, second, third]}))
"""


def one_shot_pass(env: dict[str, str], folder: Path, tables: int) -> dict[str, Any]:
    """After the service stopped, over the idle tables: one ``lakeflow compact`` process (its wall time, the
    interpreter's start and the imports included), ``lakeflow status --json``, then two passes in one
    process (the first importing what a run needs, the second timed as the service's runs are) and a third
    under cProfile: where a pass's time goes once imports are done."""
    out: dict[str, Any] = {}
    t = time.monotonic()
    done = subprocess.run([LAKEFLOW, "compact"], env=env, cwd=folder, capture_output=True, text=True, timeout=600)
    out["compact_s"] = round(time.monotonic() - t, 2)
    out["compact_exit"] = done.returncode
    t = time.monotonic()
    status = subprocess.run([LAKEFLOW, "status", "--json"], env=env, cwd=folder, capture_output=True, text=True,
                            timeout=600)
    out["status_s"] = round(time.monotonic() - t, 2)
    try:
        out["status_streams"] = len(json.loads(status.stdout).get("streams", [None]))
    except ValueError:
        out["status_streams"] = None
    prof = folder / "idle-pass.prof"
    python = str(Path(LAKEFLOW).parent / "python")
    done = subprocess.run([python, "-c", PROFILED_PASS, str(prof)], env=env, cwd=folder, capture_output=True,
                          text=True, timeout=600)
    try:
        out.update(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        out["profile_error"] = done.stderr[-500:]
    if prof.is_file():
        stats = pstats.Stats(str(prof))
        total = stats.total_tt  # type: ignore[attr-defined]
        rows = []
        for (file, line, func), (_cc, calls, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
            where = file.replace(str(ROOT) + "/", "")
            where = where.split("site-packages/", 1)[-1]
            rows.append((ct, tt, calls, f"{where}:{line}({func})"))
        out["profile_total_s"] = round(total, 2)
        out["profile_cumulative"] = [
            {"s": round(ct, 3), "ms_per_table": round(ct / tables * 1000, 1), "calls": calls, "where": w}
            for ct, tt, calls, w in sorted(rows, reverse=True) if ct < 0.9 * total and ct > 0.02 * total
        ][:30]
        out["profile_self"] = [{"s": round(tt, 3), "calls": calls, "where": w}
                               for ct, tt, calls, w in sorted(rows, key=lambda r: r[1], reverse=True)[:20]]
    return out


# --- the comparison ------------------------------------------------------------------------------

def slope(points: Sequence[tuple[int, float | None]]) -> float | None:
    """Least-squares MiB per stream through ``points`` (streams, MiB); None with fewer than two."""
    xs = [x for x, y in points if y is not None]
    ys = [y for x, y in points if y is not None]
    if len(set(xs)) < 2:
        return None
    return round(float(np.polyfit(xs, ys, 1)[0]), 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=knob("FLEET_MINUTES", 5))
    parser.add_argument("--rate", type=float, default=knob("FLEET_RATE", 2000))
    parser.add_argument("--streams", type=int, default=int(knob("FLEET_STREAMS", 50)))
    parser.add_argument("--form", choices=("pattern", "list"), default=text_knob("FLEET_FORM", "pattern"))
    parser.add_argument("--checkpoint-s", type=float, default=knob("CHECKPOINT_S", 10))
    parser.add_argument("--compact-every-s", type=float, default=knob("COMPACT_EVERY_S", 30))
    parser.add_argument("--keep", action="store_true", help="keep the work folder (build/bench/fleet-work)")
    args = parser.parse_args()
    if args.streams < 2:
        parser.error("FLEET_STREAMS: at least 2 (the baseline is the one stream)")
    _require_package()
    for name in ONE_STREAM_VARIABLES + ("PIPELINE",):
        os.environ.pop(name, None)

    work = OUT / "fleet-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    schemas = work / "schemas"
    write_schemas(schemas)
    goal = goal_s(args.checkpoint_s, args.compact_every_s)
    middle = min(10, args.streams)
    warm_s = min(90.0, args.minutes * 60 / 2)
    phases = [Phase("baseline", 1, args.minutes, "settings")]
    if 1 < middle < args.streams:
        phases.append(Phase(f"streams-{middle}", middle, min(args.minutes, (warm_s + 65) / 60), args.form))
    if args.streams > 1:
        phases.append(Phase(f"streams-{args.streams}", args.streams, args.minutes, args.form))
    print(f"fleet: {args.streams} streams ({args.form}) against one, {args.rate:g} messages/s in all for "
          f"{args.minutes:g} min each; C = {args.checkpoint_s:g} s, P = {args.compact_every_s:g} s, goal p99 ≤ "
          f"2·C + P + 5 = {goal:g} s; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    with run_kafka(work / "kafka") as broker:
        for phase in phases:
            results[phase.name] = run_phase(phase, broker, work, schemas, args, profile_idle=phase is phases[-1])
    base, fleet = results["baseline"], results[phases[-1].name]
    ordered = [results[p.name] for p in phases]

    tm_points = [(r["streams"], r["memory"]["tm_rss_mib"]) for r in ordered]
    heap_points = [(r["streams"], r["memory"]["live_heap_mib"]) for r in ordered]
    comp_points = [(r["streams"], r["memory"]["compactor_rss_mib"]) for r in ordered]
    tm_rss_slope, heap_slope, comp_slope = slope(tm_points), slope(heap_points), slope(comp_points)
    tm_slope = None if tm_rss_slope is None or heap_slope is None else round(tm_rss_slope + heap_slope, 2)
    idle_points = [(r["streams"], (r["idle_pass"] or {}).get("sum_s")) for r in ordered]
    ratio = fleet["committed_per_s"] / base["committed_per_s"] if base["committed_per_s"] else 0.0
    fleet_idle = (fleet["idle_pass"] or {}).get("sum_s")
    checks = {
        "throughput": ratio >= THROUGHPUT_TARGET,
        "freshness": fleet["streams_over_goal"] == 0 and base["streams_over_goal"] == 0,
        "nothing_lost": all(r["lost"] == 0 and r["duplicated"] == 0 and r["unexpected"] == 0 for r in ordered),
        "tm_memory": tm_slope is not None and tm_slope <= TM_TARGET_MIB,
        "compactor_memory": comp_slope is not None and comp_slope <= COMPACTOR_TARGET_MIB,
        "idle_pass": fleet_idle is not None and fleet_idle <= IDLE_TARGET_S,
    }
    result = {
        "streams": args.streams, "form": args.form, "rate": args.rate, "minutes": args.minutes,
        "checkpoint_s": args.checkpoint_s, "compact_every_s": args.compact_every_s, "goal_s": goal,
        "throughput_ratio": round(ratio, 3),
        "slopes_mib_per_stream": {"tm_rss": tm_rss_slope, "tm_live_heap": heap_slope, "tm": tm_slope,
                                  "compactor_rss": comp_slope},
        "idle_pass_s_per_table": slope(idle_points),
        "checks": checks, "phases": results, "seconds": round(time.monotonic() - started),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fleet.json").write_text(json.dumps(result, indent=1) + "\n")

    def cell(value: Any, fmt: str = "{:,.1f}") -> str:
        return "-" if value is None else fmt.format(value)

    names = [f"{r['streams']} stream{'s' if r['streams'] > 1 else ''}" for r in ordered]
    width = 12
    head = f"  {'':<38}" + "".join(f"{n:>{width}}" for n in names)
    print(head + "   target")

    def row(label: str, values: Sequence[Any], target: str = "", fmt: str = "{:,.1f}") -> None:
        print(f"  {label:<38}" + "".join(f"{cell(v, fmt):>{width}}" for v in values) + (f"   {target}" if target else ""))

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    row("messages sent", [r["messages"] for r in ordered], fmt="{:,}")
    row("offered messages/s (window)", [r["offered_per_s"] for r in ordered])
    row("committed messages/s (window)", [r["committed_per_s"] for r in ordered],
        f"≥ {THROUGHPUT_TARGET}× one stream: {ratio:.2f}× {verdict(checks['throughput'])}")
    row("sent → part file p99 s", [r["part_file"]["p99_s"] for r in ordered])
    row("sent → Iceberg p50 s (all messages)", [r["table"]["p50_s"] for r in ordered])
    row("sent → Iceberg p99 s (all messages)", [r["table"]["p99_s"] for r in ordered])
    row("sent → Iceberg p99 s (worst stream)", [r["worst_stream"]["p99_s"] for r in ordered],
        f"every stream ≤ {goal:g} s: {verdict(checks['freshness'])}")
    row("streams over the goal", [r["streams_over_goal"] for r in ordered], fmt="{:,}")
    row("lost / duplicated / never sent", [f"{r['lost']}/{r['duplicated']}/{r['unexpected']}" for r in ordered],
        f"0/0/0: {verdict(checks['nothing_lost'])}", fmt="{}")
    row("TaskManager RSS MiB (heap pre-touched)", [r["memory"]["tm_rss_mib"] for r in ordered],
        f"slope {cell(tm_rss_slope, '{:.2f}')} MiB/stream")
    row("TaskManager live heap MiB (after GC)", [r["memory"]["live_heap_mib"] for r in ordered],
        f"slope {cell(heap_slope, '{:.2f}')} MiB/stream")
    row("TaskManager metaspace MiB", [r["memory"]["metaspace_mib"] for r in ordered])
    print(f"  {'TaskManager: RSS + live heap slope':<38}{'':>{width * len(ordered)}}   "
          f"≤ {TM_TARGET_MIB:g} MiB/stream: {cell(tm_slope, '{:.2f}')} {verdict(checks['tm_memory'])}")
    row("compactor RSS MiB", [r["memory"]["compactor_rss_mib"] for r in ordered],
        f"≤ {COMPACTOR_TARGET_MIB:g} MiB/stream: {cell(comp_slope, '{:.2f}')} {verdict(checks['compactor_memory'])}")
    row("compactor RSS peak MiB", [r["memory"]["compactor_rss_peak_mib"] for r in ordered])
    row("compaction run while busy p50 s", [r["busy"]["run_s_p50"] for r in ordered], fmt="{:.2f}")
    row("compaction run while busy max s", [r["busy"]["run_s_max"] for r in ordered], fmt="{:.2f}")
    row("compactor busy (share of the time)", [r["busy"]["utilisation"] for r in ordered], fmt="{:.2f}")
    row("a stream's period p50 / max s", [f"{cell(r['busy']['period_s_p50'])}/{cell(r['busy']['period_s_max'])}"
                                           for r in ordered], f"P = {args.compact_every_s:g} s", fmt="{}")
    row("idle pass: a run per table, summed s", [(r["idle_pass"] or {}).get("sum_s") for r in ordered],
        f"≤ {IDLE_TARGET_S:g} s at {args.streams}: {verdict(checks['idle_pass'])}", fmt="{:.2f}")
    row("idle run per table p50 s", [(r["idle_pass"] or {}).get("run_s_p50") for r in ordered], fmt="{:.2f}")
    row("checkpoint duration p50 ms", [r["checkpoints"]["duration_ms_p50"] for r in ordered], fmt="{:,.0f}")
    row("part files per checkpoint", [r["part_files_per_checkpoint"] for r in ordered])
    row("cores busy (all processes)", [r["cpu_cores_busy"] for r in ordered], fmt="{:.2f}")
    for proc in base["cpu_s_per_1000"]:
        row(f"CPU s / 1000 msgs: {proc}", [r["cpu_s_per_1000"].get(proc) for r in ordered], fmt="{:.3f}")
    shot = fleet.get("one_shot") or {}
    if shot:
        print(f"  over {args.streams} idle tables: one `lakeflow compact` process {shot['compact_s']} s (exit "
              f"{shot['compact_exit']}); in one process, a first pass {shot.get('cold_in_process_s')} s, the next "
              f"{shot.get('warm_s')} s; as the service does it, runs {shot.get('service_runs_s')} s + one gc.collect() "
              f"{shot.get('service_gc_s')} s ({shot.get('objects')} objects); `lakeflow status --json` "
              f"{shot['status_s']} s ({shot['status_streams']} streams)")
        print(f"  where the warm pass goes (cProfile, {shot.get('profile_total_s')} s in all; cumulative):")
        for entry in shot.get("profile_cumulative", [])[:14]:
            print(f"    {entry['s']:>7.2f} s {entry['ms_per_table']:>7.1f} ms/table {entry['calls']:>7}×  {entry['where']}")
    print(f"  wrote {OUT / 'fleet.json'} ({result['seconds']} s in all)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
