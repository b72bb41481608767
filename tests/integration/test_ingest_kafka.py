"""SOURCE=kafka (#26): the settings, and the ingestion job reading a real Kafka 4.1.1 broker
(``kafka_broker`` session fixture) with Flink's own Kafka connector on a local MiniCluster.

The slow flow runs the bounded job (KAFKA_STOP_AT=latest) twice on one topic of two partitions
holding readings and bad messages: the first run writes each reading once to the raw table and
each bad message to the dead letters with its reason; the second run, started after more
messages, resumes from the offsets the first committed (only the new messages); the compaction
then holds every good reading once.

A TaskManager killed mid-stream: tm-kill-kafka of tests/chaos (make chaos), smaller, on a standalone cluster.

The unit tests (no process): tests/unit/test_ingest_kafka.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakeflow.ingest.kafka import DEAD_LETTERS, dead_letter_location
from tests.support.envs import INGEST_PY
from tests.support.kafka_broker import KafkaBroker
from tests.support.lineage_page import page_nodes
from tests.support.sink_layout import assert_sink_path, files_under

ROOT = Path(__file__).resolve().parents[2]


JOB = ROOT / "jobs" / "sensor_ingest.py"


def reading(run_id: str, seq: int) -> dict:
    return {"sensor_id": f"sensor-{seq % 3 + 1:03d}", "run_id": run_id, "seq": seq,
            "timestamp_ms": 1_764_000_000_000 + seq, "temperature": 20.5 + seq / 1000, "humidity": 55.25,
            "pressure": 1013.0, "location": "cold-store"}


def bad_messages(run_id: str) -> dict[str, str]:
    """Message → the start of the reason the dead letter must give."""
    good = reading(run_id, 10**6)
    missing = {k: v for k, v in good.items() if k != "pressure"}
    return {
        "this is not json": "not JSON",
        '{"sensor_id": "sensor-001", "seq": 1': "not JSON",
        "[1, 2, 3]": "not a JSON object: an array",
        json.dumps(missing): "missing field pressure",
        json.dumps({**good, "temperature": "warm"}): "field temperature: expected a number, got a string",
        json.dumps({**good, "seq": 1.5}): "field seq: expected an integer, got a number",
        json.dumps({**good, "sensor_id": 7}): "field sensor_id: expected a string, got an integer",
        json.dumps({**good, "location": "x" * 600}): "too large",
    }


@dataclass(frozen=True)
class JobRun:
    stdout: str
    stderr: str
    started: float


@dataclass
class KafkaIngest:
    broker: KafkaBroker
    home: Path
    topic: str
    run_id: str

    @property
    def table_dir(self) -> Path:
        return self.home / "warehouse" / "iot" / "sensor-readings"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("LAKEKEEPER", "WAREHOUSE_ID", "TOKEN", "FLINK_LOG_DIR")}
        return {**env, "LAKEFLOW_HOME": str(self.home), "LAKEFLOW_ENV_FILE": os.devnull, "BATCH_INTERVAL_MS": "500",
                "SOURCE": "kafka", "KAFKA_BOOTSTRAP_SERVERS": self.broker.bootstrap, "KAFKA_TOPIC": self.topic,
                "KAFKA_GROUP_ID": f"ingest-{self.topic}", "KAFKA_STOP_AT": "latest",
                "KAFKA_MAX_MESSAGE_BYTES": "512"}

    def run(self) -> JobRun:
        started = time.time()
        proc = subprocess.run([INGEST_PY, str(JOB), "--parallelism", "2"], env=self.env(), cwd=self.home,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        return JobRun(proc.stdout, proc.stderr, started)

    def committed(self, root: Path, started: float) -> list[dict]:
        """Every JSON object in the committed part files under ``root`` (each file one JSON array)."""
        rows: list[dict] = []
        for rel, path in files_under(root).items():
            if rel.rsplit("/", 1)[-1].startswith(".") or rel.startswith(f"{DEAD_LETTERS}/"):
                continue
            assert_sink_path(rel, started)
            content = json.loads(path.read_text())
            assert isinstance(content, list) and content, rel
            rows += content
        return rows


@pytest.fixture(scope="module")
def kafka_ingest(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> KafkaIngest:
    topic = f"readings-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    home = tmp_path_factory.mktemp("kafka-ingest")
    return KafkaIngest(kafka_broker, home, topic, str(uuid.uuid4()))


@pytest.fixture(scope="module")
def first_run(kafka_ingest: KafkaIngest) -> tuple[JobRun, list[dict], dict[str, str]]:
    """200 readings with the bad messages among them, then one bounded run."""
    good = [reading(kafka_ingest.run_id, seq) for seq in range(200)]
    bad = bad_messages(kafka_ingest.run_id)
    messages = [json.dumps(r) for r in good[:100]] + list(bad) + [json.dumps(r) for r in good[100:]]
    kafka_ingest.broker.produce(kafka_ingest.topic, messages)
    return kafka_ingest.run(), good, bad


@pytest.mark.slow
def test_readings_from_kafka_arrive_once_each_bad_ones_as_dead_letters(kafka_ingest: KafkaIngest, first_run) -> None:
    run, good, bad = first_run
    rows = kafka_ingest.committed(kafka_ingest.table_dir, run.started)
    assert sorted(rows, key=lambda r: r["seq"]) == good  # each once, exactly as sent
    assert all(list(r) == list(good[r["seq"]]) for r in rows)  # whole, in the order sent
    assert re.search(r"Wrote \d+ files, 200 readings", run.stdout), run.stdout

    letters = kafka_ingest.committed(kafka_ingest.table_dir / DEAD_LETTERS, run.started)
    assert len(letters) == len(bad)
    by_payload = {letter["payload"]: letter for letter in letters}
    assert set(by_payload) == set(bad)
    offsets = set()
    for payload, reason in bad.items():
        letter = by_payload[payload]
        assert letter["reason"].startswith(reason), (letter["reason"], reason)
        assert letter["topic"] == kafka_ingest.topic and letter["partition"] in (0, 1)
        offsets.add((letter["partition"], letter["offset"]))
    assert len(offsets) == len(bad)
    assert f"Dead letters: {len(bad)} messages that are no readings → {dead_letter_location(kafka_ingest.table_dir.as_uri())}" in run.stdout


@pytest.mark.slow
def test_a_new_run_resumes_from_the_committed_offsets_then_compaction_holds_each_reading_once(
    kafka_ingest: KafkaIngest, first_run
) -> None:
    _, good, bad = first_run
    more = [reading(kafka_ingest.run_id, seq) for seq in range(200, 260)]
    kafka_ingest.broker.produce(kafka_ingest.topic, [json.dumps(r) for r in more] + ["{oops"])
    second = kafka_ingest.run()
    assert re.search(r"Wrote \d+ files, 60 readings", second.stdout), second.stdout  # only the new ones
    assert "Dead letters: 1 messages that are no readings" in second.stdout

    rows = kafka_ingest.committed(kafka_ingest.table_dir, 0)
    assert sorted(rows, key=lambda r: r["seq"]) == good + more
    assert len(kafka_ingest.committed(kafka_ingest.table_dir / DEAD_LETTERS, 0)) == len(bad) + 1

    proc = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact", "--engine", "arrow"],
                          env=kafka_ingest.env(), cwd=kafka_ingest.home, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("lakeflow", uri=f"sqlite:///{kafka_ingest.home / 'iceberg.db'}",
                         warehouse=(kafka_ingest.home / "iceberg").as_uri())
    table = catalog.load_table(("iot", "sensor-readings-compacted")).scan().to_arrow()
    assert sorted(table.column("seq").to_pylist()) == list(range(260))


@pytest.mark.slow
def test_readings_from_kafka_to_s3_with_iam(kafka_broker: KafkaBroker, make_lakekeeper, moto_strict,
                                           tmp_path: Path) -> None:
    """The same on S3: moto with IAM enforced, credentials vended by the Lakekeeper stand-in and
    scoped to the table's prefix — the dead letters, inside it, are written with them too."""
    from tests.integration.test_ingest_s3 import assert_no_secret, job_env, table_location

    lakekeeper = make_lakekeeper(s3=moto_strict)
    topic, run_id = f"s3-readings-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    kafka_broker.create_topic(topic, partitions=2)
    good = [reading(run_id, seq) for seq in range(150)]
    kafka_broker.produce(topic, [json.dumps(r) for r in good] + ["not json", json.dumps({"seq": 1})])
    env = job_env(lakekeeper, tmp_path, SOURCE="kafka", KAFKA_BOOTSTRAP_SERVERS=kafka_broker.bootstrap,
                  KAFKA_TOPIC=topic, KAFKA_STOP_AT="latest")
    started = time.time()
    proc = subprocess.run([INGEST_PY, str(JOB), "--parallelism", "2"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]

    location = table_location(lakekeeper)
    s3 = lakekeeper.warehouse.s3.client("s3")
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    objects: dict[str, list] = {}
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", []):
        rel = obj["Key"].removeprefix(prefix + "/")
        assert_sink_path(rel.removeprefix(f"{DEAD_LETTERS}/"), started)
        objects[rel] = json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
    rows = [r for rel, content in objects.items() if not rel.startswith(DEAD_LETTERS) for r in content]
    letters = [r for rel, content in objects.items() if rel.startswith(f"{DEAD_LETTERS}/") for r in content]
    assert sorted(rows, key=lambda r: r["seq"]) == good
    reasons = {letter["payload"]: letter["reason"] for letter in letters}
    assert len(letters) == 2 and reasons["not json"].startswith("not JSON")
    assert reasons[json.dumps({"seq": 1})] == "missing field sensor_id"
    assert {letter["topic"] for letter in letters} == {topic}
    assert re.search(r"Wrote \d+ files, 150 readings", proc.stdout), proc.stdout
    assert f"Dead letters: 2 messages that are no readings → {location}/{DEAD_LETTERS}" in proc.stdout
    assert_no_secret(lakekeeper, {"stdout": proc.stdout, "stderr": proc.stderr})


@pytest.mark.slow
def test_the_harvest_shows_topic_raw_table_iceberg_as_one_chain(
        kafka_broker: KafkaBroker, make_flink_cluster, tmp_path_factory: pytest.TempPathFactory) -> None:
    """``flink run`` of the packaged job (SOURCE=kafka) on a standalone cluster with lakeflow's
    native-lineage listener, the real compaction, then ``lakeflow harvest`` (REST + the listener's
    events + the compaction's): kafka://host:port/topic → ingestion job → raw table → compaction →
    Iceberg table, the topic declared by the job.

    Flink's native lineage names both ends as the harvest does: the topic (Flink's ``KafkaSource``,
    ``kafka://host:port`` + topic) and the raw table (``LineageFileSink``)."""
    from lakeflow.cli.main import main
    from lakeflow.lineage import native
    from lakeflow.lineage.datasets import DatasetId, from_location
    from lakeflow.lineage.store import JOB_NAMESPACE, read_events

    home = tmp_path_factory.mktemp("kafka-harvest")
    store = home / "lineage"
    flink_cluster = make_flink_cluster(conf=native.listener_conf(store), lib_jars=[ROOT / "build" / "lakeflow-flink.jar"])
    topic, run_id = f"harvest-readings-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    kafka_broker.create_topic(topic)
    kafka_broker.produce(topic, [json.dumps(reading(run_id, seq)) for seq in range(40)] + ["{"])
    subprocess.run(["make", "-s", "package"], cwd=ROOT, check=True, capture_output=True, timeout=3000)
    ingest = KafkaIngest(kafka_broker, home, topic, run_id)
    env = {**ingest.env(), "LAKEFLOW_JAR": str(ROOT / "build" / "lakeflow-flink.jar")}
    py = INGEST_PY
    proc = flink_cluster.flink(["run", "-pyclientexec", py, "-pyexec", py, "-pyfs", str(ROOT / "build" / "lakeflow.zip"),
                                "-py", str(JOB)], env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert sorted(r["seq"] for r in ingest.committed(ingest.table_dir, 0)) == list(range(40))
    compact = subprocess.run([sys.executable, "-m", "lakeflow.cli", "compact"], cwd=home, capture_output=True,
                             text=True, env=env, timeout=600)
    assert compact.returncode == 0, compact.stdout[-2000:] + compact.stderr[-2000:]
    kafka_topic = DatasetId(f"kafka://{kafka_broker.bootstrap}", topic)
    raw = from_location(ingest.table_dir.as_uri())
    deadline = time.monotonic() + 10  # the listener writes on the JobManager's I/O threads
    while not (starts := [e for e in read_events(store) if e["eventType"] == "START"
                          and e["job"]["namespace"] == JOB_NAMESPACE]) and time.monotonic() < deadline:
        time.sleep(0.2)
    (start,) = starts
    assert [DatasetId(d["namespace"], d["name"]) for d in start["outputs"]] == [raw]
    assert [DatasetId(d["namespace"], d["name"]) for d in start["inputs"]] == [kafka_topic]

    out = home / "harvest.json"
    assert main(["harvest", "--rest-url", flink_cluster.rest_url, "--output", str(out), "--job-name-allow",
                 "^lakeflow-ingest ", "--lineage-dir", str(home / "lineage")]) == 0
    doc = json.loads(out.read_text())
    raw, kafka_topic = str(raw), str(kafka_topic)
    dead = str(from_location(dead_letter_location(ingest.table_dir.as_uri())))
    (job,) = [j for j in doc["jobs"] if j["engine"] == "flink" and raw in j["outputs"]]
    assert (job["state"], job["inputs"], sorted(job["outputs"])) == ("FINISHED", [kafka_topic], sorted([raw, dead]))
    assert job["evidence"][kafka_topic] == "declared" and not job["unresolved"]
    assert not [d for d in doc["datasets"] if "kafka_messages" in d["name"]]
    (spark,) = [j for j in doc["jobs"] if j["engine"] == "compaction"]
    (iceberg,) = spark["outputs"]
    flink_key, compaction_key = f"flink:{job['name']}", f"{spark['engine']}:{spark['name']}"
    edges = {tuple(e) for e in doc["edges"]}
    assert {(f"dataset:{kafka_topic}", flink_key), (flink_key, f"dataset:{raw}"),
            (f"dataset:{raw}", compaction_key), (compaction_key, f"dataset:{iceberg}")} <= edges
    (topic_doc,) = [d for d in doc["datasets"] if d["name"] == kafka_topic]
    assert (topic_doc["namespace"], topic_doc["path"]) == (f"kafka://{kafka_broker.bootstrap}", topic)
    # one name per dataset across the chain: the compaction reads the raw table the Flink job wrote
    compaction_inputs = {DatasetId(d["namespace"], d["name"]) for e in read_events(store)
                         if e["job"]["namespace"] != JOB_NAMESPACE for d in e.get("inputs") or ()}
    assert compaction_inputs == {from_location(ingest.table_dir.as_uri())}
    assert spark["inputs"] == [raw]

    # DataHub: the Flink job reads the topic's URN and writes the raw table's, which the compaction reads
    mcps_out = home / "mcps.json"
    assert main(["harvest", "--rest-url", flink_cluster.rest_url, "--format", "datahub", "--output", str(mcps_out),
                 "--job-name-allow", "^lakeflow-ingest ", "--lineage-dir", str(store)]) == 0
    mcps = json.loads(mcps_out.read_text())
    io = {m["entityUrn"]: json.loads(m["aspect"]["value"]) for m in mcps if m["aspectName"] == "dataJobInputOutput"}
    topic_urn = f"urn:li:dataset:(urn:li:dataPlatform:kafka,{topic},PROD)"
    raw_urn = from_location(ingest.table_dir.as_uri()).datahub_urn()
    (flink_io,) = [v for urn, v in io.items() if topic_urn in v["inputDatasets"]]
    assert flink_io["inputDatasets"] == [topic_urn] and raw_urn in flink_io["outputDatasets"]
    (compaction_io,) = [v for urn, v in io.items() if raw_urn in v["inputDatasets"]]
    assert len(compaction_io["outputDatasets"]) == 1 and "iceberg" in compaction_io["outputDatasets"][0].lower()
    assert {m["entityUrn"] for m in mcps if m["aspectName"] == "datasetKey"} >= {topic_urn, raw_urn}

    # the lineage page: its node details hold the same chain
    page = home / "lineage.html"
    assert main(["harvest", "--rest-url", flink_cluster.rest_url, "--format", "html", "--output", str(page),
                 "--job-name-allow", "^lakeflow-ingest ", "--lineage-dir", str(store)]) == 0
    nodes = page_nodes(page.read_text())
    assert nodes[kafka_topic]["Read by"] == [flink_key]
    assert (nodes[raw]["Written by"], nodes[raw]["Read by"]) == ([flink_key], [compaction_key])
    assert nodes[iceberg]["Written by"] == [compaction_key]


@pytest.mark.slow
def test_a_taskmanager_killed_mid_stream_loses_and_duplicates_no_reading(tmp_path: Path) -> None:
    """``make chaos``'s tm-kill-kafka, smaller: the packaged job on a standalone cluster reads the topic
    while its TaskManager is SIGKILLed twice; every reading produced is in the part files once."""
    from tests.chaos.kafka_faults import tm_kill_kafka

    result = tm_kill_kafka(tmp_path, kills=2, records=4000, batches=8, seed=26)
    assert result.ok, result.line()
    assert (result.counts["committed"], result.counts["kills"]) == (4000, 2)
    assert result.counts["failures_seen"] >= 2, result.line()  # the job noticed each lost TaskManager
