"""``make bench-ingest``: how fast lakeflow's ingestion job commits readings, against Flink's own
Table API ``datagen`` → ``filesystem`` sink (``json`` format) on the same machine in the same run;
then how long ``make run`` takes to its first committed file.

Both jobs: records of the declared schema (lakeflow's default sensor reading; ``--schema FILE`` another,
e.g. a nested one), parallelism 2, exactly-once checkpoints every 2 s into filesystem storage, N readings
unthrottled; timed from submission until every reading is committed (job start-up and SQL planning
included). lakeflow's synthetic sensors (100) make them in Java (``SensorRecords``); the baseline makes the same
values in Flink SQL (the way lakeflow's job made them until 2026-12-02) from ``datagen``'s seq and
timestamp (drawn at random: a ``sequence`` would hold its whole range in state) into typed columns. After an untimed warm-up of
both, rounds alternate the order (A B, B A…). Two figures per job: readings per wall-clock second (best round), and readings per
CPU second of the JVM that runs the MiniCluster plus this Python process (mean over rounds) —
the one that stays comparable when other work shares the machine. Targets (issue #40): lakeflow ≥ 1.5×
the baseline per CPU second; ``make run``'s first committed file ≤ 5 s at 1-s checkpoints (the ingestion
environment's class archive built first, as ``make run`` does).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.machine import describe  # noqa: E402
from lakeflow.catalog.local import LocalCatalog  # noqa: E402
from lakeflow.ingest import sensors  # noqa: E402
from lakeflow.ingest.flink_types import quoted, sql_fields, sql_type  # noqa: E402
from lakeflow.ingest.job import IngestJob, TableWrite  # noqa: E402
from lakeflow.schema import load_schema  # noqa: E402
from lakeflow.settings import load_settings  # noqa: E402
from lakeflow.streams import load_pipeline  # noqa: E402
from pyiceberg.types import IcebergType, ListType, MapType, StructType  # noqa: E402


class Meter:
    """Wall-clock and CPU seconds (the gateway JVM hosting the MiniCluster + this process)."""

    def __enter__(self) -> Meter:
        self.wall, self.cpu = time.monotonic(), self._cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.monotonic() - self.wall, self._cpu() - self.cpu

    @staticmethod
    def _cpu() -> float:
        from pyflink.java_gateway import get_gateway

        pid = get_gateway().jvm.java.lang.ProcessHandle.current().pid()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") + time.process_time()


def lakeflow_job(home: Path, records: int, num_sensors: int, parallelism: int, interval_ms: int,
                 schema: Path | None) -> Meter:
    """The real job (pipeline.build + pipeline.execute, progress watcher included)."""
    from lakeflow.ingest import pipeline
    from lakeflow.ingest.progress import PartFiles

    settings = load_settings({"LAKEFLOW_HOME": str(home), "NUM_SENSORS": str(num_sensors),
                              "NUM_RECORDS": str(records), "BATCH_INTERVAL_MS": str(interval_ms),
                              **({"TABLE_SCHEMA": str(schema)} if schema else {})},
                             env_file=Path(os.devnull), local=True)
    handle = LocalCatalog(settings.home).register(settings.namespace, settings.table)
    job = IngestJob.plan(settings, [TableWrite.of(load_pipeline(settings).streams()[0], handle)], parallelism=parallelism, throttled=False)
    with Meter() as meter:
        env = pipeline.create_environment(job)
        pipeline.build(env, job)
        (summary,) = pipeline.execute(env, job, [PartFiles(job.tables[0].location)]).summaries
    assert summary.records == records and not summary.uncommitted, summary
    return meter


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _double(x: float) -> str:
    return f"CAST({float(x)!r} AS DOUBLE)"


def sql_of(node: dict, t: IcebergType) -> str:
    """The value ``SensorRecords`` makes from ``node`` (a node of ``Generator.spec``, of type ``t``) as a
    Flink SQL user writes it, over ``seq``, ``timestamp_ms`` and ``idx`` (the device), in DOUBLE arithmetic."""
    if isinstance(t, StructType):
        members = zip(node["object"], t.fields, strict=True)
        return f"CAST(ROW({', '.join(sql_of(member, f.field_type) for (_, member), f in members)}) AS {sql_type(t)})"
    if isinstance(t, MapType):
        entries = ", ".join(f"{_text(json.loads(key))}, {sql_of(value, t.value_type)}" for key, value in node["object"])
        return f"CAST(MAP[{entries}] AS {sql_type(t)})"
    if isinstance(t, ListType):
        return f"CAST(ARRAY[{', '.join(sql_of(item, t.element_type) for item in node['array'])}] AS {sql_type(t)})"
    kind, make = node["kind"], node["make"]
    if make == "device":
        value = "idx + 1"
        if kind == "string":
            value = f"CONCAT({_text(node['prefix'])}, LPAD(CAST(idx + 1 AS STRING), {node['width']}, '0'))"
    elif make == "constant":
        value = _text(node["text"])
    elif make == "sequence":
        value = {"long": "seq", "int": "MOD(seq, 2147483648)", "string": "CAST(seq AS STRING)"}[kind]
    elif make == "event-time":
        value = "timestamp_ms" if kind == "long" else "TO_TIMESTAMP_LTZ(timestamp_ms, 3)"
    elif make == "daily-cycle":
        value = _double(node["low"])
        if node["spread"]:
            value = f"({value} + {_double(node['spread'])} * MOD(idx * {node['prime']}, 1000) / {_double(1000)})"
        if node["amplitude"]:
            day = f"SIN(2 * PI() * (timestamp_ms % 86400000) / {_double(86400000)} + idx)"
            value += f" + {_double(node['amplitude'])} * {day}"
        if node["noise"]:
            value += f" + {_double(node['noise'])} * (RAND() - {_double(0.5)})"
        for bound, side in ((node["max"], "LEAST"), (node["min"], "GREATEST"), (node.get("limit"), "LEAST"),
                            (node.get("limit") and -node["limit"], "GREATEST")):
            value = value if bound is None else f"{side}({_double(bound)}, {value})"
        value = f"ROUND({value}, 0)" if kind in ("long", "int") else value
    elif make == "per-device":
        if kind == "string":
            value = f"ELT(CAST(MOD(idx, {len(node['values'])}) AS INT) + 1, {', '.join(map(_text, node['values']))})"
        else:
            cases = " ".join(f"WHEN {i} THEN CAST({_text(v)} AS {sql_type(t)})" for i, v in enumerate(node["values"]))
            value = f"CASE CAST(MOD(idx, {len(node['values'])}) AS INT) {cases} END"
    else:  # a coin
        value = "RAND() < 0.5"
    value = value if node.get("maxLength") is None else f"SUBSTR({value}, 1, {node['maxLength']})"
    return f"CAST({value} AS {sql_type(t)})"


def baseline_job(home: Path, records: int, num_sensors: int, parallelism: int, interval_ms: int,
                 schema: Path | None) -> Meter:
    """Flink's datagen (seq, timestamp) → the records in Flink SQL (:func:`sql_of`) → filesystem sink, json."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    out = home / "baseline"
    conf = Configuration()
    for key, value in {"execution.runtime-mode": "STREAMING", "parallelism.default": str(parallelism),
                       "execution.checkpointing.interval": f"{interval_ms} ms",
                       "execution.checkpointing.mode": "EXACTLY_ONCE",
                       "execution.checkpointing.storage": "filesystem",
                       "execution.checkpointing.dir": (home / "checkpoints").as_uri(),
                       "restart-strategy.type": "none", "rest.bind-address": "localhost",
                       "rest.port": "0"}.items():
        conf.set_string(key, value)
    t_env = StreamTableEnvironment.create(StreamExecutionEnvironment.get_execution_environment(conf))
    t_env.get_config().set("table.local-time-zone", "UTC")
    declared = load_schema(schema)
    # Random fields, not a `sequence` seq: datagen keeps a sequence's whole remaining range in
    # memory and in every checkpoint, which would slow the baseline down for a reason that has
    # nothing to do with the sink.
    t_env.execute_sql(f"""CREATE TEMPORARY TABLE ticks (seq BIGINT, timestamp_ms BIGINT) WITH (
        'connector' = 'datagen', 'rows-per-second' = '1000000000', 'number-of-rows' = '{records}',
        'fields.seq.min' = '0', 'fields.seq.max' = '{records - 1}',
        'fields.timestamp_ms.min' = '1700000000000', 'fields.timestamp_ms.max' = '1800000000000')""")
    columns = ", ".join(f"{quoted(name)} {sql_type}" for name, sql_type in sql_fields(declared))
    t_env.execute_sql(f"""CREATE TEMPORARY TABLE readings_sink ({columns}) WITH (
        'connector' = 'filesystem', 'path' = '{out.as_uri()}', 'format' = 'json')""")
    spec = json.loads(sensors.Generator(declared, num_sensors, str(uuid.uuid4())).spec())["object"]
    typed = ", ".join(sql_of(node, f.field_type) for (_, node), f in zip(spec, declared.fields.fields, strict=True))
    with Meter() as meter:
        t_env.execute_sql(f"INSERT INTO readings_sink SELECT {typed} FROM (SELECT seq, timestamp_ms, "
                          f"MOD(seq, {num_sensors}) AS idx FROM ticks)").wait()
    committed = sum(p.read_bytes().count(b"\n") for p in out.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert committed == records, f"baseline committed {committed} of {records}"
    return meter


def time_make_run(home: Path, interval_ms: int, batch_size: int) -> tuple[float, float]:
    """Seconds from ``make run`` to its first committed file, and to its end (2 batches)."""
    env = {**os.environ, "LAKEFLOW_HOME": str(home), "LAKEFLOW_ENV_FILE": os.devnull,
           "NUM_RECORDS": str(2 * batch_size), "BATCH_SIZE": str(batch_size), "BATCH_INTERVAL_MS": str(interval_ms)}
    table = home / "warehouse" / "iot" / "sensor-readings"
    started = time.monotonic()
    proc = subprocess.Popen(["make", "-s", "run", "ARGS=--local"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = None
    while proc.poll() is None:
        if first is None and any(table.glob("*/part-*.json")):
            first = time.monotonic() - started
        time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"make run failed ({proc.returncode}); run it by hand to see why")
    return (first if first is not None else float("nan")), time.monotonic() - started


def compare(runs: dict[str, Callable[[Path], Meter]], records: int, rounds: int, work: Path,
            labels: dict[str, str], target: float) -> None:
    """``rounds`` rounds of the baseline and lakeflow jobs (the order alternating, each run in its own
    folder under ``work``), each printed; then each job's best readings/s and mean readings per CPU
    second, and lakeflow's ratios to the baseline (per CPU second against ``target``)."""
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(rounds):
        for name in ("baseline", "lakeflow") if i % 2 == 0 else ("lakeflow", "baseline"):
            meter = runs[name](work / f"{name}-{i}")
            wall[name].append(records / meter.wall)
            cpu[name].append(records / meter.cpu)
            print(f"  round {i + 1} {name:9s} {wall[name][-1]:10,.0f} readings/s  "
                  f"{cpu[name][-1]:10,.0f} readings/CPU-s  ({meter.wall:.1f} s, {meter.cpu:.1f} CPU-s)", flush=True)
            shutil.rmtree(work / f"{name}-{i}", ignore_errors=True)
    best = {name: max(rates) for name, rates in wall.items()}
    mean = {name: sum(rates) / len(rates) for name, rates in cpu.items()}
    width = max(len(what) for what in labels.values())
    for name, what in labels.items():
        print(f"{name:9s} {what:{width}s} {best[name]:10,.0f} readings/s (best)  {mean[name]:10,.0f} readings/CPU-s (mean)")
    print(f"ratio {'wall-clock':15s} {best['lakeflow'] / best['baseline']:.2f}×")
    ratio = mean["lakeflow"] / mean["baseline"]
    print(f"ratio {'per CPU second':15s} {ratio:.2f}×  (target ≥ {target:.2f}×: {'met' if ratio >= target else 'NOT met'})")


def flink_version() -> str:
    import pyflink.version

    return pyflink.version.__version__


def commit() -> str:
    """The checkout's commit (and whether it has changes): which code the figures are of."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "lakeflow", "jobs", "java"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + (" + changes" if dirty else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000,
                        help="readings per run (at ~400k/s, fewer measure the jobs' start-up more than their sinks)")
    parser.add_argument("--sensors", type=int, default=100)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--interval-ms", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--schema", type=Path, help="a declared schema (TABLE_SCHEMA) instead of the default")
    parser.add_argument("--skip-make-run", action="store_true")
    parser.add_argument("--make-run-repeats", type=int, default=3, help="runs of make run per interval (the median)")
    args = parser.parse_args()
    print(describe(), flush=True)  # what the figures below ran on

    work = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    os.environ.setdefault("FLINK_LOG_DIR", str(work / "log"))
    try:
        print(f"throughput: {args.records:,} readings of {args.schema or 'the default schema'}, {args.sensors} sensors, "
              f"parallelism {args.parallelism}, {args.interval_ms} ms checkpoints, {os.cpu_count()} cores, Flink "
              f"{flink_version()}, lakeflow at {commit()}", flush=True)
        runs = {"baseline": baseline_job, "lakeflow": lakeflow_job}
        for name, run in runs.items():  # warm-up: JIT and first-MiniCluster costs out of the figures
            run(work / f"warmup-{name}", min(args.records, 200_000), args.sensors, args.parallelism, args.interval_ms,
                args.schema)
            shutil.rmtree(work / f"warmup-{name}", ignore_errors=True)
        compare(
            {name: (lambda home, run=run: run(home, args.records, args.sensors, args.parallelism, args.interval_ms,
                                              args.schema))
             for name, run in runs.items()},
            args.records, args.rounds, work,
            {"baseline": "Flink datagen → SQL → filesystem sink, json",
             "lakeflow": "SensorRecords → JSON-array FileSink"},
            target=1.5,
        )

        if not args.skip_make_run:
            subprocess.run([sys.executable, "-m", "lakeflow.cli", "flink-cds"], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL)  # as make run builds it
            for interval_ms, batch in ((15_000, 10), (1_000, 10)):
                timings = [time_make_run(work / f"make-run-{interval_ms}-{i}", interval_ms, batch)
                           for i in range(args.make_run_repeats)]
                first, total = (statistics.median(column) for column in zip(*timings, strict=True))
                samples = ", ".join(f"{one:.1f}" for one, _ in timings)
                verdict = f" (target ≤ 5 s: {'met' if first <= 5 else 'NOT met'})" if interval_ms == 1_000 else ""
                print(f"make run  BATCH_INTERVAL_MS={interval_ms}: first committed file after {first:.1f} s{verdict} "
                      f"(median of runs {samples} s), ended after {total:.1f} s", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
