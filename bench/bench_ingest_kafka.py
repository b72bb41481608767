"""``make bench-ingest`` (Kafka part): how fast lakeflow's ingestion job with SOURCE=kafka commits
readings from a topic, against Flink's own SQL job (``kafka`` source → ``filesystem`` sink, ``json``
format, pure JVM) on the same broker, topic and machine, in the same run.

A real Kafka 4.1.1 broker (``tests/support/kafka_broker.py``: KRaft, 127.0.0.1) holds N readings as JSON in
a 2-partition topic. Both jobs read the topic from its earliest offsets up to the offsets present at
start (bounded), parallelism 2, exactly-once checkpoints every 2 s into filesystem storage, and are
timed from submission until every reading is committed (start-up included). lakeflow's job also
validates each message (``KafkaReadings``: JSON parsed, each field's type checked, the reading
re-written) where the baseline only parses into typed columns. After an untimed warm-up of both,
rounds alternate the order. Figures: readings per wall-clock second (best round) and per CPU
second of the MiniCluster's JVM plus this process (mean). Target: lakeflow ≥ 1.0× the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.machine import describe  # noqa: E402

from bench.bench_ingest import Meter, compare  # noqa: E402
from lakeflow.catalog.local import LocalCatalog  # noqa: E402
from lakeflow.ingest.flink_types import quoted, sql_fields  # noqa: E402
from lakeflow.ingest.job import IngestJob, TableWrite  # noqa: E402
from lakeflow.ingest.sensors import Generator  # noqa: E402
from lakeflow.runtime import jars  # noqa: E402
from lakeflow.schema import load_schema  # noqa: E402
from lakeflow.settings import load_settings  # noqa: E402
from lakeflow.streams import load_pipeline  # noqa: E402
from tests.support.kafka_broker import KafkaBroker, run_kafka  # noqa: E402


def fill_topic(broker: KafkaBroker, topic: str, records: int) -> None:
    """``records`` records of the default schema (one run, 100 sensors) as JSON messages
    (``ConsoleProducer``), in chunks."""
    generator, rng, chunk = Generator(load_schema(), 100, str(uuid.uuid4())), random.Random(26), 100_000
    for start in range(0, records, chunk):
        broker.produce(topic, [json.dumps(generator.record(seq, 1_764_000_000_000 + seq, rng), separators=(",", ":"))
                               for seq in range(start, min(start + chunk, records))])


def lakeflow_job(home: Path, broker: KafkaBroker, topic: str, records: int, parallelism: int,
                 interval_ms: int) -> Meter:
    """The real job (pipeline.build + pipeline.execute, progress watcher included), SOURCE=kafka."""
    from lakeflow.ingest import pipeline
    from lakeflow.ingest.progress import PartFiles

    settings = load_settings({"LAKEFLOW_HOME": str(home), "BATCH_INTERVAL_MS": str(interval_ms), "SOURCE": "kafka",
                              "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap, "KAFKA_TOPIC": topic,
                              "KAFKA_GROUP_ID": f"bench-{uuid.uuid4().hex[:8]}", "KAFKA_STARTING_OFFSETS": "earliest",
                              "KAFKA_STOP_AT": "latest"}, env_file=Path(os.devnull), local=True)
    handle = LocalCatalog(settings.home).register(settings.namespace, settings.table)
    job = IngestJob.plan(settings, [TableWrite.of(load_pipeline(settings).streams()[0], handle)], parallelism=parallelism)
    with Meter() as meter:
        env = pipeline.create_environment(job)
        pipeline.build(env, job)
        (summary,) = pipeline.execute(env, job, [PartFiles(job.tables[0].location)]).summaries
    assert summary.records == records and not summary.uncommitted, summary
    return meter


def baseline_job(home: Path, broker: KafkaBroker, topic: str, records: int, parallelism: int,
                 interval_ms: int) -> Meter:
    """Flink's kafka source (json format, typed columns) → filesystem sink, json format."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    out = home / "baseline"
    conf = Configuration()
    connector = ";".join(jar.as_uri() for jar in jars.fetch(jars.kafka_connector_set()))
    for key, value in {"execution.runtime-mode": "STREAMING", "parallelism.default": str(parallelism),
                       "execution.checkpointing.interval": f"{interval_ms} ms",
                       "execution.checkpointing.mode": "EXACTLY_ONCE",
                       "execution.checkpointing.storage": "filesystem",
                       "execution.checkpointing.dir": (home / "checkpoints").as_uri(),
                       "restart-strategy.type": "none", "rest.bind-address": "localhost", "rest.port": "0",
                       "pipeline.jars": connector}.items():
        conf.set_string(key, value)
    t_env = StreamTableEnvironment.create(StreamExecutionEnvironment.get_execution_environment(conf))
    columns = ", ".join(f"{quoted(name)} {sql_type}" for name, sql_type in sql_fields(load_schema()))
    t_env.execute_sql(f"""CREATE TEMPORARY TABLE messages ({columns}) WITH (
        'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
        'properties.group.id' = 'bench-baseline-{uuid.uuid4().hex[:8]}', 'scan.startup.mode' = 'earliest-offset',
        'scan.bounded.mode' = 'latest-offset', 'format' = 'json')""")
    t_env.execute_sql(f"""CREATE TEMPORARY TABLE readings_sink ({columns}) WITH (
        'connector' = 'filesystem', 'path' = '{out.as_uri()}', 'format' = 'json')""")
    with Meter() as meter:
        t_env.execute_sql("INSERT INTO readings_sink SELECT * FROM messages").wait()
    committed = sum(p.read_bytes().count(b"\n") for p in out.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert committed == records, f"baseline committed {committed} of {records}"
    return meter


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--interval-ms", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(describe(), flush=True)  # what the figures below ran on

    work = Path(tempfile.mkdtemp(prefix="bench-ingest-kafka-"))
    os.environ.setdefault("FLINK_LOG_DIR", str(work / "log"))
    try:
        with run_kafka(work / "kafka") as broker:
            started = time.monotonic()
            broker.create_topic("readings", partitions=2)
            fill_topic(broker, "readings", args.records)
            broker.create_topic("warmup", partitions=2)
            fill_topic(broker, "warmup", min(args.records, 50_000))
            print(f"kafka → part files: {args.records:,} readings in a 2-partition topic (filled in "
                  f"{time.monotonic() - started:.0f} s), parallelism {args.parallelism}, {args.interval_ms} ms "
                  f"checkpoints, {os.cpu_count()} cores", flush=True)
            runs = {"baseline": baseline_job, "lakeflow": lakeflow_job}
            for name, run in runs.items():  # warm-up: JIT and first-MiniCluster costs out of the figures
                run(work / f"warmup-{name}", broker, "warmup", min(args.records, 50_000), args.parallelism,
                    args.interval_ms)
                shutil.rmtree(work / f"warmup-{name}", ignore_errors=True)
            compare(
                {name: (lambda home, run=run: run(home, broker, "readings", args.records, args.parallelism,
                                                  args.interval_ms))
                 for name, run in runs.items()},
                args.records, args.rounds, work,
                {"baseline": "Flink kafka (json) → filesystem sink, json",
                 "lakeflow": "KafkaSource → KafkaReadings → JSON-array FileSink"},
                target=1.0,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
