"""A fleet in one pipeline (#41), with a real Kafka broker and Flink: a pipeline file of 21 topics and
3 schemas — a stream of one topic, a stream of three topics into one table, and a topic pattern whose
capture names 17 tables — ingested by one Flink job (each message checked against its stream's
contract, dead letters per table), then compacted by one `lakeflow compact` into 19 Iceberg tables,
shown by `lakeflow status --json` and read by `lakeflow query --stream`. A refused schema change of
one stream stops that stream alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lakeflow.runtime.kafka import KafkaBroker
from tests.integration.test_ingest_kafka_schema import committed, hermetic
from tests.support.envs import INGEST_PY

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "jobs" / "sensor_ingest.py"
LAKEFLOW = Path(sys.executable).parent / "lakeflow"
T0 = 1_764_324_000_000
HALLS = [f"hall{n:02d}" for n in range(1, 18)]
ROOMS = ["north", "south", "east"]

pytestmark = pytest.mark.slow

SCHEMAS = {
    "vibration": {
        "title": "vibration", "type": "object", "required": ["device_id", "seq", "at", "rms"],
        "properties": {"device_id": {"type": "string"}, "seq": {"type": "integer"},
                       "at": {"type": "string", "format": "date-time"}, "rms": {"type": "number"}},
        "x-lakeflow": {"event-time": "at", "key": ["device_id", "seq"]},
    },
    "temperature": {
        "title": "temperature", "type": "object", "required": ["probe", "seq", "ms", "celsius"],
        "properties": {"probe": {"type": "string"}, "seq": {"type": "integer"}, "ms": {"type": "integer"},
                       "celsius": {"type": "number"}},
        "x-lakeflow": {"event-time": "ms", "key": ["probe", "seq"]},
    },
    "meter": {
        "title": "meter", "type": "object", "required": ["meter_id", "seq", "read_at", "kwh"],
        "properties": {"meter_id": {"type": "string"}, "seq": {"type": "integer"}, "read_at": {"type": "integer"},
                       "kwh": {"type": "number"}},
    },
}

PIPELINE = """\
[defaults]
namespace = "plant"

[[streams]]
name = "vibration"
topics = ["plant.vibration"]
schema = "schemas/vibration.schema.json"   # relative to the pipeline file
table = "vibration"

[[streams]]
name = "temperature"
topics = ["plant.temp.north", "plant.temp.south", "plant.temp.east"]
schema = "schemas/temperature.schema.json"
table = "temperature"

[[streams]]
name = "meters"
topic-pattern = 'plant\\.meters\\.(.+)'      # one table per matching topic
schema = "schemas/meter.schema.json"
table = "meters_{1}"                        # {1}: the pattern's first capture
key = ["meter_id", "seq"]
event-time = "read_at"
"""


def dumps(record: dict) -> str:
    return json.dumps(record, separators=(",", ":"))


def messages(topic: str, n: int, start: int = 0) -> list[str]:
    """``n`` records of the topic's schema (by its name), each with its own ``seq``."""
    out = []
    for seq in range(start, start + n):
        ms = T0 + seq * 1000
        if topic.endswith(".vibration"):
            at = f"2025-11-28T10:{seq // 60 % 60:02d}:{seq % 60:02d}Z"
            out.append(dumps({"device_id": f"v-{seq % 3}", "seq": seq, "at": at, "rms": seq / 10}))
        elif ".temp." in topic:
            out.append(dumps({"probe": topic.rsplit(".", 1)[1], "seq": seq, "ms": ms, "celsius": 20.5}))
        else:
            out.append(dumps({"meter_id": topic.rsplit(".", 1)[1], "seq": seq, "read_at": ms, "kwh": seq * 1.5}))
    return out


def topics_of(site: str) -> list[str]:
    return [f"{site}.vibration", *(f"{site}.temp.{r}" for r in ROOMS), *(f"{site}.meters.{h}" for h in HALLS)]


def make_plant(home: Path, kafka_broker: KafkaBroker, site: str = "plant") -> Path:
    """The pipeline file and its schemas in ``home``; its 21 topics (named ``<site>.…``: the broker is the
    session's, so each test its own) on the broker, 20 messages each (the vibration topic also one that
    misses a field, a meter topic one that is no JSON)."""
    (home / "schemas").mkdir()
    for name, schema in SCHEMAS.items():
        (home / "schemas" / f"{name}.schema.json").write_text(json.dumps(schema))
    (home / "pipeline.toml").write_text(PIPELINE.replace('"plant.', f'"{site}.').replace("'plant\\.", f"'{site}\\."))
    for topic in topics_of(site):
        kafka_broker.create_topic(topic)
        extra = {f"{site}.vibration": ['{"device_id":"v-9","seq":1}'], f"{site}.meters.hall07": ["not json"]}
        kafka_broker.produce(topic, messages(topic, 20) + extra.get(topic, []))
    return home


@pytest.fixture
def plant(tmp_path: Path, kafka_broker: KafkaBroker) -> Path:
    return make_plant(tmp_path, kafka_broker)


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_one_job_and_one_compactor_serve_every_stream(plant: Path, kafka_broker: KafkaBroker) -> None:
    env = hermetic(plant, PIPELINE=str(plant / "pipeline.toml"), SOURCE="kafka",
                   KAFKA_BOOTSTRAP_SERVERS=kafka_broker.bootstrap, KAFKA_STOP_AT="latest", KAFKA_GROUP_ID="fleet",
                   BATCH_INTERVAL_MS="1000")
    proc = run([INGEST_PY, str(JOB), "--parallelism", "1"], env, plant)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    assert proc.stdout.count("Created table plant.") == 19, proc.stdout

    warehouse = plant / "warehouse" / "plant"
    lines, letters = committed(warehouse / "vibration")
    assert sorted(lines) == sorted(messages("plant.vibration", 20))
    assert [(d["topic"], d["reason"]) for d in letters] == [("plant.vibration", "missing field at")]
    lines, letters = committed(warehouse / "temperature")
    assert sorted(lines) == sorted(m for r in ROOMS for m in messages(f"plant.temp.{r}", 20)) and not letters
    for hall in HALLS:
        lines, letters = committed(warehouse / f"meters_{hall}")
        assert sorted(lines) == sorted(messages(f"plant.meters.{hall}", 20)), hall
        assert [d["payload"] for d in letters] == (["not json"] if hall == "hall07" else []), hall

    proc = run([str(LAKEFLOW), "compact"], env, plant)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    proc = run([str(LAKEFLOW), "status", "--json"], env, plant)
    assert proc.returncode == 0, proc.stderr[-3000:]
    streams = json.loads(proc.stdout)["streams"]
    rows = {s["stream"]: (s["table"], s["rows"]) for s in streams}
    assert {s["stream"]: s["dead_letters"] for s in streams if s["dead_letters"]} == {"vibration": 1,
                                                                                      "meters_hall07": 1}
    assert rows == {"vibration": ("plant.vibration-compacted", 20), "temperature": ("plant.temperature-compacted", 60),
                    **{f"meters_{h}": (f"plant.meters_{h}-compacted", 20) for h in HALLS}}
    proc = run([str(LAKEFLOW), "query", "--stream", "meters_hall03", "--format", "json",
                "SELECT count(*) AS n, min(meter_id) AS m FROM readings"], env, plant)
    assert proc.returncode == 0 and json.loads(proc.stdout) == [{"n": 20, "m": "hall03"}], proc.stdout + proc.stderr
    proc = run([str(LAKEFLOW), "query", "SELECT 1"], env, plant)
    assert proc.returncode == 2 and "name one with --stream" in proc.stderr, proc.stderr

    # A refused change (seq: integer → string) stops the meters alone; the others' new messages land.
    meter = {**SCHEMAS["meter"], "properties": {**SCHEMAS["meter"]["properties"], "seq": {"type": "string"}}}
    (plant / "schemas" / "meter.schema.json").write_text(json.dumps(meter))
    kafka_broker.produce("plant.vibration", messages("plant.vibration", 5, start=20))
    kafka_broker.produce("plant.meters.hall01", [dumps({"meter_id": "hall01", "seq": "x", "read_at": T0, "kwh": 1})])
    proc = run([INGEST_PY, str(JOB), "--parallelism", "1"], env, plant)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    proc = run([str(LAKEFLOW), "compact"], env, plant)
    assert proc.returncode == 2 and "refuse" in proc.stderr, proc.stderr[-3000:]
    proc = run([str(LAKEFLOW), "status", "--json"], env, plant)
    status = {s["stream"]: s for s in json.loads(proc.stdout)["streams"]}
    assert status["vibration"]["rows"] == 25 and status["meters_hall01"]["rows"] == 20
    assert status["meters_hall01"]["pending_files"] == 1


def test_on_s3_each_table_is_written_with_its_own_credentials_only(make_lakekeeper, moto_strict, tmp_path: Path):
    """Three streams on S3 with IAM enforced (moto), one job: each table written through its own
    filesystem holding its own vended credentials, which S3 refuses on the other tables' prefixes."""
    import boto3
    from botocore.exceptions import ClientError

    from lakeflow.catalog.lakekeeper import LakekeeperCatalog
    from lakeflow.credentials import to_s3a
    from tests.integration.test_ingest_s3 import assert_no_secret, job_env
    from tests.support.fixtures_lakekeeper import settings_for

    lakekeeper = make_lakekeeper(s3=moto_strict)
    default_schema = ROOT / "lakeflow" / "schema" / "sensor-reading.schema.json"
    (tmp_path / "pipeline.toml").write_text("".join(
        f'[[streams]]\nname = "{name}"\nschema = "{default_schema}"\n\n' for name in ("line-a", "line-b", "line-c")))
    env = job_env(lakekeeper, tmp_path, PIPELINE=str(tmp_path / "pipeline.toml"), NUM_RECORDS="300",
                  BATCH_SIZE="100", BATCH_INTERVAL_MS="400")
    env.pop("TABLE", None)  # the pipeline names the tables
    proc = run([INGEST_PY, str(JOB), "--parallelism", "1"], env, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    assert_no_secret(lakekeeper, {"stdout": proc.stdout, "stderr": proc.stderr})

    catalog = LakekeeperCatalog.from_settings(settings_for(lakekeeper))
    handles = {name: catalog.load(("iot",), name, vended=True) for name in ("line-a", "line-b", "line-c")}
    owner = lakekeeper.warehouse.s3.client("s3")  # Lakekeeper's own storage credential: sees everything
    for name, handle in handles.items():
        bucket, _, prefix = handle.location.removeprefix("s3://").partition("/")
        keys = [o["Key"] for o in owner.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])]
        readings = [r for k in keys for r in json.loads(owner.get_object(Bucket=bucket, Key=k)["Body"].read())]
        assert sorted(r["seq"] for r in readings) == list(range(300)), name
        assert f"→ {handle.location}" in proc.stdout
    for name, handle in handles.items():  # each table's credentials write its prefix, and no other table's
        s3 = boto3.client("s3", **to_s3a(handle.storage).boto3())
        bucket, _, prefix = handle.location.removeprefix("s3://").partition("/")
        s3.put_object(Bucket=bucket, Key=f"{prefix}/_probe.json", Body=b"[]")
        for other, other_handle in handles.items():
            if other != name:
                _, _, other_prefix = other_handle.location.removeprefix("s3://").partition("/")
                with pytest.raises(ClientError, match="AccessDenied"):
                    s3.put_object(Bucket=bucket, Key=f"{other_prefix}/2026-01-01--00/part-x-0-0.json", Body=b"[]")


def test_a_topic_created_while_the_job_runs_gets_its_table_nothing_lost_or_read_twice(
        tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    """An unbounded job over a topic pattern: a matching topic created mid-run stops the job with a
    savepoint, registers the new table and restarts from it with the topic added; messages sent to the
    old topics before, during and after the restart land once each."""
    import signal
    import time

    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "meter.schema.json").write_text(json.dumps(SCHEMAS["meter"]))
    prefix = f"site{abs(hash(tmp_path)) % 10_000}"
    (tmp_path / "pipeline.toml").write_text(
        f'[[streams]]\nname = "meters"\ntopic-pattern = \'{prefix}\\.meters\\.(.+)\'\n'
        'schema = "schemas/meter.schema.json"\ntable = "meters_{1}"\nkey = ["meter_id", "seq"]\n'
        'event-time = "read_at"\n')
    first, late = f"{prefix}.meters.a", f"{prefix}.meters.b"
    kafka_broker.create_topic(first)
    kafka_broker.produce(first, messages(first, 30))
    env = hermetic(tmp_path, PIPELINE=str(tmp_path / "pipeline.toml"), SOURCE="kafka",
                   KAFKA_BOOTSTRAP_SERVERS=kafka_broker.bootstrap, KAFKA_GROUP_ID=f"{prefix}-fleet",
                   KAFKA_DISCOVERY_INTERVAL="2s", BATCH_INTERVAL_MS="500")
    warehouse = tmp_path / "warehouse" / "iot"

    def landed(table: str) -> list[str]:
        return committed(warehouse / table)[0] if (warehouse / table).is_dir() else []

    def wait_for(table: str, count: int, proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 180
        while len(landed(table)) < count and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the job ended ({proc.returncode}): {out[-2000:]}{err[-4000:]}")
        assert len(landed(table)) >= count, f"{table}: {len(landed(table))} of {count}"

    proc = subprocess.Popen([INGEST_PY, str(JOB), "--parallelism", "1"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("meters_a", 30, proc)
        kafka_broker.create_topic(late)
        kafka_broker.produce(late, messages(late, 25))
        kafka_broker.produce(first, messages(first, 10, start=30))  # while the job stops and restarts
        wait_for("meters_b", 25, proc)
        kafka_broker.produce(first, messages(first, 10, start=40))
        wait_for("meters_a", 50, proc)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert "Restarting from savepoint" in out, out[-2000:] + err[-3000:]
    assert sorted(landed("meters_a")) == sorted(messages(first, 50))  # each once: nothing lost, nothing twice
    assert sorted(landed("meters_b")) == sorted(messages(late, 25))


def test_one_spark_application_compacts_every_streams_batch_of_a_pass(tmp_path: Path) -> None:
    """`lakeflow compact --engine spark` over a pipeline of two streams: both tables compacted by the
    runs of one Spark application (the session stays for the pass, and begins to stop once its last run
    is done with it, before that run's commit)."""
    import re

    from lakeflow.catalog.local import LocalCatalog
    from tests.support.fixtures_compaction import readings, write_parts

    home = tmp_path / "home"
    default_schema = ROOT / "lakeflow" / "schema" / "sensor-reading.schema.json"
    (tmp_path / "pipeline.toml").write_text("".join(
        f'[[streams]]\nname = "{name}"\nschema = "{default_schema}"\n\n' for name in ("line-a", "line-b")))
    for n, name in enumerate(("line-a", "line-b")):
        handle = LocalCatalog(home).register(("iot",), name)
        write_parts(Path(handle.location.removeprefix("file://")),
                    readings(f"run-{name}", 300, start_ms=T0, seed=n), 100, bucket_folders=True)
    env = hermetic(home, PIPELINE=str(tmp_path / "pipeline.toml"), SPARK_LOCAL_IP="127.0.0.1")
    proc = run([str(LAKEFLOW), "compact", "--engine", "spark"], env, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    (app,) = set(re.findall(r"\[spark\] application (\S+)", proc.stderr))  # one for the pass
    lines = proc.stderr.splitlines()
    stopping = [n for n, line in enumerate(lines) if f"[spark] stopping application {app}" in line]
    commits = [n for n, line in enumerate(lines) if "[commit] done" in line]
    assert len(stopping) == 1 and len(commits) == 2 and commits[0] < stopping[0] < commits[1], proc.stderr[-3000:]
    status = json.loads(run([str(LAKEFLOW), "status", "--json"], env, tmp_path).stdout)
    assert {s["stream"]: s["rows"] for s in status["streams"]} == {"line-a": 300, "line-b": 300}


def test_a_standalone_cluster_and_the_compaction_service_serve_the_fleet(
        tmp_path: Path, kafka_broker: KafkaBroker, make_flink_cluster) -> None:
    """The packaged job by `flink run` on a standalone cluster (unbounded, every stream of the pipeline),
    the compaction service (`lakeflow compact --every 2s --metrics-port`) beside it: every stream's rows
    reach its Iceberg table, the metrics carry each table; a topic created mid-run restarts the job on the
    cluster from a savepoint with its table added (nothing lost or read twice); a stop with a savepoint
    loses nothing."""
    import re
    import signal
    import time

    import requests

    from lakeflow.runtime.ports import free_ports
    from tests.integration.test_ingest_kafka_schema import PACKAGE, StandaloneRun

    subprocess.run(["make", "-s", str(PACKAGE.relative_to(ROOT))], cwd=ROOT, check=True, capture_output=True,
                   timeout=600)
    site = "works"
    plant = make_plant(tmp_path, kafka_broker, site)
    cluster = make_flink_cluster()
    env = hermetic(plant, PIPELINE=str(plant / "pipeline.toml"), SOURCE="kafka",
                   KAFKA_BOOTSTRAP_SERVERS=kafka_broker.bootstrap, KAFKA_STARTING_OFFSETS="earliest",
                   KAFKA_GROUP_ID="fleet-cluster", BATCH_INTERVAL_MS="1000", KAFKA_DISCOVERY_INTERVAL="3s",
                   LAKEFLOW_JAR=str(ROOT / "build" / "lakeflow-flink.jar"))
    job = StandaloneRun(cluster, env, plant / "flink-run.log")
    (port,) = free_ports(1)
    service = subprocess.Popen([str(LAKEFLOW), "compact", "--every", "2s", "--metrics-port", str(port)], env=env,
                               cwd=plant, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    expected = {"vibration": 20, "temperature": 60, **{f"meters_{h}": 20 for h in HALLS}}
    rows: dict[str, int] = {}

    def served(deadline_s: float) -> None:
        nonlocal rows
        deadline = time.monotonic() + deadline_s
        while rows != expected and time.monotonic() < deadline and service.poll() is None:
            time.sleep(3)
            status = run([str(LAKEFLOW), "status", "--json"], env, plant)
            if status.returncode in (0, 2) and status.stdout.strip():
                rows = {s["stream"]: s.get("rows", 0) for s in json.loads(status.stdout)["streams"]}
        assert rows == expected, f"{rows} (service: {service.poll()}; job: {(plant / 'flink-run.log').read_text()[-2000:]})"

    try:
        served(600)
        kafka_broker.create_topic(f"{site}.meters.hall18")  # a new topic of the pattern, while the job runs
        kafka_broker.produce(f"{site}.meters.hall18", messages(f"{site}.meters.hall18", 20))
        kafka_broker.produce(f"{site}.vibration", messages(f"{site}.vibration", 10, start=20))  # around the restart
        expected = {**expected, "vibration": 30, "meters_hall18": 20}
        served(400)
        first_job, job.job_id = job.job_id, job._submitted()  # the job the restart submitted
        assert job.job_id != first_job
        harvested = run([str(LAKEFLOW), "harvest", "--rest-url", cluster.rest_url, "--job-name-allow",
                         "^lakeflow-ingest ", "--include-job-states", "RUNNING", "--output", str(plant / "h.json")],
                        env, plant)
        assert harvested.returncode == 0, harvested.stderr[-3000:]
        _assert_the_fleets_lineage(json.loads((plant / "h.json").read_text()), expected, site)
        metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        for stream, count in expected.items():
            line = re.search(rf'lakeflow_compaction_rows_out_total{{table="plant\.{stream}-compacted"}} (\S+)', metrics)
            assert line and float(line[1]) == count, (stream, metrics[-2000:])
    finally:
        service.send_signal(signal.SIGTERM)
        out, err = service.communicate(timeout=120)
    assert service.returncode == 0, err[-3000:]
    assert "stream meters_hall01" in out and "stream vibration" in out  # one line a stream's run
    job.stop(plant / "savepoints")


def _assert_the_fleets_lineage(doc: dict, streams: dict[str, int], site: str) -> None:
    """Each topic → the running ingestion job → its stream's raw table → a compaction run → its Iceberg table."""
    edges = {tuple(e) for e in doc["edges"]}
    (ingest,) = [j for j in doc["jobs"] if j["engine"] == "flink" and j["state"] == "RUNNING"]
    topics = [*topics_of(site), f"{site}.meters.hall18"]
    inputs = [i for i in ingest["inputs"] if any(i.endswith(t) for t in topics)]
    assert len(inputs) == len(topics), ingest["inputs"]
    assert all((f"dataset:{i}", f"flink:{ingest['name']}") in edges for i in inputs)
    raws = {o.rsplit("/", 1)[-1]: o for o in ingest["outputs"] if not o.endswith("/_dead_letters")}
    assert set(raws) == set(streams), ingest["outputs"]
    assert sorted(ingest["outputs"]) == sorted([*raws.values(), *(f"{r}/_dead_letters" for r in raws.values())])
    for table, raw in raws.items():
        assert (f"flink:{ingest['name']}", f"dataset:{raw}") in edges
        compactions = {b for a, b in edges if a == f"dataset:{raw}" and b.startswith("compaction:")}
        assert any(a in compactions and b.endswith(f"/plant/{table}-compacted") for a, b in edges), (table, compactions)
