"""What ``make bench-freshness`` (bench/bench_freshness.py) and ``make soak`` (bench/soak.py) share: the
pipeline as a user runs it — a Kafka topic, the packaged ingestion job (``SOURCE=kafka``) on a standalone
Flink cluster, ``lakeflow compact --every`` as a service — fed at a steady rate, and the probes that
time every message.

- :class:`Messages`: records of the declared schema (``TABLE_SCHEMA``; lakeflow's default is the sensor
  reading): every field an example value, the event time the send time, and the key's first integer
  field the message's number ``n`` (how the probes tell the messages apart).
- :class:`Producer`: Kafka's console producer (one JVM) fed from a thread at a steady rate; message
  ``n``'s send time is when it was handed to the producer.
- :class:`Tracker`: per message, its send time, when it was first seen in a committed part file and
  when its Iceberg commit made it visible (the snapshot's timestamp); duplicates counted per stage.
- :class:`PartProbe`: polls the raw table's committed part files (new ones only) and reads the numbers
  in them. :class:`SnapshotProbe`: reads each new compaction snapshot of the Iceberg table — only the
  data files it added, only the number column — never the whole table.
- :class:`MetricSampler`: scrapes the compactor's ``lakeflow_end_to_end_lag_seconds`` of one table;
  :class:`StatusSampler`: runs ``lakeflow status --json``; both compared with the probes' own figure
  (now minus the newest send time visible in the table) by :func:`agreement`.
- :class:`Compactor`: ``lakeflow -v compact --every …`` in its own process group: its run lines (duration,
  result) and its stages' times (where a run's time goes); it can be SIGKILLed when a line matches.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lakeflow.readings import is_committed_part  # noqa: E402
from lakeflow.runtime.kafka import KafkaBroker, java  # noqa: E402
from lakeflow.schema import TableSchema  # noqa: E402
from lakeflow.schema.examples import example  # noqa: E402

LAKEFLOW = str(Path(sys.executable).parent / "lakeflow")
INTEGER_KINDS = ("long", "int")


class Messages:
    """Message ``n`` of the declared schema, sent at ``sent_ms``, as one JSON line."""

    def __init__(self, schema: TableSchema) -> None:
        kinds = {f["name"]: f["type"]["kind"] for f in schema.contract()["fields"]}
        numbered = [k for k in schema.key if kinds.get(k) in INTEGER_KINDS]
        if not numbered:
            raise SystemExit(f"the schema's key ({', '.join(schema.key) or 'none'}) has no integer field: "
                             "the bench numbers its messages with one")
        self.schema = schema
        self.index = numbered[0]
        self.template = example(schema, 0)

    def line(self, n: int, sent_ms: int) -> str:
        record = dict(self.template)
        record[self.index] = n
        record[self.schema.event_time] = sent_ms if self.schema.derived_time else (
            datetime.fromtimestamp(sent_ms / 1000, timezone.utc).isoformat(timespec="milliseconds"))
        return json.dumps(record, separators=(",", ":"))


class Tracker:
    """Per message number: sent, first in a committed part file, first visible in the table (Unix s)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.sent_s = np.full(capacity, np.nan)
        self.stages = {"part": np.full(capacity, np.nan), "table": np.full(capacity, np.nan)}
        self.duplicated = {"part": 0, "table": 0}
        self.unexpected = 0  # numbers never sent
        self.count = 0  # messages sent
        self.lock = threading.Lock()

    def send(self, first: int, last: int, at_s: float) -> None:
        self.sent_s[first:last] = at_s
        self.count = last

    def seen(self, stage: str, numbers: np.ndarray, at_s: float) -> None:
        """``numbers`` became visible at ``at_s`` in ``stage``; any seen before (or twice here) count as
        duplicated."""
        with self.lock:
            ok = (numbers >= 0) & (numbers < self.count)
            self.unexpected += int((~ok).sum())
            numbers = numbers[ok]
            unique, counts = np.unique(numbers, return_counts=True)
            times = self.stages[stage]
            again = ~np.isnan(times[unique])
            self.duplicated[stage] += int(counts.sum() - len(unique)) + int(again.sum())
            times[unique[~again]] = at_s

    def latencies(self, stage: str) -> np.ndarray:
        """Seconds from send to ``stage`` of every message that reached it."""
        n = self.count
        lat = self.stages[stage][:n] - self.sent_s[:n]
        return lat[~np.isnan(lat)]

    def lost(self, stage: str) -> int:
        return int(np.isnan(self.stages[stage][: self.count]).sum())


def summary(lat: np.ndarray) -> dict[str, float | None]:
    """p50 / p95 / p99 / max (s) of ``lat``."""
    if not len(lat):
        return {"p50_s": None, "p95_s": None, "p99_s": None, "max_s": None}
    p50, p95, p99 = np.percentile(lat, [50, 95, 99])
    return {"p50_s": round(float(p50), 2), "p95_s": round(float(p95), 2), "p99_s": round(float(p99), 2),
            "max_s": round(float(lat.max()), 2)}


class Producer:
    """Kafka's console producer, fed ``rate`` messages a second by a thread (batches every 10 ms, each
    message stamped with the time it is handed over). It retries through a broker restart: idempotent,
    acks=all, a 15-minute delivery timeout."""

    TICK_S = 0.01

    def __init__(self, broker: KafkaBroker, topic: str, messages: Messages, tracker: Tracker, rate: float,
                 log: Path) -> None:
        self.messages, self.tracker, self.rate = messages, tracker, rate
        props = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5", "delivery.timeout.ms": "900000",
                 "max.block.ms": "900000", "request.timeout.ms": "30000"}
        cmd = [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", broker.classpath,
               "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               "--timeout", "5"]
        for key, value in props.items():
            cmd += ["--producer-property", f"{key}={value}"]
        self.log = open(log, "wb")  # noqa: SIM115 - open while the producer runs
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.log, stderr=subprocess.STDOUT)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="producer")

    def start(self) -> Producer:
        self._thread.start()
        return self

    def _run(self) -> None:
        assert self.proc.stdin is not None
        started, n = time.time(), 0
        while not self._stop.is_set() and n < self.tracker.capacity:
            now = time.time()
            due = min(int((now - started) * self.rate), self.tracker.capacity)
            if due > n:
                ms = int(now * 1000)
                block = "".join(self.messages.line(i, ms) + "\n" for i in range(n, due))
                self.tracker.send(n, due, ms / 1000)
                self.proc.stdin.write(block.encode())
                self.proc.stdin.flush()
                n = due
            time.sleep(self.TICK_S)

    def stop(self, timeout: float = 120) -> int:
        """Stop sending, let the producer deliver what it holds and exit; its exit code."""
        self._stop.set()
        self._thread.join()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            self.log.close()


class Poller:
    """Calls ``poll()`` every ``period_s`` in a thread until stopped; an exception is counted and logged
    (a fault the soak injects may fail a poll), the next poll tries again."""

    def __init__(self, period_s: float, name: str) -> None:
        self.period_s, self.name = period_s, name
        self.errors = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def poll(self) -> None:
        raise NotImplementedError

    def errors_seen(self) -> dict[str, Any]:
        return {"errors": self.errors, "last": self.last_error}

    def start(self) -> Poller:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - any failure of one poll: counted, retried
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"[:300]
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


# A raw table's committed part files: their names under the location → a function reading one.
Listing = Callable[[], Iterable[tuple[str, Callable[[], bytes]]]]


def local_parts(root: Path) -> Listing:
    """The committed part files under a local raw table (its hour buckets)."""

    def listing() -> Iterable[tuple[str, Callable[[], bytes]]]:
        if not root.is_dir():
            return []
        out = []
        for bucket in os.scandir(root):
            if bucket.is_dir() and not bucket.name.startswith((".", "_")):
                for f in os.scandir(bucket.path):
                    rel = f"{bucket.name}/{f.name}"
                    if is_committed_part(rel):
                        out.append((rel, Path(f.path).read_bytes))
        return out

    return listing


def s3_parts(s3: Any, location: str) -> Listing:
    """The committed part files under an ``s3://`` raw table (``s3``: a boto3 client allowed to read it)."""
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/") + "/"

    def listing() -> Iterable[tuple[str, Callable[[], bytes]]]:
        out = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                rel, key = obj["Key"][len(prefix):], obj["Key"]
                if is_committed_part(rel):
                    out.append((rel, lambda key=key: s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
        return out

    return listing


class PartProbe(Poller):
    """New committed part files → the numbers in them, seen now (stage ``part``)."""

    def __init__(self, listing: Listing, messages: Messages, tracker: Tracker, period_s: float = 0.5) -> None:
        super().__init__(period_s, "part-probe")
        self.listing, self.index, self.tracker = listing, messages.index, tracker
        self.files: set[str] = set()

    def poll(self) -> None:
        for rel, read in self.listing():
            if rel in self.files:
                continue
            at = time.time()
            records = json.loads(read())
            self.files.add(rel)
            self.tracker.seen("part", np.fromiter((r[self.index] for r in records), np.int64, len(records)), at)


@dataclass
class Commit:
    """A compaction snapshot as the probe read it."""

    at_s: float  # the snapshot's timestamp: when its rows became visible
    newest_sent_s: float  # the newest send time among them (nan: none)


class SnapshotProbe(Poller):
    """Each new ``append`` snapshot of the Iceberg table (a compaction's commit; maintenance's rewrites
    are ``overwrite`` and add no row) → the numbers in the data files it added (stage ``table``, at the
    snapshot's timestamp)."""

    def __init__(self, load_table: Callable[[], Any], messages: Messages, tracker: Tracker,
                 period_s: float = 1.0) -> None:
        super().__init__(period_s, "snapshot-probe")
        self.load_table, self.index, self.tracker = load_table, messages.index, tracker
        self.done: set[int] = set()
        self.commits: list[Commit] = []
        self.data_files = 0  # the current snapshot's, at the last poll

    def poll(self) -> None:
        import pyarrow.parquet as pq
        from pyiceberg.manifest import ManifestEntryStatus
        from pyiceberg.table.snapshots import Operation

        table = self.load_table()
        if table is None:
            return
        current = table.current_snapshot()
        if current is not None and current.summary is not None:
            self.data_files = int(current.summary.get("total-data-files", 0))
        for snap in sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms):
            if snap.snapshot_id in self.done:
                continue
            if snap.summary is None or snap.summary.operation != Operation.APPEND:
                self.done.add(snap.snapshot_id)
                continue
            numbers = []
            for manifest in snap.manifests(table.io):
                if manifest.added_snapshot_id != snap.snapshot_id or not manifest.added_files_count:
                    continue
                for entry in manifest.fetch_manifest_entry(table.io):
                    if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snap.snapshot_id:
                        with table.io.new_input(entry.data_file.file_path).open() as f:
                            column = pq.read_table(f, columns=[self.index]).column(0)
                        numbers.append(column.to_numpy().astype(np.int64))
            got = np.concatenate(numbers) if numbers else np.empty(0, np.int64)
            at = snap.timestamp_ms / 1000
            self.tracker.seen("table", got, at)
            sent = self.tracker.sent_s[got[(got >= 0) & (got < self.tracker.count)]]
            self.commits.append(Commit(at, float(np.nanmax(sent)) if len(sent) else float("nan")))
            self.done.add(snap.snapshot_id)

    def staleness(self, t: float) -> float:
        """The probe's own end-to-end lag at ``t``: ``t`` minus the newest send time visible then."""
        newest = [c.newest_sent_s for c in self.commits if c.at_s <= t and not np.isnan(c.newest_sent_s)]
        return t - max(newest) if newest else float("nan")


class MetricSampler(Poller):
    """``lakeflow_end_to_end_lag_seconds`` of ``table`` (``namespace.table``, the series' label) scraped
    from the compactor's /metrics: (t before, t after, value)."""

    NAME = "lakeflow_end_to_end_lag_seconds"

    def __init__(self, port: int, table: str, period_s: float = 2.0) -> None:
        super().__init__(period_s, "metric-sampler")
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.series = re.compile(rf'^{self.NAME}\{{table="{re.escape(table)}"\}} (\S+)$', re.M)
        self.samples: list[tuple[float, float, float]] = []

    def poll(self) -> None:
        t0 = time.time()
        text = requests.get(self.url, timeout=5).text
        t1 = time.time()
        found = self.series.search(text)
        if found and found.group(1) != "NaN":
            self.samples.append((t0, t1, float(found.group(1))))


class StatusSampler(Poller):
    """``lakeflow status --json``'s ``end_to_end_lag_s``: (t before, t after, value)."""

    def __init__(self, env: Mapping[str, str], period_s: float = 60.0) -> None:
        super().__init__(period_s, "status-sampler")
        self.env = dict(env)
        self.samples: list[tuple[float, float, float]] = []

    def poll(self) -> None:
        t0 = time.time()
        done = subprocess.run([LAKEFLOW, "status", "--json"], env=self.env, capture_output=True, text=True,
                              timeout=120)
        t1 = time.time()
        lag = json.loads(done.stdout).get("end_to_end_lag_s") if done.returncode == 0 else None
        if lag is not None:
            self.samples.append((t0, t1, float(lag)))


def agreement(samples: list[tuple[float, float, float]], probe: SnapshotProbe, tolerance_s: float) -> dict[str, Any]:
    """How far each sample (taken between t0 and t1) is from the probe's own figure then: the smaller of
    its distances at t0 and t1 (a commit may land in between); how many are farther than ``tolerance_s``,
    and the worst. Samples before the probe's first commit are left out."""
    diffs: list[tuple[float, float, float, float]] = []  # (|diff|, when, the sample, the probe's)
    for t0, t1, value in samples:
        own = [x for x in (probe.staleness(t) for t in (t0, t1)) if not np.isnan(x)]
        if own:
            closest = min(own, key=lambda x: abs(value - x))
            diffs.append((abs(value - closest), t0, value, closest))
    if not diffs:
        return {"samples": 0, "max_diff_s": None, "mean_diff_s": None, "tolerance_s": tolerance_s,
                "beyond_tolerance": 0}
    worst = max(diffs)
    return {"samples": len(diffs), "max_diff_s": round(worst[0], 3),
            "mean_diff_s": round(float(np.mean([d[0] for d in diffs])), 3), "tolerance_s": tolerance_s,
            "beyond_tolerance": sum(d[0] > tolerance_s for d in diffs),
            "worst": {"at": datetime.fromtimestamp(worst[1], timezone.utc).isoformat(timespec="seconds"),
                      "sample_s": round(worst[2], 2), "probe_s": round(worst[3], 2)}}


RUN_LINE = re.compile(r" files (\d+) rows (\d+) (\d+\.\d+)s (ok|error|busy|exit \d+)")
RUN_STREAM = re.compile(r" stream (\S+) run ")  # a pipeline's runs name their stream
STAGE_DONE = re.compile(r"\[([\w-]+)\] done in (\d+\.\d+) s")


@dataclass
class Run:
    """A run line of the service: when it ended, files and rows, duration, result."""

    at_s: float
    files: int
    rows: int
    duration_s: float
    result: str
    stream: str | None = None  # the stream it compacted (a pipeline file's); None: the settings' one


@dataclass
class Compactor:
    """``lakeflow -v compact --every EVERY_S --metrics-port PORT [ARGS]`` in its own process group; its
    output into ``log_dir``."""

    env: dict[str, str]
    every_s: float
    port: int
    log_dir: Path
    args: tuple[str, ...] = ()
    runs: list[Run] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    kills: int = 0
    starts: int = 0
    proc: subprocess.Popen | None = None
    _trigger: re.Pattern | None = None
    _killed: threading.Event = field(default_factory=threading.Event)

    def start(self, **extra_env: str) -> None:
        self.starts += 1
        cmd = [LAKEFLOW, "-v", "compact", "--every", f"{self.every_s:g}s", "--metrics-port", str(self.port),
               *self.args]
        self.proc = subprocess.Popen(cmd, env={**self.env, **extra_env}, cwd=self.log_dir, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        log = open(self.log_dir / f"compactor-{self.starts}.log", "w")  # noqa: SIM115 - open while it runs
        for stream, parse in ((self.proc.stdout, self._run_line), (self.proc.stderr, self._stage_line)):
            threading.Thread(target=self._read, args=(stream, parse, log), daemon=True).start()

    def _read(self, stream, parse: Callable[[str], None], log) -> None:
        for line in stream:
            log.write(line)
            log.flush()
            parse(line)

    def _run_line(self, line: str) -> None:
        found = RUN_LINE.search(line)
        if found:
            stream = RUN_STREAM.search(line)
            self.runs.append(Run(time.time(), int(found[1]), int(found[2]), float(found[3]), found[4],
                                 stream[1] if stream else None))

    def _stage_line(self, line: str) -> None:
        found = STAGE_DONE.search(line)
        if found:
            self.stages[found[1]].append(float(found[2]))
        trigger = self._trigger
        if trigger is not None and trigger.search(line) and self.proc is not None:
            self._trigger = None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.kills += 1
            self._killed.set()

    def kill_when(self, pattern: str, timeout: float) -> bool:
        """SIGKILL the service (its whole process group) as soon as a line of its log matches ``pattern``;
        True once it was, False if no such line came within ``timeout`` s."""
        self._killed.clear()
        self._trigger = re.compile(pattern)
        killed = self._killed.wait(timeout)
        self._trigger = None
        if killed and self.proc is not None:
            self.proc.wait(timeout=60)
        return killed

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def stop(self, timeout: float = 300) -> int | None:
        """SIGTERM: the run in progress finishes, then the service exits; its exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()

    def stage_means(self) -> dict[str, float]:
        """Mean seconds per run of each stage that took time."""
        return {name: round(sum(times) / len(times), 2) for name, times in sorted(self.stages.items())}


def rss_mib(pid: int | None) -> float:
    """A process's resident memory (MiB; nan when gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, TypeError):
        pass
    return float("nan")


def open_fds(pid: int | None) -> float:
    """A process's open file descriptors (nan when gone)."""
    try:
        return float(len(os.listdir(f"/proc/{pid}/fd")))
    except (OSError, TypeError):
        return float("nan")


def checkpoints_completed(rest: str, job_id: str) -> int:
    return int(requests.get(f"{rest}/v1/jobs/{job_id}/checkpoints", timeout=10).json()["counts"]["completed"])


def wait_for(condition: Callable[[], bool], timeout: float, what: str, step: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(step)


def latency_plot(path: Path, title: str, tracker: Tracker, probe: SnapshotProbe, goal_s: float,
                 metric: list[tuple[float, float, float]], marks: Iterable[tuple[float, str]] = ()) -> None:
    """Per-message latency over the run (a sample of at most 20,000 messages per stage), the goal, and the
    end-to-end lag metric beside the probe's own figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = tracker.count
    t0 = float(np.nanmin(tracker.sent_s[:n])) if n else 0.0
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    rng = np.random.default_rng(0)
    for stage, colour, label in (("part", "tab:blue", "sent → committed part file"),
                                 ("table", "tab:orange", "sent → visible in Iceberg")):
        seen = np.flatnonzero(~np.isnan(tracker.stages[stage][:n]))
        pick = rng.choice(seen, min(len(seen), 20_000), replace=False) if len(seen) else seen
        top.scatter((tracker.sent_s[pick] - t0) / 60, tracker.stages[stage][pick] - tracker.sent_s[pick], s=1,
                    c=colour, label=label, alpha=0.4)
    top.axhline(goal_s, color="red", linestyle="--", label=f"goal: p99 ≤ {goal_s:g} s")
    top.set_ylabel("latency per message (s)")
    top.legend(loc="upper right", markerscale=8)
    top.set_title(title)
    if metric:
        times = np.array([(a + b) / 2 for a, b, _ in metric])
        bottom.plot((times - t0) / 60, [v for _, _, v in metric], label="lakeflow_end_to_end_lag_seconds",
                    color="tab:green")
        bottom.plot((times - t0) / 60, [probe.staleness(t) for t in times], label="probe: now − newest visible send",
                    color="black", linestyle=":")
    for at, what in marks:
        for axis in (top, bottom):
            axis.axvline((at - t0) / 60, color="grey", alpha=0.3)
        bottom.text((at - t0) / 60, 0.02, what, transform=bottom.get_xaxis_transform(), rotation=90, fontsize=7, va="bottom")
    bottom.set_ylabel("end-to-end lag (s)")
    bottom.set_xlabel("minutes since the first message")
    bottom.legend(loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
