"""``tm-kill-fleet``: a fleet's one ingestion job (``PIPELINE``, docs/pipelines.md) reading 20 topics of a
real Kafka broker on a standalone Flink cluster, its TaskManager SIGKILLed while messages flow to
every topic (and restarted each time).

The pipeline file declares two streams of two JSON Schemas: ``vibration``, four topics
(``fleet.vibration.a``…``d``) into one table, and ``meters``, the topic pattern ``fleet\\.meters\\.(.+)``
whose 16 topics (``fleet.meters.m01``…``m16``) name 16 tables ``meters_{1}``: 17 raw tables in namespace
``fleet`` on the embedded local catalog (``file://``). The packaged job is submitted as ``tm-kill-kafka``
submits it (``flink run -py jobs/sensor_ingest.py`` with ``lakeflow.zip``), ``SOURCE=kafka`` unbounded,
with ``PIPELINE`` in its environment and none of the one stream's variables (``KAFKA_TOPIC``, ``TABLE``…).

One producer JVM (bench/FleetProducer.java, run from source: Kafka's console producer takes one topic per
JVM) creates the topics and sends a batch to every topic each second, a few of them messages that are no
record of their stream (dead letters, planted once each); once the first messages are in committed part
files, the TaskManager is SIGKILLed ``kills`` times while it sends (a new one started each time), and it
sends two batches more after the last kill. Then a
bounded drain: once every table's committed part files hold what was sent to it (or ``DRAIN_S`` passed)
the job is cancelled, and per table every record is counted by its key: nothing lost, nothing twice,
nothing foreign, every visible part file one whole JSON array; its dead letters exactly the planted ones,
each once. Then ``lakeflow maintain``'s leftovers step on every stream's raw table (as ``tm-kill-s3``'s
maintenance pass, in this process): no hidden in-progress file left, the committed files as they were.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Optional

import requests

from lakeflow.ingest.kafka import DEAD_LETTERS
from lakeflow.runtime.flink_cluster import FlinkCluster
from lakeflow.runtime.homes import flink_home
from lakeflow.runtime.kafka import KafkaBroker, java
from lakeflow.secret import is_secret_key
from tests.chaos.common import REPO, Result, progress, tail, timed
from tests.chaos.tm_kill import (HEARTBEATS, JOB, PACKAGE, _hidden, _job_env, _require_package, _running,
                                 _submitted, _wait)
from tests.support.envs import INGEST_PY
from tests.support.fixtures_servers import free_port
from tests.support.kafka_broker import run_kafka
from tests.support.sink_layout import files_under

PRODUCER = REPO / "bench" / "FleetProducer.java"  # one JVM for every topic (make bench-fleet's)
NAMESPACE = "fleet"
PARTITIONS = 2  # per topic, the job's parallelism
DRAIN_S = 180  # at most this long for the committed part files to hold every message after the last send
# The variables of the settings' one stream: with PIPELINE they must be unset (docs/pipelines.md).
ONE_STREAM_VARIABLES = ("TABLE", "TABLE_SCHEMA", "KAFKA_TOPIC", "KEY_FIELDS", "EVENT_TIME_FIELD", "PARTITION_BY",
                        "COMPACT_TABLE")

SCHEMAS = {
    "vibration": {
        "title": "vibration", "type": "object", "required": ["device_id", "seq", "at_ms", "rms"],
        "properties": {"device_id": {"type": "string"}, "seq": {"type": "integer"}, "at_ms": {"type": "integer"},
                       "rms": {"type": "number"}, "axis": {"type": "string"}},
        "x-lakeflow": {"event-time": "at_ms", "key": ["device_id", "seq"]},
    },
    "meter": {
        "title": "meter", "type": "object", "required": ["meter_id", "seq", "read_at", "kwh"],
        "properties": {"meter_id": {"type": "string"}, "seq": {"type": "integer"}, "read_at": {"type": "integer"},
                       "kwh": {"type": "number"}},
    },
}

PIPELINE = """\
# make chaos tm-kill-fleet (tests/chaos/fleet_faults.py)
[defaults]
namespace = "fleet"

[[streams]]
name = "vibration"
topics = ["fleet.vibration.a", "fleet.vibration.b", "fleet.vibration.c", "fleet.vibration.d"]
schema = "schemas/vibration.schema.json"
table = "vibration"

[[streams]]
name = "meters"
topic-pattern = 'fleet\\.meters\\.(.+)'
schema = "schemas/meter.schema.json"
table = "meters_{1}"
key = ["meter_id", "seq"]
event-time = "read_at"
"""

DEVICES = ("a", "b", "c", "d")
METERS = tuple(f"m{n:02d}" for n in range(1, 17))


def table_of(topic: str) -> str:
    return "vibration" if topic.startswith("fleet.vibration.") else f"meters_{topic.rsplit('.', 1)[1]}"


def key_of(table: str, record: dict) -> tuple[str, int]:
    return (record["device_id"] if table == "vibration" else record["meter_id"]), int(record["seq"])


def message(topic: str, seq: int, ms: int) -> str:
    """A record of the topic's stream, keyed (the topic's last name: device or meter, ``seq``)."""
    name = topic.rsplit(".", 1)[1]
    if topic.startswith("fleet.vibration."):
        record: dict = {"device_id": name, "seq": seq, "at_ms": ms, "rms": round(seq / 7, 3), "axis": "z"}
    else:
        record = {"meter_id": name, "seq": seq, "read_at": ms, "kwh": seq * 1.5}
    return json.dumps(record, separators=(",", ":"))


# Messages that are no record of their stream, each sent once in the first batch: (topic, payload, the
# reason its dead letter gives, in part).
BAD = (
    ("fleet.vibration.b", '{"device_id":"b","seq":-1,"at_ms":1764324000000}', "missing field rms"),
    ("fleet.meters.m07", "not json", "not JSON"),
    ("fleet.meters.m12", '{"meter_id":"m12","seq":-2,"read_at":1764324000000,"kwh":"lots"}', "field kwh"),
)


@dataclass
class Sent:
    """What the producer thread sent: each table's keys and dead letters (topic, payload, reason in part)."""

    keys: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    letters: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    batches: int = 0

    @property
    def messages(self) -> int:
        return sum(len(k) for k in self.keys.values()) + sum(len(v) for v in self.letters.values())


class Producer:
    """bench/FleetProducer.java fed ``per_batch`` messages to every topic each ``interval_s`` (and the
    :data:`BAD` ones in the first batch) from a thread, until :meth:`finish` (then two batches more), or
    ``max_batches`` in all."""

    def __init__(self, broker: KafkaBroker, topics: list[str], log: Path, *, per_batch: int, interval_s: float,
                 max_batches: int = 400) -> None:
        self.topics, self.per_batch, self.interval_s, self.max_batches = topics, per_batch, interval_s, max_batches
        self.sent = Sent(keys={table_of(t): set() for t in topics}, letters={table_of(t): [] for t in topics})
        self.log: IO[bytes] = open(log, "wb")  # noqa: SIM115 - open while the producer runs
        self.proc = subprocess.Popen(producer_cmd(broker, "produce", broker.bootstrap), stdin=subprocess.PIPE,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self._finish = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fleet-producer")
        self.error: Optional[Exception] = None
        self._thread.start()

    def _run(self) -> None:
        assert self.proc.stdin is not None
        after_finish = 0
        try:
            while self.sent.batches < self.max_batches and after_finish < 2:
                started = time.monotonic()
                if self._finish.is_set():
                    after_finish += 1
                b, ms = self.sent.batches, int(time.time() * 1000)
                lines = []
                for topic in self.topics:
                    table, name = table_of(topic), topic.rsplit(".", 1)[1]
                    for seq in range(b * self.per_batch, (b + 1) * self.per_batch):
                        lines.append(f"{topic}\t{message(topic, seq, ms)}\n")
                        self.sent.keys[table].add((name, seq))
                    if b == 0:
                        for bad_topic, payload, reason in BAD:
                            if bad_topic == topic:
                                lines.append(f"{topic}\t{payload}\n")
                                self.sent.letters[table].append((topic, payload, reason))
                self.proc.stdin.write("".join(lines).encode())
                self.proc.stdin.flush()
                self.sent.batches += 1
                if after_finish < 2:
                    time.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
        except Exception as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc

    def finish(self, timeout: float = 120) -> int:
        """Send two batches more, then close the producer's input: its exit code (0: every send acknowledged)."""
        self._finish.set()
        self._thread.join(timeout=60)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            return self.proc.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            return self.proc.wait()
        finally:
            self.log.close()


def producer_cmd(broker: KafkaBroker, *args: str) -> list[str]:
    if not PRODUCER.is_file():
        raise RuntimeError(f"{PRODUCER} missing: tm-kill-fleet sends with make bench-fleet's producer")
    return [java(), "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", broker.classpath,
            str(PRODUCER), *args]


def create_topics(broker: KafkaBroker, topics: list[str]) -> None:
    done = subprocess.run(producer_cmd(broker, "create", broker.bootstrap, str(PARTITIONS), *topics),
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"creating {len(topics)} topics failed: {tail(done.stdout + done.stderr, 4)}")


def count_table(table_dir: Path, table: str, keys: set[tuple[str, int]]) -> dict[str, object]:
    """One table's committed part files against the ``keys`` sent to it; its dead letters (topic, payload,
    reason) and their (topic, partition, offset); hidden files (``.…``, in progress) anywhere under it."""
    seen: list[tuple[str, int]] = []
    letters: list[tuple[str, str, str]] = []
    offsets: list[tuple[str, int, int]] = []
    files = partial = hidden = 0
    for rel, path in files_under(table_dir).items():
        name = rel.rsplit("/", 1)[-1]
        if name.startswith("."):
            hidden += 1
            continue
        letter = rel.startswith(f"{DEAD_LETTERS}/") and not _hidden(rel[len(DEAD_LETTERS) + 1:])
        if _hidden(rel) and not letter:
            continue
        try:
            content = json.loads(path.read_bytes())
            if not isinstance(content, list):
                raise ValueError("not an array")
        except ValueError:
            partial += 1
            continue
        if letter:
            letters += [(d["topic"], d.get("payload"), d["reason"]) for d in content]
            offsets += [(d["topic"], d["partition"], d["offset"]) for d in content]
        else:
            files += 1
            seen += [key_of(table, r) for r in content]
    unique = set(seen)
    return {"files": files, "committed": len(seen), "lost": len(keys - unique), "duplicated": len(seen) - len(unique),
            "unexpected": len(unique - keys), "partial": partial, "hidden": hidden, "letters": sorted(letters),
            "letters_duplicated": len(offsets) - len(set(offsets))}


def letters_as_planted(counts: dict[str, object], planted: list[tuple[str, str, str]]) -> bool:
    """A table's dead letters are the messages planted in its topics, each once, each with its reason."""
    letters = counts["letters"]
    assert isinstance(letters, list)
    return (not counts["letters_duplicated"] and len(letters) == len(planted)
            and all(t == pt and p == pp and r in reason
                    for (t, p, reason), (pt, pp, r) in zip(letters, sorted(planted), strict=True)))


def count_fleet(warehouse: Path, sent: Sent) -> dict[str, dict[str, object]]:
    return {table: count_table(warehouse / table, table, keys) for table, keys in sent.keys.items()}


def drained(counts: dict[str, dict[str, object]], sent: Sent) -> bool:
    return all(c["committed"] == len(sent.keys[t]) and c["lost"] == 0 and len(c["letters"]) >= len(sent.letters[t])
               for t, c in counts.items())


def clear_fleet_leftovers(env: dict[str, str]) -> tuple[int, int]:
    """``lakeflow maintain``'s leftovers step (in-progress files of any age) on every stream's raw table,
    the pattern's tables as the compactor finds them in the catalog: (tables, files removed)."""
    from lakeflow.compaction.config import MaintainOptions
    from lakeflow.compaction.maintain import MaintainReport, clear_leftovers
    from lakeflow.compaction.source import open_raw
    from lakeflow.compaction.streams import pipeline_streams
    from lakeflow.settings import load_settings

    settings = load_settings(env)
    streams = pipeline_streams(settings)
    removed = 0
    for stream in streams:
        raw = open_raw(settings, stream)
        report = MaintainReport(table=raw.storage.location)
        clear_leftovers(raw.storage, MaintainOptions(leftover_min_age_s=0), report)
        removed += report.in_progress_removed
    return len(streams), removed


def tm_kill_fleet(workdir: Path, *, kills: int = 3, per_batch: int = 10, interval_s: float = 1.0,
                  seed: Optional[int] = None) -> Result:
    result = Result("tm-kill-fleet", zeros=("lost", "duplicated", "partial", "unexpected", "letters_wrong",
                                            "hidden_after_maintain"))
    rnd = random.Random(seed)
    with timed(result):
        _require_package()
        folder = workdir / "fleet"
        (folder / "schemas").mkdir(parents=True, exist_ok=True)
        for name, schema in SCHEMAS.items():
            (folder / "schemas" / f"{name}.schema.json").write_text(json.dumps(schema, indent=1) + "\n")
        pipeline = folder / "pipeline.toml"
        pipeline.write_text(PIPELINE)
        topics = [f"fleet.vibration.{d}" for d in DEVICES] + [f"fleet.meters.{m}" for m in METERS]
        tables = sorted({table_of(t) for t in topics})
        with run_kafka(workdir / "kafka") as broker:
            create_topics(broker, topics)
            cluster = FlinkCluster(workdir / "cluster", rest_port=free_port(), rpc_port=free_port(), conf=HEARTBEATS,
                                   secret_variable=is_secret_key)
            cluster.start()
            proc = producer = None
            try:
                home = workdir / "home"
                env = _job_env(cluster, home, 1, per_batch, 2000, SOURCE="kafka",
                               KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap, KAFKA_GROUP_ID="chaos-fleet",
                               PIPELINE=str(pipeline))
                for name in ONE_STREAM_VARIABLES + ("PYTHONPATH",):  # lakeflow reaches the cluster as lakeflow.zip
                    env.pop(name, None)
                log = workdir / "flink-run.log"
                with open(log, "w") as out:
                    proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), "run", "-pyclientexec", INGEST_PY,
                                             "-pyexec", INGEST_PY, "-pyfs", str(PACKAGE), "-py", str(JOB),
                                             "--parallelism", str(PARTITIONS)], env=env, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=workdir)
                rest = cluster.rest_url
                job_id = _submitted(rest, proc)
                _wait(rest, job_id, _running, 240, "running")
                progress(result.name, f"job running: {len(topics)} topics → {len(tables)} tables")
                producer = Producer(broker, topics, workdir / "producer.log", per_batch=per_batch,
                                    interval_s=interval_s)
                warehouse = home / "warehouse" / NAMESPACE
                deadline = time.monotonic() + 120  # the first kill once messages reach committed part files
                while (not any(count_table(warehouse / t, t, set())["committed"] for t in tables)
                       and time.monotonic() < deadline):
                    time.sleep(0.5)
                for done in range(1, kills + 1):
                    job = _wait(rest, job_id, _running, 240, "running")
                    result.check(job.get("state") == "RUNNING",
                                 f"the job ended ({job.get('state')}) before kill {done}")
                    time.sleep(rnd.uniform(1.0, 4.0))
                    pid = cluster.kill_taskmanager()
                    cluster.start_taskmanager()
                    progress(result.name, f"kill {done}/{kills}: TaskManager {pid} SIGKILLed, a new one started "
                                          f"({producer.sent.batches} batches sent)")
                    _wait(rest, job_id, lambda j: not _running(j), 60, "noticed the lost TaskManager")
                code = producer.finish()
                sent = producer.sent
                result.check(code == 0 and producer.error is None,
                             f"the producer failed (exit {code}, {producer.error}): "
                             f"{tail((workdir / 'producer.log').read_text(errors='replace'), 3)}")
                progress(result.name, f"{sent.messages} messages sent in {sent.batches} batches; draining")
                deadline = time.monotonic() + DRAIN_S
                while not drained(count_fleet(warehouse, sent), sent) and time.monotonic() < deadline:
                    time.sleep(2)
                requests.patch(f"{rest}/v1/jobs/{job_id}", params={"mode": "cancel"}, timeout=10)
                state = _wait(rest, job_id, lambda j: j.get("state") == "CANCELED", 60, "cancelled").get("state")
                failures = requests.get(f"{rest}/v1/jobs/{job_id}/exceptions", timeout=10).json()
                result.check(state == "CANCELED", f"job state {state}: {tail(log.read_text(), 4)}")
                counts = count_fleet(warehouse, sent)
                wrong_letters = [t for t, c in counts.items() if not letters_as_planted(c, sent.letters[t])]
                result.counts.update(
                    kills=kills, topics=len(topics), tables=len(counts), messages=sent.messages,
                    committed=sum(c["committed"] for c in counts.values()),
                    lost=sum(c["lost"] for c in counts.values()),
                    duplicated=sum(c["duplicated"] for c in counts.values()),
                    unexpected=sum(c["unexpected"] for c in counts.values()),
                    partial=sum(c["partial"] for c in counts.values()),
                    dead_letters=sum(len(c["letters"]) for c in counts.values()), letters_wrong=len(wrong_letters),
                    files=sum(c["files"] for c in counts.values()),
                    failures_seen=len(failures.get("exceptionHistory", {}).get("entries", [])),
                    hidden_leftovers=sum(c["hidden"] for c in counts.values()))
                for table, c in counts.items():
                    if c["lost"] or c["duplicated"] or c["unexpected"] or c["partial"]:
                        result.problems.append(f"{table}: lost {c['lost']} duplicated {c['duplicated']} "
                                               f"unexpected {c['unexpected']} partial {c['partial']}")
                if wrong_letters:
                    result.problems.append(f"dead letters not as planted in {', '.join(wrong_letters)}")
                found, removed = clear_fleet_leftovers(env)
                after = count_fleet(warehouse, sent)
                result.counts.update(leftovers_removed=removed,
                                     hidden_after_maintain=sum(c["hidden"] for c in after.values()))
                result.check(found == len(tables), f"the leftovers step found {found} streams' tables, "
                                                   f"not {len(tables)}")
                result.check(all(after[t]["committed"] == counts[t]["committed"]
                                 and after[t]["files"] == counts[t]["files"]
                                 and after[t]["letters"] == counts[t]["letters"] for t in counts),
                             "maintenance changed the committed part files")
            finally:
                if producer is not None and producer.proc.poll() is None:
                    producer.proc.kill()
                if proc is not None and proc.poll() is None:
                    proc.kill()
                cluster.stop()
    return result
