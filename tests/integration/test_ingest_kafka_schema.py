"""SOURCE=kafka on declared schemas (#32), with a real Kafka 4.1.1 broker (``kafka_broker``) and Flink:
a user's schema file (nested struct, arrays, a map, decimals, an ISO-8601 event time, its own key) whose
messages land in the part files whole and whose bad messages become dead letters naming the field; the
issue's topic — sensor readings without ``run_id`` — ingested whole with no setting beyond SOURCE and
KAFKA_*; and a schema change while the job runs: stopped with a savepoint on a standalone cluster,
restarted from it with a new schema file (a new optional field, int → long), no message lost or read twice."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from lakeflow.ingest.kafka import DEAD_LETTERS
from lakeflow.ingest.sensors import Generator
from lakeflow.runtime.homes import flink_home
from lakeflow.schema import load_schema
from tests.chaos.tm_kill import ENDED, _running, _wait
from tests.integration.test_record_contract import exact
from tests.support.envs import INGEST_PY
from tests.support.kafka_broker import KafkaBroker
from tests.support.sink_layout import files_under
from tests.unit.test_ingest_generator import VIBRATION

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "sensor_ingest.py"
JAR, PACKAGE = ROOT / "build" / "lakeflow-flink.jar", ROOT / "build" / "lakeflow.zip"
T0 = 1_764_324_000_000

pytestmark = pytest.mark.slow


def hermetic(home: Path, **settings: str) -> dict[str, str]:
    """The caller's environment without lakeflow's Lakekeeper settings, a home of its own, ``settings``."""
    env = {k: v for k, v in os.environ.items() if k not in ("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "FLINK_LOG_DIR")}
    return {**env, "LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": os.devnull, **settings}


def kafka_settings(broker: KafkaBroker, topic: str, **more: str) -> dict[str, str]:
    return {"SOURCE": "kafka", "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap, "KAFKA_TOPIC": topic, **more}


def committed(table: Path) -> tuple[list[str], list[dict]]:
    """The committed part files' lines (each a record's text) and the dead letters under ``table``."""
    lines: list[str] = []
    letters: list[dict] = []
    for rel, path in files_under(table).items():
        if rel.rsplit("/", 1)[-1].startswith("."):
            continue
        text = path.read_text()
        assert isinstance(json.loads(text), list), rel
        rows = [line.rstrip(",\n").strip("[]") for line in text.splitlines() if line.strip("[]\n")]
        if rel.startswith(f"{DEAD_LETTERS}/"):
            letters += [json.loads(row) for row in rows]
        else:
            lines += rows
    return lines, letters


def schema_file(folder: Path, name: str, **properties: Any) -> Path:
    path = folder / f"{name}.schema.json"
    path.write_text(json.dumps({**VIBRATION, "title": name, "properties": {**VIBRATION["properties"], **properties}}))
    return path


def messages(schema: Path, seqs: range, **extra: Any) -> list[str]:
    """Records of ``schema`` as the synthetic source makes them (``counter`` is ``seq``), compact JSON."""
    generator, rng = Generator(load_schema(schema), 5, "producer"), random.Random(32)
    return [json.dumps({**generator.record(seq, T0 + seq, rng), **extra}, separators=(",", ":"), ensure_ascii=False)
            for seq in seqs]


def test_a_user_schemas_messages_land_whole_and_bad_ones_name_the_field(kafka_broker: KafkaBroker,
                                                                          tmp_path: Path) -> None:
    schema = schema_file(tmp_path, "vibration")
    topic = f"vibration-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    good = messages(schema, range(100)) + messages(schema, range(100, 110), firmware="2.1", extra={"fft": [1, 2]})
    exact_numbers = good[0][:-1] + ',"battery":87.50,"big":123456789012345678901234567890,"ratio":1.0E-7}'
    good[0] = exact_numbers.replace(f'"battery":{json.loads(good[0])["battery"]},', "", 1)
    record = json.loads(messages(schema, range(1000, 1001))[0])
    bad = {
        json.dumps({k: v for k, v in record.items() if k != "gps"}): "missing field gps",
        json.dumps({**record, "device_id": None}): "missing field device_id",
        json.dumps({**record, "gps": {"lat": "52.1", "lon": 13.4}}): "field gps.lat: expected a number, got a string",
        json.dumps({**record, "accel": [0.1, 0.2, 0.3]}): "field accel: more than 2 items",
        json.dumps({**record, "samples": [record["samples"][0], {"at": "2026-11-28T10:00:00"}]}):
            "field samples[1].at: expected a date-time with offset (RFC 3339), got a string",
        json.dumps({**record, "tags": {"site": "north"}}): "field tags.site: longer than 4 characters",
        json.dumps({**record, "battery": 99.25}): "field battery: more than 1 decimal places for decimal(4,1)",
        json.dumps({**record, "measured_at": "2026-02-30T00:00:00Z"}):
            "field measured_at: 2026-02-30T00:00:00Z is no instant of the calendar",
        json.dumps({**record, "counter": 2**31}): "field counter: integer out of range for an int",
        json.dumps({**record, "counter": "7"}): "field counter: expected an integer, got a string",
    }
    kafka_broker.produce(topic, good[:50] + list(bad) + good[50:])
    env = hermetic(tmp_path, **kafka_settings(kafka_broker, topic, KAFKA_STOP_AT="latest"), TABLE_SCHEMA=str(schema),
                   BATCH_INTERVAL_MS="500")
    proc = subprocess.run([INGEST_PY, str(JOB), "--parallelism", "2"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]

    lines, letters = committed(tmp_path / "warehouse" / "iot" / "sensor-readings")
    assert sorted(lines, key=lambda m: json.loads(m)["counter"]) == good  # whole, each once, its text as sent
    assert {letter["payload"]: letter["reason"] for letter in letters} == bad
    assert len(letters) == len(bad) and {letter["topic"] for letter in letters} == {topic}
    assert re.search(rf"Wrote \d+ files, {len(good)} readings", proc.stdout), proc.stdout
    assert f"Dead letters: {len(bad)} messages that are no readings" in proc.stdout


def test_the_issues_topic_of_readings_without_run_id_is_ingested_whole(kafka_broker: KafkaBroker,
                                                                        tmp_path: Path) -> None:
    """Issue #32's topic, read with no setting beyond SOURCE=kafka and KAFKA_*: 1,000 of 1,000."""
    topic = f"sensors-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    rng = random.Random(1000)
    sent = [json.dumps({"sensor_id": f"sensor-{seq % 10 + 1:03d}", "seq": seq, "timestamp_ms": T0 + seq * 1000,
                        "temperature": round(rng.uniform(15, 25), 1), "humidity": 40.0,
                        "pressure": round(rng.uniform(990, 1020), 1), "location": f"room-{seq % 4}"},
                       separators=(",", ":")) for seq in range(1000)]
    kafka_broker.produce(topic, sent)
    env = hermetic(tmp_path, **kafka_settings(kafka_broker, topic, KAFKA_STOP_AT="latest"))
    proc = subprocess.run([INGEST_PY, str(JOB)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines, letters = committed(tmp_path / "warehouse" / "iot" / "sensor-readings")
    assert sorted(lines, key=lambda m: json.loads(m)["seq"]) == sent and letters == []  # "humidity":40.0 kept
    assert "Wrote " in proc.stdout and ", 1000 readings" in proc.stdout
    assert "Dead letters: 0 messages" in proc.stdout


class StandaloneRun:
    """``flink run`` of the job (SOURCE=kafka, unbounded) on a standalone cluster, stopped with a savepoint."""

    def __init__(self, cluster, env: dict[str, str], log: Path, savepoint: str | None = None) -> None:
        py = INGEST_PY
        restore = ["-s", savepoint] if savepoint else []
        self.cluster, self.log = cluster, log
        ours = {k: v for k, v in cluster.env().items() if k.startswith("FLINK_") or k == "PATH"}
        with open(log, "w") as out:
            self.proc = subprocess.Popen([str(flink_home() / "bin" / "flink"), "run", *restore, "-pyclientexec", py,
                                          "-pyexec", py, "-pyfs", str(PACKAGE), "-py", str(JOB), "--parallelism", "2"],
                                         env={**env, **ours}, stdout=out, stderr=subprocess.STDOUT)
        self.job_id = self._submitted()
        _wait(cluster.rest_url, self.job_id, _running, 240, "running")

    def _submitted(self, timeout: float = 180) -> str:
        """The id of the job this run submitted: the cluster's one job not ended."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            jobs = requests.get(f"{self.cluster.rest_url}/v1/jobs/overview", timeout=5).json()["jobs"]
            live = [j["jid"] for j in jobs if j["state"] not in ENDED]
            if live:
                return live[0]
            time.sleep(0.5)
        raise AssertionError(f"no job submitted: {self.log.read_text()[-3000:]}")

    def stop(self, savepoints: Path) -> str:
        """``flink stop --savepointPath``: the savepoint's path, once the client has ended cleanly."""
        stop = self.cluster.flink(["stop", "--savepointPath", savepoints.as_uri(), self.job_id], timeout=300)
        assert stop.returncode == 0, stop.stdout[-2000:] + stop.stderr[-2000:]
        path = re.search(r"Savepoint completed\. Path: (\S+)", stop.stdout)
        assert path, stop.stdout
        assert self.proc.wait(timeout=120) == 0, self.log.read_text()[-4000:]
        return path[1]


def wait_for(table: Path, count: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while sum(map(len, committed(table))) < count:
        assert time.monotonic() < deadline, f"{sum(map(len, committed(table)))} of {count} committed"
        time.sleep(0.5)


def test_a_schema_change_across_a_savepoint_loses_and_repeats_no_message(
        kafka_broker: KafkaBroker, make_flink_cluster, tmp_path: Path) -> None:
    subprocess.run(["make", "-s", str(PACKAGE.relative_to(ROOT))], cwd=ROOT, check=True, capture_output=True, timeout=600)
    cluster = make_flink_cluster()
    v1 = schema_file(tmp_path, "vibration-v1")
    v2 = schema_file(tmp_path, "vibration-v2", firmware={"type": "string"},
                     counter={"type": "integer", "x-iceberg-type": "long"})
    topic = f"evolving-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    table, savepoints = tmp_path / "warehouse" / "iot" / "sensor-readings", tmp_path / "savepoints"
    env = hermetic(tmp_path, **kafka_settings(kafka_broker, topic, KAFKA_STARTING_OFFSETS="earliest"),
                   BATCH_INTERVAL_MS="500", KAFKA_MAX_MESSAGE_BYTES="4096", LAKEFLOW_JAR=str(JAR))

    # v1: 200 records, and one whose counter needs 64 bits (a dead letter under v1)
    early = messages(v1, range(200))
    wide = messages(v2, range(2**31 + 7, 2**31 + 8), firmware="3.0")
    kafka_broker.produce(topic, early[:100] + wide + early[100:])
    first = StandaloneRun(cluster, {**env, "TABLE_SCHEMA": str(v1)}, tmp_path / "run-1.log")
    wait_for(table, len(early) + 1)
    more_v1 = messages(v1, range(200, 250))
    kafka_broker.produce(topic, more_v1)  # produced while the job runs: read before or after the stop
    time.sleep(1)
    savepoint = first.stop(savepoints)

    # while it is down, the devices' firmware changes: a new field, counters beyond 32 bits
    late = messages(v2, range(2**31 + 100, 2**31 + 300), firmware="3.0")
    kafka_broker.produce(topic, late)
    second = StandaloneRun(cluster, {**env, "TABLE_SCHEMA": str(v2)}, tmp_path / "run-2.log", savepoint=savepoint)
    restored = requests.get(f"{cluster.rest_url}/v1/jobs/{second.job_id}/checkpoints", timeout=10).json()
    assert restored["latest"]["restored"]["external_path"].rstrip("/") == savepoint.rstrip("/")
    wait_for(table, len(early) + len(more_v1) + 1 + len(late))
    second.stop(savepoints)

    lines, letters = committed(table)
    by_counter = sorted((json.loads(line)["counter"], line) for line in lines)
    assert [counter for counter, _ in by_counter] == sorted(json.loads(m)["counter"] for m in early + more_v1 + late)
    assert [exact(line) for _, line in by_counter] == [exact(m) for m in sorted(early + more_v1 + late,
                                                                               key=lambda m: json.loads(m)["counter"])]
    assert [(letter["payload"], letter["reason"]) for letter in letters] == [
        (wide[0], "field counter: integer out of range for an int")]  # v1's verdict, not read again by v2
    assert all(json.loads(line)["firmware"] == "3.0" for line in lines if json.loads(line)["counter"] >= 2**31)
